//! Where the tests find data that other projects recorded (provider responses published as
//! test fixtures by vercel/ai and pydantic-ai): `shared/fixtures/` beside the repository, that
//! is `../shared/fixtures/` relative to the repository root. Such data is never committed to
//! the repository (`tests/no_borrowed_fixtures.rs` holds that); a test that needs it fails,
//! naming the path it expected, when the folder is missing.
#![allow(dead_code, clippy::panic)]

use std::path::{Component, Path, PathBuf};

/// `path` with its `..` and `.` resolved without touching the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The folder `sub` of `../shared/fixtures/` (relative to the repository root); `""` for the
/// folder itself. Panics, naming the expected path, when it is not a directory.
pub fn shared_dir(sub: &str) -> PathBuf {
    let root = lexical(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures")));
    let dir = if sub.is_empty() { root } else { root.join(sub) };
    if !dir.is_dir() {
        panic!(
            "missing directory {}: the data other projects recorded is not in the repository; \
             it is read from `../shared/fixtures/` relative to the repository root (a copy of \
             `shared/` must sit beside the checkout)",
            dir.display()
        );
    }
    dir
}

/// The folder `sub` of the recorded provider responses, `../shared/fixtures/recorded/<sub>`
/// (`""` for the folder itself).
pub fn recorded_dir(sub: &str) -> PathBuf {
    shared_dir(&if sub.is_empty() { "recorded".to_owned() } else { format!("recorded/{sub}") })
}

/// The text of the recorded file `../shared/fixtures/recorded/<dir>/<name>`.
pub fn recorded(dir: &str, name: &str) -> String {
    let path = recorded_dir(dir).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
