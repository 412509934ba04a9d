//! `StoredObject::footprint` against the memory the process takes: thousands of trees are
//! parsed and kept, and the growth of the resident set is compared with their footprints. The
//! measurement runs in a process of its own (this binary again, running that one test), so
//! that no other test allocates meanwhile.

use std::process::Command;

use ctrlkit_apiserver::storage::StoredObject;
use serde_json::{Value, json};

/// The resident set, in bytes, from `/proc/self/status`; `None` where there is no such file.
fn resident() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A Pod as a cluster stores it: containers with 25 variables each, probes, volumes.
fn pod() -> Value {
    let env: Vec<Value> = (0..25)
        .map(|i| json!({"name": format!("SETTING_{i}"), "value": format!("value-{i}")}))
        .collect();
    let container = |name: &str| {
        json!({
            "name": name, "image": "app:1", "imagePullPolicy": "IfNotPresent",
            "args": ["--listen", ":8080"], "env": env,
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
            "terminationMessagePath": "/dev/termination-log",
        })
    };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "pod-1", "namespace": "default", "uid": "0b7c3a5e-1f2d-4c6b-9a8e-7d6c5b4a3f2e",
                     "resourceVersion": "12345", "labels": {"app": "bench", "tier": "backend"}},
        "spec": {"containers": [container("app"), container("sidecar")],
                 "volumes": [{"name": "config", "configMap": {"name": "app-config"}}],
                 "restartPolicy": "Always", "dnsPolicy": "ClusterFirst"},
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    })
}

/// Makes `copies` trees parsed from `object`'s JSON; returns them, the growth of the resident
/// set (if known) and the sum of their footprints less their JSON, which is not made here.
fn kept(object: &Value, copies: usize) -> (Vec<StoredObject>, Option<usize>, usize) {
    let json = serde_json::to_vec(object).unwrap();
    let before = resident();
    let trees: Vec<StoredObject> = (0..copies)
        .map(|_| StoredObject::new(serde_json::from_slice(&json).unwrap()))
        .collect();
    let after = resident();
    let footprints = trees.iter().map(|tree| tree.footprint() - json.len()).sum();
    let grown = after.zip(before).map(|(after, before)| after - before);
    (trees, grown, footprints)
}

#[test]
fn footprints_come_within_a_fifth_of_the_memory_the_trees_take() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "footprint::measured_alone", "--ignored"])
        .args(["--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    // The one test ran, not none.
    assert!(report.contains("1 passed"), "{report}");
}

#[test]
#[ignore = "run alone, in a process of its own, by the test above"]
fn measured_alone() {
    let wide: serde_json::Map<String, Value> = (0..1_000)
        .map(|i| (format!("key-{i:04}"), json!(i)))
        .collect();
    let small = json!({"metadata": {"name": "cm", "namespace": "default"}, "data": {"key": "x".repeat(200)}});
    // About 35 MB of each kind, so that page granularity does not matter; all kept to the
    // end, so that no kind reuses memory another let go.
    let mut all = Vec::new();
    for (object, copies) in [
        (pod(), 600),
        (small, 15_000),
        (json!({"metadata": {"name": "wide"}, "data": wide}), 400),
    ] {
        let (trees, grown, footprints) = kept(&object, copies);
        all.push(trees);
        let Some(grown) = grown else {
            eprintln!("no /proc/self/status: the resident set cannot be read here");
            return;
        };
        let ratio = footprints as f64 / grown as f64;
        eprintln!("footprints {footprints}, resident set grew {grown}: {ratio:.3}");
        assert!(
            (0.8..=1.25).contains(&ratio),
            "footprints {footprints}, grown {grown}"
        );
    }
}
