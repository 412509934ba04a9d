//! Decoding list and watch bodies into objects.
//!
//! Objects are decoded with simd-json, for two reasons: it decodes realistic Pods faster than
//! serde_json, and it tells serde each array's length up front, so every `Vec` of the object is
//! allocated exactly. serde_json gives no length, so serde grows each vector by doubling and a
//! decoded Pod carries spare capacity in a dozen vectors for as long as it is cached. A list body is split into its items' bytes
//! first (see [`split_list`]) so that a page's items can be decoded on several threads.
//!
//! A second JSON stack is a cost to carry; it is kept because with serde_json alone the
//! informer benchmark's Pod sync takes more than a tenth longer and more memory (the commit that
//! kept it has the figures). Everything else (requests, errors, `Status` lines) is serde_json.

use std::cell::RefCell;
use std::ops::Range;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::api::{ObjectList, TypeMeta, WatchEvent};
use kube::core::Status;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::heap_room::HeapRoom;

/// How deep a decoded document may nest; serde_json's own limit, so that no input can exhaust
/// a thread's stack while a recursive `Deserialize` walks it.
const MAX_DEPTH: usize = 128;

/// Why a body could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The bytes are not JSON, or not JSON of the expected shape.
    #[error("cannot decode {what}: {message}")]
    Invalid {
        /// What was being decoded (`"an object"`, `"a list"`, `"a watch event"`).
        what: &'static str,
        /// The decoder's explanation, with the position where it stopped.
        message: String,
    },
}

impl DecodeError {
    fn invalid(what: &'static str, message: impl ToString) -> Self {
        Self::Invalid {
            what,
            message: message.to_string(),
        }
    }
}

impl From<DecodeError> for kube::Error {
    fn from(err: DecodeError) -> Self {
        kube::Error::SerdeError(<serde_json::Error as serde::de::Error>::custom(err))
    }
}

/// A thread's reusable decoding space: a mutable copy of the input (simd-json parses in place)
/// and simd-json's index buffers.
struct Scratch {
    input: Vec<u8>,
    buffers: simd_json::Buffers,
}

