//! An embedded, protocol-faithful Kubernetes API server.
//!
//! This crate grows in layers: [`resource`] describes what is served, [`storage`] keeps objects
//! with kube-apiserver's resourceVersion, write and watch semantics. The HTTP layer (REST,
//! watch streams, discovery, OpenAPI), CRDs, garbage collection and the fault hooks build on
//! them.

pub mod patch;
pub mod resource;
pub mod selector;
pub mod storage;
