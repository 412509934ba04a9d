//! Coordinated leader election, as kube-apiserver's leader-election controller runs it: the
//! server elects the holder of a Lease among the LeaseCandidates that name it.
//!
//! Candidates (`coordination.k8s.io/v1beta1` LeaseCandidates) state their binary and emulation
//! versions and a strategy, and renew `spec.renewTime` while they live and whenever the server
//! pings them (`spec.pingTime` later than `renewTime`). For each Lease with live candidates
//! (renewed within 30 minutes) the server holds an election when the Lease is missing, expired
//! or unheld, a candidate's renewal is over 15 minutes old, or a better candidate than the
//! holder appeared: it pings the candidates that have not renewed within 5 seconds, waits up to
//! 5 seconds for their answers, and elects among those that answered. Under the
//! `OldestEmulationVersion` strategy the best candidate has the oldest emulation version, then
//! the oldest binary version, then the oldest creation. A free or expired Lease goes to the
//! electee at once (5-second lease); a held one gets `preferredHolder`, and its holder is
//! expected to stop renewing (end of term) so the Lease expires and passes on.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::App;
use crate::resource::ResourceKind;
use crate::storage::{StoreError, StoredObject};

const GROUP: &str = "coordination.k8s.io";
/// How long candidates have to answer a ping (kube's `electionDuration`).
const ELECTION_DURATION: SignedDuration = SignedDuration::from_secs(5);
/// A candidate not renewed for this long is not a candidate (kube's
/// `leaseCandidateValidDuration`); at half of it an election refreshes them all.
const CANDIDATE_VALID: SignedDuration = SignedDuration::from_secs(30 * 60);
/// The lease an electee is given (kube's `defaultLeaseDurationSeconds`).
const ELECTED_LEASE_SECONDS: i64 = 5;
/// The only strategy the server elects for.
const OLDEST_EMULATION_VERSION: &str = "OldestEmulationVersion";

fn kind(app: &App, plural: &str, version: &str) -> Option<ResourceKind> {
    let versions = app.registry.all_versions(GROUP, plural);
    versions
        .iter()
        .find(|kind| kind.version == version)
        .or(versions.first())
        .cloned()
}

/// `at` later by `duration`, the end of time if that is past it.
fn plus(at: Timestamp, duration: SignedDuration) -> Timestamp {
    at.saturating_add(duration).unwrap_or(Timestamp::MAX)
}

fn time(value: &Value) -> Option<Timestamp> {
    value
        .as_str()
        .and_then(|text| Timestamp::from_str(text).ok())
}

/// `metav1.MicroTime`'s text.
fn micro_time(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// A version as blang/semver's `ParseTolerant` reads it: an optional `v`, missing minor and
/// patch taken as 0; a pre-release sorts before its release.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    numbers: [u64; 3],
    pre: Option<String>,
}

impl Version {
    fn parse(text: &str) -> Option<Self> {
        let text = text.trim().trim_start_matches('v');
        let (core, pre) = match text.split_once('-') {
            Some((core, pre)) => (core, Some(pre.to_owned())),
            None => (text, None),
        };
        let core = core.split('+').next().unwrap_or(core);
        let mut numbers = [0; 3];
        let parts: Vec<&str> = core.split('.').collect();
        if parts.is_empty() || parts.len() > 3 {
            return None;
        }
        for (slot, part) in numbers.iter_mut().zip(&parts) {
            *slot = part.parse().ok()?;
        }
        Some(Self { numbers, pre })
    }

    fn or_zero(text: Option<&str>) -> Self {
        text.and_then(Self::parse).unwrap_or(Self {
            numbers: [0; 3],
            pre: None,
        })
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        self.numbers
            .cmp(&other.numbers)
            .then_with(|| match (&self.pre, &other.pre) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(a), Some(b)) => a.cmp(b),
            })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One LeaseCandidate, as the election reads it.
struct Candidate {
    object: Arc<StoredObject>,
    name: String,
    binary: Option<String>,
    emulation: Option<String>,
    strategy: String,
    created: Option<Timestamp>,
    renewed: Option<Timestamp>,
    pinged: Option<Timestamp>,
}

impl Candidate {
    fn read(object: Arc<StoredObject>) -> Option<Self> {
        let spec = &object["spec"];
        Some(Self {
            name: object["metadata"]["name"].as_str()?.to_owned(),
            binary: spec["binaryVersion"].as_str().map(str::to_owned),
            emulation: spec["emulationVersion"].as_str().map(str::to_owned),
            strategy: spec["strategy"].as_str().unwrap_or_default().to_owned(),
            created: time(&object["metadata"]["creationTimestamp"]),
            renewed: time(&spec["renewTime"]),
            pinged: time(&spec["pingTime"]),
            object,
        })
    }

