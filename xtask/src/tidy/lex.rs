//! A small Rust lexer for the tidy checks: the code of a file without
//! comments and string literals' insides, as text (`strip`) or as tokens
//! with line numbers (`tokens`), and where `#[cfg(test)]` items lie
//! (`test_spans`). Only std: the checks that use it get plain text in and
//! give plain findings out, so they are tested on synthetic trees.
//!
//! Good enough for our own source, not a Rust parser: no macros expanded,
//! `'a'` told from `'a` by the closing quote, and a number is one token.

/// What a token is; punctuation is one character, except `::`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An identifier or keyword (raw identifiers without their `r#`).
    Ident,
    /// A string, char or number literal (a number keeps its text).
    Literal,
    /// `::` or a single punctuation character.
    Punct,
}

/// One token of code, with the 1-based line it starts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    pub text: String,
    pub line: usize,
}

impl Token {
    /// Whether this token is `text` (an identifier or punctuation).
    pub fn is(&self, text: &str) -> bool {
        self.kind != Kind::Literal && self.text == text
    }
}

/// A piece of a file as the lexer sees it.
enum Piece {
    /// Kept as written (code, and the quotes around a string).
    Code,
    /// Dropped, but its line breaks are kept so line numbers still hold.
    Hidden,
}

/// Lexes `text` into tokens and the pieces `strip` keeps or hides.
fn lex(text: &str) -> (Vec<Token>, Vec<(Piece, usize, usize)>) {
    let mut lexer = Lexer {
        chars: text.chars().collect(),
        i: 0,
        line: 1,
        tokens: Vec::new(),
        pieces: Vec::new(),
    };
    while lexer.i < lexer.chars.len() {
        let (start, line) = (lexer.i, lexer.line);
        let c = lexer.chars[start];
        let done = lexer.space_or_comment(c)
            || lexer.string()
            || lexer.char_or_lifetime(c)
            || lexer.number_or_ident(c);
        if !done {
            lexer.i += if c == ':' && lexer.at(start + 1) == ':' {
                2
            } else {
                1
            };
            lexer.push(Kind::Punct, start, line);
        }
    }
    (lexer.tokens, lexer.pieces)
}

/// The lexer's state: where it is, and what it found so far.
struct Lexer {
    chars: Vec<char>,
    i: usize,
    line: usize,
    tokens: Vec<Token>,
    pieces: Vec<(Piece, usize, usize)>,
}

