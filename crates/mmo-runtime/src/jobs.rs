//! The Agent-MCP operations: spawn, wait, results and their lifecycle, patches, traces,
//! inspection and control. Arguments are typed here (input schema and strict decoding from one
//! type); `mesh` only frames them as MCP tools.

use crate::result::JobState;
use crate::store::{NewRun, Run};
use crate::team::{MeshError, MeshResult, Team};
use mmo_profile::model::LiteralTask;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// `literal_task`: what a low-trust role is asked to do, as data.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LiteralTaskArgs {
    /// One of `locate`, `references`, `extract`, `summarize_supplied`.
    pub operation: String,
    /// A workspace-relative path of a regular file.
    pub path: String,
    /// First line (1-based) of the range, if any.
    pub start_line: Option<u32>,
    /// Last line (inclusive) of the range, if any.
    pub end_line: Option<u32>,
    /// What to locate or find references of.
    pub query: Option<String>,
}

impl From<LiteralTaskArgs> for LiteralTask {
    fn from(a: LiteralTaskArgs) -> LiteralTask {
        LiteralTask {
            operation: a.operation,
            path: a.path,
            start_line: a.start_line,
            end_line: a.end_line,
            query: a.query,
        }
    }
}

/// `agents_spawn`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnArgs {
    /// The role to run (one your role may spawn).
    pub role: String,
    /// The task in prose (normal roles).
    pub task: Option<String>,
    /// The task's admission category, one of the role's `allowed_task_kinds`.
    pub task_kind: Option<String>,
    /// Canonical workspace-relative paths a writer may change (files or directories).
    pub write_scope: Option<Vec<String>>,
    /// The typed task of a low-trust role (instead of `task`/`task_kind`).
    pub literal_task: Option<LiteralTaskArgs>,
}

/// `agents_wait`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    /// The `progress_revision` you last observed, per job; wakes on the first that differs.
    pub after_revision: BTreeMap<String, i64>,
    /// How long to wait at most (default 60, at most 600 seconds).
    pub timeout_seconds: Option<u32>,
    /// Include a bounded preview of terminal jobs' results.
    pub preview: Option<bool>,
}

/// `agent_result`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultArgs {
    pub job: String,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Characters per page (default `default_result_chars`, at most `max_result_chars`).
    pub max_chars: Option<u32>,
}

/// `agent_result_accept` / `agent_result_reject`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DispositionArgs {
    pub job: String,
    /// Why (recorded in the audit log).
    pub reason: String,
}

/// `agent_patch_integrate`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobArgs {
    pub job: String,
}

/// `agent_inspect`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    pub agent_run_ref: String,
}

/// `agent_trace`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceArgs {
    pub agent_run_ref: String,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Only these event kinds (e.g. `agentMessage`, `commandExecution`, `fileChange`, `mcpToolCall`, `turn`).
    pub filter: Option<Vec<String>>,
}

/// `agent_trace_record`
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceRecordArgs {
    /// The `record_cursor` of a truncated trace record.
    pub record_cursor: String,
    /// Page number, from 0.
    pub page: Option<u32>,
}

/// `agent_control`: every action of the control graph
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ControlArgs {
    pub agent_run_ref: String,
    /// `inspect`; `trace` (its trace, filtered and paginated as `agent_trace`); `steer` (more
    /// input for the run's active turn); `interrupt` (its active turn
    /// ends through the app-server and the job pauses on its thread); `pause` (cold: its partial
    /// evidence kept, its host retired, its admission slots released); `continue` (a paused
    /// job on its own thread, after admission again); `finalize` (the job is asked for its
    /// final result from the evidence it has, within its role's finalization_grace_seconds,
    /// then stopped if it has not finished); `set_effort` (`effort` for its next turns, within
    /// its role's allowed_reasoning_efforts and its model's); `respond` (`response` to a pending
    /// input named by `request_id`, as inspection's `pending_inputs` lists them); `detach`
    /// (the controller stops following a running job: it keeps its host and admission, its
    /// evidence so far is kept as partial, and `continue` reattaches); `compact` (a paused or
    /// suspended job's durable thread is compacted by the app-server, for a smaller continuation);
    /// `fork` (a new job of the same role and parent on a fork of a paused, suspended or ended
    /// job's persisted thread, after admission, with `message` as its input); `stop`.
    pub action: ControlAction,
    /// The `control_revision` from your last inspection (required for every action but
    /// `inspect`).
    pub control_revision: Option<i64>,
    /// The text `steer` adds to the active turn, the input `continue` resumes with, or a
    /// fork's first input.
    pub message: Option<String>,
    /// The reasoning effort `set_effort` chooses.
    pub effort: Option<String>,
    /// `continue` of a goal-mode run: the goal's new total token budget (Codex counts tokens
    /// cumulatively), larger than its current one and at most its role's
    /// max_goal_token_budget.
    pub goal_token_budget: Option<u64>,
    /// `respond`: the pending input answered (its `request_id` from `pending_inputs`).
    pub request_id: Option<String>,
    /// `respond`: the answer, as the request's method defines it (for a command approval,
    /// `{"decision": "accept"}` or `"decline"`, one of its `availableDecisions`).
    pub response: Option<Value>,
    /// `trace`: the `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// `trace`: only these event kinds.
    pub filter: Option<Vec<String>>,
}

impl ControlAction {
    /// The action's name, as the controls table lists it.
    pub fn as_str(self) -> &'static str {
        match self {
            ControlAction::Inspect => "inspect",
            ControlAction::Trace => "trace",
            ControlAction::Steer => "steer",
            ControlAction::Interrupt => "interrupt",
            ControlAction::Pause => "pause",
            ControlAction::Continue => "continue",
            ControlAction::Finalize => "finalize",
            ControlAction::SetEffort => "set_effort",
            ControlAction::Respond => "respond",
            ControlAction::Detach => "detach",
            ControlAction::Compact => "compact",
            ControlAction::Fork => "fork",
            ControlAction::Stop => "stop",
        }
    }
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum ControlAction {
    Inspect,
    Trace,
    Steer,
    Interrupt,
    Pause,
    Continue,
    Finalize,
    SetEffort,
    Respond,
    Detach,
    Compact,
    Fork,
    Stop,
}

/// Largest `respond` answer.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Longest `steer` message.
const MAX_STEER_CHARS: usize = 16_000;

