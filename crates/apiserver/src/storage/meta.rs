//! Reading and writing an object's `metadata`, and the checks kube-apiserver makes on names.

use serde_json::{Map, Value};

use super::error::{Cause, StoreError};

/// The `metadata` map of `object`, made if absent. Refuses a body that is not a JSON object, or
/// whose metadata is not one.
pub(crate) fn metadata_mut(object: &mut Value) -> Result<&mut Map<String, Value>, StoreError> {
    let Value::Object(fields) = object else {
        return Err(StoreError::BadRequest(
            "the request body must be a JSON object".to_string(),
        ));
    };
    let metadata = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    match metadata {
        Value::Object(map) => Ok(map),
        _ => Err(StoreError::BadRequest(
            "metadata must be a JSON object".to_string(),
        )),
    }
}

/// A string field of `metadata`, if present and a string.
pub(crate) fn string_field<'a>(metadata: &'a Map<String, Value>, field: &str) -> Option<&'a str> {
    metadata.get(field).and_then(Value::as_str)
}

/// Whether `metadata.finalizers` holds at least one entry.
pub(crate) fn has_finalizers(metadata: &Map<String, Value>) -> bool {
    metadata
        .get("finalizers")
        .and_then(Value::as_array)
        .is_some_and(|finalizers| !finalizers.is_empty())
}

/// Whether `a` and `b` agree on everything but `metadata` and (when `without_status`)
/// `status`: what a change of bumps `metadata.generation`. Maps iterate in key order, so the
/// two walks meet the same keys together.
pub(crate) fn same_spec(a: &Value, b: &Value, without_status: bool) -> bool {
    let ignored = |key: &str| key == "metadata" || (without_status && key == "status");
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let mut a = a.iter().filter(|(key, _)| !ignored(key));
    let mut b = b.iter().filter(|(key, _)| !ignored(key));
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(a), Some(b)) if a == b => {}
            _ => return false,
        }
    }
}

pub(crate) const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
pub(crate) const DNS1035_LABEL_MESSAGE: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
pub(crate) const DNS1123_LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// The causes that make `name` invalid for a resource (RFC 1123 subdomain, or label when
/// `label_only`, as namespaces need); empty when it is valid.
pub(crate) fn name_causes(name: &str, label_only: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let invalid = |message: String| Cause {
        reason: "FieldValueInvalid",
        field: "metadata.name".to_string(),
        message: format!("Invalid value: \"{name}\": {message}"),
    };
    if label_only {
        if name.len() > 63 {
            causes.push(invalid("must be no more than 63 characters".to_string()));
        }
        if !is_dns1123_label(name) {
            causes.push(invalid(DNS1123_LABEL_MESSAGE.to_string()));
        }
        return causes;
    }
    if name.len() > 253 {
        causes.push(invalid("must be no more than 253 characters".to_string()));
    }
    if !name.split('.').all(is_dns1123_label) {
        causes.push(invalid(DNS1123_SUBDOMAIN_MESSAGE.to_string()));
    }
    causes
}

/// Gives `target` the `status` of `source` (none when `source` has none): what a status write
/// keeps of its body, and what a write of the main resource keeps of the stored object.
pub(crate) fn set_status_from(target: &mut Value, source: &Value) {
    if let Some(fields) = target.as_object_mut() {
        match source.get("status") {
            Some(status) => fields.insert("status".into(), status.clone()),
            None => fields.remove("status"),
        };
    }
}

/// Whether `name` is an RFC 1123 subdomain (at most 253 characters of labels joined by dots).
pub(crate) fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns1123_label)
}

/// Whether `name` matches RFC 1035's label pattern (its length checked apart): a lower-case
/// letter first, lower-case letters, digits and `-`, and no `-` last.
pub(crate) fn is_dns1035_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes
            .last()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// Whether `part` matches RFC 1123's label pattern (the length is checked apart, as
/// apimachinery reports it as its own error).
pub(crate) fn is_dns1123_label(part: &str) -> bool {
    let bytes = part.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

/// The five random characters `generateName` appends, from kube-apiserver's alphabet (no vowels,
/// no look-alikes).
pub(crate) fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let random = uuid::Uuid::new_v4();
    random.as_bytes()[..5]
        .iter()
        .map(|byte| char::from(ALPHABET[usize::from(*byte) % ALPHABET.len()]))
        .collect()
}

/// Marks an object for deletion (`deletionTimestamp` now, no grace period), as a delete of an
/// object that finalizers hold does.
pub(crate) fn mark_deleted(metadata: &mut Map<String, Value>) {
    // As kube-apiserver's markAsDeleting: controllers that skip status-only updates by
    // generation must still see that the object is going.
    if let Some(generation) = metadata.get("generation").and_then(Value::as_i64)
        && generation > 0
    {
        metadata.insert(
            "generation".into(),
            Value::from(generation.saturating_add(1)),
        );
    }
    metadata.insert("deletionTimestamp".into(), Value::String(now_timestamp()));
    metadata.insert("deletionGracePeriodSeconds".into(), Value::from(0));
}

/// Now, as `metadata` timestamps are written: RFC 3339 in UTC to the second.
pub(crate) fn now_timestamp() -> String {
    // Truncated to the second, as Go writes a time.
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
        .map(|now| now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(name_causes("foo", false).is_empty());
        assert!(name_causes("foo.example-1.com", false).is_empty());
        assert!(name_causes("a", true).is_empty());
        for bad in ["Foo", "-foo", "foo-", "foo..bar", "foo_bar", ""] {
            assert_eq!(name_causes(bad, false).len(), 1, "{bad}");
        }
        assert_eq!(name_causes("foo.bar", true).len(), 1);
        assert_eq!(name_causes(&"a".repeat(64), true).len(), 1);
        let cause = &name_causes("Bad_Name", false)[0];
        assert_eq!(cause.field, "metadata.name");
        assert!(
            cause
                .message
                .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain")
        );
    }

    #[test]
    fn generate_name_suffixes_use_the_safe_alphabet() {
        for _ in 0..100 {
            let suffix = random_suffix();
            assert_eq!(suffix.len(), 5);
            assert!(
                suffix
                    .chars()
                    .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
            );
        }
    }

    #[test]
    fn timestamps_are_rfc3339_seconds_in_utc() {
        let now = now_timestamp();
        assert_eq!(now.len(), "2026-11-22T00:00:00Z".len(), "{now}");
        assert!(now.ends_with('Z'));
    }

    #[test]
    fn metadata_of_bad_bodies_is_refused() {
        assert!(metadata_mut(&mut Value::Null).is_err());
        assert!(metadata_mut(&mut serde_json::json!({"metadata": 3})).is_err());
        let mut object = serde_json::json!({"kind": "ConfigMap"});
        assert!(metadata_mut(&mut object).is_ok());
        assert_eq!(object["metadata"], serde_json::json!({}));
    }
}
