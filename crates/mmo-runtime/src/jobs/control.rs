//! `agent_control`: who may control a run (the control graph; only the operator controls the
//! root), then one function per action. Continuation and forks, which admit a run again, are
//! in `continuation`; delivery to a host and its durable record in `delivery`.

use super::args::{ControlArgs, Respond, SetEffort, Steer, Target};
use super::continuation::{continue_run, fork, resume};
use super::delivery::{Change, Delivery, ask_host, control_timeout};
use crate::result::JobState;
use crate::store::Run;
use crate::team::{Control, MeshError, MeshResult, Team};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Largest `respond` answer.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Longest control message (`steer`, `continue`, `fork`).
const MAX_MESSAGE_CHARS: usize = 16_000;

/// Why a native run is paused (logically: its thread lives in its spawner's host, which goes on).
pub(super) const NATIVE_PAUSED: &str =
    "paused logically by its controller: its thread shares its spawner's host";

/// What a job is told when its controller finalizes it.
const FINALIZE_MESSAGE: &str =
    "Finish now: give your final result from the evidence you already have, and start no new work.";

/// `agent_control`: the caller's authority over the run, then the action. `operator` says the
/// caller is the operator acting as the root (only the operator controls the root itself).
pub async fn control(
    team: &Arc<Team>,
    caller: &Run,
    operator: bool,
    a: ControlArgs,
) -> MeshResult<Value> {
    let run = authorized(team, caller, operator, &a)?;
    match a {
        ControlArgs::Inspect(_) => Ok(team.view(&run)),
        ControlArgs::Trace(t) => super::trace_page(team, &run, t.into()),
        ControlArgs::Steer(s) => steer(team, caller, &run, s).await,
        ControlArgs::Interrupt(t) => interrupt(team, caller, &run, t).await,
        ControlArgs::Pause(t) if run.is_native() => pause_native(team, caller, &run, t).await,
        ControlArgs::Pause(t) => pause(team, caller, &run, t).await,
        ControlArgs::Continue(c) => continue_run(team, caller, &run, c).await,
        ControlArgs::Finalize(t) => finalize(team, caller, &run, t).await,
        ControlArgs::SetEffort(e) => set_effort(team, caller, &run, e).await,
        ControlArgs::Respond(r) => respond(team, caller, &run, r).await,
        ControlArgs::Detach(t) => detach(team, caller, &run, t).await,
        ControlArgs::Compact(t) => compact(team, caller, &run, t).await,
        ControlArgs::Fork(f) => fork(team, caller, &run, f.message).await,
        ControlArgs::Stop(t) => stop(team, caller, &run, t).await,
    }
}

/// The target run, when the caller may take the action on it: the control graph decides a job;
/// the root is its operator's (a person's authority, as `codex-mmo stop` is), so no agent, the
/// root's own host included, controls the root.
fn authorized(team: &Team, caller: &Run, operator: bool, a: &ControlArgs) -> MeshResult<Run> {
    let run = team.run(a.agent_run_ref())?;
    if run.parent.is_some() {
        team.may_control(caller, &run, a.action())?;
    } else if !operator {
        return Err(MeshError::new(
            "control_denied",
            format!(
                "agent run `{}` is the root: only its operator controls it (codex-mmo control)",
                run.run_ref
            ),
        ));
    }
    Ok(run)
}

/// `steer`: more input for the run's active turn.
async fn steer(team: &Arc<Team>, caller: &Run, run: &Run, a: Steer) -> MeshResult<Value> {
    let text = message(Some(a.message), "steer")?
        .ok_or_else(|| MeshError::new("invalid_arguments", "steer needs a non-empty `message`"))?;
    let target = run.run_ref.clone();
    Change::new(team, caller, run, a.control_revision)
        .deliver("steer", || async move {
            ask_host(team, &target, |reply| Control::Steer { text, reply }).await
        })
        .await
}

