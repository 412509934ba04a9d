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
    all: Noted,
    by_user: BTreeMap<String, Noted>,
}

/// Verbs by group and resource. Looked up by borrowed names, so that noting an access seen
/// before (nearly every request's) allocates nothing.
#[derive(Debug, Default)]
struct Noted(BTreeMap<String, BTreeMap<String, BTreeSet<&'static str>>>);

impl Noted {
    fn note(&mut self, group: &str, resource: &str, verb: &'static str) {
        let known = self
            .0
            .get(group)
            .and_then(|resources| resources.get(resource))
            .is_some_and(|verbs| verbs.contains(verb));
        if !known {
            self.0
                .entry(group.to_owned())
                .or_default()
                .entry(resource.to_owned())
                .or_default()
                .insert(verb);
        }
    }

    /// In order of group, resource and verb.
    fn accesses(&self) -> Vec<Access> {
        self.0
            .iter()
            .flat_map(|(group, resources)| {
                resources.iter().flat_map(move |(resource, verbs)| {
                    verbs.iter().map(move |verb| Access {
                        group: group.clone(),
                        resource: resource.clone(),
                        verb: (*verb).to_owned(),
                    })
                })
            })
            .collect()
    }
}

impl Accesses {
    /// Notes `verb` on `resource` (with its subresource, if any) of `group`, asked for by
    /// `user` (impersonated; `None` when the request impersonates nobody).
    pub(crate) fn record(
        &self,
        user: Option<&str>,
        verb: &'static str,
        group: &str,
        plural: &str,
        subresource: Option<&str>,
    ) {
        let with_subresource;
        let resource = match subresource {
            Some(subresource) => {
                with_subresource = format!("{plural}/{subresource}");
                with_subresource.as_str()
            }
            None => plural,
        };
        let mut seen = self.seen.lock();
        seen.all.note(group, resource, verb);
        if let Some(user) = user.filter(|user| user.len() <= MAX_USER_NAME) {
            let users = seen.by_user.len();
            match seen.by_user.get_mut(user) {
                Some(noted) => noted.note(group, resource, verb),
                None if users < MAX_USERS => {
                    let mut noted = Noted::default();
                    noted.note(group, resource, verb);
                    seen.by_user.insert(user.to_owned(), noted);
                }
                None => {}
            }
        }
    }

    /// Every access seen since the server started (or the last [`clear`](Self::clear)), by
    /// anyone, in order of group, resource and verb.
    pub fn seen(&self) -> Vec<Access> {
        self.seen.lock().all.accesses()
    }

    /// The accesses of requests that impersonated `user`, in the same order.
    pub fn seen_by(&self, user: &str) -> Vec<Access> {
        self.seen
            .lock()
            .by_user
            .get(user)
            .map(Noted::accesses)
            .unwrap_or_default()
    }

    /// Forgets what was seen (say, the test's own set-up).
    pub fn clear(&self) {
        let mut seen = self.seen.lock();
        seen.all = Noted::default();
        seen.by_user.clear();
    }
}
