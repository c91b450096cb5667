//! Artifacts in SQLite: the `artifacts` table and their chunks in `artifact_chunks`.

use super::{backend, int, uint, SqliteStore};
use crate::store::{now_ms, Artifact, ArtifactMeta, ArtifactStore, NewArtifact, StoreError};
use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

fn artifact_meta(conn: &Connection, id: &str) -> Result<Option<ArtifactMeta>, StoreError> {
    conn.prepare_cached(
        "SELECT run_id, name, media_type, size, chunks, created_ms, updated_ms FROM artifacts \
         WHERE artifact_id = ?1",
    )
    .and_then(|mut s| {
        s.query_row([id], |row| {
            Ok(ArtifactMeta {
                id: id.to_owned(),
                run_id: row.get(0)?,
                name: row.get(1)?,
                media_type: row.get(2)?,
                size: uint(row.get(3)?),
                chunks: uint(row.get(4)?),
                created_ms: uint(row.get(5)?),
                updated_ms: uint(row.get(6)?),
            })
        })
        .optional()
    })
    .map_err(backend)
}

/// Inserts an artifact with its first bytes (in the caller's transaction).
pub(super) fn insert(conn: &Connection, meta: &ArtifactMeta, data: &[u8]) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO artifacts (artifact_id, run_id, name, media_type, size, chunks, \
         created_ms, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        meta.id,
        meta.run_id,
        meta.name,
        meta.media_type,
        int(meta.size),
        int(meta.chunks),
        int(meta.created_ms),
        int(meta.updated_ms)
    ])?;
    if !data.is_empty() {
        conn.prepare_cached(
            "INSERT INTO artifact_chunks (artifact_id, idx, data) VALUES (?1, 0, ?2)",
        )?
        .execute(params![meta.id, data])?;
    }
    Ok(())
}

/// An artifact's bytes (its chunks, concatenated); `size` is a capacity hint.
fn content(conn: &Connection, id: &str, size: u64) -> Result<Vec<u8>, StoreError> {
    let mut select = conn
        .prepare_cached("SELECT data FROM artifact_chunks WHERE artifact_id = ?1 ORDER BY idx")
        .map_err(backend)?;
    let chunks = select.query_map([id], |row| row.get::<_, Vec<u8>>(0)).map_err(backend)?;
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    for chunk in chunks {
        data.extend(chunk.map_err(backend)?);
    }
    Ok(data)
}

/// An artifact's bytes, `None` when it does not exist (for putting journaled outputs back).
pub(super) fn data(conn: &Connection, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
    match artifact_meta(conn, id)? {
        Some(meta) => content(conn, id, meta.size).map(Some),
        None => Ok(None),
    }
}

/// Deletes a run's artifacts (in the caller's transaction).
pub(super) fn delete_of_run(conn: &Connection, run_id: &str) -> rusqlite::Result<()> {
    conn.execute(
        "DELETE FROM artifact_chunks WHERE artifact_id IN \
         (SELECT artifact_id FROM artifacts WHERE run_id = ?1)",
        [run_id],
    )?;
    conn.execute("DELETE FROM artifacts WHERE run_id = ?1", [run_id])?;
    Ok(())
}

#[async_trait]
impl ArtifactStore for SqliteStore {
    async fn create_artifact(&self, artifact: NewArtifact<'_>) -> Result<ArtifactMeta, StoreError> {
        let meta = artifact.meta(now_ms());
        let data = artifact.data.to_vec();
        let stored = meta.clone();
        self.call(move |conn| {
            let tx =
                conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
            insert(&tx, &stored, &data).map_err(backend)?;
            tx.commit().map_err(backend)
        })
        .await?;
        Ok(meta)
    }

    async fn append_chunk(&self, id: &str, chunk: &[u8]) -> Result<ArtifactMeta, StoreError> {
        let (id, chunk) = (id.to_owned(), chunk.to_vec());
        self.call(move |conn| {
            let tx =
                conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
            let mut meta = artifact_meta(&tx, &id)?
                .ok_or_else(|| StoreError::NotFound { what: "artifact", id: id.clone() })?;
            tx.execute(
                "INSERT INTO artifact_chunks (artifact_id, idx, data) VALUES (?1, ?2, ?3)",
                params![id, int(meta.chunks), chunk],
            )
            .map_err(backend)?;
            meta.chunks += 1;
            meta.size += chunk.len() as u64;
            meta.updated_ms = now_ms();
            tx.execute(
                "UPDATE artifacts SET size = ?2, chunks = ?3, updated_ms = ?4 \
                 WHERE artifact_id = ?1",
                params![id, int(meta.size), int(meta.chunks), int(meta.updated_ms)],
            )
            .map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok(meta)
        })
        .await
    }

    async fn get_artifact(&self, id: &str) -> Result<Option<Artifact>, StoreError> {
        let id = id.to_owned();
        self.call(move |conn| {
            let Some(meta) = artifact_meta(conn, &id)? else { return Ok(None) };
            let data = content(conn, &id, meta.size)?;
            Ok(Some(Artifact { meta, data }))
        })
        .await
    }

    async fn list_artifacts(&self, run_id: &str) -> Result<Vec<ArtifactMeta>, StoreError> {
        let run_id = run_id.to_owned();
        self.call(move |conn| {
            let mut select = conn
                .prepare_cached(
                    "SELECT artifact_id FROM artifacts WHERE run_id = ?1 \
                     ORDER BY created_ms, artifact_id",
                )
                .map_err(backend)?;
            let ids = select
                .query_map([&run_id], |row| row.get::<_, String>(0))
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(backend)?;
            let mut metas = Vec::with_capacity(ids.len());
            for id in ids {
                metas.extend(artifact_meta(conn, &id)?);
            }
            Ok(metas)
        })
        .await
    }

    async fn delete_artifact(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.call(move |conn| {
            let tx =
                conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
            tx.execute("DELETE FROM artifact_chunks WHERE artifact_id = ?1", [&id])
                .map_err(backend)?;
            let deleted = tx
                .execute("DELETE FROM artifacts WHERE artifact_id = ?1", [&id])
                .map_err(backend)?;
            tx.commit().map_err(backend)?;
            Ok(deleted > 0)
        })
        .await
    }
}
