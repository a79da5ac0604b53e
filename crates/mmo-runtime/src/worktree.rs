//! Isolated writer worktrees and their patches, through the real `git` CLI.
//!
//! A writer (a Codex process with write permission) works in a detached `git worktree` of the
//! session's canonical checkout. At completion the runtime [`record`]s everything the writer
//! changed as one binary-safe git patch, [`check`]s it against the writer's canonical
//! `write_scope` and the [`ArtifactPolicy`], and — once an authorized caller accepted the result —
//! [`integrate`]s it into the canonical checkout. [`remove`] retires the worktree.
//!
//! # Decisions
//!
//! * **Base.** [`create`] checks out the canonical repository's current `HEAD` commit, detached.
//!   Uncommitted changes in the canonical checkout (staged, unstaged or untracked) are *not* part
//!   of the writer's base; [`Worktree::canonical_dirty`] records whether there were any tracked
//!   ones. Integration applies the patch to whatever the canonical checkout is then, and refuses
//!   (changing nothing) when a path the patch touches has uncommitted changes there or the patch
//!   no longer applies cleanly.
//! * **What is recorded.** The writer's worktree as it is on disk, against the base commit,
//!   whatever the writer did with its own index, branches or commits: a commit made inside the
//!   worktree is captured the same as an uncommitted edit. Staging uses a temporary index file
//!   seeded from the base tree, so the writer's own index is never touched. Tracked files, new
//!   untracked files, deletions and mode changes are recorded. Files ignored by `.gitignore` (and
//!   the repository's exclude files) are *not* recorded — build outputs stay behind — unless the
//!   path is tracked in the base, or the writer staged or committed it in its worktree (then it is
//!   recorded as it is on disk). Rename detection is off: a rename is a deletion plus an addition,
//!   so both paths are scope-checked.
//! * **Trust.** Every git command runs with all `GIT_*` variables removed, hooks disabled
//!   (`core.hooksPath=/dev/null`, and configured `hook.<name>` hooks by name), every filter
//!   driver the configuration names turned off by name (a checkout, `add` or `apply` passes
//!   contents through unfiltered), no fsmonitor, pager, editor, gpg or credential helper, no
//!   colour, no external diff or textconv, no transport, no auto-gc, never inside a submodule,
//!   a deadline and capped output, and never through a shell. Commands on a
//!   writer's worktree pass the administrative git directory recorded at creation explicitly
//!   (`--git-dir`, `--work-tree`), so a writer that rewrites its worktree's `.git` file cannot point
//!   the runtime at another repository.
//! * **Symlinks.** By default every created or modified symlink is a `patch_symlink` violation.
//!   With [`ArtifactPolicy::allow_symlinks`] a relative symlink whose target stays inside the
//!   worktree is allowed; an absolute target, one that climbs out of the tree, or one into a
//!   `.git` directory is always refused. The check is lexical on the recorded target.
//! * **Executables.** A file that *becomes* executable (added as `100755`, or changed to it) is a
//!   `patch_executable` violation unless [`ArtifactPolicy::allow_executables`]. Editing the content
//!   of a file that was already executable in the base is not.
//! * **Binary files.** A binary change is a `patch_binary` violation unless
//!   [`ArtifactPolicy::allow_binary`]: a binary hunk cannot be reviewed by the accepting agent.
//! * **Submodules.** A gitlink (mode `160000`) and any change to `.gitmodules` are
//!   `patch_gitlink` violations; any path with a `.git` component is `patch_git_internal`.
//! * **Integration commits.** [`integrate`] commits the patch on top of the canonical `HEAD`
//!   (the current branch, or a detached `HEAD`) with a message naming the writer worktree (the
//!   job) and the patch digest, and updates the canonical index and files for exactly the patched
//!   paths; other uncommitted work in the checkout is left alone. [`integrate_with`] can instead
//!   only stage the patch ([`IntegrateMode::Stage`]). The commit uses the repository's configured
//!   identity, or `codex-mmo <codex-mmo@localhost>` when none is configured.
//! * **Empty patches.** Recording no changes gives a patch with empty bytes; [`check`] does not
//!   flag it and [`integrate`] refuses it (`empty_patch`), since there is nothing to apply.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Hard ceiling on a recorded patch's size, whatever the policy: beyond it [`record`] fails.
pub const RECORD_MAX_PATCH_BYTES: usize = 64 * 1024 * 1024;
/// Hard ceiling on a recorded patch's file count, whatever the policy.
pub const RECORD_MAX_FILES: usize = 20_000;
/// Default policy limit on a patch's total bytes.
pub const DEFAULT_MAX_PATCH_BYTES: usize = 8 * 1024 * 1024;
/// Default policy limit on the number of files a patch changes.
pub const DEFAULT_MAX_FILES: usize = 1_000;
/// Longest accepted worktree name.
pub const MAX_NAME_LEN: usize = 64;

/// How long one git command may run before it is killed.
const GIT_TIMEOUT: Duration = Duration::from_secs(300);
/// How much of git's standard error is kept for messages.
const STDERR_CAP: usize = 8 * 1024;
/// Cap for small outputs (a commit id, a path, a config value).
const SMALL_CAP: usize = 64 * 1024;
/// Cap for listings (ls-files, diff --raw, status).
const LIST_CAP: usize = 64 * 1024 * 1024;
/// Longest symlink target read back for checking.
const SYMLINK_TARGET_CAP: usize = 4096;

/// Configuration passed to every git command with `-c`. Command-line configuration wins over
/// every configuration file, and git hands it on to the git processes it starts (the
/// `reset --hard` of `worktree add`). Filter drivers and configured hooks have no such switch:
/// [`disarm_settings`] turns them off by name.
const HARDENING: &[&str] = &[
    // Hooks (post-checkout, reference-transaction, post-index-change ...): none is found.
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.quotepath=off",
    "color.ui=never",
    "credential.helper=",
    "protocol.allow=never",
    // A git process inside a submodule would read the submodule's own configuration.
    "submodule.recurse=false",
    "diff.submodule=short",
    "status.submoduleSummary=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "apply.whitespace=nowarn",
    "advice.detachedHead=false",
    "advice.addEmbeddedRepo=false",
    // gpg.program runs to sign or to show a signature.
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "log.showSignature=false",
];

/// The scan for [`disarm_settings`]: the names of every `filter.<driver>.*` and `hook.<name>.*`
/// setting in the configuration the command will read (includes followed), NUL-terminated.
const DISARM_SCAN: &[&str] = &[
    "config",
    "--null",
    "--name-only",
    "--get-regexp",
    "^(filter|hook)\\.",
];

/// Most filter drivers and hooks turned off by name; a configuration naming more fails.
const MAX_DISARMED: usize = 1000;

/// Extra configuration when recording: capture the real executable bit and symlinks on disk.
const RECORD_CONFIG: &[&str] = &["core.fileMode=true", "core.symlinks=true"];

/// The fallback identity of integration commits when the repository configures none.
const FALLBACK_NAME: &str = "codex-mmo";
const FALLBACK_EMAIL: &str = "codex-mmo@localhost";

// ---------------------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------------------

/// One writer's isolated worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    /// The writer's name (the job), as given to [`create`].
    pub name: String,
    /// The canonical checkout's top level (canonicalized).
    pub canonical: PathBuf,
    /// The worktree's directory (canonicalized).
    pub path: PathBuf,
    /// The worktree's administrative git directory inside the canonical repository
    /// (`.git/worktrees/<id>`), recorded at creation and used explicitly afterwards.
    pub git_dir: PathBuf,
    /// The canonical `HEAD` commit the worktree was created at.
    pub base_commit: String,
    /// Whether the canonical checkout had uncommitted changes to tracked files at creation
    /// (they are not in the writer's base). A submodule counts when its checked-out commit
    /// differs, not for changes inside it.
    pub canonical_dirty: bool,
}

