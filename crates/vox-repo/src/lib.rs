//! Read-only views of a workspace's git repository, for the `vox_repo_*` MCP tools.
//!
//! Every view runs the `git` CLI with a hardened environment (no pager, no external diff or
//! textconv, no optional locks, no network, no prompts, `LC_ALL=C`), a deadline and an output
//! cap, and parses its `-z` output. Revisions and paths are untrusted: they are checked here and
//! revisions are resolved to object ids before any other command sees them.
//!
//! The repository is untrusted too: nothing its configuration names is run, neither by the
//! views nor by the other git commands of the project, which build theirs with
//! [`safe_git_command`] (filter drivers, textconv, external diff, hooks, fsmonitor, pager,
//! editor, gpg, credential helpers and transport are all turned off).
//!
//! Paths, both accepted and returned, are relative to the repository root.

#![warn(missing_docs)]

mod git;
mod parse;
mod validate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::git::{Git, GitOutput};
use crate::parse::{LOG_FIELDS, LOG_FORMAT};
use crate::validate::{cap_text, check_rev, normalize_path};

/// How long one git command may run before it is killed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Most bytes of standard output read from any one git command.
pub const OUTPUT_CAP: usize = 16 * 1024 * 1024;
/// Most commits one [`Repo::log`] call returns.
pub const MAX_LOG_LIMIT: usize = 200;
/// Most entries one [`Repo::tree`] call returns.
pub const MAX_TREE_LIMIT: usize = 10_000;
/// Most entries [`Repo::status`] returns.
pub const MAX_STATUS_ENTRIES: usize = 5_000;
/// Most files a [`Diff`] lists.
pub const MAX_DIFF_FILES: usize = 5_000;
/// Most bytes of a commit message body [`Repo::show`] returns.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Bytes git inspects to decide whether a blob is binary; we use the same rule.
const BINARY_SNIFF_BYTES: usize = 8000;

/// A `git` command to run in `dir` that runs no program the repository's (or anyone's)
/// configuration names; add the subcommand and its arguments, then run it.
///
/// It has no pager, editor, prompt, credential helper or transport; hooks (`core.hooksPath`
/// and, with git 2.54 or later, configured `hook.<name>` hooks), fsmonitor, gpg and automatic gc
/// are off; and every filter driver the configuration names (`filter.<driver>.clean`,
/// `.smudge`, `.process`) is turned off by name, so a checkout, `add`, `status` or `diff`
/// passes contents through unfiltered (git-lfs files stay pointers). That name list is read
/// from git's configuration here, by a first git process with the same protections, so the
/// command should be built right before it runs. Variables that point git at another
/// repository or index (`GIT_DIR`, `GIT_INDEX_FILE` ...) are removed; standard input is null.
///
/// Two things remain the caller's: a command that can print a patch (`diff`, `log -p`,
/// `show`, `blame`) must be given `--no-ext-diff --no-textconv`, and `status` or a `diff` of
/// the working tree `--ignore-submodules=dirty`, since git runs inside a submodule under the
/// submodule's own configuration. Fails when that configuration cannot be read (or not within
/// [`DEFAULT_TIMEOUT`]).
pub fn safe_git_command(dir: &Path) -> Result<std::process::Command> {
    git::safe_command(dir, DEFAULT_TIMEOUT)
}

