//! The `Widget` custom resource: what a user asks for, and what the controller reports.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a `Widget` asks for: a ConfigMap holding its message, kept by the controller.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    plural = "widgets",
    namespaced,
    status = "WidgetStatus",
    printcolumn = r#"{"name":"Ready","type":"boolean","jsonPath":".status.ready"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WidgetSpec {
    /// The message the Widget's ConfigMap holds.
    pub message: String,
}

/// What the controller reports about a `Widget`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    /// Whether its ConfigMap holds its message.
    pub ready: bool,
    /// The generation the status describes.
    pub observed_generation: Option<i64>,
}