/// How one path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
    /// The path changed type (for example a regular file became a symlink).
    TypeChanged,
}

/// One path a patch changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedFile {
    /// Repository-relative path with `/` separators.
    pub path: String,
    pub change: ChangeKind,
    /// The mode after the change (`"100644"`, `"100755"`, `"120000"`, `"160000"`); `None` when
    /// deleted.
    pub mode: Option<String>,
    /// The mode in the base; `None` when added.
    pub old_mode: Option<String>,
    /// The blob (or gitlink commit) after the change; `None` when deleted.
    pub new_oid: Option<String>,
    /// Whether git treats the change as binary.
    pub binary: bool,
}

impl ChangedFile {
    fn is_symlink(&self) -> bool {
        self.mode.as_deref() == Some(MODE_SYMLINK)
    }
}

const MODE_EXEC: &str = "100755";
const MODE_SYMLINK: &str = "120000";
const MODE_GITLINK: &str = "160000";

/// A writer's recorded changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Patch {
    /// The worktree (job) name the patch was recorded from.
    pub name: String,
    /// The commit the patch is relative to.
    pub base_commit: String,
    /// `git diff --binary --full-index` output, applicable with `git apply`; empty when nothing
    /// changed.
    pub bytes: Vec<u8>,
    /// Lowercase hex SHA-256 of `bytes`: the patch's identity.
    pub sha256: String,
    /// The changed paths, sorted.
    pub files: Vec<ChangedFile>,
}

impl Patch {
    /// Whether the writer changed nothing.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// What a patch may contain besides in-scope regular files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactPolicy {
    /// Allow relative symlinks that stay inside the tree (escaping ones are always refused).
    pub allow_symlinks: bool,
    /// Allow files to become executable (`100755`).
    pub allow_executables: bool,
    /// Allow binary changes.
    pub allow_binary: bool,
    /// Largest accepted patch, in bytes.
    pub max_patch_bytes: usize,
    /// Most files a patch may change.
    pub max_files: usize,
}

impl Default for ArtifactPolicy {
    fn default() -> Self {
        ArtifactPolicy {
            allow_symlinks: false,
            allow_executables: false,
            allow_binary: false,
            max_patch_bytes: DEFAULT_MAX_PATCH_BYTES,
            max_files: DEFAULT_MAX_FILES,
        }
    }
}

/// Why a patch taints the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationCode {
    /// A path outside the writer's canonical write scope.
    PatchOutOfScope,
    /// A created or modified symlink the policy refuses.
    PatchSymlink,
    /// A file that becomes executable when executables are not allowed.
    PatchExecutable,
    /// A gitlink (submodule) or a `.gitmodules` change.
    PatchGitlink,
    /// A path with a `.git` component.
    PatchGitInternal,
    /// More bytes or files than the policy allows.
    PatchTooLarge,
    /// A binary change when binaries are not allowed.
    PatchBinary,
    /// The patch's bytes do not hash to its recorded digest.
    PatchIdentityMismatch,
    /// The patch was not recorded against this worktree's base.
    PatchBaseMismatch,
    /// A write-scope entry that is not a normalized relative path (it matches nothing).
    PatchScopeInvalid,
}

impl ViolationCode {
    /// The stable snake_case id.
    pub fn as_str(self) -> &'static str {
        match self {
            ViolationCode::PatchOutOfScope => "patch_out_of_scope",
            ViolationCode::PatchSymlink => "patch_symlink",
            ViolationCode::PatchExecutable => "patch_executable",
            ViolationCode::PatchGitlink => "patch_gitlink",
            ViolationCode::PatchGitInternal => "patch_git_internal",
            ViolationCode::PatchTooLarge => "patch_too_large",
            ViolationCode::PatchBinary => "patch_binary",
            ViolationCode::PatchIdentityMismatch => "patch_identity_mismatch",
            ViolationCode::PatchBaseMismatch => "patch_base_mismatch",
            ViolationCode::PatchScopeInvalid => "patch_scope_invalid",
        }
    }
}

impl std::fmt::Display for ViolationCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reason a patch taints the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub code: ViolationCode,
    /// The path at fault, when there is one.
    pub path: Option<String>,
    /// A human-readable explanation.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.path {
            Some(p) => write!(f, "[{}] {p}: {}", self.code, self.detail),
            None => write!(f, "[{}] {}", self.code, self.detail),
        }
    }
}

impl Violation {
    fn new(code: ViolationCode, path: Option<&str>, detail: impl Into<String>) -> Self {
        Violation {
            code,
            path: path.map(str::to_owned),
            detail: detail.into(),
        }
    }
}

/// Failures creating, recording or removing a worktree (and git failures during integration).
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error(
        "worktree name {0:?} is invalid: use 1-64 of [A-Za-z0-9._-], not starting with '.' or '-'"
    )]
    InvalidName(String),
    #[error("{} is not inside a git work tree", .0.display())]
    NotARepository(PathBuf),
    #[error("{} is inside the repository whose top level is {}; pass the top level", .path.display(), .toplevel.display())]
    NotRepositoryRoot { path: PathBuf, toplevel: PathBuf },
    #[error("the repository at {} has no commit yet (HEAD is unborn)", .0.display())]
    NoCommit(PathBuf),
    #[error("worktree destination {} already exists and is not an empty directory", .0.display())]
    DestinationExists(PathBuf),
    #[error("worktree destination {} lies inside the canonical checkout {}", .dest.display(), .canonical.display())]
    DestinationInsideCanonical { dest: PathBuf, canonical: PathBuf },
    #[error("worktree {} belongs to {}, not {}", .path.display(), .expected.display(), .given.display())]
    WorktreeMismatch {
        path: PathBuf,
        expected: PathBuf,
        given: PathBuf,
    },
    #[error("worktree directory {} is missing or not a directory", .0.display())]
    WorktreeMissing(PathBuf),
    #[error("the writer's changes exceed the recording limit: {detail}")]
    PatchTooLarge { detail: String },
    #[error("changed path {0:?} is not valid UTF-8")]
    NonUtf8Path(String),
    #[error("git could not be started: {0}")]
    Spawn(String),
    #[error("git {command} did not finish within {seconds}s")]
    Timeout { command: String, seconds: u64 },
    #[error("git {command} produced more than {cap} bytes of output")]
    OutputTooLarge { command: String, cap: usize },
    #[error("git {command} failed: {stderr}")]
    Git { command: String, stderr: String },
    #[error("unexpected output from git {command}: {detail}")]
    Parse { command: String, detail: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl WorktreeError {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            WorktreeError::InvalidName(_) => "worktree_name_invalid",
            WorktreeError::NotARepository(_) => "not_a_repository",
            WorktreeError::NotRepositoryRoot { .. } => "not_repository_root",
            WorktreeError::NoCommit(_) => "repository_has_no_commit",
            WorktreeError::DestinationExists(_) => "worktree_destination_exists",
            WorktreeError::DestinationInsideCanonical { .. } => {
                "worktree_destination_inside_canonical"
            }
            WorktreeError::WorktreeMismatch { .. } => "worktree_mismatch",
            WorktreeError::WorktreeMissing(_) => "worktree_missing",
            WorktreeError::PatchTooLarge { .. } => "patch_too_large",
            WorktreeError::NonUtf8Path(_) => "patch_path_not_utf8",
            WorktreeError::Spawn(_) => "git_unavailable",
            WorktreeError::Timeout { .. } => "git_timeout",
            WorktreeError::OutputTooLarge { .. } => "git_output_too_large",
            WorktreeError::Git { .. } => "git_failed",
            WorktreeError::Parse { .. } => "git_output_unparsable",
            WorktreeError::Io { .. } => "worktree_io",
        }
    }
}

