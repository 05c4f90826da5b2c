//! Size rules for every crate: a file over 700 lines, and a function over
//! 100 lines (from its `fn` line to its closing brace), are hard to read
//! whole. Pure: text in, findings out.
//!
//! Test code is exempt from the function rule (`#[cfg(test)]` items and
//! `tests.rs` / `tests/` files: a table of cases reads top to bottom), and
//! so is a function that is mostly a data table: at least 80% of the lines
//! of its body that hold more than brackets are rows, lines with no
//! statement (`;`, `let`, `=`, control flow) that hold a literal (a
//! string, char or number) or one value alone (`true,`, `handler,`). A
//! `vec![...]` of rows, a `json!` manifest or a `match` from literal keys
//! to columns qualifies; a long function of steps does not.

use super::deps::{Finding, is_test_file};
use super::lex::{self, Kind, Token};

/// The longest file, in lines.
pub const MAX_FILE_LINES: usize = 700;
/// The longest function, in lines, from `fn` to its closing brace.
pub const MAX_FN_LINES: usize = 100;

/// `path` (as findings show it) when `text` is over 700 lines.
pub fn long_file(path: &str, text: &str) -> Option<Finding> {
    let lines = text.lines().count();
    (lines > MAX_FILE_LINES).then(|| Finding {
        key: format!("file: {path}"),
        message: format!(
            "{path}: {lines} lines (over {MAX_FILE_LINES}): split it along a seam, e.g. decide/do or one module per concern"
        ),
    })
}

/// The non-test functions of a file over 100 lines that are not data
/// tables. `path` is how findings show the file; a test file has none.
pub fn long_functions(path: &str, text: &str) -> Vec<Finding> {
    if is_test_file(path) {
        return Vec::new();
    }
    let tokens = lex::tokens(text);
    let spans = lex::test_spans(&tokens);
    let code = lex::strip(text);
    let code_lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let Some(name) = tokens.get(i + 1).filter(|n| n.kind == Kind::Ident) else {
            continue;
        };
        if !t.is("fn") || spans.iter().any(|&(from, to)| from <= i && i < to) {
            continue;
        }
        let Some(open) = body_start(&tokens, i + 2) else {
            continue;
        };
        let close = lex::closing(&tokens, open);
        let lines = tokens[close].line - t.line + 1;
        let body = code_lines
            .get(tokens[open].line..tokens[close].line.saturating_sub(1))
            .unwrap_or_default();
        if lines > MAX_FN_LINES && !is_data_table(body) {
            out.push(Finding {
                key: format!("fn: {path}: {}", name.text),
                message: format!(
                    "{path}:{}: fn {} is {lines} lines (over {MAX_FN_LINES}): split it into steps with names, or move its data into a table",
                    t.line, name.text
                ),
            });
        }
    }
    out
}

/// The `{` opening the body of the function whose signature starts at
/// `from`, or `None` for a declaration without a body.
fn body_start(tokens: &[Token], from: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(from) {
        if t.is("(") || t.is("[") {
            depth += 1;
        } else if t.is(")") || t.is("]") {
            depth = depth.saturating_sub(1);
        } else if depth == 0 && t.is("{") {
            return Some(i);
        } else if depth == 0 && t.is(";") {
            return None;
        }
    }
    None
}

/// Whether the lines of a body (comments and strings' insides gone) are
/// mostly rows of data: see the module doc.
fn is_data_table(body: &[&str]) -> bool {
    let mut rows = 0;
    let mut counted = 0;
    for line in body {
        let tokens = lex::tokens(line);
        if tokens.iter().all(|t| t.kind == Kind::Punct) {
            // Blank, a comment, or only brackets.
            continue;
        }
        counted += 1;
        rows += usize::from(is_row(&tokens));
    }
    counted > 0 && rows * 5 >= counted * 4
}

/// A line of data: no statement, and a literal (`("a", 1),`, `"x": 2,`,
/// `("", "nodes") => p!(`) or a value alone (`true,`, `node`).
fn is_row(tokens: &[Token]) -> bool {
    const STATEMENTS: &[&str] = &[
        "let", "if", "else", "match", "for", "while", "loop", "return", "fn",
    ];
    let assigns = tokens
        .windows(2)
        .any(|w| w[0].is("=") && !w[1].is(">") && !w[1].is("="))
        || tokens.first().is_some_and(|t| t.is("="));
    let statement = assigns
        || tokens
            .iter()
            .any(|t| t.is(";") || STATEMENTS.iter().any(|s| t.is(s)));
    let literal = tokens.iter().any(|t| t.kind == Kind::Literal);
    let idents = tokens.iter().filter(|t| t.kind == Kind::Ident).count();
    !statement && (literal || idents == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(name: &str, body_lines: usize, row: &str) -> String {
        let body: String = (0..body_lines).map(|_| format!("    {row}\n")).collect();
        format!("fn {name}() -> Vec<(&'static str, u8)> {{\n    vec![\n{body}    ]\n}}\n")
    }

    #[test]
    fn a_file_over_700_lines_is_reported_and_one_of_700_is_not() {
        let text = |n: usize| "x\n".repeat(n);
        assert!(long_file("a.rs", &text(700)).is_none());
        let found = long_file("a.rs", &text(701)).expect("701 lines");
        assert_eq!(found.key, "file: a.rs");
        assert!(found.message.starts_with("a.rs: 701 lines"));
    }

    #[test]
    fn a_function_over_100_lines_is_reported_and_one_of_100_is_not() {
        // Four lines of frame around the body's rows.
        let code_row = "push(x);";
        assert!(long_functions("a.rs", &function("ok", 96, code_row)).is_empty());
        let found = long_functions("a.rs", &format!("\n{}", function("long", 97, code_row)));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].key, "fn: a.rs: long");
        assert!(found[0].message.starts_with("a.rs:2: fn long is 101 lines"));
    }

    #[test]
    fn a_data_table_test_code_and_declarations_are_exempt() {
        let table = function("rows", 200, "(\"name\", 1),");
        assert!(long_functions("a.rs", &table).is_empty());
        let mostly = format!("{}\n{}", function("t", 150, "(\"a\", 2),"), "fn g();");
        assert!(long_functions("a.rs", &mostly).is_empty());
        let long = function("t", 200, "f(x);");
        assert!(long_functions("a/tests.rs", &long).is_empty());
        let in_test = format!("#[cfg(test)]\nmod tests {{\n{long}}}\n");
        assert!(long_functions("a.rs", &in_test).is_empty());
        let statements = function("s", 200, "let x = (\"a\", 1);");
        assert_eq!(long_functions("a.rs", &statements).len(), 1);
    }
}
