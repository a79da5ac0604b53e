//! End-to-end tests against real repositories built with the git CLI in temporary directories.

use std::cell::Cell;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use vox_repo::{DiffTarget, EntryKind, ObjectKind, Repo, RepoError};

/// A scratch repository whose setup commands ignore the machine's git configuration.
struct TestRepo {
    dir: tempfile::TempDir,
    clock: Cell<u64>,
}

impl TestRepo {
    fn new() -> TestRepo {
        let repo = TestRepo {
            dir: tempfile::tempdir().expect("tempdir"),
            clock: Cell::new(1_700_000_000),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.name", "Test Author"]);
        repo.git(&["config", "user.email", "author@example.com"]);
        repo.git(&["config", "commit.gpgsign", "false"]);
        repo.git(&["config", "tag.gpgsign", "false"]);
        repo
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("git");
        let date = format!("@{} +0000", self.clock.get());
        cmd.current_dir(self.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE");
        cmd
    }

    /// Runs a setup command and returns its trimmed stdout; a failure fails the test.
    fn git(&self, args: &[&str]) -> String {
        let out = self.command().args(args).output().expect("run git");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Runs a command that is expected to fail (e.g. a conflicting merge).
    fn git_may_fail(&self, args: &[&str]) {
        let _ = self.command().args(args).output().expect("run git");
    }

    fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.path().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, content).expect("write");
    }

    /// Stages everything and commits; returns the new commit id.
    fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.clock.set(self.clock.get() + 60);
        self.git(&["rev-parse", "HEAD"])
    }

    /// Appends `count` commits touching `log.txt` through one fast-import stream.
    fn many_commits(&self, count: usize) {
        let parent = self.git(&["rev-parse", "HEAD"]);
        let mut stream = String::new();
        for i in 0..count {
            let data = format!("entry {i}\n");
            stream.push_str(&format!(
                "commit refs/heads/main\nmark :{}\ncommitter T <t@example.com> {} +0000\n\
                 data {}\nbulk {i}\n{}\nM 100644 inline log.txt\ndata {}\n{data}\n",
                i + 1,
                1_800_000_000 + i,
                format!("bulk {i}\n").len(),
                if i == 0 {
                    format!("from {parent}")
                } else {
                    format!("from :{i}")
                },
                data.len(),
            ));
        }
        let mut child = self
            .command()
            .args(["fast-import", "--quiet", "--force"])
            .stdin(Stdio::piped())
            .spawn()
            .expect("fast-import");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stream.as_bytes())
            .expect("write");
        assert!(child.wait().expect("wait").success());
        self.git(&["reset", "-q", "--hard", "main"]);
    }

    fn repo(&self) -> Repo {
        Repo::discover(self.path()).expect("discover")
    }
}

fn sample_repo() -> (TestRepo, String, String) {
    let t = TestRepo::new();
    t.write("README.md", "hello\nworld\n");
    t.write("src/lib.rs", "fn a() {}\n");
    let first = t.commit_all("first commit");
    t.write("src/lib.rs", "fn a() {}\nfn b() {}\n");
    t.write("docs/guide.md", "guide\n");
    let second = t.commit_all("second commit\n\nA body line.\n\nAnother paragraph.");
    (t, first, second)
}

// ---------------------------------------------------------------- discover

#[test]
fn discover_finds_the_root_from_a_subdirectory() {
    let (t, _, _) = sample_repo();
    let repo = Repo::discover(&t.path().join("src")).expect("discover");
    let expected = t.path().canonicalize().expect("canonical");
    assert_eq!(repo.root().canonicalize().expect("canonical"), expected);
}

#[test]
fn discover_outside_a_repository_names_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A ceiling would be needed if /tmp itself were in a repository; make sure it is not.
    let err = Repo::discover(dir.path()).expect_err("not a repo");
    assert_eq!(
        err.to_string(),
        format!("not a git repository: {}", dir.path().display())
    );
    assert_eq!(err.code(), "not_a_repository");
    let missing = dir.path().join("missing");
    assert!(matches!(
        Repo::discover(&missing),
        Err(RepoError::NotARepository(p)) if p == missing
    ));
}

// ---------------------------------------------------------------- empty repository

#[test]
fn empty_repository_views_work_without_commits() {
    let t = TestRepo::new();
    t.write("new file.txt", "x\n");
    let repo = t.repo();

    let status = repo.status().expect("status");
    assert_eq!(status.branch.as_deref(), Some("main"));
    assert_eq!(status.head, None);
    assert!(!status.detached);
    assert_eq!(status.entries.len(), 1);
    assert_eq!(status.entries[0].path, "new file.txt");
    assert_eq!(status.entries[0].kind, EntryKind::Untracked);

    assert!(repo.log(None, None, 10, 0).expect("log").is_empty());
    let tree = repo.tree(None, None, true, 10).expect("tree");
    assert!(tree.entries.is_empty() && tree.rev.is_none());
    assert!(matches!(
        repo.file(None, "new file.txt", None, None, 100),
        Err(RepoError::UnknownRevision(r)) if r == "HEAD"
    ));

    t.git(&["add", "new file.txt"]);
    let staged = repo.diff(DiffTarget::Staged, None, 10_000).expect("diff");
    assert_eq!(staged.files.len(), 1);
    assert_eq!(staged.files[0].additions, 1);
    assert!(staged.patch.contains("+x"));
    let status = repo.status().expect("status");
    assert_eq!(status.entries[0].kind, EntryKind::Staged);
    assert_eq!(status.entries[0].index_status, "A");
}

// ---------------------------------------------------------------- status

#[test]
fn status_lists_staged_unstaged_untracked_and_renamed_paths() {
    let t = TestRepo::new();
    t.write("keep.txt", "1\n");
    t.write(
        "old name.txt",
        "some content that is long enough to rename\n",
    );
    t.write("both.txt", "a\n");
    t.commit_all("base");
    std::fs::create_dir(t.path().join("dir é")).expect("mkdir");
    t.git(&["mv", "old name.txt", "dir é/new name.txt"]);
    t.write("both.txt", "b\n");
    t.git(&["add", "both.txt"]);
    t.write("both.txt", "c\n");
    t.write("keep.txt", "2\n");
    t.write("naïve file.txt", "u\n");

    let status = t.repo().status().expect("status");
    let find = |path: &str, kind: EntryKind| {
        status
            .entries
            .iter()
            .find(|e| e.path == path && e.kind == kind)
            .unwrap_or_else(|| panic!("no {kind:?} entry for {path}: {:?}", status.entries))
    };
    let renamed = find("dir é/new name.txt", EntryKind::Staged);
    assert_eq!(renamed.index_status, "R");
    assert_eq!(renamed.orig_path.as_deref(), Some("old name.txt"));
    assert_eq!(find("both.txt", EntryKind::Staged).index_status, "M");
    assert_eq!(find("both.txt", EntryKind::Unstaged).worktree_status, "M");
    assert_eq!(find("keep.txt", EntryKind::Unstaged).index_status, ".");
    find("naïve file.txt", EntryKind::Untracked);
    assert_eq!(status.branch.as_deref(), Some("main"));
    assert!(!status.truncated);
}

