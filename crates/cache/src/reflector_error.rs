//! What goes wrong while listing and watching, and how the reflector tells the kinds apart.

use std::sync::Arc;

use kube::core::Status;

use crate::key::KeyError;

/// Why a list or a watch went wrong. Each is reported to the watch-error handler; the reflector
/// recovers from all of them by itself.
#[derive(Debug, thiserror::Error)]
pub enum ReflectorError {
    /// The list request failed.
    #[error("{name}: failed to list: {source}")]
    List {
        /// The reflector's name.
        name: String,
        /// What the client reported.
        #[source]
        source: kube::Error,
    },
    /// The watch request failed, or its stream delivered something that is not an event
    /// (a frame that is not JSON, an unknown event type, a broken connection).
    #[error("{name}: watch failed: {source}")]
    Watch {
        /// The reflector's name.
        name: String,
        /// What the client reported.
        #[source]
        source: kube::Error,
    },
    /// The server sent an ERROR event.
    #[error("{name}: watch ended with an error event: {} ({})", .status.message, .status.code)]
    WatchStatus {
        /// The reflector's name.
        name: String,
        /// The status the event carried.
        status: Box<Status>,
    },
    /// A watch closed within a second without delivering anything: the server is likely
    /// unhealthy, so the reflector relists after a backoff instead of spinning.
    #[error(
        "{name}: very short watch: unexpected watch close - watch lasted less than a second and no items received"
    )]
    VeryShortWatch {
        /// The reflector's name.
        name: String,
    },
    /// An object in a list or an event has no key (no name); it was skipped.
    #[error("{name}: unable to store an object: {source}")]
    Key {
        /// The reflector's name.
        name: String,
        /// Why the object has no key.
        #[source]
        source: KeyError,
    },
    /// A list carried no resourceVersion, so no watch can start from it.
    #[error("{name}: the list carried no resourceVersion")]
    MissingResourceVersion {
        /// The reflector's name.
        name: String,
    },
}

impl ReflectorError {
    /// The API status behind the error, if the server sent one.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Self::List { source, .. } | Self::Watch { source, .. } => api_status(source),
            Self::WatchStatus { status, .. } => Some(status),
            _ => None,
        }
    }

    /// Whether the resource version asked for is gone (410 Expired or Gone).
    pub fn is_expired(&self) -> bool {
        self.status().is_some_and(status_is_expired)
    }
}

/// Called with every error the reflector recovers from; client-go's `WatchErrorHandler`.
pub type WatchErrorHandler = Arc<dyn Fn(&ReflectorError) + Send + Sync>;

pub(crate) fn api_status(err: &kube::Error) -> Option<&Status> {
    match err {
        kube::Error::Api(status) => Some(status),
        _ => None,
    }
}

fn status_is_expired(status: &Status) -> bool {
    status.code == 410 || status.reason == "Expired" || status.reason == "Gone"
}

pub(crate) fn is_expired(err: &kube::Error) -> bool {
    api_status(err).is_some_and(status_is_expired)
}

/// The server cannot serve a version that new yet (client-go checks the cause, or a 504 whose
/// cause or message says so).
pub(crate) fn is_too_large_resource_version(err: &kube::Error) -> bool {
    let Some(status) = api_status(err) else {
        return false;
    };
    let causes = status
        .details
        .as_ref()
        .map(|details| details.causes.as_slice())
        .unwrap_or_default();
    if causes
        .iter()
        .any(|cause| cause.reason == "ResourceVersionTooLarge")
    {
        return true;
    }
    if status.code != 504 && status.reason != "Timeout" {
        return false;
    }
    causes
        .iter()
        .any(|cause| cause.message == "Too large resource version")
        || status.message.contains("Too large resource version")
}

/// Errors a watch is retried after without relisting: a refused connection and 429.
pub(crate) fn is_watch_error_retriable(err: &kube::Error) -> bool {
    if api_status(err).is_some_and(|status| status.code == 429) {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = err.source();
    }
    false
}

/// Errors of the connection rather than of what it carried: a watch that meets one is resumed
/// from its last version instead of relisting.
pub(crate) fn is_transport_error(err: &kube::Error) -> bool {
    matches!(
        err,
        kube::Error::ReadEvents(_) | kube::Error::HyperError(_) | kube::Error::Service(_)
    )
}
