//! [`JournalEvent`]: the events a run journal can hold, as a type.

use super::Event;
use serde::{Deserialize, Deserializer, Serialize};
use std::ops::Deref;

/// A durable [`Event`]: one that a run journal holds and that the [`Run`](crate::run::Run)
/// folds (`run_started`, `model_responded`, `tool_completed`, …) — never a stream-only one (a
/// text, argument or reasoning delta, a notice). It is the type of
/// [`JournalEntry::event`](crate::store::JournalEntry::event), so a journal cannot hold a
/// delta: one is refused when it is made ([`JournalEvent::new`]) and when it is read
/// (deserializing a stream-only event fails). It reads as the event it holds (`Deref`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
#[schemars(transparent)]
pub struct JournalEvent(Event);

/// A stream-only event where a journal event is required (see [`JournalEvent`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("a {} event is stream-only: a run journal holds durable events", .0.kind())]
pub struct StreamOnly(pub Box<Event>);

impl JournalEvent {
    /// The event, if it is durable ([`Event::is_durable`]); otherwise it is given back.
    pub fn new(event: Event) -> Result<Self, StreamOnly> {
        if event.is_durable() {
            Ok(Self(event))
        } else {
            Err(StreamOnly(Box::new(event)))
        }
    }

    /// The event.
    pub fn event(&self) -> &Event {
        &self.0
    }

    /// The event, owned.
    pub fn into_event(self) -> Event {
        self.0
    }

    /// The tool result a tool event carries (`tool_completed`, `tool_failed`,
    /// `tool_timed_out`).
    #[cfg(any(feature = "sqlite", feature = "redis"))]
    pub(crate) fn tool_result(&self) -> Option<&crate::message::ToolResult> {
        match &self.0 {
            Event::ToolCompleted { result, .. }
            | Event::ToolFailed { result, .. }
            | Event::ToolTimedOut { result, .. } => Some(result),
            _ => None,
        }
    }

    /// [`tool_result`](Self::tool_result), to change in place (the event stays durable).
    #[cfg(any(feature = "sqlite", feature = "redis"))]
    pub(crate) fn tool_result_mut(&mut self) -> Option<&mut crate::message::ToolResult> {
        match &mut self.0 {
            Event::ToolCompleted { result, .. }
            | Event::ToolFailed { result, .. }
            | Event::ToolTimedOut { result, .. } => Some(result),
            _ => None,
        }
    }
}

impl Deref for JournalEvent {
    type Target = Event;

    fn deref(&self) -> &Event {
        &self.0
    }
}

impl AsRef<Event> for JournalEvent {
    fn as_ref(&self) -> &Event {
        &self.0
    }
}

impl TryFrom<Event> for JournalEvent {
    type Error = StreamOnly;

    fn try_from(event: Event) -> Result<Self, StreamOnly> {
        Self::new(event)
    }
}

impl From<JournalEvent> for Event {
    fn from(event: JournalEvent) -> Self {
        event.0
    }
}

impl PartialEq<Event> for JournalEvent {
    fn eq(&self, other: &Event) -> bool {
        self.0 == *other
    }
}

impl PartialEq<JournalEvent> for Event {
    fn eq(&self, other: &JournalEvent) -> bool {
        *self == other.0
    }
}

impl<'de> Deserialize<'de> for JournalEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::new(Event::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}
