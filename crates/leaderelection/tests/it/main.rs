//! Leader election end to end: Lease locks, electors against the embedded server, and simulation.
//!
//! One test binary per crate: each module below is one area, and they share one build and
//! one link, which keeps a clean build's disk and time small. Run one area with
//! `cargo test -p ctrlkit-leaderelection --test it -- <module>::`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod coordinated;
mod elector_e2e;
mod lease_lock;
mod simulation;