#[test]
fn status_reports_a_detached_head_by_commit() {
    let (t, first, _) = sample_repo();
    t.git(&["checkout", "-q", "--detach", &first]);
    let status = t.repo().status().expect("status");
    assert!(status.detached);
    assert_eq!(status.branch, None);
    assert_eq!(status.head.as_deref(), Some(first.as_str()));
}

#[test]
fn status_reports_upstream_ahead_and_behind() {
    let (t, _, _) = sample_repo();
    t.git(&["checkout", "-q", "-b", "feature"]);
    t.git(&["branch", "-q", "--set-upstream-to=main"]);
    t.write("f.txt", "f\n");
    t.commit_all("feature work");
    t.write("g.txt", "g\n");
    t.commit_all("more feature work");
    t.git(&["checkout", "-q", "main"]);
    t.write("m.txt", "m\n");
    t.commit_all("main work");
    t.git(&["checkout", "-q", "feature"]);

    let status = t.repo().status().expect("status");
    let upstream = status.upstream.expect("upstream");
    assert_eq!(upstream.name, "main");
    assert_eq!((upstream.ahead, upstream.behind), (Some(2), Some(1)));
}

#[test]
fn status_reports_merge_conflicts() {
    let (t, _, _) = sample_repo();
    t.git(&["checkout", "-q", "-b", "other"]);
    t.write("README.md", "other side\n");
    t.commit_all("other");
    t.git(&["checkout", "-q", "main"]);
    t.write("README.md", "main side\n");
    t.commit_all("main");
    t.git_may_fail(&["merge", "-q", "other"]);

    let status = t.repo().status().expect("status");
    let conflict = status
        .entries
        .iter()
        .find(|e| e.path == "README.md")
        .expect("conflicted entry");
    assert_eq!(conflict.kind, EntryKind::Conflicted);
    assert_eq!(
        (
            conflict.index_status.as_str(),
            conflict.worktree_status.as_str()
        ),
        ("U", "U")
    );
}

#[test]
fn status_and_diff_stop_listing_at_their_caps_and_say_so() {
    let t = TestRepo::new();
    t.write("seed.txt", "s\n");
    t.commit_all("seed");
    let count = vox_repo::MAX_STATUS_ENTRIES.max(vox_repo::MAX_DIFF_FILES) + 1;
    for i in 0..count {
        t.write(&format!("many/f{i:05}.txt"), "x\n");
    }
    let repo = t.repo();
    // Untracked files inside a new directory collapse to one entry with the normal mode...
    assert_eq!(repo.status().expect("status").entries.len(), 1);
    t.git(&["add", "many"]);
    let status = repo.status().expect("status");
    assert_eq!(status.entries.len(), vox_repo::MAX_STATUS_ENTRIES);
    assert!(status.truncated);
    let diff = repo.diff(DiffTarget::Staged, None, 1000).expect("diff");
    assert_eq!(diff.files.len(), vox_repo::MAX_DIFF_FILES);
    assert!(diff.files_truncated && diff.truncated);
}

// ---------------------------------------------------------------- log

#[test]
fn log_lists_commits_newest_first_with_all_fields() {
    let (t, first, second) = sample_repo();
    let log = t.repo().log(None, None, 10, 0).expect("log");
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].sha, second);
    assert_eq!(log[0].subject, "second commit");
    assert_eq!(log[0].parents, vec![first.clone()]);
    assert!(second.starts_with(&log[0].short_sha) && log[0].short_sha.len() < 40);
    assert_eq!(log[0].author_name, "Test Author");
    assert_eq!(log[0].author_email, "author@example.com");
    assert_eq!(log[1].author_time, 1_700_000_000);
    assert_eq!(log[0].author_time, 1_700_000_060);
    assert!(log[1].parents.is_empty());
}

#[test]
fn log_filters_by_path_and_pages_with_skip_and_limit() {
    let (t, first, second) = sample_repo();
    let repo = t.repo();
    let readme = repo.log(None, Some("README.md"), 10, 0).expect("log");
    assert_eq!(readme.iter().map(|c| &c.sha).collect::<Vec<_>>(), [&first]);
    let docs = repo.log(None, Some("./docs/"), 10, 0).expect("log");
    assert_eq!(docs.iter().map(|c| &c.sha).collect::<Vec<_>>(), [&second]);
    let page = repo.log(None, None, 1, 1).expect("log");
    assert_eq!(page.iter().map(|c| &c.sha).collect::<Vec<_>>(), [&first]);
    let from_first = repo.log(Some(&first), None, 10, 0).expect("log");
    assert_eq!(from_first.len(), 1);
    // A path filter must not fall back to glob matching: '*' here is a literal name.
    assert!(repo.log(None, Some("*.md"), 10, 0).expect("log").is_empty());
}

#[test]
fn log_limit_is_capped() {
    let (t, _, _) = sample_repo();
    t.many_commits(205);
    let log = t.repo().log(None, None, 10_000, 0).expect("log");
    assert_eq!(log.len(), vox_repo::MAX_LOG_LIMIT);
    assert_eq!(log[0].subject, "bulk 204");
}

#[test]
fn log_and_show_keep_unusual_messages_intact() {
    let t = TestRepo::new();
    t.write("a", "a\n");
    let subject = "tab\there, sep \u{1e} and \u{1f}, ünïcödé 😀, 'quotes' \"and\" %H";
    let message = format!("{subject}\n\nbody line\n\n  indented after a blank line\n--\n-- end");
    let sha = t.commit_all(&message);
    let repo = t.repo();
    let log = repo.log(None, None, 5, 0).expect("log");
    assert_eq!(log[0].subject, subject);
    let show = repo.show(&sha, 10_000).expect("show");
    assert_eq!(show.commit.subject, subject);
    assert_eq!(
        show.body,
        "body line\n\n  indented after a blank line\n--\n-- end"
    );
}

