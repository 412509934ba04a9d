//! The leader election record: who holds the lock, since when, for how long.
//!
//! Every lock stores the same record. A Lease keeps it in its spec; the ConfigMap and Endpoints
//! locks keep it as JSON in the `control-plane.alpha.kubernetes.io/leader` annotation, with
//! client-go's field names, so ctrlkit and Go candidates can share one lock during a migration.

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The annotation the ConfigMap and Endpoints locks keep the record in.
pub const LEADER_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";

/// Why a stored record could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The annotation is not a JSON record of the expected shape.
    #[error("the leader election record is not valid: {0}")]
    Invalid(#[from] serde_json::Error),
    /// The annotation is JSON but not an object.
    #[error("the leader election record is not a JSON object")]
    NotAnObject,
}

/// Who holds a lock; client-go's `LeaderElectionRecord`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElectionRecord {
    /// The holder's identity; empty when nobody holds the lock (also after a release).
    #[serde(default)]
    pub holder_identity: String,
    /// How long the holder's claim lasts after each renewal, in seconds.
    #[serde(default)]
    pub lease_duration_seconds: i32,
    /// When the current holder acquired the lock.
    #[serde(default, with = "go_time")]
    pub acquire_time: Option<Timestamp>,
    /// When the holder last renewed it.
    #[serde(default, with = "go_time")]
    pub renew_time: Option<Timestamp>,
    /// How many times the lock changed hands.
    #[serde(default)]
    pub leader_transitions: i32,
    /// The coordinated leader election strategy (Lease only; empty otherwise).
    #[serde(default)]
    pub strategy: String,
    /// The identity a coordinated election prefers (Lease only; empty otherwise).
    #[serde(default)]
    pub preferred_holder: String,
}

impl LeaderElectionRecord {
    /// Reads a record from an annotation's JSON.
    ///
    /// ```
    /// use ctrlkit_leaderelection::LeaderElectionRecord;
    ///
    /// let record = LeaderElectionRecord::from_annotation(
    ///     r#"{"holderIdentity":"a","leaseDurationSeconds":15,"acquireTime":"2026-11-22T10:00:00Z","renewTime":"2026-11-22T10:00:08Z","leaderTransitions":3}"#,
    /// ).unwrap();
    /// assert_eq!(record.holder_identity, "a");
    /// assert_eq!(record.leader_transitions, 3);
    /// assert!(LeaderElectionRecord::from_annotation("not json").is_err());
    /// ```
    pub fn from_annotation(json: &str) -> Result<Self, RecordError> {
        // serde would read an array as the fields in order; Go refuses anything but an object.
        let value: serde_json::Value = serde_json::from_str(json)?;
        if !value.is_object() {
            return Err(RecordError::NotAnObject);
        }
        Ok(serde_json::from_value(value)?)
    }

    /// The record as an annotation's JSON, field for field as client-go writes it.
    pub fn to_annotation(&self) -> String {
        // Plain strings, integers and timestamps: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The record a Lease's spec holds; client-go's `LeaseSpecToLeaderElectionRecord`.
    pub fn from_lease_spec(spec: &LeaseSpec) -> Self {
        Self {
            holder_identity: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
            acquire_time: spec.acquire_time.as_ref().map(|time| time.0),
            renew_time: spec.renew_time.as_ref().map(|time| time.0),
            leader_transitions: spec.lease_transitions.unwrap_or_default(),
            strategy: spec.strategy.clone().unwrap_or_default(),
            preferred_holder: spec.preferred_holder.clone().unwrap_or_default(),
        }
    }

    /// The Lease spec that holds this record; client-go's `LeaderElectionRecordToLeaseSpec`.
    pub fn to_lease_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder_identity.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.leader_transitions),
            strategy: (!self.strategy.is_empty()).then(|| self.strategy.clone()),
            preferred_holder: (!self.preferred_holder.is_empty())
                .then(|| self.preferred_holder.clone()),
        }
    }
}

/// Go's `metav1.Time` in JSON: RFC 3339 to the second, `null` for the zero time.
mod go_time {
    use super::*;

    pub(super) fn serialize<S: Serializer>(
        time: &Option<Timestamp>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match time {
            Some(time) => {
                let seconds = Timestamp::from_second(time.as_second()).unwrap_or(*time);
                serializer.serialize_str(&seconds.to_string())
            }
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Timestamp>, D::Error> {
        let text: Option<String> = Option::deserialize(deserializer)?;
        match text.as_deref() {
            None | Some("") => Ok(None),
            Some(text) => text.parse().map(Some).map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Option<Timestamp> {
        text.parse().ok()
    }

    fn record() -> LeaderElectionRecord {
        LeaderElectionRecord {
            holder_identity: "candidate-a".into(),
            lease_duration_seconds: 15,
            acquire_time: at("2026-11-22T10:00:00Z"),
            renew_time: at("2026-11-22T10:00:08.250Z"),
            leader_transitions: 2,
            ..Default::default()
        }
    }

    #[test]
    fn annotations_use_client_go_field_names_and_second_precision() {
        assert_eq!(
            record().to_annotation(),
            r#"{"holderIdentity":"candidate-a","leaseDurationSeconds":15,"acquireTime":"2026-11-22T10:00:00Z","renewTime":"2026-11-22T10:00:08Z","leaderTransitions":2,"strategy":"","preferredHolder":""}"#
        );
        let empty = LeaderElectionRecord::default().to_annotation();
        assert!(empty.contains(r#""acquireTime":null"#), "{empty}");
    }

    #[test]
    fn annotations_round_trip_and_tolerate_missing_fields() {
        let written = record().to_annotation();
        let read = LeaderElectionRecord::from_annotation(&written).unwrap();
        assert_eq!(read.renew_time, at("2026-11-22T10:00:08Z"));
        assert_eq!(read.holder_identity, "candidate-a");
        let sparse = LeaderElectionRecord::from_annotation(r#"{"holderIdentity":"b"}"#).unwrap();
        assert_eq!(sparse.holder_identity, "b");
        assert_eq!(sparse.acquire_time, None);
    }

    #[test]
    fn records_that_are_not_json_or_have_wrong_types_are_errors() {
        for bad in [
            "",
            "not json",
            "[]",
            r#"{"holderIdentity":7}"#,
            r#"{"leaseDurationSeconds":"fifteen"}"#,
            r#"{"renewTime":"yesterday"}"#,
        ] {
            assert!(
                LeaderElectionRecord::from_annotation(bad).is_err(),
                "accepted {bad:?}"
            );
        }
    }

    #[test]
    fn lease_specs_round_trip_and_leave_empty_strategy_unset() {
        let spec = record().to_lease_spec();
        assert_eq!(spec.holder_identity.as_deref(), Some("candidate-a"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.lease_transitions, Some(2));
        assert_eq!(spec.strategy, None);
        assert_eq!(spec.preferred_holder, None);
        // A Lease keeps microseconds: nothing is truncated on this path.
        assert_eq!(LeaderElectionRecord::from_lease_spec(&spec), record());
        assert_eq!(
            LeaderElectionRecord::from_lease_spec(&LeaseSpec::default()),
            LeaderElectionRecord::default()
        );
    }
}