/// Why a repository view failed.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// The workspace is not inside a git working tree.
    #[error("not a git repository: {}", .0.display())]
    NotARepository(PathBuf),
    /// The revision does not name a commit.
    #[error("unknown revision '{0}'")]
    UnknownRevision(String),
    /// The revision text is refused before reaching git.
    #[error("invalid revision '{rev}': {reason}")]
    InvalidRevision {
        /// The revision as given.
        rev: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The path is absolute or climbs out of the repository.
    #[error("path '{path}' escapes the repository")]
    PathEscapes {
        /// The path as given.
        path: String,
    },
    /// The path text is refused before reaching git.
    #[error("invalid path '{path}': {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Nothing exists at the path in the revision.
    #[error("path '{path}' does not exist in {rev}")]
    PathNotFound {
        /// The normalised path.
        path: String,
        /// The resolved commit id.
        rev: String,
    },
    /// The path names a file or submodule where a directory was needed.
    #[error("path '{path}' is not a directory in {rev}")]
    NotADirectory {
        /// The normalised path.
        path: String,
        /// The resolved commit id.
        rev: String,
    },
    /// The path names a directory or submodule where a file was needed.
    #[error("path '{path}' is not a file in {rev} (it is a {kind})")]
    NotAFile {
        /// The normalised path.
        path: String,
        /// The resolved commit id.
        rev: String,
        /// What it is instead: `tree` or `commit` (submodule).
        kind: &'static str,
    },
    /// The requested line range is impossible.
    #[error("invalid line range: {0}")]
    InvalidLineRange(String),
    /// git did not finish in time and was killed.
    #[error("git {command} timed out after {seconds} s")]
    Timeout {
        /// The git subcommand.
        command: String,
        /// The deadline that was exceeded.
        seconds: f64,
    },
    /// The caller cancelled the call ([`Repo::with_cancel`]); git was killed.
    #[error("git {command} was cancelled")]
    Cancelled {
        /// The git subcommand.
        command: String,
    },
    /// git could not be started.
    #[error("could not run git: {0}")]
    Spawn(#[source] std::io::Error),
    /// Reading git's output failed.
    #[error("reading the output of git {command} failed: {source}")]
    Io {
        /// The git subcommand.
        command: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// git exited with an error we have no more specific variant for.
    #[error("git {command} failed: {stderr}")]
    Git {
        /// The git subcommand.
        command: String,
        /// git's standard error, trimmed and capped.
        stderr: String,
    },
    /// git's output did not have the expected shape.
    #[error("unexpected output from git {command}: {detail}")]
    Parse {
        /// The git subcommand.
        command: String,
        /// What did not match.
        detail: String,
    },
}

impl RepoError {
    /// A stable snake_case code for the error, for tool results and denials.
    pub fn code(&self) -> &'static str {
        match self {
            RepoError::NotARepository(_) => "not_a_repository",
            RepoError::UnknownRevision(_) => "unknown_revision",
            RepoError::InvalidRevision { .. } => "invalid_revision",
            RepoError::PathEscapes { .. } => "path_escapes_repository",
            RepoError::InvalidPath { .. } => "invalid_path",
            RepoError::PathNotFound { .. } => "path_not_found",
            RepoError::NotADirectory { .. } => "not_a_directory",
            RepoError::NotAFile { .. } => "not_a_file",
            RepoError::InvalidLineRange(_) => "invalid_line_range",
            RepoError::Timeout { .. } => "git_timeout",
            RepoError::Cancelled { .. } => "git_cancelled",
            RepoError::Spawn(_) => "git_unavailable",
            RepoError::Io { .. } => "git_io",
            RepoError::Git { .. } => "git_failed",
            RepoError::Parse { .. } => "git_output_unparsable",
        }
    }

    /// True when the caller's input was at fault (as opposed to the repository or git).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            RepoError::UnknownRevision(_)
                | RepoError::InvalidRevision { .. }
                | RepoError::PathEscapes { .. }
                | RepoError::InvalidPath { .. }
                | RepoError::PathNotFound { .. }
                | RepoError::NotADirectory { .. }
                | RepoError::NotAFile { .. }
                | RepoError::InvalidLineRange(_)
        )
    }
}

/// Result type of this crate.
pub type Result<T, E = RepoError> = std::result::Result<T, E>;

/// Working-tree state, from `git status --porcelain=v2`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Status {
    /// The checked-out branch; `None` when HEAD is detached.
    pub branch: Option<String>,
    /// The commit HEAD points at; `None` in a repository with no commits yet.
    pub head: Option<String>,
    /// True when HEAD is detached (then `head` is the checked-out commit).
    pub detached: bool,
    /// The branch's upstream, when one is configured.
    pub upstream: Option<Upstream>,
    /// Changed, untracked and conflicted paths in git's order.
    pub entries: Vec<StatusEntry>,
    /// True when entries were left out (more than [`MAX_STATUS_ENTRIES`]).
    pub truncated: bool,
}

/// A branch's upstream and how far apart they are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Upstream {
    /// The upstream ref, e.g. `origin/main`.
    pub name: String,
    /// Commits on the branch and not on the upstream; `None` when the upstream ref is gone.
    pub ahead: Option<u64>,
    /// Commits on the upstream and not on the branch; `None` when the upstream ref is gone.
    pub behind: Option<u64>,
}

/// Which side of a path changed. A path changed both in the index and in the working tree is
/// listed twice, once `staged` and once `unstaged`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// Index differs from HEAD.
    Staged,
    /// Working tree differs from the index.
    Unstaged,
    /// Not tracked and not ignored.
    Untracked,
    /// Unmerged (a merge conflict).
    Conflicted,
}

