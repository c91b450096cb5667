//! How journal entries are checked, encoded and decoded by the stores: a batch continues the
//! journal at its expected seq, a stored entry's schema version is checked before its event
//! is parsed, a loaded journal is dense; JSON in and out as store errors.

use super::{JournalEntry, StoreError};
use crate::run::SCHEMA_VERSION;
#[cfg(any(test, feature = "redis"))]
use serde::Deserialize;
#[cfg(any(feature = "sqlite", feature = "redis"))]
use serde::Serialize;

/// Checks that entries continue the journal at `expected`, without gaps.
pub(crate) fn check_batch(expected: u64, entries: &[JournalEntry]) -> Result<(), StoreError> {
    for (offset, entry) in (0u64..).zip(entries) {
        if entry.seq != expected + offset {
            return Err(StoreError::Invalid(format!(
                "entry {offset} of the batch has seq {} but must have {}",
                entry.seq,
                expected + offset
            )));
        }
    }
    Ok(())
}

/// An entry as stored: its version is checked before its event is parsed (a newer format's
/// event may not parse at all).
#[cfg(any(test, feature = "redis"))]
#[derive(Deserialize)]
pub(crate) struct StoredEntry {
    seq: u64,
    at_ms: u64,
    schema_version: u32,
    event: serde_json::Value,
}

/// Decodes one stored entry (the whole entry as JSON), checking its version.
#[cfg(any(test, feature = "redis"))]
pub(crate) fn decode_entry_json(run_id: &str, json: &[u8]) -> Result<JournalEntry, StoreError> {
    let stored: StoredEntry = serde_json::from_slice(json).map_err(|e| {
        StoreError::Corrupt(format!("run '{run_id}': a journal entry is not valid JSON: {e}"))
    })?;
    decode_parts(run_id, stored.seq, stored.at_ms, stored.schema_version, stored.event)
}

/// Decodes an entry from its parts, checking its version.
pub(crate) fn decode_parts(
    run_id: &str,
    seq: u64,
    at_ms: u64,
    schema_version: u32,
    event: serde_json::Value,
) -> Result<JournalEntry, StoreError> {
    if schema_version != SCHEMA_VERSION {
        return Err(StoreError::UnsupportedSchema {
            run_id: run_id.to_owned(),
            seq,
            found: schema_version,
            supported: SCHEMA_VERSION,
        });
    }
    let event = serde_json::from_value(event).map_err(|e| {
        StoreError::Corrupt(format!("run '{run_id}', entry {seq}: not a journal event: {e}"))
    })?;
    Ok(JournalEntry { seq, at_ms, schema_version, event })
}

/// Checks that a loaded journal has dense sequence numbers from 0.
pub(crate) fn check_dense(run_id: &str, entries: &[JournalEntry]) -> Result<(), StoreError> {
    check_dense_from(run_id, 0, entries)
}

/// [`check_dense`] for a journal's tail that starts at `first`.
pub(crate) fn check_dense_from(
    run_id: &str,
    first: u64,
    entries: &[JournalEntry],
) -> Result<(), StoreError> {
    for (expected, entry) in (first..).zip(entries) {
        if entry.seq != expected {
            return Err(StoreError::Corrupt(format!(
                "run '{run_id}': journal entry {expected} has seq {}",
                entry.seq
            )));
        }
    }
    Ok(())
}

/// Serializes to JSON, as a store error on failure.
#[cfg(any(feature = "sqlite", feature = "redis"))]
pub(crate) fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(not_serializable)
}

/// Bytes of JSON reserved per journal entry when an append encodes its entries (a journaled
/// event averages about 280).
#[cfg(any(feature = "sqlite", feature = "redis"))]
pub(crate) const JSON_PER_ENTRY: usize = 512;

/// Serializes to JSON into `writer` (an append's buffer), as a store error on failure.
#[cfg(any(feature = "sqlite", feature = "redis"))]
pub(crate) fn write_json<W: std::io::Write, T: Serialize + ?Sized>(
    writer: W,
    value: &T,
) -> Result<(), StoreError> {
    serde_json::to_writer(writer, value).map_err(not_serializable)
}

#[cfg(any(feature = "sqlite", feature = "redis"))]
fn not_serializable(error: serde_json::Error) -> StoreError {
    StoreError::Invalid(format!("not serializable: {error}"))
}

/// Parses stored JSON, as a store error on failure.
#[cfg(any(feature = "sqlite", feature = "redis"))]
pub(crate) fn from_json<T: serde::de::DeserializeOwned>(
    json: &str,
    what: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(json).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}
