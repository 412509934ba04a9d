//! The encoding stage: an answer in the form and encoding the client negotiated
//! ([`negotiate`](super::negotiate)): the object itself, a `meta.k8s.io` Table of its kind's
//! printed columns, or its `PartialObjectMetadata`; in JSON, YAML or (for built-in kinds)
//! protobuf. A stored object in plain JSON is its stored serialization, never made again.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Map, Value, json};

use super::negotiate::{Format, IncludeObject, Negotiated, View};
use super::protobuf;
use crate::custom::table;
use crate::kinds::printers::{self, Printer};
use crate::resource::ResourceKind;
use crate::rest::status::ApiError;
use crate::storage::StoredObject;

/// How one request's answers are encoded.
#[derive(Debug, Clone, Copy)]
pub struct Encoding<'a> {
    /// The negotiated encoding and form.
    pub negotiated: Negotiated,
    /// The kind of the objects.
    pub kind: &'a ResourceKind,
    /// What each Table row carries of its object.
    pub include: IncludeObject,
}

impl<'a> Encoding<'a> {
    /// Plain JSON of `kind`'s objects.
    pub fn json(kind: &'a ResourceKind) -> Self {
        Self {
            negotiated: Negotiated::JSON,
            kind,
            include: IncludeObject::Metadata,
        }
    }

    /// The answer with one object and `code`; the object is in the kind's version
    /// ([`conversion::shown`](crate::custom::conversion::shown)).
    pub fn object(&self, code: u16, object: &StoredObject) -> Result<Response, ApiError> {
        match self.negotiated.view {
            View::Object => self.encoded(code, object.value(), Some(object.json())),
            View::PartialObjectMetadata | View::PartialObjectMetadataList => {
                self.encoded(code, &partial_metadata(object), None)
            }
            View::Table => {
                let metadata = json!({
                    "resourceVersion": object["metadata"]["resourceVersion"].clone(),
                });
                let table = self.table(metadata, std::iter::once(object.value()), true);
                self.encoded(code, &table, None)
            }
        }
    }

    /// The answer with a list of `items` (its `metadata` as given) and code 200; the items are
    /// in the kind's version.
    pub fn list<'i>(
        &self,
        metadata: Value,
        items: impl ExactSizeIterator<Item = &'i StoredObject>,
    ) -> Result<Response, ApiError> {
        match self.negotiated.view {
            View::Object => {
                if self.negotiated.format == Format::Json {
                    return Ok(json_list(self.kind, &metadata, items));
                }
                // In protobuf the objects are written without their `apiVersion` and `kind`,
                // which the list carries, as Go writes a list's items.
                let list = json!({
                    "kind": format!("{}List", self.kind.kind),
                    "apiVersion": self.kind.api_version(),
                    "metadata": metadata,
                    "items": items.map(StoredObject::value).collect::<Vec<_>>(),
                });
                self.encoded(200, &list, None)
            }
            View::PartialObjectMetadata | View::PartialObjectMetadataList => {
                let list = json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata,
                    "items": items.map(|item| partial_metadata(item)).collect::<Vec<_>>(),
                });
                self.encoded(200, &list, None)
            }
            View::Table => {
                let table = self.table(metadata, items.map(StoredObject::value), true);
                self.encoded(200, &table, None)
            }
        }
    }

    /// The object of one watch event in this form: `None` for the stored object in plain JSON
    /// (the event's own serialization is sent); a Table has its column definitions only in the
    /// stream's first event (`headers`).
    pub fn event_object(&self, object: &StoredObject, headers: bool) -> Option<Value> {
        match self.negotiated.view {
            View::Object => None,
            View::PartialObjectMetadata | View::PartialObjectMetadataList => {
                Some(partial_metadata(object))
            }
            View::Table => {
                let metadata = json!({
                    "resourceVersion": object["metadata"]["resourceVersion"].clone(),
                });
                Some(self.table(metadata, std::iter::once(object.value()), headers))
            }
        }
    }

    /// A Table of `objects`.
    pub fn table<'o>(
        &self,
        metadata: Value,
        objects: impl Iterator<Item = &'o Value>,
        headers: bool,
    ) -> Value {
        let printer: Printer = printers::printer(self.kind);
        let custom = self.kind.custom.as_deref();
        let now = jiff::Timestamp::now();
        let pods = self.kind.group.is_empty() && self.kind.plural == "pods";
        let rows: Vec<Value> = objects
            .map(|object| {
                let mut row = Map::new();
                let cells = match custom {
                    Some(version) => table::cells(version, object, now),
                    None => (printer.cells)(object, now),
                };
                row.insert("cells".into(), Value::Array(cells));
                if pods && let Some(conditions) = pod_row_conditions(object) {
                    row.insert("conditions".into(), conditions);
                }
                match self.include {
                    IncludeObject::Metadata => {
                        row.insert("object".into(), partial_metadata(object));
                    }
                    IncludeObject::Object => {
                        row.insert("object".into(), object.clone());
                    }
                    IncludeObject::None => {}
                }
                Value::Object(row)
            })
            .collect();
        let columns = if headers {
            Value::Array(match custom {
                Some(version) => table::column_definitions(version),
                None => printer
                    .columns
                    .iter()
                    .map(printers::column_definition)
                    .collect(),
            })
        } else {
            Value::Null
        };
        json!({
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": metadata,
            "columnDefinitions": columns,
            "rows": rows,
        })
    }

    /// `value` in the negotiated encoding; `json` is its serialization when already made.
    fn encoded(&self, code: u16, value: &Value, json: Option<Bytes>) -> Result<Response, ApiError> {
        let (bytes, content_type) = match self.negotiated.format {
            Format::Json => (
                json.unwrap_or_else(|| Bytes::from(serde_json::to_vec(value).unwrap_or_default())),
                "application/json",
            ),
            Format::Yaml => (
                Bytes::from(
                    serde_saphyr::to_string(value)
                        .map_err(ApiError::internal)?
                        .into_bytes(),
                ),
                "application/yaml",
            ),
            Format::Protobuf => {
                let message = protobuf_message(self.kind, value).ok_or_else(|| {
                    ApiError::not_acceptable(&["application/json", "application/yaml"])
                })?;
                let bytes = protobuf::encode_body(value, &message).map_err(ApiError::internal)?;
                (Bytes::from(bytes), protobuf::MEDIA_TYPE)
            }
        };
        Ok(response(code, bytes, content_type))
    }
}

