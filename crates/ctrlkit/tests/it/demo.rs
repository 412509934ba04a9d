//! `ctrlkit demo` end to end: the main job runs on the embedded API server, kills its leader,
//! and exits 0 only when every Deployment matches its Foo.

use std::process::Command;

#[test]
fn the_demo_fails_over_and_every_deployment_matches_its_foo() {
    let output = Command::new(env!("CARGO_BIN_EXE_ctrlkit"))
        .args(["demo", "--foos", "40", "--replicas", "3", "--workers", "2"])
        .env_remove("KUBECONFIG")
        .output()
        .expect("the ctrlkit binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // Not a terminal: plain progress lines, then the summary.
    assert!(stdout.contains("killing the leader, replica-"), "{stdout}");
    assert!(stdout.contains("took over"), "{stdout}");
    assert!(stdout.contains("Foos reconciled          40"), "{stdout}");
    // A quarter of the Foos were deleted: 30 remain, all matching, none left over.
    assert!(
        stdout.contains("Deployments matching     30/30, left over from deleted Foos 0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("every Deployment matches its Foo"),
        "{stdout}"
    );
}

#[test]
fn a_kubeconfig_that_does_not_exist_is_a_clear_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_ctrlkit"))
        .args(["demo", "--kubeconfig", "/nonexistent/kubeconfig"])
        .output()
        .expect("the ctrlkit binary runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("error: setting up:"), "{stderr}");
}
