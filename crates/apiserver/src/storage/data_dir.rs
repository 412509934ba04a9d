//! A durable store's data directory: a write-ahead log in segments, and snapshots.
//!
//! Every change is appended to the current segment (`wal-<first resourceVersion>.log`) and
//! fsynced before the write is acknowledged or any reader or watcher sees it (the fsync is the
//! group-commit thread's, see `group_commit`). Every `snapshot_every` changes a new segment
//! begins and the state before it is written to `snapshot-<resourceVersion>.snap` (through a
//! temporary file, fsynced and renamed). The two newest snapshots are kept with the
//! segments after the older one, so a restart loads the older snapshot and replays at least
//! `snapshot_every` changes: watches resume from resourceVersions issued before the restart.
//!
//! Opening the directory recovers that state. A torn or corrupt tail of the newest segment (a
//! write cut short by a crash) is truncated to the last good record and reported in
//! [`Recovery::truncated`]; damage anywhere else is an error, as truncating there would drop
//! acknowledged changes silently. A `LOCK` file keeps a second server out of the directory.

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::event::{EventType, WatchEvent};
use super::wal::{self, EntryHeader, Frames};
use super::{Objects, StoreConfig, StoredObject};
use crate::resource::ResourceKey;

/// Why a data directory could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// A file operation failed.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done (`read`, `create`, `fsync`, …).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's reason.
        #[source]
        source: io::Error,
    },
    /// Another process has the directory open.
    #[error("{0} is in use by another API server (its LOCK file is held)")]
    Locked(PathBuf),
    /// A file other than the newest segment's tail is damaged: recovering past it would lose
    /// acknowledged changes.
    #[error("{path} is damaged at byte {offset}: {reason}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Where the damage starts.
        offset: u64,
        /// What is wrong there.
        reason: String,
    },
    /// The changes after the snapshot are not all there.
    #[error(
        "{path}: the log is missing changes from resourceVersion {missing_from} (a segment was removed)"
    )]
    Missing {
        /// The data directory.
        path: PathBuf,
        /// The first resourceVersion not found.
        missing_from: u64,
    },
}

/// A damaged tail cut from the newest segment when the directory was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruncatedTail {
    /// The segment.
    pub segment: PathBuf,
    /// Its length now: the end of the last good record.
    pub offset: u64,
    /// How many bytes were cut.
    pub discarded: u64,
    /// What was wrong with the first bad record.
    pub reason: String,
}

/// What opening a data directory found and did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recovery {
    /// The resourceVersion of the snapshot it started from (0: the empty start).
    pub snapshot: u64,
    /// The objects that snapshot held.
    pub snapshot_objects: usize,
    /// The changes replayed from the log on top of it.
    pub replayed: u64,
    /// The newest resourceVersion recovered.
    pub resource_version: u64,
    /// The damaged tail cut from the newest segment, if there was one.
    pub truncated: Option<TruncatedTail>,
    /// Snapshots passed over because they could not be read, with the reason.
    pub skipped_snapshots: Vec<(PathBuf, String)>,
}

/// The state a data directory held.
pub(crate) struct Recovered {
    pub(crate) resource_version: u64,
    pub(crate) objects: HashMap<ResourceKey, Objects>,
    pub(crate) history: VecDeque<Arc<WatchEvent>>,
    pub(crate) compacted: u64,
    pub(crate) report: Recovery,
}

/// An open data directory, appending to its newest segment.
pub(crate) struct DataDir {
    path: PathBuf,
    /// Held (and locked) while the directory is open.
    _lock: File,
    /// Shared with the group-commit thread, which syncs it without the store's lock.
    segment: Arc<File>,
    /// The segment's length after the last record written to it.
    logged_len: u64,
    /// The segment's length up to which it is known durable.
    synced_len: u64,
    /// Changes appended since the last snapshot.
    since_snapshot: u64,
    snapshot_every: u64,
    buffer: Vec<u8>,
    /// The error the next append fails with, half-written.
    #[cfg(test)]
    fault: Option<io::Error>,
    /// The error the next sync fails with.
    #[cfg(test)]
    sync_fault: Option<io::Error>,
    /// What the next sync waits for before it starts.
    #[cfg(test)]
    sync_gate: Option<std::sync::mpsc::Receiver<()>>,
}

/// One fsync of the log, run by the group-commit thread without the store's lock.
pub(crate) struct SyncJob {
    segment: Arc<File>,
    /// The segment's length it makes durable.
    pub(crate) length: u64,
    #[cfg(test)]
    fault: Option<io::Error>,
    #[cfg(test)]
    gate: Option<std::sync::mpsc::Receiver<()>>,
}

