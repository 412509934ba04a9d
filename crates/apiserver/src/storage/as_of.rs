//! Lists as of an earlier resourceVersion: the current objects with every change made since
//! undone from the kept history. This is what makes the pages of a list one consistent snapshot
//! (each page of a `continue` chain is read at the first page's resourceVersion) and what serves
//! `resourceVersionMatch=Exact` for a resourceVersion that is not the newest.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use serde_json::Value;

use crate::storage::StoredObject;

use super::{EventType, ListPage, Snapshot, State, Store, StoreError, page_range};
use crate::resource::ResourceKind;

/// The objects, by namespace and name, whose state at the requested resourceVersion differs
/// from the current one: `None` where the object did not exist then.
type Then = BTreeMap<(String, String), Option<Arc<StoredObject>>>;

impl Store {
    /// One page of a list as the objects were at `resource_version`, otherwise as
    /// [`list_page`](Store::list_page). 410 Expired ([`StoreError::Expired`]) if changes since
    /// then are no longer kept; [`StoreError::TooLargeResourceVersion`] if it is newer than
    /// any issued.
    #[allow(clippy::too_many_arguments)]
    pub fn list_page_at(
        &self,
        kind: &ResourceKind,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: usize,
        count_remaining: bool,
        resource_version: u64,
        select: impl FnMut(&Value) -> bool,
    ) -> Result<ListPage, StoreError> {
        let state = self.state.lock();
        if resource_version > state.visible {
            return Err(StoreError::TooLargeResourceVersion {
                requested: resource_version,
                current: state.visible,
            });
        }
        self.page_as_of(
            &state,
            kind,
            namespace,
            after,
            limit,
            count_remaining,
            resource_version,
            select,
        )
    }

