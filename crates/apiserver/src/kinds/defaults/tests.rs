use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::kinds::typed::{UnknownFields, decode};

fn defaulted<T: DeserializeOwned + Serialize + 'static>(mut object: Value) -> Value {
    decode::<T>(&mut object, UnknownFields::Report, |typed| {
        super::apply(typed)
    })
    .unwrap();
    object
}

#[test]
fn a_pod_gets_the_spec_and_container_defaults() {
    let pod = defaulted::<Pod>(json!({
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}],
                 "resources": {"limits": {"cpu": "1"}},
                 "livenessProbe": {"httpGet": {"port": 80}},
                 "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]},
                {"name": "b", "image": "nginx:1.27"},
            ],
            "volumes": [{"name": "scratch"}, {"name": "s", "secret": {"secretName": "x"}}],
        },
    }));
    let spec = &pod["spec"];
    assert_eq!(spec["restartPolicy"], "Always");
    assert_eq!(spec["dnsPolicy"], "ClusterFirst");
    assert_eq!(spec["schedulerName"], "default-scheduler");
    assert_eq!(spec["terminationGracePeriodSeconds"], 30);
    assert_eq!(spec["securityContext"], json!({}));
    assert_eq!(spec["enableServiceLinks"], true);
    let first = &spec["containers"][0];
    assert_eq!(first["imagePullPolicy"], "Always");
    assert_eq!(first["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(first["terminationMessagePolicy"], "File");
    assert_eq!(first["ports"][0]["protocol"], "TCP");
    assert_eq!(first["resources"]["requests"], json!({"cpu": "1"}));
    assert_eq!(
        first["livenessProbe"],
        json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
               "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
    );
    assert_eq!(first["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(spec["containers"][1]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        spec["volumes"][0],
        json!({"name": "scratch", "emptyDir": {}})
    );
    assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], 420);
    assert!(
        spec["volumes"][1].get("emptyDir").is_none(),
        "a volume with a source gets no other"
    );
}

#[test]
fn workloads_get_their_defaults_and_their_pod_templates_the_pod_ones() {
    let template = json!({"metadata": {"labels": {"app": "a"}},
                          "spec": {"containers": [{"name": "c", "image": "i:1"}]}});
    let deployment = defaulted::<Deployment>(json!({
        "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template},
    }));
    assert_eq!(
        deployment["spec"],
        json!({
            "replicas": 1,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app": "a"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {
                "containers": [{"name": "c", "image": "i:1", "imagePullPolicy": "IfNotPresent",
                                "terminationMessagePath": "/dev/termination-log",
                                "terminationMessagePolicy": "File"}],
                "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
                "schedulerName": "default-scheduler", "securityContext": {},
                "terminationGracePeriodSeconds": 30}},
        })
    );

    let stateful_set = defaulted::<StatefulSet>(json!({
        "metadata": {"name": "s"},
        "spec": {"selector": {}, "template": template, "serviceName": "s"},
    }));
    let spec = &stateful_set["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(
        spec["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );

    let job = defaulted::<Job>(json!({"metadata": {"name": "j"}, "spec": {"template": template}}));
    assert_eq!(job["metadata"]["labels"], json!({"app": "a"}));
    let spec = &job["spec"];
    assert_eq!(
        (
            &spec["completions"],
            &spec["parallelism"],
            &spec["backoffLimit"]
        ),
        (&json!(1), &json!(1), &json!(6))
    );
    assert_eq!(spec["completionMode"], "NonIndexed");
    assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
    assert_eq!(
        (&spec["suspend"], &spec["manualSelector"]),
        (&json!(false), &json!(false))
    );

    let cron_job = defaulted::<CronJob>(json!({
        "metadata": {"name": "c"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}},
    }));
    let spec = &cron_job["spec"];
    assert_eq!(spec["concurrencyPolicy"], "Allow");
    assert_eq!(spec["successfulJobsHistoryLimit"], 3);
    assert_eq!(spec["failedJobsHistoryLimit"], 1);
    assert_eq!(spec["jobTemplate"]["spec"]["backoffLimit"], 6);
}

#[test]
fn services_and_secrets_get_theirs() {
    let service = defaulted::<Service>(json!({
        "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 80}, {"port": 443, "targetPort": "https"}]},
    }));
    assert_eq!(
        service["spec"],
        json!({
            "type": "ClusterIP",
            "sessionAffinity": "None",
            "internalTrafficPolicy": "Cluster",
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                      {"port": 443, "protocol": "TCP", "targetPort": "https"}],
        })
    );
    let node_port =
        defaulted::<Service>(json!({"metadata": {"name": "n"}, "spec": {"type": "NodePort"}}));
    assert_eq!(node_port["spec"]["externalTrafficPolicy"], "Cluster");

    let secret = defaulted::<Secret>(json!({"metadata": {"name": "s"}}));
    assert_eq!(secret["type"], "Opaque");
}
