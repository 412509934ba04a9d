//! A custom resource read through another served version of its CRD than the one it was
//! written through, converted as kube-apiserver's `None` strategy converts it: the same object
//! under the requested `apiVersion`, with that version's defaults filled in. (A `Webhook`
//! strategy is not served: such objects are converted the same way.)

use serde_json::Value;

use super::coerce;
use crate::resource::ResourceKind;
use crate::storage::StoredObject;

/// `object` as `kind`'s version shows it; `None` when it is already that (or `kind` is not a
/// custom resource), so the stored object and its serialization are sent as they are.
pub fn converted(kind: &ResourceKind, object: &StoredObject) -> Option<StoredObject> {
    let version = kind.custom.as_deref()?;
    let found = object.value().get("apiVersion").and_then(Value::as_str)?;
    // `<group>/<version>`, compared without making it: this runs for every object answered.
    let same = found
        .strip_prefix(kind.group.as_str())
        .and_then(|rest| rest.strip_prefix('/'))
        == Some(kind.version.as_str());
    if same {
        return None;
    }
    let mut value = object.value().clone();
    value["apiVersion"] = Value::String(kind.api_version());
    if version.has_defaults
        && let Some(schema) = version.schema.as_deref()
    {
        coerce::apply_defaults(&mut value, schema);
    }
    Some(StoredObject::new(value))
}