/// How a mutating control's delivery ended.
enum Delivery {
    Delivered(Value),
    /// It was not delivered, and why (nothing changed in the target).
    Failed(String),
    /// Delivery began and no answer came: the target may or may not have it.
    Unknown(String),
}

/// How long a control waits for its host's answer (`CODEX_MMO_CONTROL_TIMEOUT_MS`, default
/// 30 s) before its delivery is `delivery_unknown`.
fn control_timeout() -> Duration {
    std::env::var("CODEX_MMO_CONTROL_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(30))
}

/// Characters of a trace record shown inline before it is truncated.
const TRACE_INLINE_CHARS: usize = 2000;
/// Records per trace page.
const TRACE_PAGE: usize = 50;
/// Characters per `agent_trace_record` page.
const RECORD_PAGE_CHARS: usize = 16_000;
/// The longest `agents_wait`.
const MAX_WAIT_SECONDS: u32 = 600;
/// Preview characters in `agents_wait`.
const PREVIEW_CHARS: usize = 400;

fn truncate_chars(s: &str, n: usize) -> (&str, bool) {
    match s.char_indices().nth(n) {
        Some((i, _)) => (&s[..i], true),
        None => (s, false),
    }
}

/// `agents_spawn`: admission, then the run is recorded and its host started in the background.
pub async fn spawn(team: &Arc<Team>, caller: &Run, a: SpawnArgs) -> MeshResult<Value> {
    let guard = team.admit.lock().await;
    let target = team.role(&a.role).map_err(|_| {
        MeshError::new(
            "admission_unknown_role",
            format!("role `{}` is not in profile `{}`", a.role, team.profile.id),
        )
    })?;
    // Other supervisors decide their admissions under the same lock, so what is counted here
    // stays true until this run is recorded.
    let _lock = team.store.admission_lock()?;
    let literal = a.literal_task.map(LiteralTask::from);
    let request = crate::admission::SpawnRequest {
        role: a.role.clone(),
        task: a.task.clone(),
        task_kind: a.task_kind.clone(),
        write_scope: a.write_scope.clone(),
        literal_task: literal.clone(),
    };
    let admitted = decide(team, &caller.run_ref, &request)?;
    let (prompt, literal_op) = match &literal {
        Some(lt) => {
            let prepared =
                crate::literal::prepare(&team.workspace, lt, target.max_task_chars as usize)
                    .map_err(|e| MeshError::new(e.code, e.message))?;
            (
                prepared.prompt,
                Some(serde_json::to_value(&prepared.operation).unwrap_or(Value::Null)),
            )
        }
        None => (a.task.clone().unwrap_or_default(), None),
    };
    let job = crate::ids::new_id("job");
    let run_ref = crate::ids::new_id("run");
    let mut lineage = caller.lineage.clone();
    lineage.push(caller.run_ref.clone());
    let run = team.store.create_run(&NewRun {
        run_ref: &run_ref,
        session: &team.session,
        job: Some(&job),
        role: &a.role,
        parent: Some(&caller.run_ref),
        depth: admitted.depth,
        lineage: &lineage,
        task_kind: Some(&admitted.task_kind),
        task: Some(&prompt),
        literal: literal_op.as_ref(),
        write_scope: &admitted.write_scope,
        is_writer: admitted.is_writer,
        resource_group: admitted.resource_group.as_deref(),
        units: admitted.resource_units,
    })?;
    team.audit(caller, "agents_spawn", &job, json!({"role": a.role, "agent_run_ref": run_ref, "task_kind": run.task_kind, "write_scope": run.write_scope}))?;
    drop(_lock);
    drop(guard);
    crate::host::start_worker(team.clone(), run.clone());
    team.notify();
    Ok(json!({"job": job, "agent_run_ref": run_ref, "progress_revision": run.progress_revision}))
}

/// One admission decision against the current state: this session's active runs and the
/// role's runs in the profile's other live sessions. The caller holds `team.admit` and the
/// store's admission lock until it has recorded what it admits.
fn decide(
    team: &Team,
    caller: &str,
    request: &crate::admission::SpawnRequest,
) -> MeshResult<crate::admission::Admitted> {
    let elsewhere = crate::session::active_elsewhere(&team.store, &team.profile.id, &team.session)?;
    let active = active_view(&team.store.runs(&team.session)?);
    let policy = crate::admission::Policy {
        elsewhere: &elsewhere,
        ..team.policy()
    };
    crate::admission::admit(&policy, &active, caller, request)
        .map_err(|r| MeshError::new(r.code(), r.to_string()))
}

/// The session's admission-holding runs, each with the roles of its lineage (root first).
fn active_view(runs: &[Run]) -> Vec<crate::admission::ActiveRun> {
    let role_of: std::collections::HashMap<&str, &str> = runs
        .iter()
        .map(|r| (r.run_ref.as_str(), r.role.as_str()))
        .collect();
    runs.iter()
        .filter(|r| r.is_active() && !r.is_native())
        .map(|r| {
            let mut lineage: Vec<String> = r
                .lineage
                .iter()
                .filter_map(|x| role_of.get(x.as_str()).map(|s| s.to_string()))
                .collect();
            lineage.push(r.role.clone());
            crate::admission::ActiveRun {
                run: r.run_ref.clone(),
                role: r.role.clone(),
                parent: r.parent.clone(),
                depth: r.depth,
                lineage,
                is_writer: r.is_writer,
                resource_group: r.resource_group.clone(),
                resource_units: r.units,
                write_scope: r.write_scope.clone(),
            }
        })
        .collect()
}

/// `agents_wait`: returns at the first durable change of a listed job, or at the timeout.
pub async fn wait(team: &Arc<Team>, caller: &Run, a: WaitArgs) -> MeshResult<Value> {
    if a.after_revision.is_empty() {
        return Err(MeshError::new(
            "invalid_arguments",
            "after_revision must name at least one job",
        ));
    }
    let secs = a.timeout_seconds.unwrap_or(60).min(MAX_WAIT_SECONDS);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs as u64);
    let mut rx = team.changed.subscribe();
    loop {
        rx.borrow_and_update();
        let mut jobs = serde_json::Map::new();
        let mut changed = false;
        // A terminal job never changes again: waiting on only such jobs returns at once.
        let mut settled = true;
        for (job, seen) in &a.after_revision {
            let run = team.job(job)?;
            team.may_see(caller, &run)?;
            changed |= run.progress_revision != *seen;
            settled &= run.state.is_terminal();
            let mut entry = json!({"state": run.state, "progress_revision": run.progress_revision});
            if a.preview == Some(true) && run.state.is_terminal() {
                let text = team
                    .store
                    .result(job)?
                    .map(|r| r.text)
                    .or(run.preview.clone())
                    .unwrap_or_default();
                let (p, cut) = truncate_chars(&text, PREVIEW_CHARS);
                entry["preview"] = json!(if cut {
                    format!("{p}…")
                } else {
                    p.to_string()
                });
            }
            jobs.insert(job.clone(), entry);
        }
        if changed || settled {
            return Ok(json!({"jobs": jobs, "timed_out": false}));
        }
        tokio::select! {
            r = rx.changed() => { if r.is_err() { return Ok(json!({"jobs": jobs, "timed_out": false})); } }
            _ = tokio::time::sleep_until(deadline) => return Ok(json!({"jobs": jobs, "timed_out": true})),
        }
    }
}

