//! The client side of `ctrlkit demo --kubeconfig`, against the embedded server serving HTTPS
//! (a CA generated for the test) and requiring a bearer token:
//!
//! - TLS verification stays on: a kubeconfig without the CA is refused with a certificate error;
//!   only the kubeconfig's own `insecure-skip-tls-verify: true` turns it off;
//! - a wrong token gets 401, and neither the token sent nor the right one appears in the
//!   command's output or its error;
//! - with the CA and the token the demo runs to the end, and with `RUST_LOG=trace` (every log
//!   line of ctrlkit, kube-client, hyper and rustls) the token appears nowhere in its output.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Output;

use ctrlkit::apiserver::rest::RestConfig;
use ctrlkit::apiserver::{ApiServer, ApiServerConfig, BearerToken, SelfSignedTls};

const TOKEN: &str = "client-side-s3cret.Token_0123456789";
const WRONG_TOKEN: &str = "wrong-s3cret.Token_9876543210";

struct Cluster {
    server: ApiServer,
    ca_data: String,
    dir: tempfile::TempDir,
}

async fn cluster() -> Cluster {
    let loopback = IpAddr::from([127, 0, 0, 1]);
    let tls = SelfSignedTls::generate(&[loopback]).unwrap();
    let config = ApiServerConfig {
        rest: RestConfig {
            token: Some(BearerToken::new(TOKEN).unwrap()),
            ..RestConfig::default()
        },
        tls: Some(tls.tls()),
        ..ApiServerConfig::default()
    };
    let server = ApiServer::start(config).await.unwrap();
    assert!(server.url().starts_with("https://"));
    Cluster {
        server,
        ca_data: tls.ca_data(),
        dir: tempfile::tempdir().unwrap(),
    }
}

/// How the kubeconfig's cluster entry treats the server's certificate.
enum Trust<'a> {
    Ca(&'a str),
    Nothing,
    SkipVerify,
}

impl Cluster {
    fn kubeconfig(&self, name: &str, trust: Trust<'_>, token: &str) -> PathBuf {
        let trust = match trust {
            Trust::Ca(data) => format!("\n    certificate-authority-data: {data}"),
            Trust::Nothing => String::new(),
            Trust::SkipVerify => "\n    insecure-skip-tls-verify: true".to_string(),
        };
        let contents = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {}{trust}\nusers:\n- name: test\n  user:\n    token: {token}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\ncurrent-context: test\n",
            self.server.url()
        );
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

async fn demo(kubeconfig: &Path, foos: &str, rust_log: &str) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_ctrlkit"))
        .args([
            "demo",
            "--yes",
            "--foos",
            foos,
            "--replicas",
            "2",
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .env("RUST_LOG", rust_log)
        .env_remove("KUBECONFIG")
        .kill_on_drop(true)
        .output()
        .await
        .expect("the ctrlkit binary runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn assert_no_token(output: &Output) {
    let all = text(output);
    for secret in [TOKEN, WRONG_TOKEN] {
        assert!(
            !all.contains(secret),
            "a token appears in the output:\n{all}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_stays_on_without_the_ca() {
    let cluster = cluster().await;
    let kubeconfig = cluster.kubeconfig("no-ca", Trust::Nothing, TOKEN);
    let output = demo(&kubeconfig, "2", "debug").await;
    assert!(!output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr).to_lowercase();
    assert!(
        stderr.contains("certificate") || stderr.contains("unknownissuer"),
        "expected a certificate verification error:\n{stderr}"
    );
    assert_no_token(&output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_kubeconfig_turns_verification_off() {
    let cluster = cluster().await;
    // Past TLS without the CA (the kubeconfig says so), then refused for the wrong token.
    let kubeconfig = cluster.kubeconfig("skip", Trust::SkipVerify, WRONG_TOKEN);
    let output = demo(&kubeconfig, "2", "debug").await;
    assert!(!output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Unauthorized"), "expected 401:\n{stderr}");
    assert!(
        !stderr.to_lowercase().contains("certificate"),
        "verification was not skipped:\n{stderr}"
    );
    assert_no_token(&output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused_without_being_shown() {
    let cluster = cluster().await;
    let kubeconfig = cluster.kubeconfig("wrong-token", Trust::Ca(&cluster.ca_data), WRONG_TOKEN);
    let output = demo(&kubeconfig, "2", "trace").await;
    assert!(!output.status.success(), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("Unauthorized"),
        "{}",
        text(&output)
    );
    assert_no_token(&output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_ca_and_the_token_the_demo_runs_and_never_logs_the_token() {
    let cluster = cluster().await;
    let kubeconfig = cluster.kubeconfig("good", Trust::Ca(&cluster.ca_data), TOKEN);
    let output = demo(&kubeconfig, "4", "trace").await;
    assert!(output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The trace logs were on (and long), so their silence about the token means something.
    assert!(
        stderr.lines().count() > 100,
        "expected trace logs, got:\n{stderr}"
    );
    assert_no_token(&output);
}
