//! What one served version of a CustomResourceDefinition says about its objects, read once when
//! the CRD is served: its schema, whether anything in it has a default, its `scale`
//! subresource's paths, and its printer columns.

use std::sync::Arc;

use serde_json::Value;

use super::coerce::has_defaults;
use super::conversion::Conversion;
use super::json_path::JsonPath;
use crate::structural::Node;

/// One served version of a custom resource.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CustomVersion {
    /// The version's `openAPIV3Schema`; `None` when it has none (only the deprecated `v1beta1`
    /// CRDs may lack one).
    pub schema: Option<Arc<Node>>,
    /// The schema as the CRD states it, for the OpenAPI documents.
    pub openapi: Option<Value>,
    /// Whether the schema has a default anywhere (else decoding skips defaulting).
    pub has_defaults: bool,
    /// Its `scale` subresource, if it has one.
    pub scale: Option<ScalePaths>,
    /// Its `additionalPrinterColumns`.
    pub columns: Vec<PrinterColumn>,
    /// How its CRD converts objects to and from the other versions.
    pub conversion: Arc<Conversion>,
    /// The resourceVersion of the CRD that gave this version its schema: an object last
    /// written before it may lack the schema's defaults (or have fields it no longer declares),
    /// and is made to fit it when read, as kube-apiserver's decoding from storage does.
    pub schema_since: u64,
}

impl CustomVersion {
    /// Whether `object`, of this version, was last written before its schema was.
    pub fn written_before_schema(&self, object: &Value) -> bool {
        self.schema_since > 0
            && self.schema.is_some()
            && object["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|version| version.parse::<u64>().ok())
                .is_some_and(|version| version < self.schema_since)
    }
}

/// Where a custom resource keeps what its `scale` subresource shows, as dotted paths without
/// the leading dot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`.
    pub spec_replicas: String,
    /// `statusReplicasPath`.
    pub status_replicas: String,
    /// `labelSelectorPath`, if given.
    pub label_selector: Option<String>,
}

/// A column `kubectl get` shows for a custom resource (`additionalPrinterColumns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    /// The column's header.
    pub name: String,
    /// Its OpenAPI type (`integer`, `number`, `string`, `boolean`, `date`).
    pub column_type: String,
    /// Its OpenAPI format.
    pub format: String,
    /// What it shows.
    pub description: String,
    /// 0 for the columns `kubectl get` shows, more for those of `-o wide`.
    pub priority: i64,
    /// The simple JSONPath (`.spec.replicas`) of its value in an object.
    pub json_path: String,
    /// The path read; `None` when it does not parse (the column then shows nothing).
    pub path: Option<JsonPath>,
}

impl CustomVersion {
    /// Reads a version entry of a CRD's `spec.versions`.
    pub fn read(version: &Value) -> Self {
        let openapi = version["schema"]
            .get("openAPIV3Schema")
            .filter(|schema| schema.is_object())
            .cloned();
        let schema = openapi.as_ref().map(Node::compile);
        let scale = &version["subresources"]["scale"];
        let path = |field: &str| {
            scale[field]
                .as_str()
                .map(|path| path.trim_start_matches('.').to_string())
        };
        let scale = scale.is_object().then(|| ScalePaths {
            spec_replicas: path("specReplicasPath").unwrap_or_else(|| "spec.replicas".into()),
            status_replicas: path("statusReplicasPath").unwrap_or_else(|| "status.replicas".into()),
            label_selector: path("labelSelectorPath"),
        });
        let columns = match version.get("additionalPrinterColumns") {
            Some(Value::Array(columns)) if !columns.is_empty() => {
                columns.iter().filter_map(PrinterColumn::read).collect()
            }
            // A version without columns shows its age, as kube-apiserver's default column.
            _ => vec![PrinterColumn {
                name: "Age".into(),
                column_type: "date".into(),
                format: String::new(),
                description: String::new(),
                priority: 0,
                json_path: ".metadata.creationTimestamp".into(),
                path: JsonPath::parse(".metadata.creationTimestamp"),
            }],
        };
        Self {
            has_defaults: schema.as_deref().is_some_and(has_defaults),
            schema,
            openapi,
            scale,
            columns,
            conversion: Arc::default(),
            schema_since: 0,
        }
    }
}

impl PrinterColumn {
    fn read(column: &Value) -> Option<Self> {
        let text = |field: &str| column[field].as_str().unwrap_or_default().to_string();
        let json_path = column["jsonPath"].as_str()?.to_string();
        Some(Self {
            path: JsonPath::parse(&json_path),
            json_path,
            name: column["name"].as_str()?.to_string(),
            column_type: text("type"),
            format: text("format"),
            description: text("description"),
            priority: column["priority"].as_i64().unwrap_or(0),
        })
    }
}
