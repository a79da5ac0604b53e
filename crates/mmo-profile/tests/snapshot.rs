//! Snapshots as the runtime reads them: verification against MANIFEST, live homes materialized
//! from a verified snapshot, and the writer's refusal of unsafe paths.

mod common;
use common::*;
use mmo_profile::compile::Snapshot;
use mmo_profile::snapshot::{materialize, verify_snapshot};
use mmo_profile::store::{Dirs, Store};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../profiles")
        .join(name)
}

fn store(tmp: &Path) -> Store {
    Store::new(Dirs {
        data: tmp.join("data"),
        config: tmp.join("config"),
    })
}

/// Compile review-pair into a fresh store; returns the snapshot directory.
fn compiled(tmp: &Path) -> PathBuf {
    let st = store(tmp);
    let r = st
        .compile(example("review-pair").to_str().unwrap(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    st.dirs.snapshot_dir(&r.address)
}

fn overwrite(path: &Path, bytes: &[u8]) {
    fs::set_permissions(path, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(path, bytes).unwrap();
}

fn refused(dir: &Path, rule: &str, offending: &Path) {
    let err = verify_snapshot(dir).err().unwrap_or_else(|| {
        panic!("{} verified despite {rule}", dir.display());
    });
    assert!(
        err.0
            .iter()
            .any(|d| d.rule == rule && d.file == offending.display().to_string()),
        "expected [{rule}] naming {}, got:\n{err}",
        offending.display()
    );
}

#[test]
fn a_fresh_snapshot_verifies_and_names_its_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = compiled(tmp.path());
    let v = verify_snapshot(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        v.address,
        dir.file_name().unwrap().to_str().unwrap(),
        "the address is the directory's name"
    );
    assert!(v.files.contains_key("roles/lead/codex-home/config.toml"));
    assert!(!v.files.contains_key("MANIFEST"));
}

#[test]
fn a_modified_file_is_refused_with_its_path() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = compiled(tmp.path());
    let f = dir.join("roles/lead/codex-home/config.toml");
    overwrite(&f, b"model = \"something-else\"\n");
    refused(&dir, "snapshot_file_modified", &f);
}

#[test]
fn an_extra_file_or_directory_is_refused_with_its_path() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = compiled(tmp.path());
    let extra = dir.join("roles/lead/codex-home/hooks.toml");
    fs::write(&extra, "x").unwrap();
    refused(&dir, "snapshot_extra_file", &extra);
    fs::remove_file(&extra).unwrap();
    let extra_dir = dir.join("roles/lead/codex-home/plugins");
    fs::create_dir(&extra_dir).unwrap();
    refused(&dir, "snapshot_extra_file", &extra_dir);
}

#[test]
fn a_missing_file_a_symlink_or_a_changed_manifest_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = compiled(tmp.path());
    let f = dir.join("roles/reviewer/AGENTS.md");
    let original = fs::read(&f).unwrap();
    fs::remove_file(&f).unwrap();
    refused(&dir, "snapshot_file_missing", &f);
    // The same bytes behind a symlink are still not the snapshot's file.
    let elsewhere = tmp.path().join("agents.md");
    fs::write(&elsewhere, &original).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &f).unwrap();
    refused(&dir, "snapshot_not_regular", &f);
    fs::remove_file(&f).unwrap();
    fs::write(&f, &original).unwrap();
    verify_snapshot(&dir).unwrap_or_else(|e| panic!("restored: {e}"));
    let manifest = dir.join("MANIFEST");
    let mut text = fs::read(&manifest).unwrap();
    text.extend_from_slice(b"\n");
    overwrite(&manifest, &text);
    refused(&dir, "snapshot_manifest_digest", &manifest);
}

