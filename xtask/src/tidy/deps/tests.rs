//! The dependency rules on synthetic trees: each row plants one shape of
//! imports and expects the finding keys (or none).

use super::*;

const NONE: Layers = Layers {
    deciding: &[],
    io: &[],
};

fn tree(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect()
}

fn keys(files: &[(&str, &str)], layers: &Layers) -> Vec<String> {
    check("c/src", &tree(files), layers)
        .into_iter()
        .map(|f| f.key)
        .collect()
}

#[test]
fn modules_are_where_their_paths_put_them() {
    let m = |p: &str| module_of(p).map(|m| m.join("::"));
    assert_eq!(m("lib.rs").as_deref(), Some(""));
    assert_eq!(m("main.rs").as_deref(), Some(""));
    assert_eq!(m("a.rs").as_deref(), Some("a"));
    assert_eq!(m("a/mod.rs").as_deref(), Some("a"));
    assert_eq!(m("a/b.rs").as_deref(), Some("a::b"));
    assert_eq!(m("bin/tool.rs"), None);
    assert!(is_test_file("a/tests.rs") && is_test_file("a/tests/x.rs"));
    assert!(!is_test_file("a/testsuite.rs"));
}

#[test]
fn a_two_module_cycle_is_found_with_an_example_per_edge() {
    let files = [
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "//! a\nuse crate::b::Thing;\n"),
        ("b.rs", "//! b\n\nfn f() { crate::a::g(); }\n"),
    ];
    let found = check("c/src", &tree(&files), &NONE);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key, "cycle: a, b");
    let message = &found[0].message;
    assert!(message.contains("a -> b: c/src/a.rs:2"), "{message}");
    assert!(message.contains("b -> a: c/src/b.rs:3"), "{message}");
    assert!(message.contains("fix: move the shared item"), "{message}");
}

#[test]
fn a_three_module_cycle_is_found_and_a_chain_is_not() {
    let cycle = [
        ("lib.rs", ""),
        ("a.rs", "use crate::b::X;"),
        ("b.rs", "use crate::c::Y;"),
        ("c.rs", "use crate::a::Z;"),
        ("d.rs", "use crate::a::Z;"),
    ];
    assert_eq!(keys(&cycle, &NONE), ["cycle: a, b, c"]);
    let chain = [
        ("lib.rs", ""),
        ("a.rs", "use crate::b::X;"),
        ("b.rs", "use crate::c::Y;"),
        ("c.rs", ""),
    ];
    assert!(keys(&chain, &NONE).is_empty());
}

#[test]
fn a_cycle_between_nested_siblings_names_them_and_their_subtrees_count() {
    let files = [
        ("lib.rs", ""),
        ("lab/mod.rs", "mod cluster; mod frr;"),
        ("lab/cluster.rs", "use super::frr::Router;"),
        ("lab/frr.rs", "mod conf;"),
        (
            "lab/frr/conf.rs",
            "fn f() { super::super::cluster::lab_dir(); }",
        ),
    ];
    assert_eq!(keys(&files, &NONE), ["cycle: lab::cluster, lab::frr"]);
}

#[test]
fn parent_and_child_referring_to_each_other_is_not_a_cycle() {
    let files = [
        ("lib.rs", "pub use a::Thing;\nfn f() { a::b::g(); }"),
        ("a/mod.rs", "pub use b::Inner;\npub struct Thing;"),
        (
            "a/b.rs",
            "use super::Thing;\nuse crate::a::Thing as T;\nuse crate::X;",
        ),
    ];
    assert!(keys(&files, &NONE).is_empty());
}

#[test]
fn use_groups_with_self_and_nesting_parse() {
    let files = [
        ("lib.rs", ""),
        ("p/mod.rs", ""),
        (
            "p/a.rs",
            "use super::{b::{self, C}, c::D as E};\nfn f() { b::x(); }",
        ),
        ("p/b.rs", "use super::a;"),
        ("p/c.rs", "pub(crate) use super::{a::*};"),
    ];
    assert_eq!(keys(&files, &NONE), ["cycle: p::a, p::b, p::c"]);
}

#[test]
fn paths_inside_strings_comments_and_tests_are_not_references() {
    let files = [
        ("lib.rs", ""),
        ("a.rs", "use crate::b::X;"),
        (
            "b.rs",
            concat!(
                "// crate::a::f()\n",
                "/* use crate::a::G; */\n",
                "const S: &str = \"crate::a::f\";\n",
                "const R: &str = r#\"use crate::a::G;\"#;\n",
                "#[cfg(test)]\nmod tests { use crate::a::G; }\n",
                "#[cfg(test)]\nmod more;\n",
            ),
        ),
        ("b/more.rs", "use crate::a::G;"),
        ("b/tests.rs", "use crate::a::G;"),
    ];
    assert!(keys(&files, &NONE).is_empty());
}

#[test]
fn super_inside_an_inline_module_starts_from_that_module() {
    let files = [
        ("lib.rs", ""),
        ("a/mod.rs", "mod x;"),
        ("a/x.rs", "pub mod inner { use super::super::y::Y; }"),
        (
            "a/y.rs",
            "pub mod inner { fn f() { super::super::x::g(); } }",
        ),
    ];
    assert_eq!(keys(&files, &NONE), ["cycle: a::x, a::y"]);
}

#[test]
fn a_module_bound_by_use_counts_where_its_name_is_used() {
    let layers = Layers {
        deciding: &["plan", "tls::policy"],
        io: &["tls", "k8s"],
    };
    let files = [
        ("lib.rs", ""),
        ("tls/mod.rs", "pub mod policy;"),
        ("tls/policy.rs", ""),
        ("k8s/mod.rs", "pub mod events;"),
        ("k8s/events.rs", ""),
        (
            "plan.rs",
            "use crate::tls;\nuse crate::k8s::events;\n\nfn f() {\n tls::policy::x();\n events::Spec::new();\n}",
        ),
    ];
    let found = check("c/src", &tree(&files), &layers);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].key, "deciding: plan -> k8s::events");
    assert!(
        found[0]
            .message
            .starts_with("c/src/plan.rs:6: deciding module `plan` uses I/O module `k8s::events`")
    );
}

#[test]
fn the_most_specific_layer_wins() {
    let layers = Layers {
        deciding: &["config", "speaker::liveness"],
        io: &["config::load", "speaker::presence"],
    };
    let files = [
        ("lib.rs", ""),
        ("config/mod.rs", "mod load;\nfn f() { load::read(); }"),
        ("config/load.rs", "use super::Config;"),
        ("speaker/mod.rs", ""),
        ("speaker/liveness.rs", "use super::presence::{self, Mark};"),
        ("speaker/presence.rs", ""),
    ];
    assert_eq!(
        keys(&files, &layers),
        [
            "deciding: config -> config::load",
            "deciding: speaker::liveness -> speaker::presence"
        ]
    );
}
