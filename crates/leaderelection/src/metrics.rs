//! The election's Prometheus metrics, under client-go's names.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabel {
    name: String,
}

/// `leader_election_master_status{name}` (1 while this process leads the election `name`, 0
/// otherwise) and `leader_election_slowpath_total{name}` (renewals that had to read the lock
/// first), as client-go exports them.
///
/// ```
/// use prometheus_client::registry::Registry;
/// use ctrlkit_leaderelection::LeaderElectionMetrics;
///
/// let mut registry = Registry::default();
/// let metrics = LeaderElectionMetrics::new(&mut registry);
/// metrics.leader_on("my-controller");
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"leader_election_master_status{name="my-controller"} 1"#));
/// ```
#[derive(Clone, Debug, Default)]
pub struct LeaderElectionMetrics {
    master_status: Family<NameLabel, Gauge>,
    slowpath: Family<NameLabel, Counter>,
}

impl LeaderElectionMetrics {
    /// Registers the metrics in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "leader_election_master_status",
            "1 while this process leads the election 'name', 0 while it follows",
            metrics.master_status.clone(),
        );
        registry.register(
            "leader_election_slowpath",
            "Renewals of the election 'name' that had to read the lock before writing it",
            metrics.slowpath.clone(),
        );
        metrics
    }

    /// Marks this process the leader of `name`.
    pub fn leader_on(&self, name: &str) {
        self.status(name).set(1);
    }

    /// Marks this process a follower of `name`.
    pub fn leader_off(&self, name: &str) {
        self.status(name).set(0);
    }

    /// Counts a renewal that had to read the lock first.
    pub fn slowpath_exercised(&self, name: &str) {
        self.slowpath
            .get_or_create(&NameLabel {
                name: name.to_owned(),
            })
            .inc();
    }

    fn status(&self, name: &str) -> Gauge {
        self.master_status
            .get_or_create(&NameLabel {
                name: name.to_owned(),
            })
            .clone()
    }
}
