//! Publishing research drafts (feature `news-publish`; the tools are advertised only in a build
//! with it): a person approves a draft, and an approved draft is published to a destination the
//! workspace configures in `.vox/publish.toml` (a file in the workspace, a commit on a branch
//! of its repository, or an HTTP webhook),
//! each attempt kept as a submission; a webhook that answers with a `status_url` is an external
//! job whose status can be polled.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use vox_core::family::{async_typed, typed};
use vox_core::{CallCtx, Ctx, HandlerEntry, ToolError};
use vox_store::{Draft, DraftApproval, Submission};
use vox_tools_common::store::{db, store};
use webhook::{Fault, Net};

mod webhook;

/// Largest `.vox/publish.toml`.
const MAX_CONFIG: u64 = 64 * 1024;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    /// Non-public networks webhooks and their status URLs may reach (`127.0.0.1/32`,
    /// `10.0.0.0/8`, `fd00::/8`): any other loopback, private, link-local, ... address is
    /// refused (see [`webhook`]).
    #[serde(default)]
    allow_private: Vec<Net>,
    #[serde(default)]
    destinations: BTreeMap<String, Destination>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
enum Destination {
    /// A directory of the workspace: the draft is written there as `<id>-<slug>.md`.
    File { dir: String },
    /// A branch of the workspace's git repository: the draft is committed there as
    /// `<dir>/<id>-<slug>.md` (the branch is made from `HEAD` when it does not exist), through a
    /// worktree of its own, so the checkout is not touched.
    Branch { branch: String, dir: String },
    /// An HTTP endpoint the draft is POSTed to, as JSON; `token_env` names the variable holding
    /// its bearer token. Its host must resolve to public addresses or ones `allow_private`
    /// lists; a redirect is not followed; a `status_url` it answers must be on its origin.
    Webhook {
        url: String,
        token_env: Option<String>,
    },
}

fn config(ctx: &Ctx) -> Result<Config, ToolError> {
    let path = ctx.workspace.root.join(".vox").join("publish.toml");
    let shown = ".vox/publish.toml";
    let meta = std::fs::metadata(&path).map_err(|_| {
        ToolError::unavailable(format!(
            "no publishing destination: {shown} does not exist (a [destinations.<name>] table with kind = \"file\" and dir, or kind = \"webhook\" and url)"
        ))
    })?;
    config_read(&path, meta, shown)
}

/// `.vox/publish.toml`, or an empty one when there is none (nothing allowed but the default).
fn config_or_default(ctx: &Ctx) -> Result<Config, ToolError> {
    let path = ctx.workspace.root.join(".vox").join("publish.toml");
    match std::fs::metadata(&path) {
        Ok(meta) => config_read(&path, meta, ".vox/publish.toml"),
        Err(_) => Ok(Config::default()),
    }
}

fn config_read(path: &Path, meta: std::fs::Metadata, shown: &str) -> Result<Config, ToolError> {
    if meta.len() > MAX_CONFIG {
        return Err(ToolError::invalid_arguments(format!(
            "{shown} is over {MAX_CONFIG} bytes"
        )));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| ToolError::unavailable(format!("{shown}: {e}")))?;
    toml::from_str(&text).map_err(|e| ToolError::invalid_arguments(format!("{shown}: {e}")))
}

