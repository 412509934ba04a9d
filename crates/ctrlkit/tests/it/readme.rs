//! The README's whole-controller listing is `examples/foo_controller.rs`, which the build
//! compiles: the two must not drift apart.

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
