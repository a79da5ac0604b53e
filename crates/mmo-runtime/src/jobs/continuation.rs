//! The controls that admit a run again: `continue` (a paused or suspended job on its own thread,
//! the root's operator-driven continuation, reattaching a detached job, a native thread's next
//! turn) and `fork` (a new job on a fork of a persisted thread).

use super::args::Continue;
use super::control::{NATIVE_PAUSED, message, native_thread_and_host};
use super::delivery::{Change, Delivery, ask_host};
use crate::result::JobState;
use crate::store::{NewRun, Run};
use crate::team::{Control, MeshError, MeshResult, Team};
use serde_json::{Value, json};
use std::sync::Arc;

/// What a continued job is told when its controller says nothing more.
const CONTINUE_MESSAGE: &str = "Continue your task from where you left off. Your final message is your result, as the task said.";

/// What a fork is told when its controller says nothing more.
const FORK_MESSAGE: &str = "You are a fork of an earlier run of this task: continue it from where this history ends. Your final message is your result, as the task said.";

/// `continue`: a native run's next turn on its thread; a detached running job reattached; else
/// a paused or suspended job (or the operator's root) on its own thread after admission again.
pub(super) async fn continue_run(
    team: &Arc<Team>,
    caller: &Run,
    run: &Run,
    a: Continue,
) -> MeshResult<Value> {
    if run.is_native() {
        continue_native(team, caller, run, a).await
    } else if run.state == JobState::Running && crate::team::is_detached(&team.store, run) {
        reattach(team, caller, run, a.control_revision).await
    } else {
        continue_job(team, caller, run, a).await
    }
}

/// A logically paused native run's next turn, on its thread in its spawner's host.
async fn continue_native(
    team: &Arc<Team>,
    caller: &Run,
    run: &Run,
    a: Continue,
) -> MeshResult<Value> {
    let text = message(a.message, "continue")?.unwrap_or_else(|| CONTINUE_MESSAGE.to_string());
    let target = run.run_ref.clone();
    let (thread, host) = native_thread_and_host(team, run)?;
    Change::new(team, caller, run, a.control_revision)
        .deliver("continue", || async move {
            if let Err(e) = team.store.transition(
                &target,
                JobState::Running,
                Some("continued by its controller"),
            ) {
                return Delivery::Failed(e.to_string());
            }
            let started = ask_host(team, &host, |reply| Control::StartTurn {
                thread,
                text,
                reply,
            })
            .await;
            if let Delivery::Failed(_) = &started {
                // Nothing reached the thread: the run is paused as it was.
                let _ = team
                    .store
                    .transition(&target, JobState::Paused, Some(NATIVE_PAUSED));
            }
            started
        })
        .await
}

/// Reattaching a detached job keeps its host and its admission.
async fn reattach(
    team: &Arc<Team>,
    caller: &Run,
    run: &Run,
    revision: Option<i64>,
) -> MeshResult<Value> {
    let target = run.run_ref.clone();
    Change::new(team, caller, run, revision)
        .deliver("continue", || async move {
            match team.store.event(&team.session, &target, "reattached", "{}") {
                Ok(_) => Delivery::Delivered(json!({"reattached": true})),
                Err(e) => Delivery::Unknown(e.to_string()),
            }
        })
        .await
}

/// A paused or suspended job (or root) continues on its own thread: a turn-mode run with
/// `message`, a goal-mode run its goal (with a larger budget when one is given).
async fn continue_job(team: &Arc<Team>, caller: &Run, run: &Run, a: Continue) -> MeshResult<Value> {
    let role = team.role(&run.role)?;
    let message = message(a.message, "continue")?;
    if role.execution_mode == "goal" && message.is_some() {
        return Err(MeshError::new(
            "invalid_arguments",
            "a goal-mode run continues its goal and takes no `message`; steer it once it runs",
        ));
    }
    let budget = match a.goal_token_budget {
        Some(total) => Some(extended_goal_budget(team, run, total)?),
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
    Change::new(team, caller, run, a.control_revision)
        .deliver("continue", || async move {
            resume(team, &target, message, budget).await
        })
        .await
}

/// `fork`: a new job of the target's role, under the target's parent (its result lifecycle
/// stays with the lineage, not with the controller), on a fork of the target's persisted
/// thread in its home, after admission like any spawn. The target does not change,
/// so no revision is needed; forks of one target are serialized by its control lock.
pub(super) async fn fork(
    team: &Arc<Team>,
    caller: &Run,
    run: &Run,
    message_text: Option<String>,
) -> MeshResult<Value> {
    jobs_only(run, "fork")?;
    if run.literal.is_some() {
        return Err(unforkable(
            run,
            "a low-trust literal job is spawned again, not forked",
        ));
    }
    let message = message(message_text, "fork")?.unwrap_or_else(|| FORK_MESSAGE.to_string());
    let lock = team.control_lock(&run.run_ref);
    let _serial = lock.lock().await;
    let source = team.run(&run.run_ref)?;
    let parent = fork_parent(&source)?;
    let guard = team.admit.lock().await;
    let _admission = team.store.admission_lock()?;
    let request = crate::admission::SpawnRequest {
        role: source.role.clone(),
        task: source.task.clone(),
        task_kind: source.task_kind.clone(),
        write_scope: source.is_writer.then(|| source.write_scope.clone()),
        literal_task: None,
    };
    let admitted = super::decide(team, &parent, &request)?;
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

/// The parent a fork of `source` runs under, when `source` can be forked now: its thread is
/// persisted (it is not queued or running), it had one, and a writer still has its worktree.
fn fork_parent(source: &Run) -> MeshResult<String> {
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
        return Err(unforkable(source, "it never had a thread"));
    }
    // A writer's fork starts from its kept worktree, which only a paused or suspended writer
    // has (an ended one's worktree is gone, its work in its patch).
    if source.is_writer && !matches!(source.state, JobState::Paused | JobState::Suspended) {
        return Err(unforkable(
            source,
            "it is a writer that ended, and its worktree is gone; a writer is forked while it is paused or suspended",
        ));
    }
    source
        .parent
        .clone()
        .ok_or_else(|| MeshError::new("control_unsupported", "the root is not forked"))
}

fn unforkable(run: &Run, why: &str) -> MeshError {
    MeshError::new(
        "control_unsupported",
        format!("agent run `{}` cannot be forked: {why}", run.run_ref),
    )
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

/// Continues a paused or suspended run (a job, or the root) with `message` once it is admitted
/// again; a goal-mode run's goal with `budget` as its new total, when the controller extended it.
pub(super) async fn resume(
    team: &Arc<Team>,
    target: &str,
    message: String,
    budget: Option<u64>,
) -> Delivery {
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
    super::decide(team, &parent, &request).map_err(|e| e.to_string())?;
    team.store
        .transition(
            run_ref,
            JobState::Running,
            Some("continued by its controller"),
        )
        .map_err(|e| e.to_string())
}
