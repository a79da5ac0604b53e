//! Timing of the repository views on a repository of a few hundred commits.
//!
//! Run: `cargo bench -p vox-repo --bench repo`.

use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};
use vox_repo::{DiffTarget, Repo};

const COMMITS: usize = 300;
const FILES: usize = 40;

fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
    cmd
}

/// Builds the history with one `git fast-import` stream: each commit rewrites one of FILES
/// files, so log, show and diff have real content to walk.
fn build_repo(dir: &Path) {
    let ok = git(dir)
        .args(["init", "-q", "-b", "main"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "git init failed");
    let mut stream = String::new();
    for i in 0..COMMITS {
        let file = i % FILES;
        let body: String = (0..20).map(|l| format!("line {l} of rev {i}\n")).collect();
        stream.push_str(&format!(
            "commit refs/heads/main\nmark :{mark}\nauthor Bench <bench@example.com> {t} +0000\n\
             committer Bench <bench@example.com> {t} +0000\ndata <<EOM\nchange {i}\n\nbody of {i}\nEOM\n",
            mark = i + 1,
            t = 1_700_000_000 + i * 60,
        ));
        if i > 0 {
            stream.push_str(&format!("from :{i}\n"));
        }
        stream.push_str(&format!(
            "M 100644 inline src/file{file}.txt\ndata {}\n{body}\n",
            body.len()
        ));
    }
    let mut child = git(dir)
        .args(["fast-import", "--quiet"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn fast-import");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stream.as_bytes())
        .expect("write stream");
    assert!(child.wait().expect("fast-import").success());
    let ok = git(dir)
        .args(["reset", "-q", "--hard", "main"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "git reset failed");
    // One dirty file so status and the working-tree diff have something to report.
    std::fs::write(dir.join("src/file0.txt"), "changed\n").expect("write");
}

fn bench_views(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    build_repo(dir.path());
    let repo = Repo::discover(dir.path()).expect("discover");

    c.bench_function("status", |b| {
        b.iter(|| black_box(repo.status().expect("status")));
    });
    c.bench_function("log_50", |b| {
        b.iter(|| black_box(repo.log(None, None, 50, 0).expect("log")));
    });
    c.bench_function("log_200", |b| {
        b.iter(|| black_box(repo.log(None, None, 200, 0).expect("log")));
    });
    c.bench_function("log_path_20", |b| {
        b.iter(|| black_box(repo.log(None, Some("src/file7.txt"), 20, 0).expect("log")));
    });
    c.bench_function("show_head", |b| {
        b.iter(|| black_box(repo.show("HEAD~3", 64 * 1024).expect("show")));
    });
    c.bench_function("diff_worktree", |b| {
        b.iter(|| {
            black_box(
                repo.diff(DiffTarget::WorkingTree, None, 64 * 1024)
                    .expect("diff"),
            )
        });
    });
    c.bench_function("file_head", |b| {
        b.iter(|| {
            black_box(
                repo.file(None, "src/file3.txt", None, None, 64 * 1024)
                    .expect("file"),
            )
        });
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = bench_views
}
criterion_main!(benches);
