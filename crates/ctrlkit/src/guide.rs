//! The guide's chapters (`docs/guide`), here only so that `cargo test` compiles and runs every
//! Rust block in them as a doc test: the guide cannot show code that does not build.

#[doc = include_str!("../../../docs/guide/src/getting-started.md")]
pub struct GettingStarted;

#[doc = include_str!("../../../docs/guide/src/writing-a-controller.md")]
pub struct WritingAController;

#[doc = include_str!("../../../docs/guide/src/testing.md")]
pub struct Testing;

#[doc = include_str!("../../../docs/guide/src/informers.md")]
pub struct Informers;

#[doc = include_str!("../../../docs/guide/src/workqueue.md")]
pub struct Workqueue;

#[doc = include_str!("../../../docs/guide/src/leader-election.md")]
pub struct LeaderElection;

#[doc = include_str!("../../../docs/guide/src/deploying.md")]
pub struct Deploying;

#[doc = include_str!("../../../docs/guide/src/operations.md")]
pub struct Operations;
