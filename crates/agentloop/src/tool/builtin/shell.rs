//! `shell`: runs a command with `sh -c` in a working directory, under a timeout, with its
//! output cut to a limit. Give it to an agent only behind an approval hook (the CLI always
//! asks before each call).
//!
//! The command runs in a process group of its own, and the whole group is killed — not only
//! `sh` — when the call times out or is cancelled, and when `sh` exits (what it left running
//! in the background is stopped, and the call does not wait for it).

use crate::tool::{Tool, ToolContext};
use process_wrap::tokio::{ChildWrapper, CommandWrap};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

/// Runs shell commands.
#[derive(Debug, Clone)]
pub struct Shell {
    workdir: PathBuf,
    timeout: Duration,
    max_output: usize,
}

/// Arguments of [`Shell`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShellArgs {
    /// The command line, run with `sh -c`.
    pub command: String,
}

impl Shell {
    /// Runs in `workdir` with a 60 s timeout and 64 KiB of output.
    pub fn new(workdir: impl Into<PathBuf>) -> Self {
        Self { workdir: workdir.into(), timeout: Duration::from_secs(60), max_output: 64 * 1024 }
    }

    /// The timeout (the process is killed when it passes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Output beyond this many bytes (stdout and stderr each) is cut.
    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    fn cut(&self, bytes: &[u8]) -> String {
        let mut text =
            String::from_utf8_lossy(&bytes[..bytes.len().min(self.max_output)]).into_owned();
        if bytes.len() > self.max_output {
            text.push_str(&format!("\n[… {} more bytes cut]", bytes.len() - self.max_output));
        }
        text
    }
}

impl Tool for Shell {
    const NAME: &'static str = "shell";
    type Args = ShellArgs;
    type Output = String;
    type Error = String;

    fn description(&self) -> String {
        "Run a shell command (sh -c) in the workspace and return its exit code, stdout and stderr."
            .into()
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn call(&self, args: ShellArgs, _ctx: ToolContext) -> Result<String, String> {
        let mut command = tokio::process::Command::new("sh");
        command
            .arg("-c")
            .arg(&args.command)
            .current_dir(&self.workdir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut command = CommandWrap::from(command);
        #[cfg(unix)]
        command.wrap(process_wrap::tokio::ProcessGroup::leader());
        let mut child = command.spawn().map_err(|e| format!("could not start the command: {e}"))?;
        let stdout = child.stdout().take().map(read_all);
        let stderr = child.stderr().take().map(read_all);
        // Dropping the future (timeout, cancel) drops the group, which kills it.
        let mut group = Group { child, done: false };
        let status = group.child.inner_mut().wait().await;
        // `sh` is done: what is left of its group goes too, then its pipes close.
        group.stop().await;
        let status = status.map_err(|e| format!("could not wait for the command: {e}"))?;
        let stdout = collect(stdout).await;
        let stderr = collect(stderr).await;
        let code = status.code().map_or_else(|| "killed by a signal".to_owned(), |c| c.to_string());
        Ok(format!(
            "exit code: {code}\nstdout:\n{}\nstderr:\n{}",
            self.cut(&stdout),
            self.cut(&stderr)
        ))
    }
}

/// A command's process group, killed when dropped before it was stopped.
struct Group {
    child: Box<dyn ChildWrapper>,
    done: bool,
}

impl Group {
    /// Kills what is left of the group and reaps it.
    async fn stop(&mut self) {
        // An error here means no process of the group is left.
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        self.done = true;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.child.start_kill();
        }
    }
}

/// Reads a pipe to its end on a task of its own (both pipes are read while the command runs,
/// so that neither fills up and blocks it).
fn read_all(
    mut pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
) -> tokio::task::JoinHandle<Vec<u8>> {
    tokio::spawn(async move {
        let mut bytes = Vec::new();
        // What was read before an error is kept.
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut pipe, &mut bytes).await;
        bytes
    })
}

async fn collect(pipe: Option<tokio::task::JoinHandle<Vec<u8>>>) -> Vec<u8> {
    match pipe {
        Some(task) => task.await.unwrap_or_default(),
        None => Vec::new(),
    }
}