#[test]
fn a_snapshot_of_another_generation_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = compiled(tmp.path());
    // Rewrite snapshot.json and MANIFEST consistently under a new address, as an older
    // package's compiler would have produced them.
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&dir).unwrap().to_str().unwrap().to_string();
                files.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    files.remove("MANIFEST");
    let old = String::from_utf8(files["snapshot.json"].clone())
        .unwrap()
        .replace("\"8.0.0\"", "\"7.4.0\"");
    files.insert("snapshot.json".into(), old.into_bytes());
    use sha2::Digest;
    let mut manifest = String::new();
    for (p, b) in &files {
        manifest.push_str(&format!(
            "{}  {p}\n",
            mmo_profile::pack::hex(&sha2::Sha256::digest(b))
        ));
    }
    let address = mmo_profile::pack::hex(&sha2::Sha256::digest(manifest.as_bytes()));
    files.insert("MANIFEST".into(), manifest.into_bytes());
    let st = store(tmp.path());
    let old_dir = st
        .write_snapshot(&Snapshot { address, files })
        .unwrap_or_else(|e| panic!("{e}"));
    refused(
        &old_dir,
        "record_generation",
        &old_dir.join("snapshot.json"),
    );
}

#[test]
fn the_writer_refuses_paths_that_leave_the_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    for bad in ["../escape.toml", "/abs.toml", "roles/../../escape.toml", ""] {
        let mut files = BTreeMap::new();
        files.insert(bad.to_string(), b"x".to_vec());
        files.insert("MANIFEST".to_string(), b"".to_vec());
        let err = st
            .write_snapshot(&Snapshot {
                address: "0".repeat(64),
                files,
            })
            .err()
            .unwrap_or_else(|| panic!("`{bad}` was written"));
        assert!(err.has_rule("snapshot_path_unsafe"), "{bad}: {err}");
    }
    let err = st
        .write_snapshot(&Snapshot {
            address: "../x".into(),
            files: BTreeMap::new(),
        })
        .expect_err("a non-hex address is refused");
    assert!(err.has_rule("snapshot_path_unsafe"), "{err}");
    assert!(!tmp.path().join("data/escape.toml").exists());
    assert!(!tmp.path().join("escape.toml").exists());
}

#[test]
fn materialize_copies_every_home_into_a_fresh_live_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let snap = compiled(tmp.path());
    let live = tmp.path().join("live/session-1");
    fs::create_dir_all(live.parent().unwrap()).unwrap();
    let homes = materialize(&snap, &live).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        homes.homes.keys().collect::<Vec<_>>(),
        ["lead", "reviewer"],
        "one home per role"
    );
    for (role, home) in &homes.homes {
        assert!(home.starts_with(&live), "{}", home.display());
        let cfg = home.join("config.toml");
        assert_eq!(
            fs::read(&cfg).unwrap(),
            fs::read(snap.join(format!("roles/{role}/codex-home/config.toml"))).unwrap()
        );
        assert!(home.join("AGENTS.md").is_file());
        // A live home is the session's own: writable, and writing it leaves the snapshot alone.
        assert!(fs::metadata(&cfg).unwrap().permissions().mode() & 0o200 != 0);
        fs::write(home.join("config.toml"), "changed").unwrap();
        fs::create_dir_all(home.join("sessions")).unwrap();
    }
    assert!(
        homes.homes["lead"]
            .join("skills/mmo-profile-orchestration/SKILL.md")
            .is_file()
    );
    verify_snapshot(&snap).unwrap_or_else(|e| panic!("the snapshot is untouched: {e}"));
    // Never into an existing directory: each session gets a fresh one.
    let err = materialize(&snap, &live).expect_err("dest exists");
    assert!(err.has_rule("materialize_dest_exists"), "{err}");
}

#[test]
fn materialize_refuses_a_snapshot_that_fails_verification() {
    let tmp = tempfile::tempdir().unwrap();
    let snap = compiled(tmp.path());
    overwrite(&snap.join("roles/reviewer/codex-home/config.toml"), b"x");
    let live = tmp.path().join("live");
    let err = materialize(&snap, &live).expect_err("tampered");
    assert!(err.has_rule("snapshot_file_modified"), "{err}");
    assert!(
        !live.exists(),
        "nothing is materialized from a refused snapshot"
    );
}

#[test]
fn materialize_copies_native_agents_with_the_root_home() {
    let tmp = tempfile::tempdir().unwrap();
    let st = store(tmp.path());
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../codex-mmo/operator/tool-mcp.d"),
        &tmp.path().join("config/tool-mcp.d"),
    );
    let r = st
        .compile(example("hybrid-audit").to_str().unwrap(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let homes = materialize(&st.dirs.snapshot_dir(&r.address), &tmp.path().join("live"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        homes.homes["auditor_lead"]
            .join("agents/audit-scout.toml")
            .is_file()
    );
}
