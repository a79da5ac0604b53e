//! The loader on temporary workspaces: federation and its collision rules, the surface file and its
//! budgets, diagnostics, and the compile cache.

use std::path::Path;
use vox_workspace_mcp::*;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn is_static(name: &str) -> bool {
    name.starts_with("vox_")
}

const GREET: &str = "@tool \"Say hello\"\nfn greet(name: str) to str {\n    \"Hello {name}\"\n}\n\n@mcp.resource(\"docs://readme\", \"The readme\")\nfn readme() to str {\n    \"# readme\"\n}\n";

#[test]
fn tools_and_resources_are_federated_with_schemas() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "tools/greet.vox", GREET);
    let loader = WorkspaceMcpLoader::new(dir.path().to_path_buf());
    let s = loader.scan(&is_static).unwrap();
    let t = &s.tools["greet"];
    assert_eq!(t.description, "Say hello");
    assert_eq!(t.file, "tools/greet.vox");
    assert_eq!(t.input_schema["required"], serde_json::json!(["name"]));
    let r = &s.resources["docs://readme"];
    assert_eq!(r.description, "The readme");
    let out = t
        .module
        .call_json(
            "greet",
            &serde_json::json!({"name": "Ada"}),
            &Default::default(),
        )
        .unwrap();
    assert_eq!(out.value, serde_json::json!("Hello Ada"));
    assert_eq!(
        r.module
            .read_resource("docs://readme", &Default::default())
            .unwrap()
            .text
            .as_deref(),
        Some("# readme")
    );
    assert_eq!((s.report.tool_count, s.report.resource_count), (1, 1));
}

#[test]
fn a_workspace_resource_cannot_take_a_skill_uri() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.vox",
        "@mcp.resource(\"skill://index.json\")\nfn fake() to str { \"not the index\" }\n",
    );
    let s = WorkspaceMcpLoader::new(dir.path().to_path_buf())
        .scan(&is_static)
        .unwrap();
    assert!(s.resources.is_empty());
    assert_eq!(
        s.report.shadowed,
        [Skipped {
            name: "skill://index.json".into(),
            file: "a.vox".into(),
            kept_from: None
        }]
    );
}

#[test]
fn static_names_shadow_and_the_first_file_wins() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.vox",
        "@tool\nfn vox_memory_store() to str { \"mine\" }\n\n@tool\nfn dup() to int { 1 }\n\n@mcp.resource(\"r://x\")\nfn rx() to str { \"a\" }\n",
    );
    write(
        dir.path(),
        "b.vox",
        "@tool\nfn dup() to int { 2 }\n\n@mcp.resource(\"r://x\")\nfn ry() to str { \"b\" }\n",
    );
    let s = WorkspaceMcpLoader::new(dir.path().to_path_buf())
        .scan(&is_static)
        .unwrap();
    assert!(!s.tools.contains_key("vox_memory_store"));
    assert_eq!(
        s.report.shadowed,
        [Skipped {
            name: "vox_memory_store".into(),
            file: "a.vox".into(),
            kept_from: None
        }]
    );
    assert_eq!(s.tools["dup"].file, "a.vox");
    assert_eq!(
        s.report.duplicate_tools[0],
        Skipped {
            name: "dup".into(),
            file: "b.vox".into(),
            kept_from: Some("a.vox".into())
        }
    );
    assert_eq!(s.resources["r://x"].file, "a.vox");
    assert_eq!(s.report.duplicate_resources[0].file, "b.vox");
}

#[test]
fn a_broken_file_is_reported_and_the_scan_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "bad.vox", "@tool\nfn broken( {\n");
    write(dir.path(), "good.vox", GREET);
    let s = WorkspaceMcpLoader::new(dir.path().to_path_buf())
        .scan(&is_static)
        .unwrap();
    assert!(s.tools.contains_key("greet"));
    assert_eq!(s.report.errors.len(), 1);
    assert_eq!(s.report.errors[0].file, "bad.vox");
    assert!(
        s.report.errors[0].diagnostic.contains("bad.vox:"),
        "{:?}",
        s.report.errors
    );
}

#[test]
fn default_excludes_and_the_surface_file_globs() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "target/x.vox",
        "@tool\nfn in_target() to int { 1 }\n",
    );
    write(
        dir.path(),
        "node_modules/y.vox",
        "@tool\nfn in_modules() to int { 1 }\n",
    );
    write(dir.path(), "src/z.vox", "@tool\nfn in_src() to int { 1 }\n");
    write(
        dir.path(),
        "other/w.vox",
        "@tool\nfn in_other() to int { 1 }\n",
    );
    let loader = WorkspaceMcpLoader::new(dir.path().to_path_buf());
    let names: Vec<String> = loader.scan(&is_static).unwrap().tools.into_keys().collect();
    assert_eq!(names, ["in_other", "in_src"]);
    write(
        dir.path(),
        SURFACE_FILE,
        "version: 1\nscan_globs: [\"src/**/*.vox\"]\nexclude_globs: []\n",
    );
    let names: Vec<String> = loader.scan(&is_static).unwrap().tools.into_keys().collect();
    assert_eq!(names, ["in_src"]);
    write(
        dir.path(),
        SURFACE_FILE,
        "version: 1\nscan_glob: [\"src/**\"]\n",
    );
    let err = loader.scan(&is_static).err().unwrap().to_string();
    assert!(
        err.contains("workspace-mcp-surface.v1.yaml") && err.contains("scan_glob"),
        "{err}"
    );
}

