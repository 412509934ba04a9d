//! `ctrlkit apiserver --data-dir` under `kill -9`: writers create, update and delete ConfigMaps
//! through kube-client while the server process is killed with SIGKILL at random points and
//! started again on the same directory. After every restart:
//!
//! - every acknowledged write is there: each object has the value and the resourceVersion of
//!   its last acknowledged write, and an object whose last acknowledged write deleted it is gone
//!   (a write in flight at the kill may or may not have happened: either outcome is accepted);
//! - the server's resourceVersion is at least the newest one it acknowledged;
//! - a watch from a resourceVersion acknowledged before the kill (the killed run's first write,
//!   its middle, and near its end) delivers exactly the later acknowledged writes, each with its
//!   resourceVersion, or 410 Expired if it is more than the kept history (10,000 changes) back.
//!
//! `DURABILITY_WRITES` (10,000) writes in all, `DURABILITY_KILLS` (50) kills spread at random
//! over them, `DURABILITY_WRITERS` (4) writers at once, `DURABILITY_SEED` to replay a run:
//!
//! ```text
//! cargo test -p ctrlkit --test it -- durability:: --nocapture
//! DURABILITY_WRITES=500000 DURABILITY_KILLS=50 cargo test --release -p ctrlkit --test it -- durability:: --nocapture
//! ```

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams, WatchEvent, WatchParams};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const NAMESPACE: &str = "durability";
/// Objects per writer: each writer owns its names, so no two writes race for one object.
const NAMES_PER_WRITER: usize = 40;

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{name} must be a number, not {value:?}")),
        Err(_) => default,
    }
}

/// What an object should be after its last acknowledged write.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expected {
    Present { value: String, rv: u64 },
    Absent,
}

/// A write whose answer never came: the kill interrupted it.
#[derive(Debug, Clone)]
enum InFlight {
    Write { name: String, value: String },
    Delete { name: String },
}

/// One acknowledged write, as a watch must deliver it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Acked {
    /// Its resourceVersion; `None` for a deletion, which kube-apiserver answers with a `Status`.
    rv: Option<u64>,
    name: String,
    deleted: bool,
    /// How many writes had been acknowledged (in all) when it was sent, and when it was
    /// acknowledged: a write sent after another was acknowledged comes after it.
    sent_seq: u64,
    ack_seq: u64,
}

/// One event of a resumed watch.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    rv: u64,
    name: String,
    deleted: bool,
}

#[derive(Default)]
struct Model {
    objects: HashMap<String, Expected>,
    in_flight: Vec<InFlight>,
    acked: Vec<Acked>,
}

/// A running `ctrlkit apiserver --data-dir`.
struct Server {
    child: Child,
    client: kube::Client,
    started_in: Duration,
    warnings: Vec<String>,
}

async fn start(data_dir: &std::path::Path) -> Server {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ctrlkit"))
        .arg("apiserver")
        .arg("--data-dir")
        .arg(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the ctrlkit binary runs");
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        tokio::select! {
            line = stdout.next_line() => {
                let line = line.unwrap().unwrap_or_else(|| panic!("the server exited before serving"));
                if let Some(url) = line.strip_prefix("serving the Kubernetes API at ") {
                    break url.to_string();
                }
            }
            line = stderr.next_line() => {
                if let Some(line) = line.unwrap() {
                    eprintln!("server: {line}");
                }
            }
        }
    };
    let mut warnings = Vec::new();
    // What it said on stderr while starting (a truncated tail is reported there).
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_millis(20), stderr.next_line()).await
    {
        warnings.push(line);
    }
    tokio::spawn(async move { while let Ok(Some(_)) = stdout.next_line().await {} });
    tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
    let config = kube::Config::new(url.parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    Server {
        child,
        client,
        started_in: started.elapsed(),
        warnings,
    }
}

fn configmap(name: &str, value: &str, rv: Option<u64>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            resource_version: rv.map(|rv| rv.to_string()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("value".to_string(), value.to_string())])),
        ..ConfigMap::default()
    }
}

