//! Module dependencies of one crate, from its source text alone: which
//! module's code names which other module, whether sibling modules import
//! each other (a cycle), and whether a deciding module names one that does
//! I/O. Pure: it gets `(path under src/, text)` pairs and returns findings,
//! each naming the file and the fix; tidy.rs reads the tree and keeps the
//! list of known offenders.
//!
//! What counts as a reference: `use` declarations (`pub use` too, with
//! `{}` groups, `self` and renames) and paths in code that start with
//! `crate::`, `super::`, `self::`, a child module's name, or a name a `use`
//! bound to a module (`use super::events; events::x()` names `events`).
//! A reference resolves to the longest module that exists: `crate::k8s::
//! events::EventSpec` names `k8s::events`. A re-export is not followed:
//! naming `speaker::Thing` names `speaker`, whichever child defines it.
//!
//! Left out on purpose: test code (`#[cfg(test)]` items, the modules they
//! declare, files named `tests.rs` or under a `tests/` directory), which
//! may reach for fixtures anywhere; `src/bin/`, whose files are crates of
//! their own that use the library by name; `#[path]` attributes (the tree
//! has none; a file's module is where its path puts it).

use super::lex::{self, Kind, Token};
use std::collections::{BTreeMap, BTreeSet};

/// One broken rule: `key` stays the same while the offender does (no line
/// numbers) so a list of known offenders can name it; `message` names the
/// file, the line and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub key: String,
    pub message: String,
}

/// A module's path from the crate root (`[]` is the root).
type Module = Vec<String>;

fn show(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// The module a file under `src/` is: `lib.rs` and `main.rs` the root,
/// `a.rs` and `a/mod.rs` `a`, `a/b.rs` `a::b`. `None` for `bin/`.
pub fn module_of(path: &str) -> Option<Vec<String>> {
    let stem = path.strip_suffix(".rs")?;
    if stem.starts_with("bin/") {
        return None;
    }
    let mut parts: Vec<String> = stem.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod")
        || (parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main"))
    {
        parts.pop();
    }
    Some(parts)
}

/// Test code by its name alone: `tests.rs` or anything under `tests/`.
pub fn is_test_file(path: &str) -> bool {
    path.split('/').any(|p| p == "tests" || p == "tests.rs")
}

/// What a crate declares about its modules: the ones that decide (take
/// plain data, return a decision) and the ones that do I/O. The most
/// specific entry wins, so `config` can decide while `config::load` reads
/// files.
pub struct Layers<'a> {
    pub deciding: &'a [&'a str],
    pub io: &'a [&'a str],
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Layer {
    Deciding,
    Io,
}

impl Layers<'_> {
    /// Whether `module` is declared deciding (by its most specific entry).
    pub fn is_deciding(&self, module: &[String]) -> bool {
        self.of(module) == Some(Layer::Deciding)
    }

    fn of(&self, module: &[String]) -> Option<Layer> {
        let joined = module.join("::");
        let covers = |decl: &str| {
            joined == decl || joined.starts_with(decl) && joined[decl.len()..].starts_with("::")
        };
        let best = |list: &[&str]| list.iter().filter(|d| covers(d)).map(|d| d.len()).max();
        match (best(self.deciding), best(self.io)) {
            (Some(d), Some(i)) if d > i => Some(Layer::Deciding),
            (Some(_), Some(_)) | (None, Some(_)) => Some(Layer::Io),
            (Some(_), None) => Some(Layer::Deciding),
            (None, None) => None,
        }
    }
}

/// One file's reference to a module, at a line.
#[derive(Clone, Debug)]
struct Ref {
    file: usize,
    line: usize,
    target: Module,
}

/// A path as written, with the module it was written in.
struct RawPath {
    line: usize,
    context: Module,
    segments: Vec<String>,
    /// For a `use` leaf: the name it binds (`None` for a glob).
    binds: Option<String>,
}

struct File {
    path: String,
    module: Module,
    test: bool,
    raw: Vec<RawPath>,
}

/// Every rule of this module over one crate's `src/`: sibling cycles and
/// deciding modules naming I/O ones. `src` is how findings show the
/// directory (`metallb-rs/src`).
pub fn check(src: &str, files: &[(String, String)], layers: &Layers) -> Vec<Finding> {
    let (files, refs) = references(files);
    let mut out = cycles(src, &files, &refs);
    out.extend(deciding_uses_io(src, &files, &refs, layers));
    out
}

