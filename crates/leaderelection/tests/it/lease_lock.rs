//! The Lease lock against the embedded API server: get, create, and updates conditional on the
//! version last seen.

use ctrlkit_apiserver::{ApiServer, ApiServerConfig};
use ctrlkit_leaderelection::{LeaderElectionRecord, LeaseLock, LockError, ResourceLock};
use kube::{Client, Config};

async fn client(server: &ApiServer) -> Client {
    Client::try_from(Config::new(server.url().parse().unwrap())).unwrap()
}

fn held_by(identity: &str, transitions: i32) -> LeaderElectionRecord {
    LeaderElectionRecord {
        holder_identity: identity.into(),
        lease_duration_seconds: 15,
        acquire_time: "2026-11-22T10:00:00.123456Z".parse().ok(),
        renew_time: "2026-11-22T10:00:00.123456Z".parse().ok(),
        leader_transitions: transitions,
        ..Default::default()
    }
}

#[tokio::test]
async fn a_lease_is_created_read_and_conditionally_updated() {
    let server = ApiServer::start(ApiServerConfig::default()).await.unwrap();
    let a = LeaseLock::new(client(&server).await, "default", "controller", "a");
    let b = LeaseLock::new(client(&server).await, "default", "controller", "b");
    assert_eq!(a.identity(), "a");
    assert_eq!(a.describe(), "default/controller");

    assert!(matches!(a.get().await, Err(LockError::NotFound(_))));
    assert!(matches!(
        a.update(&held_by("a", 0)).await,
        Err(LockError::NotInitialized(_))
    ));
    a.create(&held_by("a", 0)).await.unwrap();
    assert!(matches!(
        b.create(&held_by("b", 0)).await,
        Err(LockError::AlreadyExists(_))
    ));

    // The Lease keeps microseconds; the raw form is the canonical record JSON.
    let (record, raw) = b.get().await.unwrap();
    assert_eq!(record, held_by("a", 0));
    assert_eq!(raw, record.to_annotation().into_bytes());

    // Both read the same version; the first update wins, the second loses the race.
    a.get().await.unwrap();
    b.update(&held_by("b", 1)).await.unwrap();
    assert!(matches!(
        a.update(&held_by("a", 1)).await,
        Err(LockError::Conflict(_))
    ));
    let (record, _) = a.get().await.unwrap();
    assert_eq!(record.holder_identity, "b");
    assert_eq!(record.leader_transitions, 1);
    // After a fresh read the update goes through.
    a.update(&held_by("a", 2)).await.unwrap();
    assert_eq!(b.get().await.unwrap().0.holder_identity, "a");
}