/// One path in [`Status`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct StatusEntry {
    /// Repository-relative path (a directory ends in `/` for an untracked directory).
    pub path: String,
    /// The source path of a rename or copy.
    pub orig_path: Option<String>,
    /// git's index status letter (`.` unchanged, `M`, `A`, `D`, `R`, `C`, `T`, `U`, `?`).
    pub index_status: String,
    /// git's working-tree status letter, same alphabet.
    pub worktree_status: String,
    /// Which side this entry reports.
    pub kind: EntryKind,
}

/// One commit, as listed by [`Repo::log`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Commit {
    /// Full object id.
    pub sha: String,
    /// Abbreviated object id, unique in the repository.
    pub short_sha: String,
    /// Author name as recorded (no mailmap).
    pub author_name: String,
    /// Author e-mail as recorded.
    pub author_email: String,
    /// Author time, Unix seconds.
    pub author_time: i64,
    /// First line of the message.
    pub subject: String,
    /// Parent object ids, first parent first.
    pub parents: Vec<String>,
}

/// What [`Repo::diff`] compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffTarget {
    /// Working tree against the index: unstaged changes (`git diff`). Untracked files are not
    /// part of it.
    WorkingTree,
    /// Index against HEAD: staged changes (`git diff --cached`).
    Staged,
    /// Commit `from` against commit `to`, or against the working tree when `to` is `None`.
    Revisions {
        /// The old side.
        from: String,
        /// The new side; `None` for the working tree.
        to: Option<String>,
    },
}

/// Per-file change counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct DiffFile {
    /// Path on the new side.
    pub path: String,
    /// Path on the old side, for a rename or copy.
    pub old_path: Option<String>,
    /// Lines added (0 for binary files).
    pub additions: u64,
    /// Lines deleted (0 for binary files).
    pub deletions: u64,
    /// True when git considers the file binary.
    pub binary: bool,
}

/// A diff: per-file stats and the unified patch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Diff {
    /// Changed files, in git's order.
    pub files: Vec<DiffFile>,
    /// True when files were left out (more than [`MAX_DIFF_FILES`]).
    pub files_truncated: bool,
    /// The unified patch, at most the requested number of bytes.
    pub patch: String,
    /// True when the patch was cut short.
    pub truncated: bool,
}

/// One commit in full, from [`Repo::show`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ShowCommit {
    /// The commit's log fields.
    #[serde(flatten)]
    pub commit: Commit,
    /// The message after the subject line (and its blank line); at most [`MAX_BODY_BYTES`].
    pub body: String,
    /// True when the body was cut short.
    pub body_truncated: bool,
    /// What the patch compares against: the first parent, or `None` for a root commit (which
    /// is compared with the empty tree).
    pub diff_base: Option<String>,
    /// Changed files.
    pub files: Vec<DiffFile>,
    /// True when files were left out (more than [`MAX_DIFF_FILES`]).
    pub files_truncated: bool,
    /// The unified patch, at most the requested number of bytes.
    pub patch: String,
    /// True when the patch was cut short.
    pub truncated: bool,
}

/// The kind of object a tree entry points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// A file (or symlink).
    Blob,
    /// A directory.
    Tree,
    /// A submodule's commit.
    Commit,
}

/// One entry of a [`Tree`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TreeEntry {
    /// Repository-relative path.
    pub path: String,
    /// What the entry is.
    pub kind: ObjectKind,
    /// Size in bytes, for blobs.
    pub size: Option<u64>,
    /// git's octal mode, e.g. `100644`, `100755`, `120000` (symlink), `040000`, `160000`.
    pub mode: String,
    /// The object id.
    pub oid: String,
}

/// A directory listing at a commit, from [`Repo::tree`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Tree {
    /// The commit listed; `None` in a repository with no commits (then `entries` is empty).
    pub rev: Option<String>,
    /// The directory listed, repository-relative (`""` for the root).
    pub path: String,
    /// Entries in git's (byte-wise path) order.
    pub entries: Vec<TreeEntry>,
    /// True when entries were left out because of the limit.
    pub truncated: bool,
}

