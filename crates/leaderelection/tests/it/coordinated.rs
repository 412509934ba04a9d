//! Coordinated leader election against the embedded API server: candidates announce
//! themselves with LeaseCandidates, the server elects the one with the oldest emulation
//! version, and when a better candidate arrives the holder's term ends and the lease passes.
//! The server's election runs on wall-clock time, so this runs in real time (a few seconds).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use ctrlkit_leaderelection::{
    LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseCandidate, LeaseLock,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::coordination::v1beta1::LeaseCandidate as CandidateObject;
use kube::Api;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const LEASE: &str = "coordinated";

struct Running {
    leading: Arc<AtomicBool>,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

/// A coordinated elector for the lease `lease` as `id`, its lease 3 s; whether it leads.
fn coordinated_elector(
    client: &kube::Client,
    lease: &str,
    id: &str,
    retry_period: Duration,
) -> (LeaderElector<LeaseLock>, Arc<AtomicBool>) {
    let leading = Arc::new(AtomicBool::new(false));
    let config = LeaderElectionConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period,
        coordinated: true,
        name: lease.into(),
        ..LeaderElectionConfig::default()
    };
    let callbacks = LeaderCallbacks::new(
        {
            let leading = Arc::clone(&leading);
            move |token: CancellationToken| {
                let leading = Arc::clone(&leading);
                async move {
                    leading.store(true, Ordering::SeqCst);
                    token.cancelled().await;
                    leading.store(false, Ordering::SeqCst);
                }
            }
        },
        || {},
    );
    let lock = LeaseLock::new(client.clone(), "default", lease, id);
    (
        LeaderElector::new(lock, config, callbacks).unwrap(),
        leading,
    )
}

/// A candidate `id` of emulation version `emulation`, with its coordinated elector.
fn start(client: &kube::Client, id: &str, emulation: &str) -> Running {
    let cancel = CancellationToken::new();
    let candidate =
        LeaseCandidate::new(client.clone(), "default", id, LEASE).versions("1.34.0", emulation);
    let (elector, leading) = coordinated_elector(client, LEASE, id, Duration::from_millis(500));
    let tasks = vec![
        tokio::spawn({
            let cancel = cancel.clone();
            async move { candidate.run(cancel).await }
        }),
        tokio::spawn({
            let cancel = cancel.clone();
            async move { elector.run(cancel).await }
        }),
    ];
    Running {
        leading,
        cancel,
        tasks,
    }
}

async fn holder(client: &kube::Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    leases
        .get_opt(LEASE)
        .await
        .unwrap()
        .and_then(|lease| lease.spec?.holder_identity)
}

async fn within(limit: Duration, what: &str, mut done: impl AsyncFnMut() -> bool) {
    let end = tokio::time::Instant::now() + limit;
    while !done().await {
        assert!(tokio::time::Instant::now() < end, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_elects_the_oldest_emulation_version_and_hands_over_at_end_of_term() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = kube::Client::new(server.service(), "default");

    let newer = start(&client, "newer", "1.34.0");
    within(Duration::from_secs(10), "newer elected", async || {
        newer.leading.load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(holder(&client).await.as_deref(), Some("newer"));
    let candidates: Api<CandidateObject> = Api::namespaced(client.clone(), "default");
    let announced = candidates.get("newer").await.unwrap();
    assert_eq!(announced.spec.lease_name, LEASE);
    assert_eq!(announced.spec.emulation_version.as_deref(), Some("1.34.0"));

    // An older emulation version is preferred: the holder's term ends, the lease runs out,
    // and the server gives it to the better candidate.
    let older = start(&client, "older", "1.33.0");
    within(Duration::from_secs(15), "older elected", async || {
        older.leading.load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(holder(&client).await.as_deref(), Some("older"));
    within(Duration::from_secs(5), "newer stepped down", async || {
        !newer.leading.load(Ordering::SeqCst)
    })
    .await;

    for running in [newer, older] {
        running.cancel.cancel();
        for task in running.tasks {
            task.await.unwrap();
        }
    }
}

/// client-go's `TestLeaseCandidateAck`: a candidate the server pings renews at once, not at its
/// next 5-minute renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinged_candidate_renews_at_once() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use kube::api::{Patch, PatchParams};

    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = kube::Client::new(server.service(), "default");
    let candidates: Api<CandidateObject> = Api::namespaced(client.clone(), "default");
    let candidate = LeaseCandidate::new(client.clone(), "default", "pinged", "unused-lease")
        .versions("1.34.0", "1.34.0");
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { candidate.run(cancel).await }
    });
    let renewed = |object: &CandidateObject| object.spec.renew_time.clone().map(|time| time.0);
    within(Duration::from_secs(5), "the candidate exists", async || {
        candidates.get_opt("pinged").await.unwrap().is_some()
    })
    .await;
    let first = renewed(&candidates.get("pinged").await.unwrap()).unwrap();

    // The server's ping: a pingTime later than the last renewal.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let ping = jiff::Timestamp::now();
    let patch = serde_json::json!({"spec": {"pingTime": MicroTime(ping)}});
    candidates
        .patch("pinged", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    within(
        Duration::from_secs(2),
        "the renewal after the ping",
        async || {
            let now = candidates.get("pinged").await.unwrap();
            renewed(&now).is_some_and(|renew| renew >= ping && renew > first)
        },
    )
    .await;
    cancel.cancel();
    run.await.unwrap();
}

/// A coordinated elector holding `lease` (held by `id`, `preferred` named by the server or
/// not) for a few seconds: whether it led, and whether it renewed the lease.
async fn hold_coordinated(preferred: Option<&str>) -> (bool, bool) {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use kube::api::{ObjectMeta, PostParams};

    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = kube::Client::new(server.service(), "default");
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let renewed_at = jiff::Timestamp::now();
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some("held".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("a".into()),
            lease_duration_seconds: Some(3),
            acquire_time: Some(MicroTime(renewed_at)),
            renew_time: Some(MicroTime(renewed_at)),
            preferred_holder: preferred.map(str::to_owned),
            // As the server's election writes it: kube refuses a preferred holder without a
            // strategy.
            strategy: preferred.map(|_| "OldestEmulationVersion".to_owned()),
            ..LeaseSpec::default()
        }),
    };
    leases.create(&PostParams::default(), &lease).await.unwrap();

    let (elector, leading) = coordinated_elector(&client, "held", "a", Duration::from_millis(200));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { elector.run(cancel).await }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let spec = leases.get("held").await.unwrap().spec.unwrap();
    let led = leading.load(Ordering::SeqCst);
    cancel.cancel();
    run.await.unwrap();
    let renewed = spec.renew_time.is_some_and(|time| time.0 > renewed_at);
    (led, renewed)
}

/// client-go's `tryCoordinatedRenew`: the holder the server gave the lease to renews it, but
/// not once the server has named a preferred holder (its term is over: the lease runs out and
/// passes on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinated_holder_renews_until_its_lease_is_marked_end_of_term() {
    assert_eq!(hold_coordinated(None).await, (true, true));
    assert_eq!(hold_coordinated(Some("b")).await, (false, false));
}
