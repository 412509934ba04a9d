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

    /// One controller's series, looked up once: a reconcile then updates them without
    /// building label sets or taking the families' locks.
    pub(crate) fn for_controller(&self, controller: &str) -> ReconcileMetrics {
        let result = |result: ReconcileResult| {
            self.total
                .get_or_create(&ResultLabels {
                    controller: controller.to_owned(),
                    result: result.label().to_owned(),
                })
                .clone()
        };
        let label = Self::label(controller);
        ReconcileMetrics {
            success: result(ReconcileResult::Success),
            requeue_after: result(ReconcileResult::RequeueAfter),
            error: result(ReconcileResult::Error),
            errors: self.errors.get_or_create(&label).clone(),
            terminal_errors: self.terminal_errors.get_or_create(&label).clone(),
            panics: self.panics.get_or_create(&label).clone(),
            timeouts: self.timeouts.get_or_create(&label).clone(),
            time: self.time.get_or_create(&label).clone(),
            active_workers: self.active_workers.get_or_create(&label).clone(),
        }
    }

    pub(crate) fn set_max_concurrent(&self, controller: &str, workers: usize) {
        self.max_concurrent
            .get_or_create(&Self::label(controller))
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
    }
}

/// The series of one controller (see [`ControllerMetrics::for_controller`]). As
/// controller-runtime does, they all exist, at zero, from the controller's start.
#[derive(Debug)]
pub(crate) struct ReconcileMetrics {
    success: Counter,
    requeue_after: Counter,
    error: Counter,
    errors: Counter,
    terminal_errors: Counter,
    panics: Counter,
    timeouts: Counter,
    time: Histogram,
    active_workers: Gauge,
}

impl ReconcileMetrics {
    pub(crate) fn reconciled(&self, result: ReconcileResult, seconds: f64) {
        match result {
            ReconcileResult::Success => self.success.inc(),
            ReconcileResult::RequeueAfter => self.requeue_after.inc(),
            ReconcileResult::Error => {
                self.errors.inc();
                self.error.inc()
            }
        };
        self.time.observe(seconds);
    }

    pub(crate) fn terminal_error(&self) {
        self.terminal_errors.inc();
    }

    pub(crate) fn panicked(&self) {
        self.panics.inc();
    }

    pub(crate) fn timed_out(&self) {
        self.timeouts.inc();
    }

    pub(crate) fn worker_busy(&self, busy: bool) {
        if busy {
            self.active_workers.inc();
        } else {
            self.active_workers.dec();
        }
    }
}
