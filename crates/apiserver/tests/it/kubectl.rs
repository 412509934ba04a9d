//! Real kubectl against the embedded API server: the oldest and the newest shipped with the
//! machine's Google Cloud SDK (`kubectl.1.27`, `kubectl.1.33`, found on PATH or beside the real
//! `kubectl`). A missing kubectl fails the test.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use ctrlkit_apiserver::resource::builtin_resources;
use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// `kubectl.<version>` on PATH, or beside the binary `kubectl` on PATH resolves to.
fn find_kubectl(version: &str) -> PathBuf {
    let name = format!("kubectl.{version}");
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        if dir.join(&name).is_file() {
            return dir.join(&name);
        }
        let kubectl = dir.join("kubectl");
        if let Ok(real) = std::fs::canonicalize(&kubectl)
            && let Some(beside) = real.parent().map(|parent| parent.join(&name))
            && beside.is_file()
        {
            return beside;
        }
    }
    panic!(
        "{name} is needed by this test: install the Google Cloud SDK's kubectl component (it ships {name} beside kubectl)"
    );
}

struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    async fn run(&self, args: &[&str]) -> String {
        let output = Command::new(&self.binary)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .await
            .unwrap();
        assert!(
            output.status.success(),
            "{} {args:?} failed: {}",
            self.binary.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Runs kubectl expecting it to fail; returns what it wrote to stderr.
    async fn run_failing(&self, args: &[&str]) -> String {
        let output = Command::new(&self.binary)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .await
            .unwrap();
        assert!(
            !output.status.success(),
            "{} {args:?} succeeded: {}",
            self.binary.display(),
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8(output.stderr).unwrap()
    }

    /// `kubectl create -f`, with kubectl's default validation (before 1.28 it first needs the
    /// OpenAPI v2 document in protobuf).
    async fn create(&self, file: &Path) -> String {
        self.run(&["create", "-f", file.to_str().unwrap()]).await
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A server, a scratch directory and kubectl `version` set up to use the server.
async fn session(version: &str) -> (ApiServer, PathBuf, Kubectl) {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let dir = std::env::temp_dir().join(format!("ctrlkit-kubectl-{}", server.address().port()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = write(
        &dir,
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\nusers:\n- name: t\n  user: {{}}\ncontexts:\n- name: t\n  context: {{cluster: t, user: t}}\ncurrent-context: t\n",
            server.url()
        ),
    );
    let kubectl = Kubectl {
        binary: find_kubectl(version),
        kubeconfig,
    };
    (server, dir, kubectl)
}

async fn scenario(version: &str) {
    let (server, dir, kubectl) = session(version).await;
    let kinds = builtin_resources();
    let configmaps = kinds.iter().find(|k| k.plural == "configmaps").unwrap();

    let namespace = write(
        &dir,
        "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n",
    );
    assert!(
        kubectl
            .create(&namespace)
            .await
            .contains("namespace/demo created")
    );
    let configmap = write(
        &dir,
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: demo\ndata:\n  mode: fast\n",
    );
    assert!(
        kubectl
            .create(&configmap)
            .await
            .contains("configmap/settings created")
    );

    let json: serde_json::Value = serde_json::from_str(
        &kubectl
            .run(&["get", "configmap", "settings", "-n", "demo", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(json["data"]["mode"], "fast");
    assert_eq!(json["metadata"]["namespace"], "demo");

    // get --watch prints what exists, then each change as it happens.
    let mut watch = Command::new(&kubectl.binary)
        .arg("--kubeconfig")
        .arg(&kubectl.kubeconfig)
        .args(["get", "configmaps", "-n", "demo", "--watch", "-o", "name"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    // What exists: the namespace's `kube-root-ca.crt`, as in any cluster, and ours.
    for expected in ["configmap/kube-root-ca.crt", "configmap/settings"] {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(line, expected);
    }
    server
        .store()
        .create(
            configmaps,
            "demo",
            serde_json::json!({"metadata": {"name": "later"}}),
        )
        .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(second, "configmap/later");
    watch.kill().await.unwrap();

    let patched = kubectl
        .run(&[
            "patch",
            "configmap",
            "settings",
            "-n",
            "demo",
            "--type=merge",
            "-p",
            r#"{"data":{"mode":"slow"}}"#,
        ])
        .await;
    assert!(patched.contains("configmap/settings patched"));
    let stored = server.store().get(configmaps, "demo", "settings").unwrap();
    assert_eq!(stored["data"]["mode"], "slow");

    assert!(
        kubectl
            .run(&["delete", "configmap", "settings", "-n", "demo"])
            .await
            .contains("deleted")
    );
    assert!(server.store().get(configmaps, "demo", "settings").is_err());

    // apply a CRD, then a custom resource of it.
    let crd = write(
        &dir,
        "crd.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: foos.samplecontroller.k8s.io\n  annotations: {api-approved.kubernetes.io: \"unapproved, experimental-only\"}\nspec:\n  group: samplecontroller.k8s.io\n  names: {plural: foos, singular: foo, kind: Foo}\n  scope: Namespaced\n  versions:\n  - name: v1alpha1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n",
    );
    let custom = write(
        &dir,
        "foo.yaml",
        "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata:\n  name: example\n  namespace: demo\nspec:\n  deploymentName: example\n  replicas: 1\n",
    );
    for (file, created) in [
        (
            &crd,
            "customresourcedefinition.apiextensions.k8s.io/foos.samplecontroller.k8s.io created",
        ),
        (&custom, "foo.samplecontroller.k8s.io/example created"),
    ] {
        let file = file.to_str().unwrap();
        let output = kubectl.run(&["apply", "-f", file]).await;
        assert!(output.contains(created), "{output}");
    }
    let fetched: serde_json::Value = serde_json::from_str(
        &kubectl
            .run(&["get", "foos", "example", "-n", "demo", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(fetched["spec"]["replicas"], 1);

    let lease = write(
        &dir,
        "lease.yaml",
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: leader\n  namespace: demo\nspec:\n  holderIdentity: one\n  leaseDurationSeconds: 15\n",
    );
    assert!(
        kubectl
            .create(&lease)
            .await
            .contains("lease.coordination.k8s.io/leader created")
    );
    let lease: serde_json::Value = serde_json::from_str(
        &kubectl
            .run(&["get", "lease", "leader", "-n", "demo", "-o", "json"])
            .await,
    )
    .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "one");

    // Applying a changed Deployment again: kubectl sends a strategic merge patch with
    // `$setElementOrder`, which must merge the containers by name and store no directive.
    let deployment = |image: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: demo\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: web\n        image: {image}\n        ports:\n        - containerPort: 80\n      - name: sidecar\n        image: envoy:1\n"
        )
    };
    let file = write(&dir, "deployment.yaml", &deployment("nginx:1"));
    let file = file.to_str().unwrap();
    assert!(
        kubectl
            .run(&["apply", "-f", file])
            .await
            .contains("deployment.apps/web created")
    );
    write(&dir, "deployment.yaml", &deployment("nginx:2"));
    assert!(
        kubectl
            .run(&["apply", "-f", file])
            .await
            .contains("deployment.apps/web configured")
    );
    let applied: serde_json::Value = serde_json::from_str(
        &kubectl
            .run(&["get", "deployment", "web", "-n", "demo", "-o", "json"])
            .await,
    )
    .unwrap();
    let pod_spec = &applied["spec"]["template"]["spec"];
    assert_eq!(pod_spec["containers"][0]["image"], "nginx:2", "{pod_spec}");
    assert_eq!(pod_spec["containers"][0]["ports"][0]["containerPort"], 80);
    assert_eq!(pod_spec["containers"][1]["name"], "sidecar");
    assert!(
        !pod_spec.to_string().contains('$'),
        "a patch directive was stored: {pod_spec}"
    );

    let _ = std::fs::remove_dir_all(&dir);
}

/// `kubectl apply --server-side`: create, update, a field dropped from the file removed, a
/// second manager's conflict reported as kube-apiserver words it, `--force-conflicts`, and the
/// entries `--show-managed-fields` shows.
async fn server_side_apply(version: &str) {
    let (_server, dir, kubectl) = session(version).await;
    let settings = |data: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n{data}")
    };
    let file = write(
        &dir,
        "apply.yaml",
        &settings("  mode: fast\n  level: \"3\"\n"),
    );
    let path = file.to_str().unwrap();
    let applied = kubectl.run(&["apply", "--server-side", "-f", path]).await;
    assert!(
        applied.contains("configmap/settings serverside-applied"),
        "{applied}"
    );
    let data =
        |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap()["data"].clone();
    let get = ["get", "configmap", "settings", "-o", "json"];
    assert_eq!(
        data(&kubectl.run(&get).await),
        serde_json::json!({"mode": "fast", "level": "3"})
    );

    write(&dir, "apply.yaml", &settings("  mode: slow\n"));
    kubectl.run(&["apply", "--server-side", "-f", path]).await;
    assert_eq!(
        data(&kubectl.run(&get).await),
        serde_json::json!({"mode": "slow"})
    );

    let other = write(&dir, "other.yaml", &settings("  mode: turbo\n"));
    let other = other.to_str().unwrap();
    let refused = kubectl
        .run_failing(&[
            "apply",
            "--server-side",
            "--field-manager=other",
            "-f",
            other,
        ])
        .await;
    assert!(
        refused.contains("Apply failed with 1 conflict: conflict with \"kubectl\": .data.mode"),
        "{refused}"
    );
    kubectl
        .run(&[
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "-f",
            other,
        ])
        .await;
    assert_eq!(
        data(&kubectl.run(&get).await),
        serde_json::json!({"mode": "turbo"})
    );

    let shown = kubectl
        .run(&[
            "get",
            "configmap",
            "settings",
            "-o",
            "yaml",
            "--show-managed-fields",
        ])
        .await;
    assert!(shown.contains("manager: other"), "{shown}");
    assert!(shown.contains("operation: Apply"), "{shown}");
    assert!(shown.contains("f:mode: {}"), "{shown}");

    let _ = std::fs::remove_dir_all(&dir);
}

/// kubectl's generators (`create namespace|configmap|deployment|secret|job`, which 1.32+ send
/// as protobuf), `--dry-run=server` on create, apply and delete (nothing changes), `scale`,
/// `get` with the server's columns, `get all`, and `explain` from the served OpenAPI.
async fn generators_dry_run_and_printing(version: &str) {
    let (server, dir, kubectl) = session(version).await;
    let kinds = builtin_resources();
    let kind = |plural: &str| kinds.iter().find(|k| k.plural == plural).unwrap();
    let ns = "gen";
    for (args, said) in [
        (&["create", "namespace", ns][..], "namespace/gen created"),
        (
            &[
                "create",
                "configmap",
                "settings",
                "-n",
                ns,
                "--from-literal=mode=fast",
            ],
            "configmap/settings created",
        ),
        (
            &[
                "create",
                "deployment",
                "web",
                "-n",
                ns,
                "--image=nginx",
                "--replicas=2",
            ],
            "deployment.apps/web created",
        ),
        (
            &[
                "create",
                "secret",
                "generic",
                "token",
                "-n",
                ns,
                "--from-literal=key=s3cr3t",
            ],
            "secret/token created",
        ),
        (
            &[
                "create",
                "job",
                "once",
                "-n",
                ns,
                "--image=busybox",
                "--",
                "echo",
                "hi",
            ],
            "job.batch/once created",
        ),
    ] {
        let output = kubectl.run(args).await;
        assert!(output.contains(said), "{args:?}: {output}");
    }
    let store = server.store();
    assert_eq!(
        store.get(kind("configmaps"), ns, "settings").unwrap()["data"]["mode"],
        "fast"
    );
    let secret = store.get(kind("secrets"), ns, "token").unwrap();
    assert_eq!(secret["data"]["key"], "czNjcjN0", "stored base64, as sent");
    let deployment = store.get(kind("deployments"), ns, "web").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx"
    );
    let job = store.get(kind("jobs"), ns, "once").unwrap();
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["command"],
        serde_json::json!(["echo", "hi"])
    );
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");

    // --dry-run=server: kubectl reports the write, the store does not change.
    let settings_version =
        store.get(kind("configmaps"), ns, "settings").unwrap()["metadata"]["resourceVersion"]
            .clone();
    let changed = write(
        &dir,
        "settings.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: gen\ndata:\n  mode: slow\n",
    );
    let changed = changed.to_str().unwrap();
    for (args, said) in [
        (
            &[
                "create",
                "configmap",
                "draft",
                "-n",
                ns,
                "--from-literal=a=b",
            ][..],
            "configmap/draft created (server dry run)",
        ),
        (
            &["apply", "-f", changed],
            "configmap/settings configured (server dry run)",
        ),
        (
            &["apply", "--server-side", "--force-conflicts", "-f", changed],
            "serverside-applied (server dry run)",
        ),
        (
            &["delete", "namespace", ns],
            "namespace \"gen\" deleted (server dry run)",
        ),
        (
            &["delete", "configmap", "settings", "-n", ns],
            "deleted (server dry run)",
        ),
    ] {
        let output = kubectl.run(&[args, &["--dry-run=server"]].concat()).await;
        assert!(output.contains(said), "{args:?}: {output}");
    }
    assert!(store.get(kind("configmaps"), ns, "draft").is_err());
    let settings = store.get(kind("configmaps"), ns, "settings").unwrap();
    assert_eq!(settings["data"]["mode"], "fast");
    assert_eq!(settings["metadata"]["resourceVersion"], settings_version);
    let namespace = store.get(kind("namespaces"), "", ns).unwrap();
    assert_eq!(namespace["status"]["phase"], "Active");
    assert!(namespace["metadata"].get("deletionTimestamp").is_none());

    let output = kubectl
        .run(&["scale", "deployment", "web", "-n", ns, "--replicas=3"])
        .await;
    assert!(output.contains("deployment.apps/web scaled"), "{output}");
    assert_eq!(
        store.get(kind("deployments"), ns, "web").unwrap()["spec"]["replicas"],
        3
    );

    // The server's Table: the Deployment's own columns, the wide ones with -o wide.
    let table = kubectl.run(&["get", "deployments", "-n", ns]).await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
        "{table}"
    );
    assert!(table.lines().nth(1).unwrap().starts_with("web "), "{table}");
    let wide = kubectl
        .run(&["get", "deployment", "web", "-n", ns, "-o", "wide"])
        .await;
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header[5..], ["CONTAINERS", "IMAGES", "SELECTOR"], "{wide}");
    assert!(wide.contains("app=web"), "{wide}");
    let jobs = kubectl.run(&["get", "jobs", "-n", ns]).await;
    assert!(
        jobs.lines().next().unwrap().contains("COMPLETIONS"),
        "{jobs}"
    );

    // `get all`: the kinds of the category `all`, each with its columns.
    let all = kubectl.run(&["get", "all", "-n", ns]).await;
    assert!(all.contains("deployment.apps/web"), "{all}");
    assert!(all.contains("job.batch/once"), "{all}");
    assert!(
        !all.contains("configmap"),
        "configmaps are not in `all`: {all}"
    );

    let explained = kubectl.run(&["explain", "pod.spec.restartPolicy"]).await;
    assert!(explained.contains("restartPolicy"), "{explained}");
    assert!(explained.contains("<string>"), "{explained}");
    let explained = kubectl.run(&["explain", "deployment.spec"]).await;
    assert!(explained.contains("replicas"), "{explained}");
    assert!(explained.contains("template"), "{explained}");

    let _ = std::fs::remove_dir_all(&dir);
}

const WIDGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Mode, type: string, jsonPath: .spec.mode}
    - {name: Note, type: string, jsonPath: .spec.note, priority: 1}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [mode]
            properties:
              replicas: {type: integer, minimum: 0, maximum: 10, default: 1}
              mode: {type: string, enum: [fast, slow]}
              note: {type: string}
          status:
            type: object
            properties:
              replicas: {type: integer}
"#;

/// A CRD with a schema, columns and scale: `get` shows its columns, a custom resource that
/// breaks the schema gets kube's error, `scale` works on it, `explain` reads its schema.
async fn custom_resources(version: &str) {
    let (_server, dir, kubectl) = session(version).await;
    kubectl.create(&write(&dir, "crd.yaml", WIDGET_CRD)).await;
    let good = write(
        &dir,
        "good.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: good}\nspec: {mode: fast, note: hello}\n",
    );
    kubectl.create(&good).await;
    let listed = kubectl.run(&["get", "widgets"]).await;
    let lines: Vec<Vec<&str>> = listed
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "REPLICAS", "MODE"], "{listed}");
    // The replicas came from the schema's default.
    assert_eq!(lines[1], ["good", "1", "fast"], "{listed}");
    let wide = kubectl.run(&["get", "wd", "-o", "wide"]).await;
    assert!(wide.lines().next().unwrap().contains("NOTE"), "{wide}");
    assert!(wide.contains("hello"), "{wide}");

    let bad = write(
        &dir,
        "bad.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {mode: warp, replicas: 11}\n",
    );
    let refused = kubectl
        .run_failing(&["create", "-f", bad.to_str().unwrap()])
        .await;
    assert!(refused.contains("Invalid"), "{refused}");
    assert!(
        refused
            .contains(r#"spec.mode: Unsupported value: "warp": supported values: "fast", "slow""#),
        "{refused}"
    );
    assert!(
        refused.contains(
            "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"
        ),
        "{refused}"
    );

    kubectl
        .run(&["scale", "widget", "good", "--replicas=3"])
        .await;
    let scaled = kubectl
        .run(&["get", "widget", "good", "-o", "jsonpath={.spec.replicas}"])
        .await;
    assert_eq!(scaled, "3");
    let refused = kubectl
        .run_failing(&["scale", "widget", "good", "--replicas=20"])
        .await;
    assert!(
        refused.contains("should be less than or equal to 10"),
        "{refused}"
    );

    // The served OpenAPI carries the CRD's schema.
    let explained = kubectl.run(&["explain", "widgets.spec"]).await;
    assert!(explained.contains("replicas"), "{explained}");
    assert!(explained.contains("mode"), "{explained}");
    assert!(explained.contains("-required-"), "{explained}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_1_27() {
    custom_resources("1.27").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_1_33() {
    custom_resources("1.33").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generators_dry_run_and_printing_1_27() {
    generators_dry_run_and_printing("1.27").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generators_dry_run_and_printing_1_33() {
    generators_dry_run_and_printing("1.33").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_1_27() {
    server_side_apply("1.27").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_1_33() {
    server_side_apply("1.33").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_27() {
    scenario("1.27").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_33() {
    scenario("1.33").await;
}
