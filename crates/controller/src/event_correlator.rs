//! client-go's `EventCorrelator`, for `events.k8s.io/v1` Events: repeats become a series,
//! floods of similar events are combined, and one object's event storm is throttled.
//!
//! Three steps, in client-go's order, each keyed by what the events have in common:
//! 1. **aggregate**: events alike but for their note (same object, type, reason, reporter) are
//!    counted by distinct note within a 10-minute window that each such event renews; the 10th
//!    distinct note and every new note after it become one combined event, `(combined from
//!    similar events): NOTE`;
//! 2. **observe**: an event identical to one already written (same object, type, reason,
//!    action, note) is a repeat: the written event's series count goes up instead of a new
//!    event being written;
//! 3. **filter**: per object and type, a token bucket of 25 refilled once every 5 minutes; an
//!    event beyond it is dropped.
//!
//! Each cache keeps at most 4,096 keys, the oldest forgotten first.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// client-go's `defaultAggregateMaxEvents`.
pub(crate) const AGGREGATE_MAX_EVENTS: usize = 10;
/// client-go's `defaultAggregateIntervalInSeconds`.
pub(crate) const AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// client-go's `defaultSpamBurst`.
pub(crate) const SPAM_BURST: u32 = 25;
/// client-go's `defaultSpamQPS` (1/300): one token every 5 minutes.
pub(crate) const SPAM_REFILL: Duration = Duration::from_secs(300);
/// client-go's `maxLruCacheEntries`.
const CACHE_ENTRIES: usize = 4096;
/// client-go's prefix of a combined event's message.
pub(crate) const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// What an event is, for correlation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct EventKeys {
    /// The object and the type: the spam key.
    pub(crate) object_and_type: String,
    /// Plus reason and reporter: events alike but for their note.
    pub(crate) similar: String,
    /// Plus action and note: the same event again.
    pub(crate) identical: String,
}

/// What to do with an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Correlation {
    /// Write a new event with this note; remember it under `key`.
    Create { note: String, key: String },
    /// The event written as `name` happened again: its series count is now `count`.
    Repeat {
        name: String,
        count: i32,
        note: String,
        key: String,
    },
    /// Dropped by the spam filter.
    Skip,
}

/// A map that forgets its oldest key past `CACHE_ENTRIES`.
#[derive(Debug)]
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K: Clone + Eq + Hash, V> Default for Bounded<K, V> {
    fn default() -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<K: Clone + Eq + Hash, V> Bounded<K, V> {
    fn entry(&mut self, key: &K, new: impl FnOnce() -> V) -> &mut V {
        if !self.map.contains_key(key) {
            if self.map.len() >= CACHE_ENTRIES
                && let Some(oldest) = self.order.pop_front()
            {
                self.map.remove(&oldest);
            }
            self.order.push_back(key.clone());
        }
        self.map.entry(key.clone()).or_insert_with(new)
    }
}

struct Aggregate {
    notes: HashSet<String>,
    last: Instant,
}

struct Observed {
    name: Option<String>,
    count: i32,
}

struct Bucket {
    tokens: u32,
    refilled: Instant,
}

/// The correlator's state; one per recorder.
#[derive(Default)]
pub(crate) struct EventCorrelator {
    aggregates: Bounded<String, Aggregate>,
    observed: Bounded<String, Observed>,
    buckets: Bounded<String, Bucket>,
}

impl std::fmt::Debug for EventCorrelator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventCorrelator")
            .field("observed", &self.observed.map.len())
            .finish_non_exhaustive()
    }
}

impl EventCorrelator {
    /// Correlates an event with `keys` and `note` at `now`.
    pub(crate) fn correlate(&mut self, keys: &EventKeys, note: &str, now: Instant) -> Correlation {
        let (note, key) = self.aggregate(keys, note, now);
        let observed = self.observed.entry(&key, || Observed {
            name: None,
            count: 0,
        });
        observed.count = observed.count.saturating_add(1);
        let repeat = observed.name.clone().map(|name| (name, observed.count));
        if !self.allow(&keys.object_and_type, now) {
            return Correlation::Skip;
        }
        match repeat {
            Some((name, count)) => Correlation::Repeat {
                name,
                count,
                note,
                key,
            },
            None => Correlation::Create { note, key },
        }
    }

