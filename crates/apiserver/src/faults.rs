//! Fault hooks: what the reliability tests of every other crate do to the server (cut watches,
//! fail or delay requests, and, through [`ApiServer`](crate::ApiServer), partition and restart
//! the listener). History compaction is [`Store::compact`](crate::storage::Store::compact).

use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;

/// What an injected fault does to a matching request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer 429 TooManyRequests with `Retry-After: seconds`.
    TooManyRequests {
        /// The seconds the client is told to wait.
        retry_after_seconds: u64,
    },
    /// Answer 500 InternalError.
    InternalError,
    /// Answer 503 ServiceUnavailable.
    ServiceUnavailable,
    /// Serve the request normally after this delay.
    Delay(Duration),
}

#[derive(Debug, Clone)]
struct Rule {
    verb: Option<String>,
    resource: Option<String>,
    remaining: usize,
    fault: Fault,
}

/// The fault hooks of one server.
#[derive(Debug)]
pub struct Faults {
    cut: watch::Sender<u64>,
    /// While true, new watch requests wait before they start.
    held: watch::Sender<bool>,
    rules: Mutex<Vec<Rule>>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            cut: watch::Sender::new(0),
            held: watch::Sender::new(false),
            rules: Mutex::new(Vec::new()),
        }
    }
}

impl Faults {
    /// Ends every open watch stream (clients see the stream end and resume from their last
    /// resourceVersion).
    pub fn cut_watches(&self) {
        self.cut.send_modify(|epoch| *epoch += 1);
    }

    /// Makes the next `count` requests of `verb` (`get`, `list`, `watch`, `create`, `update`,
    /// `patch`, `delete`, `deletecollection`; any if `None`) on `resource` (a plural such as
    /// `configmaps`; any if `None`) meet `fault`.
    pub fn fail_next(
        &self,
        count: usize,
        verb: Option<&str>,
        resource: Option<&str>,
        fault: Fault,
    ) {
        self.rules.lock().push(Rule {
            verb: verb.map(str::to_string),
            resource: resource.map(str::to_string),
            remaining: count,
            fault,
        });
    }

    /// Makes new watch requests wait (before they read any history) until
    /// [`release_watches`](Self::release_watches): with [`cut_watches`](Self::cut_watches), a
    /// backlog of changes can be written and then delivered to resuming watchers all at once.
    pub fn hold_watches(&self) {
        self.held.send_replace(true);
    }

    /// Lets held and new watch requests start.
    pub fn release_watches(&self) {
        self.held.send_replace(false);
    }

    /// Waits while watches are held.
    pub(crate) async fn watch_admitted(&self) {
        let mut held = self.held.subscribe();
        // The sender lives as long as the server; an error means it is going away.
        let _ = held.wait_for(|held| !held).await;
    }

    /// Forgets every pending injected fault and releases held watches.
    pub fn clear(&self) {
        self.rules.lock().clear();
        self.release_watches();
    }

    /// The fault a request of `verb` on `resource` meets, if any (using up one of its count).
    pub(crate) fn take(&self, verb: &str, resource: &str) -> Option<Fault> {
        let mut rules = self.rules.lock();
        let index = rules.iter().position(|rule| {
            rule.remaining > 0
                && rule.verb.as_deref().is_none_or(|v| v == verb)
                && rule.resource.as_deref().is_none_or(|r| r == resource)
        })?;
        let rule = &mut rules[index];
        rule.remaining -= 1;
        let fault = rule.fault;
        if rule.remaining == 0 {
            rules.remove(index);
        }
        Some(fault)
    }

    /// A receiver that changes when watches are cut.
    pub(crate) fn watch_cuts(&self) -> watch::Receiver<u64> {
        self.cut.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_by_verb_and_resource_and_run_out() {
        let faults = Faults::default();
        faults.fail_next(2, Some("list"), Some("pods"), Fault::InternalError);
        faults.fail_next(1, None, None, Fault::ServiceUnavailable);
        assert_eq!(faults.take("list", "pods"), Some(Fault::InternalError));
        assert_eq!(faults.take("get", "pods"), Some(Fault::ServiceUnavailable));
        assert_eq!(faults.take("get", "pods"), None);
        assert_eq!(faults.take("list", "pods"), Some(Fault::InternalError));
        assert_eq!(faults.take("list", "pods"), None);
    }
}
