//! `ctrlkit new`: the project it makes has every part, its names checked first, and its
//! manifests apply with kubectl to a fresh embedded API server (then pass a server dry run). Building and testing the made project is a step of `scripts/test` (a cargo build
//! of its own cannot run inside this one).

use std::path::{Path, PathBuf};
use std::process::Command;

use ctrlkit::apiserver::{ApiServer, ApiServerConfig};

fn new_project(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ctrlkit"))
        .arg("new")
        .args(args)
        .output()
        .expect("the ctrlkit binary runs")
}

/// `kubectl.1.33` on PATH or beside the `kubectl` on PATH (the Google Cloud SDK ships it).
fn kubectl() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let candidates = [
            Some(dir.join("kubectl.1.33")),
            std::fs::canonicalize(dir.join("kubectl"))
                .ok()
                .and_then(|real| real.parent().map(|parent| parent.join("kubectl.1.33"))),
        ];
        if let Some(found) = candidates.into_iter().flatten().find(|path| path.is_file()) {
            return found;
        }
    }
    panic!("kubectl.1.33 is needed by this test: install the Google Cloud SDK's kubectl component");
}

#[test]
fn bad_names_are_refused_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["Bad_Name"],
        vec!["good", "--kind", "lowercase"],
        vec!["good", "--group", "nodot"],
        vec!["good", "--namespace", "Bad_NS"],
        vec!["good", "--ctrlkit-version", "notaversion"],
    ] {
        let mut all: Vec<&str> = args.clone();
        let target = dir.path().join("x");
        let target = target.to_str().unwrap();
        all.extend(["--dir", target]);
        let output = new_project(&all);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.lines().count() == 1,
            "{stderr}"
        );
        assert!(!Path::new(target).exists());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_project_has_every_part_and_kubectl_accepts_its_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("shop-operator");
    let output = new_project(&[
        "shop-operator",
        "--dir",
        project.to_str().unwrap(),
        "--kind",
        "Order",
        "--group",
        "shop.example.io",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for file in [
        "Cargo.toml",
        "Cargo.lock",
        "README.md",
        "Dockerfile",
        "src/lib.rs",
        "src/resource.rs",
        "src/reconciler.rs",
        "src/main.rs",
        "src/manager.rs",
        "src/bin/crdgen.rs",
        "tests/reconcile.rs",
        "tests/manifests.rs",
        "manifests/crd.yaml",
        "manifests/00-namespace.yaml",
        "manifests/rbac.yaml",
        "manifests/deployment.yaml",
    ] {
        assert!(project.join(file).is_file(), "{file} missing");
    }
    let resource = std::fs::read_to_string(project.join("src/resource.rs")).unwrap();
    assert!(
        resource.contains("pub struct OrderSpec")
            && resource.contains(r#"group = "shop.example.io""#)
    );
    let cargo = std::fs::read_to_string(project.join("Cargo.toml")).unwrap();
    assert!(cargo.contains("ctrlkit = { path = "), "{cargo}");
    // Made again into the same place: refused, nothing overwritten.
    let again = new_project(&["shop-operator", "--dir", project.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));

    // The README's `kubectl apply -f manifests/` works on a cluster that has none of it (the
    // embedded API server), and a server dry run of the same accepts every object.
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
            server.url()
        ),
    )
    .unwrap();
    let apply = |dry_run: bool| {
        let mut command = tokio::process::Command::new(kubectl());
        command.arg("--kubeconfig").arg(&kubeconfig).arg("apply");
        if dry_run {
            command.arg("--dry-run=server");
        }
        command.arg("-f").arg(project.join("manifests"));
        command.output()
    };
    let objects = [
        "namespace/shop-operator",
        "customresourcedefinition.apiextensions.k8s.io/orders.shop.example.io",
        "serviceaccount/shop-operator",
        "clusterrole.rbac.authorization.k8s.io/shop-operator",
        "clusterrolebinding.rbac.authorization.k8s.io/shop-operator",
        "deployment.apps/shop-operator",
    ];
    let applied = apply(false).await.unwrap();
    let stdout = String::from_utf8_lossy(&applied.stdout);
    let stderr = String::from_utf8_lossy(&applied.stderr);
    assert!(
        applied.status.success(),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    for object in objects {
        assert!(
            stdout.contains(&format!("{object} created")),
            "{object} not in {stdout}"
        );
    }
    let dry_run = apply(true).await.unwrap();
    let stdout = String::from_utf8_lossy(&dry_run.stdout);
    let stderr = String::from_utf8_lossy(&dry_run.stderr);
    assert!(
        dry_run.status.success(),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    for object in objects {
        assert!(
            stdout
                .lines()
                .any(|line| line.starts_with(object) && line.ends_with("(server dry run)")),
            "{object} not in {stdout}"
        );
    }
    server.shutdown().await;
}
