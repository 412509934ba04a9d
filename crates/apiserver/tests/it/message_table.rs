//! The table of Kubernetes' protobuf messages the server decodes and encodes
//! (`src/kinds/messages.txt`) is derived from the kube-rs project's protobuf bindings
//! (`k8s-pb`, whose `#[prost(...)]` attributes give each field's number and wire type) and
//! k8s-openapi's schemas (which give each field's JSON name). This test derives it again from
//! the `k8s-pb` source Cargo fetched and fails if the committed table differs; with
//! `CTRLKIT_WRITE_MESSAGE_TABLE=1` it writes the table instead (after a `k8s-pb` upgrade).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ctrlkit_apiserver::kinds::schema::definitions;

const TABLE: &str = "src/kinds/messages.txt";

/// The source directory of the `k8s-pb` package this workspace resolved.
fn k8s_pb_source() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let host = std::process::Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc runs");
    let host = String::from_utf8_lossy(&host.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: ").map(str::to_string))
        .expect("rustc names its host");
    // This platform's packages only: the others (Windows crates) are not downloaded.
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
        ])
        .arg(host)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let package = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|package| package["name"] == "k8s-pb")
        .expect("k8s-pb is a dev-dependency of ctrlkit-apiserver");
    let manifest = PathBuf::from(package["manifest_path"].as_str().unwrap());
    manifest.parent().unwrap().join("src")
}

/// The definition-name prefix of a k8s-pb module path (`api/core/v1` → `io.k8s.api.core.v1`).
fn package(module: &[String]) -> Option<String> {
    let joined = module.join(".");
    let package = match module.first()?.as_str() {
        "api" | "apimachinery" => format!("io.k8s.{joined}"),
        "apiextensions_apiserver" => {
            format!(
                "io.k8s.{}",
                joined.replacen("apiextensions_apiserver", "apiextensions-apiserver", 1)
            )
        }
        "kube_aggregator" => {
            format!(
                "io.k8s.{}",
                joined.replacen("kube_aggregator", "kube-aggregator", 1)
            )
        }
        _ => return None,
    };
    Some(package)
}

