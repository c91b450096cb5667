//! The `leases` table, one row per run that was ever claimed (see [`crate::store::lease`]),
//! and `run_controls`, what was requested of a run's executor from outside
//! ([`RemoteControl`]). Every write runs in an `IMMEDIATE` transaction, so claims by several
//! processes on one file are atomic; claims and releases run in the writer's batch
//! transaction (`writer.rs`), the others in their own.

use super::{backend, int, uint};
use crate::store::lease::{lost, ttl_ms, LeaseRecord};
use crate::store::{from_json, now_ms, to_json, ControlRequest, Lease, RemoteControl, StoreError};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::time::Duration;

/// The run's lease record (the default when it was never claimed).
fn read(conn: &Connection, run_id: &str) -> Result<LeaseRecord, StoreError> {
    conn.prepare_cached("SELECT owner, epoch, expires_at_ms FROM leases WHERE run_id = ?1")
        .and_then(|mut s| {
            s.query_row([run_id], |row| {
                Ok(LeaseRecord {
                    owner: row.get(0)?,
                    epoch: uint(row.get(1)?),
                    expires_at_ms: uint(row.get(2)?),
                })
            })
            .optional()
        })
        .map(Option::unwrap_or_default)
        .map_err(backend)
}

pub(super) fn write(
    conn: &Connection,
    run_id: &str,
    record: &LeaseRecord,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO leases (run_id, owner, epoch, expires_at_ms) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (run_id) DO UPDATE SET owner = ?2, epoch = ?3, expires_at_ms = ?4",
    )
    .and_then(|mut s| {
        s.execute(params![run_id, record.owner, int(record.epoch), int(record.expires_at_ms)])
    })
    .map_err(backend)?;
    Ok(())
}

/// Fails with [`StoreError::LeaseLost`] unless `lease` is the run's lease (inside the caller's
/// transaction).
pub(super) fn check(conn: &Connection, lease: &Lease) -> Result<(), StoreError> {
    let record = read(conn, &lease.run_id)?;
    if record.holds(lease) {
        Ok(())
    } else {
        Err(lost(lease, &record))
    }
}

/// The lease `owner` gets by claiming `run_id` now, if the run's lease lets it (inside the
/// caller's transaction; nothing written: see [`record`]).
pub(super) fn claimed(
    conn: &Connection,
    run_id: &str,
    owner: &str,
    ttl: Duration,
) -> Result<Lease, StoreError> {
    read(conn, run_id)?.claim(run_id, owner, now_ms(), ttl)
}

/// Writes `lease` as its run's lease.
pub(super) fn record(conn: &Connection, lease: &Lease) -> Result<(), StoreError> {
    write(conn, &lease.run_id, &LeaseRecord::of(lease))
}

pub(super) fn renew(
    conn: &mut Connection,
    lease: &Lease,
    ttl: Duration,
) -> Result<Lease, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
    check(&tx, lease)?;
    let renewed = Lease { expires_at_ms: now_ms().saturating_add(ttl_ms(ttl)), ..lease.clone() };
    write(&tx, &lease.run_id, &LeaseRecord::of(&renewed))?;
    tx.commit().map_err(backend)?;
    Ok(renewed)
}

/// The run's lease record once `lease` is released (`None`: `lease` is no longer the run's
/// lease, so there is nothing to release); nothing written: see [`write`].
pub(super) fn released(
    conn: &Connection,
    lease: &Lease,
) -> Result<Option<LeaseRecord>, StoreError> {
    let record = read(conn, &lease.run_id)?;
    Ok(record.holds(lease).then(|| LeaseRecord {
        owner: String::new(),
        epoch: record.epoch,
        expires_at_ms: 0,
    }))
}

pub(super) fn remote_control(conn: &Connection, run_id: &str) -> Result<RemoteControl, StoreError> {
    let row = conn
        .prepare_cached(
            "SELECT cancel, pause, decisions, input, decided_by FROM run_controls \
             WHERE run_id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([run_id], |row| {
                Ok((
                    row.get::<_, Option<String>>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, Option<String>>(2)?,
                    row.get::<_, Option<String>>(3)?,
                    row.get::<_, Option<String>>(4)?,
                ))
            })
            .optional()
        })
        .map_err(backend)?;
    let Some((cancel, pause, decisions, input, decided_by)) = row else {
        return Ok(RemoteControl::default());
    };
    Ok(RemoteControl {
        cancel,
        pause,
        decisions: decisions
            .as_deref()
            .map(|d| from_json(d, "run_controls.decisions"))
            .transpose()?
            .unwrap_or_default(),
        input: input.as_deref().map(|i| from_json(i, "run_controls.input")).transpose()?,
        decided_by: decided_by
            .as_deref()
            .map(|d| from_json(d, "run_controls.decided_by"))
            .transpose()?
            .unwrap_or_default(),
    })
}

pub(super) fn request_control(
    conn: &mut Connection,
    run_id: &str,
    request: ControlRequest,
) -> Result<RemoteControl, StoreError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(backend)?;
    let control = remote_control(&tx, run_id)?.apply(request);
    let decisions =
        if control.decisions.is_empty() { None } else { Some(to_json(&control.decisions)?) };
    let input = control.input.as_ref().map(to_json).transpose()?;
    let by = &control.decided_by;
    let decided_by = if by.is_empty() { None } else { Some(to_json(by)?) };
    tx.prepare_cached(
        "INSERT INTO run_controls (run_id, cancel, pause, decisions, input, decided_by) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (run_id) \
         DO UPDATE SET cancel = ?2, pause = ?3, decisions = ?4, input = ?5, decided_by = ?6",
    )
    .and_then(|mut s| {
        s.execute(params![run_id, control.cancel, control.pause, decisions, input, decided_by])
    })
    .map_err(backend)?;
    tx.commit().map_err(backend)?;
    Ok(control)
}