/// A file's content at a commit, from [`Repo::file`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FileAt {
    /// The normalised repository-relative path.
    pub path: String,
    /// The commit read from.
    pub rev: String,
    /// git's octal mode (`120000` means the content is a symlink's target).
    pub mode: String,
    /// Size of the whole blob in bytes.
    pub size: u64,
    /// True when the blob has a NUL byte in its first 8000 bytes (git's rule).
    pub binary: bool,
    /// The selected lines, lossily decoded; `None` for a binary file.
    pub content: Option<String>,
    /// Lines in the file; `None` for a binary file or one larger than [`OUTPUT_CAP`].
    pub total_lines: Option<usize>,
    /// First line returned, 1-based (0 for a binary file).
    pub start_line: usize,
    /// Last line returned, at least partly (`start_line - 1` when nothing was).
    pub end_line: usize,
    /// True when the selection was cut short by the byte limit.
    pub truncated: bool,
}

/// A git working tree whose history and state can be viewed, read-only.
#[derive(Debug, Clone)]
pub struct Repo {
    root: PathBuf,
    git: Git,
}

impl Repo {
    /// Finds the repository whose working tree contains `workspace`.
    pub fn discover(workspace: &Path) -> Result<Repo> {
        let not_a_repo = || RepoError::NotARepository(workspace.to_path_buf());
        if !workspace.is_dir() {
            return Err(not_a_repo());
        }
        let git = Git {
            timeout: DEFAULT_TIMEOUT,
            cancel: None,
        };
        let out = git.run(workspace, &["rev-parse", "--show-toplevel"], 64 * 1024)?;
        if !out.success || out.overflowed {
            // A repository owned by another user is a repository git refuses to read; say so
            // rather than claim there is none.
            if out.stderr.contains("dubious ownership") {
                return Err(RepoError::Git {
                    command: "rev-parse".to_owned(),
                    stderr: out.stderr,
                });
            }
            return Err(not_a_repo());
        }
        let mut raw = out.stdout;
        if raw.last() == Some(&b'\n') {
            raw.pop();
        }
        if raw.is_empty() {
            return Err(not_a_repo());
        }
        Ok(Repo {
            root: path_from_bytes(raw),
            git,
        })
    }

