//! A list page whose items are being decoded, a share per core: the task that read the page
//! decodes the first share itself, tokio's blocking threads the others.

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::api::{ObjectList, TypeMeta};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::decode::{self, DecodeError, SplitList};

/// Pages with fewer items than this are decoded by the task that read them.
const PARALLEL_FROM: usize = 32;

type Chunk<U> = JoinHandle<Result<Vec<U>, DecodeError>>;

/// Decodes `ranges` of `body` on the calling task. A `Deserialize` impl that panics (a user's
/// type) fails the page with an error, as on a blocking thread, instead of taking the task down.
fn decode_here<T: DeserializeOwned, U>(
    body: &[u8],
    ranges: &[std::ops::Range<usize>],
    wrap: fn(T) -> U,
) -> Result<Vec<U>, DecodeError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decode::decode_items_as(body, ranges, wrap)
    }))
    .unwrap_or_else(|_| {
        Err(DecodeError::Invalid {
            what: "a list item",
            message: "decoding it panicked".to_owned(),
        })
    })
}

/// How many shares a large page is decoded in: one per core. Asked once: the standard library
/// reads the process's CPU affinity and cgroup quota (a few system calls and files) each time.
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES
        .get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
}

/// A page's items: decoded already, or being decoded in chunks, in order.
enum Items<U> {
    Decoded(Result<Vec<U>, DecodeError>),
    Decoding {
        /// The first share, decoded by the task that read the page.
        first: Result<Vec<U>, DecodeError>,
        /// The other shares, one per other core, on blocking threads.
        chunks: Vec<Chunk<U>>,
        len: usize,
    },
}

/// A list page split into its items, which are decoded from the moment it is made; awaiting
/// [`finish`](Self::finish) collects them. Each item is decoded as a `T` and handed out as the
/// `U` it is wrapped in where it was decoded (an `Arc<T>` for a reflector's store).
pub(crate) struct DecodingPage<U> {
    types: TypeMeta,
    metadata: ListMeta,
    items: Items<U>,
}

impl<U> DecodingPage<U>
where
    U: Clone + Send + 'static,
{
    /// Starts decoding the items of `body`, split as `split` says, as `T`s each wrapped by
    /// `wrap`.
    pub(crate) fn start<T: DeserializeOwned + 'static>(
        body: Bytes,
        split: SplitList,
        wrap: fn(T) -> U,
    ) -> Self {
        let threads = cores();
        let len = split.items.len();
        let items = if len < PARALLEL_FROM || threads < 2 {
            Items::Decoded(decode_here(&body, &split.items, wrap))
        } else {
            let per_share = len.div_ceil(threads);
            let (first, rest) = split.items.split_at(per_share.min(len));
            let chunks = rest
                .chunks(per_share)
                .map(|ranges| {
                    let body = body.clone();
                    let ranges = ranges.to_vec();
                    tokio::task::spawn_blocking(move || {
                        decode::decode_items_as(&body, &ranges, wrap)
                    })
                })
                .collect();
            let first = decode_here(&body, first, wrap);
            Items::Decoding { first, chunks, len }
        };
        Self {
            types: split.types,
            metadata: split.metadata,
            items,
        }
    }

    /// The list page, once every item is decoded; the first item that failed fails the page.
    pub(crate) async fn finish(self) -> Result<ObjectList<U>, DecodeError> {
        let items = match self.items {
            Items::Decoded(items) => items?,
            Items::Decoding { first, chunks, len } => {
                let mut items = Vec::with_capacity(len);
                items.extend(first?);
                for chunk in chunks {
                    match chunk.await {
                        Ok(decoded) => items.extend(decoded?),
                        // A panic inside a `Deserialize` impl: the page is lost, not the process.
                        Err(err) => {
                            return Err(DecodeError::Invalid {
                                what: "a list item",
                                message: err.to_string(),
                            });
                        }
                    }
                }
                items
            }
        };
        Ok(ObjectList {
            types: self.types,
            metadata: self.metadata,
            items,
        })
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    /// The page `list` is, split and decoded.
    async fn decode_page(list: serde_json::Value) -> Result<ObjectList<ConfigMap>, DecodeError> {
        let body = Bytes::from(serde_json::to_vec(&list).unwrap());
        let split = decode::split_list(&body).unwrap();
        DecodingPage::start(body, split, std::convert::identity)
            .finish()
            .await
    }

    #[tokio::test]
    async fn a_large_page_decodes_in_order_on_several_threads() {
        let items: Vec<serde_json::Value> = (0..1000)
            .map(|i| serde_json::json!({"metadata": {"name": format!("cm-{i:04}")}, "data": {"i": i.to_string()}}))
            .collect();
        let list = decode_page(serde_json::json!({
            "kind": "ConfigMapList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "77"}, "items": items
        }))
        .await
        .unwrap();
        assert_eq!(list.items.len(), 1000);
        for (i, item) in list.items.iter().enumerate() {
            assert_eq!(
                item.metadata.name.as_deref(),
                Some(format!("cm-{i:04}").as_str())
            );
        }
        assert_eq!(list.metadata.resource_version.as_deref(), Some("77"));
    }

    #[tokio::test]
    async fn one_bad_item_fails_the_page() {
        let mut items: Vec<serde_json::Value> = (0..100)
            .map(|i| serde_json::json!({"metadata": {"name": format!("cm-{i}")}}))
            .collect();
        items[70] = serde_json::json!({"metadata": {"name": 70}});
        let err = decode_page(serde_json::json!({"items": items}))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("cannot decode a list item"),
            "{err}"
        );
    }
}