/// `interrupt`: the active turn ends `interrupted` through the app-server and the job pauses
/// on its thread (a bounded wait for the pause).
async fn interrupt(team: &Arc<Team>, caller: &Run, run: &Run, a: Target) -> MeshResult<Value> {
    not_native(run, "interrupt")?;
    let target = run.run_ref.clone();
    Change::new(team, caller, run, a.control_revision)
        .deliver("interrupt", || async move {
            let mut changed = team.changed.subscribe();
            let asked = ask_host(team, &target, |reply| Control::Interrupt { reply }).await;
            if !matches!(asked, Delivery::Delivered(_)) {
                return asked;
            }
            let deadline = tokio::time::Instant::now() + control_timeout();
            loop {
                match team.store.run(&target).map(|r| r.state) {
                    Ok(s) if s != JobState::Running => {
                        return Delivery::Delivered(json!({"state": s}));
                    }
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

/// `pause` of a native run: logical, as its thread shares its spawner's host, which goes on. The
/// run is paused first, so the end of the turn the pause interrupts does not end it.
async fn pause_native(team: &Arc<Team>, caller: &Run, run: &Run, a: Target) -> MeshResult<Value> {
    let target = run.run_ref.clone();
    let (thread, host) = native_thread_and_host(team, run)?;
    Change::new(team, caller, run, a.control_revision)
        .deliver("pause", || async move {
            if let Err(e) = team
                .store
                .transition(&target, JobState::Paused, Some(NATIVE_PAUSED))
            {
                return Delivery::Failed(e.to_string());
            }
            ask_host(team, &host, |reply| Control::InterruptThread {
                thread,
                reply,
            })
            .await
        })
        .await
}

/// `pause`: cold; the job's partial evidence is kept, its host retired, its admission released.
async fn pause(team: &Arc<Team>, caller: &Run, run: &Run, a: Target) -> MeshResult<Value> {
    not_native(run, "pause")?;
    let target = run.run_ref.clone();
    Change::new(team, caller, run, a.control_revision)
        .deliver("pause", || async move {
            match team.store.run(&target).map(|r| r.state) {
                Ok(JobState::Running) => {}
                Ok(s) => {
                    return Delivery::Failed(format!(
                        "only a running job can be paused; it is `{s}`"
                    ));
                }
                Err(e) => return Delivery::Failed(e.to_string()),
            }
            crate::host::stop_run(team, &target, JobState::Paused, "paused by its controller")
                .await;
            match team.store.run(&target).map(|r| r.state) {
                Ok(JobState::Paused) => Delivery::Delivered(Value::Null),
                Ok(s) => Delivery::Failed(format!("the job ended `{s}` before it could pause")),
                Err(e) => Delivery::Unknown(e.to_string()),
            }
        })
        .await
}

/// `finalize`: the job is asked for its final result now; past its role's
/// finalization_grace_seconds it is stopped with its partial evidence.
async fn finalize(team: &Arc<Team>, caller: &Run, run: &Run, a: Target) -> MeshResult<Value> {
    not_native(run, "finalize")?;
    let grace_seconds = team.role(&run.role)?.finalization_grace_seconds;
    let target = run.run_ref.clone();
    Change::new(team, caller, run, a.control_revision)
        .deliver("finalize", || async move {
            let (state, revision) = match team.store.run(&target) {
                Ok(r) => (r.state, r.control_revision),
                Err(e) => return Delivery::Failed(e.to_string()),
            };
            let asked = if state == JobState::Running {
                ask_host(team, &target, |reply| Control::Steer {
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
            stop_after_grace(team, &target, revision, grace_seconds);
            Delivery::Delivered(json!({"finalization_grace_seconds": grace_seconds}))
        })
        .await
}

/// The grace is the host's boundary: past it the job is stopped with its partial evidence (the
/// model is never told about the clock). Only this finalization's: a later control (a pause, a
/// continue) of the job, which moves its control revision, takes the boundary away.
fn stop_after_grace(team: &Arc<Team>, target: &str, revision: i64, grace_seconds: u32) {
    let grace =
        Duration::from_millis((i64::from(grace_seconds) * crate::stall::second_ms()) as u64);
    let (team, target) = (team.clone(), target.to_string());
    tokio::spawn(async move {
        tokio::time::sleep(grace).await;
        if team
            .store
            .run(&target)
            .is_ok_and(|r| r.is_active() && r.control_revision == revision)
        {
            crate::host::stop_run(
                &team,
                &target,
                JobState::Stopped,
                &format!(
                    "finalization_grace_seconds ({grace_seconds}) passed before its final result"
                ),
            )
            .await;
        }
    });
}

/// `set_effort`: recorded, and taken by the job's next turn (a turn's effort is fixed once it
/// has started); within its role's allowed efforts and its model's.
async fn set_effort(team: &Arc<Team>, caller: &Run, run: &Run, a: SetEffort) -> MeshResult<Value> {
    let effort = a.effort;
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
    Change::new(team, caller, run, a.control_revision)
        .deliver("set_effort", || async move {
            Delivery::Delivered(json!({"effort": effort, "applies": "from the job's next turn"}))
        })
        .await
}

/// `respond`: the answer to a pending server→client request of the run, delivered to its host
/// and traced.
async fn respond(team: &Arc<Team>, caller: &Run, run: &Run, a: Respond) -> MeshResult<Value> {
    let (request_id, result) = (a.request_id, a.response);
    if !result.is_object() || result.to_string().len() > MAX_RESPONSE_BYTES {
        return Err(MeshError::new(
            "invalid_arguments",
            format!("a response is a JSON object of at most {MAX_RESPONSE_BYTES} bytes"),
        ));
    }
    let target = run.run_ref.clone();
    Change::new(team, caller, run, a.control_revision)
        .deliver("respond", || async move {
            let answered = ask_host(team, &target, |reply| Control::Respond {
                request_id: request_id.clone(),
                result: result.clone(),
                reply,
            })
            .await;
            if matches!(answered, Delivery::Delivered(_)) {
                let _ = team.store.event(
                    &team.session,
                    &target,
                    "serverResponse",
                    &json!({"request_id": request_id, "response": result}).to_string(),
                );
            }
            answered
        })
        .await
}

/// `detach`: the controller stops following a running job, which keeps its host and admission;
/// its evidence so far is kept as partial, and `continue` reattaches.
async fn detach(team: &Arc<Team>, caller: &Run, run: &Run, a: Target) -> MeshResult<Value> {
    not_native(run, "detach")?;
    let target = run.run_ref.clone();
    let job = run.job.clone();
    Change::new(team, caller, run, a.control_revision)
        .deliver("detach", || async move {
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
        })
        .await
}

/// `compact`: a paused or suspended job's durable thread is compacted by the app-server.
async fn compact(team: &Arc<Team>, caller: &Run, run: &Run, a: Target) -> MeshResult<Value> {
    not_native(run, "compact")?;
    let target = run.run_ref.clone();
    Change::new(team, caller, run, a.control_revision).deliver("compact", || async move {
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

/// `stop`: the run ends `stopped`.
async fn stop(team: &Arc<Team>, caller: &Run, run: &Run, a: Target) -> MeshResult<Value> {
    let target = run.run_ref.clone();
    Change::new(team, caller, run, a.control_revision)
        .deliver("stop", || async move {
            crate::host::stop_run(
                team,
                &target,
                JobState::Stopped,
                "stopped by its controller",
            )
            .await;
            Delivery::Delivered(Value::Null)
        })
        .await
}

/// A control's `message`: `None` when absent or blank, refused when longer than
/// `MAX_MESSAGE_CHARS`.
pub(super) fn message(m: Option<String>, action: &str) -> MeshResult<Option<String>> {
    let m = m.filter(|m| !m.trim().is_empty());
    if m.as_ref()
        .is_some_and(|m| m.chars().count() > MAX_MESSAGE_CHARS)
    {
        return Err(MeshError::new(
            "invalid_arguments",
            format!("a {action} message is at most {MAX_MESSAGE_CHARS} characters"),
        ));
    }
    Ok(m)
}

/// A native run's thread, and the ref of the run whose host it lives in (its nearest ancestor
/// with a live host).
pub(super) fn native_thread_and_host(team: &Team, run: &Run) -> MeshResult<(String, String)> {
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
