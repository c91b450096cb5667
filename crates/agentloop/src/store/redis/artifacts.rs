//! Artifacts in Redis: a hash per artifact, its chunks in a list, a sorted set per run.

use super::{backend, number, RedisStore};
use crate::store::{now_ms, Artifact, ArtifactMeta, ArtifactStore, NewArtifact, StoreError};
use async_trait::async_trait;
use std::collections::HashMap;

/// Appends a chunk and returns the artifact's hash (empty when it does not exist).
pub(super) const APPEND_CHUNK: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'size', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'chunks', 1)
redis.call('HSET', KEYS[1], 'updated_ms', ARGV[3])
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return redis.call('HGETALL', KEYS[1])
";

fn meta_of(id: &str, hash: &HashMap<String, String>) -> ArtifactMeta {
    let text = |field: &str| hash.get(field).cloned().unwrap_or_default();
    ArtifactMeta {
        id: id.to_owned(),
        run_id: text("run_id"),
        name: text("name"),
        media_type: text("media_type"),
        size: number(hash, "size"),
        chunks: number(hash, "chunks"),
        created_ms: number(hash, "created_ms"),
        updated_ms: number(hash, "updated_ms"),
    }
}

impl RedisStore {
    fn artifact_keys(&self, id: &str) -> (String, String) {
        (self.key(&["artifact:", id]), self.key(&["artifact:", id, ":chunks"]))
    }

    /// Adds the commands that create the artifact `meta` with its first bytes to `pipe`.
    pub(super) fn create_commands(
        &self,
        pipe: &mut ::redis::Pipeline,
        meta: &ArtifactMeta,
        data: &[u8],
    ) {
        let (key, chunks) = self.artifact_keys(&meta.id);
        let by_run = self.key(&["run:", &meta.run_id, ":artifacts"]);
        pipe.cmd("HSET")
            .arg(&key)
            .arg("run_id")
            .arg(&meta.run_id)
            .arg("name")
            .arg(&meta.name)
            .arg("media_type")
            .arg(&meta.media_type)
            .arg("size")
            .arg(meta.size)
            .arg("chunks")
            .arg(meta.chunks)
            .arg("created_ms")
            .arg(meta.created_ms)
            .arg("updated_ms")
            .arg(meta.updated_ms)
            .ignore();
        if !data.is_empty() {
            pipe.cmd("RPUSH").arg(&chunks).arg(data).ignore();
        }
        pipe.cmd("ZADD").arg(&by_run).arg(meta.created_ms).arg(&meta.id).ignore();
        if let Some(ttl) = self.options.ttl {
            let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
            for k in [&key, &chunks, &by_run] {
                pipe.cmd("PEXPIRE").arg(k).arg(ms).ignore();
            }
        }
    }

    /// The bytes of each of `ids` that exists (for putting journaled outputs back), read with
    /// one pipeline.
    pub(super) async fn artifact_data(
        &self,
        ids: &[String],
    ) -> Result<HashMap<String, Vec<u8>>, StoreError> {
        let mut pipe = ::redis::pipe();
        for id in ids {
            let (key, chunks) = self.artifact_keys(id);
            pipe.cmd("EXISTS").arg(key).cmd("LRANGE").arg(chunks).arg(0).arg(-1);
        }
        let replies: Vec<(i64, Vec<Vec<u8>>)> = if ids.is_empty() {
            Vec::new()
        } else {
            pipe.query_async(&mut self.conn()).await.map_err(backend)?
        };
        Ok(ids
            .iter()
            .zip(replies)
            .filter(|(_, (exists, _))| *exists > 0)
            .map(|(id, (_, parts))| (id.clone(), parts.concat()))
            .collect())
    }

    /// Deletes a run's artifacts.
    pub(super) async fn delete_artifacts_of(&self, run_id: &str) -> Result<(), StoreError> {
        let by_run = self.key(&["run:", run_id, ":artifacts"]);
        let ids: Vec<String> = ::redis::cmd("ZRANGE")
            .arg(&by_run)
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        let mut pipe = ::redis::pipe();
        pipe.atomic();
        for id in &ids {
            let (key, chunks) = self.artifact_keys(id);
            pipe.cmd("DEL").arg(key).arg(chunks).ignore();
        }
        pipe.cmd("DEL").arg(by_run).ignore();
        let () = pipe.query_async(&mut self.conn()).await.map_err(backend)?;
        Ok(())
    }
}

#[async_trait]
impl ArtifactStore for RedisStore {
    async fn create_artifact(&self, artifact: NewArtifact<'_>) -> Result<ArtifactMeta, StoreError> {
        let meta = artifact.meta(now_ms());
        let mut pipe = ::redis::pipe();
        pipe.atomic();
        self.create_commands(&mut pipe, &meta, artifact.data);
        let () = pipe.query_async(&mut self.conn()).await.map_err(backend)?;
        Ok(meta)
    }

    async fn append_chunk(&self, id: &str, chunk: &[u8]) -> Result<ArtifactMeta, StoreError> {
        let (key, chunks) = self.artifact_keys(id);
        let hash: HashMap<String, String> = self
            .invoke(
                self.scripts
                    .append_chunk
                    .key(&key)
                    .key(&chunks)
                    .arg(chunk)
                    .arg(chunk.len())
                    .arg(now_ms())
                    .arg(self.ttl_ms()),
            )
            .await?;
        if hash.is_empty() {
            return Err(StoreError::NotFound { what: "artifact", id: id.to_owned() });
        }
        Ok(meta_of(id, &hash))
    }

    async fn get_artifact(&self, id: &str) -> Result<Option<Artifact>, StoreError> {
        let (key, chunks) = self.artifact_keys(id);
        let (hash, parts): (HashMap<String, String>, Vec<Vec<u8>>) = ::redis::pipe()
            .cmd("HGETALL")
            .arg(&key)
            .cmd("LRANGE")
            .arg(&chunks)
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        if hash.is_empty() {
            return Ok(None);
        }
        Ok(Some(Artifact { meta: meta_of(id, &hash), data: parts.concat() }))
    }

    async fn list_artifacts(&self, run_id: &str) -> Result<Vec<ArtifactMeta>, StoreError> {
        let ids: Vec<String> = ::redis::cmd("ZRANGE")
            .arg(self.key(&["run:", run_id, ":artifacts"]))
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = ::redis::pipe();
        for id in &ids {
            pipe.cmd("HGETALL").arg(self.artifact_keys(id).0);
        }
        let hashes: Vec<HashMap<String, String>> =
            pipe.query_async(&mut self.conn()).await.map_err(backend)?;
        Ok(ids
            .iter()
            .zip(hashes)
            .filter(|(_, hash)| !hash.is_empty())
            .map(|(id, hash)| meta_of(id, &hash))
            .collect())
    }

    async fn delete_artifact(&self, id: &str) -> Result<bool, StoreError> {
        let (key, chunks) = self.artifact_keys(id);
        let run_id: Option<String> = ::redis::cmd("HGET")
            .arg(&key)
            .arg("run_id")
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        let Some(run_id) = run_id else { return Ok(false) };
        let (deleted, _): (i64, i64) = ::redis::pipe()
            .atomic()
            .cmd("DEL")
            .arg(&key)
            .arg(&chunks)
            .cmd("ZREM")
            .arg(self.key(&["run:", &run_id, ":artifacts"]))
            .arg(id)
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        Ok(deleted > 0)
    }
}