/// Why [`integrate`] refused or failed. Unless stated otherwise the canonical checkout is
/// unchanged.
#[derive(Debug, thiserror::Error)]
pub enum IntegrateError {
    #[error("patch identity mismatch: expected sha256 {expected}, {detail}")]
    IdentityMismatch { expected: String, detail: String },
    #[error("the patch is empty; there is nothing to integrate")]
    EmptyPatch,
    #[error("patch name {0:?} is not a valid worktree name")]
    InvalidName(String),
    #[error("{path:?} is outside the writer's lease scope")]
    OutOfLease { path: String },
    #[error("lease scope entry {entry:?} is not a normalized relative path")]
    InvalidLease { entry: String },
    #[error("{path:?} is not a path a patch may touch: {detail}")]
    UnsafePath { path: String, detail: String },
    #[error("the patch's bytes do not match its file list: {detail}")]
    PatchMismatch { detail: String },
    #[error("the canonical checkout has uncommitted changes to {}", .paths.join(", "))]
    CanonicalDirty { paths: Vec<String> },
    #[error("the canonical checkout is in the middle of {0}; finish or abort it first")]
    CanonicalBusy(String),
    #[error("the patch (base {base}) does not apply to canonical HEAD {head}: {detail}")]
    DoesNotApply {
        base: String,
        head: String,
        detail: String,
    },
    #[error("canonical HEAD moved from {expected} while integrating; the patch was rolled back")]
    HeadMoved { expected: String },
    #[error(
        "applying the patch failed after it checked clean; the canonical checkout may be partially changed: {detail}"
    )]
    ApplyFailed { detail: String },
    #[error(transparent)]
    Repo(#[from] WorktreeError),
}

impl IntegrateError {
    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            IntegrateError::IdentityMismatch { .. } => "patch_identity_mismatch",
            IntegrateError::EmptyPatch => "empty_patch",
            IntegrateError::InvalidName(_) => "patch_name_invalid",
            IntegrateError::OutOfLease { .. } => "patch_out_of_lease",
            IntegrateError::InvalidLease { .. } => "lease_scope_invalid",
            IntegrateError::UnsafePath { .. } => "patch_unsafe_path",
            IntegrateError::PatchMismatch { .. } => "patch_file_list_mismatch",
            IntegrateError::CanonicalDirty { .. } => "canonical_dirty",
            IntegrateError::CanonicalBusy(_) => "canonical_busy",
            IntegrateError::DoesNotApply { .. } => "patch_does_not_apply",
            IntegrateError::HeadMoved { .. } => "canonical_head_moved",
            IntegrateError::ApplyFailed { .. } => "patch_apply_failed",
            IntegrateError::Repo(e) => e.code(),
        }
    }
}

/// Whether [`integrate_with`] commits the patch or only stages it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntegrateMode {
    /// Commit on top of the canonical `HEAD` and update the index and files of the patched paths.
    #[default]
    Commit,
    /// Apply to the canonical index and files only; `HEAD` does not move.
    Stage,
}

/// Options of [`integrate_with`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IntegrateOptions {
    pub mode: IntegrateMode,
    /// The commit message; by default one naming the patch's worktree (job), base and digest.
    pub message: Option<String>,
}

/// What [`integrate`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integrated {
    /// The new commit (`None` in [`IntegrateMode::Stage`]).
    pub commit: Option<String>,
    /// Canonical `HEAD` before integration (the commit's parent).
    pub parent: String,
    /// The patch's digest.
    pub sha256: String,
    /// The paths the patch changed.
    pub files: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// create / record / check / integrate / remove
// ---------------------------------------------------------------------------------------------

/// Creates a detached worktree of `canonical`'s current `HEAD` at `dest` (which must not exist, or
/// be an empty directory, and must lie outside the canonical checkout).
pub fn create(canonical: &Path, dest: &Path, name: &str) -> Result<Worktree, WorktreeError> {
    create_at(canonical, dest, name, None)
}

/// A worktree for `name` at `dest` holding what `source`'s writer has on disk now: `source`'s
/// base commit checked out and its recorded changes (`record`) applied to the files. The fork
/// of a paused writer; `source` is not touched. Its patch is recorded against the same base.
pub fn fork(source: &Worktree, dest: &Path, name: &str) -> Result<Worktree, WorktreeError> {
    let patch = record(source)?;
    let wt = create_at(&source.canonical, dest, name, Some(&source.base_commit))?;
    if !patch.bytes.is_empty() {
        let applied = GitCmd::for_worktree(&wt)
            .args(["apply", "--whitespace=nowarn", "-"])
            .stdin(patch.bytes)
            .run()?;
        if !applied.success {
            let _ = remove(&source.canonical, &wt);
            return Err(WorktreeError::Git {
                command: "git apply (the forked writer's changes)".into(),
                stderr: applied.stderr,
            });
        }
    }
    Ok(wt)
}

/// `create` at `base` (a commit), or at the canonical checkout's `HEAD`.
fn create_at(
    canonical: &Path,
    dest: &Path,
    name: &str,
    base: Option<&str>,
) -> Result<Worktree, WorktreeError> {
    if !valid_name(name) {
        return Err(WorktreeError::InvalidName(name.to_owned()));
    }
    let toplevel = repo_toplevel(canonical)?;
    let base_commit = match base {
        Some(b) => b.to_owned(),
        None => head_commit(&toplevel)?,
    };

    if let Ok(meta) = std::fs::symlink_metadata(dest) {
        let empty_dir = meta.is_dir()
            && std::fs::read_dir(dest)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
        if !empty_dir {
            return Err(WorktreeError::DestinationExists(dest.to_owned()));
        }
    }
    let dest_abs = absolute_lexical(dest)?;
    let parent = dest_abs
        .parent()
        .ok_or_else(|| WorktreeError::DestinationExists(dest.to_owned()))?;
    let parent_real = std::fs::canonicalize(parent).map_err(|source| WorktreeError::Io {
        context: format!("resolving {}", parent.display()),
        source,
    })?;
    let dest_real = match dest_abs.file_name() {
        Some(f) => parent_real.join(f),
        None => return Err(WorktreeError::DestinationExists(dest.to_owned())),
    };
    if dest_real.starts_with(&toplevel) || toplevel.starts_with(&dest_real) {
        return Err(WorktreeError::DestinationInsideCanonical {
            dest: dest_real,
            canonical: toplevel,
        });
    }

    // Not inside submodules: git would run there under the submodule's own configuration.
    let canonical_dirty = !GitCmd::in_dir(&toplevel)
        .args(["status", "--porcelain=v1", "-z", "--untracked-files=no"])
        .arg("--ignore-submodules=dirty")
        .cap(LIST_CAP)
        .ok()?
        .is_empty();

    GitCmd::in_dir(&toplevel)
        .args(["worktree", "add", "--detach", "--quiet"])
        .arg(&dest_real)
        .arg(&base_commit)
        .ok()?;

    let git_dir = match worktree_git_dir(&dest_real) {
        Ok(d) => d,
        Err(e) => {
            let _ = GitCmd::in_dir(&toplevel)
                .args(["worktree", "remove", "--force", "--force"])
                .arg(&dest_real)
                .run();
            return Err(e);
        }
    };
    Ok(Worktree {
        name: name.to_owned(),
        canonical: toplevel,
        path: dest_real,
        git_dir,
        base_commit,
        canonical_dirty,
    })
}

