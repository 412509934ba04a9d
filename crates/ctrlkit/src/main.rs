//! The `ctrlkit` command: `ctrlkit demo` runs the sample-controller with leader election through
//! a workload and checks the result; `ctrlkit apiserver` serves the embedded Kubernetes API
//! server until stopped, and writes a kubeconfig that kubectl and kube-client accept. With
//! `--token` or `--token-file` every request must carry that bearer token, and the kubeconfig
//! (written readable by its owner only) carries it. With `--tls` it serves HTTPS with a CA
//! generated at start, which the kubeconfig carries for clients to trust: kubectl sends a token
//! only over HTTPS.

mod demo;
mod new_project;

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ctrlkit_apiserver::{ApiServer, ApiServerConfig, BearerToken, SelfSignedTls};

/// The binary's allocator. Every write to the embedded server builds a new object tree of many
/// small blocks and lets an old version go, often on another runtime thread than the one that
/// built it. glibc's malloc answers such a free by locking the arena of the thread that made
/// the block, and grows a thread's heap a few pages at a time; mimalloc frees across threads
/// without a lock and keeps each thread's blocks in pages of their own. A library cannot choose
/// its users' allocator: a test binary that wants the same declares the same two lines.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Kubernetes controller machinery in Rust.
#[derive(Parser, Debug)]
#[command(name = "ctrlkit", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run three sample-controller replicas with leader election through a stream of Foos
    /// (created, scaled, deleted), kill the leader midway, and check that every Deployment
    /// matches its Foo. Runs on the embedded API server unless given a kubeconfig.
    Demo {
        /// How many Foos to create.
        #[arg(long, default_value_t = 200)]
        foos: usize,
        /// How many controller replicas (at least 2: the leader is killed and a standby takes
        /// over).
        #[arg(long, default_value_t = 3)]
        replicas: usize,
        /// Workers per replica.
        #[arg(long, default_value_t = 2)]
        workers: usize,
        /// The namespace for the Foos, made by the demo and deleted at the end (it must not
        /// exist); a new `ctrlkit-demo-<random>` by default.
        #[arg(long)]
        namespace: Option<String>,
        /// Run against the cluster of this kubeconfig instead of the embedded server (only with
        /// this flag: an exported KUBECONFIG is not used).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Write to the kubeconfig's cluster without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Make a controller project of your own: a custom resource type, its reconciler (with a
    /// finalizer and server-side apply), main.rs with leader election and metrics, a test
    /// against the embedded API server, a Dockerfile, and its CRD, RBAC and Deployment
    /// manifests. `cargo test` in it passes as made.
    New {
        /// The project's name (lowercase letters, digits and '-'): its crate, binary and
        /// controller.
        name: String,
        /// The directory to create (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// The custom resource's kind.
        #[arg(long, default_value = "Widget")]
        kind: String,
        /// The custom resource's API group.
        #[arg(long, default_value = "example.com")]
        group: String,
        /// The namespace the manifests deploy the controller to (default: NAME).
        #[arg(long)]
        namespace: Option<String>,
        /// Depend on this published ctrlkit version instead of the checkout this command was
        /// built from.
        #[arg(long)]
        ctrlkit_version: Option<String>,
    },
    /// Serve the embedded Kubernetes API server until stopped (Ctrl-C).
    Apiserver {
        /// The address to listen on. Anything but loopback without a token lets anyone who
        /// reaches it read and write everything (a warning says so).
        #[arg(long, default_value = "127.0.0.1")]
        bind: IpAddr,
        /// The port to listen on; 0 picks a free one.
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Write a kubeconfig for the server to this file.
        #[arg(long)]
        kubeconfig_out: Option<PathBuf>,
        /// Serve the fault hooks' admin endpoint (/admin/faults/...): for reliability tests
        /// only, since anyone who reaches it can break the server.
        #[arg(long)]
        admin: bool,
        /// Require this bearer token on every request, health endpoints included (others get
        /// 401 Unauthorized). It shows in `ps`: prefer --token-file. kube-client sends it over
        /// a plain-HTTP server; kubectl only with --tls (client-go sends credentials only over
        /// HTTPS).
        #[arg(long, value_name = "TOKEN", conflicts_with = "token_file", value_parser = TokenParser)]
        token: Option<BearerToken>,
        /// As --token, with the token read from this file (surrounding whitespace trimmed).
        #[arg(long, value_name = "PATH")]
        token_file: Option<PathBuf>,
        /// Serve HTTPS, with a certificate for localhost, 127.0.0.1, ::1 and --bind signed by a
        /// CA generated at start (its key is discarded); the kubeconfig carries the CA as
        /// certificate-authority-data.
        #[arg(long)]
        tls: bool,
        /// Keep the objects in this directory (created if missing): a write-ahead log, fsynced
        /// before each write is acknowledged, and snapshots. Started on it again, the server
        /// serves every acknowledged object with its resourceVersion, and watches resume from
        /// resourceVersions issued before. In memory only without it.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
}

/// Parses `--token` into a [`BearerToken`] with an error that, unlike clap's own for a value that
/// does not parse, does not repeat the value.
#[derive(Debug, Clone, Copy)]
struct TokenParser;

impl clap::builder::TypedValueParser for TokenParser {
    type Value = BearerToken;

    fn parse_ref(
        &self,
        command: &clap::Command,
        _: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<BearerToken, clap::Error> {
        let token = value
            .to_str()
            .ok_or(ctrlkit_apiserver::auth::TokenError::Invalid)
            .and_then(BearerToken::new);
        token.map_err(|error| {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value for '--token <TOKEN>': {error}\n"),
            )
            .with_cmd(command)
        })
    }
}

/// What `ctrlkit apiserver` was asked for.
#[derive(Debug)]
struct ApiserverOptions {
    bind: IpAddr,
    port: u16,
    kubeconfig_out: Option<PathBuf>,
    admin: bool,
    token: Option<BearerToken>,
    tls: bool,
    data_dir: Option<PathBuf>,
}

/// The token of `--token-file`: the file's contents, trimmed. Errors name the file, never what
/// it holds.
fn read_token_file(path: &Path) -> Result<BearerToken, String> {
    let contents = std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read the token file {}: {error}", path.display()))?;
    BearerToken::new(contents.trim())
        .map_err(|error| format!("the token file {}: {error}", path.display()))
}

/// A kubeconfig with one cluster, user and context for the server at `url`, trusting the CA of
/// `ca_data` (base64 of its PEM) if given, whose user presents `token` if there is one. The URL,
/// the CA and the token are written as JSON strings, which YAML reads as double-quoted scalars
/// whatever they hold.
fn kubeconfig(url: &str, ca_data: Option<&str>, token: Option<&BearerToken>) -> String {
    let quote = |text: &str| serde_json::Value::from(text).to_string();
    let ca = ca_data.map_or(String::new(), |data| {
        format!("\n    certificate-authority-data: {}", quote(data))
    });
    let user = match token {
        Some(token) => format!("\n    token: {}", quote(token.expose())),
        None => " {}".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: ctrlkit\n  cluster:\n    server: {}{ca}\nusers:\n- name: ctrlkit\n  user:{user}\ncontexts:\n- name: ctrlkit\n  context:\n    cluster: ctrlkit\n    user: ctrlkit\n    namespace: default\ncurrent-context: ctrlkit\n",
        quote(url)
    )
}

/// Writes `contents` to `path` readable and writable by its owner only (0600, as kubectl writes
/// kubeconfigs), an existing file included: a kubeconfig may hold a token.
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    // The mode applies to a file created now; one that was there keeps its own until set (it is
    // empty until then).
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

async fn apiserver(options: ApiserverOptions) -> ExitCode {
    let ApiserverOptions {
        bind,
        port,
        kubeconfig_out,
        admin,
        token,
        tls,
        data_dir,
    } = options;
    if token.is_none() && !bind.is_loopback() {
        eprintln!(
            "warning: serving on {bind}, which is not a loopback address, without --token or --token-file: anyone who can reach it can read and change everything"
        );
    }
    if token.is_some() && !tls {
        eprintln!(
            "note: kubectl (client-go) sends a kubeconfig's token only over HTTPS, and this server speaks plain HTTP (without --tls): kubectl gets 401 Unauthorized, kube-client and curl -H 'Authorization: Bearer ...' are served"
        );
    }
    let generated = if tls {
        match SelfSignedTls::generate(&[bind]) {
            Ok(generated) => Some(generated),
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let mut config = ApiServerConfig {
        address: SocketAddr::new(bind, port),
        ..ApiServerConfig::default()
    };
    config.rest.admin = admin;
    config.rest.token = token.clone();
    config.tls = generated.as_ref().map(SelfSignedTls::tls);
    config.data_dir = data_dir.clone();
    let server = match ApiServer::start(config).await {
        Ok(server) => server,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    if let (Some(dir), Some(recovery)) = (&data_dir, server.store().recovery()) {
        if let Some(tail) = &recovery.truncated {
            eprintln!(
                "warning: the log {} had a damaged tail ({}): cut at byte {}, {} bytes discarded",
                tail.segment.display(),
                tail.reason,
                tail.offset,
                tail.discarded
            );
        }
        for (snapshot, reason) in &recovery.skipped_snapshots {
            eprintln!(
                "warning: the snapshot {} is unreadable ({reason}) and was passed over",
                snapshot.display()
            );
        }
        println!(
            "data directory {}: resourceVersion {} (snapshot at {} with {} objects, {} changes replayed)",
            dir.display(),
            recovery.resource_version,
            recovery.snapshot,
            recovery.snapshot_objects,
            recovery.replayed
        );
    }
    if let Some(path) = kubeconfig_out {
        let ca_data = generated.as_ref().map(SelfSignedTls::ca_data);
        // A server bound to every address is reached, and certified, on loopback.
        let url = if bind.is_unspecified() {
            let loopback = if bind.is_ipv4() {
                IpAddr::from([127, 0, 0, 1])
            } else {
                IpAddr::from(std::net::Ipv6Addr::LOCALHOST)
            };
            let scheme = if server.url().starts_with("https") {
                "https"
            } else {
                "http"
            };
            format!(
                "{scheme}://{}",
                SocketAddr::new(loopback, server.address().port())
            )
        } else {
            server.url()
        };
        let contents = kubeconfig(&url, ca_data.as_deref(), token.as_ref());
        if let Err(error) = write_private(&path, &contents) {
            eprintln!(
                "error: cannot write the kubeconfig {}: {error}",
                path.display()
            );
            return ExitCode::FAILURE;
        }
        println!("kubeconfig written to {}", path.display());
    }
    println!("serving the Kubernetes API at {}", server.url());
    if let Err(error) = tokio::signal::ctrl_c().await {
        eprintln!("error: cannot wait for Ctrl-C: {error}");
    }
    server.shutdown().await;
    ExitCode::SUCCESS
}

/// Logs to stderr at the levels `RUST_LOG` asks for (`warn` by default), e.g.
/// `RUST_LOG=debug` or `RUST_LOG=ctrlkit_controller=trace,info`. By default kube-client's
/// line per failed request is left out: the error it returns is reported once, in words.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("warn,kube_client::client::builder=off")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Five lowercase letters and digits, for a name of the demo's own.
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]))
        .collect()
}