impl Scratch {
    fn new() -> Self {
        Self {
            input: Vec::new(),
            buffers: simd_json::Buffers::with_max_depth(4096, MAX_DEPTH),
        }
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// Decodes one JSON document into `T`, with every vector allocated exactly.
///
/// ```
/// use ctrlkit_cache::decode_object;
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// let cm: ConfigMap = decode_object(br#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#).unwrap();
/// assert_eq!(cm.metadata.name.as_deref(), Some("a"));
/// assert!(decode_object::<ConfigMap>(b"{not json").is_err());
/// ```
pub fn decode_object<T: DeserializeOwned>(json: &[u8]) -> Result<T, DecodeError> {
    decode_as(json, "an object")
}

fn decode_as<T: DeserializeOwned>(json: &[u8], what: &'static str) -> Result<T, DecodeError> {
    SCRATCH.with(|scratch| {
        // A decode that re-enters this thread's scratch (it cannot: `Deserialize` impls do not
        // decode JSON bytes) gets fresh buffers instead of a panic.
        let mut fresh;
        let mut borrowed = scratch.try_borrow_mut();
        let scratch = match borrowed.as_deref_mut() {
            Ok(scratch) => scratch,
            Err(_) => {
                fresh = Scratch::new();
                &mut fresh
            }
        };
        scratch.input.clear();
        scratch.input.extend_from_slice(json);
        let decoded = simd_json::serde::from_slice_with_buffers::<T>(
            &mut scratch.input,
            &mut scratch.buffers,
        )
        .map_err(|err| DecodeError::invalid(what, err));
        // Keep the scratch space from holding on to one outsized body.
        if scratch.input.capacity() > 1 << 20 {
            *scratch = Scratch::new();
        }
        decoded
    })
}

/// One line of a watch stream decoded: the event, or why not. A line that is a `Status` instead
/// of an event (an API server reports some failures that way) becomes [`kube::Error::Api`], as
/// kube-client's own watch decoding does.
///
/// ```
/// use ctrlkit_cache::decode_watch_event;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::WatchEvent;
///
/// let line = br#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}"#;
/// let Ok(WatchEvent::Added(cm)) = decode_watch_event::<ConfigMap>(line) else { panic!() };
/// assert_eq!(cm.metadata.resource_version.as_deref(), Some("7"));
/// assert!(decode_watch_event::<ConfigMap>(br#"{"type":"BOGUS","object":{}}"#).is_err());
/// ```
pub fn decode_watch_event<T: DeserializeOwned + Clone>(
    line: &[u8],
) -> Result<WatchEvent<T>, kube::Error> {
    match decode_as::<WatchEvent<T>>(line, "a watch event") {
        Ok(event) => Ok(event),
        Err(err) => match serde_json::from_slice::<Status>(line) {
            // Any JSON object reads as a `Status` (every field is optional): only one that says
            // what failed is taken for one.
            Ok(status) if status.status.is_some() || status.code != 0 => {
                Err(kube::Error::Api(status.boxed()))
            }
            _ => Err(err.into()),
        },
    }
}

/// A list body split into its parts: the items stay undecoded, as byte ranges of the body.
#[derive(Debug)]
pub(crate) struct SplitList {
    pub(crate) types: TypeMeta,
    pub(crate) metadata: ListMeta,
    pub(crate) items: Vec<Range<usize>>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: Option<ListMeta>,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

impl Envelope<'_> {
    /// The list's type and metadata, with its items at `items`.
    fn split(self, items: Vec<Range<usize>>) -> SplitList {
        SplitList {
            types: TypeMeta {
                api_version: self.api_version,
                kind: self.kind,
            },
            metadata: self.metadata.unwrap_or_default(),
            items,
        }
    }
}

/// Splits a list body into its type, its metadata and the byte range of each item.
///
/// The items are found by a scan that only follows strings and brackets (they are validated when
/// each is decoded), and the rest of the body, with the items cut out, is parsed by serde_json.
/// Whatever that scan does not recognize (an escaped `items` key, a malformed array) goes the
/// slow way: serde_json reads the whole body, borrowing each item.
pub(crate) fn split_list(body: &[u8]) -> Result<SplitList, DecodeError> {
    let Some((array, items)) = scan::find_items(body) else {
        return split_list_slowly(body);
    };
    let mut rest = Vec::with_capacity(body.len() - array.len() + 4);
    rest.extend_from_slice(&body[..array.start]);
    rest.extend_from_slice(b"null");
    rest.extend_from_slice(&body[array.end..]);
    let envelope: Envelope<'_> =
        serde_json::from_slice(&rest).map_err(|err| DecodeError::invalid("a list", err))?;
    if envelope.items.is_some() {
        // A second `items` key the scan did not see (escaped): let serde_json decide.
        return split_list_slowly(body);
    }
    Ok(envelope.split(items))
}

fn split_list_slowly(body: &[u8]) -> Result<SplitList, DecodeError> {
    let mut envelope: Envelope<'_> =
        serde_json::from_slice(body).map_err(|err| DecodeError::invalid("a list", err))?;
    let start = body.as_ptr() as usize;
    let items = envelope
        .items
        .take()
        .unwrap_or_default()
        .into_iter()
        .map(|item| {
            // Each raw item borrows from `body`: its offset is where it starts in there.
            let offset = (item.get().as_ptr() as usize).saturating_sub(start);
            offset..offset + item.get().len()
        })
        .collect();
    Ok(envelope.split(items))
}

/// A scan of JSON that follows only strings and brackets.
mod scan {
    use std::ops::Range;

    fn skip_whitespace(body: &[u8], mut at: usize) -> usize {
        while body
            .get(at)
            .is_some_and(|byte| matches!(byte, b' ' | b'\t' | b'\n' | b'\r'))
        {
            at += 1;
        }
        at
    }

    /// The end of the string whose opening quote is at `at` (just past its closing quote).
    ///
    /// Only quotes are searched for: escapes such as `\n` (every line break of a ConfigMap's
    /// file) do not stop the search, and a quote is escaped when an odd run of backslashes
    /// precedes it.
    fn skip_string(body: &[u8], at: usize) -> Option<usize> {
        let contents = at + 1;
        let mut from = contents;
        loop {
            let quote = from + memchr::memchr(b'"', body.get(from..)?)?;
            let backslashes = body[contents..quote]
                .iter()
                .rev()
                .take_while(|&&byte| byte == b'\\')
                .count();
            if backslashes % 2 == 0 {
                return Some(quote + 1);
            }
            from = quote + 1;
        }
    }

    /// The end of the value starting at `at`: a string, an object or array (brackets matched,
    /// contents not validated), or a scalar (up to the next delimiter).
    fn skip_value(body: &[u8], at: usize) -> Option<usize> {
        match *body.get(at)? {
            b'"' => skip_string(body, at),
            b'{' | b'[' => {
                let mut closers = vec![if body[at] == b'{' { b'}' } else { b']' }];
                let mut at = at + 1;
                while let Some(&byte) = body.get(at) {
                    match byte {
                        b'"' => {
                            at = skip_string(body, at)?;
                            continue;
                        }
                        b'{' => closers.push(b'}'),
                        b'[' => closers.push(b']'),
                        b'}' | b']' => {
                            if closers.pop()? != byte {
                                return None;
                            }
                            if closers.is_empty() {
                                return Some(at + 1);
                            }
                        }
                        _ => {}
                    }
                    at += 1;
                }
                None
            }
            b',' | b']' | b'}' | b':' => None,
            _ => {
                let mut end = at;
                while body.get(end).is_some_and(|byte| {
                    !matches!(byte, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
                }) {
                    end += 1;
                }
                Some(end)
            }
        }
    }

    /// The byte range of the top-level `items` array of a list body and of each of its elements;
    /// `None` if there is none or the body is not shaped as expected.
    pub(super) fn find_items(body: &[u8]) -> Option<(Range<usize>, Vec<Range<usize>>)> {
        let mut at = skip_whitespace(body, 0);
        if body.get(at) != Some(&b'{') {
            return None;
        }
        at = skip_whitespace(body, at + 1);
        loop {
            if body.get(at) != Some(&b'"') {
                return None;
            }
            let key_end = skip_string(body, at)?;
            let key = &body[at + 1..key_end - 1];
            at = skip_whitespace(body, key_end);
            if body.get(at) != Some(&b':') {
                return None;
            }
            at = skip_whitespace(body, at + 1);
            if key == b"items" && body.get(at) == Some(&b'[') {
                return split_array(body, at);
            }
            at = skip_whitespace(body, skip_value(body, at)?);
            match body.get(at)? {
                b',' => at = skip_whitespace(body, at + 1),
                _ => return None,
            }
        }
    }

    fn split_array(body: &[u8], open: usize) -> Option<(Range<usize>, Vec<Range<usize>>)> {
        let mut elements = Vec::new();
        let mut at = skip_whitespace(body, open + 1);
        if body.get(at) == Some(&b']') {
            return Some((open..at + 1, elements));
        }
        loop {
            let end = skip_value(body, at)?;
            elements.push(at..end);
            at = skip_whitespace(body, end);
            match body.get(at)? {
                b',' => at = skip_whitespace(body, at + 1),
                b']' => return Some((open..at + 1, elements)),
                _ => return None,
            }
        }
    }
}

/// Decodes the items of `body` at `ranges`, in order.
pub(crate) fn decode_items<T: DeserializeOwned>(
    body: &[u8],
    ranges: &[Range<usize>],
) -> Result<Vec<T>, DecodeError> {
    decode_items_as(body, ranges, std::convert::identity)
}

/// Decodes the items of `body` at `ranges`, in order, each handed to `wrap` where it is decoded
/// (`Arc::new`, so that an object's `Arc` is made on the thread that made the object).
pub(crate) fn decode_items_as<T: DeserializeOwned, U>(
    body: &[u8],
    ranges: &[Range<usize>],
    wrap: fn(T) -> U,
) -> Result<Vec<U>, DecodeError> {
    let mut room = HeapRoom::default();
    ranges
        .iter()
        .map(|range| {
            room.before_decoding(range.len());
            let item = body
                .get(range.clone())
                .ok_or_else(|| DecodeError::invalid("a list item", "its bytes are out of range"))?;
            decode_as(item, "a list item").map(wrap)
        })
        .collect()
}

/// Decodes a whole list body on the calling thread.
///
/// ```
/// use ctrlkit_cache::decode_list;
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// let body = br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9"},
///                 "items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]}"#;
/// let list = decode_list::<ConfigMap>(body).unwrap();
/// assert_eq!(list.metadata.resource_version.as_deref(), Some("9"));
/// assert_eq!(list.items.len(), 2);
/// ```
pub fn decode_list<T: DeserializeOwned + Clone>(body: &[u8]) -> Result<ObjectList<T>, DecodeError> {
    let split = split_list(body)?;
    let items = decode_items(body, &split.items)?;
    Ok(ObjectList {
        types: split.types,
        metadata: split.metadata,
        items,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;

    fn pod() -> serde_json::Value {
        json!({
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "5",
                "managedFields": [{"manager": "m", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}}}}}}]},
            "spec": {"containers": [{"name": "app", "image": "i",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "ports": [{"containerPort": 80}]}],
                "tolerations": [{"key": "k", "operator": "Exists"}]},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"},
                {"type": "PodScheduled", "status": "True"}]}
        })
    }

    #[test]
    fn decodes_what_serde_json_decodes_with_exact_vectors() {
        let bytes = serde_json::to_vec(&pod()).unwrap();
        let ours: Pod = decode_object(&bytes).unwrap();
        let theirs: Pod = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(ours, theirs);
        let spec = ours.spec.unwrap();
        let container = &spec.containers[0];
        assert_eq!(container.env.as_ref().unwrap().capacity(), 2);
        assert_eq!(container.ports.as_ref().unwrap().capacity(), 1);
        assert_eq!(spec.tolerations.as_ref().unwrap().capacity(), 1);
        let conditions = ours.status.unwrap().conditions.unwrap();
        assert_eq!(conditions.capacity(), 3);
        // serde_json grows the same vectors by doubling.
        let env = theirs.spec.unwrap().containers[0].env.clone().unwrap();
        assert_eq!(env.len(), 2);
    }

    #[test]
    fn a_list_splits_into_its_items_in_order() {
        let body = serde_json::to_vec(&json!({
            "apiVersion": "v1", "kind": "PodList",
            "metadata": {"resourceVersion": "12", "continue": "next"},
            "items": [pod(), {"metadata": {"name": "q"}}]
        }))
        .unwrap();
        let list = decode_list::<Pod>(&body).unwrap();
        assert_eq!(list.types.kind, "PodList");
        assert_eq!(list.types.api_version, "v1");
        assert_eq!(list.metadata.resource_version.as_deref(), Some("12"));
        assert_eq!(list.metadata.continue_.as_deref(), Some("next"));
        let names: Vec<_> = list.items.iter().map(|p| p.metadata.name.clone()).collect();
        assert_eq!(names, [Some("p".to_owned()), Some("q".to_owned())]);
    }

    #[test]
    fn the_quick_split_agrees_with_serde_json() {
        let bodies: [&[u8]; 20] = [
            br#"{"items":[{"a":[{"b":{"c":[{},"]"]}},"}{"]},{"d":{"e":"{"}}]}"#,
            br#"{"items":[{"a":"}"}}]}"#,
            br#"{"items":[{"a":"x\\"},{"b":"\\\"}\\\\"}]}"#,
            br#"{"items":[{"a":"\n\t\u0022\\\\\"\\"},{"b":1}],"kind":"\\"}"#,
            br#"{"items":[{"a":"unterminated\"}]}"#,
            br#"{"items":[{"a":"\\\\\\"}]}"#,
            br#"{"kind":"List","items":[{"a":"x]}\"{["},{"b":[1,[2,{"c":"}"}]]}],"metadata":{"resourceVersion":"4"}}"#,
            b" {\n \"items\" :\t[ {\"a\":1} ,\r\n{\"b\":2}\n] , \"kind\":\"K\"}\n",
            br#"{"items":[]}"#,
            br#"{"items":[ ]}"#,
            br#"{"items":null,"kind":"K"}"#,
            br#"{"kind":"K"}"#,
            br#"{"items":[1,"two",null,true,{"x":[]}]}"#,
            br#"{"metadata":{"continue":"a\"b"},"items":[{"n":"\\"}]}"#,
            br#"{"ite\u006ds":[{"a":1}]}"#,
            br#"{"items":[{"a":1}],"items":[{"b":2}]}"#,
            br#"{"items":[{"a":1} {"b":2}]}"#,
            br#"{"items":[{"a":[1}]}"#,
            br#"{"items":[{"a":1}]} trailing"#,
            br#"{"items":[{"a":1},]}"#,
        ];
        for body in bodies {
            let quick = split_list(body).map(|split| split.items);
            let slow = split_list_slowly(body).map(|split| split.items);
            match (&quick, &slow) {
                (Ok(quick), Ok(slow)) => {
                    assert_eq!(quick, slow, "{}", String::from_utf8_lossy(body))
                }
                // Items whose insides are malformed are refused when each is decoded.
                (Ok(_), Err(_)) => assert!(
                    decode_list::<serde_json::Value>(body).is_err(),
                    "{}",
                    String::from_utf8_lossy(body)
                ),
                (Err(_), Err(_)) => {}
                (Err(err), Ok(_)) => panic!("{}: {err}", String::from_utf8_lossy(body)),
            }
        }
        let escaped = split_list(br#"{"ite\u006ds":[{"a":1}]}"#).unwrap();
        assert_eq!(escaped.items.len(), 1);
    }

    #[test]
    fn the_quick_split_agrees_with_serde_json_on_random_strings() {
        // Strings full of the bytes a scan can trip on: quotes, runs of backslashes, brackets,
        // line breaks and multi-byte characters, as serde_json escapes them.
        let alphabet = [
            '"', '\\', '\n', '{', '}', '[', ']', ',', ':', 'a', 'é', '\u{1}',
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..500 {
            let mut text = || -> String {
                (0..rng.usize(0..12))
                    .map(|_| alphabet[rng.usize(..alphabet.len())])
                    .collect()
            };
            let items: Vec<serde_json::Value> = (0..3)
                .map(|_| serde_json::json!({ text(): text(), "n": [text(), {"k": text()}] }))
                .collect();
            let body = serde_json::to_vec(&serde_json::json!({
                "metadata": {"continue": text()}, "items": items, "kind": text()
            }))
            .unwrap();
            let quick = split_list(&body).unwrap();
            let slow = split_list_slowly(&body).unwrap();
            assert_eq!(
                quick.items,
                slow.items,
                "{}",
                String::from_utf8_lossy(&body)
            );
            assert_eq!(quick.metadata.continue_, slow.metadata.continue_);
        }
    }

    #[test]
    fn null_or_missing_items_are_an_empty_list() {
        for body in [
            &br#"{"metadata":{"resourceVersion":"3"},"items":null}"#[..],
            br#"{"metadata":{"resourceVersion":"3"}}"#,
        ] {
            let list = decode_list::<Pod>(body).unwrap();
            assert!(list.items.is_empty());
            assert_eq!(list.metadata.resource_version.as_deref(), Some("3"));
        }
    }

    #[test]
    fn bad_input_is_an_error_never_a_panic() {
        let deep = "[".repeat(100_000);
        let deep_object = format!(
            "{}{}",
            r#"{"metadata":{"annotations":"#,
            r#"{"a":"#.repeat(50_000)
        );
        let objects: [&[u8]; 7] = [
            b"",
            b"{",
            b"{not json",
            b"\xff\xfe",
            br#"{"metadata":{"name":7}}"#,
            deep.as_bytes(),
            deep_object.as_bytes(),
        ];
        for case in objects {
            assert!(decode_object::<Pod>(case).is_err(), "{case:?}");
        }
        let lists: [&[u8]; 5] = [
            b"",
            b"{",
            br#"{"items":{}}"#,
            br#"{"items":[{"metadata":{"name":7}}]}"#,
            deep.as_bytes(),
        ];
        for case in lists {
            assert!(decode_list::<Pod>(case).is_err(), "{case:?}");
        }
        let events: [&[u8]; 6] = [
            b"",
            b"{",
            br#"{"type":"BOGUS","object":{}}"#,
            br#"{"type":"ADDED","object":[]}"#,
            br#"{"type":"ADDED"}"#,
            deep.as_bytes(),
        ];
        for case in events {
            assert!(decode_watch_event::<Pod>(case).is_err(), "{case:?}");
        }
    }

    #[test]
    fn a_status_line_is_an_api_error() {
        let line = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","reason":"Expired","code":410}"#;
        match decode_watch_event::<Pod>(line) {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 410);
                assert_eq!(status.reason, "Expired");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn watch_events_of_every_type_decode() {
        let object = pod();
        for (kind, check) in [("ADDED", 0), ("MODIFIED", 1), ("DELETED", 2)] {
            let line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap();
            let event = decode_watch_event::<Pod>(&line).unwrap();
            let matched = match (event, check) {
                (WatchEvent::Added(p), 0)
                | (WatchEvent::Modified(p), 1)
                | (WatchEvent::Deleted(p), 2) => p.metadata.name.as_deref() == Some("p"),
                _ => false,
            };
            assert!(matched, "{kind}");
        }
        let bookmark = br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"44","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        match decode_watch_event::<Pod>(bookmark).unwrap() {
            WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, "44"),
            other => panic!("{other:?}"),
        }
    }
}