fn rv_of(meta: &ObjectMeta) -> u64 {
    meta.resource_version.as_deref().unwrap().parse().unwrap()
}

/// One writer: creates, updates (with its resourceVersion as precondition) and deletes its own
/// objects until a request fails, which only the kill makes happen.
async fn writer(
    api: Api<ConfigMap>,
    writer: usize,
    seed: u64,
    model: Arc<Mutex<Model>>,
    acks: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut counter = 0u64;
    while !stop.load(Ordering::Acquire) {
        let name = format!("w{writer}-{}", rng.usize(..NAMES_PER_WRITER));
        counter += 1;
        let value = format!("{seed}-{counter}");
        let current = model
            .lock()
            .unwrap()
            .objects
            .get(&name)
            .cloned()
            .unwrap_or(Expected::Absent);
        let sent_seq = acks.load(Ordering::Acquire);
        let (in_flight, outcome) = match current {
            Expected::Absent => {
                let flight = InFlight::Write {
                    name: name.clone(),
                    value: value.clone(),
                };
                let result = api
                    .create(&PostParams::default(), &configmap(&name, &value, None))
                    .await;
                (flight, result.map(|cm| Some(rv_of(&cm.metadata))))
            }
            Expected::Present { rv, .. } if rng.u8(..10) < 7 => {
                let flight = InFlight::Write {
                    name: name.clone(),
                    value: value.clone(),
                };
                let result = api
                    .replace(
                        &name,
                        &PostParams::default(),
                        &configmap(&name, &value, Some(rv)),
                    )
                    .await;
                (flight, result.map(|cm| Some(rv_of(&cm.metadata))))
            }
            Expected::Present { .. } => {
                let flight = InFlight::Delete { name: name.clone() };
                let result = api.delete(&name, &DeleteParams::default()).await;
                // A deletion's answer is the object's last state, with the deletion's
                // resourceVersion.
                let result = result.map(|either| either.left().map(|cm| rv_of(&cm.metadata)));
                (flight, result)
            }
        };
        match outcome {
            Ok(rv) => {
                let mut model = model.lock().unwrap();
                let deleted = matches!(in_flight, InFlight::Delete { .. });
                let expected = match rv {
                    Some(rv) if !deleted => Expected::Present {
                        value: value.clone(),
                        rv,
                    },
                    None if deleted => Expected::Absent,
                    _ => panic!("{name}: a write answered {rv:?} (deleted: {deleted})"),
                };
                model.objects.insert(name.clone(), expected);
                let ack_seq = acks.fetch_add(1, Ordering::AcqRel) + 1;
                model.acked.push(Acked {
                    rv,
                    name,
                    deleted,
                    sent_seq,
                    ack_seq,
                });
            }
            Err(kube::Error::Api(status)) if !stop.load(Ordering::Acquire) => {
                panic!("the live server refused a write to {name}: {status:?}");
            }
            Err(_) => {
                // No answer: the server was killed with the write in flight.
                model.lock().unwrap().in_flight.push(in_flight);
                return;
            }
        }
    }
}

/// The history a restarted server keeps for watches: the store's default `history`.
const HISTORY: u64 = 10_000;

/// What one verification after a restart did.
#[derive(Debug, Default, Clone, Copy)]
struct Verified {
    objects: usize,
    /// Watches resumed from before the kill, and the events they delivered.
    resumed: usize,
    events: usize,
    /// Watches from further back than the kept history, answered 410 Expired as they must be.
    expired: usize,
}