    fn eligible(&self) -> bool {
        self.emulation.as_deref().and_then(Version::parse).is_some()
            && self.binary.as_deref().and_then(Version::parse).is_some()
    }

    /// Less is better: the oldest emulation version, binary version, creation.
    fn rank(&self, other: &Self) -> Ordering {
        Version::or_zero(self.emulation.as_deref())
            .cmp(&Version::or_zero(other.emulation.as_deref()))
            .then_with(|| {
                Version::or_zero(self.binary.as_deref())
                    .cmp(&Version::or_zero(other.binary.as_deref()))
            })
            .then_with(|| {
                if self.created > other.created {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            })
    }
}

fn best<'a>(candidates: impl IntoIterator<Item = &'a Candidate>) -> Option<&'a Candidate> {
    candidates
        .into_iter()
        .filter(|candidate| candidate.eligible())
        .fold(None, |best: Option<&Candidate>, candidate| match best {
            Some(best) if best.rank(candidate) != Ordering::Greater => Some(best),
            _ => Some(candidate),
        })
}

/// The strategy of the candidates with the highest binary version; `None` when two of them
/// disagree.
fn strategy(candidates: &[&Candidate]) -> Option<String> {
    let (first, rest) = candidates.split_first()?;
    let mut strategy = first.strategy.clone();
    let mut highest = Version::or_zero(first.binary.as_deref());
    for candidate in rest {
        let version = Version::or_zero(candidate.binary.as_deref());
        match highest.cmp(&version) {
            Ordering::Less => {
                strategy = candidate.strategy.clone();
                highest = version;
            }
            Ordering::Equal if candidate.strategy != strategy => return None,
            _ => {}
        }
    }
    Some(strategy)
}

fn lease_expired(lease: &Value, now: Timestamp) -> bool {
    let renewed = time(&lease["spec"]["renewTime"]);
    let seconds = lease["spec"]["leaseDurationSeconds"].as_i64();
    match (renewed, seconds) {
        (Some(renewed), Some(seconds)) => plus(renewed, SignedDuration::from_secs(seconds)) < now,
        _ => true,
    }
}

fn holder(lease: &Value) -> Option<&str> {
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|holder| !holder.is_empty())
}

/// Runs one step of every coordinated election the candidates call for.
pub(crate) fn elect_coordinated_leaders(app: &App) {
    let Some(candidate_kind) = kind(app, "leasecandidates", "v1beta1") else {
        return;
    };
    let objects = app.store.list_latest(&candidate_kind, None);
    if objects.is_empty() {
        return;
    }
    let Some(lease_kind) = kind(app, "leases", "v1") else {
        return;
    };
    let now = Timestamp::now();
    let mut elections: BTreeMap<(String, String), Vec<Candidate>> = BTreeMap::new();
    for object in objects {
        let namespace = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let Some(lease) = object["spec"]["leaseName"].as_str().map(str::to_owned) else {
            continue;
        };
        let Some(candidate) = Candidate::read(object) else {
            continue;
        };
        let live = candidate
            .renewed
            .is_some_and(|renewed| plus(renewed, CANDIDATE_VALID) >= now);
        if live {
            elections
                .entry((namespace, lease))
                .or_default()
                .push(candidate);
        }
    }
    for ((namespace, lease), candidates) in elections {
        let step = Election {
            app,
            candidate_kind: &candidate_kind,
            lease_kind: &lease_kind,
            namespace: &namespace,
            lease: &lease,
            now,
        };
        if let Err(error) = step.run(&candidates) {
            tracing::debug!(%error, namespace, lease, "coordinated election step failed");
        }
    }
}

struct Election<'a> {
    app: &'a App,
    candidate_kind: &'a ResourceKind,
    lease_kind: &'a ResourceKind,
    namespace: &'a str,
    lease: &'a str,
    now: Timestamp,
}