    /// Sets how long one git command may run (default [`DEFAULT_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Repo {
        self.git.timeout = timeout;
        self
    }

    /// Stops (kills) a running git command as soon as `cancelled()` answers true; the call
    /// then fails with [`RepoError::Cancelled`]. It is asked every 20 ms while git runs.
    pub fn with_cancel(mut self, cancelled: impl Fn() -> bool + Send + Sync + 'static) -> Repo {
        self.git.cancel = Some(git::CancelCheck(std::sync::Arc::new(cancelled)));
        self
    }

    /// The root of the working tree.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Branch, upstream and changed paths of the working tree. A submodule is listed when its
    /// checked-out commit differs, not for changes inside it.
    pub fn status(&self) -> Result<Status> {
        let out = self.run_ok(
            &[
                "status",
                "--porcelain=v2",
                "-z",
                "--branch",
                "--untracked-files=normal",
                "--find-renames",
                // A submodule's own changes would be found by a git process started inside it,
                // under the submodule's configuration; its checked-out commit is still compared.
                "--ignore-submodules=dirty",
            ],
            OUTPUT_CAP,
        )?;
        let bytes = if out.overflowed {
            parse::complete_records(&out.stdout)
        } else {
            &out.stdout
        };
        let (headers, entries, dropped) = parse::parse_status(bytes, MAX_STATUS_ENTRIES)?;
        Ok(Status {
            detached: headers.head.is_none() && headers.oid.is_some(),
            branch: headers.head,
            head: headers.oid,
            upstream: headers.upstream,
            entries,
            truncated: dropped || out.overflowed,
        })
    }

    /// Commits reachable from `rev` (default HEAD), newest first, optionally only those that
    /// touch `path`; at most `limit` (capped at [`MAX_LOG_LIMIT`]) after skipping `skip`.
    ///
    /// A repository with no commits yet has an empty log.
    pub fn log(
        &self,
        rev: Option<&str>,
        path: Option<&str>,
        limit: usize,
        skip: usize,
    ) -> Result<Vec<Commit>> {
        let path = path.map(normalize_path).transpose()?;
        // "HEAD" is our own constant, so it needs no resolution up front; that saves one git
        // process on the most common call. An unborn HEAD is told apart only if log fails.
        let start = match rev {
            Some(rev) => self.resolve_commit(rev)?,
            None => "HEAD".to_owned(),
        };
        let limit = limit.min(MAX_LOG_LIMIT);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut args = vec![
            "log".to_owned(),
            "-z".to_owned(),
            LOG_FORMAT.to_owned(),
            format!("--max-count={limit}"),
            format!("--skip={skip}"),
            "--end-of-options".to_owned(),
            start,
            "--".to_owned(),
        ];
        args.extend(path.filter(|p| !p.is_empty()));
        let out = self.git.run(&self.root, &args, OUTPUT_CAP)?;
        if !out.success && !out.overflowed {
            if rev.is_none() && self.head()?.is_none() {
                return Ok(Vec::new());
            }
            return Err(RepoError::Git {
                command: "log".to_owned(),
                stderr: out.stderr,
            });
        }
        if out.overflowed {
            // 200 commits cannot fill 16 MiB unless subjects are absurd; parse what is whole.
            let fields = parse::nul_records(parse::complete_records(&out.stdout));
            let whole = fields.len() - fields.len() % LOG_FIELDS;
            return fields[..whole]
                .chunks(LOG_FIELDS)
                .map(parse::commit_from_fields)
                .collect();
        }
        parse::parse_log(&out.stdout)
    }

    /// Per-file stats and the patch of `target`, optionally limited to `path`; the patch is
    /// capped at `max_bytes` (and at [`OUTPUT_CAP`]) on a UTF-8 boundary. Working-tree files
    /// are compared as they are on disk: no filter driver (`filter=` attribute) is run. A
    /// submodule is compared by its checked-out commit only.
    pub fn diff(&self, target: DiffTarget, path: Option<&str>, max_bytes: usize) -> Result<Diff> {
        let path = path.map(normalize_path).transpose()?;
        let revs = match target {
            DiffTarget::WorkingTree => DiffRevs::WorkingTree,
            DiffTarget::Staged => DiffRevs::Staged,
            DiffTarget::Revisions { from, to } => DiffRevs::Commits {
                from: self.resolve_commit(&from)?,
                to: to.map(|to| self.resolve_commit(&to)).transpose()?,
            },
        };
        self.diff_resolved(&revs, path.as_deref(), max_bytes)
    }

    /// One commit: its log fields, message body, changed files and patch against its first
    /// parent (the empty tree for a root commit), patch capped at `max_patch_bytes`.
    pub fn show(&self, rev: &str, max_patch_bytes: usize) -> Result<ShowCommit> {
        let sha = self.resolve_commit(rev)?;
        let format = format!("{LOG_FORMAT}%x00%b");
        let out = self.run_ok(
            &["log", "-1", "-z", &format, "--end-of-options", &sha, "--"],
            OUTPUT_CAP,
        )?;
        // The body is the last field, so NULs or anything else inside it cannot shift fields.
        let mut fields: Vec<&[u8]> = out.stdout.splitn(LOG_FIELDS + 1, |b| *b == 0).collect();
        let body_bytes = fields.pop().unwrap_or_default();
        let fields: Vec<String> = fields
            .iter()
            .map(|f| String::from_utf8_lossy(f).into_owned())
            .collect();
        let commit = parse::commit_from_fields(&fields)?;
        let body_bytes = trim_trailing(body_bytes, b"\0\n");
        let (body, body_truncated) = cap_text(body_bytes, MAX_BODY_BYTES, out.overflowed);

        let diff_base = commit.parents.first().cloned();
        let from = match &diff_base {
            Some(parent) => parent.clone(),
            None => self.empty_tree()?,
        };
        let diff = self.diff_resolved(
            &DiffRevs::Commits {
                from,
                to: Some(sha),
            },
            None,
            max_patch_bytes,
        )?;
        Ok(ShowCommit {
            commit,
            body,
            body_truncated,
            diff_base,
            files: diff.files,
            files_truncated: diff.files_truncated,
            patch: diff.patch,
            truncated: diff.truncated,
        })
    }

    /// The entries of directory `dir` (default the root) at `rev` (default HEAD), all the way
    /// down when `recursive` (then only files and submodules are listed, not directories), at
    /// most `limit` (capped at [`MAX_TREE_LIMIT`]).
    pub fn tree(
        &self,
        rev: Option<&str>,
        dir: Option<&str>,
        recursive: bool,
        limit: usize,
    ) -> Result<Tree> {
        let dir = normalize_path(dir.unwrap_or(""))?;
        let sha = match rev {
            Some(rev) => self.resolve_commit(rev)?,
            None => match self.head()? {
                Some(sha) => sha,
                None if dir.is_empty() => {
                    return Ok(Tree {
                        rev: None,
                        path: dir,
                        entries: Vec::new(),
                        truncated: false,
                    });
                }
                None => return Err(RepoError::UnknownRevision("HEAD".to_owned())),
            },
        };
        let listed = if dir.is_empty() {
            sha.clone()
        } else {
            let entry = self
                .entry_at(&sha, &dir)?
                .ok_or_else(|| RepoError::PathNotFound {
                    path: dir.clone(),
                    rev: sha.clone(),
                })?;
            if entry.kind != ObjectKind::Tree {
                return Err(RepoError::NotADirectory {
                    path: dir,
                    rev: sha,
                });
            }
            entry.oid
        };
        let limit = limit.min(MAX_TREE_LIMIT);
        let mut args = vec!["ls-tree", "-z", "-l"];
        if recursive {
            args.push("-r");
        }
        args.extend(["--end-of-options", &listed]);
        let out = self.run_ok(&args, OUTPUT_CAP)?;
        let bytes = if out.overflowed {
            parse::complete_records(&out.stdout)
        } else {
            &out.stdout
        };
        let records = parse::nul_records(bytes);
        let truncated = out.overflowed || records.len() > limit;
        let mut entries = Vec::with_capacity(records.len().min(limit));
        for record in records.iter().take(limit) {
            let mut entry = parse::parse_ls_tree_record(record)?;
            // We listed the directory's own tree object, so git printed paths relative to it.
            if !dir.is_empty() {
                entry.path = format!("{dir}/{}", entry.path);
            }
            entries.push(entry);
        }
        Ok(Tree {
            rev: Some(sha),
            path: dir,
            entries,
            truncated,
        })
    }

    /// The content of file `path` at `rev` (default HEAD), lines `start_line..=end_line`
    /// (1-based, inclusive, default the whole file), at most `max_bytes` of it (cut at a line
    /// end when one fits, otherwise on a UTF-8 boundary).
    pub fn file(
        &self,
        rev: Option<&str>,
        path: &str,
        start_line: Option<usize>,
        end_line: Option<usize>,
        max_bytes: usize,
    ) -> Result<FileAt> {
        let normalized = normalize_path(path)?;
        if normalized.is_empty() {
            return Err(RepoError::InvalidPath {
                path: path.to_owned(),
                reason: "a file path is required".to_owned(),
            });
        }
        let start = start_line.unwrap_or(1);
        if start == 0 {
            return Err(RepoError::InvalidLineRange(
                "start_line is 1-based and must be at least 1".to_owned(),
            ));
        }
        if let Some(end) = end_line
            && end < start
        {
            return Err(RepoError::InvalidLineRange(format!(
                "end_line {end} is before start_line {start}"
            )));
        }
        let sha = match rev {
            Some(rev) => self.resolve_commit(rev)?,
            None => self
                .head()?
                .ok_or_else(|| RepoError::UnknownRevision("HEAD".to_owned()))?,
        };
        let entry = self
            .entry_at(&sha, &normalized)?
            .ok_or_else(|| RepoError::PathNotFound {
                path: normalized.clone(),
                rev: sha.clone(),
            })?;
        match entry.kind {
            ObjectKind::Blob => {}
            ObjectKind::Tree | ObjectKind::Commit => {
                return Err(RepoError::NotAFile {
                    path: normalized,
                    rev: sha,
                    kind: if entry.kind == ObjectKind::Tree {
                        "directory"
                    } else {
                        "submodule"
                    },
                });
            }
        }
        let out = self.run_ok(
            &["cat-file", "--end-of-options", "blob", &entry.oid],
            OUTPUT_CAP,
        )?;
        let size = entry.size.unwrap_or(out.stdout.len() as u64);
        let sniff = &out.stdout[..out.stdout.len().min(BINARY_SNIFF_BYTES)];
        if sniff.contains(&0) {
            return Ok(FileAt {
                path: normalized,
                rev: sha,
                mode: entry.mode,
                size,
                binary: true,
                content: None,
                total_lines: None,
                start_line: 0,
                end_line: 0,
                truncated: false,
            });
        }
        let selection = select_lines(
            &out.stdout,
            out.overflowed,
            start,
            end_line,
            max_bytes.min(OUTPUT_CAP),
        )?;
        Ok(FileAt {
            path: normalized,
            rev: sha,
            mode: entry.mode,
            size,
            binary: false,
            content: Some(selection.content),
            total_lines: selection.total_lines,
            start_line: start,
            end_line: selection.end_line,
            truncated: selection.truncated,
        })
    }

    /// Runs git in the working tree and fails on a non-zero exit.
    fn run_ok<S: AsRef<std::ffi::OsStr>>(&self, args: &[S], cap: usize) -> Result<GitOutput> {
        let out = self.git.run(&self.root, args, cap)?;
        if !out.success && !out.overflowed {
            return Err(RepoError::Git {
                command: args
                    .first()
                    .map(|a| a.as_ref().to_string_lossy().into_owned())
                    .unwrap_or_default(),
                stderr: out.stderr,
            });
        }
        Ok(out)
    }

    /// Resolves untrusted revision text to a commit id.
    fn resolve_commit(&self, rev: &str) -> Result<String> {
        check_rev(rev)?;
        let peeled = format!("{rev}^{{commit}}");
        let out = self.git.run(
            &self.root,
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &peeled,
            ],
            4096,
        )?;
        let sha = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.success || out.overflowed || sha.is_empty() {
            return Err(RepoError::UnknownRevision(rev.to_owned()));
        }
        Ok(sha)
    }

    /// The commit HEAD points at, or `None` when the current branch has no commits yet.
    fn head(&self) -> Result<Option<String>> {
        match self.resolve_commit("HEAD") {
            Ok(sha) => Ok(Some(sha)),
            Err(RepoError::UnknownRevision(_)) => {
                // Unborn only if HEAD is a symbolic ref to a branch that does not exist yet;
                // otherwise HEAD is broken and saying "empty" would hide it.
                let out = self
                    .git
                    .run(&self.root, &["symbolic-ref", "--quiet", "HEAD"], 4096)?;
                if out.success {
                    Ok(None)
                } else {
                    Err(RepoError::UnknownRevision("HEAD".to_owned()))
                }
            }
            Err(other) => Err(other),
        }
    }

    /// The id of the empty tree in this repository's hash function, without writing it.
    fn empty_tree(&self) -> Result<String> {
        // Standard input is /dev/null, so this hashes zero bytes; without -w nothing is written.
        let out = self.run_ok(&["hash-object", "-t", "tree", "--stdin"], 4096)?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// The tree entry at exactly `path` in commit `sha`, if any.
    fn entry_at(&self, sha: &str, path: &str) -> Result<Option<TreeEntry>> {
        let out = self.run_ok(
            &["ls-tree", "-z", "-l", "--end-of-options", sha, "--", path],
            OUTPUT_CAP,
        )?;
        for record in parse::nul_records(&out.stdout) {
            let entry = parse::parse_ls_tree_record(&record)?;
            if entry.path == path {
                return Ok(Some(entry));
            }
        }
        Ok(None)
    }

    fn diff_resolved(&self, revs: &DiffRevs, path: Option<&str>, max_bytes: usize) -> Result<Diff> {
        let mut base: Vec<&str> = vec![
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--find-renames",
            // As for status: no git process inside a submodule, under its configuration.
            "--ignore-submodules=dirty",
        ];
        let mut tail: Vec<&str> = vec!["--end-of-options"];
        match revs {
            DiffRevs::WorkingTree => {}
            DiffRevs::Staged => base.push("--cached"),
            DiffRevs::Commits { from, to } => {
                tail.push(from);
                if let Some(to) = to {
                    tail.push(to);
                }
            }
        }
        tail.push("--");
        tail.extend(path.filter(|p| !p.is_empty()));

        let numstat_args: Vec<&str> = base
            .iter()
            .copied()
            .chain(["--numstat", "-z"])
            .chain(tail.iter().copied())
            .collect();
        let numstat = self.run_ok(&numstat_args, OUTPUT_CAP)?;
        let bytes = if numstat.overflowed {
            parse::complete_records(&numstat.stdout)
        } else {
            &numstat.stdout
        };
        let (files, dropped) = parse::parse_numstat(bytes, MAX_DIFF_FILES)?;

        let max_bytes = max_bytes.min(OUTPUT_CAP);
        let patch_args: Vec<&str> = base
            .iter()
            .copied()
            .chain(["--patch"])
            .chain(tail.iter().copied())
            .collect();
        // Reading stops at the cap and git is killed, so a huge diff costs at most max_bytes.
        let out = self.run_ok(&patch_args, max_bytes)?;
        let (patch, truncated) = cap_text(&out.stdout, max_bytes, out.overflowed);
        Ok(Diff {
            files,
            files_truncated: dropped || numstat.overflowed,
            patch,
            truncated,
        })
    }
}

