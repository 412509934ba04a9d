//! How many objects followed the recent list pages, so that the next page of the same list
//! need not count them again.
//!
//! A page's `remainingItemCount` is the number of objects after its last one in the list's
//! snapshot. Counting them walks every one of them: over the pages of a whole list that is a
//! walk quadratic in its length (10 million steps for 100,000 objects in pages of 500). The
//! next page of the same list starts where the last one ended and reads the same snapshot, so
//! its count is the last one's less the objects it hands out.

use std::collections::VecDeque;

use parking_lot::Mutex;

use crate::resource::ResourceKey;

/// How many page ends are kept: one for each list that may be going on at once.
const KEPT: usize = 32;

/// One list's snapshot: its kind, its scope and the resourceVersion it is read as of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Snapshot<'a> {
    pub(super) resource: &'a ResourceKey,
    /// The namespace listed; `None` for every namespace.
    pub(super) namespace: Option<&'a str>,
    pub(super) resource_version: u64,
}

/// Where one page of a list ended, and how many objects followed it.
#[derive(Debug)]
struct PageEnd {
    resource: ResourceKey,
    namespace: Option<String>,
    resource_version: u64,
    /// The page's last key: namespace (empty when cluster scoped) and name.
    last: (String, String),
    remaining: usize,
}

impl PageEnd {
    fn of(&self, list: Snapshot<'_>) -> bool {
        self.resource_version == list.resource_version
            && self.namespace.as_deref() == list.namespace
            && self.resource == *list.resource
    }
}

/// The ends of the most recent unselective list pages, newest first.
#[derive(Debug, Default)]
pub(super) struct RemainingCounts {
    recent: Mutex<VecDeque<PageEnd>>,
}

impl RemainingCounts {
    /// How many objects of `list` followed the key `after`, if a page that ended there was
    /// counted.
    pub(super) fn after(&self, list: Snapshot<'_>, after: (&str, &str)) -> Option<usize> {
        self.recent
            .lock()
            .iter()
            .find(|end| end.of(list) && end.last.0 == after.0 && end.last.1 == after.1)
            .map(|end| end.remaining)
    }

    /// Records that `remaining` objects of `list` followed the key `last`.
    pub(super) fn record(&self, list: Snapshot<'_>, last: &(String, String), remaining: usize) {
        let mut recent = self.recent.lock();
        // The page before this one in the same list is not asked for again (unless a client
        // repeats a continue token, which then counts once more).
        recent.retain(|end| !end.of(list));
        if recent.len() == KEPT {
            recent.pop_back();
        }
        recent.push_front(PageEnd {
            resource: list.resource.clone(),
            namespace: list.namespace.map(str::to_string),
            resource_version: list.resource_version,
            last: last.clone(),
            remaining,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configmaps() -> ResourceKey {
        crate::resource::builtin_resources()
            .into_iter()
            .find(|kind| kind.plural == "configmaps")
            .unwrap()
            .key()
    }

    fn key(name: &str) -> (String, String) {
        ("default".to_string(), name.to_string())
    }

    fn all(resource: &ResourceKey, resource_version: u64) -> Snapshot<'_> {
        Snapshot {
            resource,
            namespace: None,
            resource_version,
        }
    }

    #[test]
    fn a_count_is_found_only_for_the_same_list_and_key() {
        let counts = RemainingCounts::default();
        let resource = configmaps();
        counts.record(all(&resource, 7), &key("b"), 40);
        assert_eq!(counts.after(all(&resource, 7), ("default", "b")), Some(40));
        assert_eq!(counts.after(all(&resource, 7), ("default", "a")), None);
        assert_eq!(counts.after(all(&resource, 8), ("default", "b")), None);
        assert_eq!(
            counts.after(
                Snapshot {
                    namespace: Some("default"),
                    ..all(&resource, 7)
                },
                ("default", "b")
            ),
            None
        );
        // The list's next page replaces its end.
        counts.record(all(&resource, 7), &key("c"), 30);
        assert_eq!(counts.after(all(&resource, 7), ("default", "b")), None);
        assert_eq!(counts.after(all(&resource, 7), ("default", "c")), Some(30));
    }

    #[test]
    fn only_the_newest_ends_are_kept() {
        let counts = RemainingCounts::default();
        let resource = configmaps();
        for version in 0..KEPT as u64 + 1 {
            counts.record(all(&resource, version), &key("a"), 1);
        }
        assert_eq!(counts.after(all(&resource, 0), ("default", "a")), None);
        assert_eq!(counts.after(all(&resource, 1), ("default", "a")), Some(1));
        assert_eq!(
            counts.after(all(&resource, KEPT as u64), ("default", "a")),
            Some(1)
        );
    }
}