#[test]
fn unknown_revisions_are_named_in_the_error() {
    let (t, _, _) = sample_repo();
    let repo = t.repo();
    let err = repo.log(Some("foo"), None, 10, 0).expect_err("unknown");
    assert_eq!(err.to_string(), "unknown revision 'foo'");
    assert_eq!(err.code(), "unknown_revision");
    assert!(
        matches!(repo.show("HEAD~5", 100), Err(RepoError::UnknownRevision(r)) if r == "HEAD~5")
    );
    // A blob or a range is not a commit.
    assert!(matches!(
        repo.show("HEAD:README.md", 100),
        Err(RepoError::UnknownRevision(_))
    ));
    assert!(matches!(
        repo.show("HEAD~1..HEAD", 100),
        Err(RepoError::UnknownRevision(_))
    ));
    assert!(matches!(
        repo.diff(
            DiffTarget::Revisions { from: "HEAD".into(), to: Some("nope".into()) },
            None,
            100
        ),
        Err(RepoError::UnknownRevision(r)) if r == "nope"
    ));
    assert!(matches!(
        repo.tree(Some("nope"), None, false, 10),
        Err(RepoError::UnknownRevision(_))
    ));
    assert!(matches!(
        repo.file(Some("nope"), "README.md", None, None, 10),
        Err(RepoError::UnknownRevision(_))
    ));
}

// ---------------------------------------------------------------- hostile input

#[test]
fn option_injection_through_revisions_and_paths_is_rejected() {
    let (t, _, _) = sample_repo();
    let repo = t.repo();
    let out_file = t.path().join("pwned");
    let injected = format!("--output={}", out_file.display());

    let err = repo
        .log(Some(&injected), None, 10, 0)
        .expect_err("rejected");
    assert_eq!(err.code(), "invalid_revision");
    assert!(repo.show(&injected, 100).is_err());
    assert!(repo.tree(Some(&injected), None, false, 10).is_err());
    assert!(
        repo.file(Some(&injected), "README.md", None, None, 10)
            .is_err()
    );
    assert!(
        repo.diff(
            DiffTarget::Revisions {
                from: injected.clone(),
                to: None
            },
            None,
            100
        )
        .is_err()
    );
    assert!(
        repo.diff(
            DiffTarget::Revisions {
                from: "HEAD".into(),
                to: Some("-p".into())
            },
            None,
            100
        )
        .is_err()
    );
    // A revision with embedded options is just an unknown revision name.
    assert!(matches!(
        repo.log(Some("HEAD --output=/tmp/x"), None, 10, 0),
        Err(RepoError::UnknownRevision(_))
    ));
    for path in [injected.as_str(), "-p", "./--output=x"] {
        let err = repo.log(None, Some(path), 10, 0).expect_err("rejected");
        assert_eq!(err.code(), "invalid_path", "{path}");
        assert!(repo.file(None, path, None, None, 10).is_err());
        assert!(repo.tree(None, Some(path), false, 10).is_err());
        assert!(repo.diff(DiffTarget::WorkingTree, Some(path), 10).is_err());
    }
    assert!(!out_file.exists(), "an injected option was executed");
}

#[test]
fn paths_escaping_the_repository_are_rejected() {
    let (t, _, _) = sample_repo();
    let repo = t.repo();
    let err = repo.file(None, "../x", None, None, 10).expect_err("escape");
    assert_eq!(err.to_string(), "path '../x' escapes the repository");
    for path in ["..", "src/../../etc/passwd", "/etc/passwd", "a/.."] {
        assert!(
            matches!(
                repo.file(None, path, None, None, 10),
                Err(RepoError::PathEscapes { .. })
            ),
            "{path}"
        );
        assert!(matches!(
            repo.tree(None, Some(path), false, 10),
            Err(RepoError::PathEscapes { .. })
        ));
        assert!(matches!(
            repo.log(None, Some(path), 10, 0),
            Err(RepoError::PathEscapes { .. })
        ));
        assert!(matches!(
            repo.diff(DiffTarget::Staged, Some(path), 10),
            Err(RepoError::PathEscapes { .. })
        ));
    }
    for path in ["a\0b", ".git/config", ".git"] {
        assert!(
            matches!(
                repo.file(None, path, None, None, 10),
                Err(RepoError::InvalidPath { .. })
            ),
            "{path}"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_committed_symlink_is_read_as_its_target_text_not_followed() {
    let t = TestRepo::new();
    let outside = tempfile::tempdir().expect("tempdir");
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "do not read\n").expect("write");
    std::os::unix::fs::symlink(&secret, t.path().join("link")).expect("symlink");
    t.commit_all("link");
    let file = t.repo().file(None, "link", None, None, 1000).expect("file");
    assert_eq!(file.mode, "120000");
    assert_eq!(
        file.content.as_deref(),
        Some(secret.to_str().expect("utf8"))
    );
}

// ---------------------------------------------------------------- diff

#[test]
fn diff_reports_working_tree_staged_and_revision_changes() {
    let (t, first, second) = sample_repo();
    t.write("README.md", "hello\nthere\nworld\n");
    t.write("docs/guide.md", "new guide\n");
    t.git(&["add", "docs/guide.md"]);
    let repo = t.repo();

    let wt = repo
        .diff(DiffTarget::WorkingTree, None, 100_000)
        .expect("diff");
    assert_eq!(wt.files.len(), 1);
    assert_eq!(wt.files[0].path, "README.md");
    assert_eq!((wt.files[0].additions, wt.files[0].deletions), (1, 0));
    assert!(wt.patch.contains("+there"));
    assert!(wt.patch.starts_with("diff --git a/README.md b/README.md"));
    assert!(!wt.truncated);

    let staged = repo.diff(DiffTarget::Staged, None, 100_000).expect("diff");
    assert_eq!(staged.files.len(), 1);
    assert_eq!(staged.files[0].path, "docs/guide.md");
    assert_eq!(
        (staged.files[0].additions, staged.files[0].deletions),
        (1, 1)
    );

    let revs = repo
        .diff(
            DiffTarget::Revisions {
                from: first.clone(),
                to: Some(second.clone()),
            },
            None,
            100_000,
        )
        .expect("diff");
    let paths: Vec<_> = revs.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["docs/guide.md", "src/lib.rs"]);

    let limited = repo
        .diff(
            DiffTarget::Revisions {
                from: first.clone(),
                to: Some(second),
            },
            Some("src"),
            100_000,
        )
        .expect("diff");
    assert_eq!(limited.files.len(), 1);
    assert!(!limited.patch.contains("guide"));

    // `to: None` compares with the working tree: README edit, staged guide and the commit's.
    let to_worktree = repo
        .diff(
            DiffTarget::Revisions {
                from: first,
                to: None,
            },
            None,
            100_000,
        )
        .expect("diff");
    assert_eq!(to_worktree.files.len(), 3);
}

#[test]
fn diff_detects_renames_and_binary_files() {
    let t = TestRepo::new();
    t.write(
        "old name.txt",
        "line one\nline two\nline three\nline four\n",
    );
    t.write("image.bin", [0u8, 1, 2, 3, 0, 255]);
    let base = t.commit_all("base");
    std::fs::create_dir(t.path().join("nëw dir")).expect("mkdir");
    t.git(&["mv", "old name.txt", "nëw dir/new name.txt"]);
    t.write("image.bin", [0u8, 9, 9, 9, 0, 255, 7]);
    let head = t.commit_all("rename and binary");

    let diff = t
        .repo()
        .diff(
            DiffTarget::Revisions {
                from: base,
                to: Some(head),
            },
            None,
            100_000,
        )
        .expect("diff");
    let bin = diff
        .files
        .iter()
        .find(|f| f.path == "image.bin")
        .expect("binary entry");
    assert!(bin.binary);
    assert_eq!((bin.additions, bin.deletions), (0, 0));
    let renamed = diff
        .files
        .iter()
        .find(|f| f.path == "nëw dir/new name.txt")
        .expect("rename entry");
    assert_eq!(renamed.old_path.as_deref(), Some("old name.txt"));
    assert!(!renamed.binary);
    assert!(diff.patch.contains("rename from old name.txt"));
    assert!(diff.patch.contains("Binary files"));
}

#[test]
fn diff_patch_is_capped_on_a_character_boundary() {
    let t = TestRepo::new();
    t.write("u.txt", "start\n");
    t.commit_all("base");
    t.write("u.txt", "é€😀\n".repeat(2000));
    let repo = t.repo();
    let full = repo
        .diff(DiffTarget::WorkingTree, None, 1 << 20)
        .expect("diff");
    assert!(!full.truncated);
    for max in [0, 1, 150, 151, 152, 153, 1000] {
        let capped = repo.diff(DiffTarget::WorkingTree, None, max).expect("diff");
        assert!(capped.truncated, "max {max}");
        assert!(capped.patch.len() <= max);
        assert!(
            full.patch.starts_with(&capped.patch),
            "max {max} altered the text"
        );
        assert_eq!(
            capped.files, full.files,
            "stats are complete even when the patch is cut"
        );
    }
}

// ---------------------------------------------------------------- show

#[test]
fn show_returns_message_files_and_patch() {
    let (t, first, second) = sample_repo();
    let show = t.repo().show("HEAD", 100_000).expect("show");
    assert_eq!(show.commit.sha, second);
    assert_eq!(show.commit.subject, "second commit");
    assert_eq!(show.body, "A body line.\n\nAnother paragraph.");
    assert_eq!(show.diff_base.as_deref(), Some(first.as_str()));
    let paths: Vec<_> = show.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["docs/guide.md", "src/lib.rs"]);
    assert!(show.patch.contains("+fn b() {}"));
    assert!(!show.truncated);

    let capped = t.repo().show("HEAD", 20).expect("show");
    assert!(capped.truncated && capped.patch.len() <= 20);
}

