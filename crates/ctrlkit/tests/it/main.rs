//! The `ctrlkit` binary and facade end to end: the CLI, the demo, chaos and durability runs.
//!
//! One test binary per crate: each module below is one area, and they share one build and
//! one link, which keeps a clean build's disk and time small. Run one area with
//! `cargo test -p ctrlkit --test it -- <module>::`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod apiserver_cli;
mod chaos;
mod client_security;
mod demo;
mod durability;
mod new_project;
mod readme;
mod readme_snippets;
mod sample_controller;
