//! The README's `cargo xtask` command table against the clap definitions
//! in `flags.rs`: every subcommand, nested subcommand, benchmark and flag
//! is in the table's command column, and everything that column names
//! exists. The table is prose around the syntax, so it is checked rather
//! than generated.

use crate::flags::Flags;
use clap::CommandFactory;
use std::collections::{BTreeMap, BTreeSet};

/// What one subcommand takes, by the name it is called with.
#[derive(Debug, Default, PartialEq, Eq)]
struct Syntax {
    /// Its `--flags`.
    flags: BTreeSet<String>,
    /// Words that select something: nested subcommands (`lab curl`) and
    /// the values of a positional argument (`bench arp`).
    words: BTreeSet<String>,
    /// Whether it passes other flags on to a program of its own
    /// (`sim`), so the table may name flags clap does not know.
    passes_flags_on: bool,
}

/// Every subcommand of `cargo xtask` as clap defines it.
fn from_clap() -> BTreeMap<String, Syntax> {
    let mut out = BTreeMap::new();
    for sub in Flags::command().get_subcommands() {
        let mut syntax = Syntax::default();
        for arg in sub.get_arguments() {
            if let Some(long) = arg.get_long()
                && long != "help"
                && long != "version"
            {
                syntax.flags.insert(format!("--{long}"));
            }
            if arg.is_positional() {
                syntax.passes_flags_on |= arg.is_allow_hyphen_values_set();
                let values = arg.get_possible_values();
                syntax
                    .words
                    .extend(values.iter().map(|v| v.get_name().to_owned()));
            }
        }
        for nested in sub.get_subcommands() {
            syntax.words.insert(nested.get_name().to_owned());
        }
        out.insert(sub.get_name().to_owned(), syntax);
    }
    out
}

/// The code spans of the command column of every table row that starts
/// with `cargo xtask`, each without that prefix (`lab [--name N] curl URL`).
fn command_spans(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in readme.lines() {
        let Some(row) = line.strip_prefix("| `cargo xtask ") else {
            continue;
        };
        // The command column ends at the first unescaped ` | `.
        let cell = row.replace("\\|", "\u{1}");
        let cell = cell.split(" | ").next().unwrap_or_default();
        let cell = format!("`cargo xtask {cell}");
        for (i, span) in cell.split('`').enumerate() {
            if i % 2 == 1 {
                let span = span.replace('\u{1}', "|");
                out.push(span.trim_start_matches("cargo xtask ").to_owned());
            }
        }
    }
    out
}

/// What the table says each subcommand takes: its flags, and every other
/// word of its spans (placeholders and values included).
fn from_readme(readme: &str) -> BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> {
    let mut out: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for span in command_spans(readme) {
        let mut tokens = span
            .split(|c: char| c.is_whitespace() || c == '|')
            .map(|t| t.trim_matches(|c| c == '[' || c == ']'))
            .filter(|t| !t.is_empty() && *t != "--");
        let Some(sub) = tokens.next() else { continue };
        let (flags, words) = out.entry(sub.to_owned()).or_default();
        for token in tokens {
            if token.starts_with("--") {
                flags.insert(token.to_owned());
            } else {
                words.insert(token.to_owned());
            }
        }
    }
    out
}

/// Every difference between the table and clap, one line each.
fn differences(readme: &str) -> Vec<String> {
    let table = from_readme(readme);
    let clap = from_clap();
    let mut out = Vec::new();
    for (sub, syntax) in &clap {
        let Some((flags, words)) = table.get(sub) else {
            out.push(format!("`cargo xtask {sub}` has no row"));
            continue;
        };
        for missing in syntax.flags.difference(flags) {
            out.push(format!(
                "`cargo xtask {sub}`: {missing} is not in the table"
            ));
        }
        for missing in syntax.words.difference(words) {
            out.push(format!("`cargo xtask {sub} {missing}` is not in the table"));
        }
        if !syntax.passes_flags_on {
            for unknown in flags.difference(&syntax.flags) {
                out.push(format!(
                    "`cargo xtask {sub}`: the table names {unknown}, which flags.rs lacks"
                ));
            }
        }
    }
    for sub in table.keys().filter(|s| !clap.contains_key(*s)) {
        out.push(format!(
            "the table names `cargo xtask {sub}`, which flags.rs lacks"
        ));
    }
    out
}

#[test]
fn the_readme_command_table_matches_flags_rs() {
    let readme = super::read(&super::root().join("README.md"));
    let found = differences(&readme);
    assert!(
        found.is_empty(),
        "README.md's command table and xtask/src/flags.rs disagree: change the one that is wrong\n{}",
        found.join("\n")
    );
}

#[test]
fn a_flag_or_subcommand_on_one_side_only_is_found() {
    let readme = super::read(&super::root().join("README.md"));
    assert!(
        differences(&readme.replace("[--no-e2e]", ""))
            .contains(&"`cargo xtask test`: --no-e2e is not in the table".to_owned())
    );
    assert!(
        differences(&readme.replace("[--no-e2e]", "[--no-e2e] [--fast]")).contains(
            &"`cargo xtask test`: the table names --fast, which flags.rs lacks".to_owned()
        )
    );
    assert!(
        differences(&readme.replace("| `cargo xtask bench arp ", "| `cargo xtask bench ping "))
            .contains(&"`cargo xtask bench arp` is not in the table".to_owned())
    );
    let spans = command_spans("| `cargo xtask lab curl URL` / `lab exec -- CMD` | runs \\| x |");
    assert_eq!(spans, ["lab curl URL", "lab exec -- CMD"]);
}