impl Election<'_> {
    fn current_lease(&self) -> Option<Arc<StoredObject>> {
        self.app
            .store
            .get(self.lease_kind, self.namespace, self.lease)
            .ok()
    }

    fn needed(&self, candidates: &[Candidate]) -> bool {
        let Some(lease) = self.current_lease() else {
            return true;
        };
        if lease_expired(&lease, self.now) || holder(&lease).is_none() {
            return true;
        }
        let stale = candidates.iter().any(|candidate| {
            candidate
                .renewed
                .is_some_and(|renewed| plus(renewed, CANDIDATE_VALID / 2) < self.now)
        });
        if stale {
            return true;
        }
        let all: Vec<&Candidate> = candidates.iter().collect();
        if strategy(&all).as_deref() != Some(OLDEST_EMULATION_VERSION) {
            return false;
        }
        match best(candidates) {
            None => false,
            Some(electee) => holder(&lease) != Some(electee.name.as_str()),
        }
    }

    fn run(&self, candidates: &[Candidate]) -> Result<(), StoreError> {
        if !self.needed(candidates) {
            return Ok(());
        }
        // Ask the candidates that have not renewed lately to answer; wait for those asked.
        let mut can_vote = true;
        for candidate in candidates {
            let waiting = match (candidate.pinged, candidate.renewed) {
                (Some(pinged), Some(renewed)) => {
                    plus(pinged, ELECTION_DURATION) > self.now && renewed < pinged
                }
                _ => false,
            };
            if waiting {
                can_vote = false;
                continue;
            }
            if candidate
                .renewed
                .is_some_and(|renewed| plus(renewed, ELECTION_DURATION) > self.now)
            {
                continue;
            }
            let ping_again = match candidate.pinged {
                None => true,
                Some(pinged) => {
                    plus(pinged, ELECTION_DURATION) < self.now
                        && candidate.renewed.is_some_and(|renewed| pinged < renewed)
                }
            };
            if ping_again {
                let mut pinged = Value::clone(&candidate.object);
                pinged["spec"]["pingTime"] = json!(micro_time(self.now));
                self.app.store.update(
                    self.candidate_kind,
                    self.namespace,
                    &candidate.name,
                    pinged,
                    false,
                )?;
                can_vote = false;
            }
        }
        if !can_vote {
            return Ok(());
        }
        let answered: Vec<&Candidate> = candidates
            .iter()
            .filter(|candidate| {
                candidate
                    .renewed
                    .is_some_and(|renewed| plus(renewed, ELECTION_DURATION) > self.now)
            })
            .collect();
        if answered.is_empty() {
            return Ok(());
        }
        let Some(strategy) = strategy(&answered) else {
            return Ok(());
        };
        let electee = if strategy == OLDEST_EMULATION_VERSION {
            best(answered.iter().copied()).map(|candidate| candidate.name.clone())
        } else {
            // Another controller elects for other strategies; the Lease is still made.
            None
        };
        self.write_lease(&strategy, electee)
    }

    fn write_lease(&self, strategy: &str, electee: Option<String>) -> Result<(), StoreError> {
        let now = json!(micro_time(self.now));
        let Some(existing) = self.current_lease() else {
            let mut spec = json!({
                "strategy": strategy,
                "leaseDurationSeconds": ELECTED_LEASE_SECONDS,
                "renewTime": now,
            });
            if let Some(electee) = &electee {
                spec["holderIdentity"] = json!(electee);
            }
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.lease, "namespace": self.namespace},
                "spec": spec,
            });
            self.app
                .store
                .create(self.lease_kind, self.namespace, lease)?;
            return Ok(());
        };
        let mut lease = Value::clone(&existing);
        if !lease["spec"].is_object() {
            lease["spec"] = json!({});
        }
        if lease["spec"]["strategy"].as_str() != Some(strategy) {
            lease["spec"]["strategy"] = json!(strategy);
        }
        let current = holder(&existing).map(str::to_owned);
        let expired = lease_expired(&existing, self.now);
        match &electee {
            Some(electee)
                if current.is_none() || (expired && current.as_ref() != Some(electee)) =>
            {
                let spec = &mut lease["spec"];
                if let Some(spec) = spec.as_object_mut() {
                    spec.remove("preferredHolder");
                    spec.remove("acquireTime");
                }
                spec["holderIdentity"] = json!(electee);
                spec["renewTime"] = now;
                spec["leaseDurationSeconds"] = json!(ELECTED_LEASE_SECONDS);
            }
            Some(electee) if current.as_ref() != Some(electee) => {
                lease["spec"]["preferredHolder"] = json!(electee);
            }
            _ => {}
        }
        if lease != **existing {
            self.app
                .store
                .update(self.lease_kind, self.namespace, self.lease, lease, false)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_tolerant_semver() {
        let v = |text| Version::parse(text).unwrap();
        assert_eq!(v("1.33"), v("v1.33.0"));
        assert!(v("1.32.9") < v("1.33"));
        assert!(v("1.33.0-alpha.1") < v("1.33.0"));
        assert!(Version::parse("one").is_none());
    }
}
