//! Sessions in Redis: a hash per session (`session:{context}`: state, turn in progress,
//! counters) and its conversation in a list (`session:{context}:messages`), each change that
//! must check the state one Lua script.

use super::{backend, corrupt, number, RedisStore};
use crate::message::Message;
use crate::store::{now_ms, to_json, SessionInfo, SessionState, SessionStore, StoreError};
use async_trait::async_trait;
use std::collections::HashMap;

fn session_of(context_id: &str, hash: &HashMap<String, String>) -> Result<SessionInfo, StoreError> {
    let state = hash.get("state").map(String::as_str).unwrap_or_default();
    Ok(SessionInfo {
        context_id: context_id.to_owned(),
        state: SessionState::parse(state)
            .ok_or_else(|| corrupt(&format!("session '{context_id}': unknown state '{state}'")))?,
        run_id: hash.get("run_id").cloned(),
        turns: number(hash, "turns"),
        messages: number(hash, "messages"),
        created_ms: number(hash, "created_ms"),
        updated_ms: number(hash, "updated_ms"),
    })
}

#[async_trait]
impl SessionStore for RedisStore {
    async fn open_session(&self, context_id: &str) -> Result<SessionInfo, StoreError> {
        let hash: HashMap<String, String> = self
            .invoke(
                self.scripts
                    .open_session
                    .key(self.key(&["session:", context_id]))
                    .arg(now_ms())
                    .arg(self.ttl_ms()),
            )
            .await?;
        session_of(context_id, &hash)
    }

    async fn get_session(&self, context_id: &str) -> Result<Option<SessionInfo>, StoreError> {
        let hash = self.hash(&self.key(&["session:", context_id])).await?;
        if hash.is_empty() {
            return Ok(None);
        }
        session_of(context_id, &hash).map(Some)
    }

    async fn begin_turn(&self, context_id: &str, run_id: &str) -> Result<Vec<Message>, StoreError> {
        let reply: Vec<String> = self
            .invoke(
                self.scripts
                    .begin_turn
                    .key(self.key(&["session:", context_id]))
                    .arg(run_id)
                    .arg(now_ms())
                    .arg(self.ttl_ms()),
            )
            .await?;
        match reply.first().map(String::as_str) {
            Some("ok") => self.session_messages(context_id).await,
            Some("busy") => Err(StoreError::SessionBusy {
                context_id: context_id.to_owned(),
                run_id: reply.get(1).cloned().unwrap_or_default(),
            }),
            _ => Err(corrupt(&format!("unexpected reply of the begin-turn script: {reply:?}"))),
        }
    }

    async fn end_turn(
        &self,
        context_id: &str,
        run_id: &str,
        new_messages: &[Message],
    ) -> Result<SessionInfo, StoreError> {
        let key = self.key(&["session:", context_id]);
        let mut invocation = self.scripts.end_turn.prepare_invoke();
        invocation
            .key(&key)
            .key(self.key(&["session:", context_id, ":messages"]))
            .arg(run_id)
            .arg(now_ms())
            .arg(self.ttl_ms());
        for message in new_messages {
            invocation.arg(to_json(message)?);
        }
        let reply: Vec<String> = self.invoke(&invocation).await?;
        match reply.first().map(String::as_str) {
            Some("ok") => {
                let hash = self.hash(&key).await?;
                session_of(context_id, &hash)
            }
            Some("missing") => {
                Err(StoreError::NotFound { what: "session", id: context_id.to_owned() })
            }
            Some("not_in_turn") => Err(StoreError::NotInTurn {
                context_id: context_id.to_owned(),
                run_id: run_id.to_owned(),
                state: reply
                    .get(1)
                    .and_then(|s| SessionState::parse(s))
                    .unwrap_or(SessionState::Ready),
            }),
            _ => Err(corrupt(&format!("unexpected reply of the end-turn script: {reply:?}"))),
        }
    }

    async fn session_messages(&self, context_id: &str) -> Result<Vec<Message>, StoreError> {
        let raw: Vec<Vec<u8>> = ::redis::cmd("LRANGE")
            .arg(self.key(&["session:", context_id, ":messages"]))
            .arg(0)
            .arg(-1)
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        raw.iter()
            .map(|json| {
                serde_json::from_slice(json)
                    .map_err(|e| corrupt(&format!("session '{context_id}': a message: {e}")))
            })
            .collect()
    }

    async fn delete_session(&self, context_id: &str) -> Result<bool, StoreError> {
        let deleted: i64 = ::redis::cmd("DEL")
            .arg(self.key(&["session:", context_id]))
            .arg(self.key(&["session:", context_id, ":messages"]))
            .query_async(&mut self.conn())
            .await
            .map_err(backend)?;
        Ok(deleted > 0)
    }
}
