//! Writer worktrees and patches against real temporary git repositories.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use mmo_runtime::worktree::{
    self, ArtifactPolicy, ChangeKind, IntegrateMode, IntegrateOptions, Patch, ViolationCode,
    Worktree,
};

struct Fixture {
    _tmp: tempfile::TempDir,
    canonical: PathBuf,
    writers: PathBuf,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let canonical = tmp.path().join("canonical");
    let writers = tmp.path().join("writers");
    fs::create_dir_all(&canonical).unwrap();
    fs::create_dir_all(&writers).unwrap();
    git(&canonical, &["init", "-q", "-b", "main"]);
    git(&canonical, &["config", "user.name", "Test User"]);
    git(&canonical, &["config", "user.email", "test@example.com"]);
    git(&canonical, &["config", "commit.gpgSign", "false"]);
    write(&canonical, "src/lib.rs", "pub fn a() {}\n");
    write(&canonical, "src/keep.rs", "// keep\n");
    write(&canonical, "docs/readme.md", "hello\n");
    write(&canonical, ".gitignore", "target/\n");
    git(&canonical, &["add", "-A"]);
    git(&canonical, &["commit", "-q", "-m", "init"]);
    Fixture {
        _tmp: tmp,
        canonical,
        writers,
    }
}

impl Fixture {
    fn create(&self, name: &str) -> Worktree {
        worktree::create(&self.canonical, &self.writers.join(name), name).expect("create")
    }

    fn status(&self) -> String {
        git(
            &self.canonical,
            &["status", "--porcelain", "--untracked-files=all"],
        )
    }

    fn head(&self) -> String {
        git(&self.canonical, &["rev-parse", "HEAD"])
            .trim()
            .to_owned()
    }
}

fn scope(entries: &[&str]) -> Vec<String> {
    entries.iter().map(|s| s.to_string()).collect()
}

fn codes(v: &[worktree::Violation]) -> Vec<ViolationCode> {
    v.iter().map(|v| v.code).collect()
}

fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.file_name().unwrap() == ".git" {
                continue;
            }
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else if m.file_type().is_symlink() {
                out.push((
                    p.clone(),
                    fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            } else {
                out.push((p.clone(), fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn create_records_base_and_refuses_non_repositories() {
    let f = fixture();
    let wt = f.create("job-1");
    assert_eq!(wt.base_commit, f.head());
    assert!(!wt.canonical_dirty);
    assert!(wt.path.join("src/lib.rs").is_file());

    let plain = f.writers.join("plain");
    fs::create_dir_all(&plain).unwrap();
    let err = worktree::create(&plain, &f.writers.join("x"), "x").unwrap_err();
    assert_eq!(err.code(), "not_a_repository");

    let empty = f.writers.join("empty");
    fs::create_dir_all(&empty).unwrap();
    git(&empty, &["init", "-q"]);
    let err = worktree::create(&empty, &f.writers.join("y"), "y").unwrap_err();
    assert_eq!(err.code(), "repository_has_no_commit");

    let err = worktree::create(&f.canonical, &f.writers.join("bad"), "../bad").unwrap_err();
    assert_eq!(err.code(), "worktree_name_invalid");

    let err = worktree::create(&f.canonical, &f.canonical.join("inner"), "inner").unwrap_err();
    assert_eq!(err.code(), "worktree_destination_inside_canonical");

    let err = worktree::create(&f.canonical, &wt.path, "again").unwrap_err();
    assert_eq!(err.code(), "worktree_destination_exists");

    let err = worktree::create(&f.canonical.join("src"), &f.writers.join("z"), "z").unwrap_err();
    assert_eq!(err.code(), "not_repository_root");
}

#[test]
fn in_scope_change_recorded_and_integrated_as_a_commit() {
    let f = fixture();
    let wt = f.create("job-edit");
    write(&wt.path, "src/lib.rs", "pub fn a() {}\npub fn b() {}\n");
    write(&wt.path, "src/new.rs", "// new untracked file\n");
    fs::remove_file(wt.path.join("src/keep.rs")).unwrap();
    write(&wt.path, "target/debug/out.bin", "ignored build output\n");

    let patch = worktree::record(&wt).unwrap();
    assert_eq!(patch.base_commit, wt.base_commit);
    let kinds: Vec<(&str, ChangeKind)> = patch
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.change))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("src/keep.rs", ChangeKind::Deleted),
            ("src/lib.rs", ChangeKind::Modified),
            ("src/new.rs", ChangeKind::Added),
        ]
    );
    // The writer's own index is untouched by recording.
    assert!(git(&wt.path, &["diff", "--cached", "--name-only"]).is_empty());

    let v = worktree::check(&patch, &wt, &scope(&["src"]), &ArtifactPolicy::default());
    assert!(v.is_empty(), "{v:?}");

    let before = f.head();
    let done = worktree::integrate(&f.canonical, &patch, &patch.sha256, &scope(&["src/"])).unwrap();
    let commit = done.commit.clone().unwrap();
    assert_eq!(f.head(), commit);
    assert_eq!(done.parent, before);
    assert_eq!(done.files, vec!["src/keep.rs", "src/lib.rs", "src/new.rs"]);
    assert!(
        f.status().is_empty(),
        "canonical clean after integration: {}",
        f.status()
    );
    assert_eq!(
        fs::read_to_string(f.canonical.join("src/lib.rs")).unwrap(),
        "pub fn a() {}\npub fn b() {}\n"
    );
    assert!(f.canonical.join("src/new.rs").is_file());
    assert!(!f.canonical.join("src/keep.rs").exists());
    assert!(!f.canonical.join("target").exists());
    let msg = git(&f.canonical, &["log", "-1", "--format=%B"]);
    assert!(msg.contains("job-edit"), "{msg}");
    assert!(msg.contains(&patch.sha256), "{msg}");
    assert_eq!(
        git(&f.canonical, &["log", "-1", "--format=%an"]).trim(),
        "Test User"
    );
}

#[test]
fn stage_mode_leaves_head_and_other_work_alone() {
    let f = fixture();
    // Unrelated uncommitted work in the canonical checkout survives.
    write(
        &f.canonical,
        "docs/readme.md",
        "hello, edited by the user\n",
    );
    let wt = f.create("job-stage");
    assert!(wt.canonical_dirty);
    // The writer's base does not contain the user's uncommitted edit.
    assert_eq!(
        fs::read_to_string(wt.path.join("docs/readme.md")).unwrap(),
        "hello\n"
    );
    write(&wt.path, "src/lib.rs", "pub fn staged() {}\n");
    let patch = worktree::record(&wt).unwrap();
    let head = f.head();
    let opts = IntegrateOptions {
        mode: IntegrateMode::Stage,
        message: None,
    };
    let done =
        worktree::integrate_with(&f.canonical, &patch, &patch.sha256, &scope(&["src"]), &opts)
            .unwrap();
    assert!(done.commit.is_none());
    assert_eq!(f.head(), head);
    let status = f.status();
    assert!(status.contains("M  src/lib.rs"), "{status}");
    assert!(status.contains(" M docs/readme.md"), "{status}");
}

#[test]
fn commit_integration_keeps_unrelated_staged_work_staged() {
    let f = fixture();
    let wt = f.create("job-c");
    write(&f.canonical, "docs/readme.md", "user staged\n");
    git(&f.canonical, &["add", "docs/readme.md"]);
    write(&wt.path, "src/lib.rs", "pub fn c() {}\n");
    let patch = worktree::record(&wt).unwrap();
    worktree::integrate(&f.canonical, &patch, &patch.sha256, &scope(&["src"])).unwrap();
    assert_eq!(f.status(), "M  docs/readme.md\n");
    let changed = git(&f.canonical, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(changed.trim(), "src/lib.rs");
}

#[test]
fn out_of_scope_write_flagged() {
    let f = fixture();
    let wt = f.create("job-scope");
    write(&wt.path, "src/lib.rs", "changed\n");
    write(&wt.path, "docs/readme.md", "changed too\n");
    write(
        &wt.path,
        "srcx/evil.rs",
        "prefix is not a component boundary\n",
    );
    let patch = worktree::record(&wt).unwrap();
    let v = worktree::check(&patch, &wt, &scope(&["src"]), &ArtifactPolicy::default());
    let mut out: Vec<&str> = v
        .iter()
        .filter(|v| v.code == ViolationCode::PatchOutOfScope)
        .map(|v| v.path.as_deref().unwrap())
        .collect();
    out.sort();
    assert_eq!(out, vec!["docs/readme.md", "srcx/evil.rs"]);
    assert_eq!(v.len(), 2, "{v:?}");

    // Integration refuses the same patch against the same lease, leaving canonical alone.
    let head = f.head();
    let err =
        worktree::integrate(&f.canonical, &patch, &patch.sha256, &scope(&["src"])).unwrap_err();
    assert_eq!(err.code(), "patch_out_of_lease");
    assert_eq!(f.head(), head);
    assert!(f.status().is_empty());

    // An invalid scope entry matches nothing and is itself reported.
    let v = worktree::check(&patch, &wt, &scope(&["../src"]), &ArtifactPolicy::default());
    assert!(codes(&v).contains(&ViolationCode::PatchScopeInvalid));
}

#[cfg(unix)]
#[test]
fn symlinks_flagged() {
    let f = fixture();
    let wt = f.create("job-link");
    std::os::unix::fs::symlink("/etc/passwd", wt.path.join("src/abs")).unwrap();
    std::os::unix::fs::symlink("../../outside", wt.path.join("src/up")).unwrap();
    std::os::unix::fs::symlink("lib.rs", wt.path.join("src/inside")).unwrap();
    let patch = worktree::record(&wt).unwrap();
    let link_paths = |policy: &ArtifactPolicy| {
        let mut p: Vec<String> = worktree::check(&patch, &wt, &scope(&["src"]), policy)
            .into_iter()
            .filter(|v| v.code == ViolationCode::PatchSymlink)
            .map(|v| v.path.unwrap())
            .collect();
        p.sort();
        p
    };
    assert_eq!(
        link_paths(&ArtifactPolicy::default()),
        vec!["src/abs", "src/inside", "src/up"]
    );
    let lenient = ArtifactPolicy {
        allow_symlinks: true,
        ..ArtifactPolicy::default()
    };
    assert_eq!(link_paths(&lenient), vec!["src/abs", "src/up"]);
}

#[cfg(unix)]
#[test]
fn executable_flagged() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let wt = f.create("job-exec");
    write(&wt.path, "src/run.sh", "#!/bin/sh\necho hi\n");
    fs::set_permissions(
        wt.path.join("src/run.sh"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    fs::set_permissions(
        wt.path.join("src/lib.rs"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let patch = worktree::record(&wt).unwrap();
    let lib = patch.files.iter().find(|f| f.path == "src/lib.rs").unwrap();
    assert_eq!(lib.change, ChangeKind::Modified);
    assert_eq!(lib.old_mode.as_deref(), Some("100644"));
    assert_eq!(lib.mode.as_deref(), Some("100755"));
    let v = worktree::check(&patch, &wt, &scope(&["src"]), &ArtifactPolicy::default());
    let mut flagged: Vec<&str> = v
        .iter()
        .filter(|v| v.code == ViolationCode::PatchExecutable)
        .map(|v| v.path.as_deref().unwrap())
        .collect();
    flagged.sort();
    assert_eq!(flagged, vec!["src/lib.rs", "src/run.sh"]);
    let allowed = ArtifactPolicy {
        allow_executables: true,
        ..ArtifactPolicy::default()
    };
    assert!(worktree::check(&patch, &wt, &scope(&["src"]), &allowed).is_empty());
}

#[test]
fn binary_gitlink_and_size_limits() {
    let f = fixture();
    let wt = f.create("job-misc");
    fs::write(wt.path.join("src/blob.bin"), [0u8, 1, 2, 255, 0, 7]).unwrap();
    write(
        &wt.path,
        ".gitmodules",
        "[submodule \"x\"]\n\tpath = x\n\turl = ../x\n",
    );
    let patch = worktree::record(&wt).unwrap();
    let v = worktree::check(
        &patch,
        &wt,
        &scope(&["src", ".gitmodules"]),
        &ArtifactPolicy::default(),
    );
    let c = codes(&v);
    assert!(c.contains(&ViolationCode::PatchBinary), "{v:?}");
    assert!(c.contains(&ViolationCode::PatchGitlink), "{v:?}");

    let tiny = ArtifactPolicy {
        allow_binary: true,
        max_patch_bytes: 10,
        max_files: 1,
        ..ArtifactPolicy::default()
    };
    let v = worktree::check(&patch, &wt, &scope(&["src", ".gitmodules"]), &tiny);
    let too_large = v
        .iter()
        .filter(|v| v.code == ViolationCode::PatchTooLarge)
        .count();
    assert_eq!(too_large, 2, "{v:?}");

    // The binary file round-trips through integration byte for byte.
    let bin_only = f.create("job-bin");
    fs::write(bin_only.path.join("src/blob.bin"), [0u8, 1, 2, 255, 0, 7]).unwrap();
    let patch = worktree::record(&bin_only).unwrap();
    worktree::integrate(&f.canonical, &patch, &patch.sha256, &scope(&["src"])).unwrap();
    assert_eq!(
        fs::read(f.canonical.join("src/blob.bin")).unwrap(),
        vec![0u8, 1, 2, 255, 0, 7]
    );
}

#[test]
fn nested_repository_is_a_gitlink() {
    let f = fixture();
    let wt = f.create("job-sub");
    let sub = wt.path.join("src/sub");
    fs::create_dir_all(&sub).unwrap();
    git(&sub, &["init", "-q"]);
    git(&sub, &["config", "user.name", "T"]);
    git(&sub, &["config", "user.email", "t@example.com"]);
    write(&sub, "f", "x\n");
    git(&sub, &["add", "f"]);
    git(&sub, &["commit", "-q", "-m", "sub"]);
    let patch = worktree::record(&wt).unwrap();
    let v = worktree::check(&patch, &wt, &scope(&["src"]), &ArtifactPolicy::default());
    assert_eq!(codes(&v), vec![ViolationCode::PatchGitlink], "{v:?}");
}

#[test]
fn commit_inside_worktree_still_recorded() {
    let f = fixture();
    let wt = f.create("job-commit");
    git(&wt.path, &["config", "user.name", "Writer"]);
    write(&wt.path, "src/lib.rs", "committed by the writer\n");
    write(&wt.path, "src/added.rs", "also committed\n");
    git(&wt.path, &["add", "-A"]);
    git(
        &wt.path,
        &[
            "-c",
            "user.name=W",
            "-c",
            "user.email=w@example.com",
            "commit",
            "-q",
            "-m",
            "writer commit",
        ],
    );
    // An ignored file the writer force-added and committed is recorded too.
    write(&wt.path, "target/forced.txt", "forced\n");
    git(&wt.path, &["add", "-f", "target/forced.txt"]);
    git(
        &wt.path,
        &[
            "-c",
            "user.name=W",
            "-c",
            "user.email=w@example.com",
            "commit",
            "-q",
            "-m",
            "forced",
        ],
    );
    // And an uncommitted edit on top.
    write(&wt.path, "src/keep.rs", "uncommitted\n");
    assert!(git(&wt.path, &["status", "--porcelain"]).contains("src/keep.rs"));

    let patch = worktree::record(&wt).unwrap();
    let paths: Vec<&str> = patch.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        vec![
            "src/added.rs",
            "src/keep.rs",
            "src/lib.rs",
            "target/forced.txt"
        ]
    );
    // The canonical branch did not move.
    assert_eq!(f.head(), wt.base_commit);
}

#[test]
fn tampered_patch_refused() {
    let f = fixture();
    let wt = f.create("job-tamper");
    write(&wt.path, "src/lib.rs", "honest\n");
    let patch = worktree::record(&wt).unwrap();
    let expected = patch.sha256.clone();

    let before_status = f.status();
    let before_files = snapshot(&f.canonical);
    let head = f.head();

    // Bytes changed after recording.
    let mut tampered = patch.clone();
    tampered.bytes = String::from_utf8(tampered.bytes)
        .unwrap()
        .replace("+honest", "+evil")
        .into_bytes();
    let err =
        worktree::integrate(&f.canonical, &tampered, &expected, &scope(&["src"])).unwrap_err();
    assert_eq!(err.code(), "patch_identity_mismatch");
    assert!(
        worktree::check(&tampered, &wt, &scope(&["src"]), &ArtifactPolicy::default())
            .iter()
            .any(|v| v.code == ViolationCode::PatchIdentityMismatch)
    );

    // Bytes re-hashed consistently, but not what was accepted.
    let mut rehashed = tampered.clone();
    rehashed.sha256 = {
        use sha2::{Digest, Sha256};
        Sha256::digest(&rehashed.bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let err =
        worktree::integrate(&f.canonical, &rehashed, &expected, &scope(&["src"])).unwrap_err();
    assert_eq!(err.code(), "patch_identity_mismatch");

    // Honest bytes, file list edited to hide a path: the bytes decide.
    let wt2 = f.create("job-hide");
    write(&wt2.path, "src/lib.rs", "in scope\n");
    write(&wt2.path, "docs/readme.md", "hidden out of scope\n");
    let mut hidden: Patch = worktree::record(&wt2).unwrap();
    hidden.files.retain(|f| f.path.starts_with("src/"));
    let sha = hidden.sha256.clone();
    let err = worktree::integrate(&f.canonical, &hidden, &sha, &scope(&["src"])).unwrap_err();
    assert_eq!(err.code(), "patch_out_of_lease");

    assert_eq!(f.status(), before_status);
    assert_eq!(snapshot(&f.canonical), before_files);
    assert_eq!(f.head(), head);

    // The honest patch still integrates.
    worktree::integrate(&f.canonical, &patch, &expected, &scope(&["src"])).unwrap();
}

#[test]
fn conflicting_canonical_change_refused_unchanged() {
    let f = fixture();
    let wt = f.create("job-conflict");
    write(&wt.path, "src/lib.rs", "writer version\n");
    write(&wt.path, "src/fresh.rs", "writer's new file\n");
    let patch = worktree::record(&wt).unwrap();

    // 1. Uncommitted change to a patched path.
    write(&f.canonical, "src/lib.rs", "user's uncommitted version\n");
    let before_status = f.status();
    let before_files = snapshot(&f.canonical);
    let head = f.head();
    let err =
        worktree::integrate(&f.canonical, &patch, &patch.sha256, &scope(&["src"])).unwrap_err();
    assert_eq!(err.code(), "canonical_dirty", "{err}");
    assert!(err.to_string().contains("src/lib.rs"), "{err}");
    assert_eq!(f.status(), before_status);
    assert_eq!(snapshot(&f.canonical), before_files);
    assert_eq!(f.head(), head);

    // 2. An untracked file where the patch creates one.
    git(&f.canonical, &["checkout", "--", "src/lib.rs"]);
    write(&f.canonical, "src/fresh.rs", "user's untracked file\n");
    let before_status = f.status();
    let before_files = snapshot(&f.canonical);
    let err =
        worktree::integrate(&f.canonical, &patch, &patch.sha256, &scope(&["src"])).unwrap_err();
    assert_eq!(err.code(), "canonical_dirty", "{err}");
    assert_eq!(f.status(), before_status);
    assert_eq!(snapshot(&f.canonical), before_files);
    fs::remove_file(f.canonical.join("src/fresh.rs")).unwrap();

    // 3. The base moved: a committed conflicting change; the patch no longer applies.
    write(
        &f.canonical,
        "src/lib.rs",
        "someone else's committed version\n",
    );
    git(&f.canonical, &["commit", "-q", "-am", "moved"]);
    let before_status = f.status();
    let before_files = snapshot(&f.canonical);
    let head = f.head();
    let err =
        worktree::integrate(&f.canonical, &patch, &patch.sha256, &scope(&["src"])).unwrap_err();
    assert_eq!(err.code(), "patch_does_not_apply", "{err}");
    assert_eq!(f.status(), before_status);
    assert_eq!(snapshot(&f.canonical), before_files);
    assert_eq!(f.head(), head);
}

#[test]
fn base_moved_without_conflict_still_applies() {
    let f = fixture();
    let wt = f.create("job-moved");
    write(&wt.path, "src/lib.rs", "pub fn a() {}\n// writer\n");
    let patch = worktree::record(&wt).unwrap();
    write(&f.canonical, "docs/readme.md", "unrelated commit\n");
    git(&f.canonical, &["commit", "-q", "-am", "unrelated"]);
    let parent = f.head();
    let done = worktree::integrate(&f.canonical, &patch, &patch.sha256, &scope(&["src"])).unwrap();
    assert_eq!(done.parent, parent);
    assert!(f.status().is_empty());
}

#[test]
fn empty_patch_is_clean_but_not_integrated() {
    let f = fixture();
    let wt = f.create("job-empty");
    let patch = worktree::record(&wt).unwrap();
    assert!(patch.is_empty());
    assert!(patch.files.is_empty());
    assert!(worktree::check(&patch, &wt, &scope(&["src"]), &ArtifactPolicy::default()).is_empty());
    let err =
        worktree::integrate(&f.canonical, &patch, &patch.sha256, &scope(&["src"])).unwrap_err();
    assert_eq!(err.code(), "empty_patch");
}

#[test]
fn remove_is_idempotent() {
    let f = fixture();
    let wt = f.create("job-rm");
    write(&wt.path, "src/dirty.rs", "uncommitted writer work\n");
    worktree::remove(&f.canonical, &wt).unwrap();
    assert!(!wt.path.exists());
    assert!(!git(&f.canonical, &["worktree", "list"]).contains("job-rm"));
    worktree::remove(&f.canonical, &wt).unwrap();

    // A worktree whose .git file the writer replaced is still removed.
    let wt = f.create("job-broken");
    fs::write(wt.path.join(".git"), "gitdir: /nonexistent\n").unwrap();
    worktree::remove(&f.canonical, &wt).unwrap();
    assert!(!wt.path.exists());
    worktree::remove(&f.canonical, &wt).unwrap();
    assert!(!git(&f.canonical, &["worktree", "list"]).contains("job-broken"));
}

#[test]
fn record_ignores_a_redirected_git_file() {
    let f = fixture();
    let wt = f.create("job-redirect");
    write(&wt.path, "src/lib.rs", "real change\n");
    let other = f.writers.join("other-repo");
    fs::create_dir_all(&other).unwrap();
    git(&other, &["init", "-q"]);
    fs::write(
        wt.path.join(".git"),
        format!("gitdir: {}/.git\n", other.display()),
    )
    .unwrap();
    let patch = worktree::record(&wt).unwrap();
    let paths: Vec<&str> = patch.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, vec!["src/lib.rs"]);
}

#[test]
fn two_worktrees_are_independent() {
    let f = fixture();
    let a = f.create("job-a");
    let b = f.create("job-b");
    assert_ne!(a.path, b.path);
    assert_ne!(a.git_dir, b.git_dir);
    write(&a.path, "src/a.rs", "a\n");
    write(&b.path, "docs/b.md", "b\n");
    let pa = worktree::record(&a).unwrap();
    let pb = worktree::record(&b).unwrap();
    assert_eq!(pa.files.len(), 1);
    assert_eq!(pa.files[0].path, "src/a.rs");
    assert_eq!(pb.files.len(), 1);
    assert_eq!(pb.files[0].path, "docs/b.md");
    assert!(!b.path.join("src/a.rs").exists());

    worktree::integrate(&f.canonical, &pa, &pa.sha256, &scope(&["src"])).unwrap();
    worktree::integrate(&f.canonical, &pb, &pb.sha256, &scope(&["docs"])).unwrap();
    assert!(f.canonical.join("src/a.rs").is_file());
    assert!(f.canonical.join("docs/b.md").is_file());
    assert!(f.status().is_empty());

    worktree::remove(&f.canonical, &a).unwrap();
    assert!(b.path.join("docs/b.md").is_file());
    assert_eq!(worktree::record(&b).unwrap().sha256, pb.sha256);
    worktree::remove(&f.canonical, &b).unwrap();
}

#[test]
fn a_fork_holds_the_writers_changes_on_its_base_and_leaves_the_source_alone() {
    let f = fixture();
    let src = f.create("job-src");
    write(
        &src.path,
        "src/lib.rs",
        "pub fn a() {}\npub fn forked() {}\n",
    );
    write(&src.path, "src/new.rs", "// untracked in the source\n");
    fs::remove_file(src.path.join("src/keep.rs")).unwrap();
    let before = snapshot(&src.path);
    // The canonical checkout moves on: the fork still starts from the source's base.
    write(&f.canonical, "docs/readme.md", "moved on\n");
    git(&f.canonical, &["commit", "-qam", "later"]);

    let fork = worktree::fork(&src, &f.writers.join("job-fork"), "job-fork").expect("fork");
    assert_eq!(fork.base_commit, src.base_commit);
    assert_ne!(fork.base_commit, f.head());
    assert_eq!(
        fs::read_to_string(fork.path.join("src/lib.rs")).unwrap(),
        "pub fn a() {}\npub fn forked() {}\n"
    );
    assert!(fork.path.join("src/new.rs").is_file());
    assert!(!fork.path.join("src/keep.rs").exists());
    assert_eq!(
        fs::read_to_string(fork.path.join("docs/readme.md")).unwrap(),
        "hello\n"
    );
    assert_eq!(snapshot(&src.path), before, "the source is not touched");
    // The fork records the same changes as its source.
    let (a, b) = (
        worktree::record(&src).unwrap(),
        worktree::record(&fork).unwrap(),
    );
    assert_eq!(a.files, b.files);
    // Its own changes stay its own.
    write(&fork.path, "src/lib.rs", "pub fn only_in_the_fork() {}\n");
    assert_eq!(
        fs::read_to_string(src.path.join("src/lib.rs")).unwrap(),
        "pub fn a() {}\npub fn forked() {}\n"
    );
    let err = worktree::fork(&src, &fork.path, "again").unwrap_err();
    assert_eq!(err.code(), "worktree_destination_exists");
}

/// An executable outside every repository that appends `<tag> <args>` to `marker` when run,
/// then copies standard input to standard output.
fn trap_script(dir: &Path, marker: &Path, tag: &str) -> String {
    let path = dir.join(format!("{tag}.sh"));
    fs::write(
        &path,
        format!(
            "#!/bin/sh\necho \"{tag} $*\" >> '{}'\ncat\n",
            marker.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Every hook git knows of that a worktree's life could trigger.
const HOOK_NAMES: &[&str] = &[
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-merge",
    "pre-auto-gc",
    "post-rewrite",
    "reference-transaction",
    "post-index-change",
    "pre-applypatch",
    "post-applypatch",
    "applypatch-msg",
];

#[test]
fn the_repositorys_configuration_runs_nothing_from_create_to_remove() {
    let f = fixture();
    let traps = tempfile::tempdir().unwrap();
    let marker = traps.path().join("ran");
    let ran = || fs::read_to_string(&marker).unwrap_or_default();

    // Hooks every way a repository can name them: .git/hooks, core.hooksPath, hook.<name>.
    let hook = trap_script(traps.path(), &marker, "hook");
    let hooks_path = traps.path().join("hooks");
    for dir in [f.canonical.join(".git/hooks"), hooks_path.clone()] {
        fs::create_dir_all(&dir).unwrap();
        for name in HOOK_NAMES {
            fs::copy(&hook, dir.join(name)).unwrap();
        }
    }
    git(
        &f.canonical,
        &["config", "core.hooksPath", hooks_path.to_str().unwrap()],
    );
    git(&f.canonical, &["config", "hook.evil.command", &hook]);
    for name in HOOK_NAMES {
        git(&f.canonical, &["config", "--add", "hook.evil.event", name]);
    }
    // The hooks do run for plain git.
    let plain = Command::new("git")
        .current_dir(&f.canonical)
        .args(["commit", "-q", "--allow-empty", "-m", "plain"])
        .output()
        .unwrap();
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    assert!(ran().contains("hook"), "the armed hooks did not run");
    fs::remove_file(&marker).unwrap();
    // Filter drivers on every path, from .git/info/attributes (shared by every worktree).
    let clean = trap_script(traps.path(), &marker, "clean");
    let smudge = trap_script(traps.path(), &marker, "smudge");
    let process = trap_script(traps.path(), &marker, "process");
    let fsmonitor = trap_script(traps.path(), &marker, "fsmonitor");
    for (key, value) in [
        ("filter.evil.clean", clean.as_str()),
        ("filter.evil.smudge", smudge.as_str()),
        ("filter.evil.required", "true"),
        ("filter.proc.process", process.as_str()),
        ("filter.proc.required", "true"),
        ("core.fsmonitor", fsmonitor.as_str()),
        ("diff.external", clean.as_str()),
        ("core.pager", clean.as_str()),
    ] {
        git(&f.canonical, &["config", key, value]);
    }
    write(
        &f.canonical,
        ".git/info/attributes",
        "*.rs filter=evil diff=evil\n*.md filter=proc\n",
    );
    git(&f.canonical, &["config", "diff.evil.textconv", &clean]);

    let wt = f.create("job-armed");
    assert_eq!(
        fs::read_to_string(wt.path.join("src/lib.rs")).unwrap(),
        "pub fn a() {}\n"
    );
    write(&wt.path, "src/lib.rs", "pub fn a() {}\npub fn b() {}\n");
    write(&wt.path, "src/new.rs", "// new\n");
    write(&wt.path, "docs/readme.md", "hello again\n");
    let patch = worktree::record(&wt).unwrap();
    let paths: Vec<&str> = patch.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["docs/readme.md", "src/lib.rs", "src/new.rs"]);
    assert!(
        worktree::check(
            &patch,
            &wt,
            &scope(&["src", "docs"]),
            &ArtifactPolicy::default()
        )
        .is_empty()
    );
    let fork = worktree::fork(&wt, &f.writers.join("job-fork"), "job-fork").unwrap();
    assert_eq!(
        fs::read_to_string(fork.path.join("docs/readme.md")).unwrap(),
        "hello again\n"
    );
    let done = worktree::integrate(
        &f.canonical,
        &patch,
        &patch.sha256,
        &scope(&["src", "docs"]),
    )
    .unwrap();
    assert!(done.commit.is_some());
    assert_eq!(
        fs::read_to_string(f.canonical.join("src/lib.rs")).unwrap(),
        "pub fn a() {}\npub fn b() {}\n"
    );
    worktree::remove(&f.canonical, &fork).unwrap();
    worktree::remove(&f.canonical, &wt).unwrap();
    assert_eq!(ran(), "", "configured programs ran");
}
