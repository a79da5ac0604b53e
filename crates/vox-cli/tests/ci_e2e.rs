//! `vox ci` gates: they pass on this project and fail, naming the problem, when it is broken.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn gate(ws: &Ws, args: &[&str]) -> (bool, Value) {
    let mut all = vec!["ci"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = ws.vox(&all);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "{args:?}: {} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), v)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn surface_parity_passes_on_the_example_workspace() {
    let ws = Ws::new();
    let root = project_root();
    let (ok, v) = gate(
        &ws,
        &["mcp-vox-surface-parity", "--root", root.to_str().unwrap()],
    );
    assert!(ok, "{v}");
    assert_eq!(v["problems"], serde_json::json!([]));
    // The gate served a copy: nothing was written into the project tree.
    assert!(!root.join("examples/workspace/.vox").exists());
}

#[test]
fn surface_parity_fails_on_a_missing_fixture_a_wrong_result_and_a_broken_file() {
    let ws = Ws::new();
    let root = ws.root().join("proj");
    copy_dir(
        &project_root().join("examples/workspace"),
        &root.join("examples/workspace"),
    );
    copy_dir(
        &project_root().join("contracts/mcp"),
        &root.join("contracts/mcp"),
    );
    std::fs::write(
        root.join("examples/workspace/tools/extra.vox"),
        "@tool\nfn unlisted() to int {\n    1\n}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("examples/workspace/tools/broken.vox"),
        "@tool\nfn (\n",
    )
    .unwrap();
    let fixtures = root.join("contracts/mcp/workspace-tool-fixtures.v1.json");
    let text = std::fs::read_to_string(&fixtures)
        .unwrap()
        .replace("\"expect\": 42", "\"expect\": 43");
    std::fs::write(&fixtures, text).unwrap();
    let (ok, v) = gate(
        &ws,
        &["mcp-vox-surface-parity", "--root", root.to_str().unwrap()],
    );
    assert!(!ok);
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("workspace tool unlisted has no fixture"),
        "{problems}"
    );
    assert!(
        problems.contains("tools/broken.vox does not compile"),
        "{problems}"
    );
    assert!(problems.contains("expected 43"), "{problems}");
}

#[test]
fn agentskills_compliance_passes_on_the_bundled_skills_and_names_each_problem() {
    let ws = Ws::new();
    let bundled = project_root().join("skills");
    let (ok, v) = gate(&ws, &["agentskills-compliance", bundled.to_str().unwrap()]);
    assert!(ok, "{v}");

    let bad = ws.root().join("skills");
    let write = |id: &str, text: &str| {
        std::fs::create_dir_all(bad.join(id)).unwrap();
        std::fs::write(bad.join(id).join("SKILL.md"), text).unwrap();
    };
    write("no-body", "---\nname: no-body\ndescription: d\n---\n");
    write(
        "ghost-tool",
        "---\nname: ghost-tool\ndescription: d\nallowed-tools: vox_not_a_tool vox_memory_*\n---\nbody\n",
    );
    write("Upper", "---\nname: Upper\ndescription: d\n---\nbody\n");
    let (ok, v) = gate(&ws, &["agentskills-compliance", bad.to_str().unwrap()]);
    assert!(!ok);
    let problems: Vec<String> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems[0].contains("Upper") && problems[0].contains("only lowercase"));
    assert!(problems[1].contains("vox_not_a_tool is not in the static catalog"));
    assert!(problems[2].contains("no-body") && problems[2].contains("instructions"));

    // The text report names the failure and does not print the success summary.
    let out = ws.vox(&["ci", "agentskills-compliance", bad.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("FAILED with 3 problem(s)"), "{text}");
    assert!(!text.contains("checked"), "{text}");

    let empty = ws.root().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (ok, v) = gate(&ws, &["agentskills-compliance", empty.to_str().unwrap()]);
    assert!(!ok, "{v}");
    let out = ws.vox(&["ci", "agentskills-compliance", "/nonexistent/skills"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/skills"));
}
