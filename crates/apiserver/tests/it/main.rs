//! The embedded API server's integration tests, driven over HTTP by real clients.
//!
//! One test binary per crate: each module below is one area, and they share one build and
//! one link, which keeps a clean build's disk and time small. Run one area with
//! `cargo test -p ctrlkit-apiserver --test it -- <module>::`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod accesses;
mod apply_properties;
mod bad_input;
mod conversion_webhook;
mod custom_resources;
mod data_dir;
mod faults;
mod footprint;
mod in_process;
mod kube_client;
mod kubectl;
mod message_table;
mod security;
mod server_side_apply;
mod support;
mod timeouts;
