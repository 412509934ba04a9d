//! Informers, reflectors and stores against the embedded API server, and client-go's cache tests.
//!
//! One test binary per crate: each module below is one area, and they share one build and
//! one link, which keeps a clean build's disk and time small. Run one area with
//! `cargo test -p ctrlkit-cache --test it -- <module>::`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod api_source;
mod bad_input;
mod client_go;
mod informer_e2e;
mod informer_metrics;
mod shared_informer;