/// `--namespace NAME` checked as a namespace name (a DNS label): a one-line reason if not.
pub(crate) fn namespace_flag(namespace: &str) -> Result<(), String> {
    let label = namespace.len() <= 63
        && namespace
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
        && namespace.starts_with(|c: char| c.is_ascii_alphanumeric())
        && namespace.ends_with(|c: char| c.is_ascii_alphanumeric());
    if label {
        Ok(())
    } else {
        Err(format!(
            "--namespace {namespace:?} is not a namespace name: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
        ))
    }
}

/// Checks the demo's flags before anything starts: a one-line reason for the first problem.
fn demo_flags(
    foos: usize,
    replicas: usize,
    workers: usize,
    namespace: &str,
    kubeconfig: Option<&std::path::Path>,
) -> Result<(), String> {
    if foos == 0 {
        return Err("--foos must be at least 1".into());
    }
    if replicas < 2 {
        return Err(format!(
            "--replicas must be at least 2, not {replicas}: the demo kills the leader and a standby takes over"
        ));
    }
    if workers == 0 {
        return Err("--workers must be at least 1".into());
    }
    namespace_flag(namespace)?;
    if let Some(path) = kubeconfig {
        if path.is_dir() {
            return Err(format!(
                "--kubeconfig {}: a directory, not a file",
                path.display()
            ));
        }
        if !path.is_file() {
            return Err(format!("--kubeconfig {}: no such file", path.display()));
        }
        if let Err(error) = kube::config::Kubeconfig::read_from(path) {
            // The parser's reason, on one line.
            let reason = std::iter::successors(
                Some(&error as &(dyn std::error::Error + 'static)),
                |error| error.source(),
            )
            .map(ToString::to_string)
            .last()
            .unwrap_or_default();
            // The parser's own message, without the source excerpt it draws after ` --> `.
            let reason = reason.split_whitespace().collect::<Vec<_>>().join(" ");
            let reason = reason.split(" --> ").next().unwrap_or_default().to_owned();
            return Err(format!(
                "--kubeconfig {}: not a kubeconfig: {reason}",
                path.display()
            ));
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    init_logging();
    match Cli::parse().command {
        Command::Demo {
            foos,
            replicas,
            workers,
            namespace,
            kubeconfig,
            yes,
        } => {
            let namespace =
                namespace.unwrap_or_else(|| format!("ctrlkit-demo-{}", random_suffix()));
            if let Err(problem) =
                demo_flags(foos, replicas, workers, &namespace, kubeconfig.as_deref())
            {
                eprintln!("error: {problem}");
                return ExitCode::from(2);
            }
            let options = demo::DemoOptions {
                foos,
                replicas,
                workers,
                namespace,
                kubeconfig,
                yes,
            };
            match demo::run(options).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("error: {}", demo::describe(&error));
                    if error.is_refusal() {
                        ExitCode::from(2)
                    } else if error.is_interrupted() {
                        // A shell's code for a process ended by SIGINT (128 + 2).
                        ExitCode::from(130)
                    } else {
                        ExitCode::FAILURE
                    }
                }
            }
        }
        Command::New {
            name,
            dir,
            kind,
            group,
            namespace,
            ctrlkit_version,
        } => {
            let ctrlkit = match ctrlkit_version {
                Some(version) => new_project::CtrlkitSource::Version(version),
                None => {
                    let checkout = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
                    if !checkout.join("Cargo.toml").is_file() {
                        eprintln!(
                            "error: the ctrlkit checkout this command was built from ({}) is gone; use --ctrlkit-version",
                            checkout.display()
                        );
                        return ExitCode::from(2);
                    }
                    new_project::CtrlkitSource::Path(checkout)
                }
            };
            let options = new_project::NewOptions {
                dir: dir.unwrap_or_else(|| PathBuf::from(&name)),
                namespace: namespace.unwrap_or_else(|| name.clone()),
                name,
                kind,
                group,
                ctrlkit,
            };
            match new_project::create(&options) {
                Ok(dir) => {
                    println!("made {} in {}", options.name, dir.display());
                    println!("next: cd {} && cargo test", dir.display());
                    ExitCode::SUCCESS
                }
                Err(
                    error @ (new_project::NewError::Invalid(_) | new_project::NewError::Exists(_)),
                ) => {
                    eprintln!("error: {error}");
                    ExitCode::from(2)
                }
                Err(error) => {
                    eprintln!("error: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Apiserver {
            bind,
            port,
            kubeconfig_out,
            admin,
            token,
            token_file,
            tls,
            data_dir,
        } => {
            let token = match (token, token_file) {
                (Some(token), _) => Some(token),
                (None, Some(path)) => match read_token_file(&path) {
                    Ok(token) => Some(token),
                    Err(error) => {
                        eprintln!("error: {error}");
                        return ExitCode::FAILURE;
                    }
                },
                (None, None) => None,
            };
            let options = ApiserverOptions {
                bind,
                port,
                kubeconfig_out,
                admin,
                token,
                tls,
                data_dir,
            };
            apiserver(options).await
        }
    }
}