#[test]
fn files_compile_once_until_their_content_changes() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.vox", GREET);
    write(dir.path(), "b.vox", "@tool\nfn two() to int { 2 }\n");
    let loader = WorkspaceMcpLoader::new(dir.path().to_path_buf());
    assert_eq!(loader.scan(&is_static).unwrap().report.compiled, 2);
    assert_eq!(loader.scan(&is_static).unwrap().report.compiled, 0);
    write(dir.path(), "b.vox", "@tool\nfn three() to int { 3 }\n");
    let s = loader.scan(&is_static).unwrap();
    assert_eq!(s.report.compiled, 1);
    assert!(s.tools.contains_key("three") && !s.tools.contains_key("two"));
}

#[test]
fn a_tool_file_is_recompiled_when_a_file_it_imports_changes() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "tools/t.vox",
        "import lib.n.{value}\n@tool\nfn get() to int { value() }\n",
    );
    write(dir.path(), "tools/lib/n.vox", "fn value() to int { 1 }\n");
    let loader = WorkspaceMcpLoader::new(dir.path().to_path_buf());
    let call = |s: &Surface| {
        s.tools["get"]
            .module
            .call_json("get", &serde_json::Value::Null, &Default::default())
            .unwrap()
            .value
    };
    let s = loader.scan(&is_static).unwrap();
    assert_eq!(s.report.compiled, 2);
    assert_eq!(call(&s), serde_json::json!(1));
    // Unchanged: nothing is compiled again.
    assert_eq!(loader.scan(&is_static).unwrap().report.compiled, 0);
    // The imported file changes: the importer is compiled again (and the helper itself).
    write(dir.path(), "tools/lib/n.vox", "fn value() to int { 2 }\n");
    let s = loader.scan(&is_static).unwrap();
    assert_eq!(s.report.compiled, 2);
    assert_eq!(call(&s), serde_json::json!(2));
    // An error in the imported file is reported at the importer too; the importer's tool
    // still loads, and calling the broken function fails at run time.
    write(
        dir.path(),
        "tools/lib/n.vox",
        "fn value() to int { nope }\n",
    );
    let s = loader.scan(&is_static).unwrap();
    let err = s.tools["get"]
        .module
        .call_json("get", &serde_json::Value::Null, &Default::default())
        .unwrap_err();
    assert!(err.to_string().contains("`value` has errors"), "{err}");
    let files: Vec<&str> = s.report.errors.iter().map(|e| e.file.as_str()).collect();
    assert_eq!(files, ["tools/lib/n.vox", "tools/t.vox"]);
    assert!(
        s.report.errors[1]
            .diagnostic
            .contains("vox/import/module-has-errors"),
        "{}",
        s.report.errors[1].diagnostic
    );
}

#[test]
fn an_import_that_was_missing_is_loaded_once_its_file_appears() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "tools/t.vox",
        "import lib.n.{value}\n@tool\nfn get() { value() }\n",
    );
    let loader = WorkspaceMcpLoader::new(dir.path().to_path_buf());
    let s = loader.scan(&is_static).unwrap();
    let get = |s: &Surface| {
        s.tools["get"]
            .module
            .call_json("get", &serde_json::Value::Null, &Default::default())
    };
    assert!(get(&s).is_err(), "the import loads nothing yet");
    write(dir.path(), "tools/lib/n.vox", "fn value() { 7 }\n");
    let s = loader.scan(&is_static).unwrap();
    assert_eq!(get(&s).unwrap().value, serde_json::json!(7));
    // A file without imports is not compiled again when another file changes.
    write(dir.path(), "plain.vox", "@tool\nfn plain() { 1 }\n");
    loader.scan(&is_static).unwrap();
    write(dir.path(), "other.vox", "fn x() { 1 }\n");
    let s = loader.scan(&is_static).unwrap();
    // other.vox (new) and tools/t.vox (has imports) are compiled; plain.vox and n.vox are not.
    assert_eq!(s.report.compiled, 2);
}

#[test]
fn an_imported_file_the_scan_excludes_is_still_watched() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        SURFACE_FILE,
        "version: 1\nscan_globs: [\"**/*.vox\"]\nexclude_globs: [\"lib/**\"]\n",
    );
    write(
        dir.path(),
        "t.vox",
        "import lib.n.{value}\n@tool\nfn get() { value() }\n",
    );
    write(dir.path(), "lib/n.vox", "fn value() { 1 }\n");
    let loader = WorkspaceMcpLoader::new(dir.path().to_path_buf());
    let get = |s: &Surface| {
        s.tools["get"]
            .module
            .call_json("get", &serde_json::Value::Null, &Default::default())
            .unwrap()
            .value
    };
    let s = loader.scan(&is_static).unwrap();
    assert_eq!((s.report.files, get(&s)), (1, serde_json::json!(1)));
    assert_eq!(loader.scan(&is_static).unwrap().report.compiled, 0);
    // No scanned file changed, but the excluded file it imports did.
    write(dir.path(), "lib/n.vox", "fn value() { 2 }\n");
    let s = loader.scan(&is_static).unwrap();
    assert_eq!((s.report.compiled, get(&s)), (1, serde_json::json!(2)));
}
