//! `LeaderElectionRecord::from_annotation` on any string (the leader annotation a ConfigMap or
//! Endpoints lock holds, which any client may have written), and for a record that parses, the
//! round trip through `to_annotation`: the annotation keeps times to the second, as client-go's
//! does, so one round trip drops sub-second parts and changes nothing else, and a second round
//! trip changes nothing at all. The Lease spec form round-trips exactly.
#![no_main]

use ctrlkit_leaderelection::LeaderElectionRecord;
use jiff::Timestamp;
use libfuzzer_sys::fuzz_target;

fn same_second(original: Option<Timestamp>, written: Option<Timestamp>) {
    match (original, written) {
        (None, None) => {}
        (Some(original), Some(written)) => {
            assert_eq!(original.as_second(), written.as_second());
            assert_eq!(written.subsec_nanosecond(), 0);
        }
        other => panic!("a time changed presence in the round trip: {other:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(record) = LeaderElectionRecord::from_annotation(text) else {
        return;
    };
    let written = record.to_annotation();
    let read = LeaderElectionRecord::from_annotation(&written)
        .unwrap_or_else(|error| panic!("{written:?} does not read back: {error}"));
    assert_eq!(read.holder_identity, record.holder_identity);
    assert_eq!(read.lease_duration_seconds, record.lease_duration_seconds);
    assert_eq!(read.leader_transitions, record.leader_transitions);
    assert_eq!(read.strategy, record.strategy);
    assert_eq!(read.preferred_holder, record.preferred_holder);
    same_second(record.acquire_time, read.acquire_time);
    same_second(record.renew_time, read.renew_time);
    assert_eq!(read.to_annotation(), written);
    assert_eq!(
        LeaderElectionRecord::from_annotation(&read.to_annotation()).ok(),
        Some(read.clone())
    );
    assert_eq!(
        LeaderElectionRecord::from_lease_spec(&record.to_lease_spec()),
        record
    );
});
