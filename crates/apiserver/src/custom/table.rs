//! The Table of a custom resource, as kube-apiserver's CRD table convertor makes it: `Name`,
//! then the version's `additionalPrinterColumns` (`Age` when it has none), each cell the value
//! its JSONPath finds, typed as its column says (a `date` shown as an age).

use serde_json::{Value, json};

use super::field_error::write_go_value;
use super::version::{CustomVersion, PrinterColumn};
use crate::kinds::printers;

/// The column definitions.
pub fn column_definitions(version: &CustomVersion) -> Vec<Value> {
    let mut columns = vec![printers::column_definition(&printers::NAME)];
    columns.extend(version.columns.iter().map(|column| {
        let description = if !column.description.is_empty() {
            column.description.clone()
        } else if column.json_path == ".metadata.creationTimestamp" && column.name == "Age" {
            printers::metadata_description("creationTimestamp")
        } else {
            format!(
                "Custom resource definition column (in JSONPath format): {}",
                column.json_path
            )
        };
        json!({
            "name": column.name,
            "type": column.column_type,
            "format": column.format,
            "description": description,
            "priority": column.priority,
        })
    }));
    columns
}

/// The cells of `object`'s row (`now` for ages).
pub fn cells(version: &CustomVersion, object: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let mut cells = vec![object["metadata"]["name"].clone()];
    cells.extend(
        version
            .columns
            .iter()
            .map(|column| cell(column, object, now)),
    );
    cells
}

fn cell(column: &PrinterColumn, object: &Value, now: jiff::Timestamp) -> Value {
    let Some(value) = column.path.as_ref().and_then(|path| path.first(object)) else {
        return Value::Null;
    };
    match (column.column_type.as_str(), value) {
        (_, Value::Null) => Value::Null,
        // Printed as the JSONPath template prints it.
        ("string", Value::String(_)) => value.clone(),
        ("string", other) => {
            let mut text = String::new();
            write_go_value(&mut text, other);
            Value::String(text)
        }
        ("integer", Value::Number(number)) => number
            .as_i64()
            // A float shows its integer part, as Go's conversion (saturating where Go's is
            // undefined).
            .or_else(|| {
                #[allow(clippy::cast_possible_truncation)]
                number.as_f64().map(|float| float as i64)
            })
            .map_or(Value::Null, Value::from),
        ("number", Value::Number(number)) => number.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(_)) => value.clone(),
        ("date", Value::String(timestamp)) => {
            if timestamp.parse::<jiff::Timestamp>().is_ok() {
                Value::String(printers::age(value, now))
            } else {
                Value::String("<invalid>".into())
            }
        }
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_follow_their_columns() {
        let version = CustomVersion::read(&json!({
            "name": "v1",
            "additionalPrinterColumns": [
                {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                {"name": "Ready", "type": "string", "priority": 1,
                 "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
                {"name": "Missing", "type": "string", "jsonPath": ".spec.none"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ],
        }));
        let now: jiff::Timestamp = "2024-01-01T00:10:00Z".parse().unwrap();
        let object = json!({
            "metadata": {"name": "w", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"replicas": 3, "ratio": 1},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        });
        assert_eq!(
            cells(&version, &object, now),
            [
                json!("w"),
                json!(3),
                json!("True"),
                json!(1.0),
                Value::Null,
                json!("10m")
            ]
        );
        let columns = column_definitions(&version);
        assert_eq!(columns[2]["priority"], 1);
        assert_eq!(
            columns[1]["description"],
            "Custom resource definition column (in JSONPath format): .spec.replicas"
        );
    }
}
