//! The shipped contracts compile, and each rule of the compiler (unknown tools and subsystems,
//! closures, read-role eligibility, strict fields, boot order, bundles, feature gates) rejects a
//! scratch copy edited to break it, naming the file and the entry.

use std::path::{Path, PathBuf};
use vox_contracts::*;

fn repo_contracts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contracts")
}

/// Copies the real contracts into a temp dir so a test can break one file.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&repo_contracts(), dir.path());
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn edit(dir: &Path, rel: &str, from: &str, to: &str) {
    let p = dir.join(rel);
    let text = std::fs::read_to_string(&p).unwrap();
    assert!(text.contains(from), "{rel} does not contain {from}");
    std::fs::write(p, text.replacen(from, to, 1)).unwrap();
}

fn compile_err(dir: &Path) -> String {
    load_and_compile(dir, &|_| false).unwrap_err().to_string()
}

#[test]
fn shipped_contracts_compile() {
    let reg = load_and_compile(&repo_contracts(), &|_| false).unwrap();
    assert!(reg.tools.windows(2).all(|w| w[0].row.name < w[1].row.name));
    let knowledge = reg.profiles.iter().find(|p| p.id == "knowledge").unwrap();
    assert!(
        knowledge
            .tools
            .iter()
            .any(|&i| reg.tools[i].row.name == "vox_memory_recall")
    );
    assert!(
        !knowledge
            .tools
            .iter()
            .any(|&i| reg.tools[i].row.name.starts_with("vox_repo_"))
    );
    let attention = reg.profiles.iter().find(|p| p.id == "attention").unwrap();
    let names: Vec<&str> = attention
        .tools
        .iter()
        .map(|&i| reg.tools[i].row.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "vox_attention_history",
            "vox_attention_reset",
            "vox_budget_status",
            "vox_trust_override"
        ]
    );
}

#[test]
fn unmatched_prefix_is_a_warning_naming_file_and_entry() {
    let reg = load_and_compile(&repo_contracts(), &|_| false).unwrap();
    let w = reg
        .warnings
        .iter()
        .find(|w| w.entry.contains("vox_browser_*"))
        .expect("the browser prefix warns until browser tools land");
    assert!(w.path.ends_with("profiles/browser.v1.yaml"));
}

#[test]
fn unknown_exact_tool_is_an_error_naming_file_and_entry() {
    let dir = scratch();
    edit(
        dir.path(),
        "profiles/attention.v1.yaml",
        "vox_budget_status",
        "vox_budget_statuz",
    );
    let err = compile_err(dir.path());
    assert!(err.contains("profiles/attention.v1.yaml"), "{err}");
    assert!(
        err.contains("vox_budget_statuz") && err.contains("unknown tool"),
        "{err}"
    );
}

#[test]
fn unknown_subsystem_in_a_profile_is_an_error() {
    let dir = scratch();
    edit(
        dir.path(),
        "profiles/knowledge.v1.yaml",
        "requires: [memory,",
        "requires: [memoir,",
    );
    let err = compile_err(dir.path());
    assert!(
        err.contains("knowledge.v1.yaml") && err.contains("unknown subsystem `memoir`"),
        "{err}"
    );
}

#[test]
fn unknown_subsystem_in_the_catalog_is_an_error() {
    let dir = scratch();
    edit(
        dir.path(),
        "operations/catalog.v1.yaml",
        "requires: [attention, db]",
        "requires: [attention, dbx]",
    );
    let err = compile_err(dir.path());
    assert!(
        err.contains("catalog.v1.yaml") && err.contains("unknown subsystem `dbx`"),
        "{err}"
    );
}

#[test]
fn tool_not_covered_by_profile_closure_is_an_error() {
    let dir = scratch();
    edit(
        dir.path(),
        "profiles/attention.v1.yaml",
        "vox_trust_override]",
        "vox_trust_override, vox_cost_history]",
    );
    let err = compile_err(dir.path());
    assert!(
        err.contains("attention.v1.yaml") && err.contains("tool vox_cost_history"),
        "{err}"
    );
    assert!(err.contains("db"), "{err}");
}

#[test]
fn writing_tool_cannot_be_read_role_eligible() {
    let dir = scratch();
    edit(
        dir.path(),
        "operations/catalog.v1.yaml",
        "side_effect_class: writes_state\n    http_read_role_eligible: false",
        "side_effect_class: writes_state\n    http_read_role_eligible: true",
    );
    let err = compile_err(dir.path());
    assert!(err.contains("cannot be http_read_role_eligible"), "{err}");
}

#[test]
fn unknown_field_in_a_manifest_is_an_error() {
    let dir = scratch();
    edit(
        dir.path(),
        "profiles/lang.v1.yaml",
        "max_exposure:",
        "max_exposur: public\nmax_exposure:",
    );
    let err = compile_err(dir.path());
    assert!(
        err.contains("lang.v1.yaml") && err.contains("max_exposur"),
        "{err}"
    );
}

#[test]
fn boot_order_must_respect_dependencies() {
    let dir = scratch();
    edit(
        dir.path(),
        "subsystems.v1.yaml",
        "boot_order:\n  - db\n",
        "boot_order:\n",
    );
    edit(
        dir.path(),
        "subsystems.v1.yaml",
        "  - attention_calibration\n",
        "  - attention_calibration\n  - db\n",
    );
    let err = compile_err(dir.path());
    assert!(err.contains("before its dependency `db`"), "{err}");
}

#[test]
fn bundles_parse_and_reject_unknown_keys() {
    let b = load_bundles(&repo_contracts()).unwrap();
    assert_eq!(
        b.bundles["vox-server"].profile.as_deref(),
        Some("orchestrator,knowledge,mesh")
    );
    assert_eq!(b.bundles["vox-base"].profile, None);
    let err = parse_bundles("version = 1\n[bundles.x]\ndescription = \"d\"\nprofle = \"dev\"\n")
        .unwrap_err();
    assert!(err.contains("profle"), "{err}");
}

#[test]
fn the_research_publish_tools_are_built_only_with_news_publish() {
    let publish = [
        "vox_news_approve",
        "vox_news_publish",
        "vox_scientia_submissions",
        "vox_external_job_status",
    ];
    for on in [false, true] {
        let reg = load_and_compile(&repo_contracts(), &|f| on && f == "news-publish").unwrap();
        for name in publish {
            let t = reg.tools.iter().find(|t| t.row.name == name).unwrap();
            assert_eq!(t.built, on, "{name} with news-publish {on}");
            assert_eq!(t.row.feature.as_deref(), Some("news-publish"));
        }
        assert!(
            reg.tools
                .iter()
                .find(|t| t.row.name == "vox_news_draft")
                .unwrap()
                .built
        );
    }
}
