//! What an [`A2aAgentTool`](super::A2aAgentTool) call reports of the remote task it runs as
//! ([`ToolContext::report_remote`]): the agent, the address it was reached at (without query,
//! fragment or credentials), the task's id, context and state, and — when the agent's card
//! says where (the [`RUNS_UI_EXTENSION`], which `agentloop serve` declares) — the page that
//! shows the task.

use super::collect::{state_name, TaskCollector};
use crate::client::A2aClient;
use a2a::{AgentCard, TaskState};
use agentloop::tool::{RemoteTask, ToolContext};

/// The agent card extension by which an agent says where a person can look at one of its
/// tasks: `params.taskUrl`, an `http(s)` URL in which `{taskId}` stands for the task's id
/// (`agentloop serve`: its runs UI, `…/ui/#/runs/{taskId}`).
pub const RUNS_UI_EXTENSION: &str = "urn:agentloop:a2a:runs-ui:v1";

/// The page of task `task_id` the agent's card points to ([`RUNS_UI_EXTENSION`]), if any.
/// Only task ids of URL-safe characters (`A-Z a-z 0-9 - . _ ~ :`) are put into a URL.
pub fn task_view_url(card: &AgentCard, task_id: &str) -> Option<String> {
    let safe = !task_id.is_empty()
        && task_id.chars().all(|c| c.is_ascii_alphanumeric() || "-._~:".contains(c));
    if !safe {
        return None;
    }
    let template = card
        .capabilities
        .extensions
        .as_deref()?
        .iter()
        .find(|extension| extension.uri == RUNS_UI_EXTENSION)?
        .params
        .as_ref()?
        .get("taskUrl")?
        .as_str()?;
    template.contains("{taskId}").then(|| template.replace("{taskId}", task_id))
}

/// Reports the call's remote task to its context whenever its id or state changes.
pub(super) struct RemoteReporter {
    agent: String,
    url: String,
    /// The task id and state reported last.
    last: Option<(String, Option<TaskState>)>,
}

impl RemoteReporter {
    /// For calls to the agent `client` talks to.
    pub(super) fn new(client: &A2aClient) -> Self {
        let mut url = client.url().clone();
        url.set_query(None);
        url.set_fragment(None);
        // Credentials in a URL are secrets: they never reach the journal.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        Self { agent: client.card().name.clone(), url: url.to_string(), last: None }
    }

    /// Reports what `collector` knows of the task, if it changed since the last report.
    pub(super) fn report(
        &mut self,
        ctx: &ToolContext,
        card: &AgentCard,
        collector: &TaskCollector,
    ) {
        let Some(task_id) = collector.task_id() else { return };
        let state = collector.state();
        let changed = match &self.last {
            Some((id, last)) => id != task_id || last.as_ref() != state,
            None => true,
        };
        if !changed {
            return;
        }
        self.last = Some((task_id.to_owned(), state.cloned()));
        let mut remote = RemoteTask::new(&self.agent, &self.url, task_id);
        if let Some(context_id) = collector.context_id() {
            remote = remote.with_context_id(context_id);
        }
        if let Some(state) = state {
            remote = remote.with_state(state_name(state));
        }
        if let Some(view_url) = task_view_url(card, task_id) {
            remote = remote.with_view_url(&view_url);
        }
        ctx.report_remote(remote);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use a2a::AgentExtension;
    use std::collections::HashMap;

    fn card(template: Option<&str>) -> AgentCard {
        let mut card: AgentCard = serde_json::from_value(serde_json::json!({
            "name": "remote", "description": "d", "version": "1",
            "supportedInterfaces": [], "capabilities": {},
            "defaultInputModes": [], "defaultOutputModes": [], "skills": []
        }))
        .unwrap();
        if let Some(template) = template {
            let params = HashMap::from([("taskUrl".to_owned(), template.into())]);
            card.capabilities.extensions = Some(vec![AgentExtension {
                uri: RUNS_UI_EXTENSION.to_owned(),
                description: None,
                required: Some(false),
                params: Some(params),
            }]);
        }
        card
    }

    #[test]
    fn the_card_says_where_a_task_is_shown() {
        let card = card(Some("http://h:1/ui/#/runs/{taskId}"));
        assert_eq!(
            task_view_url(&card, "run-1.c_2").as_deref(),
            Some("http://h:1/ui/#/runs/run-1.c_2")
        );
        // An id that would need escaping is not put into a URL.
        assert_eq!(task_view_url(&card, "a/../b"), None);
        assert_eq!(task_view_url(&card, "a b"), None);
        assert_eq!(task_view_url(&card, ""), None);
    }

    #[test]
    fn without_the_extension_or_a_placeholder_there_is_no_page() {
        assert_eq!(task_view_url(&card(None), "t"), None);
        assert_eq!(task_view_url(&card(Some("http://h/ui/")), "t"), None);
    }
}
