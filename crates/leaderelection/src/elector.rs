//! The elector: acquire the lock, renew it, give it up; client-go's `LeaderElector`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until, timeout_at};
use tokio_util::sync::CancellationToken;

use crate::callbacks::LeaderCallbacks;
use crate::clock::WallClock;
use crate::config::{ConfigError, JITTER_FACTOR, LeaderElectionConfig};
use crate::healthz::{CheckError, LeaderCheck};
use crate::metrics::LeaderElectionMetrics;
use crate::record::LeaderElectionRecord;
use crate::resource_lock::ResourceLock;

/// What this candidate last observed of the lock, and when (on its own clock).
#[derive(Debug, Default)]
pub(crate) struct Observed {
    pub(crate) record: LeaderElectionRecord,
    pub(crate) raw: Vec<u8>,
    /// When the record was observed to change; `None` before the first observation (a lease
    /// observed never is expired).
    pub(crate) time: Option<Instant>,
    /// The holder last reported to `on_new_leader`.
    pub(crate) reported_leader: String,
    /// When this candidate's last successful write of the lock started: its own lease runs
    /// from there, whatever reads happened since.
    pub(crate) last_write_started: Option<Instant>,
}

pub(crate) struct Shared<L> {
    pub(crate) lock: L,
    config: LeaderElectionConfig,
    callbacks: LeaderCallbacks,
    pub(crate) observed: Mutex<Observed>,
    metrics: OnceLock<LeaderElectionMetrics>,
    clock: WallClock,
}

/// Runs an election for one candidate; client-go's `LeaderElector`.
///
/// Cloning is cheap and shares the elector, so a health check can hold one while
/// [`run`](Self::run) drives another.
///
/// ```no_run
/// use ctrlkit_leaderelection::{LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseLock};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn doc(client: kube::Client) -> Result<(), ctrlkit_leaderelection::ConfigError> {
/// let lock = LeaseLock::new(client, "default", "my-controller", "pod-a");
/// let callbacks = LeaderCallbacks::new(
///     |leading: CancellationToken| async move {
///         // Reconcile until leadership is lost.
///         leading.cancelled().await;
///     },
///     || println!("no longer leading"),
/// );
/// let elector = LeaderElector::new(lock, LeaderElectionConfig::default(), callbacks)?;
/// elector.run(CancellationToken::new()).await;
/// # Ok(()) }
/// ```
pub struct LeaderElector<L> {
    pub(crate) shared: Arc<Shared<L>>,
}

impl<L> Clone for LeaderElector<L> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<L> std::fmt::Debug for LeaderElector<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.shared.config)
            .field(
                "leader",
                &self.shared.observed.lock().record.holder_identity,
            )
            .finish_non_exhaustive()
    }
}

/// Runs `on_stopped_leading` (and marks the metrics not leading) when dropped, so it runs
/// however `run` ends, also when its future is dropped.
struct StoppedLeading<'a> {
    callbacks: &'a LeaderCallbacks,
    metrics: Option<&'a LeaderElectionMetrics>,
    name: &'a str,
}

impl Drop for StoppedLeading<'_> {
    fn drop(&mut self) {
        if let Some(metrics) = self.metrics {
            metrics.leader_off(self.name);
        }
        (self.callbacks.on_stopped_leading)();
    }
}

/// What a follower's watch tells its acquire loop.
#[derive(Default)]
struct Following {
    /// The lock was seen released: take it now.
    released: Notify,
    /// The observation changed, or the watch broke: work out again when to try.
    changed: Notify,
    /// The watch is open and has delivered the lock's state.
    healthy: AtomicBool,
}

/// Aborts a background task when dropped.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The lease as the record carries it: whole seconds, rounded up, so that followers never
/// count a shorter lease than the leader does (client-go truncates).
fn lease_seconds(lease: Duration) -> i32 {
    let seconds = lease.as_secs() + u64::from(lease.subsec_nanos() > 0);
    i32::try_from(seconds).unwrap_or(i32::MAX)
}

