//! `vox_repo_*`: read-only views of the workspace's git repository (no subsystem needed).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vox_core::CallCtx;
use vox_core::HandlerEntry;
use vox_core::family::blocking;
use vox_core::{Ctx, ToolError};
use vox_repo::{Commit, Diff, DiffTarget, FileAt, Repo, RepoError, ShowCommit, Status, Tree};

/// Patches and files are capped so one call cannot flood a model's context.
const MAX_PATCH: usize = 256 * 1024;
const MAX_FILE: usize = 512 * 1024;

/// The category a client branches on, with the repository's own code as the detail.
fn repo_err(e: RepoError) -> ToolError {
    let error = if e.is_invalid_input() {
        ToolError::invalid_arguments(e.to_string())
    } else if matches!(e, RepoError::NotARepository(_)) {
        ToolError::not_found(e.to_string())
    } else if matches!(e, RepoError::Cancelled { .. }) {
        ToolError::cancelled(e.to_string())
    } else {
        ToolError::unavailable(e.to_string())
    };
    error.with_detail(e.code(), None)
}

/// The workspace's repository; its git commands are killed when the call is cancelled.
fn repo(ctx: &Ctx, call: &CallCtx) -> Result<Repo, ToolError> {
    let cancel = call.cancel.clone();
    Ok(Repo::discover(&ctx.workspace.root)
        .map_err(repo_err)?
        .with_cancel(move || cancel.is_cancelled()))
}

#[derive(Serialize, JsonSchema)]
struct Log {
    /// Newest first.
    commits: Vec<Commit>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LogArgs {
    /// Start revision (default HEAD): a branch, tag or commit.
    rev: Option<String>,
    /// Only commits touching this repository-relative path.
    path: Option<String>,
    /// Page size (default 20, at most 200).
    limit: Option<u32>,
    /// Commits to skip (for paging).
    skip: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DiffArgs {
    /// `working_tree` (unstaged, the default), `staged`, or `revisions` (with `from`, `to`).
    target: Option<DiffKind>,
    /// Old side for `revisions`.
    from: Option<String>,
    /// New side for `revisions` (default: the working tree).
    to: Option<String>,
    /// Only this repository-relative path.
    path: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum DiffKind {
    WorkingTree,
    Staged,
    Revisions,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ShowArgs {
    /// The commit (default HEAD).
    rev: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TreeArgs {
    /// Revision (default HEAD).
    rev: Option<String>,
    /// Directory (default the root).
    path: Option<String>,
    /// List every file below, not only direct entries.
    #[serde(default)]
    recursive: bool,
    /// Most entries (default 500, at most 5000).
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FileArgs {
    /// Repository-relative file path.
    path: String,
    /// Revision (default HEAD).
    rev: Option<String>,
    /// First line (1-based, inclusive).
    start_line: Option<u32>,
    /// Last line (inclusive).
    end_line: Option<u32>,
}

fn status(ctx: &Ctx, call: &CallCtx, _a: NoArgs) -> Result<Status, ToolError> {
    repo(ctx, call)?.status().map_err(repo_err)
}

fn log(ctx: &Ctx, call: &CallCtx, a: LogArgs) -> Result<Log, ToolError> {
    let limit = a.limit.unwrap_or(20).clamp(1, 200) as usize;
    let commits = repo(ctx, call)?
        .log(
            a.rev.as_deref(),
            a.path.as_deref(),
            limit,
            a.skip.unwrap_or(0) as usize,
        )
        .map_err(repo_err)?;
    Ok(Log { commits })
}

fn diff(ctx: &Ctx, call: &CallCtx, a: DiffArgs) -> Result<Diff, ToolError> {
    let target = match a.target.unwrap_or(DiffKind::WorkingTree) {
        DiffKind::WorkingTree => DiffTarget::WorkingTree,
        DiffKind::Staged => DiffTarget::Staged,
        DiffKind::Revisions => DiffTarget::Revisions {
            from: a.from.ok_or_else(|| {
                ToolError::invalid_arguments("`from` is required when target is `revisions`")
            })?,
            to: a.to,
        },
    };
    repo(ctx, call)?
        .diff(target, a.path.as_deref(), MAX_PATCH)
        .map_err(repo_err)
}

fn show(ctx: &Ctx, call: &CallCtx, a: ShowArgs) -> Result<ShowCommit, ToolError> {
    repo(ctx, call)?
        .show(a.rev.as_deref().unwrap_or("HEAD"), MAX_PATCH)
        .map_err(repo_err)
}

fn tree(ctx: &Ctx, call: &CallCtx, a: TreeArgs) -> Result<Tree, ToolError> {
    let limit = a.limit.unwrap_or(500).clamp(1, 5000) as usize;
    repo(ctx, call)?
        .tree(a.rev.as_deref(), a.path.as_deref(), a.recursive, limit)
        .map_err(repo_err)
}

fn file(ctx: &Ctx, call: &CallCtx, a: FileArgs) -> Result<FileAt, ToolError> {
    repo(ctx, call)?
        .file(
            a.rev.as_deref(),
            &a.path,
            a.start_line.map(|n| n as usize),
            a.end_line.map(|n| n as usize),
            MAX_FILE,
        )
        .map_err(repo_err)
}

pub fn family() -> vox_core::Family {
    vox_core::Family {
        name: "repo",
        handlers: handlers(),
        ..vox_core::Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_repo_status", blocking(status)),
        ("vox_repo_log", blocking(log)),
        ("vox_repo_diff", blocking(diff)),
        ("vox_repo_show", blocking(show)),
        ("vox_repo_tree", blocking(tree)),
        ("vox_repo_file", blocking(file)),
    ]
}
