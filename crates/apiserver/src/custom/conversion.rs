//! Custom resources between the served versions of their CRD, as kube-apiserver converts them:
//! stored in the CRD's storage version, shown in the version a request names.
//!
//! The CRD's `spec.conversion.strategy` says how: `None` changes only `apiVersion`; `Webhook`
//! asks the CRD's conversion webhook ([`ConversionWebhook`]), one call for all the objects of
//! one answer. Either way the converted object is then made to fit its new version's schema
//! (pruned and defaulted), as apiextensions-apiserver's schema-coercing converter does.

use std::ops::Deref;

use serde_json::Value;

use super::webhook::{ConversionError, ConversionWebhook};
use crate::registry::Registry;
use crate::resource::ResourceKind;
use crate::rest::status::ApiError;
use crate::storage::StoredObject;

/// How a CRD converts its objects between its versions; one per CRD, shared by its versions.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Conversion {
    /// The version objects are written in (`storage: true`).
    pub storage_version: String,
    /// The webhook of the `Webhook` strategy; `None` for the `None` strategy.
    pub webhook: Option<ConversionWebhook>,
}

impl Conversion {
    /// Reads a CRD's storage version and `spec.conversion`.
    pub fn read(crd: &Value) -> Self {
        let spec = &crd["spec"];
        let storage_version = storage_version(crd).unwrap_or_default().to_string();
        let webhook = (spec["conversion"]["strategy"] == "Webhook")
            .then(|| {
                ConversionWebhook::read(
                    crd["metadata"]["name"].as_str().unwrap_or_default(),
                    &spec["conversion"]["webhook"],
                )
            })
            .flatten();
        Self {
            storage_version,
            webhook,
        }
    }
}

/// The name of a CRD's storage version (`storage: true`).
pub fn storage_version(crd: &Value) -> Option<&str> {
    crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|version| version["storage"] == true)?["name"]
        .as_str()
}

impl From<ConversionError> for ApiError {
    fn from(error: ConversionError) -> Self {
        ApiError::unknown(error.0)
    }
}

/// Whether `object` is in another version than `kind`'s (and `kind` is a custom resource).
pub fn needs_conversion(kind: &ResourceKind, object: &Value) -> bool {
    if kind.custom.is_none() {
        return false;
    }
    let found = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // `<group>/<version>`, compared without making it: this runs for every object answered.
    found
        .strip_prefix(kind.group.as_str())
        .and_then(|rest| rest.strip_prefix('/'))
        != Some(kind.version.as_str())
}

/// Whether converting to `kind`'s version calls a webhook.
pub fn uses_webhook(kind: &ResourceKind) -> bool {
    kind.custom
        .as_deref()
        .is_some_and(|version| version.conversion.webhook.is_some())
}

/// `object` as `kind`'s version shows it, when that needs no webhook; `None` when it is
/// already that (or `kind` is not a custom resource, or its CRD converts with a webhook, whose
/// callers convert with [`shown`] first). An object of `kind`'s version written before the
/// version's schema is made to fit the schema.
pub fn converted(kind: &ResourceKind, object: &StoredObject) -> Option<StoredObject> {
    let version = kind.custom.as_deref()?;
    let convert = needs_conversion(kind, object);
    if convert && version.conversion.webhook.is_some()
        || !convert && !version.written_before_schema(object)
    {
        return None;
    }
    let mut value = object.value().clone();
    value["apiVersion"] = Value::String(kind.api_version());
    super::fit_to_schema(version, &mut value);
    Some(StoredObject::new(value))
}

/// `objects` as `kind`'s version shows them: each `None` that already is. A webhook is called
/// once for all that need it; its failure is kube's 500.
pub async fn shown(
    kind: &ResourceKind,
    objects: &[&StoredObject],
    list: bool,
) -> Result<Vec<Option<StoredObject>>, ApiError> {
    let Some(version) = kind.custom.as_deref() else {
        return Ok(objects.iter().map(|_| None).collect());
    };
    let Some(webhook) = &version.conversion.webhook else {
        return Ok(objects
            .iter()
            .map(|object| converted(kind, object))
            .collect());
    };
    let needed: Vec<&Value> = objects
        .iter()
        .filter(|object| needs_conversion(kind, object))
        .map(|object| object.value())
        .collect();
    // Those already of this version need no webhook (only fitting, if written before the
    // schema).
    if needed.is_empty() {
        return Ok(objects
            .iter()
            .map(|object| converted(kind, object))
            .collect());
    }
    let subject = if list {
        format!(
            "{}/{}, Kind={}List",
            kind.group, version.conversion.storage_version, kind.kind
        )
    } else {
        needed
            .first()
            .map(|object| subject(object))
            .unwrap_or_default()
    };
    let mut answered = webhook
        .convert(&subject, &kind.api_version(), &needed, list)
        .await?
        .into_iter();
    Ok(objects
        .iter()
        .map(|object| {
            if !needs_conversion(kind, object) {
                return converted(kind, object);
            }
            let mut value = answered.next()?;
            super::fit_to_schema(version, &mut value);
            Some(StoredObject::new(value))
        })
        .collect())
}

/// A stored object as a request's version shows it.
#[derive(Debug)]
pub enum Shown<'a> {
    /// The stored object itself: it is in that version.
    Stored(&'a StoredObject),
    /// The object converted.
    Converted(StoredObject),
}

impl Deref for Shown<'_> {
    type Target = StoredObject;

    fn deref(&self) -> &StoredObject {
        match self {
            Self::Stored(object) => object,
            Self::Converted(object) => object,
        }
    }
}

/// One object as `kind`'s version shows it.
pub async fn shown_one<'a>(
    kind: &ResourceKind,
    object: &'a StoredObject,
) -> Result<Shown<'a>, ApiError> {
    let converted = if uses_webhook(kind) && needs_conversion(kind, object) {
        shown(kind, &[object], false).await?.pop().flatten()
    } else {
        converted(kind, object)
    };
    Ok(match converted {
        Some(converted) => Shown::Converted(converted),
        None => Shown::Stored(object),
    })
}

/// `object`, written through `kind`'s version, in its CRD's storage version, as it is stored.
pub async fn to_storage(
    registry: &Registry,
    kind: &ResourceKind,
    object: Value,
) -> Result<Value, ApiError> {
    let Some(version) = kind.custom.as_deref() else {
        return Ok(object);
    };
    let storage = &version.conversion.storage_version;
    if storage.is_empty() || *storage == kind.version {
        return Ok(object);
    }
    let api_version = format!("{}/{storage}", kind.group);
    let mut converted = match &version.conversion.webhook {
        None => {
            let mut object = object;
            object["apiVersion"] = Value::String(api_version);
            object
        }
        Some(webhook) => webhook
            .convert(&subject(&object), &api_version, &[&object], false)
            .await?
            .pop()
            .unwrap_or_default(),
    };
    // The storage version is served unless the CRD says otherwise; one that is not has no
    // schema here to fit.
    if let Some(stored) = registry
        .find(&kind.group, storage, &kind.plural)
        .and_then(|kind| kind.custom)
    {
        super::fit_to_schema(&stored, &mut converted);
    }
    Ok(converted)
}

/// How kube names what a webhook converts: `group/version, Kind=Kind`.
fn subject(object: &Value) -> String {
    format!(
        "{}, Kind={}",
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default()
    )
}