/// `agent_result`: one page of a job's result; reading marks it read.
pub fn result(team: &Team, caller: &Run, a: ResultArgs) -> MeshResult<Value> {
    let run = team.job(&a.job)?;
    team.may_see(caller, &run)?;
    let Some(stored) = team.store.result(&a.job)? else {
        return Err(MeshError::new(
            "result_not_ready",
            format!(
                "job `{}` is `{}` and has no result yet; wait for it with agents_wait",
                a.job, run.state
            ),
        ));
    };
    let c = &team.profile.coordination;
    let page = crate::result::page(
        &stored.text,
        stored.is_json,
        a.cursor.as_deref(),
        a.max_chars,
        c.default_result_chars,
        c.max_result_chars,
    )
    .map_err(|e| MeshError::new(e.code, e.message))?;
    if stored.disposition == "unread" {
        team.store
            .set_disposition(&a.job, crate::result::Disposition::Read, None)?;
        team.audit(caller, "agent_result_read", &a.job, json!({}))?;
        team.notify();
    }
    let disposition = if stored.disposition == "unread" {
        "read".to_string()
    } else {
        stored.disposition
    };
    let mut out = serde_json::to_value(&page).unwrap_or(Value::Null);
    out["job"] = json!(a.job);
    out["state"] = json!(run.state);
    out["disposition"] = json!(disposition);
    out["final"] = json!(stored.final_);
    Ok(out)
}

/// `agent_result_accept` / `agent_result_reject`.
pub fn dispose(team: &Team, caller: &Run, a: DispositionArgs, accept: bool) -> MeshResult<Value> {
    let run = team.job(&a.job)?;
    team.owns(caller, &run)?;
    if a.reason.trim().is_empty() {
        return Err(MeshError::new("invalid_arguments", "reason must say why"));
    }
    let Some(stored) = team.store.result(&a.job)? else {
        return Err(MeshError::new(
            "result_not_ready",
            format!("job `{}` is `{}` and has no result", a.job, run.state),
        ));
    };
    if accept {
        if run.state != JobState::Completed || !stored.final_ {
            return Err(MeshError::new(
                "result_not_acceptable",
                format!(
                    "job `{}` is `{}`: only a completed job's final result can be accepted (stopped, failed, cancelled and partial evidence never can)",
                    a.job, run.state
                ),
            ));
        }
        if stored.disposition == "unread" {
            return Err(MeshError::new(
                "result_unread",
                format!(
                    "read the result of job `{}` with agent_result before accepting it",
                    a.job
                ),
            ));
        }
    }
    let to = if accept {
        crate::result::Disposition::Accepted
    } else {
        crate::result::Disposition::Rejected
    };
    team.store.set_disposition(&a.job, to, Some(&a.reason))?;
    team.audit(
        caller,
        if accept {
            "agent_result_accept"
        } else {
            "agent_result_reject"
        },
        &a.job,
        json!({"reason": a.reason}),
    )?;
    team.notify();
    Ok(json!({"job": a.job, "disposition": to.as_str()}))
}

/// `agent_patch_integrate`: verifies identity, scope and lease, then applies the accepted patch.
pub fn integrate(team: &Team, caller: &Run, a: JobArgs) -> MeshResult<Value> {
    let run = team.job(&a.job)?;
    team.owns(caller, &run)?;
    let session = team.store.session(&team.session)?;
    if let Some(t) = &session.tainted {
        return Err(MeshError::new(
            "session_tainted",
            format!(
                "the session is tainted ({t}); no patch is integrated into the canonical checkout"
            ),
        ));
    }
    let disposition = team
        .store
        .result(&a.job)?
        .map(|r| r.disposition)
        .unwrap_or_default();
    if disposition != "accepted" {
        return Err(MeshError::new(
            "patch_not_accepted",
            format!(
                "job `{}`'s result is `{disposition}`; accept it before integrating its patch",
                a.job
            ),
        ));
    }
    let Some(patch) = team.store.patch(&a.job)? else {
        return Err(MeshError::new(
            "no_patch",
            format!(
                "job `{}` recorded no patch (it changed nothing, or is not a writer)",
                a.job
            ),
        ));
    };
    if patch.state != "recorded" {
        return Err(MeshError::new(
            "patch_state",
            format!("the patch of job `{}` is `{}`", a.job, patch.state),
        ));
    }
    let integrated = crate::worktree::integrate(
        &team.workspace,
        &crate::host::patch_from_store(&patch),
        &patch.sha256,
        &run.write_scope,
    )
    .map_err(|e| MeshError::new(e.code(), e.to_string()))?;
    team.store.set_patch_state(&a.job, "integrated")?;
    team.audit(
        caller,
        "agent_patch_integrate",
        &a.job,
        json!({"sha256": patch.sha256, "files": patch.files}),
    )?;
    team.notify();
    Ok(
        json!({"job": a.job, "integrated": true, "sha256": patch.sha256, "files": integrated.files, "commit": integrated.commit, "parent": integrated.parent}),
    )
}

/// `agent_inspect`
pub fn inspect(team: &Team, caller: &Run, a: RunArgs) -> MeshResult<Value> {
    let run = team.run(&a.agent_run_ref)?;
    team.may_control(caller, &run, "inspect")?;
    let v = team.view(&run);
    Ok(v)
}

/// `agent_trace`: a page of a run's events, private reasoning never included.
pub fn trace(team: &Team, caller: &Run, a: TraceArgs) -> MeshResult<Value> {
    let run = team.run(&a.agent_run_ref)?;
    team.may_control(caller, &run, "trace")?;
    trace_page(team, &run, a)
}

