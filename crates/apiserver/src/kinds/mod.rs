//! The kinds the server knows: the built-in ones, from k8s-openapi's types, each with its typed
//! decoding, defaults and registry facts.

mod builtin;
pub(crate) mod defaults;
mod facts;
pub mod printers;
pub mod schema;
pub(crate) mod strategy;
pub mod typed;

pub use self::builtin::{BuiltinType, builtin_types};
pub use self::facts::Facts;
pub use self::typed::{Decoded, PathSegment, TypeError};
