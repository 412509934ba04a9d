//! ctrlkit: Kubernetes' controller machinery (client-go's work queue, informers, leader election
//! and the controller loop) in Rust.
//!
//! This facade re-exports the ctrlkit crates under one name, and carries
//! [`sample_controller`], Kubernetes' sample-controller rebuilt on them.

pub use ctrlkit_apiserver as apiserver;
pub use ctrlkit_cache as cache;
pub use ctrlkit_controller as controller;
pub use ctrlkit_leaderelection as leaderelection;
pub use ctrlkit_workqueue as workqueue;

pub mod sample_controller;
