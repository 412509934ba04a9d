//! `ctrlkit demo` end to end: the main job runs on the embedded API server, kills its leader,
//! and exits 0 only when every Deployment matches its Foo.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

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
fn bad_flags_get_one_line_and_exit_code_2_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&not_a_kubeconfig, "clusters: [unclosed\n  - {\n").unwrap();
    for (args, says) in [
        (
            vec!["--kubeconfig", "/nonexistent/kubeconfig"],
            "error: --kubeconfig /nonexistent/kubeconfig: no such file",
        ),
        (
            vec!["--replicas", "1"],
            "error: --replicas must be at least 2, not 1",
        ),
        (
            vec!["--replicas", "0"],
            "error: --replicas must be at least 2, not 0",
        ),
        (vec!["--foos", "0"], "error: --foos must be at least 1"),
        (
            vec!["--workers", "0"],
            "error: --workers must be at least 1",
        ),
        (
            vec!["--namespace", "Bad_NS"],
            "error: --namespace \"Bad_NS\" is not a namespace name",
        ),
        (
            vec!["--kubeconfig", "/tmp"],
            "error: --kubeconfig /tmp: a directory, not a file",
        ),
        (
            vec!["--kubeconfig", not_a_kubeconfig.to_str().unwrap()],
            "error: --kubeconfig ",
        ),
    ] {
        let started = std::time::Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_ctrlkit"))
            .arg("demo")
            .args(&args)
            .output()
            .expect("the ctrlkit binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with(says), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?} did work");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{args:?} did work"
        );
    }
}

/// A `ctrlkit apiserver` process standing in for a cluster, killed on drop.
struct Cluster {
    child: Child,
    /// Holds the kubeconfig; removed on drop.
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Cluster {
    fn start() -> Self {
        Self::start_with(&[])
    }

    /// A cluster started with these `ctrlkit apiserver` flags too.
    fn start_with(flags: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let child = Command::new(env!("CARGO_BIN_EXE_ctrlkit"))
            .arg("apiserver")
            .args(flags)
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the ctrlkit binary runs");
        let end = std::time::Instant::now() + Duration::from_secs(30);
        while std::fs::metadata(&kubeconfig).map_or(true, |file| file.len() == 0) {
            assert!(
                std::time::Instant::now() < end,
                "no kubeconfig from ctrlkit apiserver"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child,
            _dir: dir,
            kubeconfig,
        }
    }

    async fn client(&self) -> kube::Client {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// Posts to the admin endpoint's `action` (`fail?…`, `clear`).
    async fn admin(&self, action: &str) {
        let request = http::Request::post(format!("/admin/faults/{action}"))
            .body(Vec::new())
            .unwrap();
        self.client().await.request_text(request).await.unwrap();
    }

    /// Faults the next requests as the admin endpoint's `fail` does (`query` after `fail?`).
    async fn fault(&self, query: &str) {
        self.admin(&format!("fail?{query}")).await;
    }

    async fn clear_faults(&self) {
        self.admin("clear").await;
    }

    /// What a demo left behind: its namespaces, and whether the Foo CRD is there.
    async fn left_over(&self) -> (Vec<String>, bool) {
        let client = self.client().await;
        let namespaces: Vec<String> = Api::<Namespace>::all(client.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|namespace| namespace.name_any())
            .filter(|name| name.starts_with("ctrlkit-demo"))
            .collect();
        let crd = Api::<CustomResourceDefinition>::all(client)
            .get_opt("foos.samplecontroller.k8s.io")
            .await
            .unwrap()
            .is_some();
        (namespaces, crd)
    }

    fn demo(&self, extra: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ctrlkit"));
        command
            .args(["demo", "--kubeconfig"])
            .arg(&self.kubeconfig)
            .args(extra);
        command
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_demo_asks_for_yes_runs_twice_and_leaves_nothing_behind() {
    let cluster = Cluster::start();
    let refused = cluster.demo(&[]).output().unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    let stdout = String::from_utf8_lossy(&refused.stdout);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stdout.starts_with("about to write to the cluster at http://127.0.0.1:"),
        "{stdout}"
    );
    assert!(stderr.contains("run it again with --yes"), "{stderr}");
    assert_eq!(cluster.left_over().await, (Vec::new(), false));

    for run in 0..2 {
        let output = cluster.demo(&["--yes", "--foos", "20"]).output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "run {run}\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        assert!(
            stdout.contains("every Deployment matches its Foo"),
            "{stdout}"
        );
        assert!(
            stdout.contains("cleaned up: namespace ctrlkit-demo-"),
            "{stdout}"
        );
        assert!(!stderr.contains("ERROR"), "{stderr}");
        assert_eq!(
            cluster.left_over().await,
            (Vec::new(), false),
            "after run {run}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_midway_cleans_up() {
    let cluster = Cluster::start();
    let mut child = cluster
        .demo(&["--yes", "--foos", "200"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The replicas are running and the Foos are being made.
    for line in lines.by_ref() {
        if line.unwrap().contains("sample-controller replicas") {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    let stderr = stderr.join().unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(!stderr.contains("ERROR"), "{stderr}");
    assert!(
        rest.iter().any(|line| line == "interrupted: cleaning up"),
        "{rest:?}\nstderr:\n{stderr}"
    );
    assert!(
        rest.iter()
            .any(|line| line.starts_with("cleaned up: namespace ctrlkit-demo-")),
        "{rest:?}\nstderr:\n{stderr}"
    );
    assert_eq!(cluster.left_over().await, (Vec::new(), false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_demo_says_why_in_one_line_and_cleans_up() {
    let cluster = Cluster::start_with(&["--admin"]);

    // Refused before anything was made: one line in the server's words, nothing to clean up.
    cluster
        .fault("count=1000&verb=create&resource=customresourcedefinitions&status=500")
        .await;
    let output = cluster.demo(&["--yes", "--foos", "10"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: setting up: installing the Foo CRD: the API server: "),
        "{stderr}"
    );
    assert!(!stdout.contains("cleaned up"), "{stdout}");
    assert_eq!(cluster.left_over().await, (Vec::new(), false));

    // Refused midway: what was made goes.
    cluster.clear_faults().await;
    cluster
        .fault("count=100000&verb=create&resource=foos&status=500")
        .await;
    let output = cluster.demo(&["--yes", "--foos", "10"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(!stderr.contains("ERROR"), "{stderr}");
    assert!(
        stdout.lines().any(
            |line| line.starts_with("cleaned up: namespace ctrlkit-demo-")
                && line.ends_with(", the Foo CRD")
        ),
        "{stdout}"
    );
    cluster.clear_faults().await;
    assert_eq!(cluster.left_over().await, (Vec::new(), false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foo_crd_that_was_there_before_is_left_there() {
    use kube::api::PostParams;
    let cluster = Cluster::start();
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client().await);
    crds.create(
        &PostParams::default(),
        &ctrlkit::sample_controller::foo_crd(),
    )
    .await
    .unwrap();
    let output = cluster.demo(&["--yes", "--foos", "10"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let cleaned = stdout
        .lines()
        .find(|line| line.starts_with("cleaned up: "))
        .unwrap_or_default();
    assert!(
        cleaned.starts_with("cleaned up: namespace ctrlkit-demo-") && !cleaned.contains("CRD"),
        "{stdout}"
    );
    assert_eq!(cluster.left_over().await, (Vec::new(), true));
}