/// Records everything the writer changed in `wt` relative to its base commit, as it is on disk.
/// Neither the writer's index nor the canonical checkout is modified (git objects for the recorded
/// content are written to the shared object store).
pub fn record(wt: &Worktree) -> Result<Patch, WorktreeError> {
    match std::fs::symlink_metadata(&wt.path) {
        Ok(m) if m.is_dir() => {}
        _ => return Err(WorktreeError::WorktreeMissing(wt.path.clone())),
    }
    let index = TempIndex::new()?;
    let g = || {
        GitCmd::for_worktree(wt)
            .configs(RECORD_CONFIG)
            .index(index.path())
    };

    // Seed the temporary index with the base tree: every base path is then "tracked", even if
    // ignored, so its deletion or modification is recorded.
    g().args(["read-tree"]).arg(&wt.base_commit).ok()?;

    // Paths the writer staged or committed that are not in the base, and that `add -A` would skip
    // because they are ignored: add them explicitly (when they exist on disk).
    let base_paths: BTreeSet<Vec<u8>> = split_nul(
        &g().args(["ls-files", "-z", "--cached"])
            .cap(LIST_CAP)
            .ok_or_too_large()?,
    )
    .map(<[u8]>::to_vec)
    .collect();
    let mut extras: BTreeSet<Vec<u8>> = BTreeSet::new();
    let writer_index = GitCmd::for_worktree(wt)
        .args(["ls-files", "-z", "--cached"])
        .cap(LIST_CAP)
        .ok_or_too_large()?;
    extras.extend(split_nul(&writer_index).map(<[u8]>::to_vec));
    let writer_head = GitCmd::for_worktree(wt)
        .args(["ls-tree", "-r", "-z", "--name-only", "HEAD"])
        .cap(LIST_CAP)
        .run()?;
    if writer_head.success {
        extras.extend(split_nul(&writer_head.stdout).map(<[u8]>::to_vec));
    }
    let extras: Vec<Vec<u8>> = extras
        .into_iter()
        .filter(|p| !base_paths.contains(p) && exists_without_symlink_parent(&wt.path, p))
        .collect();
    if extras.len() > RECORD_MAX_FILES {
        return Err(WorktreeError::PatchTooLarge {
            detail: format!("more than {RECORD_MAX_FILES} files"),
        });
    }
    if !extras.is_empty() {
        let mut input = Vec::new();
        for p in &extras {
            input.extend_from_slice(p);
            input.push(0);
        }
        g().args(["update-index", "--add", "--remove", "-z", "--stdin"])
            .stdin(input)
            .ok()?;
    }

    // Bound the work before hashing new files into the object store.
    let untracked = g()
        .args(["ls-files", "-z", "--others", "--exclude-standard"])
        .cap(LIST_CAP)
        .ok_or_too_large()?;
    let mut count = 0usize;
    let mut total: u64 = 0;
    for p in split_nul(&untracked) {
        count += 1;
        if count > RECORD_MAX_FILES {
            return Err(WorktreeError::PatchTooLarge {
                detail: format!("more than {RECORD_MAX_FILES} new files"),
            });
        }
        if let Ok(m) = std::fs::symlink_metadata(wt.path.join(bytes_to_path(p))) {
            total = total.saturating_add(m.len());
        }
        if total > RECORD_MAX_PATCH_BYTES as u64 {
            return Err(WorktreeError::PatchTooLarge {
                detail: format!("new files exceed {RECORD_MAX_PATCH_BYTES} bytes"),
            });
        }
    }

    // No pathspec: the whole worktree (pathspecs are literal here, so `:/` would not work).
    g().args(["add", "--all"]).ok()?;
    let tree = trimmed(&g().args(["write-tree"]).ok()?);

    let files = diff_files(
        || GitCmd::for_worktree(wt),
        &wt.base_commit,
        &tree,
        RECORD_MAX_FILES,
    )?;
    let bytes = if files.is_empty() {
        Vec::new()
    } else {
        GitCmd::for_worktree(wt)
            .args([
                "diff-tree",
                "-r",
                "-p",
                "--binary",
                "--full-index",
                "--no-renames",
            ])
            .args(["--no-color", "--no-ext-diff", "--no-textconv"])
            .args(["--src-prefix=a/", "--dst-prefix=b/"])
            .arg(&wt.base_commit)
            .arg(&tree)
            .cap(RECORD_MAX_PATCH_BYTES)
            .ok()
            .map_err(|e| match e {
                WorktreeError::OutputTooLarge { .. } => WorktreeError::PatchTooLarge {
                    detail: format!("the patch exceeds {RECORD_MAX_PATCH_BYTES} bytes"),
                },
                e => e,
            })?
    };
    let sha256 = sha256_hex(&bytes);
    Ok(Patch {
        name: wt.name.clone(),
        base_commit: wt.base_commit.clone(),
        bytes,
        sha256,
        files,
    })
}

/// Checks a recorded patch against the writer's canonical write scope and the artifact policy.
/// A non-empty result taints the session and fails the job. Reads only the object store.
pub fn check(
    patch: &Patch,
    wt: &Worktree,
    scope: &[String],
    policy: &ArtifactPolicy,
) -> Vec<Violation> {
    use ViolationCode as C;
    let mut out = Vec::new();

    if sha256_hex(&patch.bytes) != patch.sha256 {
        out.push(Violation::new(
            C::PatchIdentityMismatch,
            None,
            format!(
                "the patch bytes hash to {}, not the recorded {}",
                sha256_hex(&patch.bytes),
                patch.sha256
            ),
        ));
    }
    if patch.base_commit != wt.base_commit {
        out.push(Violation::new(
            C::PatchBaseMismatch,
            None,
            format!(
                "patch base {} is not worktree {}'s base {}",
                patch.base_commit, wt.name, wt.base_commit
            ),
        ));
    }
    if patch.bytes.len() > policy.max_patch_bytes {
        out.push(Violation::new(
            C::PatchTooLarge,
            None,
            format!(
                "the patch is {} bytes; the limit is {}",
                patch.bytes.len(),
                policy.max_patch_bytes
            ),
        ));
    }
    if patch.files.len() > policy.max_files {
        out.push(Violation::new(
            C::PatchTooLarge,
            None,
            format!(
                "the patch changes {} files; the limit is {}",
                patch.files.len(),
                policy.max_files
            ),
        ));
    }

    let mut normalized = Vec::new();
    for entry in scope {
        match crate::admission::normalize_path(entry).ok() {
            Some(n) => normalized.push(n),
            None => out.push(Violation::new(
                C::PatchScopeInvalid,
                None,
                format!("write scope entry {entry:?} is not a normalized relative path"),
            )),
        }
    }

    for f in &patch.files {
        let p = f.path.as_str();
        if has_git_component(p) {
            out.push(Violation::new(
                C::PatchGitInternal,
                Some(p),
                "paths under a .git directory are git's internals",
            ));
        }
        if !crate::admission::scope_contains(&normalized, p) {
            out.push(Violation::new(
                C::PatchOutOfScope,
                Some(p),
                format!("{p} is outside the write scope"),
            ));
        }
        if f.mode.as_deref() == Some(MODE_GITLINK) || f.old_mode.as_deref() == Some(MODE_GITLINK) {
            out.push(Violation::new(
                C::PatchGitlink,
                Some(p),
                "submodules (gitlinks) are not accepted",
            ));
        } else if p == ".gitmodules" || p.ends_with("/.gitmodules") {
            out.push(Violation::new(
                C::PatchGitlink,
                Some(p),
                "submodule configuration is not accepted",
            ));
        }
        if f.is_symlink()
            && let Some(reason) = symlink_violation(wt, f, policy)
        {
            out.push(Violation::new(C::PatchSymlink, Some(p), reason));
        }
        if f.mode.as_deref() == Some(MODE_EXEC)
            && f.old_mode.as_deref() != Some(MODE_EXEC)
            && !policy.allow_executables
        {
            out.push(Violation::new(
                C::PatchExecutable,
                Some(p),
                format!("{p} becomes executable (mode 100755); executables are not allowed"),
            ));
        }
        if f.binary && !policy.allow_binary && f.change != ChangeKind::Deleted {
            out.push(Violation::new(
                C::PatchBinary,
                Some(p),
                format!("{p} is a binary change; binaries are not allowed"),
            ));
        }
    }
    out
}

/// Integrates an accepted patch into the canonical checkout with [`IntegrateOptions::default`]
/// (a commit). See [`integrate_with`].
pub fn integrate(
    canonical: &Path,
    patch: &Patch,
    expected_sha256: &str,
    lease_scope: &[String],
) -> Result<Integrated, IntegrateError> {
    integrate_with(
        canonical,
        patch,
        expected_sha256,
        lease_scope,
        &IntegrateOptions::default(),
    )
}

