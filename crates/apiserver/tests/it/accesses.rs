//! The accesses the server notes: each verb on each resource (or its subresource) once, as an
//! RBAC authorizer names them.

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams, WatchParams};

fn seen(server: &ApiServer) -> Vec<String> {
    server
        .accesses()
        .seen()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[tokio::test]
async fn each_verb_on_each_resource_is_noted_once() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let client = kube::Client::new(server.service(), "default");
    let config_maps: Api<ConfigMap> = Api::default_namespaced(client.clone());
    server.accesses().clear();
    for name in ["a", "b"] {
        let object = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        };
        config_maps
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }
    config_maps.list(&ListParams::default()).await.unwrap();
    let mut watch = config_maps
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .boxed();
    watch.next().await;
    let patch = serde_json::json!({"data": {"k": "v"}});
    config_maps
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    // A 404 was still asked for: an authorizer checks before the object is looked up.
    let namespaced: Api<Deployment> = Api::default_namespaced(client);
    assert!(namespaced.get_opt("gone").await.unwrap().is_none());
    assert!(namespaced.get_scale("gone").await.is_err());
    assert!(
        namespaced
            .patch_status("gone", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_err()
    );
    assert_eq!(
        seen(&server),
        [
            "create \"\"/configmaps",
            "list \"\"/configmaps",
            "patch \"\"/configmaps",
            "watch \"\"/configmaps",
            "get apps/deployments",
            "get apps/deployments/scale",
            "patch apps/deployments/status",
        ]
    );
}

#[tokio::test]
async fn a_subresource_the_resource_lacks_is_not_noted() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    server.accesses().clear();
    let status = plain_get(&server, "/api/v1/namespaces/default/configmaps/x/bogus").await;
    assert_eq!(status, 404);
    assert_eq!(seen(&server), Vec::<String>::new());
}

/// A plain GET over TCP; its status code.
async fn plain_get(server: &ApiServer, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.address())
        .await
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response[9..12].parse().unwrap()
}

#[tokio::test]
async fn an_impersonated_users_accesses_are_kept_apart() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.auth_info.impersonate = Some("system:serviceaccount:shop:operator".into());
    let operator = kube::Client::try_from(config).unwrap();
    let admin = kube::Client::new(server.service(), "default");
    server.accesses().clear();
    Api::<ConfigMap>::default_namespaced(admin)
        .list(&ListParams::default())
        .await
        .unwrap();
    Api::<Deployment>::namespaced(operator, "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let as_text = |accesses: Vec<ctrlkit_apiserver::access::Access>| {
        accesses.iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    assert_eq!(
        as_text(
            server
                .accesses()
                .seen_by("system:serviceaccount:shop:operator")
        ),
        ["list apps/deployments"]
    );
    assert_eq!(
        seen(&server),
        ["list \"\"/configmaps", "list apps/deployments"]
    );
    assert!(server.accesses().seen_by("nobody").is_empty());
}

#[tokio::test]
async fn a_post_to_a_subresource_is_a_create_and_users_past_the_bounds_are_not_told_apart() {
    use ctrlkit_apiserver::access::{MAX_USER_NAME, MAX_USERS};
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    server.accesses().clear();
    // An eviction of a Pod that is not there: still asked for.
    let path = "/api/v1/namespaces/default/pods/gone/eviction";
    let eviction = serde_json::json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "gone", "namespace": "default"}});
    let client = kube::Client::new(server.service(), "default");
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&eviction).unwrap())
        .unwrap();
    assert!(client.request_text(request).await.is_err());
    assert_eq!(seen(&server), ["create \"\"/pods/eviction"]);

    let as_user = |user: String| {
        let mut config = kube::Config::new(server.url().parse().unwrap());
        config.auth_info.impersonate = Some(user);
        Api::<ConfigMap>::namespaced(kube::Client::try_from(config).unwrap(), "default")
    };
    let long = "u".repeat(MAX_USER_NAME + 1);
    as_user(long.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        server.accesses().seen_by(&long).is_empty(),
        "a name too long"
    );
    for user in 0..MAX_USERS {
        as_user(format!("user-{user}"))
            .list(&ListParams::default())
            .await
            .unwrap();
    }
    as_user("one-too-many".into())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(server.accesses().seen_by("user-0").len(), 1);
    assert!(server.accesses().seen_by("one-too-many").is_empty());
    assert!(seen(&server).contains(&"list \"\"/configmaps".to_owned()));
}
