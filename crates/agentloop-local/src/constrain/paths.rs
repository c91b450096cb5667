//! The paths a file tool's call may name: what exists in the workspace when the request is
//! made. A small model makes paths up (SmolLM2-135M asked `list_dir` for `./list_dir/b.csv`,
//! a name from a worked example); with the workspace known, the grammar of a `read_file`
//! call admits only its files and that of a `list_dir` call only its directories.

use agentloop::tool::builtin::{ListDir, ReadFile};
use agentloop::tool::{Tool, ToolSpec};
use serde_json::{json, Value};
use std::path::Path;

/// Entries listed at most; a workspace with more is not enumerated (any path may be named).
pub(crate) const MAX_ENTRIES: usize = 200;
/// Directory levels listed below the root, at most.
const MAX_DEPTH: usize = 3;

/// The files and directories of a workspace, as paths relative to it (`/`-separated, sorted;
/// the root is `.`). Hidden entries (a name starting with `.`) and symbolic links are left
/// out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathChoices {
    pub(crate) files: Vec<String>,
    pub(crate) dirs: Vec<String>,
}

impl PathChoices {
    /// Lists `root`; `None` when it cannot be read or holds more than [`MAX_ENTRIES`]
    /// entries within [`MAX_DEPTH`] levels.
    pub(crate) fn list(root: &Path) -> Option<Self> {
        let mut choices = Self { files: Vec::new(), dirs: vec![".".to_owned()] };
        let mut pending = vec![(root.to_path_buf(), String::new(), 0usize)];
        while let Some((dir, prefix, depth)) = pending.pop() {
            for entry in std::fs::read_dir(&dir).ok()? {
                let entry = entry.ok()?;
                let Ok(name) = entry.file_name().into_string() else { continue };
                if name.starts_with('.') {
                    continue;
                }
                let kind = entry.file_type().ok()?;
                let path = format!("{prefix}{name}");
                if kind.is_dir() {
                    if depth < MAX_DEPTH {
                        pending.push((entry.path(), format!("{path}/"), depth + 1));
                    }
                    choices.dirs.push(path);
                } else if kind.is_file() {
                    choices.files.push(path);
                }
                // (The root, `.`, is not an entry.)
                if choices.files.len() + choices.dirs.len() - 1 > MAX_ENTRIES {
                    return None;
                }
            }
        }
        choices.files.sort();
        choices.dirs.sort();
        Some(choices)
    }

    /// The parameters of `tool` with its `path` argument limited to these choices, for the
    /// workspace's file tools (`read_file`: a file, `list_dir`: a directory); `None` for
    /// another tool, or when there is nothing to choose from.
    pub(crate) fn parameters(&self, tool: &ToolSpec) -> Option<Value> {
        let choices = if tool.name == ReadFile::NAME {
            &self.files
        } else if tool.name == ListDir::NAME {
            &self.dirs
        } else {
            return None;
        };
        if choices.is_empty() {
            return None;
        }
        let mut parameters = tool.parameters.clone();
        let path = parameters.get_mut("properties")?.as_object_mut()?.get_mut("path")?;
        let description = path.get("description").cloned();
        let mut limited = json!({ "type": "string", "enum": choices });
        if let (Some(description), Some(map)) = (description, limited.as_object_mut()) {
            map.insert("description".into(), description);
        }
        *path = limited;
        Some(parameters)
    }
}

/// The tools a forced call may choose from when a file tool is among `tools`, limited to the
/// workspace at `root` ([`limit_tools`]); `None` without a file tool, or when the workspace
/// is not enumerated ([`PathChoices::list`]).
pub(crate) fn limit(
    root: &Path,
    tools: &[&ToolSpec],
    question: Option<&str>,
) -> Option<Vec<ToolSpec>> {
    let file_tool = |tool: &&&ToolSpec| tool.name == ReadFile::NAME || tool.name == ListDir::NAME;
    tools.iter().find(file_tool)?;
    Some(limit_tools(tools, &PathChoices::list(root)?, question))
}

/// The tools a forced call may choose from, the file tools' `path` limited to `choices`
/// ([`PathChoices::parameters`]). When `question` names one of the workspace's files (a
/// whole word) and there is another tool to call, `list_dir` is left out: the question is
/// about the file, not the listing (SmolLM2-135M listed the folder for "What is the first
/// line of notes.txt?" and "Show me the contents of data.csv.").
pub(crate) fn limit_tools(
    tools: &[&ToolSpec],
    choices: &PathChoices,
    question: Option<&str>,
) -> Vec<ToolSpec> {
    let names_a_file = question.is_some_and(|q| choices.files.iter().any(|f| names(q, f)));
    let others = tools.iter().any(|tool| tool.name != ListDir::NAME);
    tools
        .iter()
        .filter(|tool| !(names_a_file && others && tool.name == ListDir::NAME))
        .map(|tool| match choices.parameters(tool) {
            Some(parameters) => ToolSpec { parameters, ..(*tool).clone() },
            None => (*tool).clone(),
        })
        .collect()
}

/// Whether `text` holds `path` as a word of its own (not inside a longer name: `a.txt` is
/// not named by `data.txt`, nor `notes.txt` by `notes.txt.bak`).
fn names(text: &str, path: &str) -> bool {
    let part = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '/');
    text.match_indices(path).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let mut after = text[at + path.len()..].chars();
        let extends = match after.next() {
            Some('.') => after.next().is_some_and(part),
            Some(c) => part(c),
            None => false,
        };
        !before.is_some_and(|c| part(c) || c == '.') && !extends
    })
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;