/// The crate's files (sorted by path) and every reference their non-test
/// code makes to a module of the crate.
fn references(input: &[(String, String)]) -> (Vec<File>, Vec<Ref>) {
    let mut files: Vec<File> = Vec::new();
    let mut test_modules: BTreeSet<Module> = BTreeSet::new();
    let mut sorted: Vec<&(String, String)> = input.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, text) in sorted {
        let Some(module) = module_of(path) else {
            continue;
        };
        let tokens = lex::tokens(text);
        let spans = lex::test_spans(&tokens);
        for &(from, to) in &spans {
            if let Some(child) = declared_module(&tokens[from..to]) {
                let mut m = module.clone();
                m.push(child);
                test_modules.insert(m);
            }
        }
        files.push(File {
            path: path.clone(),
            test: is_test_file(path),
            raw: raw_paths(&tokens, &spans, &module),
            module,
        });
    }
    for f in &mut files {
        f.test |= test_modules.iter().any(|t| f.module.starts_with(t));
    }
    let modules: BTreeSet<Module> = files.iter().map(|f| f.module.clone()).collect();
    let mut refs = Vec::new();
    for (i, f) in files.iter().enumerate() {
        if f.test {
            continue;
        }
        for (line, target) in resolve_file(&f.raw, &modules) {
            refs.push(Ref {
                file: i,
                line,
                target,
            });
        }
    }
    (files, refs)
}

/// The child a `#[cfg(test)] mod name;` declares, if that is the item.
fn declared_module(item: &[Token]) -> Option<String> {
    let mut i = 0;
    while item.get(i).is_some_and(|t| t.is("#")) {
        i = lex::closing(item, i + 1) + 1;
    }
    if item.get(i).is_some_and(|t| t.is("pub")) {
        i += 1;
        if item.get(i).is_some_and(|t| t.is("(")) {
            i = lex::closing(item, i) + 1;
        }
    }
    let (m, name, semi) = (item.get(i)?, item.get(i + 1)?, item.get(i + 2)?);
    (m.is("mod") && name.kind == Kind::Ident && semi.is(";")).then(|| name.text.clone())
}