/// Diff sides after revision resolution.
enum DiffRevs {
    WorkingTree,
    Staged,
    Commits { from: String, to: Option<String> },
}

/// Lines picked out of a blob.
struct Selection {
    content: String,
    total_lines: Option<usize>,
    end_line: usize,
    truncated: bool,
}

/// Picks lines `start..=end` out of `data` and caps them at `max_bytes`.
///
/// `cut_short` means `data` is only the head of the blob: its last partial line is ignored and
/// the total is unknown.
fn select_lines(
    data: &[u8],
    cut_short: bool,
    start: usize,
    end: Option<usize>,
    max_bytes: usize,
) -> Result<Selection> {
    let data = if cut_short {
        match data.iter().rposition(|b| *b == b'\n') {
            Some(last) => &data[..=last],
            None => &[],
        }
    } else {
        data
    };
    // Offsets where each line starts; a final newline does not start another line.
    let mut starts = vec![0usize];
    starts.extend(
        data.iter()
            .enumerate()
            .filter(|(i, b)| **b == b'\n' && i + 1 < data.len())
            .map(|(i, _)| i + 1),
    );
    let lines = if data.is_empty() { 0 } else { starts.len() };
    let total_lines = (!cut_short).then_some(lines);
    if start > lines.max(1) && !(cut_short && lines == 0) {
        return Err(RepoError::InvalidLineRange(if cut_short {
            format!(
                "start_line {start} is past the {lines} lines readable in the first {OUTPUT_CAP} bytes"
            )
        } else {
            format!("start_line {start} is past the end of the file ({lines} lines)")
        }));
    }
    if lines == 0 {
        return Ok(Selection {
            content: String::new(),
            total_lines,
            end_line: start - 1,
            truncated: cut_short,
        });
    }
    let end = end.unwrap_or(lines).min(lines);
    let from = starts[start - 1];
    let to = starts.get(end).copied().unwrap_or(data.len());
    let chosen = &data[from..to];
    let reached_cut = cut_short && end == lines;

    if chosen.len() <= max_bytes {
        let (content, _) = cap_text(chosen, max_bytes, false);
        return Ok(Selection {
            content,
            total_lines,
            end_line: end,
            truncated: reached_cut,
        });
    }
    // Prefer whole lines, so the caller can continue at end_line + 1.
    let head = &chosen[..max_bytes];
    match head.iter().rposition(|b| *b == b'\n') {
        Some(last) => {
            let kept = &head[..=last];
            let line_count = kept.iter().filter(|b| **b == b'\n').count();
            let (content, _) = cap_text(kept, max_bytes, false);
            Ok(Selection {
                content,
                total_lines,
                end_line: start + line_count - 1,
                truncated: true,
            })
        }
        None => {
            let (content, _) = cap_text(chosen, max_bytes, true);
            Ok(Selection {
                content,
                total_lines,
                end_line: start,
                truncated: true,
            })
        }
    }
}

