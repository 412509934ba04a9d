//! `ctrlkit apiserver` as a command: the token from `--token-file`, the private kubeconfig that
//! carries it, kube-client served with that kubeconfig and kubectl refused without the token, the
//! warning for a non-loopback address without a token, and the errors of bad token files.
//!
//! kubectl must be on PATH: without it the kubectl test fails. kubectl is refused with the
//! written kubeconfig too: client-go (clientcmd's `ClientConfig`) reads a kubeconfig user's
//! credentials only for an HTTPS server, and this one speaks plain HTTP, so kubectl never sends
//! the token; the test pins that down, with the request log showing no `Authorization` header.
//! With `--tls` the server speaks HTTPS with a CA generated at start that the kubeconfig carries,
//! and kubectl is served with the token and refused with a wrong one.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const TOKEN: &str = "cli-t0ken.For_Tests~42";

/// A fresh directory under the system's temporary one, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let path = std::env::temp_dir().join(format!(
            "ctrlkit-apiserver-cli-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `ctrlkit apiserver`, killed on drop.
struct Running {
    child: Child,
    url: String,
    /// Every stdout line so far, the serving line included.
    stdout: Vec<String>,
    /// The rest of stdout, line by line, from a reader thread.
    lines: mpsc::Receiver<String>,
    stderr: Option<ChildStderr>,
}

impl Running {
    /// Starts `ctrlkit apiserver <args>` and waits for the line that gives its URL.
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ctrlkit"))
            .arg("apiserver")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the ctrlkit binary runs");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = child.stderr.take();
        let mut running = Self {
            child,
            url: String::new(),
            stdout: Vec::new(),
            lines,
            stderr,
        };
        loop {
            match running.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => {
                    let url = line
                        .strip_prefix("serving the Kubernetes API at ")
                        .map(str::to_string);
                    running.stdout.push(line);
                    if let Some(url) = url {
                        running.url = url;
                        return running;
                    }
                }
                Err(error) => {
                    let stderr = running.stop();
                    panic!(
                        "no URL from ctrlkit apiserver ({error}); stdout: {:?}; stderr: {stderr}",
                        running.stdout
                    );
                }
            }
        }
    }

    /// Kills the process and returns what it wrote to stderr; the rest of stdout joins
    /// `self.stdout`.
    fn stop(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stdout.extend(self.lines.try_iter());
        let mut stderr = String::new();
        if let Some(mut pipe) = self.stderr.take() {
            let _ = pipe.read_to_string(&mut stderr);
        }
        stderr
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap_or_else(|error| {
            panic!("kubectl is needed by this test and must be on PATH: running it failed: {error}")
        })
}

/// A kubeconfig for `url` whose user presents `token`, if any.
fn kubeconfig_for(url: &str, token: Option<&str>) -> String {
    let user = token.map_or(" {}".to_string(), |token| format!("\n    token: {token}"));
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\nusers:\n- name: u\n  user:{user}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
    )
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
#[test]
fn the_token_file_guards_the_server_and_the_private_kubeconfig_carries_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("token");
    let token_file = dir.join("token");
    // Surrounding whitespace, as `echo` leaves, is trimmed.
    std::fs::write(&token_file, format!("  {TOKEN}\n")).unwrap();
    // A kubeconfig that was there, readable by all, is replaced and made private.
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, "old").unwrap();
    std::fs::set_permissions(&kubeconfig, std::fs::Permissions::from_mode(0o644)).unwrap();

    let mut server = Running::start(&[
        "--port",
        "0",
        "--token-file",
        token_file.to_str().unwrap(),
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
    ]);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );

    assert_eq!(mode(&kubeconfig), 0o600);
    let written = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(
        written.contains(&format!("    token: \"{TOKEN}\"\n")),
        "{written}"
    );
    assert!(
        written.contains(&format!("    server: \"{}\"\n", server.url)),
        "{written}"
    );

    // kube-client, configured from the kubeconfig, presents the token and is served.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let names = runtime.block_on(async {
        let file = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
            .await
            .unwrap();
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(kube::Client::try_from(config).unwrap());
        namespaces
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|namespace| namespace.metadata.name)
            .collect::<Vec<_>>()
    });
    assert!(names.iter().any(|name| name == "default"), "{names:?}");

    // kubectl is refused without the token, or with a wrong one (of another length, or of the
    // same length), as kube-apiserver refuses it; and, over plain HTTP, with the right one too.
    let wrong_length = format!("{TOKEN}x");
    let wrong_bytes = "x".repeat(TOKEN.len());
    let mut kubeconfigs = vec![("written", kubeconfig.clone())];
    for (name, token) in [
        ("anonymous", None),
        ("wrong-length", Some(wrong_length.as_str())),
        ("wrong-bytes", Some(wrong_bytes.as_str())),
    ] {
        let other = dir.join(name);
        std::fs::write(&other, kubeconfig_for(&server.url, token)).unwrap();
        kubeconfigs.push((name, other));
    }
    for (name, kubeconfig) in &kubeconfigs {
        let refused = kubectl(kubeconfig, &["get", "namespaces", "-v=8"]);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{name}: {stderr}");
        assert!(
            stderr.contains("You must be logged in to the server"),
            "{name}: {stderr}"
        );
        assert!(stderr.contains("401 Unauthorized"), "{name}: {stderr}");
        // klog prints a body that ends in a newline (as kube-apiserver's do) unquoted.
        assert!(
            stderr.contains(r#""reason":"Unauthorized""#)
                || stderr.contains(r#"\"reason\":\"Unauthorized\""#),
            "{name}: {stderr}"
        );
        // client-go withholds the kubeconfig's credentials from an http:// server: the request
        // headers it logs (an Authorization one masked) have none.
        assert!(stderr.contains("Request Headers:"), "{name}: {stderr}");
        assert!(!stderr.contains("Authorization:"), "{name}: {stderr}");
    }

    let stderr = server.stop();
    let stdout = server.stdout.join("\n");
    assert!(!stdout.contains(TOKEN), "{stdout}");
    assert!(!stderr.contains(TOKEN), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(
        stderr.contains("note: kubectl (client-go) sends"),
        "{stderr}"
    );
}

/// The namespaces kube-client lists with the kubeconfig at `path` (TLS verification on).
fn namespaces_with_kube_client(path: &Path) -> Result<Vec<String>, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let file = kube::config::Kubeconfig::read_from(path).unwrap();
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
            .await
            .unwrap();
        assert!(!config.accept_invalid_certs);
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(kube::Client::try_from(config).map_err(|error| error.to_string())?);
        let list = namespaces
            .list(&Default::default())
            .await
            .map_err(|error| format!("{error:?}"))?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|namespace| namespace.metadata.name)
            .collect())
    })
}