/// Checks the restarted server against the model, and watches resumed from `resume_from`.
async fn verify(client: &kube::Client, model: &Model, resume_from: &[Acked]) -> Verified {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let list = api.list(&ListParams::default()).await.unwrap();
    let list_rv: u64 = list
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    let actual: HashMap<String, (String, u64)> = list
        .items
        .iter()
        // The namespace's CA ConfigMap, which every namespace has, is not the test's.
        .filter(|cm| cm.metadata.name.as_deref() != Some("kube-root-ca.crt"))
        .map(|cm| {
            let value = cm.data.as_ref().unwrap()["value"].clone();
            (
                cm.metadata.name.clone().unwrap(),
                (value, rv_of(&cm.metadata)),
            )
        })
        .collect();
    let newest_acked = model
        .acked
        .iter()
        .filter_map(|acked| acked.rv)
        .max()
        .unwrap_or(0);
    assert!(
        list_rv >= newest_acked,
        "the server is at resourceVersion {list_rv}, behind the acknowledged {newest_acked}"
    );
    let mut names: Vec<&String> = model.objects.keys().chain(actual.keys()).collect();
    names.sort();
    names.dedup();
    for name in &names {
        let expected = model
            .objects
            .get(*name)
            .cloned()
            .unwrap_or(Expected::Absent);
        let found = actual.get(*name);
        let as_expected = match (&expected, found) {
            (Expected::Absent, None) => true,
            (Expected::Present { value, rv }, Some((found_value, found_rv))) => {
                value == found_value && rv == found_rv
            }
            _ => false,
        };
        if as_expected {
            continue;
        }
        // Otherwise only a write in flight at the kill may explain it.
        let explained = model.in_flight.iter().any(|flight| match (flight, found) {
            (InFlight::Write { name: n, value }, Some((found_value, found_rv))) => {
                n == *name && value == found_value && *found_rv > newest_acked_for(model, name)
            }
            (InFlight::Delete { name: n }, None) => n == *name,
            _ => false,
        });
        assert!(
            explained,
            "{name}: the last acknowledged write left {expected:?}, the restarted server has {found:?}"
        );
    }

    let mut verified = Verified {
        objects: names.len(),
        ..Verified::default()
    };
    for from in resume_from {
        match check_resumed_watch(&api, model, from, list_rv).await {
            Some(events) => {
                verified.resumed += 1;
                verified.events += events;
            }
            None => verified.expired += 1,
        }
    }
    verified
}

fn newest_acked_for(model: &Model, name: &str) -> u64 {
    model
        .acked
        .iter()
        .filter(|acked| acked.name == name)
        .filter_map(|acked| acked.rv)
        .max()
        .unwrap_or(0)
}