/// `period` stretched by up to `factor × period` at random (client-go's `wait.Jitter`).
fn jitter(period: Duration, factor: f64) -> Duration {
    period + period.mul_f64(fastrand::f64() * factor)
}

impl<L: ResourceLock + 'static> LeaderElector<L> {
    /// An elector for `lock`, after checking `config` as client-go does.
    pub fn new(
        lock: L,
        config: LeaderElectionConfig,
        callbacks: LeaderCallbacks,
    ) -> Result<Self, ConfigError> {
        config.validate(lock.identity())?;
        Ok(Self {
            shared: Arc::new(Shared {
                lock,
                config,
                callbacks,
                observed: Mutex::new(Observed::default()),
                metrics: OnceLock::new(),
                clock: WallClock::new(),
            }),
        })
    }

    /// Reports `leader_election_master_status` and `leader_election_slowpath_total` to
    /// `metrics` (set once; later calls are ignored).
    #[must_use]
    pub fn with_metrics(self, metrics: LeaderElectionMetrics) -> Self {
        let _ = self.shared.metrics.set(metrics);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.shared.config
    }

    /// The lock.
    pub fn lock(&self) -> &L {
        &self.shared.lock
    }

    /// Whether this candidate holds the lock, as last observed.
    pub fn is_leader(&self) -> bool {
        self.shared.observed.lock().record.holder_identity == self.shared.lock.identity()
    }

    /// The holder as last observed (`""` when nobody holds it).
    pub fn get_leader(&self) -> String {
        self.shared.observed.lock().record.holder_identity.clone()
    }

    /// Fails when this candidate leads but has not renewed for longer than the lease duration
    /// plus `max_tolerable_expired_lease`.
    pub fn check(&self, max_tolerable_expired_lease: Duration) -> Result<(), CheckError> {
        if !self.is_leader() {
            return Ok(());
        }
        let last = self.shared.observed.lock().time;
        let overdue = last.is_none_or(|last| {
            last.elapsed() > self.shared.config.lease_duration + max_tolerable_expired_lease
        });
        if overdue {
            return Err(CheckError::RenewalOverdue(self.shared.config.name.clone()));
        }
        Ok(())
    }

    /// Runs the election until `cancel` fires or leadership is lost: acquires the lock (trying
    /// every retry period with jitter, and at once when the watched lock is released or the
    /// observed lease expires), runs `on_started_leading`, renews every retry period, and on the
    /// first renewal that does not succeed within the renew deadline cancels the leader's
    /// token. `on_stopped_leading` runs last, always. With `release_on_cancel`, a leader that is
    /// cancelled empties the holder so the next candidate takes over at once.
    ///
    /// Run one election per elector at a time: clones share the observed state, so two `run`s
    /// of one elector would both believe they lead.
    pub async fn run(&self, cancel: CancellationToken) {
        let _stopped = StoppedLeading {
            callbacks: &self.shared.callbacks,
            metrics: self.shared.metrics.get(),
            name: &self.shared.config.name,
        };
        if !self.acquire(&cancel).await {
            return;
        }
        let leading = cancel.child_token();
        let mut task = AbortOnDrop(tokio::spawn((self.shared.callbacks.on_started_leading)(
            leading.clone(),
        )));
        self.renew(&cancel).await;
        leading.cancel();
        // The leader's work must stop before anyone else can hold the lock: no follower takes
        // it before the lease of this candidate's last write has run out, counted from the
        // moment that write started.
        let expiry = self.own_lease_expiry().unwrap_or_else(Instant::now);
        if timeout_at(expiry, &mut task.0).await.is_err() {
            tracing::warn!(
                lock = %self.shared.lock.describe(),
                "on_started_leading did not stop before the lease ran out; aborting it"
            );
            task.0.abort();
            // Wait until the task is gone (its future dropped), not just told to go.
            let _ = (&mut task.0).await;
        }
        drop(task);
        let config = &self.shared.config;
        self.shared.lock.record_event("stopped leading");
        if config.release_on_cancel {
            self.release().await;
        }
    }

    async fn acquire(&self, cancel: &CancellationToken) -> bool {
        let lock = &self.shared.lock;
        tracing::info!(lock = %lock.describe(), "attempting to acquire the leader lock");
        let following = Arc::new(Following::default());
        let _watcher = self.shared.config.watch_lock.then(|| {
            AbortOnDrop(tokio::spawn(
                self.clone().watch_lock(Arc::clone(&following)),
            ))
        });
        let mut take_released = false;
        loop {
            let attempt = async {
                if take_released {
                    self.try_take_released().await
                } else {
                    self.try_acquire_or_renew().await
                }
            };
            let acquired = tokio::select! {
                acquired = attempt => acquired,
                () = cancel.cancelled() => return false,
            };
            self.maybe_report_transition();
            if acquired {
                lock.record_event("became leader");
                if let Some(metrics) = self.shared.metrics.get() {
                    metrics.leader_on(&self.shared.config.name);
                }
                tracing::info!(lock = %lock.describe(), "acquired the leader lock");
                return true;
            }
            let jittered = Instant::now() + jitter(self.shared.config.retry_period, JITTER_FACTOR);
            take_released = loop {
                // A lease that has already run out and still could not be taken waits a
                // period, like any failed attempt.
                let expiry = self
                    .observed_expiry()
                    .filter(|expiry| *expiry > Instant::now());
                let wake = match expiry {
                    // A healthy watch shows every renewal and release as it happens: nothing
                    // to poll for until the observed lease runs out.
                    Some(expiry) if following.healthy.load(Ordering::Acquire) => expiry,
                    // Polling: try every period, and the moment the lease runs out.
                    Some(expiry) => jittered.min(expiry),
                    None => jittered,
                };
                tokio::select! {
                    () = sleep_until(wake) => break false,
                    () = following.released.notified() => break true,
                    () = following.changed.notified() => {}
                    () = cancel.cancelled() => return false,
                }
            };
        }
    }

    async fn renew(&self, cancel: &CancellationToken) {
        let config = &self.shared.config;
        loop {
            // Never past the lease of the last write: from then on a follower may hold the lock.
            let mut deadline = Instant::now() + config.renew_deadline;
            if let Some(expiry) = self.own_lease_expiry() {
                deadline = deadline.min(expiry);
            }
            let renewed = self.renew_before(deadline, cancel).await;
            self.maybe_report_transition();
            if !renewed {
                if let Some(metrics) = self.shared.metrics.get() {
                    metrics.leader_off(&config.name);
                }
                tracing::info!(lock = %self.shared.lock.describe(), "failed to renew the leader lock");
                return;
            }
            tokio::select! {
                () = sleep(config.retry_period) => {}
                () = cancel.cancelled() => {}
            }
        }
    }

    /// Tries to renew every retry period until it succeeds or `deadline` passes.
    async fn renew_before(&self, deadline: Instant, cancel: &CancellationToken) -> bool {
        loop {
            if cancel.is_cancelled() {
                return false;
            }
            tokio::select! {
                renewed = timeout_at(deadline, self.try_acquire_or_renew()) => match renewed {
                    Ok(true) => return true,
                    // Someone else holds a valid lease: leadership is over now, not at the
                    // deadline (client-go keeps trying until the deadline).
                    Ok(false) if !self.is_leader() => return false,
                    Ok(false) => {}
                    Err(_) => return false,
                },
                () = cancel.cancelled() => return false,
            }
            tokio::select! {
                () = sleep(self.shared.config.retry_period) => {}
                () = sleep_until(deadline) => return false,
                () = cancel.cancelled() => return false,
            }
        }
    }

    /// A fresh record naming this candidate, as of now.
    fn own_record(&self) -> LeaderElectionRecord {
        let now = self.shared.clock.now();
        LeaderElectionRecord {
            holder_identity: self.shared.lock.identity().to_owned(),
            lease_duration_seconds: lease_seconds(self.shared.config.lease_duration),
            acquire_time: Some(now),
            renew_time: Some(now),
            ..LeaderElectionRecord::default()
        }
    }

    /// One round of client-go's `tryAcquireOrRenew`: `true` when this candidate holds the lock
    /// afterwards.
    pub(crate) async fn try_acquire_or_renew(&self) -> bool {
        if self.shared.config.coordinated {
            return self.try_coordinated_renew().await;
        }
        let lock = &self.shared.lock;
        // The lease is judged at the start of the round, as client-go does: a record that
        // changed while it was being read counts as held for this round, whatever its lease.
        let now = Instant::now();
        let mut record = self.own_record();

        // Fast path: the leader with a valid lease writes without reading first.
        if self.is_leader() && self.is_lease_valid(now) {
            let observed = self.shared.observed.lock().record.clone();
            record.acquire_time = observed.acquire_time;
            record.leader_transitions = observed.leader_transitions;
            match lock.update(&record).await {
                Ok(()) => {
                    self.set_observed_record(record, now);
                    return true;
                }
                Err(error) => tracing::debug!(
                    lock = %lock.describe(), %error,
                    "optimistic renewal failed; reading the lock"
                ),
            }
        }

        let (old, old_raw) = match lock.get().await {
            Ok(read) => read,
            Err(error) if error.is_not_found() => {
                return match lock.create(&record).await {
                    Ok(()) => {
                        self.set_observed_record(record, now);
                        true
                    }
                    Err(error) => {
                        tracing::info!(lock = %lock.describe(), %error, "creating the lock failed");
                        false
                    }
                };
            }
            Err(error) => {
                tracing::info!(lock = %lock.describe(), %error, "reading the lock failed");
                return false;
            }
        };

        self.observe(old.clone(), old_raw);
        if !old.holder_identity.is_empty() && self.is_lease_valid(now) && !self.is_leader() {
            tracing::debug!(
                lock = %lock.describe(), holder = %old.holder_identity,
                "the lock is held and has not expired"
            );
            return false;
        }

        if self.is_leader() {
            record.acquire_time = old.acquire_time;
            record.leader_transitions = old.leader_transitions;
            if let Some(metrics) = self.shared.metrics.get() {
                metrics.slowpath_exercised(&self.shared.config.name);
            }
        } else {
            record.leader_transitions = old.leader_transitions.saturating_add(1);
        }

        if let Err(error) = lock.update(&record).await {
            tracing::info!(lock = %lock.describe(), %error, "updating the lock failed");
            return false;
        }
        self.set_observed_record(record, now);
        true
    }

    /// client-go's `tryCoordinatedRenew`: under coordinated election the API server names the
    /// holder; a candidate only renews the lease it was given, and stops renewing (its term
    /// ends, the lease runs out and passes on) once the server names a preferred holder.
    async fn try_coordinated_renew(&self) -> bool {
        let lock = &self.shared.lock;
        let now = Instant::now();
        let (old, old_raw) = match lock.get().await {
            Ok(read) => read,
            Err(error) => {
                tracing::debug!(lock = %lock.describe(), %error, "no lease to renew yet");
                return false;
            }
        };
        self.observe(old.clone(), old_raw);
        if !self.is_lease_valid(now) {
            tracing::debug!(lock = %lock.describe(), "the lease has expired");
            return false;
        }
        if !self.is_leader() {
            return false;
        }
        if !old.preferred_holder.is_empty() {
            tracing::info!(
                lock = %lock.describe(), preferred = %old.preferred_holder,
                "the lease is marked as end of term"
            );
            return false;
        }
        let mut record = self.own_record();
        record.acquire_time = old.acquire_time;
        record.leader_transitions = old.leader_transitions;
        record.strategy = old.strategy.clone();
        if let Some(metrics) = self.shared.metrics.get() {
            metrics.slowpath_exercised(&self.shared.config.name);
        }
        if let Err(error) = lock.update(&record).await {
            tracing::info!(lock = %lock.describe(), %error, "updating the lock failed");
            return false;
        }
        self.set_observed_record(record, now);
        true
    }

    /// Takes a lock the watch saw released, in one write conditional on the watched version.
    async fn try_take_released(&self) -> bool {
        if self.shared.config.coordinated {
            return self.try_coordinated_renew().await;
        }
        let observed = self.shared.observed.lock().record.clone();
        if !observed.holder_identity.is_empty() {
            return self.try_acquire_or_renew().await;
        }
        let mut record = self.own_record();
        record.leader_transitions = observed.leader_transitions.saturating_add(1);
        let write_started = Instant::now();
        match self.shared.lock.update(&record).await {
            Ok(()) => {
                self.set_observed_record(record, write_started);
                true
            }
            Err(error) => {
                tracing::debug!(lock = %self.shared.lock.describe(), %error, "taking the released lock failed");
                false
            }
        }
    }

    /// Writes an empty holder with a 1 s lease, within the renew deadline. Unlike client-go's
    /// `release` (one write, given up on error), a conflict is retried after a fresh read, and
    /// nothing is written unless that read still names this candidate.
    pub(crate) async fn release(&self) -> bool {
        let deadline = Instant::now() + self.shared.config.renew_deadline;
        match timeout_at(deadline, self.try_release()).await {
            Ok(released) => released,
            Err(_) => {
                tracing::warn!(lock = %self.shared.lock.describe(), "releasing the lock timed out");
                false
            }
        }
    }

    async fn try_release(&self) -> bool {
        let lock = &self.shared.lock;
        loop {
            let old = match lock.get().await {
                Ok((old, _)) => old,
                Err(error) => {
                    tracing::warn!(lock = %lock.describe(), %error, "reading the lock to release it failed");
                    return false;
                }
            };
            // The record just read decides, not the last one observed: a leader that lost its
            // lock (a renewal that failed or came too late) must not empty a lock that someone
            // else has taken since. client-go checks its observed record here.
            if !self.is_leader() || old.holder_identity != lock.identity() {
                return true;
            }
            let now = self.shared.clock.now();
            let record = LeaderElectionRecord {
                leader_transitions: old.leader_transitions,
                lease_duration_seconds: 1,
                renew_time: Some(now),
                acquire_time: Some(now),
                ..LeaderElectionRecord::default()
            };
            let write_started = Instant::now();
            match lock.update(&record).await {
                Ok(()) => {
                    self.set_observed_record(record, write_started);
                    return true;
                }
                Err(error) if error.is_conflict() => {
                    tracing::debug!(lock = %lock.describe(), "conflict while releasing; retrying");
                }
                Err(error) => {
                    tracing::warn!(lock = %lock.describe(), %error, "releasing the lock failed");
                    return false;
                }
            }
        }
    }

    /// Follows the lock's changes while this candidate is not leading; wakes the acquire loop
    /// when the lock is released. Falls back to polling alone when the lock cannot be watched.
    async fn watch_lock(self, following: Arc<Following>) {
        let lock = &self.shared.lock;
        loop {
            match lock.watch().await {
                Ok(Some(mut records)) => {
                    while let Some(read) = records.next().await {
                        match read {
                            Ok((record, raw)) => {
                                let is_released = record.holder_identity.is_empty();
                                self.observe(record, raw);
                                following.healthy.store(true, Ordering::Release);
                                self.maybe_report_transition();
                                if is_released {
                                    following.released.notify_one();
                                } else {
                                    following.changed.notify_one();
                                }
                            }
                            Err(error) => {
                                tracing::debug!(lock = %lock.describe(), %error, "watching the lock failed");
                                break;
                            }
                        }
                    }
                }
                Ok(None) => return,
                Err(error) => {
                    tracing::debug!(lock = %lock.describe(), %error, "watching the lock failed");
                }
            }
            following.healthy.store(false, Ordering::Release);
            following.changed.notify_one();
            // Do not hammer a server that ends or refuses watches; polling runs meanwhile.
            sleep(self.shared.config.retry_period).await;
        }
    }

    /// Takes in a record read from the lock: a record different from the last one read
    /// restarts the lease on this candidate's clock.
    pub(crate) fn observe(&self, record: LeaderElectionRecord, raw: Vec<u8>) {
        let mut observed = self.shared.observed.lock();
        if observed.raw != raw {
            observed.record = record;
            observed.raw = raw;
            observed.time = Some(Instant::now());
        }
    }

    /// Takes in a record this candidate wrote, as observed when the write *started*: the server
    /// may have committed it (and followers begun counting its lease) any time after that, so
    /// the leader's own count must not begin later.
    fn set_observed_record(&self, record: LeaderElectionRecord, write_started: Instant) {
        let mut observed = self.shared.observed.lock();
        observed.record = record;
        observed.time = Some(write_started);
        observed.last_write_started = Some(write_started);
    }

    fn is_lease_valid(&self, now: Instant) -> bool {
        self.lease_expiry().is_some_and(|expiry| expiry > now)
    }

    /// When the observed lease runs out on this candidate's clock.
    fn lease_expiry(&self) -> Option<Instant> {
        let observed = self.shared.observed.lock();
        let seconds = u64::try_from(observed.record.lease_duration_seconds).unwrap_or(0);
        observed
            .time
            .map(|time| time + Duration::from_secs(seconds))
    }

    /// When the lease of this candidate's last write runs out, counted from the moment the write
    /// started.
    fn own_lease_expiry(&self) -> Option<Instant> {
        let observed = self.shared.observed.lock();
        observed
            .last_write_started
            .map(|started| started + self.shared.config.lease_duration)
    }

    /// When another holder's observed lease runs out, if someone else holds it.
    fn observed_expiry(&self) -> Option<Instant> {
        let held_by_other = {
            let observed = self.shared.observed.lock();
            !observed.record.holder_identity.is_empty()
                && observed.record.holder_identity != self.shared.lock.identity()
        };
        if held_by_other {
            // Just past the expiry: valid means strictly before it.
            self.lease_expiry()
                .map(|expiry| expiry + Duration::from_millis(1))
        } else {
            None
        }
    }

    /// Calls `on_new_leader` when the observed holder differs from the last one reported.
    pub(crate) fn maybe_report_transition(&self) {
        let leader = {
            let mut observed = self.shared.observed.lock();
            if observed.record.holder_identity == observed.reported_leader {
                return;
            }
            observed.reported_leader = observed.record.holder_identity.clone();
            observed.reported_leader.clone()
        };
        if let Some(on_new_leader) = &self.shared.callbacks.on_new_leader {
            on_new_leader(&leader);
        }
    }
}

impl<L: ResourceLock + 'static> LeaderCheck for LeaderElector<L> {
    fn check(&self, tolerance: Duration) -> Result<(), CheckError> {
        LeaderElector::check(self, tolerance)
    }
}

/// Validates `config` and runs the election until `cancel` fires or leadership is lost;
/// client-go's `RunOrDie`, except that an invalid configuration is returned rather than a panic.
pub async fn run_or_die<L: ResourceLock + 'static>(
    lock: L,
    config: LeaderElectionConfig,
    callbacks: LeaderCallbacks,
    cancel: CancellationToken,
) -> Result<(), ConfigError> {
    LeaderElector::new(lock, config, callbacks)?
        .run(cancel)
        .await;
    Ok(())
}

#[cfg(test)]
mod tests;