fn draft(ctx: &Ctx, id: i64) -> Result<Draft, ToolError> {
    store(ctx)?
        .research_draft_get(id)
        .map_err(db)?
        .ok_or_else(|| ToolError::not_found(format!("no draft {id}")))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ApproveArgs {
    /// The draft (from vox_news_draft).
    draft_id: i64,
    /// Why, or what was checked.
    note: Option<String>,
}

/// `vox_news_approve`: a person's approval (an operator tool: no agent may approve, and over
/// HTTP only the write token).
fn approve(ctx: &Ctx, call: &CallCtx, a: ApproveArgs) -> Result<DraftApproval, ToolError> {
    draft(ctx, a.draft_id)?;
    let note = a.note.unwrap_or_default();
    if note.len() > 4096 {
        return Err(ToolError::invalid_arguments("`note` is at most 4096 bytes"));
    }
    store(ctx)?
        .draft_approve(a.draft_id, call.principal(), &note)
        .map_err(db)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PublishArgs {
    /// An approved draft.
    draft_id: i64,
    /// A destination named in `.vox/publish.toml`.
    destination: String,
}

async fn publish(ctx: Arc<Ctx>, _call: CallCtx, a: PublishArgs) -> Result<Submission, ToolError> {
    let d = draft(&ctx, a.draft_id)?;
    if store(&ctx)?
        .draft_approval(a.draft_id)
        .map_err(db)?
        .is_none()
    {
        return Err(ToolError::refused(format!(
            "draft {} is not approved: a person approves it first (vox_news_approve)",
            a.draft_id
        )));
    }
    let cfg = config(&ctx)?;
    let dest = cfg
        .destinations
        .get(&a.destination)
        .cloned()
        .ok_or_else(|| {
            ToolError::invalid_arguments(format!(
                "`destination`: `{}` is not in .vox/publish.toml (configured: {})",
                a.destination,
                cfg.destinations
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
    let s = store(&ctx)?;
    let record = |kind: &str,
                  state: &str,
                  location: Option<&str>,
                  detail: Option<&str>,
                  status: Option<&str>| {
        s.submission_add(
            a.draft_id,
            &a.destination,
            kind,
            state,
            location,
            detail,
            status,
        )
        .map_err(db)
    };
    match dest {
        Destination::File { dir } => match write_file(&ctx.workspace.root, &dir, &d) {
            Ok(path) => record("file", "published", Some(&path), None, None),
            Err(why) => {
                record("file", "failed", None, Some(&why), None)?;
                Err(ToolError::failed(why))
            }
        },
        Destination::Branch { branch, dir } => {
            let (root, d2) = (ctx.workspace.root.clone(), d.clone());
            let committed = vox_core::family::run_blocking(move || {
                Ok(commit_to_branch(&root, &branch, &dir, &d2))
            })
            .await?;
            match committed {
                Ok(location) => record("branch", "published", Some(&location), None, None),
                Err(why) => {
                    record("branch", "failed", None, Some(&why), None)?;
                    Err(ToolError::failed(why))
                }
            }
        }
        Destination::Webhook { url, token_env } => {
            let body =
                json!({"draft_id": d.id, "run_id": d.run_id, "title": d.title, "body": d.body});
            match post(&url, token_env.as_deref(), &body, &cfg.allow_private).await {
                Ok((answer, status)) => {
                    let state = if status.is_some() {
                        "pending"
                    } else {
                        "published"
                    };
                    let detail = answer.to_string();
                    record(
                        "webhook",
                        state,
                        Some(&url),
                        Some(&detail),
                        status.as_deref(),
                    )
                }
                Err(why) => {
                    record("webhook", "failed", Some(&url), Some(why.message()), None)?;
                    Err(why.into())
                }
            }
        }
    }
}

/// A plain relative path (no root, no `..`), or why not.
fn plain_dir(dir: &str) -> Result<&Path, String> {
    let rel = Path::new(dir);
    if !vox_tools_common::is_plain_relative(rel) {
        return Err(format!(
            "destination dir `{dir}` is not a plain workspace-relative path"
        ));
    }
    Ok(rel)
}

/// Runs git in `dir` with nothing the repository's configuration names run (no hooks, filter
/// drivers, fsmonitor, gpg ...: `vox_repo::safe_git_command`); its trimmed stdout, or its
/// stderr as the error.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = vox_repo::safe_git_command(dir)
        .map_err(|e| format!("git: {e}"))?
        .args(["-c", "user.name=vox", "-c", "user.email=vox@localhost"])
        .args(args)
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(if out.stderr.is_empty() {
            &out.stdout
        } else {
            &out.stderr
        })
        .trim()
        .to_string();
        return Err(format!("git {}: {why}", args.first().unwrap_or(&"")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Commits a draft to `branch` of the workspace's repository through a temporary worktree;
/// returns `<branch>:<path>@<commit>`.
fn commit_to_branch(root: &Path, branch: &str, dir: &str, d: &Draft) -> Result<String, String> {
    plain_dir(dir)?;
    git(root, &["check-ref-format", "--branch", branch])
        .map_err(|_| format!("`{branch}` is not a branch name"))?;
    let tmp = tempfile::Builder::new()
        .prefix("vox-publish-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let wt = tmp.path().join("wt");
    let wt_s = wt.to_string_lossy().into_owned();
    let exists = git(
        root,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ],
    )
    .is_ok();
    if exists {
        git(root, &["worktree", "add", "--quiet", &wt_s, branch])?;
    } else {
        git(
            root,
            &["worktree", "add", "--quiet", "-b", branch, &wt_s, "HEAD"],
        )?;
    }
    let outcome = (|| {
        let path = write_file(&wt, dir, d)?;
        git(&wt, &["add", "--", &path])?;
        // A draft published again unchanged is still a publication: an empty commit says so.
        git(
            &wt,
            &[
                "commit",
                "--quiet",
                "--allow-empty",
                "-m",
                &format!("Publish draft {}: {}", d.id, d.title),
            ],
        )?;
        let sha = git(&wt, &["rev-parse", "HEAD"])?;
        Ok(format!("{branch}:{path}@{}", &sha[..12.min(sha.len())]))
    })();
    let _ = git(root, &["worktree", "remove", "--force", &wt_s]);
    outcome
}

/// Writes a draft as `<dir>/<id>-<slug>.md` under `root` (a new file, written whole); returns
/// its path relative to `root`.
fn write_file(root: &Path, dir: &str, d: &Draft) -> Result<String, String> {
    let rel = plain_dir(dir)?;
    let slug: String = d
        .title
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .take(8)
        .collect::<Vec<_>>()
        .join("-");
    let name = format!(
        "{}-{}.md",
        d.id,
        if slug.is_empty() { "draft" } else { &slug }
    );
    let full_dir = root.join(rel);
    std::fs::create_dir_all(&full_dir).map_err(|e| format!("{dir}: {e}"))?;
    let real = full_dir.canonicalize().map_err(|e| format!("{dir}: {e}"))?;
    if !real.starts_with(root.canonicalize().map_err(|e| e.to_string())?) {
        return Err(format!("destination dir `{dir}` leaves the workspace"));
    }
    let path = real.join(&name);
    let tmp = real.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, &d.body).map_err(|e| format!("{dir}/{name}: {e}"))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("{dir}/{name}: {e}"))?;
    Ok(format!("{}/{name}", dir.trim_end_matches('/')))
}

/// POSTs `body` to a webhook whose host resolves to an address `allow` permits (nothing is
/// sent otherwise); its JSON answer (or `{}` for another 2xx body) and the `status_url` it names,
/// which must be on the webhook's origin.
async fn post(
    url: &str,
    token_env: Option<&str>,
    body: &Value,
    allow: &[Net],
) -> Result<(Value, Option<String>), Fault> {
    let parsed = webhook::http_url(url).map_err(Fault::Failed)?;
    let token = match token_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            Fault::Failed(format!("the webhook's token variable {var} is not set"))
        })?),
        None => None,
    };
    let target = webhook::resolve(&parsed, allow).await?;
    let answer = target.post(token.as_deref(), body).await?;
    let status = match answer.get("status_url") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => match webhook::http_url(s) {
            Ok(u) if webhook::same_origin(&u, &parsed) => Some(u.to_string()),
            _ => {
                return Err(Fault::Refused(format!(
                    "{url} answered a status_url `{s}` that is not an http(s) URL on its own \
                     origin (the scheme, host and port of {url}): not fetched"
                )));
            }
        },
        Some(other) => {
            return Err(Fault::Failed(format!(
                "{url} answered a status_url that is not a string ({other})"
            )));
        }
    };
    Ok((answer, status))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SubmissionsArgs {
    /// Only this draft's submissions.
    draft_id: Option<i64>,
    /// Most records (default 50, at most 500).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct Submissions {
    submissions: Vec<Submission>,
}

fn submissions(ctx: &Ctx, a: SubmissionsArgs) -> Result<Submissions, ToolError> {
    Ok(Submissions {
        submissions: store(ctx)?
            .submissions(a.draft_id, a.limit.unwrap_or(50).clamp(1, 500) as usize)
            .map_err(db)?,
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct JobArgs {
    /// A submission whose webhook named a status URL.
    submission_id: i64,
}

/// `vox_external_job_status`: polls a pending submission's status URL (its JSON `state`:
/// `pending`, `published` or `failed`) and records what it says.
async fn job_status(ctx: Arc<Ctx>, _call: CallCtx, a: JobArgs) -> Result<Submission, ToolError> {
    let s = store(&ctx)?;
    let sub = s
        .submission(a.submission_id)
        .map_err(db)?
        .ok_or_else(|| ToolError::not_found(format!("no submission {}", a.submission_id)))?;
    let Some(url) = sub.status_url.clone().filter(|_| sub.state == "pending") else {
        return Ok(sub);
    };
    // Recorded before status URLs were checked at publication, or since: on the webhook's
    // origin, and at an address `allow_private` permits, or not fetched.
    let parsed = webhook::http_url(&url).map_err(ToolError::failed)?;
    let origin = sub
        .location
        .as_deref()
        .and_then(|l| webhook::http_url(l).ok());
    if !origin.is_some_and(|o| webhook::same_origin(&o, &parsed)) {
        return Err(ToolError::refused(format!(
            "submission {}'s status URL {url} is not on its webhook's origin: not fetched",
            a.submission_id
        )));
    }
    let allow = config_or_default(&ctx)?.allow_private;
    let v = webhook::resolve(&parsed, &allow).await?.get().await?;
    let state = match v.get("state").and_then(Value::as_str) {
        Some(x @ ("pending" | "published" | "failed")) => x,
        other => {
            return Err(ToolError::failed(format!(
                "{url} answered state {other:?}; expected pending, published or failed"
            )));
        }
    };
    s.submission_update(a.submission_id, state, &v.to_string())
        .map_err(db)?;
    s.submission(a.submission_id)
        .map_err(db)?
        .ok_or_else(|| ToolError::not_found(format!("no submission {}", a.submission_id)))
}

pub fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_news_approve", vox_core::family::blocking(approve)),
        ("vox_news_publish", async_typed(publish)),
        ("vox_scientia_submissions", typed(submissions)),
        ("vox_external_job_status", async_typed(job_status)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    /// Plain git for setting the repository up (the test's own commands, not the code's).
    fn setup_git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    #[test]
    fn publishing_to_a_branch_runs_nothing_the_repository_configures() {
        let traps = tempfile::tempdir().unwrap();
        let marker = traps.path().join("ran");
        let script = traps.path().join("trap.sh");
        std::fs::write(
            &script,
            format!("#!/bin/sh\necho \"$0 $*\" >> '{}'\ncat\n", marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = script.to_str().unwrap();

        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        setup_git(root, &["init", "-q", "-b", "main"]);
        setup_git(root, &["config", "user.name", "T"]);
        setup_git(root, &["config", "user.email", "t@example.com"]);
        std::fs::write(root.join("README.md"), "readme\n").unwrap();
        setup_git(root, &["add", "README.md"]);
        setup_git(root, &["commit", "-q", "-m", "init"]);
        // Hooks in .git/hooks and in core.hooksPath, configured hooks (git 2.54 and later),
        // filter drivers on every path (a checkout smudges, `add` cleans), fsmonitor, gpg.
        let hooks = traps.path().join("hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        for name in [
            "pre-commit",
            "prepare-commit-msg",
            "commit-msg",
            "post-commit",
            "post-checkout",
            "reference-transaction",
            "post-index-change",
            "pre-auto-gc",
        ] {
            std::fs::copy(script, hooks.join(name)).unwrap();
            std::fs::copy(script, root.join(".git/hooks").join(name)).unwrap();
        }
        std::fs::write(root.join(".git/info/attributes"), "* filter=evil\n").unwrap();
        for (key, value) in [
            ("core.hooksPath", hooks.to_str().unwrap()),
            ("hook.evil.command", script),
            ("hook.evil.event", "pre-commit"),
            ("filter.evil.clean", script),
            ("filter.evil.smudge", script),
            ("filter.evil.required", "true"),
            ("core.fsmonitor", script),
            ("commit.gpgSign", "true"),
            ("gpg.program", script),
            ("gc.auto", "1"),
        ] {
            setup_git(root, &["config", key, value]);
        }

        let draft = Draft {
            id: 7,
            run_id: 1,
            title: "A title".into(),
            body: "The body.\n".into(),
            created_at: 0,
        };
        let location = commit_to_branch(root, "drafts", "news", &draft).expect("published");
        assert!(location.starts_with("drafts:news/7-"), "{location}");
        let path = location
            .split_once(':')
            .and_then(|(_, rest)| rest.split_once('@'))
            .map(|(path, _)| path)
            .unwrap();
        // Published again onto the existing branch: its worktree is a checkout of its files.
        commit_to_branch(root, "drafts", "news", &draft).expect("published again");
        let ran = std::fs::read_to_string(&marker).unwrap_or_default();
        assert!(ran.is_empty(), "configured programs ran:\n{ran}");
        // The committed file is the draft as written (no clean filter changed it).
        let committed = setup_git(root, &["cat-file", "blob", &format!("drafts:{path}")]);
        assert!(committed.contains("The body."), "{committed}");
        assert_eq!(
            setup_git(root, &["rev-list", "--count", "drafts"]),
            "3",
            "two commits on the branch"
        );
    }
}
