//! One MCP server: its connection (stdio child or streamable HTTP), its tools, and the
//! supervisor task that re-lists them on change and restarts the server once.

use super::convert::{call_error, tool_output, ToolTable};
use super::{
    McpError, McpServerConfig, McpServerState, McpServerStatus, McpTransport, IDEMPOTENCY_META,
};
use crate::tool::{ToolContext, ToolError, ToolOutput, ToolSpec};
use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{MaybeSendFuture, NotificationContext, QuitReason, RunningService};
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use secrecy::ExposeSecret;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A server is restarted at most this many times.
const MAX_RESTARTS: u32 = 1;
/// Lines of the process's stderr kept for error reports.
const STDERR_LINES: usize = 5;
/// Characters kept of one stderr line.
const STDERR_LINE_CHARS: usize = 300;
/// How long a process that failed the handshake may take to close its stderr.
const STDERR_DRAIN: Duration = Duration::from_millis(500);
/// How long a stopping server may take to go.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The client side of one connection: tells the supervisor when the tool list changed.
pub(super) struct Handler {
    changed: mpsc::Sender<()>,
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        // A full channel means a re-list is already pending; it will see this change too.
        let _ = self.changed.try_send(());
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agentloop", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A live connection, handed to the supervisor.
pub(super) struct Connection {
    running: RunningService<RoleClient, Handler>,
    changed: mpsc::Receiver<()>,
    /// The server's process (stdio).
    process: Option<Process>,
}

/// A server process, in its own process group (Unix). Dropping it kills the group if the
/// process still runs.
struct Process {
    child: Box<dyn ChildWrapper>,
}

impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.start_kill();
        }
    }
}

impl Process {
    /// Waits a little for the process to exit (it closed its output or was asked to stop),
    /// then kills it. Says how it ended.
    async fn end(&mut self) -> String {
        match tokio::time::timeout(CLOSE_TIMEOUT, self.child.wait()).await {
            Ok(Ok(status)) => format!("the server process exited ({status})"),
            Ok(Err(error)) => format!("the server process could not be waited for: {error}"),
            Err(_) => {
                let _ = self.child.start_kill();
                "the server process closed its output and was killed".to_owned()
            }
        }
    }
}

