//! MCP tool servers: [`McpToolSet`], a [`ToolSet`] whose tools come from Model Context
//! Protocol servers, on the official `rmcp` client (feature `mcp`).
//!
//! - **Transports**: a child process speaking MCP on stdin/stdout ([`McpTransport::Stdio`]:
//!   command, arguments, extra environment, working directory; its stderr goes to `tracing` at
//!   debug level and its last lines into error reports), or streamable HTTP
//!   ([`McpTransport::Http`]: URL and headers).
//! - **Names**: each tool is exposed as `<server>__<tool>` (e.g. `everything__echo`), every
//!   character outside `[a-zA-Z0-9_-]` replaced by `_`, at most 64 characters (a longer name is
//!   cut and ends with `-` and 8 hex digits of the original name), so the names are valid for
//!   every provider. Server names are 1–32 of `[a-zA-Z0-9_-]`, without `__` and without `_` at
//!   either end. See [`exposed_name`].
//! - **Calls** run under the server's `timeout_secs` (the agent's tool timeout when unset) and
//!   stop when the call's [`ToolContext`] is cancelled; either way the server is sent
//!   `notifications/cancelled` for the request. A result with `isError` becomes
//!   [`ToolError::Failed`] with its text; structured content is the value when present, else
//!   the content as text (images, audio and blobs are described by type and size).
//! - **Tool-list changes**: on `notifications/tools/list_changed` the server's tools are
//!   listed again; [`specs`](ToolSet::specs) reflects the new list at once, and an agent offers
//!   it from its next run on (the set's [`revision`](ToolSet::revision) moves).
//! - **Failures**: a server whose connection ends (a process that exits) is reported (a
//!   `tracing` warning, [`McpToolSet::status`], and a [`ToolError`] naming the cause for calls
//!   while it is down) and restarted once; a second end is final.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use agentloop::tool::mcp::{McpServerConfig, McpToolSet};
//! use std::sync::Arc;
//!
//! let everything = McpServerConfig::stdio(
//!     "everything",
//!     "npx",
//!     ["-y", "@modelcontextprotocol/server-everything"],
//! );
//! let tools = Arc::new(McpToolSet::connect([everything]).await?);
//! // Agent::builder(model).tool_set(tools).build()?  — the model sees `everything__echo`, …
//! # Ok(()) }
//! ```

mod convert;
mod server;

pub use convert::{exposed_name, tool_output};

use super::{ToolContext, ToolError, ToolOutput, ToolSet, ToolSpec};
use async_trait::async_trait;
use secrecy::SecretString;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use server::Server;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Between a server's name and its tool's name in the names the model sees.
pub const NAME_SEPARATOR: &str = "__";

/// The `_meta` key of a `tools/call` request that holds the call's idempotency key
/// (`{run_id}:{call_id}`, [`ToolContext::idempotency_key`](crate::tool::ToolContext)): a
/// server whose tool declares `idempotentHint` may deduplicate by it, since a call a crash
/// left in flight is made again with the same key.
pub const IDEMPOTENCY_META: &str = "agentloop/idempotencyKey";

/// The longest tool name every provider accepts.
pub const MAX_TOOL_NAME_LEN: usize = 64;

/// How long connecting (start, handshake, first listing) and re-listing may take when the
/// server sets no `connect_timeout_secs`.
pub const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Added to a server's call timeout for the agent's own timeout, so that the set's timeout
/// (which tells the server to stop) fires first.
const TIMEOUT_GRACE: Duration = Duration::from_secs(1);

/// One MCP server, as declared in a config file:
///
/// ```toml
/// [[mcp_servers]]
/// name = "everything"
/// timeout_secs = 20           # per call
/// connect_timeout_secs = 60   # start, handshake, listing
/// transport = { type = "stdio", command = "node", args = ["server.js"], env = { DEBUG = "0" } }
///
/// [[mcp_servers]]
/// name = "remote"
/// transport = { type = "http", url = "http://127.0.0.1:3001/mcp", headers = { Authorization = "Bearer …" } }
/// ```
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The server's name: the prefix of its tools' names (see the module docs for the rule).
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// The timeout of one call, in seconds (default: the agent's tool timeout).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// How long starting the server, the handshake and listing its tools may take, in seconds
    /// (default 30).
    #[serde(default)]
    pub connect_timeout_secs: Option<u64>,
}

