//! `shell`: runs a command with `sh -c` in a working directory, under a timeout, with its
//! output cut to a limit. Give it to an agent only behind an approval hook (the CLI always
//! asks before each call).

use crate::tool::{Tool, ToolContext};
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
        // Dropping the future (timeout, cancel) kills the process.
        let output = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&args.command)
            .current_dir(&self.workdir)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| format!("could not start the command: {e}"))?;
        let code =
            output.status.code().map_or_else(|| "killed by a signal".to_owned(), |c| c.to_string());
        Ok(format!(
            "exit code: {code}\nstdout:\n{}\nstderr:\n{}",
            self.cut(&output.stdout),
            self.cut(&output.stderr)
        ))
    }
}