fn ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl Lexer {
    fn at(&self, j: usize) -> char {
        self.chars.get(j).copied().unwrap_or('\0')
    }

    /// A token from `start` to here (kept as code), its text for an
    /// identifier, punctuation or number.
    fn push(&mut self, kind: Kind, start: usize, line: usize) {
        self.pieces.push((Piece::Code, start, self.i));
        let text = match kind {
            Kind::Literal if !self.chars[start].is_ascii_digit() => String::new(),
            _ => self.chars[start..self.i].iter().collect(),
        };
        self.tokens.push(Token { kind, text, line });
    }

    /// Whitespace and comments (`//` to the line's end, nested `/* */`).
    fn space_or_comment(&mut self, c: char) -> bool {
        let start = self.i;
        if c.is_whitespace() {
            self.line += usize::from(c == '\n');
            self.i += 1;
            self.pieces.push((Piece::Code, start, self.i));
        } else if c == '/' && self.at(start + 1) == '/' {
            while self.i < self.chars.len() && self.chars[self.i] != '\n' {
                self.i += 1;
            }
            self.pieces.push((Piece::Hidden, start, self.i));
        } else if c == '/' && self.at(start + 1) == '*' {
            let mut depth = 0;
            while self.i < self.chars.len() {
                let (here, next) = (self.chars[self.i], self.at(self.i + 1));
                if here == '/' && next == '*' {
                    depth += 1;
                    self.i += 2;
                } else if here == '*' && next == '/' {
                    depth -= 1;
                    self.i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    self.line += usize::from(here == '\n');
                    self.i += 1;
                }
            }
            self.pieces.push((Piece::Hidden, start, self.i));
        } else {
            return false;
        }
        true
    }

    /// A string literal with its prefix: `""`, `b""`, `c""`, `r#""#`,
    /// `br""`, `cr""`; its insides are hidden, its quotes kept.
    fn string(&mut self) -> bool {
        let start = self.i;
        let Some(prefix) = ["br", "cr", "b", "c", "r", ""].into_iter().find(|p| {
            let n = p.len();
            let hashes = if p.ends_with('r') {
                (start + n..).take_while(|&j| self.at(j) == '#').count()
            } else {
                0
            };
            p.chars()
                .enumerate()
                .all(|(k, pc)| self.at(start + k) == pc)
                && self.at(start + n + hashes) == '"'
        }) else {
            return false;
        };
        let (raw, line) = (prefix.ends_with('r'), self.line);
        let mut j = start + prefix.len();
        let hashes = (j..).take_while(|&k| self.at(k) == '#').count();
        j += hashes + 1;
        self.pieces.push((Piece::Code, start, j));
        let inside = j;
        while j < self.chars.len() {
            let d = self.chars[j];
            if !raw && d == '\\' {
                self.line += usize::from(self.at(j + 1) == '\n');
                j += 2;
                continue;
            }
            if d == '"' && (j + 1..j + 1 + hashes).all(|k| self.at(k) == '#') {
                break;
            }
            self.line += usize::from(d == '\n');
            j += 1;
        }
        let end = j.min(self.chars.len());
        self.pieces.push((Piece::Hidden, inside, end));
        self.i = (end + 1 + hashes).min(self.chars.len());
        self.pieces.push((Piece::Code, end, self.i));
        self.tokens.push(Token {
            kind: Kind::Literal,
            text: String::new(),
            line,
        });
        true
    }

    /// A char literal (`'a'`, `'\n'`, `b'x'`) or a lifetime or label
    /// (`'a`, kept as punctuation).
    fn char_or_lifetime(&mut self, c: char) -> bool {
        let (start, line) = (self.i, self.line);
        let q = match (c, self.at(start + 1)) {
            ('\'', _) => start,
            ('b', '\'') => start + 1,
            _ => return false,
        };
        let close = if self.at(q + 1) == '\\' {
            (q + 3..self.chars.len().min(q + 12)).find(|&k| self.chars[k] == '\'')
        } else {
            (self.at(q + 2) == '\'').then_some(q + 2)
        };
        if let Some(close) = close {
            self.i = close + 1;
            self.push(Kind::Literal, start, line);
        } else if c == '\'' {
            self.i += 1;
            while self.i < self.chars.len() && ident_char(self.chars[self.i]) {
                self.i += 1;
            }
            self.push(Kind::Punct, start, line);
        } else {
            return false;
        }
        true
    }

    /// A number (one token: `0x1f`, `1.5`, `10u8`; `0..2` is three) or an
    /// identifier (`r#type` as `type`).
    fn number_or_ident(&mut self, c: char) -> bool {
        let (start, line) = (self.i, self.line);
        if c.is_ascii_digit() {
            while self.i < self.chars.len()
                && (ident_char(self.chars[self.i])
                    || (self.chars[self.i] == '.' && self.at(self.i + 1).is_ascii_digit()))
            {
                self.i += 1;
            }
            self.push(Kind::Literal, start, line);
            return true;
        }
        let raw = c == 'r' && self.at(start + 1) == '#' && ident_start(self.at(start + 2));
        if !ident_start(c) && !raw {
            return false;
        }
        if raw {
            self.i += 2;
        }
        let from = self.i;
        while self.i < self.chars.len() && ident_char(self.chars[self.i]) {
            self.i += 1;
        }
        self.pieces.push((Piece::Code, start, self.i));
        self.tokens.push(Token {
            kind: Kind::Ident,
            text: self.chars[from..self.i].iter().collect(),
            line,
        });
        true
    }
}

/// The code of a file without comments and without string literals'
/// insides (the quotes stay: `"x"` becomes `""`), line breaks kept.
pub fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let (_, pieces) = lex(text);
    let mut out = String::with_capacity(text.len());
    for (piece, from, to) in pieces {
        match piece {
            Piece::Code => out.extend(&chars[from..to]),
            Piece::Hidden => out.extend(chars[from..to].iter().filter(|c| **c == '\n')),
        }
    }
    out
}