    /// [`list_page_at`](Store::list_page_at) on the locked state, for a resourceVersion no
    /// newer than the newest issued: also how readers see a durable store whose newest changes
    /// are still pending (as of the newest visible one).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn page_as_of(
        &self,
        state: &State,
        kind: &ResourceKind,
        namespace: Option<&str>,
        after: Option<(&str, &str)>,
        limit: usize,
        count_remaining: bool,
        resource_version: u64,
        select: impl FnMut(&Value) -> bool,
    ) -> Result<ListPage, StoreError> {
        let expired = || StoreError::Expired {
            requested: resource_version,
            oldest: state.compacted + 1,
        };
        if resource_version < state.compacted {
            return Err(expired());
        }
        let resource = kind.key();
        let namespace = namespace.filter(|_| kind.namespaced);
        let in_scope = |ns: &str| namespace.is_none_or(|wanted| wanted == ns);

        // Newest change first, so the state that stays for a key is the one from before its
        // oldest change after `resource_version`: its state then.
        let mut then = Then::new();
        for event in state
            .history
            .iter()
            .rev()
            .take_while(|event| event.resource_version > resource_version)
        {
            if event.resource != resource || !in_scope(&event.namespace) {
                continue;
            }
            let Some(name) = event.object["metadata"]["name"].as_str() else {
                continue;
            };
            let before = match event.event_type {
                EventType::Added => None,
                EventType::Modified | EventType::Deleted => {
                    // Every stored modification and deletion keeps the state it replaced.
                    Some(event.previous.clone().ok_or_else(expired)?)
                }
            };
            then.insert((event.namespace.clone(), name.to_string()), before);
        }

        let empty = super::Objects::new();
        let current = state.objects.get(&resource).unwrap_or(&empty);
        let Some(range) = page_range(after, namespace) else {
            let none = std::iter::empty();
            return Ok(ListPage::fill(
                resource_version,
                none,
                0,
                false,
                select,
                |_, _| 0,
            ));
        };
        let end = range.1.clone();
        let mut now = current.range(range.clone()).peekable();
        let mut past = then.range(range).peekable();
        // The two key-ordered sequences merged; where both have a key, its past state wins.
        let merged = std::iter::from_fn(|| {
            let take_past = match (now.peek(), past.peek()) {
                (None, None) => return None,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some((now_key, _)), Some((past_key, _))) => {
                    if now_key == past_key {
                        now.next();
                        true
                    } else {
                        past_key < now_key
                    }
                }
            };
            Some(if take_past {
                past.next()
                    .and_then(|(key, object)| Some((key, object.as_ref()?)))
            } else {
                now.next()
            })
        })
        .flatten();
        // What follows a key then: what follows it now, less the keys created since, plus the
        // keys deleted since.
        let remaining_after = |last: &(String, String), taken| {
            let count = || {
                let following = (Bound::Excluded(last.clone()), end);
                let now = current.range(following.clone()).count();
                then.range(following).fold(now, |count, (key, past)| {
                    match (past.is_some(), current.contains_key(key)) {
                        (true, false) => count + 1,
                        (false, true) => count.saturating_sub(1),
                        _ => count,
                    }
                })
            };
            let list = Snapshot {
                resource: &resource,
                namespace,
                resource_version,
            };
            self.count_remaining(list, after, last, taken, count)
        };
        Ok(ListPage::fill(
            resource_version,
            merged,
            limit,
            count_remaining,
            select,
            remaining_after,
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resource::builtin_resources;
    use crate::storage::StoreConfig;

    fn configmaps() -> ResourceKind {
        builtin_resources()
            .into_iter()
            .find(|kind| kind.plural == "configmaps")
            .unwrap()
    }

    fn names_and_values(page: &ListPage) -> Vec<(String, String)> {
        page.items
            .iter()
            .map(|object| {
                (
                    object["metadata"]["name"].as_str().unwrap().to_string(),
                    object["data"]["v"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    }

    fn set(store: &Store, name: &str, value: &str) {
        let kind = configmaps();
        match store.get(&kind, "default", name) {
            Ok(current) => {
                let mut next = (*current).clone();
                next["data"] = json!({"v": value});
                store.update(&kind, "default", name, next, false).unwrap();
            }
            Err(_) => {
                let object = json!({"metadata": {"name": name}, "data": {"v": value}});
                store.create(&kind, "default", object).unwrap();
            }
        }
    }

    #[test]
    fn a_list_at_an_earlier_version_undoes_every_later_change() {
        let store = Store::default();
        let kind = configmaps();
        for name in ["a", "b", "c", "d"] {
            set(&store, name, "1");
        }
        let then = store.resource_version();
        set(&store, "b", "2"); // modified
        store.delete(&kind, "default", "c", None).unwrap(); // deleted
        set(&store, "e", "1"); // added
        set(&store, "a", "2");
        set(&store, "a", "3"); // modified twice
        set(&store, "c", "new"); // deleted, then created again

        let page = store
            .list_page_at(&kind, Some("default"), None, 0, false, then, |_| true)
            .unwrap();
        assert_eq!(page.resource_version, then);
        assert_eq!(
            names_and_values(&page),
            [("a", "1"), ("b", "1"), ("c", "1"), ("d", "1")]
                .map(|(n, v)| (n.to_string(), v.to_string()))
        );
        // Each object exactly as it was, resourceVersion included.
        assert_eq!(
            page.items[0]["metadata"]["resourceVersion"],
            (then - 3).to_string()
        );

        // At the newest version: the current objects.
        let now = store
            .list_page_at(
                &kind,
                Some("default"),
                None,
                0,
                false,
                store.resource_version(),
                |_| true,
            )
            .unwrap();
        assert_eq!(
            names_and_values(&now),
            [("a", "3"), ("b", "2"), ("c", "new"), ("d", "1"), ("e", "1")]
                .map(|(n, v)| (n.to_string(), v.to_string()))
        );
    }

    #[test]
    fn pages_at_one_version_stay_consistent_while_writes_go_on() {
        let store = Store::default();
        let kind = configmaps();
        for index in 0..10 {
            set(&store, &format!("cm-{index}"), "1");
        }
        let first = store
            .list_page_at(&kind, None, None, 4, true, store.resource_version(), |_| {
                true
            })
            .unwrap();
        let at = first.resource_version;
        assert_eq!(
            (first.items.len(), first.more, first.remaining),
            (4, true, 6)
        );
        // Between pages: one deleted ahead of the cursor, one created, one changed.
        store.delete(&kind, "default", "cm-6", None).unwrap();
        set(&store, "cm-55", "1");
        set(&store, "cm-8", "2");
        let mut listed = names_and_values(&first);
        let mut after = listed.last().unwrap().0.clone();
        let mut remaining = Vec::new();
        loop {
            let page = store
                .list_page_at(&kind, None, Some(("default", &after)), 4, true, at, |_| {
                    true
                })
                .unwrap();
            listed.extend(names_and_values(&page));
            remaining.push(page.remaining);
            if !page.more {
                break;
            }
            after = listed.last().unwrap().0.clone();
        }
        let expected: Vec<(String, String)> = (0..10)
            .map(|index| (format!("cm-{index}"), "1".to_string()))
            .collect();
        assert_eq!(listed, expected);
        // Counted in the snapshot too: cm-55 (created since) is not there, cm-6 (deleted
        // since) is.
        assert_eq!(remaining, [2, 0]);
    }

    #[test]
    fn every_page_of_a_long_list_counts_what_follows_it() {
        let store = Store::default();
        let kind = configmaps();
        for index in 0..100 {
            set(&store, &format!("cm-{index:03}"), "1");
        }
        let at = store.resource_version();
        // Changed after the snapshot: neither listed nor counted.
        store.delete(&kind, "default", "cm-050", None).unwrap();
        set(&store, "cm-0505", "1");
        let page_after = |after: Option<&str>| {
            store
                .list_page_at(
                    &kind,
                    None,
                    after.map(|name| ("default", name)),
                    7,
                    true,
                    at,
                    |_| true,
                )
                .unwrap()
        };
        let mut after: Option<String> = None;
        let mut listed = 0;
        loop {
            let page = page_after(after.as_deref());
            listed += page.items.len();
            if !page.more {
                break;
            }
            assert_eq!(page.remaining, 100 - listed, "after {after:?}");
            let last = names_and_values(&page).last().unwrap().0.clone();
            // The next page starts from this count rather than counting again.
            assert_eq!(
                store.remaining_counts.after(
                    Snapshot {
                        resource: &kind.key(),
                        namespace: None,
                        resource_version: at,
                    },
                    ("default", &last)
                ),
                Some(100 - listed)
            );
            // A page asked for again counts the same.
            let again = page_after(after.as_deref());
            assert_eq!((again.items.len(), again.remaining), (7, 100 - listed));
            after = Some(last);
        }
        assert_eq!(listed, 100);
    }

    #[test]
    fn a_version_no_longer_kept_is_expired_and_one_not_issued_too_large() {
        let store = Store::new(StoreConfig {
            history: 3,
            history_age: std::time::Duration::ZERO,
            ..StoreConfig::default()
        });
        let kind = configmaps();
        for index in 0..6 {
            set(&store, &format!("cm-{index}"), "1");
        }
        let current = store.resource_version();
        assert!(
            store
                .list_page_at(&kind, None, None, 0, false, current - 3, |_| true)
                .is_ok()
        );
        assert!(matches!(
            store.list_page_at(&kind, None, None, 0, false, current - 4, |_| true),
            Err(StoreError::Expired { .. })
        ));
        assert!(matches!(
            store.list_page_at(&kind, None, None, 0, false, current + 1, |_| true),
            Err(StoreError::TooLargeResourceVersion { .. })
        ));
    }

    #[test]
    fn selection_and_namespaces_apply_to_the_past_state() {
        let store = Store::default();
        let kind = configmaps();
        set(&store, "a", "keep");
        set(&store, "b", "drop");
        let then = store.resource_version();
        set(&store, "b", "keep");
        let page = store
            .list_page_at(&kind, Some("default"), None, 0, false, then, |object| {
                object["data"]["v"] == "keep"
            })
            .unwrap();
        assert_eq!(
            names_and_values(&page),
            [("a".to_string(), "keep".to_string())]
        );
        let elsewhere = store
            .list_page_at(&kind, Some("kube-system"), None, 0, false, then, |_| true)
            .unwrap();
        assert!(elsewhere.items.is_empty());
        // A continue key from another namespace selects nothing (and cannot invert the range).
        let foreign = store
            .list_page_at(
                &kind,
                Some("default"),
                Some(("zzz", "a")),
                1,
                true,
                then,
                |_| true,
            )
            .unwrap();
        assert!(foreign.items.is_empty() && !foreign.more);
    }
}
