//! `agentloop chat` in a real terminal (tmux): streamed output appears piece by piece, and an
//! approval prompt is answered with `y` and with `n`. Skipped with a notice when tmux is not
//! installed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    session: String,
}

impl Tmux {
    fn start(dir: &Path, command: &str) -> Option<Self> {
        if Command::new("tmux").arg("-V").output().map_or(true, |o| !o.status.success()) {
            eprintln!("skipping: tmux is not installed");
            return None;
        }
        let session = format!(
            "agentloop-test-{}-{}",
            std::process::id(),
            Instant::now().elapsed().as_nanos()
        );
        let status = Command::new("tmux")
            .args(["new-session", "-d", "-s", &session, "-x", "160", "-y", "50", "-c"])
            .arg(dir)
            .arg(command)
            .status()
            .unwrap();
        assert!(status.success());
        Some(Self { session })
    }

    fn screen(&self) -> String {
        let output = Command::new("tmux")
            .args(["capture-pane", "-p", "-J", "-t", &self.session, "-S", "-200"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn send(&self, keys: &str) {
        let status = Command::new("tmux")
            .args(["send-keys", "-t", &self.session, keys, "Enter"])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits until the screen satisfies `check`; returns every distinct screen seen.
    fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen: Vec<String> = Vec::new();
        loop {
            let screen = self.screen();
            if seen.last() != Some(&screen) {
                seen.push(screen.clone());
            }
            if check(&screen) {
                return seen;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(15));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.session]).status();
    }
}

#[test]
fn chat_streams_output_and_asks_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let long =
        "This answer arrives in small pieces so that the terminal shows it growing word by word.";
    let script = json!([
        {"text": long, "chunk_delay_ms": 40},
        {"text": "Writing it.", "tool_calls": [{"name": "write_file", "arguments": {"path": "approved.txt", "content": "yes"}}]},
        {"text": "The file is written."},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "declined.txt", "content": "no"}}]},
        {"text": "I did not write it."}
    ]);
    std::fs::write(dir.path().join("script.json"), script.to_string()).unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        "[provider]\nkind = \"scripted\"\nscript = \"script.json\"\n\n[tools]\nenabled = [\"write_file\"]\nrequire_approval = [\"write_file\"]\n",
    )
    .unwrap();
    let binary = env!("CARGO_BIN_EXE_agentloop");
    let command =
        format!("env -u AGENTLOOP_CONFIG HOME={} {binary} chat; sleep 30", dir.path().display());
    let Some(tmux) = Tmux::start(dir.path(), &command) else { return };

    tmux.wait_for("the prompt", |s| s.contains("you> "));
    tmux.send("Tell me something long.");
    let screens = tmux.wait_for("the whole answer", |s| s.contains(long));
    let partial = screens.iter().any(|s| s.contains("This answer") && !s.contains("word by word."));
    assert!(partial, "the answer was seen growing (streamed), screens: {}", screens.len());

    tmux.send("Write the file.");
    tmux.wait_for("the approval prompt", |s| s.contains("Allow write_file("));
    tmux.send("y");
    tmux.wait_for("the answer after the write", |s| s.contains("The file is written."));
    assert_eq!(std::fs::read_to_string(dir.path().join("approved.txt")).unwrap(), "yes");

    tmux.send("Write another file.");
    tmux.wait_for("the second approval prompt", |s| s.matches("Allow write_file(").count() == 2);
    tmux.send("n");
    let screens =
        tmux.wait_for("the answer after the refusal", |s| s.contains("I did not write it."));
    let last = screens.last().unwrap();
    assert!(last.contains("✗ write_file: the call was rejected: the user declined"), "{last}");
    assert!(!dir.path().join("declined.txt").exists());

    tmux.send("/exit");
}
