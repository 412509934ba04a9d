//! The API server's selector parsing, `LabelSelector::parse` and `FieldSelector::parse` (the
//! `labelSelector` and `fieldSelector` query parameters of list, watch and deletecollection),
//! and their evaluation.
//!
//! Input: the label selector, a newline, the field selector, a newline, and optionally a JSON
//! object to evaluate them on besides a few fixed ones. Checked: nothing panics; parsing is
//! deterministic; an empty selector selects everything.
#![no_main]

use ctrlkit_apiserver::selector::{FieldSelector, LabelSelector};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(3, '\n');
    let labels = parts.next().unwrap_or("");
    let fields = parts.next().unwrap_or("");
    let object = parts
        .next()
        .and_then(|rest| serde_json::from_str::<Value>(rest).ok());

    let mut objects = vec![
        json!({"metadata": {"name": "x", "namespace": "default",
                            "labels": {"a": "b", "c": "d", "e": "f", "app.kubernetes.io/name": "web"}}}),
        json!({"metadata": {"name": "y"}}),
        json!({"metadata": {"name": 7, "namespace": null, "labels": {"a": 1, "h": null}}}),
        json!({"metadata": "not an object"}),
        json!([1, 2, 3]),
        Value::Null,
    ];
    objects.extend(object);

    let label_selector = LabelSelector::parse(labels);
    assert_eq!(label_selector, LabelSelector::parse(labels));
    if let Ok(selector) = &label_selector {
        for object in &objects {
            let matched = selector.matches(object);
            if selector.is_empty() {
                assert!(matched);
            }
        }
    }
    let field_selector = FieldSelector::parse(fields);
    assert_eq!(field_selector, FieldSelector::parse(fields));
    if let Ok(selector) = &field_selector {
        for object in &objects {
            let matched = selector.matches(object);
            if selector.is_empty() {
                assert!(matched);
            }
        }
    }
    // The label grammar applied to the field text and back, as a client that mixes them up sends.
    let _ = LabelSelector::parse(fields).map(|selector| selector.matches(&objects[0]));
    let _ = FieldSelector::parse(labels).map(|selector| selector.matches(&objects[0]));
});
