//! The agents a server or a worker pool serves, built one way for both (`agentloop serve`,
//! `agentloop worker`, `agentloop run --queue`): each `[[serve]]` table of the configuration
//! (the `[agent]` with the table's name, instructions, tools and iteration limit), else the
//! one `[agent]`, named `[agent] name` (or the name given), else `agent`. All on the same
//! store.

use crate::config::Config;
use crate::runs::Stores;
use crate::{build_agent, AgentFlags, ProviderFlags, Purpose};
use agentloop::Agent;
use anyhow::Context;

/// One served agent.
pub struct Served {
    /// Its name: its path on the server, its queue in the worker pool.
    pub name: String,
    /// The agent (named `name`).
    pub agent: Agent,
    /// The description of its card.
    pub description: Option<String>,
}

/// The agent name of a configuration without `[[serve]]` tables: `name`, else `[agent]
/// name`, else `agent`.
pub fn default_name(config: &Config, name: Option<String>) -> String {
    name.or_else(|| config.agent.name.clone()).unwrap_or_else(|| "agent".into())
}

/// Builds the served agents of `config` on `stores` (`name`: the name of the `[agent]` when
/// there are no `[[serve]]` tables; that agent has no description).
pub async fn served(
    config: &Config,
    provider: &ProviderFlags,
    flags: &AgentFlags,
    name: Option<String>,
    stores: &Stores,
) -> anyhow::Result<Vec<Served>> {
    let share = || Stores { runs: stores.runs.clone(), sessions: stores.sessions.clone() };
    if config.serve.is_empty() {
        let name = default_name(config, name);
        let mut one = config.clone();
        one.agent.name = Some(name.clone());
        let agent = build_agent(&one, provider, flags, None, Some(share()), Purpose::Run).await?;
        return Ok(vec![Served { name, agent, description: None }]);
    }
    let mut agents = Vec::with_capacity(config.serve.len());
    for served in &config.serve {
        let served = served.get_ref();
        let mut one = config.clone();
        one.agent.name = Some(served.name.clone());
        if let Some(instructions) = &served.instructions {
            one.agent.instructions = Some(instructions.clone());
        }
        if let Some(tools) = &served.tools {
            one.tools.enabled = Some(tools.clone());
        }
        if let Some(n) = served.max_iterations {
            one.limits.max_iterations = Some(n);
        }
        let agent = build_agent(&one, provider, flags, None, Some(share()), Purpose::Run)
            .await
            .with_context(|| format!("[[serve]] agent '{}'", served.name))?;
        agents.push(Served {
            name: served.name.clone(),
            agent,
            description: served.description.clone(),
        });
    }
    Ok(agents)
}