/// Verifies the patch's identity (its bytes hash to `expected_sha256`), that every path it
/// actually changes is inside `lease_scope` and matches its file list, that the canonical
/// checkout has no uncommitted changes to those paths and the patch applies cleanly, and then
/// applies it. On any refusal the canonical checkout is unchanged.
pub fn integrate_with(
    canonical: &Path,
    patch: &Patch,
    expected_sha256: &str,
    lease_scope: &[String],
    options: &IntegrateOptions,
) -> Result<Integrated, IntegrateError> {
    // Identity.
    let expected = expected_sha256.to_ascii_lowercase();
    let actual = sha256_hex(&patch.bytes);
    if actual != expected {
        return Err(IntegrateError::IdentityMismatch {
            expected,
            detail: format!("the patch bytes hash to {actual}"),
        });
    }
    if patch.sha256 != expected {
        return Err(IntegrateError::IdentityMismatch {
            expected,
            detail: format!("the patch records sha256 {}", patch.sha256),
        });
    }
    if patch.bytes.is_empty() {
        return Err(IntegrateError::EmptyPatch);
    }
    if !valid_name(&patch.name) {
        return Err(IntegrateError::InvalidName(patch.name.clone()));
    }
    let mut lease = Vec::new();
    for entry in lease_scope {
        match crate::admission::normalize_path(entry).ok() {
            Some(n) => lease.push(n),
            None => {
                return Err(IntegrateError::InvalidLease {
                    entry: entry.clone(),
                });
            }
        }
    }
    // A cheap early refusal on the declared list; the authoritative check follows below.
    for f in &patch.files {
        if !crate::admission::scope_contains(&lease, &f.path) {
            return Err(IntegrateError::OutOfLease {
                path: f.path.clone(),
            });
        }
    }

    let toplevel = repo_toplevel(canonical)?;
    let head = head_commit(&toplevel)?;
    if options.mode == IntegrateMode::Commit {
        for (marker, what) in [
            ("MERGE_HEAD", "a merge"),
            ("CHERRY_PICK_HEAD", "a cherry-pick"),
            ("REVERT_HEAD", "a revert"),
            ("rebase-merge", "a rebase"),
            ("rebase-apply", "a rebase or am"),
        ] {
            let p = trimmed(
                &GitCmd::in_dir(&toplevel)
                    .args(["rev-parse", "--path-format=absolute", "--git-path", marker])
                    .ok()?,
            );
            if Path::new(&p).exists() {
                return Err(IntegrateError::CanonicalBusy(what.to_owned()));
            }
        }
    }

    // Apply to a scratch index seeded from canonical HEAD to learn exactly what the bytes do.
    let index = TempIndex::new()?;
    let scratch = || GitCmd::in_dir(&toplevel).index(index.path());
    scratch().args(["read-tree"]).arg(&head).ok()?;
    let applied = scratch()
        .args(["apply", "--cached", "--whitespace=nowarn", "-"])
        .stdin(patch.bytes.clone())
        .run()?;
    if !applied.success {
        return Err(IntegrateError::DoesNotApply {
            base: patch.base_commit.clone(),
            head,
            detail: applied.stderr,
        });
    }
    let tree = trimmed(&scratch().args(["write-tree"]).ok()?);
    let derived = diff_files(|| GitCmd::in_dir(&toplevel), &head, &tree, RECORD_MAX_FILES)?;

    let declared: BTreeMap<&str, Option<&str>> = patch
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.mode.as_deref()))
        .collect();
    let actual_map: BTreeMap<&str, Option<&str>> = derived
        .iter()
        .map(|f| (f.path.as_str(), f.mode.as_deref()))
        .collect();
    for f in &derived {
        let p = f.path.as_str();
        if has_git_component(p) {
            return Err(IntegrateError::UnsafePath {
                path: p.to_owned(),
                detail: "a .git component".to_owned(),
            });
        }
        if f.mode.as_deref() == Some(MODE_GITLINK) {
            return Err(IntegrateError::UnsafePath {
                path: p.to_owned(),
                detail: "a gitlink (submodule)".to_owned(),
            });
        }
        if !crate::admission::scope_contains(&lease, p) {
            return Err(IntegrateError::OutOfLease { path: p.to_owned() });
        }
    }
    if declared != actual_map {
        let only_declared: Vec<&str> = declared
            .iter()
            .filter(|(k, v)| actual_map.get(*k) != Some(v))
            .map(|(k, _)| *k)
            .collect();
        let only_actual: Vec<&str> = actual_map
            .iter()
            .filter(|(k, v)| declared.get(*k) != Some(v))
            .map(|(k, _)| *k)
            .collect();
        return Err(IntegrateError::PatchMismatch {
            detail: format!(
                "declared but not applied as declared: {only_declared:?}; applied but not declared: {only_actual:?}"
            ),
        });
    }
    let paths: Vec<String> = derived.iter().map(|f| f.path.clone()).collect();

    // The canonical checkout must be clean for exactly those paths.
    let mut status = GitCmd::in_dir(&toplevel).args([
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--ignored=matching",
        "--no-renames",
        "--ignore-submodules=dirty",
        "--",
    ]);
    for p in &paths {
        status = status.arg(p);
    }
    let status = status.cap(LIST_CAP).ok()?;
    let mut dirty: Vec<String> = split_nul(&status)
        .filter(|e| e.len() > 3)
        .map(|e| String::from_utf8_lossy(&e[3..]).into_owned())
        .collect();
    // Something on disk where the patch creates a file, or a non-directory in the way of one.
    for f in &derived {
        if f.change == ChangeKind::Added {
            if std::fs::symlink_metadata(toplevel.join(&f.path)).is_ok() && !dirty.contains(&f.path)
            {
                dirty.push(f.path.clone());
            }
            let mut prefix = PathBuf::new();
            let comps: Vec<&str> = f.path.split('/').collect();
            for c in &comps[..comps.len().saturating_sub(1)] {
                prefix.push(c);
                if let Ok(m) = std::fs::symlink_metadata(toplevel.join(&prefix))
                    && !m.is_dir()
                {
                    dirty.push(prefix.to_string_lossy().into_owned());
                    break;
                }
            }
        }
    }
    if !dirty.is_empty() {
        dirty.sort();
        dirty.dedup();
        return Err(IntegrateError::CanonicalDirty { paths: dirty });
    }

    let checked = GitCmd::in_dir(&toplevel)
        .args(["apply", "--check", "--index", "--whitespace=nowarn", "-"])
        .stdin(patch.bytes.clone())
        .run()?;
    if !checked.success {
        return Err(IntegrateError::DoesNotApply {
            base: patch.base_commit.clone(),
            head,
            detail: checked.stderr,
        });
    }

    let commit = match options.mode {
        IntegrateMode::Stage => None,
        IntegrateMode::Commit => {
            let message = options.message.clone().unwrap_or_else(|| {
                format!(
                    "codex-mmo: integrate writer patch from {}\n\nBase-Commit: {}\nPatch-SHA256: {}\n",
                    patch.name, patch.base_commit, patch.sha256
                )
            });
            let mut cmd = GitCmd::in_dir(&toplevel);
            if !has_identity(&toplevel)? {
                for (k, v) in [
                    ("GIT_AUTHOR_NAME", FALLBACK_NAME),
                    ("GIT_AUTHOR_EMAIL", FALLBACK_EMAIL),
                    ("GIT_COMMITTER_NAME", FALLBACK_NAME),
                    ("GIT_COMMITTER_EMAIL", FALLBACK_EMAIL),
                ] {
                    cmd = cmd.env(k, v);
                }
            }
            let out = cmd
                .args(["commit-tree", "-F", "-", "-p"])
                .arg(&head)
                .arg(&tree)
                .stdin(message.into_bytes())
                .ok()?;
            Some(trimmed(&out))
        }
    };

    let applied = GitCmd::in_dir(&toplevel)
        .args(["apply", "--index", "--whitespace=nowarn", "-"])
        .stdin(patch.bytes.clone())
        .run()?;
    if !applied.success {
        return Err(IntegrateError::ApplyFailed {
            detail: applied.stderr,
        });
    }

    if let Some(commit) = &commit {
        let reflog = format!(
            "codex-mmo: integrate {} ({})",
            patch.name,
            &patch.sha256[..12]
        );
        let moved = GitCmd::in_dir(&toplevel)
            .args(["update-ref", "-m"])
            .arg(&reflog)
            .arg("HEAD")
            .arg(commit)
            .arg(&head)
            .run()?;
        if !moved.success {
            let undone = GitCmd::in_dir(&toplevel)
                .args(["apply", "-R", "--index", "--whitespace=nowarn", "-"])
                .stdin(patch.bytes.clone())
                .run()?;
            if !undone.success {
                return Err(IntegrateError::ApplyFailed {
                    detail: format!(
                        "HEAD could not be moved ({}) and reverting the applied patch failed ({})",
                        moved.stderr, undone.stderr
                    ),
                });
            }
            return Err(IntegrateError::HeadMoved { expected: head });
        }
    }

    Ok(Integrated {
        commit,
        parent: head,
        sha256: patch.sha256.clone(),
        files: paths,
    })
}

