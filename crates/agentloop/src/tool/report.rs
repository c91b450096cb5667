//! What a tool call reports of the work it started, besides its result: the tokens and cost
//! that work used ([`ToolContext::report_usage`](super::ToolContext::report_usage)) and the
//! remote agent's task it ran as ([`ToolContext::report_remote`](super::ToolContext::report_remote)).
//! The run journals both with the call's result.

use crate::message::Usage;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The longest text a [`RemoteTask`] keeps of each of its fields, in characters (they come
/// from another server; longer text is cut).
pub const REMOTE_FIELD_CHARS: usize = 512;

/// A task a remote agent (an A2A agent, say) ran for a tool call: who ran it and where a
/// person can look at it. Journaled as the `remote` of the call's result event, so a timeline
/// shows the remote agent under the call that reached it, and links to it.
///
/// Its text comes from another server: every field is cut to [`REMOTE_FIELD_CHARS`]
/// characters, and a consumer shows it as text; [`view_url`](Self::view_url) is kept only
/// when it is an `http` or `https` URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub struct RemoteTask {
    /// The remote agent's name (its card's).
    pub agent: String,
    /// The address the call reached it at.
    pub url: String,
    /// The remote task's id.
    pub task_id: String,
    /// The remote conversation the task belongs to, when the agent has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// The task's state when the call ended, in the remote protocol's words (A2A:
    /// `completed`, `input-required`, `failed`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Where a person can look at the task (the remote agentloop server's runs UI, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_url: Option<String>,
}

impl RemoteTask {
    /// The task `task_id` of the agent `agent` reached at `url`.
    pub fn new(agent: &str, url: &str, task_id: &str) -> Self {
        Self {
            agent: cut(agent),
            url: cut(url),
            task_id: cut(task_id),
            context_id: None,
            state: None,
            view_url: None,
        }
    }

    /// With the remote conversation's id.
    #[must_use]
    pub fn with_context_id(mut self, context_id: &str) -> Self {
        self.context_id = Some(cut(context_id));
        self
    }

    /// With the task's state when the call ended.
    #[must_use]
    pub fn with_state(mut self, state: &str) -> Self {
        self.state = Some(cut(state));
        self
    }

    /// With where a person can look at the task: kept only when it is an `http` or `https`
    /// URL that fits in [`REMOTE_FIELD_CHARS`] characters (any other is dropped).
    #[must_use]
    pub fn with_view_url(mut self, view_url: &str) -> Self {
        self.view_url = is_web_url(view_url).then(|| view_url.to_owned());
        self
    }
}

/// Whether `url` is a plain `http(s)://` URL a page may link to: short enough, with a host,
/// no whitespace and no control characters.
pub fn is_web_url(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &url[8..]
    } else if lower.starts_with("http://") {
        &url[7..]
    } else {
        return false;
    };
    url.chars().count() <= REMOTE_FIELD_CHARS
        && !rest.is_empty()
        && !rest.starts_with('/')
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(REMOTE_FIELD_CHARS) {
        Some((end, _)) => text[..end].to_owned(),
        None => text.to_owned(),
    }
}

/// What one call reported (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct CallReport {
    /// Tokens the call's work used.
    pub usage: Usage,
    /// What that work cost in USD (0 when unknown).
    pub cost_usd: f64,
    /// The remote task the call ran as (the last one reported).
    pub remote: Option<RemoteTask>,
}

impl CallReport {
    /// A report of `usage` costing `cost_usd`.
    pub fn used(usage: Usage, cost_usd: f64) -> Self {
        Self { usage, cost_usd, remote: None }
    }

    /// With the remote task the call ran as.
    #[must_use]
    pub fn with_remote(mut self, remote: RemoteTask) -> Self {
        self.remote = Some(remote);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_urls_are_kept_to_link_to() {
        let task = RemoteTask::new("a", "http://h", "t");
        for good in ["http://127.0.0.1:8080/ui/#/runs/x", "HTTPS://example.test/a?b=c"] {
            assert_eq!(task.clone().with_view_url(good).view_url.as_deref(), Some(good));
        }
        for bad in [
            "javascript:alert(1)",
            "data:text/html,<script>",
            "http://",
            "https:///path",
            "//host/x",
            "http://host/a b",
            "http://host/\u{7}",
            "ftp://host/x",
        ] {
            assert_eq!(task.clone().with_view_url(bad).view_url, None, "{bad}");
        }
        let long = format!("http://h/{}", "a".repeat(REMOTE_FIELD_CHARS));
        assert_eq!(task.with_view_url(&long).view_url, None);
    }

    #[test]
    fn remote_text_is_cut() {
        let long = "é".repeat(REMOTE_FIELD_CHARS + 10);
        let task = RemoteTask::new(&long, &long, &long).with_context_id(&long).with_state(&long);
        for field in [&task.agent, &task.url, &task.task_id] {
            assert_eq!(field.chars().count(), REMOTE_FIELD_CHARS);
        }
        assert_eq!(task.context_id.map(|c| c.chars().count()), Some(REMOTE_FIELD_CHARS));
    }
}
