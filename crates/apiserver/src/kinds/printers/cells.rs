//! What many printers share: names, ages, labels and selectors written as kubectl shows them.

use serde_json::{Map, Value};

/// The object's name.
pub(super) fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or("")
}

/// The string at `value`, or `absent`.
pub(super) fn text<'a>(value: &'a Value, absent: &'a str) -> &'a str {
    value
        .as_str()
        .filter(|text| !text.is_empty())
        .unwrap_or(absent)
}

/// The integer at `value`, 0 when absent.
pub(super) fn int(value: &Value) -> i64 {
    value.as_i64().unwrap_or(0)
}

/// How long ago `timestamp` was, as kube's `HumanDuration`; `<unknown>` without one.
pub(super) fn age(timestamp: &Value, now: jiff::Timestamp) -> String {
    match timestamp
        .as_str()
        .and_then(|text| text.parse::<jiff::Timestamp>().ok())
    {
        Some(then) => human_duration(now.as_second().saturating_sub(then.as_second())),
        None => "<unknown>".to_string(),
    }
}

/// The object's age.
pub(super) fn object_age(object: &Value, now: jiff::Timestamp) -> String {
    age(&object["metadata"]["creationTimestamp"], now)
}

/// kube's `duration.HumanDuration` of whole seconds: `59s`, `119s`, `5m30s`, `10m`, `7h59m`,
/// `30h`, `3d5h`, `20d`, `2y70d`.
pub(super) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let rest = seconds % 60;
        return if rest == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{rest}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let rest = minutes % 60;
        return if rest == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{rest}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 192 {
        let rest = hours % 24;
        return if rest == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{rest}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = hours / 24;
        let rest = days % 365;
        return if rest == 0 {
            format!("{}y", days / 365)
        } else {
            format!("{}y{rest}d", days / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// A label map as `k=v,k2=v2` (sorted), `<none>` when empty.
pub(super) fn labels(map: &Value) -> String {
    let Some(map) = map.as_object().filter(|map| !map.is_empty()) else {
        return "<none>".to_string();
    };
    pairs(map)
}

fn pairs(map: &Map<String, Value>) -> String {
    map.iter()
        .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(",")
}

/// A `LabelSelector` as kubectl writes it (`app=web,tier in (a,b),!x`), `<none>` when empty.
pub(super) fn label_selector(selector: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(labels) = selector["matchLabels"]
        .as_object()
        .filter(|l| !l.is_empty())
    {
        parts.push(pairs(labels));
    }
    for expression in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = expression["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let part = match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        };
        parts.push(part);
    }
    if parts.is_empty() {
        "<none>".to_string()
    } else {
        parts.join(",")
    }
}

/// The names and the images of a pod spec's containers, each joined with `,`.
pub(super) fn containers_and_images(pod_spec: &Value) -> (String, String) {
    let containers = pod_spec["containers"].as_array();
    let names: Vec<&str> = containers
        .into_iter()
        .flatten()
        .map(|container| container["name"].as_str().unwrap_or_default())
        .collect();
    let images: Vec<&str> = containers
        .into_iter()
        .flatten()
        .map(|container| container["image"].as_str().unwrap_or_default())
        .collect();
    (names.join(","), images.join(","))
}

/// The condition of `conditions` of type `kind`, if any.
pub(super) fn condition<'a>(conditions: &'a Value, kind: &str) -> Option<&'a Value> {
    conditions
        .as_array()?
        .iter()
        .find(|condition| condition["type"] == kind)
}

/// Whether `conditions` has a condition of type `kind` whose status is `True`.
pub(super) fn is_true(conditions: &Value, kind: &str) -> bool {
    condition(conditions, kind).is_some_and(|condition| condition["status"] == "True")
}

/// An int-or-string written as Go's `intstr.String()`, or `absent`.
pub(super) fn int_or_string(value: &Value, absent: &str) -> String {
    match value {
        Value::Number(number) => number.to_string(),
        Value::String(text) => text.clone(),
        _ => absent.to_string(),
    }
}
