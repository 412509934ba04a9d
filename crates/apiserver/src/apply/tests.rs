//! Structured-merge-diff's scenarios, in this project's words: sets, maps and nested structs,
//! atomic lists, associative lists by key, several appliers, updaters, conflicts, force, and the
//! removal of what a manager stops applying.

use serde_json::{Value, json};

use super::path::{PathElement, path_text};
use super::schema::Type;
use super::set::Set;
use super::updater::{ConfigFields, Managers, Scope, UpdateError, apply, update};

/// A type from an OpenAPI schema, as a CRD declares one.
fn schema(schema: Value) -> Type {
    Type::Schema(crate::structural::Node::compile(&schema))
}

fn object_type() -> Type {
    schema(object_schema())
}

/// The schema of [`object_type`]: a set, an atomic list, a map, a nested struct, and a map
/// list whose items hold a map list keyed by two fields, one with a default.
pub(super) fn object_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "atomic": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "paused": {"type": "boolean"},
                "template": {"type": "object", "properties": {
                    "image": {"type": "string"},
                    "args": {"type": "array", "items": {"type": "string"}},
                }},
            }},
            "containers": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {
                    "name": {"type": "string"},
                    "image": {"type": "string"},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["port", "protocol"],
                        "items": {"type": "object", "properties": {
                            "port": {"type": "integer"},
                            "protocol": {"type": "string", "default": "TCP"},
                        }},
                    },
                }},
            },
        },
    })
}

/// The paths a manager owns, as conflict messages write them.
fn owned(managers: &Managers, manager: &str) -> Vec<String> {
    managers
        .get(manager)
        .map(|owned| {
            owned
                .set
                .to_set()
                .paths()
                .iter()
                .map(|p| path_text(p))
                .collect()
        })
        .unwrap_or_default()
}

struct Scenario {
    ty: Type,
    object: Value,
    managers: Managers,
    ignored: Set,
}

impl Scenario {
    fn new() -> Self {
        Self {
            ty: object_type(),
            object: json!({}),
            managers: Managers::new(),
            ignored: Set::new(),
        }
    }

    fn scope(&self) -> Scope<'_> {
        Scope {
            ty: &self.ty,
            api_version: "v1",
            ignored: &self.ignored,
            stripped: &self.ignored,
        }
    }

    fn apply(&mut self, manager: &str, config: Value) -> Result<bool, UpdateError> {
        self.apply_with(manager, config, false)
    }

    fn apply_with(
        &mut self,
        manager: &str,
        config: Value,
        force: bool,
    ) -> Result<bool, UpdateError> {
        let fields = super::typed::to_field_set(&config, &self.ty)?;
        let applied = apply(
            &self.object,
            config,
            ConfigFields::Read(fields),
            self.scope(),
            self.managers.clone(),
            manager,
            force,
        )?;
        self.managers = applied.managers;
        self.object = applied.object;
        Ok(applied.changed)
    }

    fn update(&mut self, manager: &str, new: Value) {
        self.managers = update(
            &self.object,
            &new,
            self.scope(),
            self.managers.clone(),
            manager,
        )
        .unwrap();
        self.object = new;
    }
}

#[test]
fn a_set_grows_and_shrinks_with_what_its_applier_applies() {
    let mut scenario = Scenario::new();
    scenario
        .apply("default", json!({"set": ["a", "c"]}))
        .unwrap();
    scenario
        .apply("default", json!({"set": ["a", "b", "c", "d"]}))
        .unwrap();
    assert_eq!(scenario.object, json!({"set": ["a", "b", "c", "d"]}));
    assert_eq!(
        owned(&scenario.managers, "default"),
        [
            r#".set[="a"]"#,
            r#".set[="b"]"#,
            r#".set[="c"]"#,
            r#".set[="d"]"#
        ]
    );
    scenario
        .apply("default", json!({"set": ["b", "d"]}))
        .unwrap();
    assert_eq!(scenario.object, json!({"set": ["b", "d"]}));
}

