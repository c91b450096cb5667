//! File tools confined to a workspace directory: `read_file`, `list_dir`, `write_file`.
//! Absolute paths, `..` that leaves the workspace, and symlinks that point out of it are
//! refused.

use crate::tool::{Tool, ToolContext};
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::{Component, Path, PathBuf};

/// A path was refused or could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// An absolute path.
    #[error("absolute paths are not allowed ('{0}'); use a path relative to the workspace")]
    Absolute(String),
    /// A path that leads out of the workspace (by `..` or a symlink).
    #[error("'{0}' is outside the workspace")]
    Escapes(String),
    /// The file system said no.
    #[error("{0}")]
    Io(String),
}

/// The directory file tools may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// A workspace rooted at an existing directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, WorkspaceError> {
        let root = root.as_ref();
        let root = root
            .canonicalize()
            .map_err(|e| WorkspaceError::Io(format!("{}: {e}", root.display())))?;
        if !root.is_dir() {
            return Err(WorkspaceError::Io(format!("{} is not a directory", root.display())));
        }
        Ok(Self { root })
    }

    /// Its root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The lexically normalized path inside the root; refuses absolute paths and `..` that
    /// climbs above the root.
    fn join(&self, path: &str) -> Result<PathBuf, WorkspaceError> {
        let mut out = PathBuf::new();
        for component in Path::new(path).components() {
            match component {
                Component::Normal(part) => out.push(part),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !out.pop() {
                        return Err(WorkspaceError::Escapes(path.to_owned()));
                    }
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(WorkspaceError::Absolute(path.to_owned()))
                }
            }
        }
        Ok(self.root.join(out))
    }

    fn inside(&self, real: &Path, path: &str) -> Result<(), WorkspaceError> {
        if real.starts_with(&self.root) {
            Ok(())
        } else {
            Err(WorkspaceError::Escapes(path.to_owned()))
        }
    }

    /// An existing path, following symlinks, that stays inside.
    pub fn resolve_existing(&self, path: &str) -> Result<PathBuf, WorkspaceError> {
        let joined = self.join(path)?;
        let real = joined.canonicalize().map_err(|e| WorkspaceError::Io(format!("{path}: {e}")))?;
        self.inside(&real, path)?;
        Ok(real)
    }

    /// A path to write: its deepest existing ancestor (and the file, if it exists) resolve
    /// inside; missing directories are created.
    pub fn resolve_for_write(&self, path: &str) -> Result<PathBuf, WorkspaceError> {
        let joined = self.join(path)?;
        if joined == self.root {
            return Err(WorkspaceError::Io(format!("'{path}' is the workspace itself")));
        }
        if std::fs::symlink_metadata(&joined).is_ok() {
            let real =
                joined.canonicalize().map_err(|e| WorkspaceError::Io(format!("{path}: {e}")))?;
            self.inside(&real, path)?;
            return Ok(real);
        }
        let parent = joined.parent().unwrap_or(&self.root).to_path_buf();
        let mut existing = parent.as_path();
        while std::fs::symlink_metadata(existing).is_err() {
            existing = existing.parent().unwrap_or(&self.root);
        }
        let real =
            existing.canonicalize().map_err(|e| WorkspaceError::Io(format!("{path}: {e}")))?;
        self.inside(&real, path)?;
        std::fs::create_dir_all(&parent).map_err(|e| WorkspaceError::Io(format!("{path}: {e}")))?;
        Ok(joined)
    }
}

/// Reads a text file of the workspace.
#[derive(Debug, Clone)]
pub struct ReadFile(pub Workspace);

/// Arguments of [`ReadFile`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// Path relative to the workspace.
    pub path: String,
}

/// Files larger than this are read up to it, with a note.
const MAX_READ_BYTES: u64 = 1024 * 1024;

impl Tool for ReadFile {
    const NAME: &'static str = "read_file";
    type Args = ReadFileArgs;
    type Output = String;
    type Error = WorkspaceError;

    fn description(&self) -> String {
        "Read a text file of the workspace (path relative to the workspace).".into()
    }

    async fn call(&self, args: ReadFileArgs, _ctx: ToolContext) -> Result<String, WorkspaceError> {
        let path = self.0.resolve_existing(&args.path)?;
        let io = |e: std::io::Error| WorkspaceError::Io(format!("{}: {e}", args.path));
        let file = tokio::fs::File::open(&path).await.map_err(io)?;
        let size = file.metadata().await.map_err(io)?.len();
        let mut bytes = Vec::new();
        use tokio::io::AsyncReadExt;
        file.take(MAX_READ_BYTES).read_to_end(&mut bytes).await.map_err(io)?;
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        if size > MAX_READ_BYTES {
            text.push_str(&format!(
                "\n[… file truncated: {size} bytes, the first {MAX_READ_BYTES} shown]"
            ));
        }
        Ok(text)
    }
}

/// Lists a directory of the workspace.
#[derive(Debug, Clone)]
pub struct ListDir(pub Workspace);

/// Arguments of [`ListDir`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListDirArgs {
    /// Directory relative to the workspace (default: its root).
    #[serde(default)]
    pub path: Option<String>,
}

impl Tool for ListDir {
    const NAME: &'static str = "list_dir";
    type Args = ListDirArgs;
    type Output = Vec<String>;
    type Error = WorkspaceError;

    fn description(&self) -> String {
        "List a directory of the workspace: entries sorted by name; directories end with '/', symbolic links with '@'.".into()
    }

    async fn call(
        &self,
        args: ListDirArgs,
        _ctx: ToolContext,
    ) -> Result<Vec<String>, WorkspaceError> {
        let shown = args.path.unwrap_or_else(|| ".".into());
        let path = self.0.resolve_existing(&shown)?;
        let io = |e: std::io::Error| WorkspaceError::Io(format!("{shown}: {e}"));
        let mut entries = tokio::fs::read_dir(&path).await.map_err(io)?;
        let mut names = Vec::new();
        while let Some(entry) = entries.next_entry().await.map_err(io)? {
            let mut name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type().await.map_err(io)?;
            if kind.is_dir() {
                name.push('/');
            } else if kind.is_symlink() {
                name.push('@');
            }
            names.push(name);
        }
        names.sort();
        Ok(names)
    }
}

/// Writes a text file of the workspace (creating directories as needed).
#[derive(Debug, Clone)]
pub struct WriteFile(pub Workspace);

/// Arguments of [`WriteFile`].
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// Path relative to the workspace.
    pub path: String,
    /// The new content.
    pub content: String,
    /// Append instead of replacing.
    #[serde(default)]
    pub append: bool,
}

impl Tool for WriteFile {
    const NAME: &'static str = "write_file";
    type Args = WriteFileArgs;
    type Output = String;
    type Error = WorkspaceError;

    fn description(&self) -> String {
        "Write (or append to) a text file of the workspace; directories are created as needed."
            .into()
    }

    async fn call(&self, args: WriteFileArgs, _ctx: ToolContext) -> Result<String, WorkspaceError> {
        let path = self.0.resolve_for_write(&args.path)?;
        let io = |e: std::io::Error| WorkspaceError::Io(format!("{}: {e}", args.path));
        use tokio::io::AsyncWriteExt;
        let mut file = tokio::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(args.append)
            .truncate(!args.append)
            .open(&path)
            .await
            .map_err(io)?;
        file.write_all(args.content.as_bytes()).await.map_err(io)?;
        file.flush().await.map_err(io)?;
        Ok(format!("wrote {} bytes to {}", args.content.len(), args.path))
    }
}
