//! Keeping a SQLite store in order: removing runs with everything they own, in one
//! transaction per call ([`remove`]); the registry's raw rows with their journals' lengths,
//! journals without a row, and a row rebuilt from its journal (what `RunService::check`
//! compares and repairs).

use super::registry::{summary_of, write_texts, SUMMARY_COLUMNS, SUMMARY_WIDTH};
use super::{artifacts, backend, int, uint};
use crate::store::{
    cost_of, decode_parts, from_json, now_ms, to_json, JournalEntry, OrphanJournal, RegistryRow,
    Removal, RemovalRule, RunState, StoreError, SummaryUpdate,
};
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

/// Removes each of `run_ids` (and its descendants) that `rule` allows and no live lease
/// keeps, all in one `IMMEDIATE` transaction.
pub(super) fn remove(
    conn: &mut Connection,
    run_ids: &[String],
    rule: &RemovalRule,
) -> Result<Vec<Removal>, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
    let now = now_ms();
    let mut removals = Vec::with_capacity(run_ids.len());
    for run_id in run_ids {
        removals.push(remove_one(&tx, run_id, rule, now)?);
    }
    tx.commit().map_err(backend)?;
    Ok(removals)
}

fn remove_one(
    tx: &Transaction<'_>,
    run_id: &str,
    rule: &RemovalRule,
    now: u64,
) -> Result<Removal, StoreError> {
    let row: Option<(String, i64)> = tx
        .prepare_cached("SELECT state, updated_ms FROM runs WHERE run_id = ?1")
        .and_then(|mut s| s.query_row([run_id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(backend)?;
    let Some((state, updated_ms)) = row else { return Ok(Removal::NotFound) };
    let state = RunState::parse(&state)
        .ok_or_else(|| StoreError::Corrupt(format!("run '{run_id}': unknown state '{state}'")))?;
    if !rule.allows(state, uint(updated_ms)) {
        return Ok(Removal::NotMatching);
    }
    let tree = tree(tx, run_id)?;
    for id in &tree {
        let lease: Option<(String, i64)> = tx
            .prepare_cached("SELECT owner, expires_at_ms FROM leases WHERE run_id = ?1")
            .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(backend)?;
        if let Some((owner, expires)) = lease.filter(|(o, e)| !o.is_empty() && uint(*e) > now) {
            return Ok(Removal::LeaseLive {
                run_id: id.clone(),
                owner,
                expires_in_ms: uint(expires).saturating_sub(now),
            });
        }
    }
    for id in &tree {
        delete_owned(tx, id, now)?;
    }
    Ok(Removal::Removed { run_ids: tree })
}

/// `run_id` and every run whose parent leads to it, the run first.
fn tree(conn: &Connection, run_id: &str) -> Result<Vec<String>, StoreError> {
    let mut tree = vec![run_id.to_owned()];
    let mut next = 0;
    let mut select = conn
        .prepare_cached("SELECT run_id FROM runs WHERE parent_run_id = ?1 ORDER BY run_id")
        .map_err(backend)?;
    while let Some(parent) = tree.get(next).cloned() {
        let children = select
            .query_map([&parent], |row| row.get::<_, String>(0))
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(backend)?;
        tree.extend(children.into_iter().filter(|c| c != run_id));
        next += 1;
    }
    Ok(tree)
}

/// Deletes what one run owns (inside the caller's transaction).
fn delete_owned(conn: &Connection, run_id: &str, now: u64) -> Result<(), StoreError> {
    let run =
        |sql: &str| conn.prepare_cached(sql).and_then(|mut s| s.execute([run_id])).map_err(backend);
    run("DELETE FROM journal WHERE run_key = (SELECT run_key FROM runs WHERE run_id = ?1)")?;
    run("DELETE FROM run_controls WHERE run_id = ?1")?;
    run("DELETE FROM leases WHERE run_id = ?1")?;
    artifacts::delete_of_run(conn, run_id).map_err(backend)?;
    // The run's session (found by the row's context id, the sessions' key) forgets it.
    conn.prepare_cached(
        "UPDATE sessions SET run_id = NULL, updated_ms = ?2, \
         state = CASE state WHEN 'busy' THEN 'ready' ELSE state END \
         WHERE context_id = (SELECT context_id FROM runs WHERE run_id = ?1) AND run_id = ?1",
    )
    .and_then(|mut s| s.execute(params![run_id, int(now)]))
    .map_err(backend)?;
    run("DELETE FROM runs WHERE run_id = ?1")?;
    Ok(())
}

/// Up to `limit` rows after `after`, by run id, with their journals' lengths.
pub(super) fn rows(
    conn: &Connection,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<RegistryRow>, StoreError> {
    let mut select = conn
        .prepare_cached(&format!(
            "SELECT {SUMMARY_COLUMNS}, \
             (SELECT COUNT(*) FROM journal j WHERE j.run_key = r.run_key) \
             FROM runs r LEFT JOIN leases l ON l.run_id = r.run_id \
             WHERE r.run_id > ?1 ORDER BY r.run_id LIMIT ?2",
        ))
        .map_err(backend)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = select
        .query_map(params![after.unwrap_or(""), limit], |row| {
            Ok((summary_of(row)?, row.get::<_, i64>(SUMMARY_WIDTH)?))
        })
        .map_err(backend)?;
    let mut out = Vec::new();
    for row in rows {
        let ((mut summary, state), length) = row.map_err(backend)?;
        summary.state = RunState::parse(&state).ok_or_else(|| {
            StoreError::Corrupt(format!("run '{}': unknown state '{state}'", summary.run_id))
        })?;
        out.push(RegistryRow::new(summary, uint(length)));
    }
    Ok(out)
}

/// The journals whose run key has no row, with the run id their `run_started` names.
pub(super) fn orphans(conn: &Connection) -> Result<Vec<OrphanJournal>, StoreError> {
    let mut select = conn
        .prepare(
            "SELECT j.run_key, COUNT(*), \
             (SELECT json_extract(s.event, '$.run_id') FROM journal s WHERE s.run_key = j.run_key \
              AND s.seq = 0 AND json_extract(s.event, '$.type') = 'run_started') \
             FROM journal j WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_key = j.run_key) \
             GROUP BY j.run_key ORDER BY j.run_key",
        )
        .map_err(backend)?;
    let rows = select
        .query_map([], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?, row.get::<_, Option<String>>(2)?))
        })
        .map_err(backend)?;
    let mut out = Vec::new();
    for row in rows {
        let (key, count, run_id) = row.map_err(backend)?;
        out.push(OrphanJournal::new(run_id, key.to_string(), uint(count)));
    }
    Ok(out)
}

/// The entries stored under a run key, in order (their events parsed, outputs by reference
/// left as references: what a registry row is computed from).
fn entries_of(conn: &Connection, key: i64, label: &str) -> Result<Vec<JournalEntry>, StoreError> {
    let mut select = conn
        .prepare_cached(
            "SELECT seq, at_ms, schema_version, event FROM journal WHERE run_key = ?1 ORDER BY seq",
        )
        .map_err(backend)?;
    let rows = select
        .query_map([key], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, i64>(1)?, row.get::<_, u32>(2)?, row.get(3)?))
        })
        .map_err(backend)?;
    let mut entries = Vec::new();
    for row in rows {
        let (seq, at_ms, version, event): (i64, i64, u32, String) = row.map_err(backend)?;
        let event = from_json(&event, &format!("run '{label}', entry {seq}"))?;
        entries.push(decode_parts(label, uint(seq), uint(at_ms), version, event)?);
    }
    Ok(entries)
}