#[test]
fn items_another_manager_added_stay_when_an_applier_stops_applying_its_own() {
    let mut scenario = Scenario::new();
    scenario
        .apply("default", json!({"set": ["a", "c"]}))
        .unwrap();
    scenario.update("controller", json!({"set": ["a", "b", "c", "d"]}));
    assert_eq!(
        owned(&scenario.managers, "controller"),
        [r#".set[="b"]"#, r#".set[="d"]"#]
    );
    scenario.apply("default", json!({"set": ["a"]})).unwrap();
    // c was only the applier's: gone; b and d are the controller's: kept.
    assert_eq!(scenario.object, json!({"set": ["a", "b", "d"]}));
}

#[test]
fn an_atomic_list_is_owned_whole_and_replaced_whole() {
    let mut scenario = Scenario::new();
    scenario.apply("a", json!({"atomic": ["x", "y"]})).unwrap();
    assert_eq!(owned(&scenario.managers, "a"), [".atomic"]);
    let conflict = scenario.apply("b", json!({"atomic": ["z"]})).unwrap_err();
    let UpdateError::Conflicts(conflicts) = conflict else {
        panic!("expected conflicts");
    };
    assert_eq!(conflicts["a"].paths().len(), 1);
    scenario
        .apply_with("b", json!({"atomic": ["z"]}), true)
        .unwrap();
    assert_eq!(scenario.object, json!({"atomic": ["z"]}));
    assert!(owned(&scenario.managers, "a").is_empty());
    assert_eq!(owned(&scenario.managers, "b"), [".atomic"]);
}

#[test]
fn nested_fields_are_owned_leaf_by_leaf_and_an_emptied_struct_goes() {
    let mut scenario = Scenario::new();
    scenario
        .apply(
            "default",
            json!({"spec": {"replicas": 3, "template": {"image": "nginx", "args": ["-v"]}}}),
        )
        .unwrap();
    assert_eq!(
        owned(&scenario.managers, "default"),
        [
            ".spec.replicas",
            ".spec.template.args",
            ".spec.template.image"
        ]
    );
    scenario
        .apply("default", json!({"spec": {"replicas": 3}}))
        .unwrap();
    assert_eq!(scenario.object, json!({"spec": {"replicas": 3}}));
}

#[test]
fn two_appliers_share_a_map_and_conflict_only_on_what_both_set_differently() {
    let mut scenario = Scenario::new();
    scenario
        .apply("a", json!({"labels": {"app": "web", "team": "x"}}))
        .unwrap();
    // The same value: co-owned, no conflict.
    scenario
        .apply("b", json!({"labels": {"app": "web"}}))
        .unwrap();
    assert_eq!(owned(&scenario.managers, "b"), [".labels.app"]);
    assert_eq!(
        owned(&scenario.managers, "a"),
        [".labels.app", ".labels.team"]
    );
    let UpdateError::Conflicts(conflicts) = scenario
        .apply("b", json!({"labels": {"app": "api"}}))
        .unwrap_err()
    else {
        panic!("expected conflicts");
    };
    let paths: Vec<String> = conflicts["a"]
        .paths()
        .iter()
        .map(|p| path_text(p))
        .collect();
    assert_eq!(paths, [".labels.app"]);
    // a stops applying app: b keeps it.
    scenario
        .apply("a", json!({"labels": {"team": "x"}}))
        .unwrap();
    assert_eq!(
        scenario.object,
        json!({"labels": {"app": "web", "team": "x"}})
    );
}

#[test]
fn an_update_takes_fields_from_appliers_without_conflict() {
    let mut scenario = Scenario::new();
    scenario
        .apply("a", json!({"spec": {"replicas": 1}}))
        .unwrap();
    let mut changed = scenario.object.clone();
    changed["spec"]["replicas"] = json!(5);
    scenario.update("scaler", changed);
    assert!(owned(&scenario.managers, "a").is_empty());
    assert_eq!(owned(&scenario.managers, "scaler"), [".spec.replicas"]);
    // Applying again conflicts with the updater, whose value differs.
    assert!(matches!(
        scenario.apply("a", json!({"spec": {"replicas": 1}})),
        Err(UpdateError::Conflicts(_))
    ));
}

#[test]
fn list_items_merge_by_key_with_key_defaults_and_keep_their_order() {
    let mut scenario = Scenario::new();
    scenario
        .apply(
            "a",
            json!({"containers": [
                {"name": "web", "image": "nginx", "ports": [{"port": 80}]},
                {"name": "log", "image": "fluentd"},
            ]}),
        )
        .unwrap();
    let web_port = [
        PathElement::field("containers"),
        PathElement::Key(vec![("name".into(), json!("web"))].into()),
        PathElement::field("ports"),
        PathElement::Key(
            vec![
                ("port".into(), json!(80)),
                ("protocol".into(), json!("TCP")),
            ]
            .into(),
        ),
    ];
    assert!(scenario.managers["a"].set.to_set().has(&web_port));
    scenario
        .apply(
            "b",
            json!({"containers": [{"name": "sidecar", "image": "envoy"}]}),
        )
        .unwrap();
    let names: Vec<&str> = scenario.object["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web", "log", "sidecar"]);
    // a drops log: it goes; sidecar stays b's.
    scenario
        .apply(
            "a",
            json!({"containers": [{"name": "web", "image": "nginx", "ports": [{"port": 80}]}]}),
        )
        .unwrap();
    let names: Vec<&str> = scenario.object["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web", "sidecar"]);
}