/// Spawns a stdio server: stdin and stdout piped for MCP, stderr piped for the log.
fn spawn(
    command: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, secrecy::SecretString>,
    cwd: Option<&std::path::Path>,
) -> std::io::Result<(
    Process,
    tokio::process::ChildStdout,
    tokio::process::ChildStdin,
    tokio::process::ChildStderr,
)> {
    use std::process::Stdio;
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args)
        .envs(env.iter().map(|(key, value)| (key, value.expose_secret())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let mut cmd = CommandWrap::from(cmd);
    // Its own process group: stopping it stops its children too, and a Ctrl-C in the
    // terminal reaches the agent, not the server.
    #[cfg(unix)]
    cmd.wrap(process_wrap::tokio::ProcessGroup::leader());
    let mut process = Process { child: cmd.spawn()? };
    let missing = || std::io::Error::other("a standard stream of the process was not piped");
    let stdout = process.child.stdout().take().ok_or_else(missing)?;
    let stdin = process.child.stdin().take().ok_or_else(missing)?;
    let stderr = process.child.stderr().take().ok_or_else(missing)?;
    Ok((process, stdout, stdin, stderr))
}

#[derive(Clone)]
enum State {
    Up { peer: Peer<RoleClient>, pid: Option<u32> },
    Restarting,
    Stopped,
}

pub(super) struct Server {
    config: McpServerConfig,
    state: RwLock<State>,
    tools: RwLock<Arc<ToolTable>>,
    revision: AtomicU64,
    restarts: AtomicU32,
    last_exit: RwLock<Option<String>>,
    stderr: Mutex<VecDeque<String>>,
}

fn read<T: Clone>(lock: &RwLock<T>) -> T {
    lock.read().unwrap_or_else(PoisonError::into_inner).clone()
}

fn write<T>(lock: &RwLock<T>, value: T) {
    *lock.write().unwrap_or_else(PoisonError::into_inner) = value;
}

impl Server {
    pub(super) fn new(config: McpServerConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            state: RwLock::new(State::Stopped),
            tools: RwLock::new(Arc::default()),
            revision: AtomicU64::new(0),
            restarts: AtomicU32::new(0),
            last_exit: RwLock::new(None),
            stderr: Mutex::new(VecDeque::new()),
        })
    }

    pub(super) fn name(&self) -> &str {
        &self.config.name
    }

    pub(super) fn call_timeout(&self) -> Option<Duration> {
        self.config.call_timeout()
    }

    pub(super) fn revision(&self) -> u64 {
        self.revision.load(Ordering::Acquire)
    }

    pub(super) fn specs(&self) -> Vec<ToolSpec> {
        read(&self.tools).specs.clone()
    }

    pub(super) fn safe_to_retry(&self, exposed: &str) -> bool {
        read(&self.tools).safe_to_retry.contains(exposed)
    }

    pub(super) fn remote_name(&self, exposed: &str) -> Option<String> {
        read(&self.tools).remote.get(exposed).cloned()
    }

    pub(super) fn status(&self) -> McpServerStatus {
        let (state, pid) = match read(&self.state) {
            State::Up { pid, .. } => (McpServerState::Running, pid),
            State::Restarting => (McpServerState::Restarting, None),
            State::Stopped => (McpServerState::Stopped, None),
        };
        McpServerStatus {
            state,
            pid,
            restarts: self.restarts.load(Ordering::Acquire),
            last_exit: read(&self.last_exit),
        }
    }

    /// The last lines the process wrote to stderr, as `; stderr: a | b`, or nothing.
    fn stderr_tail(&self) -> String {
        let lines = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.is_empty() {
            String::new()
        } else {
            format!("; stderr: {}", lines.iter().cloned().collect::<Vec<_>>().join(" | "))
        }
    }

    /// Calls one of the server's tools by its own name.
    pub(super) async fn call(
        &self,
        remote: &str,
        args: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let peer = match read(&self.state) {
            State::Up { peer, .. } => peer,
            State::Restarting => {
                return Err(ToolError::Failed(format!(
                    "the MCP server '{}' is down ({}); it is being restarted, try again shortly",
                    self.name(),
                    read(&self.last_exit).unwrap_or_default()
                )))
            }
            State::Stopped => {
                return Err(ToolError::Failed(format!(
                    "the MCP server '{}' is down for good ({})",
                    self.name(),
                    read(&self.last_exit).unwrap_or_else(|| "it was shut down".into())
                )))
            }
        };
        let mut params = CallToolRequestParams::new(remote.to_owned());
        match args {
            Value::Object(arguments) => params = params.with_arguments(arguments),
            Value::Null => {}
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "MCP tools take a JSON object, not {other}"
                )))
            }
        }
        // The call's idempotency key, for a server that deduplicates (a call a crash left in
        // flight may be made again, with the same key, when its tool is safe to retry).
        let mut meta = rmcp::model::RequestMetaObject::new();
        meta.insert(IDEMPOTENCY_META.to_owned(), Value::String(ctx.idempotency_key.clone()));
        params.meta = Some(meta);
        // Dropping the request (cancel, timeout) makes rmcp send `notifications/cancelled`.
        let request = peer.call_tool(params);
        let result = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            result = with_timeout(self.call_timeout(), request) => result,
        };
        match result {
            Some(Ok(result)) => tool_output(result),
            Some(Err(rmcp::ServiceError::TransportClosed)) => Err(ToolError::Failed(format!(
                "the MCP server '{}' closed the connection during the call{}",
                self.name(),
                self.stderr_tail()
            ))),
            Some(Err(error)) => Err(call_error(self.name(), error)),
            None => {
                let limit = self.call_timeout().unwrap_or_default();
                Err(ToolError::Timeout(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX)))
            }
        }
    }

    /// Starts the server (or connects to it), shakes hands and lists its tools.
    pub(super) async fn open(
        self: &Arc<Self>,
        shutdown: &CancellationToken,
    ) -> Result<Connection, McpError> {
        let (sender, changed) = mpsc::channel(1);
        let handler = Handler { changed: sender };
        let (running, process) = match &self.config.transport {
            McpTransport::Stdio { command, args, env, cwd } => {
                let (process, stdout, stdin, stderr) = spawn(command, args, env, cwd.as_deref())
                    .map_err(|e| McpError::Spawn {
                        server: self.name().to_owned(),
                        message: format!("{command}: {e}"),
                    })?;
                let reader = tokio::spawn(collect_stderr(Arc::downgrade(self), stderr));
                match self.handshake(handler, (stdout, stdin), shutdown).await {
                    Ok(running) => (running, Some(process)),
                    Err(McpError::Connect { server, message }) => {
                        // A process that gave up has closed its stderr: read all of it.
                        let _ = tokio::time::timeout(STDERR_DRAIN, reader).await;
                        let message = format!("{message}{}", self.stderr_tail());
                        return Err(McpError::Connect { server, message });
                    }
                    Err(other) => return Err(other),
                }
            }
            McpTransport::Http { url, headers } => {
                let transport = http_transport(url, headers).map_err(|message| {
                    McpError::Connect { server: self.name().to_owned(), message }
                })?;
                (self.handshake(handler, transport, shutdown).await?, None)
            }
        };
        let pid = process.as_ref().and_then(|p| p.child.id());
        let setup = self.config.setup_timeout();
        let tools = tokio::time::timeout(setup, running.peer().list_all_tools())
            .await
            .map_err(|_| self.timeout_error("list its tools"))?
            .map_err(|e| McpError::ListTools {
                server: self.name().to_owned(),
                message: e.to_string(),
            })?;
        self.install(ToolTable::new(self.name(), tools));
        write(&self.state, State::Up { peer: running.peer().clone(), pid });
        Ok(Connection { running, changed, process })
    }

    async fn handshake<T, E, A>(
        &self,
        handler: Handler,
        transport: T,
        shutdown: &CancellationToken,
    ) -> Result<RunningService<RoleClient, Handler>, McpError>
    where
        T: IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let setup = self.config.setup_timeout();
        tokio::time::timeout(setup, handler.serve_with_ct(transport, shutdown.child_token()))
            .await
            .map_err(|_| self.timeout_error("connect"))?
            .map_err(|e| McpError::Connect {
                server: self.name().to_owned(),
                message: e.to_string(),
            })
    }

    fn timeout_error(&self, what: &'static str) -> McpError {
        McpError::Timeout {
            server: self.name().to_owned(),
            what,
            secs: self.config.setup_timeout().as_secs(),
        }
    }

    /// Replaces the tool table; moves the revision if the tools changed.
    fn install(&self, table: ToolTable) {
        let mut tools = self.tools.write().unwrap_or_else(PoisonError::into_inner);
        if tools.specs != table.specs {
            *tools = Arc::new(table);
            self.revision.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Lists the tools again after a change notification.
    async fn relist(&self, peer: &Peer<RoleClient>) {
        match tokio::time::timeout(self.config.setup_timeout(), peer.list_all_tools()).await {
            Ok(Ok(tools)) => {
                let before = self.revision();
                self.install(ToolTable::new(self.name(), tools));
                if self.revision() != before {
                    tracing::info!(server = self.name(), "MCP server changed its tools");
                }
            }
            Ok(Err(error)) => {
                tracing::warn!(server = self.name(), %error, "MCP server did not list its changed tools");
            }
            Err(_) => {
                tracing::warn!(
                    server = self.name(),
                    "MCP server did not list its changed tools in time"
                );
            }
        }
    }

    /// Watches the connection until it ends (re-listing on change), restarts the server once,
    /// and stops it on shutdown.
    pub(super) async fn supervise(
        self: Arc<Self>,
        mut connection: Connection,
        shutdown: CancellationToken,
    ) {
        loop {
            let Some(reason) = self.watch(connection, &shutdown).await else {
                write(&self.state, State::Stopped);
                return;
            };
            write(&self.last_exit, Some(reason.clone()));
            if self.restarts.load(Ordering::Acquire) >= MAX_RESTARTS {
                tracing::warn!(server = self.name(), %reason, "MCP server stopped again; not restarting it");
                write(&self.state, State::Stopped);
                return;
            }
            self.restarts.fetch_add(1, Ordering::AcqRel);
            write(&self.state, State::Restarting);
            tracing::warn!(server = self.name(), %reason, "MCP server stopped; restarting it once");
            match self.open(&shutdown).await {
                Ok(next) => {
                    tracing::info!(server = self.name(), "MCP server restarted");
                    connection = next;
                }
                Err(error) => {
                    tracing::warn!(server = self.name(), %error, "MCP server did not restart");
                    write(&self.last_exit, Some(format!("{reason}; the restart failed: {error}")));
                    write(&self.state, State::Stopped);
                    return;
                }
            }
        }
    }

    /// Runs until the connection ends (`Some(why)`) or the set shuts down (`None`).
    async fn watch(&self, connection: Connection, shutdown: &CancellationToken) -> Option<String> {
        let Connection { running, mut changed, mut process } = connection;
        let peer = running.peer().clone();
        let mut done = pin!(running.waiting());
        loop {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => {
                    // The connection's token is a child of `shutdown`: it is closing (a stdio
                    // server sees its input end and exits).
                    let _ = tokio::time::timeout(CLOSE_TIMEOUT, &mut done).await;
                    if let Some(process) = process.as_mut() {
                        process.end().await;
                    }
                    return None;
                }
                quit = &mut done => {
                    let ended = match process.as_mut() {
                        Some(process) => Some(process.end().await),
                        None => None,
                    };
                    if shutdown.is_cancelled() {
                        return None;
                    }
                    return Some(self.describe_end(quit, ended));
                }
                Some(()) = changed.recv() => self.relist(&peer).await,
            }
        }
    }

    fn describe_end(
        &self,
        quit: Result<QuitReason, tokio::task::JoinError>,
        process: Option<String>,
    ) -> String {
        let what = match (process, quit) {
            (Some(process), _) => process,
            (None, Ok(QuitReason::Closed)) => "the connection closed".to_owned(),
            (None, Ok(QuitReason::Cancelled)) => "the connection was cancelled".to_owned(),
            (None, Ok(other)) => format!("the connection ended ({other:?})"),
            (None, Err(error)) => format!("the connection task failed: {error}"),
        };
        format!("{what}{}", self.stderr_tail())
    }
}

