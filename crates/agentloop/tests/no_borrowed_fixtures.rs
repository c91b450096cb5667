//! Data another project recorded is never committed to the repository: the provider responses
//! published as test fixtures by vercel/ai and pydantic-ai live beside it, in
//! `../shared/fixtures/` relative to the repository root, and the tests read them there
//! (`shared_fixtures/mod.rs`). This test fails when a file git tracks is byte for byte a file
//! of that folder, naming both.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod shared_fixtures;

use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every file under `dir`, at any depth.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else if path.is_file() {
            out.push(path);
        }
    }
}

fn sha256(path: &Path) -> [u8; 32] {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Sha256::digest(bytes).into()
}

#[test]
fn no_committed_file_is_a_copy_of_a_shared_fixture() {
    let shared = shared_fixtures::shared_dir("");
    let mut files = Vec::new();
    files_under(&shared, &mut files);
    // Only a file of the same size can be a copy: a tracked file is hashed only then.
    let mut sizes = HashSet::new();
    let mut by_hash: HashMap<[u8; 32], PathBuf> = HashMap::new();
    for file in files {
        let size = std::fs::metadata(&file).unwrap().len();
        if size > 0 {
            sizes.insert(size);
            by_hash.insert(sha256(&file), file);
        }
    }
    assert!(!by_hash.is_empty(), "{} holds no files", shared.display());

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let listed = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| panic!("git ls-files in {}: {e}", root.display()));
    assert!(
        listed.status.success(),
        "git ls-files in {}: {}",
        root.display(),
        String::from_utf8_lossy(&listed.stderr)
    );
    let mut copies = Vec::new();
    let mut tracked = 0;
    for name in listed.stdout.split(|&b| b == 0).filter(|name| !name.is_empty()) {
        tracked += 1;
        let name = String::from_utf8_lossy(name);
        let path = root.join(name.as_ref());
        // A file deleted from the work tree and not yet from the index is not there to read.
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if !meta.is_file() || !sizes.contains(&meta.len()) {
            continue;
        }
        if let Some(original) = by_hash.get(&sha256(&path)) {
            copies.push(format!("{name} is a copy of {}", original.display()));
        }
    }
    assert!(tracked > 100, "git ls-files listed only {tracked} files in {}", root.display());
    assert!(
        copies.is_empty(),
        "data another project recorded is committed; it belongs only in {} (read it from there \
         and `git rm` the copy):\n  {}",
        shared.display(),
        copies.join("\n  ")
    );
}
