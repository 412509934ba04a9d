//! What a store operation can refuse, with what kube-apiserver would say.

/// One field's problem in an [`StoreError::Invalid`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Kubernetes' cause type, e.g. `FieldValueInvalid`, `FieldValueRequired`.
    pub reason: &'static str,
    /// The field's path, e.g. `metadata.name`.
    pub field: String,
    /// What is wrong, as kube-apiserver words it (`Invalid value: "x": ...`).
    pub message: String,
}

/// Why the store refused an operation. Each maps to one kube-apiserver `Status`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// 404: `<resource> "<name>" not found`.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// The qualified resource (`plural` or `plural.group`).
        resource: String,
        /// The object's name.
        name: String,
    },
    /// 409: `<resource> "<name>" already exists`.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// The qualified resource.
        resource: String,
        /// The object's name.
        name: String,
    },
    /// 409: an update or delete carried a resourceVersion other than the stored one.
    #[error(
        "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
    )]
    Conflict {
        /// The qualified resource.
        resource: String,
        /// The object's name.
        name: String,
    },
    /// 409: a precondition (a delete's uid or resourceVersion, a PUT's uid) does not hold.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {detail}")]
    PreconditionFailed {
        /// What kube-apiserver names in this refusal: the qualified kind (`Kind[.group]`) for
        /// a delete, the qualified resource for an update.
        resource: String,
        /// The object's name.
        name: String,
        /// Which precondition, against what the object holds.
        detail: String,
    },
    /// 422: the object is not valid.
    #[error("{kind} \"{name}\" is invalid: {}", causes_text(.causes))]
    Invalid {
        /// `Kind` for the core group, `Kind.group` otherwise.
        kind: String,
        /// The object's name (may be empty when it has none).
        name: String,
        /// One entry per field error.
        causes: Vec<Cause>,
    },
    /// 403: the namespace is being deleted, so nothing new can be made in it.
    #[error(
        "{resource} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated"
    )]
    NamespaceTerminating {
        /// The qualified resource.
        resource: String,
        /// The object's name.
        name: String,
        /// The terminating namespace.
        namespace: String,
    },
    /// 410: a watch (or a continued list) asked for history that is no longer kept.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The resourceVersion asked for.
        requested: u64,
        /// The oldest one still kept.
        oldest: u64,
    },
    /// 504: a resourceVersion newer than any the store has issued.
    #[error("Timeout: Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The resourceVersion asked for.
        requested: u64,
        /// The newest one issued.
        current: u64,
    },
    /// 400: the request cannot be understood (e.g. a body that is not a JSON object).
    #[error("{0}")]
    BadRequest(String),
    /// 500: the data directory of a durable store failed; the store takes no more writes.
    #[error("storage failure: {0}")]
    Storage(String),
    /// 500 with no reason: the object is larger than etcd takes, even without its
    /// `managedFields` (see [`MAX_OBJECT_BYTES`](super::MAX_OBJECT_BYTES)); etcd's words, as
    /// kube-apiserver passes them on.
    #[error("etcdserver: request is too large")]
    RequestTooLarge,
}

/// The causes of a 422 as kube-apiserver's message lists them: `<field>: <what>`, several in
/// brackets.
pub fn causes_text(causes: &[Cause]) -> String {
    let parts: Vec<String> = causes
        .iter()
        .map(|cause| format!("{}: {}", cause.field, cause.message))
        .collect();
    match parts.len() {
        1 => parts.concat(),
        _ => format!("[{}]", parts.join(", ")),
    }
}

impl StoreError {
    /// The HTTP status code kube-apiserver answers with.
    pub fn code(&self) -> u16 {
        match self {
            Self::NotFound { .. } => 404,
            Self::AlreadyExists { .. }
            | Self::Conflict { .. }
            | Self::PreconditionFailed { .. } => 409,
            Self::Invalid { .. } => 422,
            Self::NamespaceTerminating { .. } => 403,
            Self::Expired { .. } => 410,
            Self::TooLargeResourceVersion { .. } => 504,
            Self::BadRequest(_) => 400,
            Self::Storage(_) | Self::RequestTooLarge => 500,
        }
    }

    /// The `reason` of the `Status`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "NotFound",
            Self::AlreadyExists { .. } => "AlreadyExists",
            Self::Conflict { .. } | Self::PreconditionFailed { .. } => "Conflict",
            Self::Invalid { .. } => "Invalid",
            Self::NamespaceTerminating { .. } => "Forbidden",
            Self::Expired { .. } => "Expired",
            Self::TooLargeResourceVersion { .. } => "Timeout",
            Self::BadRequest(_) => "BadRequest",
            Self::Storage(_) => "InternalError",
            // An error that is not an API status: kube-apiserver's `StatusReasonUnknown`.
            Self::RequestTooLarge => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_kube_apiservers() {
        let conflict = StoreError::Conflict {
            resource: "leases.coordination.k8s.io".into(),
            name: "lock".into(),
        };
        assert_eq!(
            conflict.to_string(),
            "Operation cannot be fulfilled on leases.coordination.k8s.io \"lock\": the object has been modified; please apply your changes to the latest version and try again"
        );
        assert_eq!((conflict.code(), conflict.reason()), (409, "Conflict"));
        let invalid = StoreError::Invalid {
            kind: "ConfigMap".into(),
            name: "Bad".into(),
            causes: vec![Cause {
                reason: "FieldValueInvalid",
                field: "metadata.name".into(),
                message: "Invalid value: \"Bad\": oops".into(),
            }],
        };
        assert_eq!(
            invalid.to_string(),
            "ConfigMap \"Bad\" is invalid: metadata.name: Invalid value: \"Bad\": oops"
        );
        assert_eq!(
            StoreError::Expired {
                requested: 5,
                oldest: 9
            }
            .to_string(),
            "too old resource version: 5 (9)"
        );
        assert_eq!(
            StoreError::TooLargeResourceVersion {
                requested: 99,
                current: 7
            }
            .to_string(),
            "Timeout: Too large resource version: 99, current: 7"
        );
    }
}
