//! How the driver hands its events to the caller: one flat stream over the driver's future.
//!
//! The driver is a plain `async` function. It puts events in an [`Outbox`] and, where the
//! caller must have taken them before the run goes on (before a model call, before a tool
//! starts, at the end), waits in [`Outbox::send`] until the caller has. [`Driven`] is the
//! stream the caller polls: it hands out what the outbox holds and polls the driver's
//! future only when the outbox is empty. So a journaling caller has journaled every event
//! before the side effect that follows it, as when the driver yielded each event itself,
//! without a generator (and its stack frame) per layer of the driver.

use crate::event::Event;
use futures::Stream;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

/// Events the driver has made and the caller has not taken yet.
#[derive(Default)]
pub(crate) struct Outbox {
    queue: Mutex<VecDeque<Event>>,
}

impl Outbox {
    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<Event>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues events for the caller without waiting (deltas: the caller gets them when the
    /// driver next waits, at the latest).
    pub(crate) fn push(&self, events: impl IntoIterator<Item = Event>) {
        let mut events = events.into_iter().peekable();
        if events.peek().is_some() {
            self.queue().extend(events);
        }
    }

    /// Queues events and waits until the caller has taken every queued event (the events are
    /// queued at the call, so the future borrows only the outbox).
    pub(crate) fn send(
        &self,
        events: impl IntoIterator<Item = Event>,
    ) -> impl Future<Output = ()> + '_ {
        self.push(events);
        self.flushed()
    }

    /// Waits until the caller has taken every queued event. Only [`Driven`] polls the
    /// driver's future, and it polls it only while the outbox is empty, so this needs no
    /// waker: the `Pending` goes straight back to `Driven`, which then hands out the events
    /// and polls the future again once they are all taken.
    pub(crate) fn flushed(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(
            |_| {
                if self.queue().is_empty() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            },
        )
    }

    /// Moves the queued events to the back of `into`.
    fn take_into(&self, into: &mut VecDeque<Event>) {
        let mut queue = self.queue();
        if into.is_empty() {
            std::mem::swap(&mut *queue, into);
        } else {
            into.extend(queue.drain(..));
        }
    }
}

/// The event stream of a driven run: the events its future puts in the outbox, in order;
/// it ends when the future has finished and every event has been taken.
pub(crate) struct Driven<F> {
    future: Option<Pin<Box<F>>>,
    outbox: Arc<Outbox>,
    ready: VecDeque<Event>,
}

impl<F: Future<Output = ()>> Driven<F> {
    /// The stream of `future`, which puts its events in `outbox`.
    pub(crate) fn new(outbox: Arc<Outbox>, future: F) -> Self {
        Self { future: Some(Box::pin(future)), outbox, ready: VecDeque::new() }
    }
}

impl<F: Future<Output = ()>> Stream for Driven<F> {
    type Item = Event;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        let this = self.get_mut();
        if let Some(event) = this.ready.pop_front() {
            return Poll::Ready(Some(event));
        }
        this.outbox.take_into(&mut this.ready);
        if this.ready.is_empty() {
            let Some(future) = this.future.as_mut() else { return Poll::Ready(None) };
            if future.as_mut().poll(cx).is_ready() {
                this.future = None;
            }
            this.outbox.take_into(&mut this.ready);
        }
        match this.ready.pop_front() {
            Some(event) => Poll::Ready(Some(event)),
            None if this.future.is_none() => Poll::Ready(None),
            None => Poll::Pending,
        }
    }

    /// At least the events already made, which the stream hands out without polling the
    /// driver's future again (the journal appends them together, before any side effect
    /// the driver waits to start); at most that many once the future has finished.
    fn size_hint(&self) -> (usize, Option<usize>) {
        let held = self.ready.len() + self.outbox.queue().len();
        (held, self.future.is_none().then_some(held))
    }
}

#[cfg(test)]
mod tests;
