//! The Agent-MCP operations: spawn, wait, results and their lifecycle, patches, traces,
//! inspection (here) and control (`control`, `continuation`, `delivery`). Arguments are typed
//! in `args` (input schema and strict decoding from one type); `mesh` only serves them as MCP
//! tools.

mod args;
mod continuation;
mod control;
mod delivery;

pub use args::*;
pub use control::control;

use crate::result::JobState;
use crate::store::{NewRun, Run};
use crate::team::{MeshError, MeshResult, Team};
use mmo_profile::model::LiteralTask;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

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
