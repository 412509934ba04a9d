//! `split_meta_namespace_key` on any string, with the round-trip property: a key that splits
//! re-joins to itself, and a key that does not split has more than one '/'.
#![no_main]

use ctrlkit_cache::{KeyError, split_meta_namespace_key};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(key) = std::str::from_utf8(data) else {
        return;
    };
    match split_meta_namespace_key(key) {
        Ok((namespace, name)) => {
            assert!(!name.contains('/'));
            let joined = match namespace {
                Some(namespace) => {
                    assert!(!namespace.contains('/'));
                    format!("{namespace}/{name}")
                }
                None => name.to_owned(),
            };
            assert_eq!(joined, key);
        }
        Err(KeyError::Malformed(echoed)) => {
            assert_eq!(echoed, key);
            assert!(key.matches('/').count() > 1);
        }
        Err(other) => panic!("splitting {key:?} gave {other:?}"),
    }
});