/// A page of `run`'s trace, for a caller already allowed to read it.
fn trace_page(team: &Team, run: &Run, a: TraceArgs) -> MeshResult<Value> {
    let after = match a.cursor.as_deref() {
        None => 0,
        Some(c) => c
            .strip_prefix("t")
            .and_then(|n| n.parse::<i64>().ok())
            .ok_or_else(|| {
                MeshError::new("invalid_cursor", format!("`{c}` is not a trace cursor"))
            })?,
    };
    let events = team
        .store
        .events(&run.run_ref, after, TRACE_PAGE + 1, a.filter.as_deref())?;
    let more = events.len() > TRACE_PAGE;
    let mut records = Vec::new();
    for e in events.iter().take(TRACE_PAGE) {
        let (inline, cut) = truncate_chars(&e.body, TRACE_INLINE_CHARS);
        let mut r = json!({"seq": e.seq, "at": e.at, "kind": e.kind});
        if cut {
            r["text"] = json!(inline);
            r["truncated"] = json!(true);
            r["record_cursor"] = json!(format!("r{}", e.seq));
        } else {
            r["record"] = serde_json::from_str(&e.body).unwrap_or(json!(e.body));
        }
        records.push(r);
    }
    let next = if more {
        records
            .last()
            .and_then(|r| r["seq"].as_i64())
            .map(|s| format!("t{s}"))
    } else {
        None
    };
    Ok(
        json!({"agent_run_ref": run.run_ref, "state": run.state, "records": records, "next_cursor": next}),
    )
}

/// `agent_trace_record`: the whole text of one record in checksummed pages.
pub fn trace_record(team: &Team, caller: &Run, a: TraceRecordArgs) -> MeshResult<Value> {
    let bad = || {
        MeshError::new(
            "invalid_cursor",
            format!("`{}` is not a record cursor", a.record_cursor),
        )
    };
    let seq = a
        .record_cursor
        .strip_prefix("r")
        .and_then(|n| n.parse::<i64>().ok())
        .ok_or_else(bad)?;
    let event = team.store.event_at(seq)?.ok_or_else(bad)?;
    let run = team.run(&event.run).map_err(|_| bad())?;
    team.may_control(caller, &run, "trace")?;
    let chars: Vec<char> = event.body.chars().collect();
    let pages = chars.len().div_ceil(RECORD_PAGE_CHARS).max(1);
    let page = a.page.unwrap_or(0) as usize;
    if page >= pages {
        return Err(MeshError::new(
            "invalid_page",
            format!(
                "record `{}` has {pages} page(s); page {page} does not exist",
                a.record_cursor
            ),
        ));
    }
    let text: String = chars
        [page * RECORD_PAGE_CHARS..((page + 1) * RECORD_PAGE_CHARS).min(chars.len())]
        .iter()
        .collect();
    Ok(json!({
        "record_cursor": a.record_cursor,
        "page": page,
        "pages": pages,
        "text": text,
        "page_sha256": crate::ids::hex(&Sha256::digest(text.as_bytes())),
        "record_sha256": crate::ids::hex(&Sha256::digest(event.body.as_bytes())),
        "total_chars": chars.len(),
    }))
}

