//! Which verbs clients asked for on which resources: what a client's RBAC role must grant.
//!
//! kube-apiserver authorizes each request by its verb (`get`, `list`, `watch`, `create`,
//! `update`, `patch`, `delete`, `deletecollection`), API group and resource, a subresource
//! written `resource/subresource` (`foos/status`). This server does not authorize, but it
//! notes each distinct triple it was asked for, so that a test can check a controller's
//! ClusterRole against what the controller really does. The triples are bounded: verbs are
//! those eight, resources and subresources those the server serves (or served: a CRD's stay
//! noted after it is deleted, until [`Accesses::clear`]).
//!
//! They are also noted per user, the user being the one a request impersonates
//! (`Impersonate-User`, as kube-client's `Config::auth_info.impersonate` sends it): a test
//! runs its controller as its service account (`system:serviceaccount:NAMESPACE:NAME`) and
//! reads that user's accesses apart from its own. At most [`MAX_USERS`] users, of names up to
//! [`MAX_USER_NAME`] bytes, are told apart: the names come from request headers.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use parking_lot::Mutex;

/// One verb on one resource, as an RBAC rule names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    /// The API group; empty for the core group.
    pub group: String,
    /// The resource's plural, with `/subresource` for a subresource (`deployments/scale`).
    pub resource: String,
    /// The verb.
    pub verb: String,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "\"\""
        } else {
            &self.group
        };
        write!(f, "{} {group}/{}", self.verb, self.resource)
    }
}

/// How many impersonated users' accesses are kept apart; later users' accesses are only in
/// [`Accesses::seen`]. Users come from request headers, so their number is bounded.
pub const MAX_USERS: usize = 256;

/// The longest user name whose accesses are kept apart (a service account's is at most
/// 337 bytes: `system:serviceaccount:`, a namespace of 63, `:`, a name of 253).
pub const MAX_USER_NAME: usize = 1024;

/// The accesses a server has seen, each once.
///
/// ```
/// use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::Api;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
/// let client = kube::Client::new(server.service(), "default");
/// let config_maps: Api<ConfigMap> = Api::default_namespaced(client);
/// let _ = config_maps.get_opt("settings").await.unwrap();
/// let seen: Vec<String> = server.accesses().seen().iter().map(ToString::to_string).collect();
/// assert_eq!(seen, ["get \"\"/configmaps"]);
/// # }
/// ```
#[derive(Debug, Default)]
pub struct Accesses {
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    all: BTreeSet<Access>,
    by_user: BTreeMap<String, BTreeSet<Access>>,
}

impl Accesses {
    /// Notes `verb` on `resource` (with its subresource, if any) of `group`, asked for by
    /// `user` (impersonated; `None` when the request impersonates nobody).
    pub(crate) fn record(
        &self,
        user: Option<&str>,
        verb: &str,
        group: &str,
        plural: &str,
        subresource: Option<&str>,
    ) {
        let resource = match subresource {
            Some(subresource) => format!("{plural}/{subresource}"),
            None => plural.to_owned(),
        };
        let access = Access {
            group: group.to_owned(),
            resource,
            verb: verb.to_owned(),
        };
        let mut seen = self.seen.lock();
        if let Some(user) = user.filter(|user| user.len() <= MAX_USER_NAME) {
            let users = seen.by_user.len();
            match seen.by_user.get_mut(user) {
                Some(accesses) if !accesses.contains(&access) => {
                    accesses.insert(access.clone());
                }
                Some(_) => {}
                None if users < MAX_USERS => {
                    seen.by_user
                        .insert(user.to_owned(), BTreeSet::from([access.clone()]));
                }
                None => {}
            }
        }
        if !seen.all.contains(&access) {
            seen.all.insert(access);
        }
    }

    /// Every access seen since the server started (or the last [`clear`](Self::clear)), by
    /// anyone, in order of group, resource and verb.
    pub fn seen(&self) -> Vec<Access> {
        self.seen.lock().all.iter().cloned().collect()
    }

    /// The accesses of requests that impersonated `user`, in the same order.
    pub fn seen_by(&self, user: &str) -> Vec<Access> {
        self.seen
            .lock()
            .by_user
            .get(user)
            .map(|accesses| accesses.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Forgets what was seen (say, the test's own set-up).
    pub fn clear(&self) {
        let mut seen = self.seen.lock();
        seen.all.clear();
        seen.by_user.clear();
    }
}
