//! [`ToolChoicePolicy`]: a tool choice per step of a turn, e.g. `required` on the first model
//! call after the user spoke and `auto` once a tool has answered. Small models need this: they
//! rarely decide to call a tool by themselves.

use super::{
    ChunkStream, ModelRequest, ModelResponse, Provider, ProviderError, RetryPolicy, ToolChoice,
};
use crate::message::Role;
use futures::future::BoxFuture;

/// Which tool choice each model call of a turn gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepToolChoice {
    /// For the first call after the last user message (no tool result since).
    pub first: ToolChoice,
    /// For the calls after a tool result.
    pub then: ToolChoice,
    /// For the first call when the user's last message contains a digit, instead of `first`
    /// (small models answer a question with numbers in it from memory, and wrongly; e.g.
    /// `Named("calculator")`). Applies only when the request offers that tool.
    pub first_with_digits: Option<ToolChoice>,
}

impl StepToolChoice {
    /// `required` on the first step, `auto` after.
    pub fn required_first() -> Self {
        Self { first: ToolChoice::Required, then: ToolChoice::Auto, first_with_digits: None }
    }

    /// The choice for this request. Requests that offer no tools or set `none` (the
    /// wind-down answer, compaction) keep theirs.
    pub fn choose(&self, request: &ModelRequest) -> ToolChoice {
        if request.tools.is_empty() || request.tool_choice == ToolChoice::None {
            return request.tool_choice.clone();
        }
        let answered = request
            .messages
            .iter()
            .rev()
            .take_while(|message| message.role != Role::User)
            .any(|message| message.role == Role::Tool);
        if answered {
            return self.then.clone();
        }
        if let Some(choice) = &self.first_with_digits {
            let offered = match choice {
                ToolChoice::Named(name) => request.tools.iter().any(|tool| &tool.name == name),
                _ => true,
            };
            let digits = request
                .messages
                .iter()
                .rev()
                .find(|message| message.role == Role::User)
                .is_some_and(|message| message.text().chars().any(|c| c.is_ascii_digit()));
            if offered && digits {
                return choice.clone();
            }
        }
        self.first.clone()
    }
}

/// A provider wrapper that sets each request's tool choice by a [`StepToolChoice`]. It needs
/// no state: the step is read from the request's history, so it holds across resumed runs.
/// Both [`stream`](Provider::stream) and [`complete`](Provider::complete) get the choice;
/// every other [`Provider`] method is the inner provider's.
#[derive(Debug, Clone)]
pub struct ToolChoicePolicy<P> {
    inner: P,
    policy: StepToolChoice,
}

impl<P: Provider> ToolChoicePolicy<P> {
    /// Wraps `inner`.
    pub fn new(inner: P, policy: StepToolChoice) -> Self {
        Self { inner, policy }
    }
}

impl<P: Provider> Provider for ToolChoicePolicy<P> {
    fn stream(&self, mut request: ModelRequest) -> ChunkStream {
        request.tool_choice = self.policy.choose(&request);
        self.inner.stream(request)
    }

    fn complete(
        &self,
        mut request: ModelRequest,
    ) -> BoxFuture<'static, Result<ModelResponse, ProviderError>> {
        request.tool_choice = self.policy.choose(&request);
        self.inner.complete(request)
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn streams(&self) -> bool {
        self.inner.streams()
    }

    fn retry_policy(&self) -> Option<RetryPolicy> {
        self.inner.retry_policy()
    }

    fn family(&self) -> &str {
        self.inner.family()
    }

    fn supports_tools(&self) -> bool {
        self.inner.supports_tools()
    }

    fn native_output(&self, with_tools: bool) -> bool {
        self.inner.native_output(with_tools)
    }
    fn secrets(&self) -> super::secrets::Secrets {
        self.inner.secrets()
    }
}

#[cfg(test)]
mod tests;
