//! A CustomResourceDefinition checked as kube-apiserver checks it before serving it
//! (apiextensions-apiserver's `apis/apiextensions/validation` and `apiserver/schema`): its name,
//! group, scope, names, versions (one storage version), each version's schema (present,
//! structural, patterns that compile), subresources and printer columns.
//!
//! kube-apiserver checks the internal form of a CRD, in which what every version has alike
//! (schema, subresources, columns) is moved to the top: errors name those fields
//! `spec.validation`, `spec.subresources` and `spec.additionalPrinterColumns` then, and the
//! version's own fields otherwise.

use serde_json::Value;

use super::field_error::{FieldError, FieldErrorKind, go_quoted};
use crate::storage::meta::{
    DNS1035_LABEL_MESSAGE, DNS1123_SUBDOMAIN_MESSAGE, is_dns1035_label, is_dns1123_subdomain,
};
use crate::structural::field_references::undefined_field;
use crate::structural::literal_checks::literal_error;
use crate::structural::{Node, environment, go_regex};

/// The problems of `name` as a DNS-1035 label (apimachinery's `IsDNS1035Label`), joined.
fn dns1035_problems(name: &str) -> Option<String> {
    let mut problems = Vec::new();
    if name.len() > 63 {
        problems.push("must be no more than 63 characters");
    }
    if !is_dns1035_label(name) {
        problems.push(DNS1035_LABEL_MESSAGE);
    }
    (!problems.is_empty()).then(|| problems.join(","))
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// The errors of `crd` (as decoded and defaulted: `singular` and `listKind` filled in).
pub fn validate(crd: &Value) -> Vec<FieldError> {
    let mut errors = checks(crd, None);
    errors.extend(super::api_approval::errors(crd, None));
    errors
}

/// What [`validate`] and [`validate_update`] both check (`old`: the CRD an update replaces).
fn checks(crd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &crd["spec"];
    let names = &spec["names"];
    let group = text(&spec["group"]);
    let name = text(&crd["metadata"]["name"]);
    if !name.is_empty() && name != format!("{}.{group}", text(&names["plural"])) {
        errors.push(FieldError::invalid(
            "metadata.name",
            Value::from(name),
            r#"must be spec.names.plural+"."+spec.group"#,
        ));
    }

    if group.is_empty() {
        errors.push(FieldError::required("spec.group", ""));
    } else if !is_dns1123_subdomain(group) {
        errors.push(FieldError::invalid(
            "spec.group",
            Value::from(group),
            DNS1123_SUBDOMAIN_MESSAGE,
        ));
    } else if !group.contains('.') {
        errors.push(FieldError::invalid(
            "spec.group",
            Value::from(group),
            "should be a domain with at least one dot",
        ));
    }

    errors.extend(enum_error(
        "spec.scope",
        text(&spec["scope"]),
        &["Cluster", "Namespaced"],
    ));

    let no_versions = Vec::new();
    let versions = spec["versions"].as_array().unwrap_or(&no_versions);
    // Where the errors of a version's `field` are named: once, at the top, when every version
    // states it alike; else under each version.
    let placed = |field: &str, top: &'static str, own: &'static str| {
        let alike = versions
            .iter()
            .all(|version| version.get(field) == versions[0].get(field));
        move |index: usize| match (alike, index) {
            (true, 0) => Some(top.to_string()),
            (true, _) => None,
            (false, _) => Some(format!("spec.versions[{index}].{own}")),
        }
    };
    let schema_at = placed(
        "schema",
        "spec.validation.openAPIV3Schema",
        "schema.openAPIV3Schema",
    );
    let scale_at = placed(
        "subresources",
        "spec.subresources.scale",
        "subresources.scale",
    );
    let columns_at = placed(
        "additionalPrinterColumns",
        "spec.additionalPrinterColumns",
        "additionalPrinterColumns",
    );
    for (index, version) in versions.iter().enumerate() {
        let path = format!("spec.versions[{index}]");
        if version["schema"]["openAPIV3Schema"].is_null() {
            errors.push(FieldError::required(
                format!("{path}.schema.openAPIV3Schema"),
                "",
            ));
        }
        let version_name = text(&version["name"]);
        if let Some(problems) = dns1035_problems(version_name) {
            errors.push(FieldError::invalid(
                format!("{path}.name"),
                Value::from(version_name),
                problems,
            ));
        }
    }
    for (index, version) in versions.iter().enumerate() {
        let schema = &version["schema"]["openAPIV3Schema"];
        if schema.is_object()
            && let Some(base) = schema_at(index)
        {
            let subresources = &version["subresources"];
            // As kube: the rules' estimated cost is not checked again on an update that keeps
            // the version's schema (a stored CRD stays updatable).
            let schema_kept = old.is_some_and(|old| {
                old["spec"]["versions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|kept| {
                        kept["name"] == version["name"]
                            && kept["schema"]["openAPIV3Schema"] == *schema
                    })
            });
            errors.extend(schema_errors(
                schema,
                &base,
                subresources["status"].is_object(),
                !schema_kept,
            ));
        }
        if let Some(scale) = version["subresources"]
            .get("scale")
            .filter(|s| s.is_object())
            && let Some(base) = scale_at(index)
        {
            errors.extend(scale_errors(scale, &base));
        }
        if let Some(columns) = version["additionalPrinterColumns"].as_array()
            && let Some(base) = columns_at(index)
        {
            for (column_index, column) in columns.iter().enumerate() {
                errors.extend(column_errors(column, &format!("{base}[{column_index}]")));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    if !versions
        .iter()
        .all(|version| seen.insert(text(&version["name"])))
    {
        errors.push(FieldError::invalid(
            "spec.versions",
            spec["versions"].clone(),
            "must contain unique version names",
        ));
    }
    let storage = versions
        .iter()
        .filter(|version| version["storage"] == true)
        .count();
    if storage != 1 {
        errors.push(FieldError::invalid(
            "spec.versions",
            spec["versions"].clone(),
            "must have exactly one version marked as storage version",
        ));
    }

    for field in ["plural", "singular", "kind", "listKind"] {
        if text(&names[field]).is_empty() {
            errors.push(FieldError::required(format!("spec.names.{field}"), ""));
        }
    }
    errors.extend(names_errors(names, "spec.names"));
    errors.extend(conversion_errors(spec));
    errors
}

/// The error of a required field that must be one of `accepted` (kube's `validateEnumStrings`).
fn enum_error(field: &str, value: &str, accepted: &[&str]) -> Option<FieldError> {
    if value.is_empty() {
        return Some(FieldError::required(field, ""));
    }
    if accepted.contains(&value) {
        return None;
    }
    let quoted: Vec<String> = accepted.iter().map(|text| go_quoted(text)).collect();
    Some(FieldError::new(
        FieldErrorKind::NotSupported,
        field,
        Value::from(value),
        format!("supported values: {}", quoted.join(", ")),
    ))
}

/// The errors of `spec.conversion` (kube's `validateCustomResourceConversion`, which names the
/// internal form's fields: `webhookClientConfig`, `conversionReviewVersions`). An invalid
/// `caBundle` is accepted, as kube accepts it until the CRD is established.
fn conversion_errors(spec: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let conversion = &spec["conversion"];
    if !conversion.is_object() {
        return errors;
    }
    let strategy = text(&conversion["strategy"]);
    if strategy != "None" && spec["preserveUnknownFields"] == true {
        errors.push(FieldError::invalid(
            "spec.conversion.strategy",
            Value::from(strategy),
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    errors.extend(enum_error(
        "spec.conversion.strategy",
        strategy,
        &["None", "Webhook"],
    ));
    let webhook = &conversion["webhook"];
    let client = &webhook["clientConfig"];
    let versions = &webhook["conversionReviewVersions"];
    let has_versions = versions.as_array().is_some_and(|list| !list.is_empty());
    if strategy != "Webhook" {
        if client.is_object() {
            errors.push(FieldError::new(
                FieldErrorKind::Forbidden,
                "spec.conversion.webhookClientConfig",
                Value::Null,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if has_versions {
            errors.push(FieldError::new(
                FieldErrorKind::Forbidden,
                "spec.conversion.conversionReviewVersions",
                Value::Null,
                "should not be set when strategy is not set to Webhook",
            ));
        }
        return errors;
    }
    let base = "spec.conversion.webhookClientConfig";
    if !client.is_object() {
        errors.push(FieldError::required(
            base,
            "required when strategy is set to Webhook",
        ));
    } else {
        match (client.get("url"), client.get("service")) {
            (Some(url), None) => errors.extend(url_errors(text(url), &format!("{base}.url"))),
            (None, Some(service)) => {
                errors.extend(service_errors(service, &format!("{base}.service")));
            }
            _ => errors.push(FieldError::required(
                base,
                "exactly one of url or service is required",
            )),
        }
    }
    let path = "spec.conversion.conversionReviewVersions";
    let Some(list) = versions.as_array().filter(|list| !list.is_empty()) else {
        errors.push(FieldError::required(path, ""));
        return errors;
    };
    let mut seen = std::collections::HashSet::new();
    for (index, version) in list.iter().enumerate() {
        let version = text(version);
        if !seen.insert(version) {
            errors.push(FieldError::invalid(
                format!("{path}[{index}]"),
                Value::from(version),
                "duplicate version",
            ));
            continue;
        }
        if let Some(problems) = dns1035_problems(version) {
            errors.push(FieldError::invalid(
                format!("{path}[{index}]"),
                Value::from(version),
                problems,
            ));
        }
    }
    if !list
        .iter()
        .any(|version| super::webhook::REVIEW_VERSIONS.contains(&text(version)))
    {
        errors.push(FieldError::invalid(
            path,
            versions.clone(),
            "must include at least one of v1, v1beta1",
        ));
    }
    errors
}

/// The errors of a webhook's URL (apiserver's `ValidateWebhookURL`, HTTPS only).
fn url_errors(url: &str, path: &str) -> Vec<FieldError> {
    const FORM: &str = "; desired format: https://host[/path]";
    let mut errors = Vec::new();
    // Go's url.Parse keeps the fragment and the query apart; so does this.
    let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (scheme, rest) = rest.split_once("://").unwrap_or(("", rest));
    if scheme != "https" {
        errors.push(FieldError::invalid(
            path,
            Value::from(scheme),
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    let authority = if url.contains("://") {
        rest.split('/').next().unwrap_or_default()
    } else {
        ""
    };
    let (user, host) = authority.rsplit_once('@').unwrap_or(("", authority));
    if host.is_empty() {
        errors.push(FieldError::invalid(
            path,
            Value::from(host),
            format!("host must be specified{FORM}"),
        ));
    }
    if authority.contains('@') {
        // Go shows the user information with its password masked.
        let shown = match user.split_once(':') {
            Some((name, _)) => format!("{name}:xxxxx"),
            None => user.to_string(),
        };
        errors.push(FieldError::invalid(
            path,
            Value::from(shown),
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        errors.push(FieldError::invalid(
            path,
            Value::from(fragment),
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        errors.push(FieldError::invalid(
            path,
            Value::from(query),
            "query parameters are not permitted in the URL",
        ));
    }
    errors
}

/// The errors of a webhook's Service reference (apiserver's `ValidateWebhookService`).
fn service_errors(service: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for field in ["name", "namespace"] {
        if text(&service[field]).is_empty() {
            errors.push(FieldError::required(format!("{path}.{field}"), ""));
        }
    }
    let port = service["port"].as_i64().unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errors.push(FieldError::invalid(
            format!("{path}.port"),
            Value::from(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(url_path) = service["path"].as_str() else {
        return errors;
    };
    if url_path.is_empty() || url_path == "/" {
        return errors;
    }
    let invalid =
        |detail: String| FieldError::invalid(format!("{path}.path"), Value::from(url_path), detail);
    if url_path == "//" {
        errors.push(invalid("segment[0] may not be empty".into()));
        return errors;
    }
    if !url_path.starts_with('/') {
        errors.push(invalid("must start with a '/'".into()));
    }
    let trimmed = url_path.get(1..).unwrap_or_default();
    let trimmed = trimmed.strip_suffix('/').unwrap_or(trimmed);
    for (index, step) in trimmed.split('/').enumerate() {
        if step.is_empty() {
            errors.push(invalid(format!("segment[{index}] may not be empty")));
        } else if !is_dns1123_subdomain(step) {
            errors.push(invalid(format!(
                "segment[{index}]: {DNS1123_SUBDOMAIN_MESSAGE}"
            )));
        }
    }
    errors
}

/// The errors of an update of `old` to `crd`, beyond those of [`validate`]: what names its
/// storage may not change (`spec.group`, `spec.names.plural`; `spec.scope` and
/// `spec.names.kind` once established), and every version objects were ever stored in
/// (`status.storedVersions`, which the update keeps) must still be in `spec.versions` (kube's
/// `validateCustomResourceDefinitionSpecUpdate` and `ValidateCustomResourceDefinitionStoredVersions`).
pub fn validate_update(crd: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = checks(crd, Some(old));
    let established = old["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|condition| condition["type"] == "Established" && condition["status"] == "True");
    let mut immutable = Vec::new();
    if established {
        immutable.extend(["spec.scope", "spec.names.kind"]);
    }
    immutable.extend(["spec.group", "spec.names.plural"]);
    for field in immutable {
        let value = super::at(crd, field).cloned().unwrap_or_default();
        if Some(&value) != super::at(old, field) {
            errors.push(FieldError::invalid(field, value, "field is immutable"));
        }
    }
    let listed: Vec<&str> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|version| text(&version["name"]))
        .collect();
    let stored = crd["status"]["storedVersions"]
        .as_array()
        .into_iter()
        .flatten();
    for (index, version) in stored.enumerate() {
        let name = text(version);
        if !listed.contains(&name) {
            errors.push(FieldError::invalid(
                format!("status.storedVersions[{index}]"),
                version.clone(),
                format!(
                    "missing from spec.versions; {name} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {name} and removes {name} from status.storedVersions"
                ),
            ));
        }
    }
    errors.extend(super::api_approval::errors(crd, Some(old)));
    errors
}

/// kube's `ValidateCustomResourceDefinitionNames`.
fn names_errors(names: &Value, base: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for field in ["plural", "singular"] {
        let name = text(&names[field]);
        if !name.is_empty()
            && let Some(problems) = dns1035_problems(name)
        {
            errors.push(FieldError::invalid(
                format!("{base}.{field}"),
                Value::from(name),
                problems,
            ));
        }
    }
    for field in ["kind", "listKind"] {
        let name = text(&names[field]);
        if !name.is_empty()
            && let Some(problems) = dns1035_problems(&name.to_ascii_lowercase())
        {
            errors.push(FieldError::invalid(
                format!("{base}.{field}"),
                Value::from(name),
                format!("may have mixed case, but should otherwise match: {problems}"),
            ));
        }
    }
    errors.extend(label_list_errors(names, "shortNames", base));
    let kind = text(&names["kind"]);
    if !kind.is_empty() && kind == text(&names["listKind"]) {
        errors.push(FieldError::invalid(
            format!("{base}.listKind"),
            Value::from(kind),
            "kind and listKind may not be the same",
        ));
    }
    errors.extend(label_list_errors(names, "categories", base));
    errors
}

/// The errors of a list of names that must each be a DNS-1035 label (`shortNames`,
/// `categories`).
fn label_list_errors(names: &Value, field: &str, base: &str) -> Vec<FieldError> {
    let listed = names[field].as_array().into_iter().flatten();
    listed
        .enumerate()
        .filter_map(|(index, name)| {
            dns1035_problems(text(name)).map(|problems| {
                FieldError::invalid(format!("{base}.{field}[{index}]"), name.clone(), problems)
            })
        })
        .collect()
}

/// Where a schema node is: the root, a field of an object, or the items of a list.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Field,
    Item,
}

/// The errors of a version's schema: what makes it not structural, and value validations that
/// cannot work. Sorted by their text, as kube sorts them.
fn schema_errors(
    schema: &Value,
    base: &str,
    status_enabled: bool,
    check_cost: bool,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if schema["nullable"] == true {
        errors.push(FieldError::new(
            FieldErrorKind::Forbidden,
            format!("{base}.nullable"),
            Value::Null,
            "nullable cannot be true at the root",
        ));
    }
    let mut structural = Vec::new();
    node_errors(schema, Level::Root, base, None, &mut structural);
    // Like the cost check, only where the version's schema is new or changed (kube: unless the
    // stored CRD already has such a set).
    if check_cost {
        set_item_errors(schema, base, &mut structural);
    }
    structural.sort_by_key(ToString::to_string);
    // Defaults are checked against a schema that is structural only, as kube checks them.
    if structural.is_empty() {
        default_errors(&Node::compile(schema), base, &mut structural);
    }
    // The rules' estimated cost is checked once the schema itself is sound (kube: no schema
    // errors; a rule that does not compile is left out).
    if check_cost
        && structural
            .iter()
            .all(|error| error.field.contains("x-kubernetes-validations"))
    {
        cost_errors(schema, base, &mut Vec::new(), &mut structural);
    }
    errors.extend(structural);
    if status_enabled && schema["type"].as_str().is_some_and(|t| t != "object") {
        errors.push(FieldError::invalid(
            format!("{base}.type"),
            schema["type"].clone(),
            r#"only "object" is allowed as the type at the root of the schema if the status subresource is enabled"#,
        ));
    }
    errors
}

/// The items of every `set` list under `node` (at `path`) must be atomic: a list's items of
/// list type `atomic` (or none), an object's of map type `atomic`, as kube requires of new
/// schemas (`requireAtomicSetType`). kube names the item's list type as the value, also for an
/// object's map type; so does this.
fn set_item_errors(node: &Value, path: &str, errors: &mut Vec<FieldError>) {
    const ATOMIC: &str = "must be atomic as item of a list with x-kubernetes-list-type=set";
    let items = &node["items"];
    if node["x-kubernetes-list-type"] == "set" && items.is_object() {
        let list_type = items["x-kubernetes-list-type"].clone();
        match items["type"].as_str() {
            Some("array") if !list_type.is_null() && list_type != "atomic" => {
                errors.push(FieldError::invalid(
                    format!("{path}.items.x-kubernetes-list-type"),
                    list_type,
                    ATOMIC,
                ));
            }
            Some("object") if items["x-kubernetes-map-type"] != "atomic" => {
                errors.push(FieldError::invalid(
                    format!("{path}.items.x-kubernetes-map-type"),
                    list_type,
                    ATOMIC,
                ));
            }
            _ => {}
        }
    }
    if items.is_object() {
        set_item_errors(items, &format!("{path}.items"), errors);
    }
    for (name, property) in node["properties"].as_object().into_iter().flatten() {
        set_item_errors(property, &format!("{path}.properties[{name}]"), errors);
    }
    if node["additionalProperties"].is_object() {
        set_item_errors(
            &node["additionalProperties"],
            &format!("{path}.additionalProperties"),
            errors,
        );
    }
}

/// The rules under `node` (at `path`, under ancestors that multiply how often it occurs by
/// `factors`) whose estimated cost is surely over kube's budget, in kube's words (see
/// [`static_cost`](crate::structural::static_cost)).
fn cost_errors(
    node: &Value,
    path: &str,
    factors: &mut Vec<Option<u64>>,
    errors: &mut Vec<FieldError>,
) {
    use crate::structural::static_cost;
    // A rule that does not compile has no cost, as in kube.
    let compiled = |source: &str| {
        environment()
            .compile(source)
            .ok()
            .filter(|program| checked(program, node, is_resource_root(node, path)).is_none())
    };
    for (base, rule) in rules_at(node, path) {
        if let Some(program) = compiled(text(&rule["rule"]))
            && static_cost::rule_refused(
                program.expression(),
                node,
                static_cost::cardinality(factors, node),
            )
        {
            errors.push(FieldError::new(
                FieldErrorKind::Forbidden,
                format!("{base}.rule"),
                Value::Null,
                static_cost::over_budget("estimated rule cost"),
            ));
        }
        if let Some(expression) = rule.get("messageExpression").and_then(Value::as_str)
            && let Some(program) = compiled(expression)
            && static_cost::message_refused(program.expression(), node)
        {
            errors.push(FieldError::new(
                FieldErrorKind::Forbidden,
                format!("{base}.messageExpression"),
                Value::Null,
                static_cost::over_budget("estimated messageExpression cost"),
            ));
        }
    }
    factors.push(static_cost::child_factor(node));
    for (name, property) in node["properties"].as_object().into_iter().flatten() {
        cost_errors(
            property,
            &format!("{path}.properties[{name}]"),
            factors,
            errors,
        );
    }
    if node["items"].is_object() {
        cost_errors(&node["items"], &format!("{path}.items"), factors, errors);
    }
    if node["additionalProperties"].is_object() {
        cost_errors(
            &node["additionalProperties"],
            &format!("{path}.additionalProperties"),
            factors,
            errors,
        );
    }
    factors.pop();
}

/// The errors of the defaults under `node` (at `path` of the CRD): each must have no field
/// its schema does not declare, must hold to its schema, and then to its CEL rules, as an
/// unchanged value and as a new one (apiextensions-apiserver's `defaulting.ValidateDefaults`).
fn default_errors(node: &Node, path: &str, errors: &mut Vec<FieldError>) {
    if let Some(default) = &node.default {
        let at = format!("{path}.default");
        let mut pruned = default.clone();
        super::coerce::prune(&mut pruned, node);
        if pruned != *default {
            errors.push(FieldError::invalid(
                at.clone(),
                default.clone(),
                "must not have unknown fields",
            ));
        }
        let schema_errors = super::validate::validate(node, default, None, &at);
        if schema_errors.is_empty() {
            // Transition rules see the default as its own old value; then, for rules with
            // `optionalOldSelf`, it is checked as a value with none before it.
            let mut rule_errors = super::rules::validate(node, default, Some(default));
            if rule_errors.is_empty() {
                rule_errors = super::rules::validate(node, default, None);
            }
            errors.extend(rule_errors.into_iter().map(|mut error| {
                error.field = match error.field.as_str() {
                    super::NIL_PATH => at.clone(),
                    below if below.starts_with('[') => format!("{at}{below}"),
                    below => format!("{at}.{below}"),
                };
                error
            }));
        }
        errors.extend(schema_errors);
    }
    if let Some(items) = node.items.as_deref() {
        default_errors(items, &format!("{path}.items"), errors);
    }
    for (name, property) in &node.properties {
        default_errors(property, &format!("{path}.properties[{name}]"), errors);
    }
}

/// `uncorrelatable`: the path of the highest list above `node` whose items cannot be matched
/// with an old object's (any list but a `map` list), where rules may not read `oldSelf`.
fn node_errors(
    node: &Value,
    level: Level,
    path: &str,
    uncorrelatable: Option<&str>,
    errors: &mut Vec<FieldError>,
) {
    let Some(fields) = node.as_object() else {
        return;
    };
    let json_type = text(&node["type"]);
    let int_or_string = node["x-kubernetes-int-or-string"] == true;
    let preserve = node["x-kubernetes-preserve-unknown-fields"] == true;
    let embedded = node["x-kubernetes-embedded-resource"] == true;
    if json_type == "array" && !node["items"].is_object() {
        errors.push(FieldError::required(
            format!("{path}.items"),
            "must be specified",
        ));
    }
    if let Some(items) = fields.get("items") {
        let below =
            uncorrelatable.or((text(&node["x-kubernetes-list-type"]) != "map").then_some(path));
        node_errors(items, Level::Item, &format!("{path}.items"), below, errors);
    }
    if let Some(properties) = fields.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            node_errors(
                property,
                Level::Field,
                &format!("{path}.properties[{name}]"),
                uncorrelatable,
                errors,
            );
        }
    }
    if let Some(additional) = fields.get("additionalProperties") {
        if level == Level::Root {
            errors.push(FieldError::new(
                FieldErrorKind::Forbidden,
                format!("{path}.additionalProperties"),
                Value::Null,
                "must not be used at the root",
            ));
        }
        // `true` beside properties is allowed; `false` or a schema is a map's, not a struct's.
        if fields
            .get("properties")
            .is_some_and(|p| p.as_object().is_some_and(|p| !p.is_empty()))
            && (additional == &Value::Bool(false) || additional.is_object())
        {
            errors.push(FieldError::new(
                FieldErrorKind::Forbidden,
                format!("{path}.additionalProperties"),
                Value::Null,
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        node_errors(
            additional,
            Level::Field,
            &format!("{path}.additionalProperties"),
            uncorrelatable,
            errors,
        );
    }
    if embedded && json_type != "object" {
        if json_type.is_empty() {
            errors.push(FieldError::required(
                format!("{path}.type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errors.push(FieldError::invalid(
                format!("{path}.type"),
                Value::from(json_type),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if json_type.is_empty() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errors.push(FieldError::required(format!("{path}.type"), detail));
    }
    if level == Level::Root && !json_type.is_empty() && json_type != "object" {
        errors.push(FieldError::invalid(
            format!("{path}.type"),
            Value::from(json_type),
            "must be object at the root",
        ));
    }
    if !json_type.is_empty()
        && !matches!(
            json_type,
            "object" | "array" | "string" | "integer" | "number" | "boolean"
        )
    {
        errors.push(FieldError::new(
            FieldErrorKind::NotSupported,
            format!("{path}.type"),
            Value::from(json_type),
            r#"supported values: "array", "boolean", "integer", "number", "object", "string""#,
        ));
    }
    if let Some(metadata) = node["properties"].get("metadata")
        && level == Level::Root
    {
        let allowed = metadata["properties"]
            .as_object()
            .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"));
        let extra = metadata.as_object().is_some_and(|m| {
            m.keys()
                .any(|k| !matches!(k.as_str(), "type" | "properties" | "description"))
        });
        if !allowed || extra {
            errors.push(FieldError::new(
                FieldErrorKind::Forbidden,
                format!("{path}.properties[metadata]"),
                Value::Null,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if let Some(pattern) = node["pattern"].as_str()
        && let Err(error) = go_regex(pattern)
    {
        // The parser's last line says what is wrong (`error: unclosed group`), as Go's
        // `error parsing regexp: <what>: `<expression>`` does.
        let error = error.to_string();
        let what = error
            .lines()
            .last()
            .unwrap_or_default()
            .trim_start_matches("error: ");
        errors.push(FieldError::invalid(
            format!("{path}.pattern"),
            Value::from(pattern),
            format!(
                "must be a valid regular expression, but isn't: error parsing regexp: {what}: `{pattern}`"
            ),
        ));
    }
    if node["uniqueItems"] == true {
        errors.push(FieldError::new(
            FieldErrorKind::Forbidden,
            format!("{path}.uniqueItems"),
            Value::Null,
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(list_type) = node["x-kubernetes-list-type"].as_str() {
        if json_type != "array" {
            let detail = "must be array if x-kubernetes-list-type is specified";
            errors.push(if json_type.is_empty() {
                FieldError::required(format!("{path}.type"), detail)
            } else {
                FieldError::invalid(format!("{path}.type"), Value::from(json_type), detail)
            });
        }
        if !matches!(list_type, "atomic" | "set" | "map") {
            errors.push(FieldError::new(
                FieldErrorKind::NotSupported,
                format!("{path}.x-kubernetes-list-type"),
                Value::from(list_type),
                r#"supported values: "atomic", "set", "map""#,
            ));
        }
        if list_type == "map" {
            let keys = node["x-kubernetes-list-map-keys"].as_array();
            if keys.is_none_or(Vec::is_empty) {
                errors.push(FieldError::required(
                    format!("{path}.x-kubernetes-list-map-keys"),
                    "must not be empty if x-kubernetes-list-type is map",
                ));
            }
            if node["items"]["type"] != "object" {
                errors.push(FieldError::invalid(
                    format!("{path}.items.type"),
                    node["items"]["type"].clone(),
                    "must be object for an array of list-type map",
                ));
            }
        }
    }
    rule_errors(node, path, uncorrelatable, errors);
    for combination in ["allOf", "anyOf", "oneOf"] {
        for (index, branch) in node[combination]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            value_validation_errors(branch, &format!("{path}.{combination}[{index}]"), errors);
        }
    }
    if node["not"].is_object() {
        value_validation_errors(&node["not"], &format!("{path}.not"), errors);
    }
}

/// Each CEL rule of `node` (at `path`) with its own path, `…x-kubernetes-validations[i]`.
fn rules_at<'a>(node: &'a Value, path: &'a str) -> impl Iterator<Item = (String, &'a Value)> {
    node["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .map(move |(index, rule)| (format!("{path}.x-kubernetes-validations[{index}]"), rule))
}

/// The errors of a node's CEL rules: each must be given and compile, as must its message
/// expression, and its reason be one kube knows; a rule under an `uncorrelatable` list may
/// not read `oldSelf`.
fn rule_errors(
    node: &Value,
    path: &str,
    uncorrelatable: Option<&str>,
    errors: &mut Vec<FieldError>,
) {
    let root = is_resource_root(node, path);
    const REASONS: &str = r#"supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#;
    for (base, rule) in rules_at(node, path) {
        let source = text(&rule["rule"]);
        if source.is_empty() {
            errors.push(FieldError::required(
                format!("{base}.rule"),
                "rule is not specified",
            ));
        } else {
            // As kube, a rule that does not compile uses no `oldSelf`.
            let uses_old_self = match environment().compile(source) {
                Err(error) => {
                    errors.push(FieldError::invalid(
                        format!("{base}.rule"),
                        rule.clone(),
                        format!("compilation failed: {}", one_line(&error.to_string())),
                    ));
                    false
                }
                Ok(program) => match checked(&program, node, root) {
                    Some(failure) => {
                        errors.push(FieldError::invalid(
                            format!("{base}.rule"),
                            rule.clone(),
                            format!("compilation failed: {failure}"),
                        ));
                        false
                    }
                    None => program.references().has_variable("oldSelf"),
                },
            };
            if let Some(list) = uncorrelatable.filter(|_| uses_old_self) {
                errors.push(FieldError::invalid(
                    format!("{base}.rule"),
                    Value::from(source),
                    format!(
                        "oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"
                    ),
                ));
            }
            if let Some(optional) = rule.get("optionalOldSelf").and_then(Value::as_bool)
                && !uses_old_self
            {
                errors.push(FieldError::invalid(
                    format!("{base}.optionalOldSelf"),
                    Value::from(optional),
                    "may not be set if oldSelf is not used in rule",
                ));
            }
        }
        if let Some(message) = rule.get("message").and_then(Value::as_str) {
            if message.trim().is_empty() {
                errors.push(FieldError::invalid(
                    format!("{base}.message"),
                    Value::from(message),
                    "must be non-empty if specified",
                ));
            } else if message.contains('\n') {
                errors.push(FieldError::invalid(
                    format!("{base}.message"),
                    Value::from(message),
                    "must not contain line breaks",
                ));
            }
        }
        if let Some(expression) = rule.get("messageExpression").and_then(Value::as_str) {
            if expression.trim().is_empty() {
                errors.push(FieldError::required(
                    format!("{base}.messageExpression"),
                    "messageExpression must be non-empty if specified",
                ));
            } else {
                let failure = match environment().compile(expression) {
                    Err(error) => Some(one_line(&error.to_string())),
                    Ok(program) => checked(&program, node, root),
                };
                if let Some(failure) = failure {
                    errors.push(FieldError::invalid(
                        format!("{base}.messageExpression"),
                        rule.clone(),
                        format!("messageExpression compilation failed: {failure}"),
                    ));
                }
            }
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str)
            && !matches!(
                reason,
                "FieldValueDuplicate"
                    | "FieldValueForbidden"
                    | "FieldValueInvalid"
                    | "FieldValueRequired"
            )
        {
            errors.push(FieldError::new(
                FieldErrorKind::NotSupported,
                format!("{base}.reason"),
                Value::from(reason),
                REASONS,
            ));
        }
    }
}

/// Whether `node` (at `path`) is a resource's root, whose rules also see its `apiVersion`,
/// `kind` and `metadata`: the schema's own root, or an embedded resource.
fn is_resource_root(node: &Value, path: &str) -> bool {
    path.ends_with("openAPIV3Schema") || node["x-kubernetes-embedded-resource"] == true
}

/// What kube's compilation of a parsed rule at `node` finds beyond the parse, in cel-go's
/// words: a field the schema does not declare, mixed literals, a constant argument that does
/// not parse.
fn checked(program: &cel::Program, node: &Value, root: bool) -> Option<String> {
    undefined_field(program, node, root).or_else(|| literal_error(program))
}

/// A compiler's message on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Inside `allOf`, `anyOf`, `oneOf` and `not` a structural schema states only value
/// validations: no type, default, or extensions (kube's `validateValueValidation`).
fn value_validation_errors(node: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let forbidden = [
        ("type", "must be empty to be structural"),
        ("additionalProperties", "must be undefined to be structural"),
        ("default", "must be undefined to be structural"),
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        (
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        ),
        (
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        ),
        (
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        ),
        ("x-kubernetes-validations", "must be empty to be structural"),
        (
            "uniqueItems",
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ),
    ];
    for (field, detail) in forbidden {
        if node
            .get(field)
            .is_some_and(|value| value != &Value::Bool(false))
        {
            errors.push(FieldError::new(
                FieldErrorKind::Forbidden,
                format!("{path}.{field}"),
                Value::Null,
                detail,
            ));
        }
    }
    for (name, property) in node["properties"].as_object().into_iter().flatten() {
        value_validation_errors(property, &format!("{path}.properties[{name}]"), errors);
    }
    if node["items"].is_object() {
        value_validation_errors(&node["items"], &format!("{path}.items"), errors);
    }
}

/// kube's checks of a `scale` subresource.
fn scale_errors(scale: &Value, base: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (field, prefix, detail) in [
        (
            "specReplicasPath",
            ".spec.",
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            ".status.",
            "should be a json path under .status",
        ),
    ] {
        let path = text(&scale[field]);
        if path.is_empty() {
            errors.push(FieldError::required(format!("{base}.{field}"), ""));
        } else if !path.starts_with(prefix) {
            errors.push(FieldError::invalid(
                format!("{base}.{field}"),
                Value::from(path),
                detail,
            ));
        }
    }
    let selector = text(&scale["labelSelectorPath"]);
    if !selector.is_empty() && !selector.starts_with(".spec.") && !selector.starts_with(".status.")
    {
        errors.push(FieldError::invalid(
            format!("{base}.labelSelectorPath"),
            Value::from(selector),
            "should be a json path under either .spec or .status",
        ));
    }
    errors
}

/// kube's checks of a printer column.
fn column_errors(column: &Value, base: &str) -> Vec<FieldError> {
    const TYPES: &str = "boolean,date,integer,number,string";
    const FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";
    let mut errors = Vec::new();
    if text(&column["name"]).is_empty() {
        errors.push(FieldError::required(format!("{base}.name"), ""));
    }
    match text(&column["type"]) {
        "" => errors.push(FieldError::required(
            format!("{base}.type"),
            format!("must be one of {TYPES}"),
        )),
        found if !TYPES.split(',').any(|known| known == found) => {
            errors.push(FieldError::invalid(
                format!("{base}.type"),
                Value::from(found),
                format!("must be one of {TYPES}"),
            ));
        }
        _ => {}
    }
    let format = text(&column["format"]);
    if !format.is_empty() && !FORMATS.split(',').any(|known| known == format) {
        errors.push(FieldError::invalid(
            format!("{base}.format"),
            Value::from(format),
            format!("must be one of {FORMATS}"),
        ));
    }
    if text(&column["jsonPath"]).is_empty() {
        errors.push(FieldError::required(format!("{base}.JSONPath"), ""));
    }
    errors
}

/// Fills in what kube-apiserver's defaulting fills in a CRD: `singular` (the kind in lower
/// case), `listKind` (`<Kind>List`), `conversion` (`strategy: None`) and a webhook service's
/// port (443).
pub fn default(crd: &mut Value) {
    let names = &mut crd["spec"]["names"];
    let Some(kind) = names["kind"].as_str().map(str::to_string) else {
        return;
    };
    if text(&names["singular"]).is_empty() {
        names["singular"] = Value::from(kind.to_ascii_lowercase());
    }
    if text(&names["listKind"]).is_empty() {
        names["listKind"] = Value::from(format!("{kind}List"));
    }
    let spec = &mut crd["spec"];
    if spec["conversion"].is_null() {
        spec["conversion"] = serde_json::json!({"strategy": "None"});
    }
    if let Some(service) = spec
        .pointer_mut("/conversion/webhook/clientConfig/service")
        .and_then(Value::as_object_mut)
    {
        service.entry("port").or_insert_with(|| Value::from(443));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd() -> Value {
        json!({
            "metadata": {"name": "foos.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "listKind": "FooList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object"}}}],
            },
        })
    }

    fn messages(crd: &Value) -> Vec<String> {
        validate(crd).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_good_crd_has_no_errors() {
        assert!(messages(&crd()).is_empty());
    }

    #[test]
    fn names_group_scope_and_versions_are_checked() {
        let mut bad = crd();
        bad["metadata"]["name"] = json!("bars.example.com");
        bad["spec"]["scope"] = json!("Galaxy");
        bad["spec"]["versions"][0]["storage"] = json!(false);
        assert_eq!(
            messages(&bad),
            [
                r#"metadata.name: Invalid value: "bars.example.com": must be spec.names.plural+"."+spec.group"#,
                r#"spec.scope: Unsupported value: "Galaxy": supported values: "Cluster", "Namespaced""#,
                r#"spec.versions: Invalid value: [{"name":"v1","schema":{"openAPIV3Schema":{"type":"object"}},"served":true,"storage":false}]: must have exactly one version marked as storage version"#,
            ]
        );
        let mut bad = crd();
        bad["spec"]["group"] = json!("example");
        bad["metadata"]["name"] = json!("foos.example");
        assert_eq!(
            messages(&bad),
            [r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#]
        );
    }

    #[test]
    fn a_rule_over_budget_is_refused_on_create_and_on_an_update_that_changes_its_schema_only() {
        let mut costly = crd();
        costly["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"},
                "x-kubernetes-validations": [{"rule": "self.all(x, self.exists_one(y, x == y))"}]}},
        });
        let refused = [
            "spec.validation.openAPIV3Schema.properties[tags].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)",
        ];
        assert_eq!(messages(&costly), refused);
        // Stored before the check (say, in a data directory): its schema kept, it may change.
        let mut relabeled = costly.clone();
        relabeled["metadata"]["labels"] = json!({"team": "a"});
        let texts = |errors: Vec<FieldError>| -> Vec<String> {
            errors.iter().map(ToString::to_string).collect()
        };
        assert!(texts(validate_update(&relabeled, &costly)).is_empty());
        let mut changed = costly.clone();
        changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["tags"]["items"]
            ["maxLength"] = json!(10);
        assert_eq!(texts(validate_update(&changed, &costly)), refused);
    }

    #[test]
    fn properties_allow_additional_properties_true_but_not_false_or_a_schema() {
        let with = |additional: Value| {
            let mut crd = crd();
            crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
                "type": "object",
                "properties": {"spec": {"type": "object",
                    "properties": {"a": {"type": "string"}},
                    "additionalProperties": additional}},
            });
            messages(&crd)
        };
        assert!(with(json!(true)).is_empty(), "{:?}", with(json!(true)));
        let refused = [
            "spec.validation.openAPIV3Schema.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
        ];
        assert_eq!(with(json!(false)), refused);
        assert_eq!(with(json!({"type": "string"})), refused);
    }

    #[test]
    fn unique_items_is_refused_in_value_validations_too() {
        let mut bad = crd();
        bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                    "anyOf": [{"uniqueItems": true}]}},
        });
        assert_eq!(
            messages(&bad),
            [
                "spec.validation.openAPIV3Schema.properties[tags].anyOf[0].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
            ]
        );
    }

    #[test]
    fn schemas_must_be_structural() {
        let mut bad = crd();
        bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
            "type": "object",
            "properties": {
                "spec": {"properties": {"size": {"type": "integer"}}},
                "tags": {"type": "array"},
                "name": {"type": "string", "pattern": "(unclosed"},
            },
        });
        assert_eq!(
            messages(&bad),
            [
                "spec.validation.openAPIV3Schema.properties[name].pattern: Invalid value: \"(unclosed\": must be a valid regular expression, but isn't: error parsing regexp: unclosed group: `(unclosed`",
                "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
                "spec.validation.openAPIV3Schema.properties[tags].items: Required value: must be specified",
            ]
        );
    }

    /// A default is checked as a value of its own (kube-openapi's root has no name, which
    /// leaves its messages starting with " in body").
    #[test]
    fn defaults_must_fit_their_schema() {
        let mut bad = crd();
        bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "size": {"type": "integer", "maximum": 5, "default": 9},
                "mode": {"type": "string", "default": 3},
                "extra": {"type": "object", "properties": {"a": {"type": "string"}},
                          "default": {"a": "x", "b": "y"}},
                "fine": {"type": "string", "enum": ["a"], "default": "a"},
            }}},
        });
        assert_eq!(
            messages(&bad),
            [
                "spec.validation.openAPIV3Schema.properties[spec].properties[extra].default: Invalid value: {\"a\":\"x\",\"b\":\"y\"}: must not have unknown fields",
                "spec.validation.openAPIV3Schema.properties[spec].properties[mode].default: Invalid value: \"integer\":  in body must be of type string: \"integer\"",
                "spec.validation.openAPIV3Schema.properties[spec].properties[size].default: Invalid value: 9:  in body should be less than or equal to 5",
            ]
        );
    }

    /// A default must hold to the CEL rules of its node and below, as a new value too.
    #[test]
    fn defaults_must_hold_to_their_rules() {
        let mut bad = crd();
        bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "limits": {
                    "type": "object",
                    "default": {"min": 5, "max": 3},
                    "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
                    "x-kubernetes-validations": [
                        {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                    ],
                },
                "size": {
                    "type": "integer",
                    "default": 50,
                    "x-kubernetes-validations": [
                        {"rule": "oldSelf.hasValue() || self <= 10", "optionalOldSelf": true,
                         "message": "starts at most 10"},
                    ],
                },
                "fine": {"type": "integer", "default": 1,
                         "x-kubernetes-validations": [{"rule": "self > 0"}]},
            }}},
        });
        assert_eq!(
            messages(&bad),
            [
                "spec.validation.openAPIV3Schema.properties[spec].properties[limits].default: Invalid value: min must not exceed max",
                "spec.validation.openAPIV3Schema.properties[spec].properties[size].default: Invalid value: 50: starts at most 10",
            ]
        );
    }
}