/// A watch from the acknowledged write `from` delivers every acknowledged write after it with
/// its resourceVersion, in order, and every deletion sent after it; anything else it delivers
/// is a write in flight at the kill (or a deletion whose order against `from` is unknown).
/// Returns the events delivered, or `None` when the watch got 410 Expired, which only a
/// resourceVersion more than [`HISTORY`] changes back may get.
async fn check_resumed_watch(
    api: &Api<ConfigMap>,
    model: &Model,
    from: &Acked,
    list_rv: u64,
) -> Option<usize> {
    let from_rv = from
        .rv
        .expect("resumed from a write with a resourceVersion");
    let mut seen: Vec<Seen> = Vec::new();
    if list_rv > from_rv {
        let params = WatchParams::default().timeout(10);
        let mut events = api
            .watch(&params, &from_rv.to_string())
            .await
            .unwrap()
            .boxed();
        while let Some(event) = events.next().await {
            let (cm, deleted) = match event.unwrap() {
                WatchEvent::Added(cm) | WatchEvent::Modified(cm) => (cm, false),
                WatchEvent::Deleted(cm) => (cm, true),
                WatchEvent::Bookmark(_) => continue,
                WatchEvent::Error(status) if status.code == 410 => {
                    assert!(
                        list_rv - from_rv > HISTORY,
                        "a watch from {from_rv}, {} changes back, got 410: {status:?}",
                        list_rv - from_rv
                    );
                    return None;
                }
                WatchEvent::Error(status) => panic!("the resumed watch failed: {status:?}"),
            };
            let rv = rv_of(&cm.metadata);
            seen.push(Seen {
                rv,
                name: cm.metadata.name.unwrap(),
                deleted,
            });
            if rv >= list_rv {
                break;
            }
        }
    }
    let mut last = from_rv;
    for event in &seen {
        assert!(event.rv > last, "resourceVersions go forward: {seen:?}");
        last = event.rv;
    }
    let seen_writes: HashMap<u64, &str> = seen
        .iter()
        .filter(|event| !event.deleted)
        .map(|event| (event.rv, event.name.as_str()))
        .collect();
    for acked in &model.acked {
        if let Some(rv) = acked.rv.filter(|rv| *rv > from_rv) {
            assert!(
                seen_writes.get(&rv) == Some(&acked.name.as_str()),
                "a watch from {from_rv} after the restart missed the acknowledged {acked:?}"
            );
        }
    }
    // Deletions sent after `from` was acknowledged: each must be delivered (per name, at least
    // as many DELETED events as such deletions).
    let mut due_deletes: HashMap<&str, usize> = HashMap::new();
    for acked in &model.acked {
        if acked.deleted && acked.sent_seq >= from.ack_seq {
            *due_deletes.entry(acked.name.as_str()).or_default() += 1;
        }
    }
    for (name, due) in due_deletes {
        let delivered = seen
            .iter()
            .filter(|event| event.deleted && event.name == name)
            .count();
        assert!(
            delivered >= due,
            "a watch from {from_rv} delivered {delivered} deletions of {name} for {due} acknowledged after it"
        );
    }
    let acked_writes: HashMap<u64, &str> = model
        .acked
        .iter()
        .filter_map(|acked| acked.rv.map(|rv| (rv, acked.name.as_str())))
        .collect();
    let acked_deletes: std::collections::HashSet<&str> = model
        .acked
        .iter()
        .filter(|acked| acked.deleted)
        .map(|acked| acked.name.as_str())
        .collect();
    for event in &seen {
        let acknowledged = if event.deleted {
            acked_deletes.contains(event.name.as_str())
        } else {
            acked_writes.get(&event.rv) == Some(&event.name.as_str())
        };
        let in_flight = model.in_flight.iter().any(|flight| match flight {
            InFlight::Write { name, .. } => *name == event.name && !event.deleted,
            InFlight::Delete { name } => *name == event.name && event.deleted,
        });
        assert!(
            acknowledged || in_flight,
            "a watch from {from_rv} delivered {event:?}, which no writer wrote"
        );
    }
    Some(seen.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9() {
    let writes = env_number("DURABILITY_WRITES", 10_000);
    let kills = env_number("DURABILITY_KILLS", 50).max(1);
    let writers = env_number("DURABILITY_WRITERS", 4).max(1) as usize;
    let seed = env_number(
        "DURABILITY_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            % 1_000_000,
    );
    println!(
        "durability: {writes} writes, {kills} kills, {writers} writers, seed {seed} (replay: DURABILITY_SEED={seed} DURABILITY_WRITES={writes} DURABILITY_KILLS={kills} DURABILITY_WRITERS={writers} cargo test -p ctrlkit --test it -- durability:: --nocapture)"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut model = Model::default();
    let run_started = Instant::now();
    let mut total_acked = 0u64;
    let mut longest_start = Duration::ZERO;
    let mut truncations = 0;
    let mut totals = Verified::default();
    let mut compared = 0;
    // Acknowledged writes in all, across restarts: the writers' sequence.
    let acks = Arc::new(AtomicU64::new(0));

    let mut server = start(dir.path()).await;
    let namespaces: Api<Namespace> = Api::all(server.client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();

    for cycle in 0..kills {
        // Kill after a random number of acknowledged writes: on average writes / kills.
        let left = writes.saturating_sub(total_acked);
        let cycles_left = kills - cycle;
        let mean = left / cycles_left;
        let kill_after = if cycles_left == 1 {
            left
        } else {
            rng.u64(1..=(2 * mean).max(1))
        }
        .max(1);
        let cycle_start = acks.load(Ordering::Acquire);
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Mutex::new(std::mem::take(&mut model)));
        shared.lock().unwrap().in_flight.clear();
        let api: Api<ConfigMap> = Api::namespaced(server.client.clone(), NAMESPACE);
        let tasks: Vec<_> = (0..writers)
            .map(|index| {
                tokio::spawn(writer(
                    api.clone(),
                    index,
                    seed * 1_000 + cycle * 10 + index as u64,
                    Arc::clone(&shared),
                    Arc::clone(&acks),
                    Arc::clone(&stop),
                ))
            })
            .collect();
        while acks.load(Ordering::Acquire) - cycle_start < kill_after {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        // Sometimes a moment later, so kills fall at every point of a write.
        if rng.bool() {
            tokio::time::sleep(Duration::from_micros(rng.u64(0..2_000))).await;
        }
        stop.store(true, Ordering::Release);
        server.child.start_kill().unwrap(); // SIGKILL
        server.child.wait().await.unwrap();
        for task in tasks {
            task.await.unwrap();
        }
        model = Arc::try_unwrap(shared).ok().unwrap().into_inner().unwrap();
        let cycle_acks = acks.load(Ordering::Acquire) - cycle_start;
        total_acked += cycle_acks;
        // Resume watches from acknowledged resourceVersions of this run: its first write, its
        // middle and near its end (the first two may be older than the kept history).
        let cycle_acked: Vec<&Acked> = model.acked[model.acked.len() - cycle_acks as usize..]
            .iter()
            .filter(|acked| acked.rv.is_some())
            .collect();
        let mut resume_from: Vec<Acked> = [0, cycle_acked.len() / 2, cycle_acked.len() * 9 / 10]
            .iter()
            .filter_map(|index| cycle_acked.get(*index).map(|acked| (*acked).clone()))
            .collect();
        resume_from.dedup();

        server = start(dir.path()).await;
        longest_start = longest_start.max(server.started_in);
        if server
            .warnings
            .iter()
            .any(|line| line.contains("damaged tail"))
        {
            truncations += 1;
        }
        let verified = verify(&server.client, &model, &resume_from).await;
        compared = verified.objects;
        totals.resumed += verified.resumed;
        totals.events += verified.events;
        totals.expired += verified.expired;
        // What was in flight is settled now: take what the server has as the truth.
        settle_in_flight(&server.client, &mut model).await;
    }
    server.child.start_kill().unwrap();
    server.child.wait().await.unwrap();
    let elapsed = run_started.elapsed();
    println!(
        "durability: {total_acked} acknowledged writes, {kills} kills (SIGKILL), acknowledged writes lost 0, \
         {compared} objects compared at the end, {} watches resumed from before a kill ({} events, none missed), \
         {} older than the kept history answered 410, damaged tails truncated {truncations}, \
         slowest restart {longest_start:?}, {:.0} acknowledged writes/s, {elapsed:?} in all",
        totals.resumed,
        totals.events,
        totals.expired,
        total_acked as f64 / elapsed.as_secs_f64()
    );
    assert!(totals.resumed > 0, "no watch was resumed");
    assert!(total_acked >= writes, "{total_acked} < {writes}");
}

/// After a verified restart, the in-flight writes' outcomes are whatever the server has.
async fn settle_in_flight(client: &kube::Client, model: &mut Model) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    for flight in std::mem::take(&mut model.in_flight) {
        let name = match flight {
            InFlight::Write { name, .. } | InFlight::Delete { name } => name,
        };
        let now = match api.get_opt(&name).await.unwrap() {
            Some(cm) => Expected::Present {
                value: cm.data.as_ref().unwrap()["value"].clone(),
                rv: rv_of(&cm.metadata),
            },
            None => Expected::Absent,
        };
        model.objects.insert(name, now);
    }
}