fn trim_trailing<'a>(mut bytes: &'a [u8], junk: &[u8]) -> &'a [u8] {
    while let Some((last, rest)) = bytes.split_last() {
        if !junk.contains(last) {
            break;
        }
        bytes = rest;
    }
    bytes
}

#[cfg(unix)]
fn path_from_bytes(raw: Vec<u8>) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(raw))
}

#[cfg(not(unix))]
fn path_from_bytes(raw: Vec<u8>) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(&raw).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_selection_counts_lines_without_a_final_newline() {
        let sel = select_lines(b"a\nb\nc", false, 2, None, 100).unwrap();
        assert_eq!(sel.content, "b\nc");
        assert_eq!(sel.total_lines, Some(3));
        assert_eq!(sel.end_line, 3);
        assert!(!sel.truncated);
    }

    #[test]
    fn line_selection_cuts_at_a_line_end_when_one_fits() {
        let sel = select_lines(b"aaa\nbbb\nccc\n", false, 1, None, 9).unwrap();
        assert_eq!(sel.content, "aaa\nbbb\n");
        assert_eq!(sel.end_line, 2);
        assert!(sel.truncated);
    }

    #[test]
    fn line_selection_rejects_a_start_past_the_end() {
        assert!(matches!(
            select_lines(b"a\n", false, 3, None, 100),
            Err(RepoError::InvalidLineRange(_))
        ));
    }

    #[test]
    fn line_selection_of_a_cut_blob_has_no_total() {
        let sel = select_lines(b"a\nb\npart", true, 1, None, 100).unwrap();
        assert_eq!(sel.content, "a\nb\n");
        assert_eq!(sel.total_lines, None);
        assert!(sel.truncated);
    }
}