/// The tokens of a file's code: no comments, string literals as one
/// `Literal` token each.
pub fn tokens(text: &str) -> Vec<Token> {
    lex(text).0
}

/// The token ranges (`start..end`, end exclusive) of items under
/// `#[cfg(test)]`, attribute included; `#![cfg(test)]` makes it all.
pub fn test_spans(tokens: &[Token]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let inner = tokens[i].is("#") && tokens.get(i + 1).is_some_and(|t| t.is("!"));
        let attr = if inner { i + 1 } else { i };
        let is_cfg_test = tokens[i].is("#")
            && ["[", "cfg", "(", "test", ")", "]"]
                .iter()
                .enumerate()
                .all(|(k, want)| tokens.get(attr + 1 + k).is_some_and(|t| t.is(want)));
        if !is_cfg_test {
            i += 1;
            continue;
        }
        if inner {
            spans.push((0, tokens.len()));
            break;
        }
        let end = item_end(tokens, attr + 7);
        spans.push((i, end));
        i = end;
    }
    spans
}

/// Where the item starting at `from` (after its attribute) ends: after the
/// `;` or the closing brace at its own depth, or before the bracket that
/// closes what encloses it.
fn item_end(tokens: &[Token], from: usize) -> usize {
    let mut depth = 0usize;
    let mut i = from;
    while i < tokens.len() {
        let t = &tokens[i];
        if t.is("(") || t.is("[") || t.is("{") {
            depth += 1;
        } else if t.is(")") || t.is("]") || t.is("}") {
            if depth == 0 {
                return i;
            }
            depth -= 1;
            if depth == 0 && t.is("}") {
                return i + 1;
            }
        } else if t.is(";") && depth == 0 {
            return i + 1;
        }
        i += 1;
    }
    tokens.len()
}

/// The index of the bracket closing the one at `open`, or the end.
pub fn closing(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        if t.is("(") || t.is("[") || t.is("{") {
            depth += 1;
        } else if t.is(")") || t.is("]") || t.is("}") {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return i;
            }
        }
    }
    tokens.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        tokens(text).into_iter().map(|t| t.text).collect()
    }

    #[test]
    fn strip_drops_comments_and_string_insides_but_keeps_lines() {
        let text = "let a = \"x // y\"; // c\n/* b\n c */ let b = r#\"q\"#;\nlet c = '\"';";
        assert_eq!(
            strip(text),
            "let a = \"\"; \n\n let b = r#\"\"#;\nlet c = '\"';"
        );
        assert_eq!(strip("\"a\\\"b\" x"), "\"\" x");
        assert_eq!(strip("\"one\ntwo\" z").lines().count(), 2);
    }

    #[test]
    fn tokens_tell_chars_from_lifetimes_and_paths_from_colons() {
        assert_eq!(
            words("fn f<'a>(x: &'a u8) -> crate::a::B { 'x' }"),
            [
                "fn", "f", "<", "'a", ">", "(", "x", ":", "&", "'a", "u8", ")", "-", ">", "crate",
                "::", "a", "::", "B", "{", "", "}"
            ]
        );
        assert_eq!(
            words("r#type b'x' 1.5 0..2"),
            ["type", "", "1.5", "0", ".", ".", "2"]
        );
        let lines: Vec<usize> = tokens("a\n\"b\nc\"\nd").iter().map(|t| t.line).collect();
        assert_eq!(lines, [1, 2, 4]);
    }

    #[test]
    fn test_spans_cover_the_item_after_cfg_test() {
        let toks = tokens("fn a() {}\n#[cfg(test)]\nmod tests { fn b() {} }\nfn c() {}");
        let spans = test_spans(&toks);
        assert_eq!(spans.len(), 1);
        let (from, to) = spans[0];
        assert!(toks[from].is("#") && toks[to - 1].is("}"));
        assert!(toks[to].is("fn") && toks[to + 1].is("c"));
        let decl = tokens("#[cfg(test)]\n#[path = \"x.rs\"]\nmod tests;\nfn c() {}");
        assert_eq!(test_spans(&decl), [(0, 16)]);
    }
}
