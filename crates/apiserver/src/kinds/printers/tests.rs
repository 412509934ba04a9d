use serde_json::json;

use super::cells::human_duration;
use super::*;
use crate::resource::builtin_resources;

fn now() -> jiff::Timestamp {
    "2026-11-24T12:00:00Z".parse().unwrap()
}

fn printer_of(plural: &str) -> Printer {
    let kind = builtin_resources()
        .into_iter()
        .find(|kind| kind.plural == plural)
        .unwrap();
    printer(&kind)
}

#[test]
fn ages_read_as_kubectl_writes_them() {
    for (seconds, text) in [
        (59, "59s"),
        (119, "119s"),
        (120, "2m"),
        (330, "5m30s"),
        (605, "10m"),
        (3 * 3600, "3h"),
        (7 * 3600 + 59 * 60, "7h59m"),
        (30 * 3600, "30h"),
        ((3 * 24 + 5) * 3600, "3d5h"),
        (20 * 24 * 3600, "20d"),
        (800 * 24 * 3600, "2y70d"),
        (-5, "<invalid>"),
    ] {
        assert_eq!(human_duration(seconds), text, "{seconds}");
    }
}

#[test]
fn a_running_pod_and_a_failing_one() {
    let printer = printer_of("pods");
    assert_eq!(printer.columns.len(), 9);
    let running = json!({
        "metadata": {"name": "web", "creationTimestamp": "2026-11-24T11:55:00Z"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "node-1"},
        "status": {
            "phase": "Running",
            "podIPs": [{"ip": "10.1.0.4"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-11-24T11:58:00Z"}}},
            ],
        },
    });
    assert_eq!(
        (printer.cells)(&running, now()),
        [
            json!("web"),
            json!("2/2"),
            json!("Running"),
            json!("2 (2m ago)"),
            json!("5m"),
            json!("10.1.0.4"),
            json!("node-1"),
            json!("<none>"),
            json!("<none>"),
        ]
    );
    let crashing = json!({
        "metadata": {"name": "bad", "creationTimestamp": "2026-11-24T11:59:30Z"},
        "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 4,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        ]},
    });
    let cells = (printer.cells)(&crashing, now());
    assert_eq!(
        cells[1..4],
        [json!("0/1"), json!("CrashLoopBackOff"), json!("4")]
    );
    let pending = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]},
                         "status": {"phase": "Pending"}});
    assert_eq!((printer.cells)(&pending, now())[2], json!("Pending"));
}

#[test]
fn deployments_services_and_the_default_table() {
    let deployment = json!({
        "metadata": {"name": "web", "creationTimestamp": "2026-11-24T10:00:00Z"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]}}},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    });
    assert_eq!(
        (printer_of("deployments").cells)(&deployment, now()),
        [
            json!("web"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("120m"),
            json!("nginx"),
            json!("nginx:1"),
            json!("app=web"),
        ]
    );
    let service = json!({
        "metadata": {"name": "api"},
        "spec": {"type": "NodePort", "clusterIPs": ["10.96.0.10"],
                 "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]},
    });
    let cells = (printer_of("services").cells)(&service, now());
    assert_eq!(
        cells[1..5],
        [
            json!("NodePort"),
            json!("10.96.0.10"),
            json!("<none>"),
            json!("80:30080/TCP")
        ]
    );
    let role = json!({"metadata": {"name": "r", "creationTimestamp": "2026-11-24T10:00:00Z"}});
    let roles = printer_of("roles");
    assert_eq!(roles.columns[1].name, "Created At");
    assert_eq!(
        (roles.cells)(&role, now()),
        [json!("r"), json!("2026-11-24T10:00:00Z")]
    );
    let definition = column_definition(&roles.columns[0]);
    assert_eq!(definition["format"], "name");
    assert!(
        definition["description"]
            .as_str()
            .unwrap()
            .starts_with("Name must be unique within a namespace.")
    );
}