#[test]
fn show_of_a_root_commit_diffs_against_the_empty_tree() {
    let (t, first, _) = sample_repo();
    let show = t.repo().show(&first, 100_000).expect("show");
    assert_eq!(show.diff_base, None);
    assert!(show.body.is_empty());
    let paths: Vec<_> = show.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["README.md", "src/lib.rs"]);
    assert!(show.patch.contains("new file mode"));
}

#[test]
fn show_of_a_merge_diffs_against_the_first_parent() {
    let (t, _, _) = sample_repo();
    t.git(&["checkout", "-q", "-b", "side"]);
    t.write("side.txt", "side\n");
    t.commit_all("side");
    t.git(&["checkout", "-q", "main"]);
    t.write("main.txt", "main\n");
    let main_tip = t.commit_all("main");
    t.git(&["merge", "-q", "--no-edit", "side"]);
    let show = t.repo().show("HEAD", 100_000).expect("show");
    assert_eq!(show.commit.parents.len(), 2);
    assert_eq!(show.diff_base.as_deref(), Some(main_tip.as_str()));
    let paths: Vec<_> = show.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["side.txt"]);
}

// ---------------------------------------------------------------- tree

#[test]
fn tree_lists_directories_files_and_submodules() {
    let (t, first, _) = sample_repo();
    // A gitlink entry, as a submodule leaves in the tree, without cloning anything.
    t.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{first},vendor/sub"),
    ]);
    t.write("spaced dir/ünï file.txt", "x\n");
    // Not `add -A`: the gitlink has no working-tree directory and would be staged as deleted.
    t.git(&["add", "spaced dir"]);
    t.git(&["commit", "-q", "-m", "more"]);
    let repo = t.repo();

    let root = repo.tree(None, None, false, 100).expect("tree");
    let kinds: Vec<_> = root
        .entries
        .iter()
        .map(|e| (e.path.as_str(), e.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("README.md", ObjectKind::Blob),
            ("docs", ObjectKind::Tree),
            ("spaced dir", ObjectKind::Tree),
            ("src", ObjectKind::Tree),
            ("vendor", ObjectKind::Tree),
        ]
    );
    assert_eq!(root.entries[0].size, Some(12));
    assert_eq!(root.entries[0].mode, "100644");
    assert_eq!(root.entries[1].size, None);

    let recursive = repo.tree(None, None, true, 100).expect("tree");
    let paths: Vec<_> = recursive.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "README.md",
            "docs/guide.md",
            "spaced dir/ünï file.txt",
            "src/lib.rs",
            "vendor/sub"
        ]
    );
    assert_eq!(recursive.entries[4].kind, ObjectKind::Commit);
    assert_eq!(recursive.entries[4].mode, "160000");

    let sub = repo
        .tree(None, Some("./spaced dir/"), false, 100)
        .expect("tree");
    assert_eq!(sub.path, "spaced dir");
    assert_eq!(sub.entries[0].path, "spaced dir/ünï file.txt");

    let old = repo
        .tree(Some(&first), Some("src"), false, 100)
        .expect("tree");
    assert_eq!(old.rev.as_deref(), Some(first.as_str()));
    assert_eq!(old.entries.len(), 1);
}

#[test]
fn tree_limit_truncates_and_says_so() {
    let (t, _, _) = sample_repo();
    let repo = t.repo();
    let tree = repo.tree(None, None, true, 2).expect("tree");
    assert_eq!(tree.entries.len(), 2);
    assert!(tree.truncated);
    let whole = repo.tree(None, None, true, 3).expect("tree");
    assert!(!whole.truncated);
}