/// `agent_control` with `inspect` or `stop`.
pub async fn control(
    team: &Arc<Team>,
    caller: &Run,
    operator: bool,
    a: ControlArgs,
) -> MeshResult<Value> {
    let run = team.run(&a.agent_run_ref)?;
    // The control graph decides a job; the root is its operator's (a person's authority, as
    // `codex-mmo stop` is): no agent, the root's own host included, controls the root.
    if run.parent.is_none() {
        if !operator {
            return Err(MeshError::new(
                "control_denied",
                format!(
                    "agent run `{}` is the root: only its operator controls it (codex-mmo control)",
                    run.run_ref
                ),
            ));
        }
    } else {
        team.may_control(caller, &run, a.action.as_str())?;
    }
    match a.action {
        ControlAction::Inspect => Ok(team.view(&run)),
        ControlAction::Trace => trace_page(
            team,
            &run,
            TraceArgs {
                agent_run_ref: a.agent_run_ref,
                cursor: a.cursor,
                filter: a.filter,
            },
        ),
        ControlAction::Steer => {
            let text = message(a.message, "steer")?.ok_or_else(|| {
                MeshError::new("invalid_arguments", "steer needs a non-empty `message`")
            })?;
            let target = run.run_ref.clone();
            mutate(
                team,
                caller,
                &run,
                a.control_revision,
                "steer",
                || async move {
                    ask_host(team, &target, |reply| crate::team::Control::Steer {
                        text,
                        reply,
                    })
                    .await
                },
            )
            .await
        }
        ControlAction::Interrupt => {
            not_native(&run, "interrupt")?;
            let target = run.run_ref.clone();
            mutate(team, caller, &run, a.control_revision, "interrupt", || async move {
                let mut changed = team.changed.subscribe();
                let asked =
                    ask_host(team, &target, |reply| crate::team::Control::Interrupt { reply })
                        .await;
                if !matches!(asked, Delivery::Delivered(_)) {
                    return asked;
                }
                // Delivered: the turn ends `interrupted` and the worker pauses (bounded wait).
                let deadline = tokio::time::Instant::now() + control_timeout();
                loop {
                    match team.store.run(&target).map(|r| r.state) {
                        Ok(s) if s != JobState::Running => return Delivery::Delivered(json!({"state": s})),
                        Err(e) => return Delivery::Unknown(e.to_string()),
                        Ok(_) => {}
                    }
                    tokio::select! {
                        _ = changed.changed() => {}
                        _ = tokio::time::sleep_until(deadline) => {
                            return Delivery::Unknown("the interrupted turn did not end in time".into());
                        }
                    }
                }
            })
            .await
        }
        ControlAction::Pause if run.is_native() => {
            // Logical: the thread shares its spawner's host, which goes on. The run is paused
            // first, so the end of the turn the pause interrupts does not end it.
            let target = run.run_ref.clone();
            let (thread, host) = native_thread_and_host(team, &run)?;
            mutate(
                team,
                caller,
                &run,
                a.control_revision,
                "pause",
                || async move {
                    if let Err(e) =
                        team.store
                            .transition(&target, JobState::Paused, Some(NATIVE_PAUSED))
                    {
                        return Delivery::Failed(e.to_string());
                    }
                    ask_host(team, &host, |reply| crate::team::Control::InterruptThread {
                        thread,
                        reply,
                    })
                    .await
                },
            )
            .await
        }
        ControlAction::Continue if run.is_native() => {
            let text =
                message(a.message, "continue")?.unwrap_or_else(|| CONTINUE_MESSAGE.to_string());
            let target = run.run_ref.clone();
            let (thread, host) = native_thread_and_host(team, &run)?;
            mutate(
                team,
                caller,
                &run,
                a.control_revision,
                "continue",
                || async move {
                    if let Err(e) = team.store.transition(
                        &target,
                        JobState::Running,
                        Some("continued by its controller"),
                    ) {
                        return Delivery::Failed(e.to_string());
                    }
                    let started = ask_host(team, &host, |reply| crate::team::Control::StartTurn {
                        thread,
                        text,
                        reply,
                    })
                    .await;
                    if let Delivery::Failed(_) = &started {
                        // Nothing reached the thread: the run is paused as it was.
                        let _ =
                            team.store
                                .transition(&target, JobState::Paused, Some(NATIVE_PAUSED));
                    }
                    started
                },
            )
            .await
        }
        ControlAction::Pause => {
            not_native(&run, "pause")?;
            let target = run.run_ref.clone();
            mutate(
                team,
                caller,
                &run,
                a.control_revision,
                "pause",
                || async move {
                    match team.store.run(&target).map(|r| r.state) {
                        Ok(JobState::Running) => {}
                        Ok(s) => {
                            return Delivery::Failed(format!(
                                "only a running job can be paused; it is `{s}`"
                            ));
                        }
                        Err(e) => return Delivery::Failed(e.to_string()),
                    }
                    crate::host::stop_run(
                        team,
                        &target,
                        JobState::Paused,
                        "paused by its controller",
                    )
                    .await;
                    match team.store.run(&target).map(|r| r.state) {
                        Ok(JobState::Paused) => Delivery::Delivered(Value::Null),
                        Ok(s) => {
                            Delivery::Failed(format!("the job ended `{s}` before it could pause"))
                        }
                        Err(e) => Delivery::Unknown(e.to_string()),
                    }
                },
            )
            .await
        }
        ControlAction::Continue
            if run.state == JobState::Running && crate::team::is_detached(&team.store, &run) =>
        {
            // Reattaching a detached job keeps its host and its admission.
            let target = run.run_ref.clone();
            mutate(
                team,
                caller,
                &run,
                a.control_revision,
                "continue",
                || async move {
                    match team.store.event(&team.session, &target, "reattached", "{}") {
                        Ok(_) => Delivery::Delivered(json!({"reattached": true})),
                        Err(e) => Delivery::Unknown(e.to_string()),
                    }
                },
            )
            .await
        }
        ControlAction::Continue => {
            let role = team.role(&run.role)?;
            let message = message(a.message, "continue")?;
            if role.execution_mode == "goal" && message.is_some() {
                return Err(MeshError::new(
                    "invalid_arguments",
                    "a goal-mode run continues its goal and takes no `message`; steer it once it runs",
                ));
            }
            let budget = match a.goal_token_budget {
                Some(total) => Some(extended_goal_budget(team, &run, total)?),
                None => None,
            };
            let root = run.parent.is_none();
            if root && team.store.session(&team.session)?.task.is_none() {
                return Err(MeshError::new(
                    "control_unsupported",
                    "an operator-driven root has no host or thread to continue",
                ));
            }
            let message = message.unwrap_or_else(|| {
                if root {
                    crate::host::CONTINUE_ROOT_MESSAGE
                } else {
                    CONTINUE_MESSAGE
                }
                .to_string()
            });
            let target = run.run_ref.clone();
            mutate(
                team,
                caller,
                &run,
                a.control_revision,
                "continue",
                || async move { resume(team, &target, message, budget).await },
            )
            .await
        }
        ControlAction::Finalize => {
            not_native(&run, "finalize")?;
            let grace_seconds = team.role(&run.role)?.finalization_grace_seconds;
            let target = run.run_ref.clone();
            mutate(team, caller, &run, a.control_revision, "finalize", || async move {
                let (state, revision) = match team.store.run(&target) {
                    Ok(r) => (r.state, r.control_revision),
                    Err(e) => return Delivery::Failed(e.to_string()),
                };
                let asked = if state == JobState::Running {
                    ask_host(team, &target, |reply| crate::team::Control::Steer {
                        text: FINALIZE_MESSAGE.to_string(),
                        reply,
                    })
                    .await
                } else {
                    resume(team, &target, FINALIZE_MESSAGE.into(), None).await
                };
                if !matches!(asked, Delivery::Delivered(_)) {
                    return asked;
                }
                // The grace is the host's boundary: past it the job is stopped with its
                // partial evidence (the model is never told about the clock).
                let grace = Duration::from_millis(
                    (i64::from(grace_seconds) * crate::stall::second_ms()) as u64,
                );
                let (team2, target2) = (team.clone(), target.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(grace).await;
                    // Only this finalization's: a later control (a pause, a continue) of the
                    // job takes the boundary away.
                    if team2
                        .store
                        .run(&target2)
                        .is_ok_and(|r| r.is_active() && r.control_revision == revision)
                    {
                        crate::host::stop_run(
                            &team2,
                            &target2,
                            JobState::Stopped,
                            &format!("finalization_grace_seconds ({grace_seconds}) passed before its final result"),
                        )
                        .await;
                    }
                });
                Delivery::Delivered(json!({"finalization_grace_seconds": grace_seconds}))
            })
            .await
        }
        ControlAction::SetEffort => {
            let effort = a.effort.ok_or_else(|| {
                MeshError::new("invalid_arguments", "set_effort needs an `effort`")
            })?;
            let role = team.role(&run.role)?;
            if !role.allowed_reasoning_efforts.contains(&effort) {
                return Err(MeshError::new(
                    "effort_not_allowed",
                    format!(
                        "role `{}` allows the reasoning efforts {:?}, not `{effort}`",
                        run.role, role.allowed_reasoning_efforts
                    ),
                ));
            }
            let supported = team.model_efforts(&role.model);
            if !supported.is_empty() && !supported.contains(&effort) {
                return Err(MeshError::new(
                    "effort_not_supported",
                    format!(
                        "model `{}` supports the reasoning efforts {supported:?}, not `{effort}`",
                        role.model
                    ),
                ));
            }
            // Recorded, and taken by the job's next turn (a turn's effort is fixed once it
            // has started).
            let recorded = effort.clone();
            mutate(
                team,
                caller,
                &run,
                a.control_revision,
                "set_effort",
                || async move {
                    Delivery::Delivered(
                        json!({"effort": recorded, "applies": "from the job's next turn"}),
                    )
                },
            )
            .await
        }
        ControlAction::Respond => {
            let (Some(request_id), Some(result)) = (a.request_id, a.response) else {
                return Err(MeshError::new(
                    "invalid_arguments",
                    "respond needs a `request_id` (from pending_inputs) and a `response` object",
                ));
            };
            if !result.is_object() || result.to_string().len() > MAX_RESPONSE_BYTES {
                return Err(MeshError::new(
                    "invalid_arguments",
                    format!("a response is a JSON object of at most {MAX_RESPONSE_BYTES} bytes"),
                ));
            }
            let target = run.run_ref.clone();
            let session = team.session.clone();
            mutate(
                team,
                caller,
                &run,
                a.control_revision,
                "respond",
                || async move {
                    let answered = ask_host(team, &target, |reply| crate::team::Control::Respond {
                        request_id: request_id.clone(),
                        result: result.clone(),
                        reply,
                    })
                    .await;
                    if matches!(answered, Delivery::Delivered(_)) {
                        let _ = team.store.event(
                            &session,
                            &target,
                            "serverResponse",
                            &json!({"request_id": request_id, "response": result}).to_string(),
                        );
                    }
                    answered
                },
            )
            .await
        }
        ControlAction::Detach => {
            not_native(&run, "detach")?;
            let target = run.run_ref.clone();
            let job = run.job.clone();
            mutate(
                team,
                caller,
                &run,
                a.control_revision,
                "detach",
                || async move {
                    match team.store.run(&target) {
                        Ok(r)
                            if r.state == JobState::Running
                                && !crate::team::is_detached(&team.store, &r) => {}
                        Ok(r) if r.state == JobState::Running => {
                            return Delivery::Failed("the run is already detached".into());
                        }
                        Ok(r) => {
                            return Delivery::Failed(format!(
                                "only a running run can be detached; it is `{}`",
                                r.state
                            ));
                        }
                        Err(e) => return Delivery::Failed(e.to_string()),
                    }
                    // Its evidence so far, as partial: what a leaving controller has in hand.
                    if let Some(job) = &job
                        && team.store.result(job).ok().flatten().is_none()
                    {
                        let text = team.store.last_agent_message(&target);
                        crate::host::keep_partial(team, job, text.as_deref());
                    }
                    match team.store.event(&team.session, &target, "detached", "{}") {
                        Ok(_) => Delivery::Delivered(json!({"detached": true})),
                        Err(e) => Delivery::Unknown(e.to_string()),
                    }
                },
            )
            .await
        }
        ControlAction::Compact => {
            not_native(&run, "compact")?;
            let target = run.run_ref.clone();
            mutate(team, caller, &run, a.control_revision, "compact", || async move {
                let run = match team.store.run(&target) {
                    Ok(r) if matches!(r.state, JobState::Paused | JobState::Suspended) => r,
                    Ok(r) => {
                        return Delivery::Failed(format!(
                            "compact works on a paused or suspended job's durable thread; it is `{}` (pause it first)",
                            r.state
                        ));
                    }
                    Err(e) => return Delivery::Failed(e.to_string()),
                };
                match crate::host::compact_thread(team, &run, control_timeout()).await {
                    Ok(v) => Delivery::Delivered(v),
                    Err(e) => Delivery::Failed(e),
                }
            })
            .await
        }
        ControlAction::Fork => fork(team, caller, &run, a.message).await,
        ControlAction::Stop => {
            let target = run.run_ref.clone();
            mutate(
                team,
                caller,
                &run,
                a.control_revision,
                "stop",
                || async move {
                    crate::host::stop_run(
                        team,
                        &target,
                        JobState::Stopped,
                        "stopped by its controller",
                    )
                    .await;
                    Delivery::Delivered(Value::Null)
                },
            )
            .await
        }
    }
}