/// How to reach an MCP server.
#[derive(Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum McpTransport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The program (looked up in `PATH` when not a path).
        command: String,
        /// Its arguments.
        #[serde(default)]
        args: Vec<String>,
        /// Variables added to the inherited environment (values are secrets: never printed).
        #[serde(default, deserialize_with = "secret_map")]
        env: BTreeMap<String, SecretString>,
        /// Its working directory (default: the current one).
        #[serde(default)]
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The MCP endpoint, e.g. `http://127.0.0.1:3001/mcp`.
        url: String,
        /// Headers sent with every request, e.g. `Authorization` (values are secrets: never
        /// printed).
        #[serde(default, deserialize_with = "secret_map")]
        headers: BTreeMap<String, SecretString>,
    },
}

fn secret_map<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, SecretString>, D::Error> {
    let plain = BTreeMap::<String, String>::deserialize(deserializer)?;
    Ok(plain.into_iter().map(|(key, value)| (key, SecretString::from(value))).collect())
}

impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdio { command, args, env, cwd } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &env.keys().collect::<Vec<_>>())
                .field("cwd", cwd)
                .finish(),
            Self::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServerConfig")
            .field("name", &self.name)
            .field("transport", &self.transport)
            .field("timeout_secs", &self.timeout_secs)
            .field("connect_timeout_secs", &self.connect_timeout_secs)
            .finish()
    }
}

impl McpServerConfig {
    /// A server started as a child process.
    pub fn stdio(
        name: impl Into<String>,
        command: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Stdio {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
                env: BTreeMap::new(),
                cwd: None,
            },
            timeout_secs: None,
            connect_timeout_secs: None,
        }
    }

    /// A server over streamable HTTP.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Http { url: url.into(), headers: BTreeMap::new() },
            timeout_secs: None,
            connect_timeout_secs: None,
        }
    }

    /// Adds an environment variable (stdio servers; ignored for HTTP).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Stdio { env, .. } = &mut self.transport {
            env.insert(key.into(), SecretString::from(value.into()));
        }
        self
    }

    /// Sets the working directory (stdio servers; ignored for HTTP).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        if let McpTransport::Stdio { cwd, .. } = &mut self.transport {
            *cwd = Some(dir.into());
        }
        self
    }

    /// Adds a header (HTTP servers; ignored for stdio).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Http { headers, .. } = &mut self.transport {
            headers.insert(name.into(), SecretString::from(value.into()));
        }
        self
    }

    /// Sets the call timeout, in whole seconds.
    pub fn timeout_secs(mut self, secs: u64) -> Self {
        self.timeout_secs = Some(secs);
        self
    }

    /// Sets the bound on starting, the handshake and listing, in whole seconds.
    pub fn connect_timeout_secs(mut self, secs: u64) -> Self {
        self.connect_timeout_secs = Some(secs);
        self
    }

    /// The call timeout, if set.
    pub fn call_timeout(&self) -> Option<Duration> {
        self.timeout_secs.map(Duration::from_secs)
    }

    /// The bound on connecting and listing.
    fn setup_timeout(&self) -> Duration {
        self.connect_timeout_secs.map_or(DEFAULT_SETUP_TIMEOUT, Duration::from_secs)
    }

    /// Checks what can be checked without starting the server.
    pub fn validate(&self) -> Result<(), McpError> {
        let invalid =
            |message: String| McpError::InvalidConfig { server: self.name.clone(), message };
        convert::check_server_name(&self.name).map_err(|e| invalid(format!("the name {e}")))?;
        if self.timeout_secs == Some(0) || self.connect_timeout_secs == Some(0) {
            return Err(invalid("timeout_secs and connect_timeout_secs must be at least 1".into()));
        }
        match &self.transport {
            McpTransport::Stdio { command, .. } if command.trim().is_empty() => {
                Err(invalid("the command is empty".into()))
            }
            McpTransport::Http { url, .. }
                if !(url.starts_with("http://") || url.starts_with("https://")) =>
            {
                Err(invalid(format!("the URL '{url}' is not an http:// or https:// URL")))
            }
            _ => Ok(()),
        }
    }
}

/// Connecting to an MCP server failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The configuration is invalid.
    #[error("MCP server '{server}': {message}")]
    InvalidConfig {
        /// The server.
        server: String,
        /// What is wrong.
        message: String,
    },
    /// Two servers share a name.
    #[error("two MCP servers are named '{0}'")]
    DuplicateServer(String),
    /// The server process could not be started.
    #[error("MCP server '{server}' could not be started: {message}")]
    Spawn {
        /// The server.
        server: String,
        /// Why.
        message: String,
    },
    /// The MCP handshake failed (or the HTTP client could not be built).
    #[error("MCP server '{server}' did not connect: {message}")]
    Connect {
        /// The server.
        server: String,
        /// Why (with the last lines the process wrote to stderr, if any).
        message: String,
    },
    /// Listing the server's tools failed.
    #[error("MCP server '{server}' did not list its tools: {message}")]
    ListTools {
        /// The server.
        server: String,
        /// Why.
        message: String,
    },
    /// Connecting or listing took longer than the server's timeout.
    #[error("MCP server '{server}' did not {what} within {secs} s")]
    Timeout {
        /// The server.
        server: String,
        /// What it did not do.
        what: &'static str,
        /// The limit.
        secs: u64,
    },
}