#[test]
fn tree_of_a_file_or_missing_path_is_an_error() {
    let (t, _, _) = sample_repo();
    let repo = t.repo();
    assert!(matches!(
        repo.tree(None, Some("README.md"), false, 10),
        Err(RepoError::NotADirectory { .. })
    ));
    let err = repo
        .tree(None, Some("nope"), false, 10)
        .expect_err("missing");
    assert_eq!(err.code(), "path_not_found");
    assert!(
        err.to_string()
            .starts_with("path 'nope' does not exist in ")
    );
}

// ---------------------------------------------------------------- file

#[test]
fn file_returns_content_and_line_ranges() {
    let (t, first, second) = sample_repo();
    t.write("src/lib.rs", "uncommitted\n");
    let repo = t.repo();

    let whole = repo
        .file(None, "src/lib.rs", None, None, 1000)
        .expect("file");
    assert_eq!(whole.content.as_deref(), Some("fn a() {}\nfn b() {}\n"));
    assert_eq!(whole.rev, second);
    assert_eq!(whole.total_lines, Some(2));
    assert_eq!((whole.start_line, whole.end_line), (1, 2));
    assert_eq!(whole.size, 20);
    assert!(!whole.binary && !whole.truncated);

    let second_line = repo
        .file(None, "src/lib.rs", Some(2), Some(9), 1000)
        .expect("file");
    assert_eq!(second_line.content.as_deref(), Some("fn b() {}\n"));
    assert_eq!(second_line.end_line, 2);

    let old = repo
        .file(Some(&first), "./src//lib.rs", None, None, 1000)
        .expect("file");
    assert_eq!(old.content.as_deref(), Some("fn a() {}\n"));
    assert_eq!(old.path, "src/lib.rs");

    assert!(matches!(
        repo.file(None, "src/lib.rs", Some(5), None, 1000),
        Err(RepoError::InvalidLineRange(_))
    ));
    assert!(matches!(
        repo.file(None, "src/lib.rs", Some(2), Some(1), 1000),
        Err(RepoError::InvalidLineRange(_))
    ));
    assert!(matches!(
        repo.file(None, "src/lib.rs", Some(0), None, 1000),
        Err(RepoError::InvalidLineRange(_))
    ));
}

#[test]
fn file_reports_binary_files_without_content() {
    let t = TestRepo::new();
    t.write("blob.bin", [1u8, 0, 2, 3]);
    t.commit_all("bin");
    let file = t
        .repo()
        .file(None, "blob.bin", None, None, 1000)
        .expect("file");
    assert!(file.binary);
    assert_eq!(file.content, None);
    assert_eq!(file.size, 4);
}

#[test]
fn file_with_unicode_and_spaces_in_its_path_is_readable() {
    let t = TestRepo::new();
    t.write("dïr ñame/fïle 😀 name.txt", "contënt\n");
    t.commit_all("unicode");
    let file = t
        .repo()
        .file(None, "dïr ñame/fïle 😀 name.txt", None, None, 1000)
        .expect("file");
    assert_eq!(file.content.as_deref(), Some("contënt\n"));
}

#[test]
fn file_is_capped_at_a_line_end_or_character_boundary() {
    let t = TestRepo::new();
    t.write("lines.txt", "ééé\nèèè\nêêê\n");
    t.write("one line.txt", "€".repeat(100));
    t.commit_all("text");
    let repo = t.repo();

    let capped = repo.file(None, "lines.txt", None, None, 15).expect("file");
    assert_eq!(capped.content.as_deref(), Some("ééé\nèèè\n"));
    assert_eq!(capped.end_line, 2);
    assert!(capped.truncated);
    assert_eq!(capped.total_lines, Some(3));

    let long = repo
        .file(None, "one line.txt", None, None, 10)
        .expect("file");
    assert_eq!(long.content.as_deref(), Some("€€€"));
    assert!(long.truncated);
}

#[test]
fn file_of_a_directory_or_missing_path_is_an_error() {
    let (t, _, _) = sample_repo();
    let repo = t.repo();
    let err = repo.file(None, "src", None, None, 10).expect_err("dir");
    assert_eq!(err.code(), "not_a_file");
    assert!(matches!(
        repo.file(None, "nope.txt", None, None, 10),
        Err(RepoError::PathNotFound { .. })
    ));
    assert!(matches!(
        repo.file(None, "", None, None, 10),
        Err(RepoError::InvalidPath { .. })
    ));
}

// ---------------------------------------------------------------- read-only and hardening

#[test]
fn views_never_write_the_index() {
    let (t, _, _) = sample_repo();
    let index = t.path().join(".git/index");
    let before = std::fs::read(&index).expect("index");
    let mtime_before = std::fs::metadata(&index)
        .and_then(|m| m.modified())
        .expect("mtime");
    // Make README.md stat-dirty but content-identical: the case where `git status` and
    // `git diff` would otherwise refresh and rewrite the index.
    std::thread::sleep(Duration::from_millis(1100));
    t.write("README.md", "hello\nworld\n");
    let repo = t.repo();
    let status = repo.status().expect("status");
    assert!(status.entries.is_empty(), "{:?}", status.entries);
    let diff = repo
        .diff(DiffTarget::WorkingTree, None, 10_000)
        .expect("diff");
    assert!(diff.files.is_empty() && diff.patch.is_empty(), "{diff:?}");
    repo.diff(DiffTarget::Staged, None, 10_000).expect("diff");
    repo.log(None, None, 10, 0).expect("log");
    repo.show("HEAD", 10_000).expect("show");
    repo.tree(None, None, true, 100).expect("tree");
    repo.file(None, "README.md", None, None, 100).expect("file");

    assert_eq!(std::fs::read(&index).expect("index"), before);
    let mtime_after = std::fs::metadata(&index)
        .and_then(|m| m.modified())
        .expect("mtime");
    assert_eq!(mtime_before, mtime_after, "the index was rewritten");
    assert!(!t.path().join(".git/index.lock").exists());
}