/// What a fork is told when its controller says nothing more.
const FORK_MESSAGE: &str = "You are a fork of an earlier run of this task: continue it from where this history ends. Your final message is your result, as the task said.";

/// `fork`: a new job of the target's role, under the target's parent (its result lifecycle
/// stays with the lineage, not with the controller), on a fork of the target's persisted
/// thread in its home, after admission like any spawn. The target does not change,
/// so no revision is needed; forks of one target are serialized by its control lock.
async fn fork(
    team: &Arc<Team>,
    caller: &Run,
    run: &Run,
    message_text: Option<String>,
) -> MeshResult<Value> {
    jobs_only(run, "fork")?;
    let unsupported = |why: &str| {
        Err(MeshError::new(
            "control_unsupported",
            format!("agent run `{}` cannot be forked: {why}", run.run_ref),
        ))
    };
    if run.literal.is_some() {
        return unsupported("a low-trust literal job is spawned again, not forked");
    }
    let message = message(message_text, "fork")?.unwrap_or_else(|| FORK_MESSAGE.to_string());
    let lock = team.control_lock(&run.run_ref);
    let _serial = lock.lock().await;
    let source = team.run(&run.run_ref)?;
    if matches!(source.state, JobState::Queued | JobState::Running) {
        return Err(MeshError::new(
            "control_failed",
            format!(
                "fork forks a persisted thread: agent run `{}` is `{}`; pause it first",
                source.run_ref, source.state
            ),
        ));
    }
    if source.thread_id.is_none() || source.home.is_none() {
        return unsupported("it never had a thread");
    }
    // A writer's fork starts from its kept worktree, which only a paused or suspended writer
    // has (an ended one's worktree is gone, its work in its patch).
    if source.is_writer && !matches!(source.state, JobState::Paused | JobState::Suspended) {
        return unsupported(
            "it is a writer that ended, and its worktree is gone; a writer is forked while it is paused or suspended",
        );
    }
    let parent = source
        .parent
        .clone()
        .ok_or_else(|| MeshError::new("control_unsupported", "the root is not forked"))?;
    let guard = team.admit.lock().await;
    let _admission = team.store.admission_lock()?;
    let request = crate::admission::SpawnRequest {
        role: source.role.clone(),
        task: source.task.clone(),
        task_kind: source.task_kind.clone(),
        write_scope: source.is_writer.then(|| source.write_scope.clone()),
        literal_task: None,
    };
    let admitted = decide(team, &parent, &request)?;
    let job = crate::ids::new_id("job");
    let run_ref = crate::ids::new_id("run");
    let forked = team.store.create_run(&NewRun {
        run_ref: &run_ref,
        session: &team.session,
        job: Some(&job),
        role: &source.role,
        parent: Some(&parent),
        depth: source.depth,
        lineage: &source.lineage,
        task_kind: Some(&admitted.task_kind),
        task: source.task.as_deref(),
        literal: None,
        write_scope: &admitted.write_scope,
        is_writer: admitted.is_writer,
        resource_group: admitted.resource_group.as_deref(),
        units: admitted.resource_units,
    })?;
    team.audit(
        caller,
        "agent_control.fork",
        &source.run_ref,
        json!({"job": job, "agent_run_ref": run_ref, "thread": source.thread_id}),
    )?;
    team.store.event(
        &team.session,
        &source.run_ref,
        "forked",
        &json!({"agent_run_ref": run_ref, "job": job}).to_string(),
    )?;
    drop(_admission);
    drop(guard);
    crate::host::fork_worker(team.clone(), forked.clone(), source.clone(), message);
    team.notify();
    let mut view = team.view(&forked);
    view["forked_from"] = json!({"agent_run_ref": source.run_ref, "thread_id": source.thread_id});
    Ok(view)
}

