//! The controller runner and its apply helper against the embedded API server.
//!
//! One test binary per crate: each module below is one area, and they share one build and
//! one link, which keeps a clean build's disk and time small. Run one area with
//! `cargo test -p ctrlkit-controller --test it -- <module>::`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod apply;
mod controller;
mod dynamic;
mod events;
mod finalizer;
mod manager;
mod predicates;
mod spans;
mod support;
mod triggers;