/// The protobuf message of `value`, an object or list of `kind` or a `meta.k8s.io` form of
/// it, if the message table has one.
fn protobuf_message(kind: &ResourceKind, value: &Value) -> Option<String> {
    let name = match value["kind"].as_str()? {
        "PartialObjectMetadata" | "PartialObjectMetadataList" => format!(
            "io.k8s.apimachinery.pkg.apis.meta.v1.{}",
            value["kind"].as_str()?
        ),
        found => {
            let object = kind.builtin?.schema_name();
            if found.ends_with("List") && found != kind.kind {
                format!("{object}List")
            } else {
                object.into_owned()
            }
        }
    };
    crate::kinds::messages::message(&name).map(|_| name)
}

/// Whether answers about `kind` can be protobuf: a built-in kind the message table has.
pub fn protobuf_capable(kind: &ResourceKind) -> bool {
    kind.builtin
        .is_some_and(|builtin| crate::kinds::messages::message(&builtin.schema_name()).is_some())
}

/// A response of `code` with `bytes` of `content_type`.
pub fn response(code: u16, bytes: Bytes, content_type: &'static str) -> Response {
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A list in JSON, written by hand so that each item is its stored serialization, copied in,
/// never made again.
fn json_list<'i>(
    kind: &ResourceKind,
    metadata: &Value,
    items: impl ExactSizeIterator<Item = &'i StoredObject>,
) -> Response {
    let mut body = Vec::with_capacity(64 + items.len() * 512);
    body.extend_from_slice(b"{\"kind\":");
    let _ = serde_json::to_writer(&mut body, &format!("{}List", kind.kind));
    body.extend_from_slice(b",\"apiVersion\":");
    let _ = serde_json::to_writer(&mut body, &kind.api_version());
    body.extend_from_slice(b",\"metadata\":");
    let _ = serde_json::to_writer(&mut body, metadata);
    body.extend_from_slice(b",\"items\":[");
    for (index, item) in items.enumerate() {
        if index > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&item.json());
    }
    body.extend_from_slice(b"]}");
    response(200, Bytes::from(body), "application/json")
}

/// An object's `PartialObjectMetadata`: its metadata, nothing else.
pub fn partial_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// The conditions kube's pod printer adds to the row of a finished pod.
fn pod_row_conditions(pod: &Value) -> Option<Value> {
    let (reason, message) = match pod["status"]["phase"].as_str()? {
        "Succeeded" => ("Succeeded", "The pod has completed successfully."),
        "Failed" => ("Failed", "The pod failed."),
        _ => return None,
    };
    Some(json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::builtin_resources;

    fn kind(plural: &str) -> ResourceKind {
        builtin_resources()
            .into_iter()
            .find(|kind| kind.plural == plural)
            .unwrap()
    }

    async fn body(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn partial_metadata_and_tables() {
        let config_maps = kind("configmaps");
        let object = StoredObject::new(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "data": {"x": "1"},
        }));
        let mut encoding = Encoding::json(&config_maps);
        encoding.negotiated.view = View::PartialObjectMetadata;
        assert_eq!(
            body(encoding.object(200, &object).unwrap()).await,
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": {"name": "a", "resourceVersion": "7", "creationTimestamp": "2026-01-01T00:00:00Z"}})
        );
        encoding.negotiated.view = View::Table;
        let table = body(
            encoding
                .list(json!({"resourceVersion": "9"}), [&object].into_iter())
                .unwrap(),
        )
        .await;
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["metadata"], json!({"resourceVersion": "9"}));
        let columns: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|column| column["name"].as_str().unwrap())
            .collect();
        assert_eq!(columns, ["Name", "Data", "Age"]);
        assert_eq!(table["rows"][0]["cells"][0], "a");
        assert_eq!(table["rows"][0]["cells"][1], 1);
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        encoding.include = IncludeObject::None;
        let without = encoding.event_object(&object, false).unwrap();
        assert!(without["columnDefinitions"].is_null());
        assert!(without["rows"][0].get("object").is_none());
    }
}