/// Where a server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpServerState {
    /// Connected; calls go through.
    Running,
    /// Its connection ended; it is being started again.
    Restarting,
    /// Its connection ended for good (it was restarted once already, or the restart failed,
    /// or the set shut down); calls fail.
    Stopped,
}

/// A server's state, for display and diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerStatus {
    /// Where it stands.
    pub state: McpServerState,
    /// The process id of a running stdio server.
    pub pid: Option<u32>,
    /// How many times it was restarted (0 or 1).
    pub restarts: u32,
    /// Why its connection last ended, if it did.
    pub last_exit: Option<String>,
}

/// Tools from MCP servers: a [`ToolSet`] to give an agent with
/// [`AgentBuilder::tool_set`](crate::AgentBuilder::tool_set). Dropping it stops the servers.
pub struct McpToolSet {
    servers: Vec<Arc<Server>>,
    supervisors: Vec<tokio::task::JoinHandle<()>>,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for McpToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolSet")
            .field("servers", &self.servers.iter().map(|s| s.name()).collect::<Vec<_>>())
            .finish()
    }
}

impl McpToolSet {
    /// Starts (or connects to) every server and lists its tools, all at once. Fails if any
    /// server fails; the servers already started are stopped again.
    pub async fn connect(
        servers: impl IntoIterator<Item = McpServerConfig>,
    ) -> Result<Self, McpError> {
        let configs: Vec<McpServerConfig> = servers.into_iter().collect();
        for (i, config) in configs.iter().enumerate() {
            config.validate()?;
            if configs[..i].iter().any(|other| other.name == config.name) {
                return Err(McpError::DuplicateServer(config.name.clone()));
            }
        }
        let shutdown = CancellationToken::new();
        let servers: Vec<Arc<Server>> = configs.into_iter().map(Server::new).collect();
        let opened =
            futures::future::join_all(servers.iter().map(|server| server.open(&shutdown))).await;
        let mut connections = Vec::with_capacity(opened.len());
        for connection in opened {
            match connection {
                Ok(connection) => connections.push(connection),
                Err(error) => {
                    shutdown.cancel();
                    return Err(error);
                }
            }
        }
        let supervisors = servers
            .iter()
            .zip(connections)
            .map(|(server, connection)| {
                tokio::spawn(Arc::clone(server).supervise(connection, shutdown.clone()))
            })
            .collect();
        Ok(Self { servers, supervisors, shutdown })
    }

    /// The servers' names, in configuration order.
    pub fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.name().to_owned()).collect()
    }

    /// Where a server stands (`None`: no server of that name).
    pub fn status(&self, server: &str) -> Option<McpServerStatus> {
        self.servers.iter().find(|s| s.name() == server).map(|s| s.status())
    }

    /// Stops every server and waits (a few seconds at most each) until they are gone.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        for supervisor in self.supervisors.drain(..) {
            let _ = supervisor.await;
        }
    }

    fn owner(&self, name: &str) -> Option<(&Arc<Server>, String)> {
        self.servers
            .iter()
            .find_map(|server| server.remote_name(name).map(|remote| (server, remote)))
    }
}

impl Drop for McpToolSet {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

#[async_trait]
impl ToolSet for McpToolSet {
    fn specs(&self) -> Vec<ToolSpec> {
        self.servers.iter().flat_map(|server| server.specs()).collect()
    }

    fn timeout(&self, name: &str) -> Option<Duration> {
        let (server, _) = self.owner(name)?;
        server.call_timeout().map(|timeout| timeout + TIMEOUT_GRACE)
    }

    fn safe_to_retry(&self, name: &str) -> bool {
        self.owner(name).is_some_and(|(server, _)| server.safe_to_retry(name))
    }

    fn revision(&self) -> u64 {
        self.servers.iter().map(|server| server.revision()).sum()
    }

    async fn call(
        &self,
        name: &str,
        args: Value,
        ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let (server, remote) =
            self.owner(name).ok_or_else(|| ToolError::UnknownTool(name.to_owned()))?;
        server.call(&remote, args, &ctx).await
    }
}

#[cfg(test)]
mod tests;