#[test]
fn an_apply_that_changes_nothing_reports_no_change() {
    let mut scenario = Scenario::new();
    assert!(
        scenario
            .apply("a", json!({"spec": {"replicas": 2}}))
            .unwrap()
    );
    assert!(
        !scenario
            .apply("a", json!({"spec": {"replicas": 2}}))
            .unwrap()
    );
}

#[test]
fn field_sets_and_fields_v1_of_a_built_in_kind() {
    let ty = Type::of_kind_message("io.k8s.api.apps.v1.Deployment").unwrap();
    let deployment = json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}]},
            ]}},
        },
    });
    let set = super::typed::to_field_set(&deployment, &ty).unwrap();
    assert_eq!(
        set.to_fields_v1(),
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"nginx\"}": {
                        ".": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {
                            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                                ".": {},
                                "f:containerPort": {},
                            },
                        },
                    },
                }}},
            },
        })
    );
}

/// Objects of [`object_type`], some fields missing, some of another shape than the type's,
/// list items repeated now and then.
fn arbitrary_object() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let word = || prop::sample::select(vec!["a", "b", "c"]).prop_map(Value::from);
    let port = (
        prop::sample::select(vec![80, 443]),
        prop::option::of(prop::sample::select(vec!["TCP", "UDP"])),
    )
        .prop_map(|(port, protocol)| match protocol {
            Some(protocol) => json!({"port": port, "protocol": protocol}),
            None => json!({"port": port}),
        });
    // Few names, so that two lists often hold the same items in the same order.
    let container = (
        prop::sample::select(vec!["a", "b"]).prop_map(Value::from),
        prop::option::of(word()),
        prop::option::of(prop::collection::vec(port, 0..3)),
    )
        .prop_map(|(name, image, ports)| {
            let mut container = json!({"name": name});
            if let Some(image) = image {
                container["image"] = image;
            }
            if let Some(ports) = ports {
                container["ports"] = Value::from(ports);
            }
            container
        });
    let labels = prop_oneof![
        prop::collection::btree_map("[xy]", word(), 0..3).prop_map(|labels| json!(labels)),
        Just(Value::Null),
        Just(json!("not a map")),
    ];
    let spec = (
        prop::option::of(0..3i64),
        prop::option::of(any::<bool>()),
        prop::option::of(word()),
    )
        .prop_map(|(replicas, paused, image)| {
            let mut spec = json!({});
            if let Some(replicas) = replicas {
                spec["replicas"] = json!(replicas);
            }
            if let Some(paused) = paused {
                spec["paused"] = json!(paused);
            }
            if let Some(image) = image {
                spec["template"] = json!({"image": image});
            }
            spec
        });
    (
        prop::option::of(prop::collection::vec(word(), 0..4)),
        prop::option::of(prop::collection::vec(word(), 0..3)),
        prop::option::of(labels),
        prop::option::of(spec),
        prop::option::of(prop::collection::vec(container, 0..4)),
    )
        .prop_map(|(set, atomic, labels, spec, containers)| {
            let mut object = json!({});
            for (name, value) in [
                ("set", set.map(Value::from)),
                ("atomic", atomic.map(Value::from)),
                ("labels", labels),
                ("spec", spec),
                ("containers", containers.map(Value::from)),
            ] {
                if let Some(value) = value {
                    object[name] = value;
                }
            }
            object
        })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]
    #[test]
    fn merging_in_place_makes_what_merging_makes(
        live in arbitrary_object(),
        config in arbitrary_object(),
    ) {
        merging_in_place_matches_merging(&live, &config, &[])?;
    }

    #[test]
    fn merging_in_place_without_a_field_of_live_reads_live_without_it(
        live in arbitrary_object(),
        config in arbitrary_object(),
    ) {
        merging_in_place_matches_merging(&live, &config, &["spec", "template"])?;
    }
}

/// Merging `config` in place over `live` read without `left_out` makes what merging it into
/// that reading of `live` makes, and says whether that differs from the reading.
fn merging_in_place_matches_merging(
    live: &Value,
    config: &Value,
    left_out: &[&str],
) -> Result<(), proptest::test_runner::TestCaseError> {
    let ty = object_type();
    let read = super::typed::without(live, left_out);
    let expected = super::typed::merge(Some(&read), Some(config), &ty);
    let mut merged = config.clone();
    let changed = super::typed::merge_in_place(&mut merged, live, &ty, left_out);
    match (expected, changed) {
        (Ok(expected), Ok(changed)) => {
            proptest::prop_assert_eq!(Some(&merged), expected.as_ref());
            proptest::prop_assert_eq!(changed, merged != read);
        }
        (Err(expected), Err(error)) => proptest::prop_assert_eq!(error, expected),
        (expected, changed) => proptest::prop_assert!(
            false,
            "merge gave {expected:?}, merging in place {changed:?}"
        ),
    }
    Ok(())
}

