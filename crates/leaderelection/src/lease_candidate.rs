//! A candidate in a coordinated leader election: client-go's `LeaseCandidate`.
//!
//! The candidate keeps a `coordination.k8s.io/v1beta1` LeaseCandidate object that names the
//! Lease it wants, its binary and emulation versions and a strategy. It renews
//! `spec.renewTime` every 5 minutes, and at once whenever the API server pings it
//! (`spec.pingTime` later than `renewTime`) to hold an election. The server elects the holder
//! and writes it into the Lease; a [`LeaderElector`](crate::LeaderElector) with
//! [`coordinated`](crate::LeaderElectionConfig::coordinated) set then leads while it holds it.

use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1beta1::{
    LeaseCandidate as CandidateObject, LeaseCandidateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams, WatchEvent, WatchParams};
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

/// How often a candidate renews without being asked (client-go's `requeueInterval`).
pub const CANDIDATE_RENEW_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// The strategy the API server elects by: the oldest emulation version, then binary version.
pub const OLDEST_EMULATION_VERSION: &str = "OldestEmulationVersion";

/// One candidate for a Lease under coordinated leader election; see the module docs.
///
/// ```no_run
/// use ctrlkit_leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseCandidate, LeaseLock, OLDEST_EMULATION_VERSION};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn doc(client: kube::Client) -> Result<(), ctrlkit_leaderelection::ConfigError> {
/// let cancel = CancellationToken::new();
/// let candidate = LeaseCandidate::new(client.clone(), "default", "pod-a", "my-controller")
///     .versions("1.33.0", "1.33.0")
///     .strategy(OLDEST_EMULATION_VERSION);
/// tokio::spawn({ let cancel = cancel.clone(); async move { candidate.run(cancel).await } });
/// let config = LeaderElectionConfig { coordinated: true, ..Default::default() };
/// let lock = LeaseLock::new(client, "default", "my-controller", "pod-a");
/// let callbacks = LeaderCallbacks::new(|_leading| async {}, || {});
/// LeaderElector::new(lock, config, callbacks)?.run(cancel).await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaseCandidate {
    api: Api<CandidateObject>,
    name: String,
    lease_name: String,
    binary_version: String,
    emulation_version: String,
    strategy: String,
}

impl std::fmt::Debug for LeaseCandidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseCandidate")
            .field("name", &self.name)
            .field("lease_name", &self.lease_name)
            .field("binary_version", &self.binary_version)
            .field("emulation_version", &self.emulation_version)
            .field("strategy", &self.strategy)
            .finish_non_exhaustive()
    }
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

impl LeaseCandidate {
    /// The candidate `name` (the identity its elector uses) for the Lease `lease_name`, both in
    /// `namespace`; versions `0.0.0` and the [`OLDEST_EMULATION_VERSION`] strategy until set.
    pub fn new(client: Client, namespace: &str, name: &str, lease_name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            lease_name: lease_name.to_owned(),
            binary_version: "0.0.0".to_owned(),
            emulation_version: "0.0.0".to_owned(),
            strategy: OLDEST_EMULATION_VERSION.to_owned(),
        }
    }

    /// The candidate's binary and emulation versions (semantic versions: `1.33`, `v1.33.0`).
    #[must_use]
    pub fn versions(mut self, binary: &str, emulation: &str) -> Self {
        binary.clone_into(&mut self.binary_version);
        emulation.clone_into(&mut self.emulation_version);
        self
    }

    /// The strategy the candidate asks to be elected by.
    #[must_use]
    pub fn strategy(mut self, strategy: &str) -> Self {
        strategy.clone_into(&mut self.strategy);
        self
    }

    /// Keeps the candidacy until `cancel` fires: creates or renews the LeaseCandidate, then
    /// renews it when pinged and every [`CANDIDATE_RENEW_INTERVAL`]. Failures are retried
    /// after a second.
    pub async fn run(&self, cancel: CancellationToken) {
        loop {
            let renewed = tokio::select! {
                renewed = self.ensure() => renewed,
                () = cancel.cancelled() => return,
            };
            let resource_version = match renewed {
                Ok(version) => version,
                Err(error) => {
                    tracing::info!(candidate = %self.name, %error, "renewing the lease candidate failed");
                    tokio::select! {
                        () = sleep(Duration::from_secs(1)) => continue,
                        () = cancel.cancelled() => return,
                    }
                }
            };
            let due = Instant::now() + CANDIDATE_RENEW_INTERVAL;
            tokio::select! {
                () = self.until_pinged(resource_version, due) => {}
                () = cancel.cancelled() => return,
            }
        }
    }

    /// Creates the candidate object or renews it; its resourceVersion afterwards.
    async fn ensure(&self) -> Result<String, kube::Error> {
        let written = match self.api.get_opt(&self.name).await? {
            None => {
                let candidate = CandidateObject {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: LeaseCandidateSpec {
                        lease_name: self.lease_name.clone(),
                        binary_version: self.binary_version.clone(),
                        emulation_version: Some(self.emulation_version.clone()),
                        strategy: self.strategy.clone(),
                        renew_time: Some(now()),
                        ping_time: None,
                    },
                };
                self.api.create(&PostParams::default(), &candidate).await?
            }
            Some(mut candidate) => {
                candidate.spec.renew_time = Some(now());
                self.api
                    .replace(&self.name, &PostParams::default(), &candidate)
                    .await?
            }
        };
        Ok(written.metadata.resource_version.unwrap_or_default())
    }

    /// Returns when the server pings the candidate, at `due`, or when the watch ends (the
    /// caller renews, which also re-creates a deleted candidate, and watches again).
    async fn until_pinged(&self, resource_version: String, due: Instant) {
        let params = WatchParams::default().fields(&format!("metadata.name={}", self.name));
        let stream = tokio::select! {
            stream = self.api.watch(&params, &resource_version) => stream,
            () = sleep_until(due) => return,
        };
        let Ok(stream) = stream else {
            return;
        };
        let mut stream = std::pin::pin!(stream);
        loop {
            let event = tokio::select! {
                event = stream.next() => event,
                () = sleep_until(due) => return,
            };
            match event {
                Some(Ok(WatchEvent::Modified(candidate) | WatchEvent::Added(candidate))) => {
                    let spec = &candidate.spec;
                    let pinged = match (&spec.ping_time, &spec.renew_time) {
                        (Some(ping), Some(renew)) => ping.0 > renew.0,
                        (Some(_), None) => true,
                        _ => false,
                    };
                    if pinged {
                        return;
                    }
                }
                Some(Ok(WatchEvent::Bookmark(_))) => {}
                _ => return,
            }
        }
    }
}