impl SyncJob {
    /// Makes the segment durable up to `length` (and whatever follows it).
    pub(crate) fn run(self) -> io::Result<()> {
        #[cfg(test)]
        if let Some(gate) = self.gate {
            let _ = gate.recv();
        }
        #[cfg(test)]
        if let Some(fault) = self.fault {
            return Err(fault);
        }
        self.segment.sync_data()
    }
}

/// A snapshot of a durable state, written off the store's lock.
pub(crate) struct SnapshotJob {
    path: PathBuf,
    resource_version: u64,
    objects: HashMap<ResourceKey, Objects>,
}

impl SnapshotJob {
    /// Writes the snapshot and removes the files no restart needs any more.
    pub(crate) fn run(self) -> Result<(), PersistError> {
        write_snapshot(&self.path, self.resource_version, &self.objects)?;
        prune(&self.path)
    }
}

/// Why changes could not be appended to the log.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AppendError {
    /// Nothing of them is in the log: it was cut back to where it was.
    #[error("{0} (nothing was logged)")]
    RolledBack(#[source] io::Error),
    /// Part of them may be in the log, which could not be cut back.
    #[error("{0} (the log could not be cut back)")]
    Unknown(#[source] io::Error),
}

const LOCK: &str = "LOCK";
const SEGMENT_PREFIX: &str = "wal-";
const SEGMENT_SUFFIX: &str = ".log";
const SNAPSHOT_PREFIX: &str = "snapshot-";
const SNAPSHOT_SUFFIX: &str = ".snap";

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> PersistError + use<> {
    let path = path.to_path_buf();
    move |source| PersistError::Io {
        action,
        path,
        source,
    }
}

fn segment_name(first: u64) -> String {
    format!("{SEGMENT_PREFIX}{first:020}{SEGMENT_SUFFIX}")
}

fn snapshot_name(resource_version: u64) -> String {
    format!("{SNAPSHOT_PREFIX}{resource_version:020}{SNAPSHOT_SUFFIX}")
}

fn numbered(name: &str, prefix: &str, suffix: &str) -> Option<u64> {
    name.strip_prefix(prefix)?
        .strip_suffix(suffix)?
        .parse()
        .ok()
}

/// The snapshot and segment files of a directory, each sorted by resourceVersion.
struct Listing {
    snapshots: Vec<u64>,
    segments: Vec<u64>,
}

fn list(path: &Path) -> Result<Listing, PersistError> {
    let mut listing = Listing {
        snapshots: Vec::new(),
        segments: Vec::new(),
    };
    for entry in fs::read_dir(path).map_err(io_error("read", path))? {
        let entry = entry.map_err(io_error("read", path))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(rv) = numbered(name, SNAPSHOT_PREFIX, SNAPSHOT_SUFFIX) {
            listing.snapshots.push(rv);
        } else if let Some(first) = numbered(name, SEGMENT_PREFIX, SEGMENT_SUFFIX) {
            listing.segments.push(first);
        } else if name.ends_with(".tmp") {
            // A snapshot cut short by a crash before its rename.
            let tmp = entry.path();
            fs::remove_file(&tmp).map_err(io_error("remove", &tmp))?;
        }
    }
    listing.snapshots.sort_unstable();
    listing.segments.sort_unstable();
    Ok(listing)
}

fn sync_dir(path: &Path) -> Result<(), PersistError> {
    File::open(path)
        .and_then(|dir| dir.sync_all())
        .map_err(io_error("fsync", path))
}

impl DataDir {
    /// Opens (creating if need be) the data directory at `path` and recovers its state.
    pub(crate) fn open(
        path: &Path,
        config: &StoreConfig,
    ) -> Result<(Self, Recovered), PersistError> {
        private_dir(path).map_err(io_error("create", path))?;
        let lock_path = path.join(LOCK);
        let lock = private_file()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_error("create", &lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(PersistError::Locked(path.into())),
            Err(fs::TryLockError::Error(source)) => {
                return Err(io_error("lock", &lock_path)(source));
            }
        }
        let mut listing = list(path)?;
        if listing.snapshots.is_empty() {
            if let Some(first) = listing.segments.first() {
                return Err(PersistError::Corrupt {
                    path: path.join(segment_name(*first)),
                    offset: 0,
                    reason: "no snapshot to replay the log onto".to_string(),
                });
            }
            write_snapshot(path, 0, &HashMap::new())?;
            listing.snapshots.push(0);
        }

        let mut report = Recovery::default();
        let mut base = None;
        for snapshot in &listing.snapshots {
            let file = path.join(snapshot_name(*snapshot));
            match read_snapshot(&file) {
                Ok((resource_version, objects)) => {
                    base = Some((resource_version, objects));
                    break;
                }
                Err(reason) => report.skipped_snapshots.push((file, reason)),
            }
        }
        let Some((snapshot, mut objects)) = base else {
            let (file, reason) = report.skipped_snapshots.pop().unwrap_or_default();
            return Err(PersistError::Corrupt {
                path: file,
                offset: 0,
                reason: format!("no snapshot is readable: {reason}"),
            });
        };
        report.snapshot = snapshot;
        report.snapshot_objects = objects.values().map(Objects::len).sum();

        // The segments that may hold changes after the snapshot: a segment ends where the next
        // begins, and the newest has no end.
        let segments: Vec<u64> = listing
            .segments
            .iter()
            .enumerate()
            .filter(|(index, _)| {
                listing
                    .segments
                    .get(index + 1)
                    .is_none_or(|next| *next > snapshot + 1)
            })
            .map(|(_, first)| *first)
            .collect();
        let mut history: VecDeque<Arc<WatchEvent>> = VecDeque::new();
        let mut resource_version = snapshot;
        for (index, first) in segments.iter().enumerate() {
            let newest = index + 1 == segments.len();
            let file = path.join(segment_name(*first));
            if *first > resource_version + 1 {
                return Err(PersistError::Missing {
                    path: path.into(),
                    missing_from: resource_version + 1,
                });
            }
            let bytes = fs::read(&file).map_err(io_error("read", &file))?;
            let mut damage = None;
            for (expected, (offset, frame)) in (*first..).zip(Frames::new(&bytes)) {
                let record = frame
                    .map_err(|error| error.to_string())
                    .and_then(|payload| wal::decode_record(payload).map_err(|e| e.to_string()))
                    .and_then(|record| {
                        if record.header.rv == expected {
                            Ok(record)
                        } else {
                            Err(format!(
                                "resourceVersion {} where {expected} was due",
                                record.header.rv
                            ))
                        }
                    });
                let record = match record {
                    Ok(record) => record,
                    Err(reason) => {
                        damage = Some((offset, reason));
                        break;
                    }
                };
                if record.header.rv <= resource_version {
                    continue; // already in the snapshot
                }
                resource_version = record.header.rv;
                history.push_back(apply(&mut objects, record));
                report.replayed += 1;
                if history.len() > config.history {
                    history.pop_front();
                }
            }
            if let Some((offset, reason)) = damage {
                if !newest {
                    return Err(PersistError::Corrupt {
                        path: file,
                        offset: offset as u64,
                        reason,
                    });
                }
                truncate(&file, offset as u64)?;
                let tail = TruncatedTail {
                    segment: file,
                    offset: offset as u64,
                    discarded: (bytes.len() - offset) as u64,
                    reason,
                };
                tracing::warn!(
                    segment = %tail.segment.display(),
                    offset = tail.offset,
                    discarded = tail.discarded,
                    reason = %tail.reason,
                    "truncated a damaged tail of the write-ahead log"
                );
                report.truncated = Some(tail);
            }
        }
        report.resource_version = resource_version;

        let segment_first = match segments.last() {
            Some(first) => *first,
            None => snapshot + 1,
        };
        let segment_path = path.join(segment_name(segment_first));
        let segment = open_segment(&segment_path)?;
        sync_dir(path)?;
        let logged_len = segment
            .metadata()
            .map_err(io_error("read", &segment_path))?
            .len();
        let compacted = history
            .front()
            .map_or(resource_version, |event| event.resource_version - 1);
        let data = Self {
            path: path.into(),
            _lock: lock,
            segment: Arc::new(segment),
            logged_len,
            synced_len: logged_len,
            // Counted from the newest snapshot, which may be newer than the one loaded.
            since_snapshot: resource_version
                .saturating_sub(listing.snapshots.last().copied().unwrap_or(snapshot)),
            snapshot_every: config.history.max(1) as u64,
            buffer: Vec::new(),
            #[cfg(test)]
            fault: None,
            #[cfg(test)]
            sync_fault: None,
            #[cfg(test)]
            sync_gate: None,
        };
        Ok((
            data,
            Recovered {
                resource_version,
                objects,
                history,
                compacted,
                report,
            },
        ))
    }

    /// Writes the changes (each with its object's name) to the log, to be made durable by a
    /// [`SyncJob`]. If they cannot all be written, the log is cut back to where it was.
    pub(crate) fn append(
        &mut self,
        changes: &[(Arc<WatchEvent>, String)],
    ) -> Result<(), AppendError> {
        self.buffer.clear();
        for (event, name) in changes {
            wal::encode_record(event, name, &mut self.buffer);
        }
        if let Err(error) = self.write_buffer() {
            // Take back whatever part of the records reached the file, so that the log holds
            // exactly the changes before them and the next append can follow them.
            let cut = self
                .segment
                .set_len(self.logged_len)
                .and_then(|()| self.segment.sync_data());
            return Err(match cut {
                Ok(()) => AppendError::RolledBack(error),
                Err(_) => AppendError::Unknown(error),
            });
        }
        self.logged_len += self.buffer.len() as u64;
        self.since_snapshot += changes.len() as u64;
        Ok(())
    }

    /// Writes the encoded records to the segment (through the fault hook, in tests).
    fn write_buffer(&mut self) -> io::Result<()> {
        let mut segment: &File = &self.segment;
        #[cfg(test)]
        if let Some(fault) = self.fault.take() {
            let half = self.buffer.len() / 2;
            segment.write_all(&self.buffer[..half])?;
            return Err(fault);
        }
        segment.write_all(&self.buffer)
    }

    /// Makes the next append write half its records, then fail with `error` (a full disk).
    #[cfg(test)]
    pub(crate) fn fail_next_append(&mut self, error: io::Error) {
        self.fault = Some(error);
    }

    /// Makes the next sync fail with `error`.
    #[cfg(test)]
    pub(crate) fn fail_next_sync(&mut self, error: io::Error) {
        self.sync_fault = Some(error);
    }

    /// Makes the next sync wait until the returned sender sends (or is dropped).
    #[cfg(test)]
    pub(crate) fn hold_next_sync(&mut self) -> std::sync::mpsc::Sender<()> {
        let (release, gate) = std::sync::mpsc::channel();
        self.sync_gate = Some(gate);
        release
    }

    /// The fsync that makes everything written so far durable.
    pub(crate) fn sync_job(&mut self) -> SyncJob {
        SyncJob {
            segment: Arc::clone(&self.segment),
            length: self.logged_len,
            #[cfg(test)]
            fault: self.sync_fault.take(),
            #[cfg(test)]
            gate: self.sync_gate.take(),
        }
    }

    /// Records that a [`SyncJob`] made the segment durable up to `length`.
    pub(crate) fn synced(&mut self, length: u64) {
        self.synced_len = self.synced_len.max(length);
    }

    /// After a failed sync: cuts the segment back to what is known durable, so that the
    /// changes taken back are not in the log either.
    pub(crate) fn cut_to_synced(&mut self) -> io::Result<()> {
        self.segment.set_len(self.synced_len)?;
        self.segment.sync_data()?;
        self.logged_len = self.synced_len;
        Ok(())
    }

    /// Whether enough changes were logged since the last snapshot to take another.
    pub(crate) fn snapshot_due(&self) -> bool {
        self.since_snapshot >= self.snapshot_every
    }

    /// Starts a new segment with the change `next`, once everything before it is durable, and
    /// returns the snapshot of `objects` (the state at `next - 1`) to write off the lock.
    pub(crate) fn rotate(
        &mut self,
        next: u64,
        objects: &HashMap<ResourceKey, Objects>,
    ) -> Result<SnapshotJob, PersistError> {
        // Counted as done even if it fails: the next attempt comes after another interval.
        self.since_snapshot = 0;
        let segment_path = self.path.join(segment_name(next));
        let segment = open_segment(&segment_path)?;
        sync_dir(&self.path)?;
        self.segment = Arc::new(segment);
        self.logged_len = 0;
        self.synced_len = 0;
        Ok(SnapshotJob {
            path: self.path.clone(),
            resource_version: next - 1,
            objects: objects.clone(),
        })
    }
}

/// Keeps the two newest snapshots and the segments holding changes after the older one. The
/// newest segment is always kept: no segment follows it.
fn prune(path: &Path) -> Result<(), PersistError> {
    let listing = list(path)?;
    let keep = listing.snapshots.len().saturating_sub(2);
    let Some(oldest_kept) = listing.snapshots.get(keep) else {
        return Ok(());
    };
    // Snapshots first: a restart must never find a snapshot without the log after it.
    for snapshot in &listing.snapshots[..keep] {
        let file = path.join(snapshot_name(*snapshot));
        fs::remove_file(&file).map_err(io_error("remove", &file))?;
    }
    for (index, first) in listing.segments.iter().enumerate() {
        let ends_before = listing
            .segments
            .get(index + 1)
            .is_some_and(|next| *next <= oldest_kept + 1);
        if ends_before {
            let file = path.join(segment_name(*first));
            fs::remove_file(&file).map_err(io_error("remove", &file))?;
        }
    }
    sync_dir(path)
}

/// Applies one logged change to `objects`, returning it as the watch event it was.
fn apply(objects: &mut HashMap<ResourceKey, Objects>, record: wal::Record) -> Arc<WatchEvent> {
    let resource = record.header.resource_key();
    let key = (record.header.namespace.clone(), record.header.name.clone());
    let object = Arc::new(StoredObject::new(record.object));
    let stored = objects.entry(resource.clone()).or_default();
    let previous = match record.event_type {
        EventType::Deleted => stored.remove(&key),
        EventType::Added | EventType::Modified => stored.insert(key, Arc::clone(&object)),
    };
    let previous = previous.filter(|_| record.event_type != EventType::Added);
    let size = super::history::footprint(&object);
    Arc::new(
        WatchEvent::new(
            record.event_type,
            resource,
            record.header.namespace,
            record.header.rv,
            object,
            previous,
        )
        .with_size(size),
    )
}

/// Options for a file of the directory: readable by its owner only (it holds Secrets).
fn private_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// Creates the directory (and its parents) if missing, the directory itself for its owner
/// only.
fn private_dir(path: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

fn open_segment(path: &Path) -> Result<File, PersistError> {
    private_file()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io_error("open", path))
}

fn truncate(path: &Path, length: u64) -> Result<(), PersistError> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_error("open", path))?;
    file.set_len(length).map_err(io_error("truncate", path))?;
    file.sync_all().map_err(io_error("fsync", path))
}