#[test]
fn a_copy_without_a_field_leaves_out_that_field_only() {
    let object = json!({"spec": {"template": {"image": "a"}, "replicas": 1}, "set": ["x"]});
    assert_eq!(
        super::typed::without(&object, &["spec", "template"]),
        json!({"spec": {"replicas": 1}, "set": ["x"]})
    );
    assert_eq!(
        super::typed::without(&object, &["spec", "missing"]),
        object,
        "a path to nothing leaves it all"
    );
    assert_eq!(super::typed::without(&object, &["set", "x"]), object);
    assert_eq!(super::typed::without(&object, &[]), object);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]
    #[test]
    fn finding_the_same_fields_agrees_with_building_the_set(
        config in arbitrary_object(),
        previous in arbitrary_object(),
    ) {
        same_fields_agrees_with_the_set(&config, &previous)?;
    }
}

/// `same_fields` answers, for `config` against what `config` and `previous` would record,
/// what building `config`'s set, adjusting it as the updater does, and comparing it answers;
/// it never answers `true` for a configuration that fails the check.
fn same_fields_agrees_with_the_set(
    config: &Value,
    previous: &Value,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let ty = object_type();
    let set_of = |paths: &[&[&str]]| {
        let mut set = Set::new();
        for path in paths {
            let path: Vec<PathElement> = path.iter().map(|name| PathElement::field(name)).collect();
            set.insert(&path);
        }
        set
    };
    // Reset by the endpoint (with what is under it), and never the applier's (as members).
    let ignored = set_of(&[&["spec", "paused"], &["containers"]]);
    let stripped = set_of(&[&["labels"], &["spec", "replicas"]]);
    let recorded = |object: &Value| {
        super::validate::checked_field_set(object, &ty)
            .ok()
            .map(|mut set| {
                set.subtract_recursive(&ignored);
                set.subtract(&stripped);
                set
            })
    };
    let own = recorded(config);
    for entry in [own.clone(), recorded(previous)].into_iter().flatten() {
        let fields_v1 = entry.to_fields_v1();
        let answer = super::same_fields::same_fields(config, &ty, &fields_v1, &ignored, &stripped);
        match &own {
            Some(own) => {
                let expected = own.matches_fields_v1(&fields_v1);
                proptest::prop_assert_eq!(answer, Some(expected), "entry {}", fields_v1);
            }
            None => proptest::prop_assert_ne!(answer, Some(true), "entry {}", fields_v1),
        }
    }
    Ok(())
}

#[test]
fn a_field_owned_whole_is_not_the_same_as_the_fields_under_it() {
    let ty = object_type();
    let none = Set::new();
    let config = json!({"spec": {}, "set": ["a"]});
    let same =
        |fields_v1: Value| super::same_fields::same_fields(&config, &ty, &fields_v1, &none, &none);
    assert_eq!(
        same(json!({"f:spec": {}, "f:set": {"v:\"a\"": {}}})),
        Some(true)
    );
    assert_eq!(
        same(json!({"f:spec": {"f:replicas": {}}, "f:set": {"v:\"a\"": {}}})),
        Some(false),
        "an empty struct is owned whole, not through fields under it"
    );
    assert_eq!(same(json!({"f:spec": {}})), Some(false), "a field short");
    assert_eq!(
        same(json!({"f:spec": {}, "f:set": {"v:\"a\"": {}, "v:\"b\"": {}}})),
        Some(false),
        "an item more"
    );
}

#[test]
fn items_with_one_key_are_never_the_same_fields_as_two_items() {
    let ty = object_type();
    let none = Set::new();
    let same = |config: Value, fields_v1: Value| {
        super::same_fields::same_fields(&config, &ty, &fields_v1, &none, &none)
    };
    // As many keys as the entry has, but one of them twice: the check refuses the configuration.
    assert_ne!(
        same(
            json!({"set": ["a", "a"]}),
            json!({"f:set": {"v:\"a\"": {}, "v:\"b\"": {}}})
        ),
        Some(true)
    );
    let item = json!({".": {}, "f:name": {}});
    assert_ne!(
        same(
            json!({"containers": [{"name": "a"}, {"name": "a"}]}),
            json!({"f:containers": {"k:{\"name\":\"a\"}": item, "k:{\"name\":\"b\"}": item}})
        ),
        Some(true)
    );
    assert_eq!(
        same(
            json!({"containers": [{"name": "b"}, {"name": "a"}]}),
            json!({"f:containers": {"k:{\"name\":\"a\"}": item, "k:{\"name\":\"b\"}": item}})
        ),
        Some(true),
        "items in another order than their keys'"
    );
}

#[test]
fn json_objects_keep_their_keys_in_order_in_this_build() {
    // A dependency that enables serde_json's `preserve_order` would make the server refuse to
    // start (the merge walks fields in name order); this fails first.
    assert!(super::typed::json_maps_are_sorted());
}
