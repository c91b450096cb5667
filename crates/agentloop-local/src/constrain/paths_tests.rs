use super::*;
use agentloop::tool::builtin::Workspace;
use agentloop::tool::DynTool;

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for file in ["notes.txt", "data.csv", "sub/deep/x.md", ".hidden/secret.txt", ".env"] {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x").unwrap();
    }
    #[cfg(unix)]
    std::os::unix::fs::symlink("/etc", dir.path().join("outside")).unwrap();
    dir
}

fn specs(dir: &Path) -> (ToolSpec, ToolSpec) {
    let root = Workspace::new(dir).unwrap();
    (ReadFile(root.clone()).spec(), ListDir(root).spec())
}

#[test]
fn a_workspace_lists_its_files_and_directories_without_hidden_ones_or_links() {
    let dir = workspace();
    let choices = PathChoices::list(dir.path()).unwrap();
    assert_eq!(choices.files, ["data.csv", "notes.txt", "sub/deep/x.md"]);
    assert_eq!(choices.dirs, [".", "sub", "sub/deep"]);
    assert_eq!(PathChoices::list(&dir.path().join("missing")), None);
}

#[test]
fn a_large_workspace_is_not_enumerated() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..MAX_ENTRIES {
        std::fs::write(dir.path().join(format!("f{i}")), "").unwrap();
    }
    assert_eq!(PathChoices::list(dir.path()).map(|c| c.files.len()), Some(MAX_ENTRIES));
    std::fs::write(dir.path().join("one-more"), "").unwrap();
    assert_eq!(PathChoices::list(dir.path()), None);
}

#[test]
fn the_file_tools_path_is_one_of_the_choices() {
    let dir = workspace();
    let choices = PathChoices::list(dir.path()).unwrap();
    let (read, list) = specs(dir.path());
    let read = choices.parameters(&read).unwrap();
    assert_eq!(
        read["properties"]["path"]["enum"],
        json!(["data.csv", "notes.txt", "sub/deep/x.md"])
    );
    assert_eq!(read["properties"]["path"]["description"], json!("Path relative to the workspace."));
    assert_eq!(read["required"], json!(["path"]));
    let list = choices.parameters(&list).unwrap();
    assert_eq!(list["properties"]["path"]["enum"], json!([".", "sub", "sub/deep"]));
    let other = ToolSpec { name: "shell".into(), description: String::new(), parameters: read };
    assert_eq!(choices.parameters(&other), None);
    let empty = PathChoices { files: Vec::new(), dirs: vec![".".into()] };
    assert_eq!(empty.parameters(&specs(dir.path()).0), None);
}

#[test]
fn a_question_that_names_a_file_is_not_answered_by_a_listing() {
    let dir = workspace();
    let choices = PathChoices::list(dir.path()).unwrap();
    let (read, list) = specs(dir.path());
    let names = |question: &str| -> Vec<String> {
        let tools = limit_tools(&[&read, &list], &choices, Some(question));
        tools.into_iter().map(|tool| tool.name).collect()
    };
    assert_eq!(names("What is the first line of notes.txt?"), ["read_file"]);
    assert_eq!(names("Show sub/deep/x.md"), ["read_file"]);
    for question in ["Which files are here?", "Is there a mynotes.txt?", "Read notes.txt.bak"] {
        assert_eq!(names(question), ["read_file", "list_dir"], "{question}");
    }
    // Alone, `list_dir` stays; without a question nothing is left out.
    let alone = limit_tools(&[&list], &choices, Some("What is in notes.txt?"));
    assert_eq!(alone.len(), 1);
    assert_eq!(limit_tools(&[&read, &list], &choices, None).len(), 2);
}

#[test]
fn a_request_without_file_tools_lists_nothing() {
    let dir = workspace();
    let (read, _) = specs(dir.path());
    let calculator =
        ToolSpec { name: "calculator".into(), description: String::new(), parameters: json!({}) };
    assert_eq!(limit(dir.path(), &[&calculator], Some("What is in notes.txt?")), None);
    assert_eq!(limit(&dir.path().join("missing"), &[&read], None), None);
    let limited = limit(dir.path(), &[&read, &calculator], None).unwrap();
    assert_eq!(limited[0].parameters["properties"]["path"]["enum"][0], json!("data.csv"));
    assert_eq!(limited[1], calculator);
}