#[test]
fn repository_config_cannot_run_programs_or_change_output() {
    let (t, first, _) = sample_repo();
    let marker = t.path().join("..").join(format!(
        "vox-repo-marker-{}",
        t.path().file_name().and_then(|n| n.to_str()).unwrap_or("x")
    ));
    let script = t.path().join(".git/evil.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho ran >> '{}'\ncat\n", marker.display()),
    )
    .expect("script");
    let chmod = Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .expect("chmod");
    assert!(chmod.success());
    let evil = script.to_str().expect("utf8");
    for (key, value) in [
        ("diff.external", evil),
        ("core.pager", evil),
        ("pager.diff", evil),
        ("core.fsmonitor", evil),
        ("diff.evil.textconv", evil),
        ("gpg.program", evil),
        ("log.showSignature", "true"),
        ("color.ui", "always"),
        ("color.diff", "always"),
        ("diff.noprefix", "true"),
        ("status.showUntrackedFiles", "no"),
        ("log.follow", "true"),
    ] {
        t.git(&["config", key, value]);
    }
    // A commit carrying a signature, so that log.showSignature would really start gpg.program.
    let raw = t.git(&["cat-file", "commit", "HEAD"]);
    let (headers, message) = raw.split_once("\n\n").expect("commit object");
    let signed = format!(
        "{headers}\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\n{message}\n"
    );
    let mut child = t
        .command()
        .args(["hash-object", "-t", "commit", "-w", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("hash-object");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(signed.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("hash-object");
    let signed_sha = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    t.git(&["update-ref", "refs/heads/main", &signed_sha]);
    t.write(".gitattributes", "*.md diff=evil\n");
    t.write("README.md", "changed\n");
    t.write("untracked.txt", "u\n");

    let repo = t.repo();
    let status = repo.status().expect("status");
    assert!(status.entries.iter().any(|e| e.path == "untracked.txt"));
    let diff = repo
        .diff(DiffTarget::WorkingTree, None, 100_000)
        .expect("diff");
    assert!(
        diff.patch.contains("diff --git a/README.md b/README.md"),
        "{}",
        diff.patch
    );
    assert!(
        diff.patch.contains("-hello"),
        "textconv or external diff ran: {}",
        diff.patch
    );
    assert!(
        !diff.patch.contains('\u{1b}'),
        "colour codes leaked into the patch"
    );
    let show = repo.show(&first, 100_000).expect("show");
    assert!(!show.patch.contains('\u{1b}'));
    assert_eq!(
        repo.log(None, Some("README.md"), 10, 0).expect("log").len(),
        1
    );
    repo.file(None, "README.md", None, None, 100).expect("file");
    assert_eq!(
        repo.show("HEAD", 1000).expect("show").commit.sha,
        signed_sha
    );

    let ran = marker.exists();
    let _ = std::fs::remove_file(&marker);
    assert!(!ran, "a configured program was executed");
}

// ---------------------------------------------------------------- configuration naming programs

/// Scripts that record that they ran, outside every repository: a test arms a repository's
/// configuration with them and asserts that nothing ran.
struct Trap {
    dir: tempfile::TempDir,
}

impl Trap {
    fn new() -> Trap {
        Trap {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn marker(&self) -> std::path::PathBuf {
        self.dir.path().join("ran")
    }

    /// An executable that appends `<tag> <args>` to the marker, then copies standard input to
    /// standard output (so a filter or textconv that did run would still pass content through).
    fn script(&self, tag: &str) -> String {
        let path = self.dir.path().join(format!("{tag}.sh"));
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho \"{tag} $*\" >> '{}'\ncat\n",
                self.marker().display()
            ),
        )
        .expect("script");
        let chmod = Command::new("chmod")
            .arg("+x")
            .arg(&path)
            .status()
            .expect("chmod");
        assert!(chmod.success());
        path.to_str().expect("utf8").to_owned()
    }

    /// What ran, one line per run.
    fn ran(&self) -> String {
        std::fs::read_to_string(self.marker()).unwrap_or_default()
    }

    fn assert_nothing_ran(&self) {
        let ran = self.ran();
        assert!(ran.is_empty(), "configured programs ran:\n{ran}");
    }
}

/// Sets the file's modification time far in the past: the index's stat data no longer matches,
/// so `status` and `diff` must hash the file (through its clean filter, if one ran) to tell
/// whether it changed.
fn make_stat_dirty(path: &Path) {
    let touched = Command::new("touch")
        .args(["-d", "2001-02-03 04:05:06"])
        .arg(path)
        .status()
        .expect("touch");
    assert!(touched.success());
}

/// Runs every view on the repository, the working-tree ones with changes to look at.
fn run_every_view(t: &TestRepo, first: &str) -> (vox_repo::Status, vox_repo::Diff) {
    let repo = t.repo();
    let status = repo.status().expect("status");
    let diff = repo
        .diff(DiffTarget::WorkingTree, None, 100_000)
        .expect("diff");
    repo.diff(DiffTarget::Staged, None, 100_000)
        .expect("staged diff");
    repo.diff(
        DiffTarget::Revisions {
            from: first.to_owned(),
            to: None,
        },
        None,
        100_000,
    )
    .expect("diff against the working tree");
    repo.diff(
        DiffTarget::Revisions {
            from: first.to_owned(),
            to: Some("HEAD".to_owned()),
        },
        None,
        100_000,
    )
    .expect("diff of commits");
    repo.show("HEAD", 100_000).expect("show");
    repo.show(first, 100_000).expect("show");
    repo.log(None, None, 10, 0).expect("log");
    repo.log(None, Some("README.md"), 10, 0)
        .expect("log of a path");
    repo.tree(None, None, true, 100).expect("tree");
    repo.file(None, "README.md", None, None, 1000)
        .expect("file");
    (status, diff)
}

#[test]
fn filter_drivers_named_by_the_configuration_never_run() {
    let (t, first, _) = sample_repo();
    let trap = Trap::new();
    // Committed before the repository is armed: git itself would run the filters while adding.
    t.write(".gitattributes", "*.md filter=evil\nsrc/* filter=proc\n");
    t.write("notes.txt", "notes\n");
    t.write("odd.cfg", "odd\n");
    t.commit_all("attributes");
    t.write("staged.md", "staged\n");
    t.git(&["add", "staged.md"]);
    // .git/info/attributes is read whatever the tree says; the driver's name has `=` and dots.
    t.write(
        ".git/info/attributes",
        "*.txt filter=we=ird.na.me\n*.cfg filter=Evil\n",
    );
    let clean = trap.script("clean");
    let smudge = trap.script("smudge");
    let process = trap.script("process");
    for (key, value) in [
        ("filter.evil.clean", clean.as_str()),
        ("filter.evil.smudge", smudge.as_str()),
        ("filter.evil.required", "true"),
        ("filter.proc.process", process.as_str()),
        ("filter.proc.required", "true"),
        ("filter.we=ird.na.me.clean", clean.as_str()),
        ("filter.we=ird.na.me.process", process.as_str()),
        // Subsection names are case-sensitive: `Evil` is not `evil`.
        ("filter.Evil.clean", clean.as_str()),
    ] {
        t.git(&["config", key, value]);
    }
    // A modified file of each driver, and a stat-dirty unmodified one.
    t.write("README.md", "hello\nchanged\n");
    t.write("src/lib.rs", "fn a() {}\nfn c() {}\n");
    t.write("notes.txt", "more notes\n");
    t.write("odd.cfg", "odder\n");
    make_stat_dirty(&t.path().join("docs/guide.md"));

    let (status, diff) = run_every_view(&t, &first);
    trap.assert_nothing_ran();
    let mut unstaged: Vec<_> = status
        .entries
        .iter()
        .filter(|e| e.kind == EntryKind::Unstaged)
        .map(|e| e.path.as_str())
        .collect();
    unstaged.sort_unstable();
    assert_eq!(
        unstaged,
        ["README.md", "notes.txt", "odd.cfg", "src/lib.rs"],
        "{status:?}"
    );
    assert!(
        status
            .entries
            .iter()
            .any(|e| e.path == "staged.md" && e.kind == EntryKind::Staged)
    );
    // The patch is of the files as they are on disk.
    for line in ["+changed", "+fn c() {}", "+more notes", "+odder"] {
        assert!(diff.patch.contains(line), "{line} missing: {}", diff.patch);
    }
    assert_eq!(diff.files.len(), 4, "{:?}", diff.files);
}

#[test]
fn textconv_and_external_diff_drivers_never_run() {
    let (t, first, _) = sample_repo();
    let trap = Trap::new();
    t.write(".gitattributes", "*.md diff=evil\n*.rs diff=ext\n");
    t.commit_all("attributes");
    t.write("README.md", "hello\nstaged\n");
    t.git(&["add", "README.md"]);
    let textconv = trap.script("textconv");
    let external = trap.script("external");
    for (key, value) in [
        ("diff.evil.textconv", textconv.as_str()),
        ("diff.evil.cachetextconv", "true"),
        ("diff.ext.command", external.as_str()),
        ("diff.external", external.as_str()),
    ] {
        t.git(&["config", key, value]);
    }
    t.write("README.md", "hello\nstaged\nunstaged\n");
    t.write("src/lib.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");

    let (_, diff) = run_every_view(&t, &first);
    trap.assert_nothing_ran();
    assert!(diff.patch.contains("+unstaged"), "{}", diff.patch);
    assert!(diff.patch.contains("+fn c() {}"), "{}", diff.patch);
    let repo = t.repo();
    let staged = repo
        .diff(DiffTarget::Staged, None, 100_000)
        .expect("staged");
    assert!(staged.patch.contains("+staged"), "{}", staged.patch);
    let show = repo.show("HEAD~1", 100_000).expect("show");
    assert!(show.patch.contains("+fn b() {}"), "{}", show.patch);
    trap.assert_nothing_ran();
}

#[test]
fn fsmonitor_pager_and_editor_never_run() {
    let (t, first, _) = sample_repo();
    let trap = Trap::new();
    let fsmonitor = trap.script("fsmonitor");
    let pager = trap.script("pager");
    let editor = trap.script("editor");
    for (key, value) in [
        ("core.fsmonitor", fsmonitor.as_str()),
        ("core.fsmonitorHookVersion", "2"),
        ("core.pager", pager.as_str()),
        ("pager.diff", pager.as_str()),
        ("pager.log", pager.as_str()),
        ("pager.status", pager.as_str()),
        ("core.editor", editor.as_str()),
        ("sequence.editor", editor.as_str()),
    ] {
        t.git(&["config", key, value]);
    }
    t.write("README.md", "changed\n");
    make_stat_dirty(&t.path().join("docs/guide.md"));
    let (status, diff) = run_every_view(&t, &first);
    trap.assert_nothing_ran();
    assert_eq!(status.entries.len(), 1, "{status:?}");
    assert!(diff.patch.contains("+changed"), "{}", diff.patch);

    // A command that would open an editor gets none: the message stays empty and git stops.
    let out = vox_repo::safe_git_command(t.path())
        .expect("command")
        .args(["commit", "--allow-empty"])
        .output()
        .expect("commit");
    assert!(!out.status.success());
    trap.assert_nothing_ran();
}

/// Every hook git knows of, so that whatever a command triggers is armed.
const HOOK_NAMES: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-auto-gc",
    "post-rewrite",
    "reference-transaction",
    "post-index-change",
    "fsmonitor-watchman",
    "sendemail-validate",
];

/// Arms hooks every way a repository can: `.git/hooks`, a `core.hooksPath` directory, and
/// configured hooks (`hook.<name>.command`, run by git 2.54 and later).
fn arm_hooks(t: &TestRepo, trap: &Trap) {
    let hook = trap.script("hook");
    let dirs = [t.path().join(".git/hooks"), trap.dir.path().join("hooks")];
    for dir in &dirs {
        std::fs::create_dir_all(dir).expect("hooks dir");
        for name in HOOK_NAMES {
            std::fs::copy(&hook, dir.join(name)).expect("hook");
        }
    }
    t.git(&["config", "core.hooksPath", dirs[1].to_str().expect("utf8")]);
    t.git(&["config", "hook.evil.command", &hook]);
    for name in HOOK_NAMES {
        t.git(&["config", "--add", "hook.evil.event", name]);
    }
    t.git(&["config", "hook.Other.Name.command", &hook]);
    t.git(&["config", "hook.Other.Name.event", "pre-commit"]);
    t.git(&["config", "gc.auto", "1"]);
    t.git(&["config", "gc.autoDetach", "false"]);
}

#[test]
fn hooks_never_run_for_views_or_commands() {
    let (t, first, _) = sample_repo();
    let trap = Trap::new();
    arm_hooks(&t, &trap);
    // The hook itself works: git run plainly would call it.
    let plain = t
        .command()
        .args(["commit", "-q", "--allow-empty", "-m", "plain"])
        .output()
        .expect("commit");
    assert!(plain.status.success());
    assert!(trap.ran().contains("hook"), "the armed hooks did not run");
    std::fs::remove_file(trap.marker()).expect("reset");

    t.write("README.md", "changed\n");
    make_stat_dirty(&t.path().join("docs/guide.md"));
    run_every_view(&t, &first);
    trap.assert_nothing_ran();

    // Commands that write: a worktree (post-checkout, reference-transaction), a commit in it
    // (pre-commit, commit-msg, post-commit ...), a branch and an auto-gc.
    let outside = tempfile::tempdir().expect("tempdir");
    let wt = outside.path().join("wt");
    let git = |dir: &Path, args: &[&str]| {
        let out = vox_repo::safe_git_command(dir)
            .expect("command")
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(
        t.path(),
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "side",
            wt.to_str().expect("utf8"),
        ],
    );
    std::fs::write(wt.join("new.txt"), "new\n").expect("write");
    git(&wt, &["add", "new.txt"]);
    git(&wt, &["commit", "-q", "-m", "in the worktree"]);
    git(t.path(), &["branch", "other"]);
    git(t.path(), &["gc", "--auto"]);
    trap.assert_nothing_ran();
}

#[test]
fn a_checkout_by_a_safe_command_runs_no_smudge_filter() {
    let (t, _, _) = sample_repo();
    let trap = Trap::new();
    t.write(".gitattributes", "*.md filter=evil\n*.rs filter=proc\n");
    t.commit_all("attributes");
    let smudge = trap.script("smudge");
    let process = trap.script("process");
    for (key, value) in [
        ("filter.evil.smudge", smudge.as_str()),
        ("filter.evil.clean", smudge.as_str()),
        ("filter.evil.required", "true"),
        ("filter.proc.process", process.as_str()),
        ("filter.proc.required", "true"),
    ] {
        t.git(&["config", key, value]);
    }
    let outside = tempfile::tempdir().expect("tempdir");
    let wt = outside.path().join("wt");
    let out = vox_repo::safe_git_command(t.path())
        .expect("command")
        .args(["worktree", "add", "-q", "--detach"])
        .arg(&wt)
        .arg("HEAD")
        .output()
        .expect("worktree add");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    trap.assert_nothing_ran();
    assert_eq!(
        std::fs::read_to_string(wt.join("README.md")).expect("read"),
        "hello\nworld\n"
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("src/lib.rs")).expect("read"),
        "fn a() {}\nfn b() {}\n"
    );
    // And status in the new worktree, which hashes every freshly written file.
    let repo = Repo::discover(&wt).expect("discover");
    assert!(repo.status().expect("status").entries.is_empty());
    trap.assert_nothing_ran();
}