/// A control's `message`: `None` when absent or blank, refused when longer than
/// `MAX_STEER_CHARS`.
fn message(m: Option<String>, action: &str) -> MeshResult<Option<String>> {
    let m = m.filter(|m| !m.trim().is_empty());
    if m.as_ref()
        .is_some_and(|m| m.chars().count() > MAX_STEER_CHARS)
    {
        return Err(MeshError::new(
            "invalid_arguments",
            format!("a {action} message is at most {MAX_STEER_CHARS} characters"),
        ));
    }
    Ok(m)
}

/// Why a native run is paused (logically: its thread lives in its spawner's host, which goes on).
const NATIVE_PAUSED: &str =
    "paused logically by its controller: its thread shares its spawner's host";

/// A native run's thread, and the ref of the run whose host it lives in (its nearest ancestor
/// with a live host).
fn native_thread_and_host(team: &Team, run: &Run) -> MeshResult<(String, String)> {
    let thread = run
        .thread_id
        .clone()
        .ok_or_else(|| MeshError::new("control_failed", "the native run has no thread recorded"))?;
    let hosts = team.hosts.lock().unwrap_or_else(|p| p.into_inner());
    let host = run
        .lineage
        .iter()
        .rev()
        .find(|r| hosts.contains_key(*r))
        .cloned()
        .ok_or_else(|| {
            MeshError::new(
                "control_failed",
                format!(
                    "the host agent run `{}` lives in has ended",
                    run.parent.as_deref().unwrap_or("?")
                ),
            )
        })?;
    Ok((thread, host))
}

/// Refuses an action on a native run that only a hosted run has (a native thread runs inside
/// its spawner's host, under that host's model, with no host of its own to retire or resume).
fn not_native(run: &Run, action: &str) -> MeshResult<()> {
    if !run.is_native() {
        return Ok(());
    }
    Err(MeshError::new(
        "control_unsupported",
        format!(
            "{action} is not served for native runs: agent run `{}` is a thread inside its spawner's host, observed, not hosted",
            run.run_ref
        ),
    ))
}

/// Refuses an action served only for Agent-MCP jobs when the target is the root or a native run.
fn jobs_only(run: &Run, action: &str) -> MeshResult<()> {
    if run.job.is_some() {
        return Ok(());
    }
    Err(MeshError::new(
        "control_unsupported",
        format!(
            "{action} is served for Agent-MCP jobs; agent run `{}` is a {} run",
            run.run_ref,
            run.backend()
        ),
    ))
}