/// Removes the worktree (`git worktree remove --force`, then prune). Idempotent: removing a
/// worktree that is already gone succeeds.
pub fn remove(canonical: &Path, wt: &Worktree) -> Result<(), WorktreeError> {
    let toplevel = repo_toplevel(canonical)?;
    if toplevel != wt.canonical {
        return Err(WorktreeError::WorktreeMismatch {
            path: wt.path.clone(),
            expected: wt.canonical.clone(),
            given: toplevel,
        });
    }
    if wt.path.starts_with(&toplevel) || toplevel.starts_with(&wt.path) {
        // Never delete the canonical checkout or anything inside it.
        return Err(WorktreeError::DestinationInsideCanonical {
            dest: wt.path.clone(),
            canonical: toplevel,
        });
    }
    if std::fs::symlink_metadata(&wt.path).is_ok() {
        let removed = GitCmd::in_dir(&toplevel)
            .args(["worktree", "remove", "--force", "--force"])
            .arg(&wt.path)
            .run()?;
        if !removed.success && std::fs::symlink_metadata(&wt.path).is_ok() {
            // The writer may have broken the worktree's `.git` file; the directory is ours.
            std::fs::remove_dir_all(&wt.path).map_err(|source| WorktreeError::Io {
                context: format!("removing {}", wt.path.display()),
                source,
            })?;
        }
    }
    GitCmd::in_dir(&toplevel).args(["worktree", "prune"]).ok()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------------

fn has_git_component(path: &str) -> bool {
    path.split('/').any(|c| c.eq_ignore_ascii_case(".git"))
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn trimmed(out: &[u8]) -> String {
    String::from_utf8_lossy(out).trim().to_owned()
}

fn split_nul(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|b| *b == 0).filter(|s| !s.is_empty())
}

#[cfg(unix)]
fn bytes_to_path(b: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(OsStr::from_bytes(b))
}

#[cfg(not(unix))]
fn bytes_to_path(b: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(b).into_owned())
}

/// Whether `rel` exists (as itself, not followed) under `root` with no symlink among its parents.
fn exists_without_symlink_parent(root: &Path, rel: &[u8]) -> bool {
    let rel = bytes_to_path(rel);
    let mut cur = root.to_path_buf();
    let comps: Vec<Component> = rel.components().collect();
    for (i, c) in comps.iter().enumerate() {
        let Component::Normal(c) = c else {
            return false;
        };
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if i + 1 < comps.len() && !m.is_dir() => return false,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
    true
}

fn absolute_lexical(p: &Path) -> Result<PathBuf, WorktreeError> {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|source| WorktreeError::Io {
                context: "reading the current directory".to_owned(),
                source,
            })?
            .join(p)
    };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    Ok(out)
}

/// The canonicalized top level of the work tree at `dir`, which must be that top level.
fn repo_toplevel(dir: &Path) -> Result<PathBuf, WorktreeError> {
    let real =
        std::fs::canonicalize(dir).map_err(|_| WorktreeError::NotARepository(dir.to_path_buf()))?;
    let out = GitCmd::in_dir(&real)
        .args(["rev-parse", "--show-toplevel"])
        .run()?;
    let top = trimmed(&out.stdout);
    if !out.success || top.is_empty() {
        return Err(WorktreeError::NotARepository(dir.to_path_buf()));
    }
    let top = std::fs::canonicalize(&top).map_err(|source| WorktreeError::Io {
        context: format!("resolving {top}"),
        source,
    })?;
    if top != real {
        return Err(WorktreeError::NotRepositoryRoot {
            path: real,
            toplevel: top,
        });
    }
    Ok(top)
}

