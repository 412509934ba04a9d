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

/// The ends of the most recent unselective list pages, newest first.
#[derive(Debug, Default)]
pub(super) struct RemainingCounts {
    recent: Mutex<VecDeque<PageEnd>>,
}

impl RemainingCounts {
    /// How many objects of `resource` in `namespace` (every namespace when `None`) followed
    /// the key `after` as of `resource_version`, if a page that ended there was counted.
    pub(super) fn after(
        &self,
        resource: &ResourceKey,
        namespace: Option<&str>,
        resource_version: u64,
        after: (&str, &str),
    ) -> Option<usize> {
        self.recent
            .lock()
            .iter()
            .find(|end| {
                end.resource_version == resource_version
                    && end.last.0 == after.0
                    && end.last.1 == after.1
                    && end.namespace.as_deref() == namespace
                    && end.resource == *resource
            })
            .map(|end| end.remaining)
    }

    /// Records that `remaining` objects followed the key `last` as of `resource_version`.
    pub(super) fn record(
        &self,
        resource: &ResourceKey,
        namespace: Option<&str>,
        resource_version: u64,
        last: &(String, String),
        remaining: usize,
    ) {
        let mut recent = self.recent.lock();
        // The page before this one in the same list is not asked for again (unless a client
        // repeats a continue token, which then counts once more).
        recent.retain(|end| {
            !(end.resource_version == resource_version
                && end.namespace.as_deref() == namespace
                && end.resource == *resource)
        });
        if recent.len() == KEPT {
            recent.pop_back();
        }
        recent.push_front(PageEnd {
            resource: resource.clone(),
            namespace: namespace.map(str::to_string),
            resource_version,
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

    #[test]
    fn a_count_is_found_only_for_the_same_list_and_key() {
        let counts = RemainingCounts::default();
        let resource = configmaps();
        counts.record(&resource, None, 7, &key("b"), 40);
        assert_eq!(counts.after(&resource, None, 7, ("default", "b")), Some(40));
        assert_eq!(counts.after(&resource, None, 7, ("default", "a")), None);
        assert_eq!(counts.after(&resource, None, 8, ("default", "b")), None);
        assert_eq!(
            counts.after(&resource, Some("default"), 7, ("default", "b")),
            None
        );
        // The list's next page replaces its end.
        counts.record(&resource, None, 7, &key("c"), 30);
        assert_eq!(counts.after(&resource, None, 7, ("default", "b")), None);
        assert_eq!(counts.after(&resource, None, 7, ("default", "c")), Some(30));
    }

    #[test]
    fn only_the_newest_ends_are_kept() {
        let counts = RemainingCounts::default();
        let resource = configmaps();
        for version in 0..KEPT as u64 + 1 {
            counts.record(&resource, None, version, &key("a"), 1);
        }
        assert_eq!(counts.after(&resource, None, 0, ("default", "a")), None);
        assert_eq!(counts.after(&resource, None, 1, ("default", "a")), Some(1));
        assert_eq!(
            counts.after(&resource, None, KEPT as u64, ("default", "a")),
            Some(1)
        );
    }
}