/// The paths a file's non-test code writes: `use` leaves and paths in
/// code that may name a module, each with the (inline) module around it.
fn raw_paths(tokens: &[Token], spans: &[(usize, usize)], module: &Module) -> Vec<RawPath> {
    let mut out = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let mut next_span = spans.iter().peekable();
    while i < tokens.len() {
        while next_span.peek().is_some_and(|s| s.1 <= i) {
            next_span.next();
        }
        if let Some(&&(from, to)) = next_span.peek()
            && from <= i
        {
            i = to;
            continue;
        }
        let t = &tokens[i];
        let context = || {
            let mut c = module.clone();
            c.extend(inline.iter().map(|(n, _)| n.clone()));
            c
        };
        if t.is("{") {
            depth += 1;
        } else if t.is("}") {
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
        } else if t.is("mod")
            && tokens.get(i + 1).is_some_and(|n| n.kind == Kind::Ident)
            && tokens.get(i + 2).is_some_and(|b| b.is("{"))
        {
            inline.push((tokens[i + 1].text.clone(), depth + 1));
            i += 2;
            continue;
        } else if t.is("use") && !tokens.get(i + 1).is_some_and(|n| n.is("<")) {
            let ctx = context();
            let mut leaves = Vec::new();
            let mut j = i + 1;
            if tokens.get(j).is_some_and(|n| n.is("::")) {
                j += 1;
            }
            let end = use_tree(tokens, j, Vec::new(), &mut leaves);
            for (segments, binds) in leaves {
                out.push(RawPath {
                    line: t.line,
                    context: ctx.clone(),
                    segments,
                    binds,
                });
            }
            i = end.max(i + 1);
            continue;
        } else if t.kind == Kind::Ident
            && tokens.get(i + 1).is_some_and(|n| n.is("::"))
            && !(i > 0 && (tokens[i - 1].is("::") || tokens[i - 1].is(".")))
            && !(i > 1 && tokens[i - 1].is("in") && tokens[i - 2].is("("))
        {
            let mut segments = vec![t.text.clone()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|c| c.is("::"))
                && tokens.get(j + 1).is_some_and(|n| n.kind == Kind::Ident)
            {
                segments.push(tokens[j + 1].text.clone());
                j += 2;
            }
            out.push(RawPath {
                line: t.line,
                context: context(),
                segments,
                binds: None,
            });
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// Parses a use tree from `i` with `prefix` written before it; pushes each
/// leaf (its path, the name it binds or `None` for a glob) and returns the
/// index after the tree.
fn use_tree(
    tokens: &[Token],
    mut i: usize,
    mut prefix: Vec<String>,
    leaves: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    loop {
        let Some(t) = tokens.get(i) else {
            return i;
        };
        if t.is("{") {
            i += 1;
            while tokens.get(i).is_some_and(|c| !c.is("}")) {
                i = use_tree(tokens, i, prefix.clone(), leaves);
                if tokens.get(i).is_some_and(|c| c.is(",")) {
                    i += 1;
                } else if !tokens.get(i).is_some_and(|c| c.is("}")) {
                    // Not a use tree after all; skip to the end.
                    return i;
                }
            }
            return i + 1;
        }
        if t.is("*") {
            leaves.push((prefix, None));
            return i + 1;
        }
        if t.kind != Kind::Ident {
            return i;
        }
        let name = if t.text == "self" && !prefix.is_empty() {
            prefix.last().cloned().unwrap_or_default()
        } else {
            prefix.push(t.text.clone());
            t.text.clone()
        };
        i += 1;
        if tokens.get(i).is_some_and(|c| c.is("::")) {
            i += 1;
            continue;
        }
        let binds = if tokens.get(i).is_some_and(|c| c.is("as")) {
            i += 1;
            let alias = tokens.get(i).map(|a| a.text.clone());
            i += 1;
            alias
        } else {
            Some(name)
        };
        leaves.push((prefix, binds));
        return i;
    }
}

/// The longest module of `modules` that `path` lies in.
fn longest(path: &[String], modules: &BTreeSet<Module>) -> Module {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| modules.contains(m))
        .unwrap_or_default()
}

/// Where a path written in `context` points, or `None` for another crate
/// (or a local name). `aliases` are the names `use` bound to modules.
fn absolute(
    raw: &RawPath,
    modules: &BTreeSet<Module>,
    aliases: &BTreeMap<String, Module>,
) -> Option<Module> {
    let segs = &raw.segments;
    let first = segs.first()?.as_str();
    let mut out;
    let rest;
    match first {
        "crate" => {
            out = Vec::new();
            rest = &segs[1..];
        }
        "self" => {
            out = raw.context.clone();
            rest = &segs[1..];
        }
        "super" => {
            out = raw.context.clone();
            let ups = segs.iter().take_while(|s| *s == "super").count();
            for _ in 0..ups {
                out.pop()?;
            }
            rest = &segs[ups..];
        }
        _ => {
            let mut child = raw.context.clone();
            child.push(first.to_string());
            if modules.contains(&child) {
                out = raw.context.clone();
                rest = &segs[..];
            } else {
                out = aliases.get(first)?.clone();
                rest = &segs[1..];
            }
        }
    }
    out.extend(rest.iter().cloned());
    Some(out)
}

/// The modules a file's paths name, each at its line. A `use` that binds
/// a module counts once through the paths that use the name, not itself,
/// so `use crate::tls; tls::policy::x()` names `tls::policy`, not `tls`.
fn resolve_file(raw: &[RawPath], modules: &BTreeSet<Module>) -> Vec<(usize, Module)> {
    let none = BTreeMap::new();
    let mut aliases = BTreeMap::new();
    for r in raw.iter().filter(|r| r.binds.is_some()) {
        if let Some(abs) = absolute(r, modules, &none)
            && modules.contains(&abs)
            && let Some(name) = &r.binds
        {
            aliases.insert(name.clone(), abs);
        }
    }
    let used: BTreeSet<&String> = raw
        .iter()
        .filter(|r| r.binds.is_none() && r.segments.len() > 1)
        .filter_map(|r| r.segments.first())
        .filter(|first| aliases.contains_key(*first))
        .collect();
    let mut out = Vec::new();
    for r in raw {
        let bound_and_used = r.binds.as_ref().is_some_and(|b| used.contains(b))
            && absolute(r, modules, &none).is_some_and(|abs| modules.contains(&abs));
        if bound_and_used {
            continue;
        }
        let Some(abs) = absolute(r, modules, &aliases) else {
            continue;
        };
        out.push((r.line, longest(&abs, modules)));
    }
    out
}

/// An edge between two siblings: the parent, the two children's names.
type Edge = (Module, String, String);

/// The sibling edges of the crate, each with its first `file:line`.
fn sibling_edges(src: &str, files: &[File], refs: &[Ref]) -> BTreeMap<Edge, String> {
    let mut edges = BTreeMap::new();
    for r in refs {
        let from = &files[r.file].module;
        let common = from
            .iter()
            .zip(&r.target)
            .take_while(|(a, b)| a == b)
            .count();
        if common == from.len() || common == r.target.len() {
            // Within one module, or between a module and its ancestor.
            continue;
        }
        let edge = (
            from[..common].to_vec(),
            from[common].clone(),
            r.target[common].clone(),
        );
        edges
            .entry(edge)
            .or_insert_with(|| format!("{src}/{}:{}", files[r.file].path, r.line));
    }
    edges
}

/// Every strongly connected set of sibling modules, as a finding with an
/// example per edge.
fn cycles(src: &str, files: &[File], refs: &[Ref]) -> Vec<Finding> {
    let edges = sibling_edges(src, files, refs);
    let mut by_parent: BTreeMap<&Module, Vec<(&String, &String)>> = BTreeMap::new();
    for (parent, a, b) in edges.keys() {
        by_parent.entry(parent).or_default().push((a, b));
    }
    let mut out = Vec::new();
    for (parent, pairs) in by_parent {
        for component in strongly_connected(&pairs) {
            let full = |name: &str| {
                let mut m = parent.clone();
                m.push(name.to_string());
                show(&m)
            };
            let names: Vec<String> = component.iter().map(|n| full(n)).collect();
            let mut lines = Vec::new();
            for (a, b) in &pairs {
                if component.contains(*a) && component.contains(*b) {
                    let at = &edges[&(parent.clone(), (*a).clone(), (*b).clone())];
                    lines.push(format!("  {} -> {}: {at}", full(a), full(b)));
                }
            }
            out.push(Finding {
                key: format!("cycle: {}", names.join(", ")),
                message: format!(
                    "{src}: import cycle between sibling modules {}:\n{}\n  fix: move the shared item into a module both can import (e.g. a lower layer), so the imports point one way",
                    names.join(", "),
                    lines.join("\n")
                ),
            });
        }
    }
    out
}

/// The strongly connected components with two or more nodes (Tarjan's
/// algorithm), each sorted, in order of their first node.
fn strongly_connected<'a>(edges: &[(&'a String, &'a String)]) -> Vec<BTreeSet<&'a String>> {
    struct Walk<'a, 'e> {
        next: BTreeMap<&'a String, Vec<&'a String>>,
        index: BTreeMap<&'a String, usize>,
        low: BTreeMap<&'a String, usize>,
        stack: Vec<&'a String>,
        on_stack: BTreeSet<&'a String>,
        out: &'e mut Vec<BTreeSet<&'a String>>,
    }
    impl<'a> Walk<'a, '_> {
        fn visit(&mut self, v: &'a String) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.next.get(v).cloned().unwrap_or_default() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.insert(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.out.push(component);
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut walk = Walk {
        next: BTreeMap::new(),
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: &mut out,
    };
    for (a, b) in edges {
        walk.next.entry(*a).or_default().push(*b);
    }
    let nodes: Vec<&String> = walk.next.keys().copied().collect();
    for v in nodes {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    out.sort();
    out
}

/// A deciding module's code naming an I/O module, once per pair.
fn deciding_uses_io(src: &str, files: &[File], refs: &[Ref], layers: &Layers) -> Vec<Finding> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for r in refs {
        let from = &files[r.file].module;
        if layers.of(from) != Some(Layer::Deciding) || layers.of(&r.target) != Some(Layer::Io) {
            continue;
        }
        let key = format!("deciding: {} -> {}", show(from), show(&r.target));
        if seen.insert(key.clone()) {
            out.push(Finding {
                message: format!(
                    "{src}/{}:{}: deciding module `{}` uses I/O module `{}`: move what it needs into a pure module both can import, or do the I/O in a run module and hand the result in",
                    files[r.file].path,
                    r.line,
                    show(from),
                    show(&r.target)
                ),
                key,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests;
