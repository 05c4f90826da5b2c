//! The lab's README states the lab API server's deviations from
//! kube-apiserver; the list lives in `lab_apiserver::DEVIATIONS`, and the
//! README's copy must say the same.

/// The bullets of a list, each with its wrapped lines joined.
fn bullets(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match line.strip_prefix("- ") {
            Some(first) => out.push(first.to_owned()),
            None => {
                let last = out.last_mut().expect("the list starts with a bullet");
                last.push(' ');
                last.push_str(line);
            }
        }
    }
    out
}

#[test]
fn the_readme_lists_the_lab_api_servers_deviations() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("devenv/README.md");
    let heading = "## Where the lab API server differs from kube-apiserver\n";
    let start = readme.find(heading).expect("the deviations heading") + heading.len();
    let end = start
        + readme[start..]
            .find("\n(The same list is")
            .expect("the end of the deviations list");
    assert_eq!(
        bullets(&readme[start..end]),
        bullets(lab_apiserver::DEVIATIONS),
        "devenv/README.md's deviations differ from lab_apiserver::DEVIATIONS: copy the list"
    );
}