/// The first frame of a snapshot.
#[derive(serde::Serialize, serde::Deserialize)]
struct SnapshotHeader {
    #[serde(rename = "resourceVersion")]
    resource_version: u64,
    objects: usize,
}

fn write_snapshot(
    path: &Path,
    resource_version: u64,
    objects: &HashMap<ResourceKey, Objects>,
) -> Result<(), PersistError> {
    let count = objects.values().map(Objects::len).sum();
    let mut bytes = Vec::new();
    let header = serde_json::to_vec(&SnapshotHeader {
        resource_version,
        objects: count,
    })
    .unwrap_or_default();
    wal::encode_frame(&header, &mut bytes);
    for (resource, stored) in objects {
        for ((namespace, name), object) in stored {
            let header = EntryHeader {
                rv: 0,
                group: resource.group.clone(),
                resource: resource.plural.clone(),
                namespace: namespace.clone(),
                name: name.clone(),
            };
            wal::encode_entry(&header, object, &mut bytes);
        }
    }
    let file = path.join(snapshot_name(resource_version));
    let tmp = path.join(format!("{}.tmp", snapshot_name(resource_version)));
    let mut out = private_file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(io_error("create", &tmp))?;
    out.write_all(&bytes).map_err(io_error("write", &tmp))?;
    out.sync_all().map_err(io_error("fsync", &tmp))?;
    fs::rename(&tmp, &file).map_err(io_error("rename", &tmp))?;
    sync_dir(path)
}