fn normalized(name: &str) -> String {
    name.trim_start_matches("r#")
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

fn lower_camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.trim_start_matches("r#").chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// One field as parsed: its number, Rust name, prost attribute and Rust type.
struct RawField {
    tag: u32,
    name: String,
    attribute: String,
    rust_type: String,
    /// The `+marker=value` lines of its doc comment (`listType`, `listMapKey`, …).
    markers: Vec<(String, String)>,
}

/// A struct: its name, whether it is atomic (`+structType=atomic`), and its fields.
struct RawStruct {
    name: String,
    atomic: bool,
    fields: Vec<RawField>,
}

/// The `+key=value` marker of a doc comment line, if it is one.
fn marker(line: &str) -> Option<(String, String)> {
    let text = line.trim_start_matches('/').trim();
    let (key, value) = text.strip_prefix('+')?.split_once('=')?;
    Some((key.to_string(), value.trim().to_string()))
}

/// The structs of one k8s-pb module file.
type Structs = Vec<RawStruct>;

/// The structs of one k8s-pb module file.
fn parse_module(text: &str) -> Structs {
    let mut structs = Vec::new();
    let mut current: Option<RawStruct> = None;
    let mut attribute: Option<String> = None;
    let mut pending = String::new();
    let mut markers = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("//") {
            if let Some(found) = marker(trimmed) {
                markers.push(found);
            }
            continue;
        }
        if let Some(name) = trimmed
            .strip_prefix("pub struct ")
            .and_then(|rest| rest.strip_suffix(" {"))
        {
            let atomic = markers
                .iter()
                .any(|(key, value)| key == "structType" && value == "atomic");
            markers.clear();
            current = Some(RawStruct {
                name: name.to_string(),
                atomic,
                fields: Vec::new(),
            });
            continue;
        }
        if trimmed.starts_with("#[derive") {
            continue;
        }
        let Some(RawStruct { fields, .. }) = current.as_mut() else {
            markers.clear();
            continue;
        };
        if trimmed == "}" && pending.is_empty() {
            structs.push(current.take().unwrap());
            continue;
        }
        if let Some(inner) = trimmed
            .strip_prefix("#[prost(")
            .and_then(|rest| rest.strip_suffix(")]"))
        {
            attribute = Some(inner.to_string());
            continue;
        }
        if attribute.is_none() {
            continue;
        }
        pending.push_str(trimmed);
        pending.push(' ');
        let depth: i32 = pending
            .chars()
            .map(|c| match c {
                '<' => 1,
                '>' => -1,
                _ => 0,
            })
            .sum();
        if depth != 0 || !trimmed.ends_with(',') {
            continue;
        }
        let declaration = std::mem::take(&mut pending);
        let declaration = declaration.trim().trim_end_matches(',');
        let declaration = declaration.strip_prefix("pub ").unwrap();
        let (name, rust_type) = declaration.split_once(':').unwrap();
        let attribute = attribute.take().unwrap();
        let tag = attribute
            .split("tag = \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .and_then(|tag| tag.parse().ok())
            .unwrap();
        fields.push(RawField {
            tag,
            name: name.trim().to_string(),
            attribute,
            rust_type: rust_type.split_whitespace().collect::<Vec<_>>().join(" "),
            markers: std::mem::take(&mut markers),
        });
    }
    structs
}

/// The message a field's Rust type names, resolved against `module`.
fn message_type(rust_type: &str, module: &[String]) -> String {
    // prost writes long generic arguments one a line, with a trailing comma.
    let mut inner = rust_type.replace(' ', "").replace(",>", ">");
    for wrapper in [
        "::core::option::Option<",
        "::prost::alloc::vec::Vec<",
        "::prost::alloc::boxed::Box<",
    ] {
        while let Some(rest) = inner.strip_prefix(wrapper) {
            inner = rest.strip_suffix('>').unwrap().to_string();
        }
    }
    if let Some(rest) = inner.strip_prefix("::prost::alloc::collections::BTreeMap<") {
        let (_, value) = rest.strip_suffix('>').unwrap().split_once(',').unwrap();
        inner = value.to_string();
    }
    let mut path: Vec<String> = module.to_vec();
    let mut segments: Vec<&str> = inner.split("::").collect();
    let name = segments.pop().unwrap().to_string();
    for segment in segments {
        if segment == "super" {
            path.pop();
        } else {
            path.push(segment.to_string());
        }
    }
    format!("{}.{name}", package(&path).unwrap())
}

/// How a list, map or field merges, from its Go markers, as kube-openapi turns them into
/// `x-kubernetes-list-type` and friends: `;list=atomic|set|map:k1+k2` for a list (without
/// `+listType`, a strategic-merge key makes it a map, a merge strategy without one a set, else
/// atomic), `;map=atomic` for an atomic map, `;patch=<strategy>[:<key>]` for strategic merge
/// patch, `;default=<json>` for a declared default.
fn semantics(field: &RawField) -> String {
    let values = |name: &str| -> Vec<&str> {
        field
            .markers
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .collect()
    };
    let first = |name: &str| values(name).first().map(|value| value.to_string());
    let mut out = String::new();
    let repeated = field.attribute.contains("repeated");
    let strategy = first("patchStrategy");
    let merge_key = first("patchMergeKey");
    if repeated {
        let list = match first("listType").as_deref() {
            Some("map") => format!("map:{}", values("listMapKey").join("+")),
            Some("set") => "set".to_string(),
            Some(_) => "atomic".to_string(),
            None => match (&strategy, &merge_key) {
                (Some(strategy), Some(key)) if strategy.contains("merge") => format!("map:{key}"),
                (Some(strategy), None) if strategy.contains("merge") => "set".to_string(),
                _ => "atomic".to_string(),
            },
        };
        out.push_str(&format!(";list={list}"));
    }
    if field.attribute.starts_with("btree_map") && first("mapType").as_deref() == Some("atomic") {
        out.push_str(";map=atomic");
    }
    if let Some(strategy) = strategy {
        match merge_key {
            Some(key) => out.push_str(&format!(";patch={strategy}:{key}")),
            None => out.push_str(&format!(";patch={strategy}")),
        }
    }
    if let Some(default) = first("default") {
        out.push_str(&format!(";default={default}"));
    }
    out
}

/// The wire type of a field as the table writes it.
fn field_type(field: &RawField, module: &[String], names: &BTreeMap<String, String>) -> String {
    let attribute = &field.attribute;
    let resolve = |pb_name: String| names.get(&pb_name).cloned().unwrap_or(pb_name);
    if let Some(map) = attribute.strip_prefix("btree_map = \"") {
        let value = map.split('"').next().unwrap().split(", ").nth(1).unwrap();
        let value = match value {
            "message" => resolve(message_type(&field.rust_type, module)),
            scalar => scalar.to_string(),
        };
        return format!("map[string]{value}");
    }
    let kind = attribute.split([',', ' ']).next().unwrap();
    let scalar = match kind {
        "message" => resolve(message_type(&field.rust_type, module)),
        "bytes" => "bytes".to_string(),
        other => other.to_string(),
    };
    if attribute.contains("repeated") {
        format!("[]{scalar}")
    } else {
        scalar
    }
}

fn derive_table() -> String {
    let root = k8s_pb_source();
    let definitions = definitions();
    let mut modules: Vec<(Vec<String>, Structs)> = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|name| name == "mod.rs") {
                let module: Vec<String> = relative(&root, path.parent().unwrap());
                if package(&module).is_none() {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let structs = parse_module(&text);
                if !structs.is_empty() {
                    modules.push((module, structs));
                }
            }
        }
    }
    // k8s-pb's name of each message (prost's casing) → Kubernetes' (k8s-openapi's definition).
    let mut names = BTreeMap::new();
    for (module, structs) in &modules {
        let package = package(module).unwrap();
        for RawStruct { name, .. } in structs {
            let pb_name = format!("{package}.{name}");
            let kube_name = definitions
                .keys()
                .find(|definition| {
                    definition
                        .strip_prefix(&package)
                        .and_then(|rest| rest.strip_prefix('.'))
                        .is_some_and(|rest| rest.eq_ignore_ascii_case(name))
                })
                .cloned()
                .unwrap_or_else(|| pb_name.clone());
            names.insert(pb_name, kube_name);
        }
    }
    // Each message by Kubernetes' name, for the fields of embedded structs.
    let mut embedded: BTreeMap<String, &RawStruct> = BTreeMap::new();
    for (module, structs) in &modules {
        let package = package(module).unwrap();
        for raw in structs {
            embedded.insert(names[&format!("{package}.{}", raw.name)].clone(), raw);
        }
    }
    let mut lines = BTreeMap::new();
    for (module, structs) in &modules {
        let package = package(module).unwrap();
        for RawStruct {
            name,
            atomic,
            fields,
        } in structs
        {
            let message = names[&format!("{package}.{name}")].clone();
            let properties = definitions
                .get(&message)
                .and_then(|definition| definition["properties"].as_object());
            let mut line = message.clone();
            if *atomic {
                line.push_str(";atomic");
            }
            let mut fields: Vec<&RawField> = fields.iter().collect();
            fields.sort_by_key(|field| field.tag);
            for field in fields {
                let declared = properties.and_then(|properties| {
                    properties
                        .keys()
                        .find(|key| normalized(key) == normalized(&field.name))
                });
                let json_name = declared
                    .cloned()
                    .unwrap_or_else(|| lower_camel(&field.name));
                let field_type = field_type(field, module, &names);
                let mut semantics = semantics(field);
                // A struct Go embeds with `json:",inline"`: its fields are the message's own in
                // JSON (a Probe's `httpGet`, a Volume's `configMap`), so the schema does not
                // name the field itself.
                let scalar = ["string", "int32", "int64", "bool", "double", "bytes"];
                let single_message = !field_type.starts_with("[]")
                    && !field_type.starts_with("map[")
                    && !scalar.contains(&field_type.as_str());
                // (A field newer than k8s-openapi's schema is not one: its fields are not the
                // message's either.)
                let fields_are_the_messages = |properties: &serde_json::Map<_, _>| {
                    embedded.get(&field_type).is_some_and(|inner: &&RawStruct| {
                        inner.fields.iter().any(|inner_field| {
                            properties.keys().any(|key: &String| {
                                normalized(key) == normalized(&inner_field.name)
                            })
                        })
                    })
                };
                if declared.is_none()
                    && single_message
                    && properties.is_some_and(fields_are_the_messages)
                {
                    semantics.push_str(";inline");
                }
                line.push_str(&format!(
                    "\t{},{json_name},{field_type}{semantics}",
                    field.tag
                ));
            }
            lines.insert(message, line);
        }
    }
    let mut table = String::from(
        "# Kubernetes' messages: name (`;atomic` for an atomic struct), then per field its protobuf\n# number, JSON name, type, and how it merges (`;list=`, `;map=`, `;patch=`, `;default=`,\n# `;inline` for a struct whose fields are the message's own in JSON).\n# Derived from k8s-pb and k8s-openapi by tests/message_table.rs; do not edit.\n",
    );
    for line in lines.into_values() {
        table.push_str(&line);
        table.push('\n');
    }
    table
}

fn relative(root: &Path, dir: &Path) -> Vec<String> {
    dir.strip_prefix(root)
        .unwrap()
        .components()
        .map(|component| component.as_os_str().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_committed_message_table_is_k8s_pbs() {
    let derived = derive_table();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(TABLE);
    if std::env::var_os("CTRLKIT_WRITE_MESSAGE_TABLE").is_some() {
        std::fs::write(&path, &derived).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == derived,
        "{TABLE} is not what k8s-pb gives: run CTRLKIT_WRITE_MESSAGE_TABLE=1 cargo test -p ctrlkit-apiserver --test it -- message_table::"
    );
}