fn head_commit(toplevel: &Path) -> Result<String, WorktreeError> {
    let out = GitCmd::in_dir(toplevel)
        .args(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .run()?;
    let id = trimmed(&out.stdout);
    if !out.success || id.is_empty() {
        return Err(WorktreeError::NoCommit(toplevel.to_path_buf()));
    }
    Ok(id)
}

fn has_identity(toplevel: &Path) -> Result<bool, WorktreeError> {
    for key in ["user.name", "user.email"] {
        let out = GitCmd::in_dir(toplevel)
            .args(["config", "--get", key])
            .run()?;
        if !out.success || trimmed(&out.stdout).is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The absolute administrative git directory of a freshly created worktree, which must live
/// under the canonical repository's `worktrees/`.
fn worktree_git_dir(dest: &Path) -> Result<PathBuf, WorktreeError> {
    let out = GitCmd::in_dir(dest)
        .args(["rev-parse", "--absolute-git-dir"])
        .ok()?;
    let dir = PathBuf::from(trimmed(&out));
    let is_admin = dir
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|n| n == "worktrees");
    if !is_admin {
        return Err(WorktreeError::Parse {
            command: "rev-parse --absolute-git-dir".to_owned(),
            detail: format!(
                "{} is not a worktree administrative directory",
                dir.display()
            ),
        });
    }
    Ok(dir)
}

/// The changed files between two trees: `diff-tree --raw` for modes and status, `--numstat` for
/// binary detection.
fn diff_files(
    git: impl Fn() -> GitCmd,
    from: &str,
    to: &str,
    max_files: usize,
) -> Result<Vec<ChangedFile>, WorktreeError> {
    let raw = git()
        .args([
            "diff-tree",
            "-r",
            "-z",
            "--raw",
            "--no-renames",
            "--full-index",
        ])
        .arg(from)
        .arg(to)
        .cap(LIST_CAP)
        .ok_or_too_large()?;
    let parse_err = |detail: &str| WorktreeError::Parse {
        command: "diff-tree --raw".to_owned(),
        detail: detail.to_owned(),
    };
    let mut files = Vec::new();
    let mut it = raw.split(|b| *b == 0);
    while let Some(meta) = it.next() {
        if meta.is_empty() {
            continue;
        }
        let meta = std::str::from_utf8(meta).map_err(|_| parse_err("non-UTF-8 metadata"))?;
        let path = it
            .next()
            .ok_or_else(|| parse_err("a record without a path"))?;
        let path = String::from_utf8(path.to_vec()).map_err(|e| {
            WorktreeError::NonUtf8Path(String::from_utf8_lossy(e.as_bytes()).into())
        })?;
        let fields: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        if fields.len() != 5 {
            return Err(parse_err(meta));
        }
        let zero_mode = |m: &str| m.bytes().all(|b| b == b'0');
        let old_mode = (!zero_mode(fields[0])).then(|| fields[0].to_owned());
        let mode = (!zero_mode(fields[1])).then(|| fields[1].to_owned());
        let new_oid = (!zero_mode(fields[3])).then(|| fields[3].to_owned());
        let change = match fields[4].chars().next() {
            Some('A') => ChangeKind::Added,
            Some('D') => ChangeKind::Deleted,
            Some('M') => ChangeKind::Modified,
            Some('T') => ChangeKind::TypeChanged,
            _ => return Err(parse_err(meta)),
        };
        files.push(ChangedFile {
            path,
            change,
            mode,
            old_mode,
            new_oid: if change == ChangeKind::Deleted {
                None
            } else {
                new_oid
            },
            binary: false,
        });
        if files.len() > max_files {
            return Err(WorktreeError::PatchTooLarge {
                detail: format!("more than {max_files} changed files"),
            });
        }
    }
    if files.is_empty() {
        return Ok(files);
    }
    let numstat = git()
        .args(["diff-tree", "-r", "-z", "--numstat", "--no-renames"])
        .arg(from)
        .arg(to)
        .cap(LIST_CAP)
        .ok_or_too_large()?;
    let mut binary: BTreeSet<&[u8]> = BTreeSet::new();
    for rec in split_nul(&numstat) {
        // "added\tdeleted\tpath"; binary files have "-\t-\t".
        if let Some(rest) = rec.strip_prefix(b"-\t-\t") {
            binary.insert(rest);
        }
    }
    for f in &mut files {
        f.binary = binary.contains(f.path.as_bytes());
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Why a created or modified symlink is refused, or `None` when the policy allows it.
fn symlink_violation(wt: &Worktree, f: &ChangedFile, policy: &ArtifactPolicy) -> Option<String> {
    let Some(oid) = &f.new_oid else {
        return Some("the symlink's target could not be identified".to_owned());
    };
    let out = GitCmd::for_worktree(wt)
        .args(["cat-file", "blob", oid])
        .cap(SYMLINK_TARGET_CAP)
        .ok();
    let target = match out {
        Ok(t) => t,
        Err(e) => return Some(format!("the symlink's target could not be read: {e}")),
    };
    let target_str = String::from_utf8_lossy(&target).into_owned();
    if let Some(reason) = symlink_escapes(&f.path, &target) {
        return Some(format!("symlink to {target_str:?} {reason}"));
    }
    if policy.allow_symlinks {
        None
    } else {
        Some(format!(
            "symlink to {target_str:?}; symlinks are not allowed"
        ))
    }
}

/// Whether a symlink at `link` (repository-relative) with `target` leaves the tree or points
/// into git's internals, judged lexically.
fn symlink_escapes(link: &str, target: &[u8]) -> Option<&'static str> {
    if target.is_empty() {
        return Some("is empty");
    }
    if target.starts_with(b"/") || target.contains(&0) || target.contains(&b'\\') {
        return Some("is absolute or malformed");
    }
    let mut stack: Vec<&[u8]> = link.as_bytes().split(|b| *b == b'/').collect();
    stack.pop();
    for c in target.split(|b| *b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                if stack.pop().is_none() {
                    return Some("leaves the worktree");
                }
            }
            c => {
                if c.eq_ignore_ascii_case(b".git") {
                    return Some("points into a .git directory");
                }
                stack.push(c);
            }
        }
    }
    None
}

/// A temporary index file outside every worktree, removed on drop.
struct TempIndex {
    dir: PathBuf,
}

impl TempIndex {
    fn new() -> Result<Self, WorktreeError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "mmo-index-{}-{}-{}",
            std::process::id(),
            nanos,
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).map_err(|source| WorktreeError::Io {
            context: format!("creating {}", dir.display()),
            source,
        })?;
        Ok(TempIndex { dir })
    }

    fn path(&self) -> PathBuf {
        self.dir.join("index")
    }
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------------------------
// Running git
// ---------------------------------------------------------------------------------------------

struct GitOutput {
    stdout: Vec<u8>,
    stderr: String,
    success: bool,
    /// The exit code, when git exited (not by a signal).
    code: Option<i32>,
}