#[test]
fn a_submodule_configuration_is_never_used() {
    let trap = Trap::new();
    let sub = TestRepo::new();
    sub.write("f.txt", "sub\n");
    sub.write(".gitattributes", "* filter=subevil diff=subevil\n");
    sub.commit_all("sub");
    let (t, first, _) = sample_repo();
    t.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        sub.path().to_str().expect("utf8"),
        "vendor/sub",
    ]);
    t.commit_all("submodule");
    // The submodule's own configuration, where the superproject's scan does not look.
    let sub_git = t.path().join(".git/modules/vendor/sub");
    let filter = trap.script("subfilter");
    let textconv = trap.script("subtextconv");
    let fsmonitor = trap.script("subfsmonitor");
    for (key, value) in [
        ("filter.subevil.clean", filter.as_str()),
        ("filter.subevil.required", "true"),
        ("diff.subevil.textconv", textconv.as_str()),
        ("core.fsmonitor", fsmonitor.as_str()),
    ] {
        t.git(&[
            "config",
            "--file",
            sub_git.join("config").to_str().expect("utf8"),
            key,
            value,
        ]);
    }
    // Inline submodule diffs start `git diff` inside the submodule.
    t.git(&["config", "diff.submodule", "diff"]);
    t.write("vendor/sub/f.txt", "changed inside\n");
    make_stat_dirty(&t.path().join("vendor/sub/.gitattributes"));
    t.write("README.md", "changed\n");

    let (status, diff) = run_every_view(&t, &first);
    trap.assert_nothing_ran();
    let paths: Vec<_> = status.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["README.md"], "{status:?}");
    assert!(diff.patch.contains("+changed"), "{}", diff.patch);
    let show = t.repo().show("HEAD", 100_000).expect("show");
    assert!(show.patch.contains("+Subproject commit "), "{}", show.patch);
    trap.assert_nothing_ran();
}

