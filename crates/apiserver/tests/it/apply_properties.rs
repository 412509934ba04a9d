//! Properties of server-side apply under random applies by random managers, through the API:
//!
//! - every field the managers write is owned, and only by managers whose last accepted
//!   configuration states it with the value the object has;
//! - an apply the server refuses (a conflict, an invalid result) changes nothing;
//! - applying the same configuration again changes nothing: no new resourceVersion anywhere
//!   (so no watch event).
//!
//! The object is a Deployment: labels (a map), containers (a list keyed by name) with an
//! image (a scalar), env (a list keyed by name, nested) and args (an atomic list). A base
//! manager applies what the Deployment needs to be valid; three others apply random parts.

use std::collections::{BTreeMap, BTreeSet};

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

const NAME: &str = "subject";

/// One container a configuration states.
#[derive(Debug, Clone)]
struct ContainerPart {
    name: &'static str,
    image: &'static str,
    env: Vec<(&'static str, &'static str)>,
    args: Option<Vec<&'static str>>,
}

/// One apply: who, whether forced, and what it states.
#[derive(Debug, Clone)]
struct ApplyStep {
    manager: &'static str,
    force: bool,
    labels: Vec<(&'static str, &'static str)>,
    containers: Vec<ContainerPart>,
}

fn container_part(name: &'static str) -> impl Strategy<Value = ContainerPart> {
    (
        prop::sample::select(vec!["img:1", "img:2"]),
        prop::sample::subsequence(vec!["E1", "E2"], 0..=2),
        prop::sample::select(vec!["v1", "v2"]),
        prop::option::of(prop::sample::subsequence(vec!["--a", "--b"], 1..=2)),
    )
        .prop_map(move |(image, env, value, args)| ContainerPart {
            name,
            image,
            env: env.into_iter().map(|name| (name, value)).collect(),
            args,
        })
}

fn apply_step() -> impl Strategy<Value = ApplyStep> {
    (
        prop::sample::select(vec!["alpha", "beta", "gamma"]),
        any::<bool>(),
        prop::sample::subsequence(vec!["a", "b", "c"], 0..=3),
        prop::sample::select(vec!["1", "2"]),
        prop::option::of(container_part("x")),
        prop::option::of(container_part("y")),
    )
        .prop_map(|(manager, force, labels, value, x, y)| ApplyStep {
            manager,
            force,
            labels: labels.into_iter().map(|key| (key, value)).collect(),
            containers: x.into_iter().chain(y).collect(),
        })
}

impl ApplyStep {
    fn config(&self) -> Value {
        let mut metadata = json!({"name": NAME});
        if !self.labels.is_empty() {
            let labels: Map<String, Value> = self
                .labels
                .iter()
                .map(|(key, value)| (key.to_string(), json!(value)))
                .collect();
            metadata["labels"] = Value::Object(labels);
        }
        let mut config =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata});
        if !self.containers.is_empty() {
            let containers: Vec<Value> = self
                .containers
                .iter()
                .map(|part| {
                    let mut container = json!({"name": part.name, "image": part.image});
                    if !part.env.is_empty() {
                        container["env"] = part
                            .env
                            .iter()
                            .map(|(name, value)| json!({"name": name, "value": value}))
                            .collect();
                    }
                    if let Some(args) = &part.args {
                        container["args"] = json!(args);
                    }
                    container
                })
                .collect();
            config["spec"] = json!({"template": {"spec": {"containers": containers}}});
        }
        config
    }
}

/// What the base manager applies: a valid Deployment with one container of its own.
fn base() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME},
        "spec": {
            "selector": {"matchLabels": {"app": NAME}},
            "template": {
                "metadata": {"labels": {"app": NAME}},
                "spec": {"containers": [{"name": "main", "image": "base:1"}]},
            },
        },
    })
}

/// A field the random managers write, as its `fieldsV1` path, with its value.
type Fields = BTreeMap<Vec<String>, Value>;

/// The fields of `object` the random managers write (labels a–c; containers x and y: image,
/// env values, args), by `fieldsV1` path. Works on a configuration and on a stored object.
fn written_fields(object: &Value) -> Fields {
    let mut fields = Fields::new();
    let path = |parts: &[&str]| {
        parts
            .iter()
            .map(|part| part.to_string())
            .collect::<Vec<_>>()
    };
    for (key, value) in object["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if ["a", "b", "c"].contains(&key.as_str()) {
            let field = format!("f:{key}");
            fields.insert(path(&["f:metadata", "f:labels", &field]), value.clone());
        }
    }
    let containers = &object["spec"]["template"]["spec"]["containers"];
    for container in containers.as_array().into_iter().flatten() {
        let name = container["name"].as_str().unwrap_or_default();
        if !["x", "y"].contains(&name) {
            continue;
        }
        let key = format!("k:{{\"name\":\"{name}\"}}");
        let at = |rest: &[&str]| {
            let mut full = path(&["f:spec", "f:template", "f:spec", "f:containers", &key]);
            full.extend(rest.iter().map(|part| part.to_string()));
            full
        };
        if let Some(image) = container.get("image") {
            fields.insert(at(&["f:image"]), image.clone());
        }
        if let Some(args) = container.get("args") {
            fields.insert(at(&["f:args"]), args.clone());
        }
        for env in container["env"].as_array().into_iter().flatten() {
            let env_key = format!(
                "k:{{\"name\":\"{}\"}}",
                env["name"].as_str().unwrap_or_default()
            );
            if let Some(value) = env.get("value") {
                fields.insert(at(&["f:env", &env_key, "f:value"]), value.clone());
            }
        }
    }
    fields
}

