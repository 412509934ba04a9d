//! An embedded, protocol-faithful Kubernetes API server.
//!
//! It serves kube-apiserver's REST and watch protocol over HTTP/1.1 on loopback (or, without a
//! socket, as an in-process `tower` service), from an in-process store, so that controllers run
//! and are tested without a cluster:
//!
//! - [`kinds`], [`resource`] and [`registry`]: what is served, built-in kinds from k8s-openapi's
//!   types;
//! - [`storage`]: objects with kube-apiserver's resourceVersion, write and watch semantics;
//! - [`rest`]: the URLs, verbs, selectors, pages, watch streams, discovery and `Status` errors;
//! - [`server`]: binding and running it;
//! - [`in_process`]: calling it without a socket, as a `tower` service;
//! - [`patch`] and [`strategic`]: merge, JSON and strategic merge patches;
//! - [`apply`]: server-side apply and `managedFields`;
//! - [`structural`]: a custom resource's schema, read once for every request that needs it;
//! - [`custom`]: what a custom resource's schema does to its writes: pruning, defaults,
//!   validation;
//! - [`auth`]: the optional bearer token every request must then carry;
//! - [`tls`]: serving HTTPS, with a CA generated at start if need be;
//! - [`faults`]: the fault hooks reliability tests drive.

pub mod access;
mod activity;
pub mod apply;
pub mod auth;
pub mod custom;
pub mod faults;
pub mod in_process;
pub mod kinds;
mod link;
pub mod patch;
pub mod registry;
pub mod request;
pub mod resource;
pub mod rest;
pub mod selector;
pub mod server;
pub mod storage;
pub mod strategic;
pub mod structural;
pub mod tls;

pub use self::auth::BearerToken;
pub use self::in_process::InProcessService;
pub use self::server::{ApiServer, ApiServerConfig, ServerError};
pub use self::tls::{SelfSignedTls, TlsConfig};