/// Hands a control to the target's live host and waits (bounded) for its answer: no live host
/// or a refused control is `Failed`; a host that took it and never answered is `Unknown`.
async fn ask_host(
    team: &Arc<Team>,
    target: &str,
    make: impl FnOnce(tokio::sync::oneshot::Sender<Result<Value, String>>) -> crate::team::Control,
) -> Delivery {
    let sender = team
        .hosts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(target)
        .map(|h| h.control.clone());
    let Some(sender) = sender else {
        return Delivery::Failed("the run has no live host".into());
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    if sender.send(make(reply)).is_err() {
        return Delivery::Failed("the run's host has ended".into());
    }
    match tokio::time::timeout(control_timeout(), answer).await {
        Ok(Ok(Ok(v))) => Delivery::Delivered(v),
        Ok(Ok(Err(e))) => Delivery::Failed(e),
        Ok(Err(_)) => Delivery::Unknown("the host ended before it answered".into()),
        Err(_) => Delivery::Unknown(format!(
            "the host did not answer within {} ms",
            control_timeout().as_millis()
        )),
    }
}

/// What a job is told when its controller finalizes it.
const FINALIZE_MESSAGE: &str =
    "Finish now: give your final result from the evidence you already have, and start no new work.";

/// What a continued job is told when its controller says nothing more.
const CONTINUE_MESSAGE: &str = "Continue your task from where you left off. Your final message is your result, as the task said.";

/// Continues a paused or suspended run (a job, or the root) with `message` once it is admitted
/// again; a goal-mode run's goal with `budget` as its new total, when the controller extended it.
async fn resume(team: &Arc<Team>, target: &str, message: String, budget: Option<u64>) -> Delivery {
    let root = team.root_ref == target;
    let admitted = if root {
        readmit_root(team, target)
    } else {
        readmit(team, target).await
    };
    let run = match admitted {
        Ok(run) => run,
        Err(why) => return Delivery::Failed(why),
    };
    if let Some(total) = budget
        && let Err(e) = record_goal_budget(team, target, total)
    {
        return Delivery::Unknown(format!("recording the goal budget: {e}"));
    }
    match (root, team.store.session(&team.session).map(|s| s.task)) {
        (false, _) => crate::host::continue_worker(team.clone(), run, message),
        (true, Ok(Some(task))) => crate::host::continue_root(team.clone(), run, task, message),
        (true, _) => return Delivery::Failed("the root has no task to continue".into()),
    }
    Delivery::Delivered(json!({"goal_token_budget": budget}))
}

/// Records a goal's new total budget (`host::goal_budget` reads it from there).
fn record_goal_budget(team: &Team, run_ref: &str, total: u64) -> MeshResult<()> {
    team.store.event(
        &team.session,
        run_ref,
        "goalBudget",
        &json!({"token_budget": total}).to_string(),
    )?;
    Ok(())
}

/// Admission again for a paused or suspended root about to continue: its role's `max_active`
/// across the profile's sessions, under the store's admission lock.
fn readmit_root(team: &Team, run_ref: &str) -> Result<Run, String> {
    let _lock = team.store.admission_lock().map_err(|e| e.to_string())?;
    let run = team.store.run(run_ref).map_err(|e| e.to_string())?;
    if !matches!(run.state, JobState::Paused | JobState::Suspended) {
        return Err(format!(
            "only a paused or suspended root can continue; it is `{}`",
            run.state
        ));
    }
    crate::session::admit_root(&team.store, &team.profile, &team.session)?;
    Ok(run)
}

/// A controller's new total for a goal-mode run's token budget: larger than the budget it has,
/// at most its role's max_goal_token_budget.
fn extended_goal_budget(team: &Team, run: &Run, total: u64) -> MeshResult<u64> {
    let role = team.role(&run.role)?;
    if role.execution_mode != "goal" {
        return Err(MeshError::new(
            "invalid_arguments",
            format!(
                "goal_token_budget is for goal-mode runs; role `{}` runs in `{}` mode",
                run.role, role.execution_mode
            ),
        ));
    }
    let ceiling = role
        .max_goal_token_budget
        .or(role.goal_token_budget)
        .unwrap_or(0);
    if total > ceiling {
        return Err(MeshError::new(
            "goal_budget_ceiling",
            format!(
                "goal_token_budget {total} is above role `{}`'s max_goal_token_budget ({ceiling})",
                run.role
            ),
        ));
    }
    let current = crate::host::goal_budget(team, run).unwrap_or(0);
    if total as i64 <= current {
        return Err(MeshError::new(
            "invalid_arguments",
            format!(
                "goal_token_budget {total} does not extend the goal's current budget ({current})"
            ),
        ));
    }
    Ok(total)
}

/// Admission again for a paused or suspended job about to continue (the spec: continuation
/// performs current admission before restoring the same thread), decided under the same locks
/// as a spawn and with its parent as the caller; on success the job is `running` again.
async fn readmit(team: &Arc<Team>, run_ref: &str) -> Result<Run, String> {
    let _guard = team.admit.lock().await;
    let _lock = team.store.admission_lock().map_err(|e| e.to_string())?;
    let run = team.store.run(run_ref).map_err(|e| e.to_string())?;
    if !matches!(run.state, JobState::Paused | JobState::Suspended) {
        return Err(format!(
            "only a paused or suspended job can continue; it is `{}`",
            run.state
        ));
    }
    if run.literal.is_some() {
        return Err("a low-trust literal job cannot be continued; spawn its task again".into());
    }
    let parent = run
        .parent
        .clone()
        .ok_or("the job has no parent to be admitted under")?;
    let request = crate::admission::SpawnRequest {
        role: run.role.clone(),
        task: run.task.clone(),
        task_kind: run.task_kind.clone(),
        write_scope: run.is_writer.then(|| run.write_scope.clone()),
        literal_task: None,
    };
    decide(team, &parent, &request).map_err(|e| e.to_string())?;
    team.store
        .transition(
            run_ref,
            JobState::Running,
            Some("continued by its controller"),
        )
        .map_err(|e| e.to_string())
}

/// A mutating control: serialized per target from the revision check through delivery, the
/// revision compare-and-swapped before delivery (a stale one fails before anything is sent),
/// and the delivery's end recorded durably (`delivered`, `failed`, `delivery_unknown`).
async fn mutate<F, Fut>(
    team: &Arc<Team>,
    caller: &Run,
    run: &Run,
    revision: Option<i64>,
    action: &str,
    deliver: F,
) -> MeshResult<Value>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Delivery>,
{
    let lock = team.control_lock(&run.run_ref);
    let _serial = lock.lock().await;
    let Some(rev) = revision else {
        return Err(MeshError::new(
            "control_revision_required",
            format!("{action} needs the control_revision from your last inspection"),
        ));
    };
    let now = team.run(&run.run_ref)?;
    if now.state.is_terminal() {
        return Err(MeshError::new(
            "already_terminal",
            format!("agent run `{}` is already `{}`", now.run_ref, now.state),
        ));
    }
    if !team.store.bump_control(&run.run_ref, rev)? {
        let current = team.run(&run.run_ref)?.control_revision;
        return Err(MeshError::new(
            "stale_control_revision",
            format!(
                "control_revision {rev} is stale (current: {current}); inspect again before you {action}"
            ),
        ));
    }
    let seq = team.store.control_begin(
        &team.session,
        &run.run_ref,
        rev + 1,
        action,
        &caller.run_ref,
    )?;
    team.audit(
        caller,
        &format!("agent_control.{action}"),
        &run.run_ref,
        json!({"control_revision": rev}),
    )?;
    let outcome = deliver().await;
    let (status, detail, answer) = match outcome {
        // A set_effort's detail is the effort itself: the next turn reads it from there.
        Delivery::Delivered(v) if action == "set_effort" => (
            "delivered",
            v.get("effort").and_then(Value::as_str).map(str::to_string),
            Some(v),
        ),
        Delivery::Delivered(v) => ("delivered", None, Some(v)),
        Delivery::Failed(why) => ("failed", Some(why), None),
        Delivery::Unknown(why) => ("delivery_unknown", Some(why), None),
    };
    team.store.control_end(seq, status, detail.as_deref())?;
    team.notify();
    match status {
        "failed" => Err(MeshError::new(
            "control_failed",
            format!("{action} was not delivered: {}", detail.unwrap_or_default()),
        )),
        "delivery_unknown" => Err(MeshError::new(
            "delivery_unknown",
            format!(
                "{action} began but its delivery is unknown ({}); inspect the run before retrying",
                detail.unwrap_or_default()
            ),
        )),
        _ => {
            let mut view = team.view(&team.run(&run.run_ref)?);
            view["delivery"] = json!({"status": status, "answer": answer});
            Ok(view)
        }
    }
}
