//! The columns `kubectl get` shows, as kube-apiserver's printers compute them for a Table
//! (`pkg/printers/internalversion/printers.go`): per built-in kind its column definitions and
//! the cells of one object, always the wide set (kubectl hides priority-1 columns unless
//! `-o wide`). Kinds without a printer get kube's default table: `Name` and `Created At`.

mod cells;
mod core;
mod other;
mod workloads;

use serde_json::{Value, json};

use super::schema::definitions;
use crate::resource::ResourceKind;

/// Where a column's description comes from.
#[derive(Debug, Clone, Copy)]
pub enum Description {
    /// These words.
    Text(&'static str),
    /// The description of a field: its type's definition and the field's name.
    Field(&'static str, &'static str),
}

/// One column.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Its header.
    pub name: &'static str,
    /// Its OpenAPI type: `string`, `integer`, `boolean`, `date`, `number`.
    pub kind: &'static str,
    /// Its format: `name` for the object's name, else empty.
    pub format: &'static str,
    /// 0 for the default columns, 1 for the wide ones.
    pub priority: u8,
    /// What it describes.
    pub description: Description,
}

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The `Name` column.
pub(crate) const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    priority: 0,
    description: Description::Field(META, "name"),
};

/// The `Age` column.
const AGE: Column = Column {
    name: "Age",
    kind: "string",
    format: "",
    priority: 0,
    description: Description::Field(META, "creationTimestamp"),
};

/// A default-priority column.
const fn column(name: &'static str, kind: &'static str, description: Description) -> Column {
    Column {
        name,
        kind,
        format: "",
        priority: 0,
        description,
    }
}

/// A wide (priority 1) column.
const fn wide(name: &'static str, kind: &'static str, description: Description) -> Column {
    Column {
        name,
        kind,
        format: "",
        priority: 1,
        description,
    }
}

const fn text(words: &'static str) -> Description {
    Description::Text(words)
}

const fn field(definition: &'static str, name: &'static str) -> Description {
    Description::Field(definition, name)
}

/// A kind's printer: its columns and how one object's cells are computed (`now` for ages).
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    /// The columns, in order.
    pub columns: &'static [Column],
    /// The cells of one object, one per column.
    pub cells: fn(&Value, jiff::Timestamp) -> Vec<Value>,
}

/// kube's default table, for kinds without a printer.
pub const DEFAULT: Printer = Printer {
    columns: &[
        NAME,
        Column {
            name: "Created At",
            kind: "date",
            format: "",
            priority: 0,
            description: Description::Field(META, "creationTimestamp"),
        },
    ],
    cells: |object, _| {
        let created = object["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or("0001-01-01T00:00:00Z");
        vec![json!(cells::name(object)), json!(created)]
    },
};

/// The printer of `kind`.
pub fn printer(kind: &ResourceKind) -> Printer {
    if kind.builtin.is_none() {
        return DEFAULT;
    }
    let found = match (kind.group.as_str(), kind.plural.as_str()) {
        ("", plural) => core::printer(plural),
        ("apps" | "batch" | "autoscaling" | "policy", plural) => workloads::printer(plural),
        (group, plural) => other::printer(group, plural),
    };
    found.unwrap_or(DEFAULT)
}

/// How long ago `timestamp` was, as kube's `HumanDuration` (`5m30s`); `<unknown>` without one.
pub fn age(timestamp: &Value, now: jiff::Timestamp) -> String {
    cells::age(timestamp, now)
}

/// The description of `ObjectMeta`'s field `name`, as kube's default columns describe it.
pub fn metadata_description(name: &str) -> String {
    field_description(META, name)
}

/// The description the OpenAPI `definition` gives its field `name`.
fn field_description(definition: &str, name: &str) -> String {
    definitions()
        .get(definition)
        .and_then(|definition| definition["properties"][name]["description"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The JSON of a column definition, its description resolved.
pub fn column_definition(column: &Column) -> Value {
    let description = match column.description {
        Description::Text(words) => words.to_string(),
        Description::Field(definition, name) => field_description(definition, name),
    };
    json!({
        "name": column.name,
        "type": column.kind,
        "format": column.format,
        "description": description,
        "priority": column.priority,
    })
}

#[cfg(test)]
mod tests;
