//! ctrlkit: Kubernetes' controller machinery, as client-go has it, in Rust, with a
//! Kubernetes-compatible API server embedded in-process so that every controller runs and is
//! tested without a cluster.
//!
//! This facade re-exports the ctrlkit crates under one name:
//!
//! | module | crate | what it gives you |
//! |---|---|---|
//! | [`controller`] | `ctrlkit-controller` | [`Controller`](controller::Controller) and the [`Reconciler`](controller::Reconciler) you write; predicates, finalizers, events, server-side apply, triggers, a [`Manager`](controller::Manager), `/metrics` `/healthz` `/readyz` |
//! | [`cache`] | `ctrlkit-cache` | informers ([`SharedInformerFactory`](cache::SharedInformerFactory), [`SharedIndexInformer`](cache::SharedIndexInformer)), indexes, listers, the reflector and its FIFOs |
//! | [`workqueue`] | `ctrlkit-workqueue` | client-go's work queues and rate limiters, and controller-runtime's priority queue |
//! | [`leaderelection`] | `ctrlkit-leaderelection` | leader election on a Lease (or other locks), coordinated leader election |
//! | [`apiserver`] | `ctrlkit-apiserver` | the embedded API server, for tests and for `ctrlkit apiserver` |
//! | [`sample_controller`] | | Kubernetes' sample-controller rebuilt on the above |
//!
//! A controller, whole, run against the embedded API server (the same program is
//! `examples/foo_controller.rs`; `ctrlkit new NAME` makes a project of your own):
//!
//! ```
//! use std::time::Duration;
//!
//! use ctrlkit::apiserver::{ApiServer, ApiServerConfig};
//! use ctrlkit::cache::SharedInformerFactory;
//! use ctrlkit::controller::{Action, Context, Controller, ReconcileError, Reconciler};
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, ObjectMeta, PostParams};
//! use tokio_util::sync::CancellationToken;
//!
//! /// Says which ConfigMaps it sees, and stops after the first.
//! struct Hello(CancellationToken);
//!
//! impl Reconciler for Hello {
//!     async fn reconcile(&self, key: &str, ctx: &Context) -> Result<Action, ReconcileError> {
//!         println!("reconciling {key} ({})", ctx.reason);
//!         self.0.cancel();
//!         Ok(Action::done())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = ApiServer::start(ApiServerConfig::default()).await?;
//! let client = kube::Client::new(server.service(), "default");
//! let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
//! let controller = Controller::new("hello", factory.namespaced_informer::<ConfigMap>("default"));
//! let cancel = CancellationToken::new();
//! factory.start(&cancel);
//! let running = tokio::spawn(controller.run(Hello(cancel.clone()), cancel.clone()));
//!
//! let settings = ConfigMap {
//!     metadata: ObjectMeta { name: Some("settings".into()), ..ObjectMeta::default() },
//!     ..ConfigMap::default()
//! };
//! Api::<ConfigMap>::namespaced(client, "default").create(&PostParams::default(), &settings).await?;
//! running.await??; // prints a reconcile of the namespace's ConfigMaps, then stops
//! # Ok(())
//! # }
//! ```
//!
//! Logs go through `tracing`; the `ctrlkit` binary prints them to stderr at the level
//! `RUST_LOG` asks for. `docs/MIGRATING.md` maps kube-runtime's, controller-runtime's and
//! client-go's names to ctrlkit's.

pub use ctrlkit_apiserver as apiserver;
pub use ctrlkit_cache as cache;
pub use ctrlkit_controller as controller;
pub use ctrlkit_leaderelection as leaderelection;
pub use ctrlkit_workqueue as workqueue;

pub mod sample_controller;

#[cfg(doctest)]
mod guide;