/// Writes the row of `key` from its journal; `false` when it has none.
fn write_row(conn: &Connection, key: i64, run_id: &str) -> Result<bool, StoreError> {
    let entries = entries_of(conn, key, run_id)?;
    let (Some(update), Some(last)) = (SummaryUpdate::of(&entries), entries.last()) else {
        return Ok(false);
    };
    let started = update.started.clone().unwrap_or_default();
    let price = started.price.as_ref().map(to_json).transpose()?;
    let usage = update.usage;
    conn.execute(
        "UPDATE runs SET agent = ?2, context_id = ?3, parent_run_id = ?4, price = ?5, \
         state = ?6, created_ms = ?7, updated_ms = ?8, next_seq = ?9, input_tokens = ?10, \
         output_tokens = ?11, cached_input_tokens = ?12, reasoning_tokens = ?13, \
         cost_usd = ?14 WHERE run_key = ?1",
        params![
            key,
            started.agent,
            started.context_id,
            started.parent_run_id,
            price,
            update.state.as_str(),
            int(update.first_ms),
            int(update.last_ms),
            int(last.seq + 1),
            int(usage.input),
            int(usage.output),
            int(usage.cached_input),
            int(usage.reasoning),
            cost_of(started.price.as_ref(), &usage),
        ],
    )
    .map_err(backend)?;
    write_texts(conn, key, &update)?;
    Ok(true)
}

/// The row of `run_id` again from its journal, in one transaction.
pub(super) fn rebuild(conn: &mut Connection, run_id: &str) -> Result<bool, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
    let key: Option<i64> = tx
        .query_row("SELECT run_key FROM runs WHERE run_id = ?1", [run_id], |r| r.get(0))
        .optional()
        .map_err(backend)?;
    let rebuilt = match key {
        Some(key) => write_row(&tx, key, run_id)?,
        None => false,
    };
    tx.commit().map_err(backend)?;
    Ok(rebuilt)
}

/// Gives the orphan journal of run key `locator` a row (the run id its `run_started` names,
/// when no other row has it), or deletes its entries.
pub(super) fn adopt(
    conn: &mut Connection,
    orphan: &OrphanJournal,
) -> Result<Option<String>, StoreError> {
    let key: i64 = orphan.locator.parse().map_err(|_| {
        StoreError::Invalid(format!("'{}' is not a SQLite journal's run key", orphan.locator))
    })?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
    let has_row = |sql: &str, arg: &dyn rusqlite::ToSql| -> Result<bool, StoreError> {
        tx.query_row(sql, [arg], |_| Ok(())).optional().map(|r| r.is_some()).map_err(backend)
    };
    if has_row("SELECT 1 FROM runs WHERE run_key = ?1", &key)? {
        return Ok(None); // Not an orphan (any more).
    }
    let free = match &orphan.run_id {
        Some(id) => !has_row("SELECT 1 FROM runs WHERE run_id = ?1", id)?,
        None => false,
    };
    let adopted = match (&orphan.run_id, free) {
        (Some(run_id), true) => {
            tx.execute(
                "INSERT INTO runs (run_key, run_id, state, created_ms, updated_ms, next_seq) \
                 VALUES (?1, ?2, 'running', 0, 0, 0)",
                params![key, run_id],
            )
            .map_err(backend)?;
            write_row(&tx, key, run_id)?;
            Some(run_id.clone())
        }
        _ => {
            tx.execute("DELETE FROM journal WHERE run_key = ?1", [key]).map_err(backend)?;
            None
        }
    };
    tx.commit().map_err(backend)?;
    Ok(adopted)
}