    /// Remembers that the event correlated under `key` was written as `name`.
    pub(crate) fn written(&mut self, key: &str, name: &str) {
        let observed = self.observed.entry(&key.to_owned(), || Observed {
            name: None,
            count: 1,
        });
        observed.name = Some(name.to_owned());
    }

    /// Forgets the event under `key` (it is gone from the server): the next one is created.
    pub(crate) fn forget(&mut self, key: &str) {
        if let Some(observed) = self.observed.map.get_mut(key) {
            observed.name = None;
            observed.count = 1;
        }
    }

    fn aggregate(&mut self, keys: &EventKeys, note: &str, now: Instant) -> (String, String) {
        let record = self.aggregates.entry(&keys.similar, || Aggregate {
            notes: HashSet::new(),
            last: now,
        });
        if now.saturating_duration_since(record.last) > AGGREGATE_INTERVAL {
            record.notes.clear();
        }
        record.notes.insert(note.to_owned());
        record.last = now;
        if record.notes.len() < AGGREGATE_MAX_EVENTS {
            return (note.to_owned(), keys.identical.clone());
        }
        // Keep the set one short of the limit: every new note from now on is combined, while
        // a note still remembered passes on its own (client-go's `PopAny`).
        if let Some(any) = record.notes.iter().find(|kept| *kept != note).cloned() {
            record.notes.remove(&any);
        }
        (format!("{COMBINED_PREFIX}{note}"), keys.similar.clone())
    }

    fn allow(&mut self, key: &str, now: Instant) -> bool {
        let bucket = self.buckets.entry(&key.to_owned(), || Bucket {
            tokens: SPAM_BURST,
            refilled: now,
        });
        let elapsed = now.saturating_duration_since(bucket.refilled);
        let earned = elapsed.as_secs() / SPAM_REFILL.as_secs();
        if earned > 0 {
            let earned = u32::try_from(earned).unwrap_or(u32::MAX);
            bucket.tokens = bucket.tokens.saturating_add(earned).min(SPAM_BURST);
            bucket.refilled += SPAM_REFILL.saturating_mul(earned);
        }
        if bucket.tokens == 0 {
            return false;
        }
        bucket.tokens -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(reason: &str, note: &str) -> EventKeys {
        EventKeys {
            object_and_type: "pod/a Normal".into(),
            similar: format!("pod/a Normal {reason}"),
            identical: format!("pod/a Normal {reason} {note}"),
        }
    }

    #[test]
    fn the_tenth_distinct_note_is_combined_and_repeats_count() {
        let now = Instant::now();
        let mut correlator = EventCorrelator::default();
        for i in 0..9 {
            let note = format!("note {i}");
            let Correlation::Create { note: written, key } =
                correlator.correlate(&keys("R", &note), &note, now)
            else {
                panic!("event {i} not created");
            };
            assert_eq!(written, note);
            correlator.written(&key, &format!("e{i}"));
        }
        let Correlation::Create { note, key } =
            correlator.correlate(&keys("R", "note 9"), "note 9", now)
        else {
            panic!("the tenth is not created");
        };
        assert_eq!(note, "(combined from similar events): note 9");
        correlator.written(&key, "combined");
        let again = correlator.correlate(&keys("R", "note 10"), "note 10", now);
        assert_eq!(
            again,
            Correlation::Repeat {
                name: "combined".into(),
                count: 2,
                note: "(combined from similar events): note 10".into(),
                key,
            }
        );
        // Another reason is not similar.
        assert!(matches!(
            correlator.correlate(&keys("Other", "x"), "x", now),
            Correlation::Create { .. }
        ));
    }

    #[test]
    fn twenty_five_events_per_object_then_one_every_five_minutes() {
        let start = Instant::now();
        let mut correlator = EventCorrelator::default();
        let mut created = 0;
        for i in 0..30 {
            let reason = format!("R{i}");
            if correlator.correlate(&keys(&reason, "n"), "n", start) != Correlation::Skip {
                created += 1;
            }
        }
        assert_eq!(created, SPAM_BURST);
        let later = start + SPAM_REFILL;
        assert_ne!(
            correlator.correlate(&keys("Z", "n"), "n", later),
            Correlation::Skip
        );
        assert_eq!(
            correlator.correlate(&keys("Y", "n"), "n", later),
            Correlation::Skip
        );
    }
}
