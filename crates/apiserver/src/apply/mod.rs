//! Server-side apply: which manager owns which fields of an object, as kube-apiserver records it
//! in `metadata.managedFields`, and how an applied configuration merges into an object.
//!
//! No Rust crate implements Kubernetes' structured-merge-diff, so it is here, in its own words:
//! field paths ([`path`]) and sets of them ([`set`]), what a type says about merging
//! ([`schema`]), the operations on a typed object ([`typed`]: its field set, merge, comparison,
//! removal), the strict reading of a configuration ([`validate`]), whether it states what its
//! manager applied before ([`same_fields`]), and the transfer of ownership between managers
//! ([`updater`]). Around it, kube-apiserver's field manager: the entries of
//! `managedFields` ([`managed_fields`]), the fields each endpoint resets ([`reset_fields`]),
//! the bridge from client-side apply ([`last_applied`]), and the steps of an update or an apply
//! ([`field_manager`]).

pub mod field_manager;
pub mod fields;
pub mod last_applied;
pub mod managed_fields;
pub mod path;
pub mod reset_fields;
pub mod same_fields;
pub mod schema;
pub mod set;
pub mod typed;
pub mod updater;
pub mod validate;

pub use self::field_manager::{AppliedObject, ApplyError, FieldManager};

#[cfg(test)]
mod field_manager_tests;
#[cfg(test)]
mod tests;
