//! The kinds the server knows: the built-in ones, from k8s-openapi's types, each with its typed
//! decoding, defaults and registry facts.

mod builtin;
pub(crate) mod defaults;
mod facts;
pub mod messages;
pub mod printers;
pub mod schema;
pub(crate) mod strategy;
pub mod subresources;
pub mod typed;
mod write_back;

pub use self::builtin::{BuiltinType, builtin_types};
pub use self::facts::Facts;
pub use self::typed::{PathSegment, TypeError};

/// The minor version of Kubernetes the build's k8s-openapi serves (its enabled version feature).
pub fn kubernetes_minor() -> u32 {
    k8s_openapi::k8s_if_1_33! { return 33; }
    k8s_openapi::k8s_if_1_34! { return 34; }
    k8s_openapi::k8s_if_1_35! { return 35; }
    k8s_openapi::k8s_if_1_36! { return 36; }
    k8s_openapi::k8s_if_ge_1_37! { return 37; }
    #[allow(unreachable_code)]
    37
}
