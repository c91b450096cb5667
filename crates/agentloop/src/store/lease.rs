//! Leases: who executes a run. Executing a run (starting it, resuming it, continuing it after
//! decisions) takes the run's lease with an atomic claim ([`RunStore::claim`]); the executor
//! renews it while it works ([`RunStore::renew`], a heartbeat) and releases it when the run
//! stops. Every journal append of the executor is fenced ([`RunStore::append_fenced`]): it is
//! refused with [`StoreError::LeaseLost`] once a newer claim exists, so a stale executor (one
//! that stalled past its lease, whose run another process took over) cannot write, and stops.
//!
//! A claim succeeds when the run has no live lease: none yet, released, or expired (its
//! holder stopped renewing it — it crashed). It fails with [`StoreError::LeaseHeld`]
//! otherwise. Each claim gets the next epoch of the run (epochs only grow, also across
//! releases), and the epoch is the fencing token.
//!
//! [`RunStore::claim`]: super::RunStore::claim
//! [`RunStore::renew`]: super::RunStore::renew
//! [`RunStore::append_fenced`]: super::RunStore::append_fenced
//! [`StoreError::LeaseLost`]: super::StoreError::LeaseLost
//! [`StoreError::LeaseHeld`]: super::StoreError::LeaseHeld

use super::StoreError;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long a lease lasts without renewal, by default. An executor renews it every third of
/// that, so a run whose process died can be taken over after at most this long.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);

/// A claim on executing a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The run.
    pub run_id: String,
    /// Who holds it (unique per claim: see [`new_owner_id`]).
    pub owner: String,
    /// The fencing token: 1 for the run's first claim, then one more per claim.
    pub epoch: u64,
    /// When it expires unless renewed (milliseconds since the Unix epoch, the store's clock).
    pub expires_at_ms: u64,
}

/// The lease record a store keeps per run (`owner` empty once released).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct LeaseRecord {
    pub(crate) owner: String,
    pub(crate) epoch: u64,
    pub(crate) expires_at_ms: u64,
}

impl LeaseRecord {
    /// Whether someone holds it at `now_ms`.
    pub(crate) fn is_live(&self, now_ms: u64) -> bool {
        !self.owner.is_empty() && self.expires_at_ms > now_ms
    }

    /// The record after a claim by `owner` at `now_ms`, or the error that refuses it. The
    /// decision every store makes atomically (the SQL and Lua versions follow it).
    pub(crate) fn claim(
        &self,
        run_id: &str,
        owner: &str,
        now_ms: u64,
        ttl: Duration,
    ) -> Result<Lease, StoreError> {
        if self.is_live(now_ms) {
            return Err(StoreError::LeaseHeld {
                run_id: run_id.to_owned(),
                owner: self.owner.clone(),
                expires_in_ms: self.expires_at_ms.saturating_sub(now_ms),
            });
        }
        Ok(Lease {
            run_id: run_id.to_owned(),
            owner: owner.to_owned(),
            epoch: self.epoch + 1,
            expires_at_ms: now_ms.saturating_add(ttl_ms(ttl)),
        })
    }

    /// Whether `lease` is this record's current lease (the same owner and epoch; expired or
    /// not: only a newer claim fences it).
    pub(crate) fn holds(&self, lease: &Lease) -> bool {
        self.owner == lease.owner && self.epoch == lease.epoch
    }

    /// The record of a lease.
    pub(crate) fn of(lease: &Lease) -> Self {
        Self { owner: lease.owner.clone(), epoch: lease.epoch, expires_at_ms: lease.expires_at_ms }
    }
}

/// The error of an operation by `lease` when the store's record says otherwise.
pub(crate) fn lost(lease: &Lease, record: &LeaseRecord) -> StoreError {
    StoreError::LeaseLost {
        run_id: lease.run_id.clone(),
        epoch: lease.epoch,
        current_owner: record.owner.clone(),
        current_epoch: record.epoch,
    }
}

/// A TTL in milliseconds (at least 1).
pub(crate) fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A new owner id: the process id and a random part, so that two claims — in two processes,
/// or two tasks of one — never share one.
pub fn new_owner_id() -> String {
    format!("pid{}-{}", std::process::id(), uuid::Uuid::now_v7().simple())
}

#[cfg(test)]
mod tests;
