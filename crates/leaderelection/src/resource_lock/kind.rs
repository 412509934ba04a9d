//! Where each kind of lock object keeps the record: a Lease in its spec, a ConfigMap or an
//! Endpoints object in an annotation.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Endpoints};
use kube::api::DynamicObject;

use crate::record::{LEADER_ANNOTATION, LeaderElectionRecord};

/// A kind of object that can hold a [`LeaderElectionRecord`].
///
/// Implemented for [`Lease`], [`ConfigMap`] and [`Endpoints`]; [`ObjectLock`](super::ObjectLock)
/// is generic over it.
pub trait LockKind: kube::Resource<DynamicType = ()> + Send + Sync + 'static {
    /// Reads the record from the object. `Ok(None)`: the object holds no record yet (an empty
    /// record). `Err(raw)`: the record is there but cannot be read; `raw` is its text.
    fn read_record(object: &DynamicObject) -> Result<Option<Observed>, Vec<u8>>;

    /// Writes `record` into the object.
    fn write_record(object: &mut DynamicObject, record: &LeaderElectionRecord);
}

/// A record read from an object, with its raw form.
pub type Observed = (LeaderElectionRecord, Vec<u8>);

impl LockKind for Lease {
    fn read_record(object: &DynamicObject) -> Result<Option<Observed>, Vec<u8>> {
        let Some(spec) = object.data.get("spec") else {
            return Ok(None);
        };
        match serde_json::from_value::<LeaseSpec>(spec.clone()) {
            Ok(spec) => {
                let record = LeaderElectionRecord::from_lease_spec(&spec);
                // client-go compares the record's JSON, not the Lease's.
                let raw = record.to_annotation().into_bytes();
                Ok(Some((record, raw)))
            }
            Err(_) => Err(spec.to_string().into_bytes()),
        }
    }

    fn write_record(object: &mut DynamicObject, record: &LeaderElectionRecord) {
        // A LeaseSpec of strings, integers and times always serializes.
        let spec = serde_json::to_value(record.to_lease_spec()).unwrap_or_default();
        if let Some(data) = object.data.as_object_mut() {
            data.insert("spec".to_owned(), spec);
        } else {
            object.data = serde_json::json!({ "spec": spec });
        }
    }
}

fn read_annotation(object: &DynamicObject) -> Result<Option<Observed>, Vec<u8>> {
    let Some(text) = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(LEADER_ANNOTATION))
    else {
        return Ok(None);
    };
    match LeaderElectionRecord::from_annotation(text) {
        // client-go compares the annotation's text as stored.
        Ok(record) => Ok(Some((record, text.clone().into_bytes()))),
        Err(_) => Err(text.clone().into_bytes()),
    }
}

fn write_annotation(object: &mut DynamicObject, record: &LeaderElectionRecord) {
    object
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(LEADER_ANNOTATION.to_owned(), record.to_annotation());
}

impl LockKind for ConfigMap {
    fn read_record(object: &DynamicObject) -> Result<Option<Observed>, Vec<u8>> {
        read_annotation(object)
    }

    fn write_record(object: &mut DynamicObject, record: &LeaderElectionRecord) {
        write_annotation(object, record);
    }
}

impl LockKind for Endpoints {
    fn read_record(object: &DynamicObject) -> Result<Option<Observed>, Vec<u8>> {
        read_annotation(object)
    }

    fn write_record(object: &mut DynamicObject, record: &LeaderElectionRecord) {
        write_annotation(object, record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ApiResource;

    fn object<K: LockKind>() -> DynamicObject {
        DynamicObject::new("lock", &ApiResource::erase::<K>(&())).within("default")
    }

    fn record() -> LeaderElectionRecord {
        LeaderElectionRecord {
            holder_identity: "a".into(),
            lease_duration_seconds: 15,
            leader_transitions: 2,
            ..Default::default()
        }
    }

    #[test]
    fn each_kind_reads_back_what_it_wrote() {
        let mut lease = object::<Lease>();
        assert_eq!(Lease::read_record(&lease), Ok(None));
        Lease::write_record(&mut lease, &record());
        assert_eq!(lease.data["spec"]["holderIdentity"], "a");
        assert_eq!(
            Lease::read_record(&lease).map(|read| read.map(|(record, _)| record)),
            Ok(Some(record()))
        );

        let mut config_map = object::<ConfigMap>();
        assert_eq!(ConfigMap::read_record(&config_map), Ok(None));
        ConfigMap::write_record(&mut config_map, &record());
        let stored = config_map.metadata.annotations.as_ref().unwrap()[LEADER_ANNOTATION].clone();
        assert_eq!(
            ConfigMap::read_record(&config_map),
            Ok(Some((record(), stored.into_bytes())))
        );
    }

    #[test]
    fn unreadable_records_come_back_raw() {
        let mut endpoints = object::<Endpoints>();
        endpoints.metadata.annotations =
            Some([(LEADER_ANNOTATION.to_owned(), "not json".to_owned())].into());
        assert_eq!(
            Endpoints::read_record(&endpoints),
            Err(b"not json".to_vec())
        );

        let mut lease = object::<Lease>();
        lease.data = serde_json::json!({ "spec": { "holderIdentity": 7 } });
        assert_eq!(
            Lease::read_record(&lease),
            Err(br#"{"holderIdentity":7}"#.to_vec())
        );
    }
}
