//! Large tool outputs by reference: a durable store journals a tool output of at least its
//! `large_output_bytes` (default [`DEFAULT_LARGE_OUTPUT_BYTES`]) as a
//! [`ToolResultContent::Stored`] reference to an artifact of the run, written in the same
//! append (SQLite: the same transaction; Redis: just before the append script), and puts the
//! output back when it loads the journal. A run, its stream, a subscriber and a provider see
//! the output itself; only the stored journal is smaller.
//!
//! What it saves: the journal's entries stay small (a run's journal is read whole on every
//! resume and followed by every subscriber), the output is stored as its bytes instead of a
//! JSON string (no escaping when written, no parsing when read), and a tool that returns
//! megabytes does not make one journal row of them.

use super::{ArtifactMeta, JournalEntry, NewArtifact, StoreError};
use crate::message::{StoredOutput, ToolResultContent};
use std::io::Write;

/// Tool outputs of at least this many bytes are journaled by reference unless a store is
/// configured otherwise (`SqliteOptions::large_output_bytes`, `RedisOptions::large_output_bytes`).
pub const DEFAULT_LARGE_OUTPUT_BYTES: usize = 32 * 1024;

/// The media type of a text output kept as an artifact.
pub(crate) const TEXT_MEDIA_TYPE: &str = "text/plain; charset=utf-8";
/// The media type of a JSON output kept as an artifact.
pub(crate) const JSON_MEDIA_TYPE: &str = "application/json";

/// An output taken out of the journal: the artifact to write with the append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutputArtifact {
    pub(crate) meta: ArtifactMeta,
    pub(crate) data: Vec<u8>,
}

/// `entries` with each tool output of at least `min_bytes` replaced by a reference, and the
/// artifacts that keep them; `None` when there is none (or `min_bytes` is `None`), so the
/// common append copies nothing.
pub(crate) fn by_reference(
    run_id: &str,
    entries: &[JournalEntry],
    min_bytes: Option<usize>,
) -> Option<(Vec<JournalEntry>, Vec<OutputArtifact>)> {
    let min = min_bytes?;
    let large = |entry: &JournalEntry| {
        entry.event.tool_result().is_some_and(|r| size_of(&r.content) >= min)
    };
    if !entries.iter().any(large) {
        return None;
    }
    let mut artifacts = Vec::new();
    let entries = entries
        .iter()
        .map(|entry| {
            let mut entry = entry.clone();
            let at_ms = entry.at_ms;
            if let Some(result) = entry.event.tool_result_mut() {
                if size_of(&result.content) >= min {
                    let (data, json) = match std::mem::replace(
                        &mut result.content,
                        ToolResultContent::Text(String::new()),
                    ) {
                        ToolResultContent::Text(text) => (text.into_bytes(), false),
                        ToolResultContent::Json(value) => {
                            (crate::canonical::to_string(&value).into_bytes(), true)
                        }
                        stored @ ToolResultContent::Stored(_) => {
                            result.content = stored;
                            return entry;
                        }
                    };
                    let meta = NewArtifact {
                        run_id,
                        name: &format!("tool-output-{}", result.call_id),
                        media_type: if json { JSON_MEDIA_TYPE } else { TEXT_MEDIA_TYPE },
                        data: &data,
                    }
                    .meta(at_ms);
                    result.content = ToolResultContent::Stored(Box::new(StoredOutput {
                        artifact: meta.id.clone(),
                        bytes: meta.size,
                        json,
                    }));
                    artifacts.push(OutputArtifact { meta, data });
                }
            }
            entry
        })
        .collect();
    Some((entries, artifacts))
}

/// The size of an output as it would be kept: its text, or its JSON serialized compactly
/// (counted without building the string); a reference counts as nothing.
fn size_of(content: &ToolResultContent) -> usize {
    match content {
        ToolResultContent::Text(text) => text.len(),
        ToolResultContent::Json(value) => {
            let mut counter = Counter(0);
            match serde_json::to_writer(&mut counter, &crate::canonical::Sorted(value)) {
                Ok(()) => counter.0,
                Err(_) => 0,
            }
        }
        ToolResultContent::Stored(_) => 0,
    }
}

/// Counts the bytes written to it.
struct Counter(usize);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The artifacts the entries' outputs are kept in, in journal order.
#[cfg(any(test, feature = "redis"))]
pub(crate) fn referenced(entries: &[JournalEntry]) -> Vec<String> {
    entries.iter().filter_map(|entry| stored_of(entry).map(|s| s.artifact.clone())).collect()
}

fn stored_of(entry: &JournalEntry) -> Option<&StoredOutput> {
    match &entry.event.tool_result()?.content {
        ToolResultContent::Stored(stored) => Some(&**stored),
        _ => None,
    }
}

/// Puts the outputs kept in artifacts back into `entries`; `data` reads an artifact's bytes
/// (`None`: it does not exist). A missing artifact, or one whose size or content does not
/// match its reference, is [`StoreError::Corrupt`].
pub(crate) fn restore(
    run_id: &str,
    entries: &mut [JournalEntry],
    mut data: impl FnMut(&str) -> Result<Option<Vec<u8>>, StoreError>,
) -> Result<(), StoreError> {
    for entry in entries.iter_mut() {
        let Some(stored) = stored_of(entry).cloned() else { continue };
        let seq = entry.seq;
        let corrupt = |why: String| {
            StoreError::Corrupt(format!(
                "run '{run_id}', entry {seq}: the tool output kept in artifact '{}' {why}",
                stored.artifact
            ))
        };
        let bytes = data(&stored.artifact)?.ok_or_else(|| corrupt("is missing".into()))?;
        if bytes.len() as u64 != stored.bytes {
            return Err(corrupt(format!(
                "has {} bytes, but the journal says {}",
                bytes.len(),
                stored.bytes
            )));
        }
        let content = if stored.json {
            ToolResultContent::Json(
                serde_json::from_slice(&bytes)
                    .map_err(|e| corrupt(format!("is not valid JSON: {e}")))?,
            )
        } else {
            ToolResultContent::Text(
                String::from_utf8(bytes).map_err(|e| corrupt(format!("is not UTF-8: {e}")))?,
            )
        };
        if let Some(result) = entry.event.tool_result_mut() {
            result.content = content;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