/// Every path a `fieldsV1` document names.
fn fields_v1_paths(fields: &Value, prefix: &mut Vec<String>, out: &mut BTreeSet<Vec<String>>) {
    for (key, child) in fields.as_object().into_iter().flatten() {
        if key == "." {
            continue;
        }
        prefix.push(key.clone());
        out.insert(prefix.clone());
        fields_v1_paths(child, prefix, out);
        prefix.pop();
    }
}

/// What each manager owns, from the object's managedFields.
fn owners(object: &Value) -> BTreeMap<String, BTreeSet<Vec<String>>> {
    let mut owners = BTreeMap::new();
    for entry in object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let manager = entry["manager"].as_str().unwrap_or_default().to_string();
        let mut paths = BTreeSet::new();
        fields_v1_paths(&entry["fieldsV1"], &mut Vec::new(), &mut paths);
        owners
            .entry(manager)
            .or_insert_with(BTreeSet::new)
            .extend(paths);
    }
    owners
}

/// Checks the ownership property of `object`, given each manager's last accepted configuration.
fn check_ownership(object: &Value, last: &BTreeMap<&str, Fields>) -> Result<(), TestCaseError> {
    let owners = owners(object);
    let present = written_fields(object);
    for (path, value) in &present {
        let owned_by: Vec<&String> = owners
            .iter()
            .filter(|(_, paths)| paths.contains(path))
            .map(|(manager, _)| manager)
            .collect();
        prop_assert!(!owned_by.is_empty(), "{path:?} = {value} has no owner");
        for manager in owned_by {
            let stated = last
                .get(manager.as_str())
                .and_then(|fields| fields.get(path));
            prop_assert_eq!(
                stated,
                Some(value),
                "{} owns {:?} but its last configuration does not state that value",
                manager,
                path
            );
        }
    }
    // Nobody owns a field the object no longer has.
    for (manager, paths) in &owners {
        for (path, _) in last.get(manager.as_str()).into_iter().flatten() {
            if paths.contains(path) {
                prop_assert!(
                    present.contains_key(path),
                    "{manager} owns the absent {path:?}"
                );
            }
        }
    }
    Ok(())
}

async fn run(steps: Vec<ApplyStep>) -> Result<(), TestCaseError> {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = Client::new(server.service(), "default");
    let api: Api<Deployment> = Api::namespaced(client, "default");
    let read = async || -> Value { serde_json::to_value(api.get(NAME).await.unwrap()).unwrap() };
    let store_version = async || -> String {
        let list = api.list(&ListParams::default()).await.unwrap();
        list.metadata.resource_version.unwrap_or_default()
    };
    api.patch(NAME, &PatchParams::apply("base"), &Patch::Apply(base()))
        .await
        .unwrap();
    let mut last: BTreeMap<&str, Fields> = BTreeMap::new();
    for step in &steps {
        let before = read().await;
        let config = step.config();
        let mut params = PatchParams::apply(step.manager);
        params.force = step.force;
        match api.patch(NAME, &params, &Patch::Apply(&config)).await {
            Ok(_) => {
                last.insert(step.manager, written_fields(&config));
                // The same apply again changes nothing at all.
                let version = store_version().await;
                let again = api
                    .patch(NAME, &params, &Patch::Apply(&config))
                    .await
                    .unwrap();
                prop_assert_eq!(
                    again.metadata.resource_version,
                    read().await["metadata"]["resourceVersion"]
                        .as_str()
                        .map(String::from)
                );
                prop_assert_eq!(store_version().await, version, "a repeated apply wrote");
            }
            Err(kube::Error::Api(status)) => {
                prop_assert!(
                    status.code == 409 || status.code == 422,
                    "unexpected refusal {status:?}"
                );
                prop_assert!(
                    !(status.code == 409 && step.force),
                    "a forced apply conflicted"
                );
                prop_assert_eq!(&read().await, &before, "a refused apply changed the object");
            }
            Err(other) => panic!("{other:?}"),
        }
        check_ownership(&read().await, &last)?;
    }
    server.shutdown().await;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_applies_keep_every_field_owned_by_an_applier_that_states_it(
        steps in prop::collection::vec(apply_step(), 1..12)
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(steps))?;
    }
}