#[cfg(unix)]
#[test]
fn with_tls_kubectl_and_kube_client_are_served_over_https_with_the_token() {
    let dir = TempDir::new("tls");
    let token_file = dir.join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let mut server = Running::start(&[
        "--port",
        "0",
        "--tls",
        "--token-file",
        token_file.to_str().unwrap(),
        "--kubeconfig-out",
        kubeconfig.to_str().unwrap(),
    ]);
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
    assert_eq!(mode(&kubeconfig), 0o600);
    let written = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(
        written.contains(&format!("    server: \"{}\"\n", server.url)),
        "{written}"
    );
    assert!(
        written.contains("    certificate-authority-data: \"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"),
        "{written}"
    );

    // kubectl verifies the server against the written CA and presents the token.
    let served = kubectl(&kubeconfig, &["get", "namespaces", "-o", "name"]);
    let stdout = String::from_utf8_lossy(&served.stdout);
    let stderr = String::from_utf8_lossy(&served.stderr);
    assert!(served.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.lines().any(|line| line == "namespace/default"),
        "{stdout}"
    );

    // With a wrong token (the same CA), it is refused.
    let wrong = dir.join("wrong");
    let wrong_token = "x".repeat(TOKEN.len());
    let replaced = written.replace(TOKEN, &wrong_token);
    assert_ne!(replaced, written);
    std::fs::write(&wrong, replaced).unwrap();
    let refused = kubectl(&wrong, &["get", "namespaces"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("You must be logged in to the server (Unauthorized)"),
        "{stderr}"
    );

    // kube-client, from the kubeconfig, verifies the server and is served.
    let names = namespaces_with_kube_client(&kubeconfig).unwrap();
    assert!(names.iter().any(|name| name == "default"), "{names:?}");

    // Without the CA, neither trusts the server.
    let untrusting = dir.join("untrusting");
    let without_ca: String = written
        .lines()
        .filter(|line| !line.contains("certificate-authority-data"))
        .map(|line| format!("{line}\n"))
        .collect();
    std::fs::write(&untrusting, without_ca).unwrap();
    let error = namespaces_with_kube_client(&untrusting).unwrap_err();
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    let refused = kubectl(&untrusting, &["get", "namespaces"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains("certificate signed by unknown authority"),
        "{stderr}"
    );

    let stderr = server.stop();
    assert!(!stderr.contains(TOKEN), "{stderr}");
    assert!(!stderr.contains("note:"), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn a_non_loopback_address_without_a_token_is_warned_about() {
    let mut open = Running::start(&["--bind", "0.0.0.0", "--port", "0"]);
    let stderr = open.stop();
    assert!(
        stderr.contains("warning: serving on 0.0.0.0, which is not a loopback address"),
        "{stderr}"
    );

    let mut guarded = Running::start(&["--bind", "0.0.0.0", "--port", "0", "--token", TOKEN]);
    let stderr = guarded.stop();
    assert!(!stderr.contains("warning"), "{stderr}");

    let mut local = Running::start(&["--port", "0"]);
    assert!(local.url.starts_with("http://127.0.0.1:"), "{}", local.url);
    let stderr = local.stop();
    assert!(!stderr.contains("warning"), "{stderr}");
}

#[test]
fn bad_tokens_are_clear_errors_that_do_not_show_them() {
    let dir = TempDir::new("bad");
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_ctrlkit"))
            .arg("apiserver")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("the ctrlkit binary runs");
        assert!(!output.status.success(), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };

    let missing = dir.join("missing");
    let stderr = run(&["--token-file", missing.to_str().unwrap()]);
    assert!(
        stderr.starts_with(&format!(
            "error: cannot read the token file {}:",
            missing.display()
        )),
        "{stderr}"
    );

    let empty = dir.join("empty");
    std::fs::write(&empty, " \n").unwrap();
    let stderr = run(&["--token-file", empty.to_str().unwrap()]);
    assert!(stderr.contains("the token is empty"), "{stderr}");

    let spaced = dir.join("spaced");
    std::fs::write(&spaced, "secret words\n").unwrap();
    let stderr = run(&["--token-file", spaced.to_str().unwrap()]);
    assert!(stderr.contains("visible ASCII"), "{stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");

    let stderr = run(&["--token", "secret words"]);
    assert!(stderr.contains("visible ASCII"), "{stderr}");
    assert!(!stderr.contains("secret"), "{stderr}");

    let stderr = run(&["--token", TOKEN, "--token-file", spaced.to_str().unwrap()]);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}
