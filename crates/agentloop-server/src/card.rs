//! The agent card of a served agent (`/{name}/.well-known/agent-card.json`): its name,
//! description and version, one interface per binding (JSON-RPC and HTTP+JSON, protocol
//! version 1.0) at the agent's URL, streaming on, push notifications off (the router turns
//! them on when `ServerConfig::push_allow` allows destinations), the input and
//! output modes, its skills (by default one, from its description, tagged with its tools),
//! the security scheme when the server requires credentials, and — added by the router —
//! where the runs UI shows a task ([`RUNS_UI_EXTENSION`]).

use crate::auth::Auth;
use crate::tasks::ServedAgent;
use a2a::{
    AgentCapabilities, AgentCard, AgentInterface, AgentSkill, SecurityScheme,
    TRANSPORT_PROTOCOL_HTTP_JSON, TRANSPORT_PROTOCOL_JSONRPC,
};
use std::collections::HashMap;

/// The agent card extension that says where a person can look at a task: `params.taskUrl`,
/// an `http(s)` URL in which `{taskId}` stands for the task's id. A served agent's task is a
/// run of the same id, so the router points it at the runs UI (`{public_url}/ui/#/runs/{taskId}`);
/// an agentloop client (`agentloop_a2a::A2aAgentTool`) journals that link with its call.
pub const RUNS_UI_EXTENSION: &str = "urn:agentloop:a2a:runs-ui:v1";

/// The [`RUNS_UI_EXTENSION`] of a server whose root is `public_url`.
pub fn runs_ui_extension(public_url: &str) -> a2a::AgentExtension {
    let task_url = format!("{}/ui/#/runs/{{taskId}}", public_url.trim_end_matches('/'));
    a2a::AgentExtension {
        uri: RUNS_UI_EXTENSION.to_owned(),
        description: Some(
            "Where a person can look at a task: params.taskUrl, with {taskId} replaced by the \
             task's id (the task is a run of the server's runs UI)."
                .to_owned(),
        ),
        required: Some(false),
        params: Some(HashMap::from([("taskUrl".to_owned(), task_url.into())])),
    }
}

/// The card of `served`, reachable at `url` (the agent's base URL, no trailing slash).
pub fn agent_card(served: &ServedAgent, url: &str, auth: Option<&Auth>) -> AgentCard {
    let tools: Vec<String> = served.agent.tools().iter().map(|tool| tool.name.clone()).collect();
    let skills = if served.skills.is_empty() {
        vec![AgentSkill {
            id: served.name().to_owned(),
            name: served.name().to_owned(),
            description: served.description.clone(),
            tags: if tools.is_empty() { vec!["chat".to_owned()] } else { tools },
            examples: None,
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        }]
    } else {
        served.skills.clone()
    };
    let (security_schemes, security_requirements) = match auth {
        Some(auth) => {
            let (name, scheme) = auth.scheme();
            let requirement: a2a::SecurityRequirement = HashMap::from([(name.clone(), Vec::new())]);
            (Some(HashMap::from([(name, scheme)])), Some(vec![requirement]))
        }
        None => (None, None),
    };
    AgentCard {
        name: served.name().to_owned(),
        description: served.description.clone(),
        version: served.version.clone(),
        supported_interfaces: vec![
            AgentInterface::new(url, TRANSPORT_PROTOCOL_JSONRPC),
            AgentInterface::new(url, TRANSPORT_PROTOCOL_HTTP_JSON),
        ],
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(false),
            extensions: Some(vec![a2a::AgentExtension {
                uri: crate::convert::OUTPUT_EXTENSION.to_owned(),
                description: Some(
                    "A typed answer per task: the first message's metadata \
                     {\"agentloop\": {\"output\": {\"schema\": <JSON Schema>, \"name\", \
                     \"description\", \"maxRetries\"}}} makes the task end with a data part \
                     holding the answer, validated against the schema."
                        .to_owned(),
                ),
                required: Some(false),
                params: None,
            }]),
            extended_agent_card: Some(false),
        },
        default_input_modes: served.input.input_modes.clone(),
        // An agent with an output schema answers with a data part (JSON).
        default_output_modes: vec![match served.agent.config().output {
            Some(_) => "application/json".to_owned(),
            None => "text/plain".to_owned(),
        }],
        skills,
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes,
        security_requirements,
        signatures: None,
    }
}

/// The scheme a card declares for `auth`.
pub(crate) fn scheme_of(api_key_header: Option<&str>) -> SecurityScheme {
    match api_key_header {
        Some(header) => SecurityScheme::ApiKey(a2a::ApiKeySecurityScheme {
            location: "header".to_owned(),
            name: header.to_owned(),
            description: Some("an API key the operator issued".to_owned()),
        }),
        None => SecurityScheme::HttpAuth(a2a::HttpAuthSecurityScheme {
            scheme: "bearer".to_owned(),
            description: Some("a bearer token the operator issued".to_owned()),
            bearer_format: None,
        }),
    }
}