/// `(key, value)` configuration settings, given to git through `GIT_CONFIG_KEY_<n>`.
type DisarmSettings = Vec<(Vec<u8>, &'static str)>;

/// The settings that turn off, by name, every filter driver and configured hook in a scan's
/// output ([`DISARM_SCAN`]); `None` when there are more than [`MAX_DISARMED`].
///
/// A filter driver (`filter.<driver>.clean`, `.smudge`, `.process`) runs whenever git reads a
/// working-tree file of a path with a `filter=<driver>` attribute (`add`, `status`,
/// `update-index`, `apply`) or writes one (`worktree add`, `apply`); empty commands make git skip
/// it and `required=false` makes the skip no error, so contents pass through unfiltered. A
/// configured hook (`hook.<name>.command`, git 2.54 and later) is not found through
/// `core.hooksPath`; `hook.<name>.enabled=false` turns it off (older git ignores it).
fn disarm_settings(names: &[u8]) -> Option<DisarmSettings> {
    let mut filters = BTreeSet::new();
    let mut hooks = BTreeSet::new();
    for key in split_nul(names) {
        // Section and variable come back lower-cased, the subsection (the name) as written.
        let (set, rest) = if let Some(rest) = key.strip_prefix(b"filter.") {
            (&mut filters, rest)
        } else if let Some(rest) = key.strip_prefix(b"hook.") {
            (&mut hooks, rest)
        } else {
            continue;
        };
        if let Some(dot) = rest.iter().rposition(|b| *b == b'.') {
            set.insert(&rest[..dot]);
        }
    }
    if filters.len() + hooks.len() > MAX_DISARMED {
        return None;
    }
    let key = |section: &[u8], name: &[u8], var: &[u8]| [section, b".", name, b".", var].concat();
    let mut settings = Vec::new();
    for name in filters {
        for (var, value) in [
            (&b"clean"[..], ""),
            (b"smudge", ""),
            (b"process", ""),
            (b"required", "false"),
        ] {
            settings.push((key(b"filter", name, var), value));
        }
    }
    for name in hooks {
        settings.push((key(b"hook", name, b"enabled"), "false"));
    }
    Some(settings)
}

/// One hardened git invocation.
struct GitCmd {
    cwd: PathBuf,
    pre: Vec<std::ffi::OsString>,
    args: Vec<std::ffi::OsString>,
    env: Vec<(String, std::ffi::OsString)>,
    stdin: Option<Vec<u8>>,
    cap: usize,
    /// Whether to scan the configuration for filter drivers and hooks to turn off first (every
    /// command but that scan itself).
    disarm: bool,
}

impl GitCmd {
    fn in_dir(dir: &Path) -> Self {
        GitCmd {
            cwd: dir.to_path_buf(),
            pre: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            stdin: None,
            cap: SMALL_CAP,
            disarm: true,
        }
    }

    /// A command on a writer's worktree through its recorded administrative directory.
    fn for_worktree(wt: &Worktree) -> Self {
        let mut cmd = GitCmd::in_dir(&wt.path);
        let mut gd = std::ffi::OsString::from("--git-dir=");
        gd.push(&wt.git_dir);
        let mut wtree = std::ffi::OsString::from("--work-tree=");
        wtree.push(&wt.path);
        cmd.pre.push(gd);
        cmd.pre.push(wtree);
        cmd
    }

    fn configs(mut self, cfg: &[&str]) -> Self {
        for c in cfg {
            self.pre.push("-c".into());
            self.pre.push((*c).into());
        }
        self
    }

    fn index(self, path: PathBuf) -> Self {
        self.env("GIT_INDEX_FILE", path)
    }

    fn env(mut self, key: &str, value: impl Into<std::ffi::OsString>) -> Self {
        self.env.push((key.to_owned(), value.into()));
        self
    }

    fn arg(mut self, a: impl AsRef<OsStr>) -> Self {
        self.args.push(a.as_ref().to_owned());
        self
    }

    fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, it: I) -> Self {
        for a in it {
            self.args.push(a.as_ref().to_owned());
        }
        self
    }

    fn stdin(mut self, input: Vec<u8>) -> Self {
        self.stdin = Some(input);
        self
    }

    fn cap(mut self, cap: usize) -> Self {
        self.cap = cap;
        self
    }

    fn label(&self) -> String {
        self.args
            .iter()
            .take(2)
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The settings that turn off the filter drivers and hooks of the configuration this
    /// command reads (same directory, same `--git-dir`), through a first git process; the
    /// scan's output when it failed (git would fail the same way).
    fn disarm_env(&self) -> Result<Result<DisarmSettings, GitOutput>, WorktreeError> {
        let scan = GitCmd {
            cwd: self.cwd.clone(),
            pre: self.pre.clone(),
            args: DISARM_SCAN.iter().map(Into::into).collect(),
            env: self.env.clone(),
            stdin: None,
            cap: LIST_CAP,
            disarm: false,
        };
        let out = scan.run()?;
        if !matches!(out.code, Some(0 | 1)) {
            // 1 is "no such setting".
            return Ok(Err(out));
        }
        disarm_settings(&out.stdout)
            .map(Ok)
            .ok_or_else(|| WorktreeError::Git {
                command: self.label(),
                stderr: format!(
                    "the configuration names more than {MAX_DISARMED} filter drivers and hooks"
                ),
            })
    }

    /// Runs git and returns its output whatever the exit status.
    fn run(self) -> Result<GitOutput, WorktreeError> {
        let label = self.label();
        let disarm = if self.disarm {
            match self.disarm_env()? {
                Ok(settings) => settings,
                Err(failed) => return Ok(failed),
            }
        } else {
            Vec::new()
        };
        let mut cmd = Command::new("git");
        cmd.current_dir(&self.cwd)
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("GIT_") {
                cmd.env_remove(&k);
            }
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_LITERAL_PATHSPECS", "1")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_PAGER", "cat")
            .env("PAGER", "cat")
            // `:` is git's own "no editor".
            .env("GIT_EDITOR", ":")
            .env("GIT_SEQUENCE_EDITOR", ":")
            .env("LC_ALL", "C")
            .env("LANGUAGE", "C");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        // Through the environment, not `-c`: a driver's name may contain `=`.
        if !disarm.is_empty() {
            cmd.env("GIT_CONFIG_COUNT", disarm.len().to_string());
            for (i, (key, value)) in disarm.iter().enumerate() {
                cmd.env(
                    format!("GIT_CONFIG_KEY_{i}"),
                    bytes_to_path(key).into_os_string(),
                )
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
            }
        }
        cmd.arg("--no-pager");
        for c in HARDENING {
            cmd.arg("-c").arg(c);
        }
        cmd.args(&self.pre).args(&self.args);

        let mut child = cmd
            .spawn()
            .map_err(|e| WorktreeError::Spawn(e.to_string()))?;
        let writer = match (child.stdin.take(), self.stdin) {
            (Some(mut pipe), Some(input)) => Some(thread::spawn(move || {
                let _ = pipe.write_all(&input);
            })),
            _ => None,
        };
        let cap = self.cap;
        let stdout = child.stdout.take().map(|mut pipe| {
            thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 64 * 1024];
                loop {
                    match pipe.read(&mut chunk) {
                        Ok(0) | Err(_) => return (buf, false),
                        Ok(n) => {
                            if buf.len() + n > cap {
                                return (buf, true);
                            }
                            buf.extend_from_slice(&chunk[..n]);
                        }
                    }
                }
            })
        });
        let stderr = child.stderr.take().map(|mut pipe| {
            thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8 * 1024];
                loop {
                    match pipe.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            let room = STDERR_CAP.saturating_sub(buf.len());
                            buf.extend_from_slice(&chunk[..n.min(room)]);
                        }
                    }
                }
                buf
            })
        });

        let deadline = Instant::now() + GIT_TIMEOUT;
        let mut sleep = Duration::from_millis(1);
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) => {}
                Err(_) => break None,
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(WorktreeError::Timeout {
                    command: label,
                    seconds: GIT_TIMEOUT.as_secs(),
                });
            }
            thread::sleep(sleep);
            sleep = (sleep * 2).min(Duration::from_millis(20));
        };
        let (out, overflowed) = match stdout {
            Some(h) => h.join().unwrap_or_default(),
            None => (Vec::new(), false),
        };
        if overflowed {
            let _ = child.kill();
        }
        let status = match status {
            Some(s) => Some(s),
            None => child.wait().ok(),
        };
        if let Some(w) = writer {
            let _ = w.join();
        }
        let err = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
        if overflowed {
            return Err(WorktreeError::OutputTooLarge {
                command: label,
                cap,
            });
        }
        Ok(GitOutput {
            stdout: out,
            stderr: String::from_utf8_lossy(&err).trim().to_owned(),
            success: status.is_some_and(|s| s.success()),
            code: status.and_then(|s| s.code()),
        })
    }

    /// Runs git and returns its standard output, or [`WorktreeError::Git`] on failure.
    fn ok(self) -> Result<Vec<u8>, WorktreeError> {
        let label = self.label();
        let out = self.run()?;
        if out.success {
            Ok(out.stdout)
        } else {
            Err(WorktreeError::Git {
                command: label,
                stderr: out.stderr,
            })
        }
    }

    /// Like [`GitCmd::ok`], reporting overflowing output as a too-large patch.
    fn ok_or_too_large(self) -> Result<Vec<u8>, WorktreeError> {
        self.ok().map_err(|e| match e {
            WorktreeError::OutputTooLarge { command, cap } => WorktreeError::PatchTooLarge {
                detail: format!("git {command} listed more than {cap} bytes"),
            },
            e => e,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlink_targets_judged_lexically() {
        assert_eq!(symlink_escapes("a/l", b"b"), None);
        assert_eq!(symlink_escapes("a/l", b"../b"), None);
        assert!(symlink_escapes("a/l", b"../../b").is_some());
        assert!(symlink_escapes("l", b"/etc/passwd").is_some());
        assert!(symlink_escapes("l", b"x/../.git/config").is_some());
        assert!(symlink_escapes("l", b"").is_some());
    }

    #[test]
    fn every_filter_driver_and_configured_hook_is_disarmed_by_name() {
        let names = b"filter.evil.clean\0filter.we=ird.na.me.process\0filter.clean\0\
            hook.jobs\0hook.lint.command\0hook.lint.event\0diff.x.textconv\0";
        let settings: Vec<(String, &str)> = disarm_settings(names)
            .unwrap()
            .into_iter()
            .map(|(k, v)| (String::from_utf8(k).unwrap(), v))
            .collect();
        let expected: Vec<(String, &str)> = [
            ("filter.evil.clean", ""),
            ("filter.evil.smudge", ""),
            ("filter.evil.process", ""),
            ("filter.evil.required", "false"),
            ("filter.we=ird.na.me.clean", ""),
            ("filter.we=ird.na.me.smudge", ""),
            ("filter.we=ird.na.me.process", ""),
            ("filter.we=ird.na.me.required", "false"),
            ("hook.lint.enabled", "false"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(settings, expected);
        assert_eq!(disarm_settings(b""), Some(Vec::new()));
        let many: Vec<u8> = (0..=MAX_DISARMED)
            .flat_map(|i| format!("filter.f{i}.clean\0").into_bytes())
            .collect();
        assert_eq!(disarm_settings(&many), None);
    }

    #[test]
    fn names_are_validated() {
        assert!(valid_name("job-1.a_b"));
        assert!(!valid_name(""));
        assert!(!valid_name("-x"));
        assert!(!valid_name(".x"));
        assert!(!valid_name("a/b"));
        assert!(!valid_name(&"a".repeat(65)));
    }
}
