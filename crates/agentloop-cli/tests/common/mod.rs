//! What the CLI's process tests share: a Redis key space of a test's own (deleted when the
//! test ends), child processes that die with the test, and SSE parsing.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use std::process::Child;

/// The Redis URL (`AGENTLOOP_REDIS_URL`), or `None` with a notice (the test is skipped).
pub fn redis_url() -> Option<String> {
    match std::env::var("AGENTLOOP_REDIS_URL") {
        Ok(url) => Some(url),
        Err(_) => {
            eprintln!("skipped: AGENTLOOP_REDIS_URL is not set");
            None
        }
    }
}

/// A key prefix of a test's own; every key under it is deleted when the test ends (passed or
/// not).
pub struct Keys {
    pub url: String,
    pub prefix: String,
}

impl Keys {
    pub fn new(url: &str, test: &str) -> Self {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        let prefix = format!("agentloop-test:cli-{test}:{}-{nanos}:", std::process::id());
        Self { url: url.to_owned(), prefix }
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        let Ok(mut conn) = redis::Client::open(self.url.as_str()).and_then(|c| c.get_connection())
        else {
            return;
        };
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*", self.prefix))
            .query(&mut conn)
            .unwrap_or_default();
        for chunk in keys.chunks(500) {
            let _: Result<i64, _> = redis::cmd("DEL").arg(chunk).query(&mut conn);
        }
    }
}

/// A child process, killed if the test ends before it does.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// Takes the complete SSE events off the front of `buffer`: each `(id, data as JSON)`.
pub fn drain_events(buffer: &mut String) -> Vec<(Option<String>, Value)> {
    let mut events = Vec::new();
    while let Some(end) = buffer.find("\n\n") {
        let block: String = buffer.drain(..end + 2).collect();
        let (mut id, mut data) = (None, String::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().to_owned());
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
        if !data.is_empty() {
            events.push((id, serde_json::from_str(&data).unwrap()));
        }
    }
    events
}

/// `agentloop` in `dir` as a new user runs it: its home in `dir`, no provider key, base URL,
/// provider or configuration from the caller's environment, no colours.
pub fn cli(dir: &std::path::Path) -> assert_cmd::Command {
    let mut command = assert_cmd::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    command.current_dir(dir).env("HOME", dir).env("XDG_CONFIG_HOME", dir).env("NO_COLOR", "1");
    for name in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "AGENTLOOP_BASE_URL",
        "AGENTLOOP_PROVIDER",
        "AGENTLOOP_CONFIG",
    ] {
        command.env_remove(name);
    }
    command
}

/// `agentloop` in `dir`, with the queue `url` (`AGENTLOOP_QUEUE`), its home in `dir` and none
/// of the caller's configuration or log settings.
pub fn agentloop(dir: &std::path::Path, url: &str) -> std::process::Command {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("agentloop"));
    command
        .current_dir(dir)
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir)
        .env_remove("AGENTLOOP_CONFIG")
        .env_remove("AGENTLOOP_SERVE_TOKEN")
        .env_remove("AGENTLOOP_LOG")
        .env("AGENTLOOP_QUEUE", url)
        .stdin(std::process::Stdio::null());
    command
}

/// `agentloop worker ARGS…` in `dir` on the queue `url`, once it said it started; its stderr
/// lines go to the receiver.
pub fn worker(
    dir: &std::path::Path,
    url: &str,
    args: &[&str],
) -> (Running, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut child = Running(
        agentloop(dir, url)
            .arg("worker")
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (lines, receiver) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match receiver.recv_timeout(left) {
            Ok(line) if line.contains("worker: started") => return (child, receiver),
            Ok(_) => {}
            Err(error) => panic!("the worker did not start: {error}"),
        }
    }
}
