//! Content negotiation of the answer, as kube-apiserver's: the `Accept` header's media types in
//! the client's order of preference, each with the form it asks for (`as=Table`,
//! `as=PartialObjectMetadata`, `as=PartialObjectMetadataList` of `g=meta.k8s.io`, `v=v1` or
//! `v1beta1`); the first one this endpoint can give wins, and none is a 406.

use axum::http::{HeaderMap, header};

use crate::rest::status::ApiError;

/// The encodings of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

/// The form of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The object (or list) itself.
    Object,
    /// A `meta.k8s.io` Table of the kind's printed columns.
    Table,
    /// `PartialObjectMetadata` (one object, or each event of a watch).
    PartialObjectMetadata,
    /// `PartialObjectMetadataList`.
    PartialObjectMetadataList,
}

/// What kind of answer the endpoint gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One object (get, and the answer of a write).
    Object,
    /// A list.
    List,
    /// A watch stream.
    Watch,
}

/// The chosen encoding and form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// The encoding.
    pub format: Format,
    /// The form.
    pub view: View,
}

impl Negotiated {
    /// Plain JSON of the object: what a request without `Accept` gets.
    pub const JSON: Self = Self {
        format: Format::Json,
        view: View::Object,
    };
}

/// One media range of an `Accept` header.
#[derive(Debug, Clone, PartialEq)]
struct MediaRange {
    /// `type/subtype`, lower case.
    media_type: String,
    /// The parameters, names lower case.
    parameters: Vec<(String, String)>,
    /// `q`, 0 to 1.
    quality: f32,
}

impl MediaRange {
    fn parameter(&self, name: &str) -> Option<&str> {
        self.parameters
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

fn parse_accept(headers: &HeaderMap) -> Vec<MediaRange> {
    let mut ranges: Vec<MediaRange> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|range| {
            let mut parts = range.split(';');
            let media_type = parts.next()?.trim().to_ascii_lowercase();
            if media_type.is_empty() {
                return None;
            }
            let mut parameters = Vec::new();
            let mut quality = 1.0;
            for parameter in parts {
                let Some((key, value)) = parameter.split_once('=') else {
                    continue;
                };
                let key = key.trim().to_ascii_lowercase();
                let value = value.trim().trim_matches('"').to_string();
                if key == "q" {
                    quality = value.parse().unwrap_or(0.0);
                } else {
                    parameters.push((key, value));
                }
            }
            Some(MediaRange {
                media_type,
                parameters,
                quality,
            })
        })
        .collect();
    // Highest quality first; the client's order among equals (a stable sort).
    ranges.sort_by(|a, b| b.quality.total_cmp(&a.quality));
    ranges
}

/// The media types an answer may come in; `protobuf` for built-in kinds.
fn formats(protobuf: bool) -> &'static [&'static str] {
    if protobuf {
        &[
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf",
        ]
    } else {
        &["application/json", "application/yaml"]
    }
}

/// Chooses the answer's encoding and form for an endpoint of `shape`, whose kind can be
/// protobuf-encoded when `protobuf` (built-in kinds).
pub fn negotiate(
    headers: &HeaderMap,
    shape: Shape,
    protobuf: bool,
) -> Result<Negotiated, ApiError> {
    let ranges = parse_accept(headers);
    if ranges.is_empty() {
        return Ok(Negotiated::JSON);
    }
    for range in &ranges {
        if range.quality <= 0.0 {
            continue;
        }
        let format = match range.media_type.as_str() {
            "application/json" | "application/*" | "*/*" => Format::Json,
            "application/yaml" => Format::Yaml,
            "application/vnd.kubernetes.protobuf" if protobuf => Format::Protobuf,
            _ => continue,
        };
        let view = match range.parameter("as") {
            None => View::Object,
            Some(form) => {
                let meta = range.parameter("g") == Some("meta.k8s.io");
                let version = range.parameter("v");
                match (form, meta, version, shape) {
                    ("Table", true, Some("v1" | "v1beta1"), _) => View::Table,
                    (
                        "PartialObjectMetadata",
                        true,
                        Some("v1" | "v1beta1"),
                        Shape::Object | Shape::Watch,
                    ) => View::PartialObjectMetadata,
                    ("PartialObjectMetadataList", true, Some("v1" | "v1beta1"), Shape::List) => {
                        View::PartialObjectMetadataList
                    }
                    _ => continue,
                }
            }
        };
        if format == Format::Protobuf && view == View::Table {
            // kube-apiserver renders Tables in JSON or YAML only.
            continue;
        }
        return Ok(Negotiated { format, view });
    }
    Err(ApiError::not_acceptable(formats(protobuf)))
}

/// The `includeObject` of a Table: what each row carries of its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// Its `PartialObjectMetadata` (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
    /// Nothing.
    None,
}

impl IncludeObject {
    /// Reads `includeObject`; any other value than kube's is its 400.
    pub fn parse(value: Option<&str>) -> Result<Self, ApiError> {
        match value {
            None | Some("" | "Metadata") => Ok(Self::Metadata),
            Some("Object") => Ok(Self::Object),
            Some("None") => Ok(Self::None),
            Some(other) => Err(ApiError::bad_request(format!(
                "Unable to convert to Table as requested: includeObject: Invalid value: {other:?}: must be 'Metadata', 'Object', 'None', or empty"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn kubectl_get_asks_for_a_table_first() {
        let headers = accept(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
        );
        for shape in [Shape::Object, Shape::List, Shape::Watch] {
            assert_eq!(
                negotiate(&headers, shape, true).unwrap(),
                Negotiated {
                    format: Format::Json,
                    view: View::Table
                }
            );
        }
    }

    #[test]
    fn metadata_forms_fit_their_shape_or_fall_through() {
        let object = accept("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
        assert_eq!(
            negotiate(&object, Shape::Object, true).unwrap().view,
            View::PartialObjectMetadata
        );
        assert_eq!(negotiate(&object, Shape::List, true).unwrap_err().code, 406);
        let list = accept(
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
        );
        assert_eq!(
            negotiate(&list, Shape::List, true).unwrap().view,
            View::PartialObjectMetadataList
        );
        assert_eq!(
            negotiate(&list, Shape::Object, true).unwrap(),
            Negotiated::JSON
        );
    }

    #[test]
    fn protobuf_for_built_in_kinds_and_406_when_nothing_fits() {
        let headers = accept("application/vnd.kubernetes.protobuf, application/json");
        assert_eq!(
            negotiate(&headers, Shape::Object, true).unwrap().format,
            Format::Protobuf
        );
        assert_eq!(
            negotiate(&headers, Shape::Object, false).unwrap().format,
            Format::Json
        );
        let error = negotiate(&accept("text/html"), Shape::Object, true).unwrap_err();
        assert_eq!((error.code, error.reason), (406, "NotAcceptable"));
        assert_eq!(
            error.message,
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        );
        assert_eq!(
            negotiate(&accept("*/*"), Shape::List, true).unwrap(),
            Negotiated::JSON
        );
    }
}
