//! A committed batch answered with **one wake-up per waiting runtime**, not one per waiter.
//!
//! The connection thread is not a thread of the callers' runtime: each answer it sends
//! wakes its waiter from outside, and tokio takes tasks woken from outside last while
//! others are ready (one per 31 polls by default, `global_queue_interval`). Under load, an
//! append's answer then waited longer in the runtime's queue than in the store. Instead, a
//! task of the store's on each runtime that awaits it (its *courier*) gets all of a batch's
//! answers for that runtime in one message and wakes the waiters from there: one wake-up from
//! outside per batch, and the waiters queued as any task woken on the runtime. The other
//! jobs' answers (loads, remote-control reads) go the same way, one at a time.

use super::{Done, Op};
use crate::store::StoreError;
use std::sync::{Mutex, PoisonError};
use tokio::sync::mpsc;

/// One answer the courier hands over.
enum Delivery {
    /// A batched op's, once its batch committed.
    Op(Op, Result<Done, StoreError>),
    /// Any other job's (its reply, ready to send).
    Reply(Box<dyn FnOnce() + Send>),
}

impl Delivery {
    fn deliver(self) {
        match self {
            Self::Op(op, result) => op.answer(result),
            Self::Reply(reply) => reply(),
        }
    }
}

/// The answers of one batch (or one job) for the tasks of one runtime.
type Parcel = Vec<Delivery>;

/// Where the answers for one runtime go: its courier task.
#[derive(Clone)]
pub(in crate::store::sqlite) struct Courier(mpsc::UnboundedSender<Parcel>);

impl Courier {
    /// Hands `reply` (sending a job's answer) to the courier, or calls it here when the
    /// courier's runtime is gone.
    pub(in crate::store::sqlite) fn reply(&self, reply: Box<dyn FnOnce() + Send>) {
        self.send(vec![Delivery::Reply(reply)]);
    }

    fn send(&self, parcel: Parcel) {
        if let Err(mpsc::error::SendError(parcel)) = self.0.send(parcel) {
            parcel.into_iter().for_each(Delivery::deliver);
        }
    }
}

/// A store's couriers, one per runtime whose tasks await its answers.
#[derive(Default)]
pub(in crate::store::sqlite) struct Couriers(Mutex<Vec<(tokio::runtime::Id, Courier)>>);

impl Couriers {
    /// The courier of the calling task's runtime (started on first use, and again should
    /// that runtime have shut down and its id been given to another). `None` outside a task
    /// (no runtime, or a future that `block_on` polls, which may be the only thing the runtime
    /// drives): such a caller is answered directly.
    pub(in crate::store::sqlite) fn current(&self) -> Option<Courier> {
        tokio::task::try_id()?;
        let handle = tokio::runtime::Handle::try_current().ok()?;
        let runtime = handle.id();
        let mut couriers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let live = |courier: &Courier| !courier.0.is_closed();
        if let Some((_, courier)) = couriers.iter().find(|(id, c)| *id == runtime && live(c)) {
            return Some(courier.clone());
        }
        couriers.retain(|(_, courier)| live(courier));
        let (sender, mut parcels) = mpsc::unbounded_channel::<Parcel>();
        handle.spawn(async move {
            while let Some(parcel) = parcels.recv().await {
                parcel.into_iter().for_each(Delivery::deliver);
            }
        });
        let courier = Courier(sender);
        couriers.push((runtime, courier.clone()));
        Some(courier)
    }
}

/// Answers each op of a committed batch: those with a courier through it, one parcel per
/// courier; the others (and all of a courier whose runtime is gone) directly.
pub(super) fn deliver(answers: impl Iterator<Item = (Op, Result<Done, StoreError>)>) {
    let mut parcels: Vec<(Courier, Parcel)> = Vec::new();
    for (mut op, result) in answers {
        let Some(courier) = op.take_courier() else {
            op.answer(result);
            continue;
        };
        let delivery = Delivery::Op(op, result);
        match parcels.iter_mut().find(|(to, _)| to.0.same_channel(&courier.0)) {
            Some((_, parcel)) => parcel.push(delivery),
            None => parcels.push((courier, vec![delivery])),
        }
    }
    for (courier, parcel) in parcels {
        courier.send(parcel);
    }
}

#[cfg(test)]
mod tests;
