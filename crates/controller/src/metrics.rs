//! Reconcile metrics under controller-runtime's names, so existing dashboards work.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

/// How a reconcile ended, for `controller_runtime_reconcile_total{result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// `Action::done()`.
    Success,
    /// `Action::requeue_after(d)`.
    RequeueAfter,
    /// An error (retried or terminal), a panic or a timeout.
    Error,
}

impl ReconcileResult {
    fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::RequeueAfter => "requeue_after",
            Self::Error => "error",
        }
    }
}

/// `controller_runtime_reconcile_total{controller,result}`,
/// `controller_runtime_reconcile_errors_total`, `controller_runtime_terminal_reconcile_errors_total`,
/// `controller_runtime_reconcile_panics_total`, `controller_runtime_reconcile_timeouts_total`,
/// `controller_runtime_reconcile_time_seconds`, `controller_runtime_active_workers` and
/// `controller_runtime_max_concurrent_reconciles`.
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    total: Family<ResultLabels, Counter>,
    errors: Family<ControllerLabel, Counter>,
    terminal_errors: Family<ControllerLabel, Counter>,
    panics: Family<ControllerLabel, Counter>,
    timeouts: Family<ControllerLabel, Counter>,
    time: Family<ControllerLabel, Histogram>,
    active_workers: Family<ControllerLabel, Gauge>,
    max_concurrent: Family<ControllerLabel, Gauge>,
}

fn reconcile_time_histogram() -> Histogram {
    // controller-runtime's buckets: 5 ms to 60 s.
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
        15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
    ])
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        Self {
            total: Family::default(),
            errors: Family::default(),
            terminal_errors: Family::default(),
            panics: Family::default(),
            timeouts: Family::default(),
            time: Family::new_with_constructor(reconcile_time_histogram),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
        }
    }
}

impl ControllerMetrics {
    /// Registers the metrics in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        let prefixed = registry.sub_registry_with_prefix("controller_runtime");
        prefixed.register(
            "reconcile",
            "Reconciles per controller and result",
            metrics.total.clone(),
        );
        prefixed.register(
            "reconcile_errors",
            "Reconciles that ended in an error, a panic or a timeout",
            metrics.errors.clone(),
        );
        prefixed.register(
            "terminal_reconcile_errors",
            "Reconciles that ended in a terminal error (not retried)",
            metrics.terminal_errors.clone(),
        );
        prefixed.register(
            "reconcile_panics",
            "Reconciles that panicked",
            metrics.panics.clone(),
        );
        prefixed.register(
            "reconcile_timeouts",
            "Reconciles that ran past the controller's reconcile timeout",
            metrics.timeouts.clone(),
        );
        prefixed.register(
            "reconcile_time_seconds",
            "How long each reconcile took",
            metrics.time.clone(),
        );
        prefixed.register(
            "active_workers",
            "Workers reconciling right now",
            metrics.active_workers.clone(),
        );
        prefixed.register(
            "max_concurrent_reconciles",
            "The number of workers",
            metrics.max_concurrent.clone(),
        );
        metrics
    }

    fn label(controller: &str) -> ControllerLabel {
        ControllerLabel {
            controller: controller.to_owned(),
        }
    }

    pub(crate) fn reconciled(&self, controller: &str, result: ReconcileResult, seconds: f64) {
        self.total
            .get_or_create(&ResultLabels {
                controller: controller.to_owned(),
                result: result.label().to_owned(),
            })
            .inc();
        if result == ReconcileResult::Error {
            self.errors.get_or_create(&Self::label(controller)).inc();
        }
        self.time
            .get_or_create(&Self::label(controller))
            .observe(seconds);
    }

    pub(crate) fn terminal_error(&self, controller: &str) {
        self.terminal_errors
            .get_or_create(&Self::label(controller))
            .inc();
    }

    pub(crate) fn panicked(&self, controller: &str) {
        self.panics.get_or_create(&Self::label(controller)).inc();
    }

    pub(crate) fn timed_out(&self, controller: &str) {
        self.timeouts.get_or_create(&Self::label(controller)).inc();
    }

    pub(crate) fn worker_busy(&self, controller: &str, busy: bool) {
        let gauge = self.active_workers.get_or_create(&Self::label(controller));
        if busy {
            gauge.inc();
        } else {
            gauge.dec();
        }
    }

    pub(crate) fn set_max_concurrent(&self, controller: &str, workers: usize) {
        self.max_concurrent
            .get_or_create(&Self::label(controller))
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
    }
}