#[test]
fn a_git_command_past_its_deadline_is_reported_as_a_timeout() {
    let (t, _, _) = sample_repo();
    let repo = t.repo().with_timeout(Duration::from_nanos(1));
    let err = repo.status().expect_err("timeout");
    assert_eq!(err.code(), "git_timeout");
    assert!(err.to_string().contains("timed out"));
}

/// A repository where `git diff` of the working tree hangs: opening a FIFO with no writer
/// blocks forever, and git opens the attributes file for a diff.
#[cfg(unix)]
fn hanging_diff_repo() -> TestRepo {
    let (t, _, _) = sample_repo();
    let fifo = t.path().join(".git/attributes-fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    t.git(&[
        "config",
        "core.attributesFile",
        fifo.to_str().expect("utf8"),
    ]);
    t.write("README.md", "changed\n");
    t
}

#[cfg(unix)]
#[test]
fn a_hanging_git_is_killed_at_the_deadline() {
    let t = hanging_diff_repo();
    let repo = t.repo().with_timeout(Duration::from_millis(300));
    let started = std::time::Instant::now();
    let err = repo
        .diff(DiffTarget::WorkingTree, None, 1000)
        .expect_err("hang");
    assert_eq!(err.code(), "git_timeout", "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[cfg(unix)]
#[test]
fn a_hanging_git_is_killed_when_the_caller_cancels() {
    let t = hanging_diff_repo();
    let cancelled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = cancelled.clone();
    let repo = t
        .repo()
        .with_cancel(move || flag.load(std::sync::atomic::Ordering::Relaxed));
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        cancelled.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let started = std::time::Instant::now();
    let err = repo
        .diff(DiffTarget::WorkingTree, None, 1000)
        .expect_err("hang");
    setter.join().unwrap();
    assert_eq!(err.code(), "git_cancelled", "{err}");
    // Long before the 10 s deadline.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn results_serialize_with_the_documented_wire_names() {
    let (t, _, second) = sample_repo();
    t.write("new.txt", "n\n");
    let repo = t.repo();
    let status = serde_json::to_value(repo.status().expect("status")).expect("json");
    assert_eq!(status["entries"][0]["kind"], "untracked");
    assert_eq!(status["branch"], "main");
    let tree = serde_json::to_value(repo.tree(None, None, false, 10).expect("tree")).expect("json");
    assert_eq!(tree["entries"][1]["kind"], "tree");
    // ShowCommit flattens the commit fields next to the body and patch.
    let show = serde_json::to_value(repo.show("HEAD", 100).expect("show")).expect("json");
    assert_eq!(show["sha"], second.as_str());
    assert!(show["body"].is_string() && show["patch"].is_string());
}
