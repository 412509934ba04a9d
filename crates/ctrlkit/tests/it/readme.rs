//! Every Rust listing in the README is compiled: the whole-controller one is
//! `examples/foo_controller.rs`, the others are regions of `readme_snippets.rs`. The README
//! and the compiled code must not drift apart.

use std::path::Path;

#[test]
fn the_readme_controller_is_the_compiled_example() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/foo_controller.rs")).unwrap();
    let marker = "<!-- examples/foo_controller.rs -->\n```rust\n";
    let start = readme.find(marker).expect("the README marks the listing") + marker.len();
    let length = readme[start..].find("```\n").expect("the listing ends");
    assert!(
        readme[start..start + length] == example,
        "README.md's listing differs from examples/foo_controller.rs: copy the file into it"
    );
}

/// The region `// README: name` … `// README end` of readme_snippets.rs, without its indent.
fn region(source: &str, name: &str) -> String {
    let start_marker = format!("// README: {name}\n");
    let start = source
        .find(&start_marker)
        .unwrap_or_else(|| panic!("no region {name}"));
    let indent = source[..start]
        .rsplit('\n')
        .next()
        .unwrap_or_default()
        .len();
    let body_start = start + start_marker.len();
    let end = source[body_start..]
        .find("// README end")
        .expect("the region ends")
        + body_start;
    let body = &source[body_start..end];
    body.lines()
        .map(|line| line.get(indent..).unwrap_or("").trim_end())
        .collect::<Vec<_>>()
        .join("\n")
        .trim_end()
        .to_owned()
        + "\n"
}

#[test]
fn every_other_readme_listing_is_a_compiled_region() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let snippets = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/readme_snippets.rs"),
    )
    .unwrap();
    let mut rest = readme.as_str();
    let mut checked = 0;
    while let Some(at) = rest.find("```rust\n") {
        let before = &rest[..at];
        let listing_start = at + "```rust\n".len();
        let length = rest[listing_start..]
            .find("```\n")
            .expect("the listing ends");
        let listing = &rest[listing_start..listing_start + length];
        let marker = before.trim_end().rsplit('\n').next().unwrap_or_default();
        if marker != "<!-- examples/foo_controller.rs -->" {
            let name = marker
                .strip_prefix("<!-- readme_snippets: ")
                .and_then(|name| name.strip_suffix(" -->"))
                .unwrap_or_else(|| panic!("a README listing without a marker:\n{listing}"));
            assert_eq!(
                listing,
                region(&snippets, name),
                "README.md's listing {name} differs from its region in readme_snippets.rs"
            );
            checked += 1;
        }
        rest = &rest[listing_start + length..];
    }
    assert_eq!(
        checked, 5,
        "the README's listings besides the whole controller"
    );
}