/// `future` under an optional timeout (`None` when it ran out).
async fn with_timeout<F: Future>(limit: Option<Duration>, future: F) -> Option<F::Output> {
    match limit {
        Some(limit) => tokio::time::timeout(limit, future).await.ok(),
        None => Some(future.await),
    }
}

/// Forwards the process's stderr to `tracing` and keeps its last lines.
async fn collect_stderr(server: Weak<Server>, stderr: tokio::process::ChildStderr) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let Some(server) = server.upgrade() else { return };
        tracing::debug!(server = server.name(), "{line}");
        let line: String = line.chars().take(STDERR_LINE_CHARS).collect();
        let mut tail = server.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == STDERR_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
}

/// A streamable HTTP transport on a reqwest client with rustls (ring, the webpki roots),
/// redirects refused (a redirected POST would lose its body or leak headers to another host).
fn http_transport(
    url: &str,
    headers: &std::collections::BTreeMap<String, secrecy::SecretString>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    use reqwest::header::{HeaderName, HeaderValue};
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| format!("invalid header name '{name}': {e}"))?;
        let mut value = HeaderValue::from_str(value.expose_secret())
            .map_err(|_| format!("the value of header '{name}' is not a valid header value"))?;
        value.set_sensitive(true);
        custom.insert(name, value);
    }
    let client = crate::tls::http_client_builder()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .pool_max_idle_per_host(0)
        .build()
        .map_err(|e| format!("the HTTP client could not be built: {e}"))?;
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}