type Snapshot = (u64, HashMap<ResourceKey, Objects>);

fn read_snapshot(file: &Path) -> Result<Snapshot, String> {
    let bytes = fs::read(file).map_err(|error| error.to_string())?;
    let mut frames = Frames::new(&bytes);
    let header: SnapshotHeader = match frames.next() {
        Some((_, Ok(payload))) => serde_json::from_slice(payload)
            .map_err(|error| format!("bad snapshot header: {error}"))?,
        Some((_, Err(error))) => return Err(error.to_string()),
        None => return Err("empty snapshot".to_string()),
    };
    let mut objects: HashMap<ResourceKey, Objects> = HashMap::new();
    let mut count = 0;
    for (offset, frame) in frames {
        let payload = frame.map_err(|error| format!("at byte {offset}: {error}"))?;
        let (entry, object) =
            wal::decode_entry(payload).map_err(|error| format!("at byte {offset}: {error}"))?;
        objects.entry(entry.resource_key()).or_default().insert(
            (entry.namespace, entry.name),
            Arc::new(StoredObject::new(object)),
        );
        count += 1;
    }
    if count != header.objects {
        return Err(format!(
            "{count} objects where the header promises {}",
            header.objects
        ));
    }
    Ok((header.resource_version, objects))
}

#[cfg(test)]
mod tests;
