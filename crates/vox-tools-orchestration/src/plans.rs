//! Plans and handoffs: `vox_plan`, `vox_plan_status`, `vox_replan`, `vox_agent_handoff`,
//! `vox_handoff_lineage`. A plan's steps are tasks; the dispatcher runs them as their
//! dependencies complete.

use crate::orchestration::{OPERATOR, actor, dispatch};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use vox_core::family::{async_typed, blocking};
use vox_core::{CallCtx, Ctx, Family, HandlerEntry, ToolError};
use vox_store::{Assignment, Handoff, NewStep, NewTask, Plan};
use vox_tools_common::store::{db, store};

/// One step, as a caller writes it.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StepArgs {
    /// Unique in the plan (letters, digits, '.', '_' or '-'); other steps name it in `after`.
    key: String,
    /// What to do, in a line.
    title: String,
    #[serde(default)]
    description: String,
    /// Keys of the steps that must complete first.
    #[serde(default)]
    after: Vec<String>,
    /// Files it will touch.
    #[serde(default)]
    files: Vec<String>,
    #[serde(default)]
    priority: i64,
    /// Only this agent may take it.
    agent_id: Option<String>,
}

fn steps(steps: Vec<StepArgs>) -> Vec<NewStep> {
    steps
        .into_iter()
        .map(|s| NewStep {
            key: s.key,
            after: s.after,
            task: NewTask {
                title: s.title,
                description: s.description,
                priority: s.priority,
                depends_on: vec![],
                files: s.files,
                pinned_agent: s.agent_id,
            },
        })
        .collect()
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PlanArgs {
    /// What the plan achieves (at most 4 KiB).
    goal: String,
    /// Its steps (1 to 256). Without them a model plans them (`model_id`, else the active
    /// model), and the plan is checked as given steps are.
    steps: Option<Vec<StepArgs>>,
    /// The model that plans when `steps` are left out.
    model_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Planned {
    plan: Plan,
    assigned: Vec<Assignment>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PlanIdArgs {
    plan_id: i64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReplanArgs {
    plan_id: i64,
    /// Why the plan changes (recorded).
    reason: String,
    /// Steps to add; their `after` may name steps already in the plan.
    #[serde(default)]
    add: Vec<StepArgs>,
    /// Keys of steps to cancel (those not ended yet).
    #[serde(default)]
    cancel: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HandoffArgs {
    /// The agent receiving the context (and the task).
    to_agent: String,
    /// What is passed on, in a line (at most 1 KiB).
    summary: String,
    /// The context itself: notes, findings, what is left (at most 256 KiB).
    #[serde(default)]
    context: String,
    /// A task the giver holds: it becomes the receiver's.
    task_id: Option<i64>,
    /// The handoff this one continues (it went to the giver).
    parent: Option<i64>,
    /// The giving agent (the operator names one, or gives as itself when left out).
    agent_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct HandedOff {
    handoff: Handoff,
    assigned: Vec<Assignment>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LineageArgs {
    /// The handoffs of this task.
    task_id: Option<i64>,
    /// The handoffs this agent gave or got.
    agent_id: Option<String>,
    /// This handoff and those it continues.
    handoff_id: Option<i64>,
    /// At most this many (default 100, at most 1000).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct Lineage {
    /// Oldest first.
    handoffs: Vec<Handoff>,
}

/// What a planning model is told.
const PLANNER: &str = "You plan work for a team of coding agents. Reply with one JSON object and nothing else: {\"steps\": [{\"key\": \"short-id\", \"title\": \"what to do\", \"description\": \"how\", \"after\": [\"keys of steps that must finish first\"], \"files\": [\"workspace paths it touches\"]}]}. At most 32 steps; every `after` names an earlier step's key; no cycles.";

/// Most steps a model's plan may have.
const MAX_MODEL_STEPS: usize = 32;

async fn plan(ctx: Arc<Ctx>, call: CallCtx, a: PlanArgs) -> Result<Planned, ToolError> {
    vox_tools_common::bounded("goal", &a.goal, 4096)?;
    let given = match a.steps {
        Some(s) => s,
        None => {
            let (model, v, _) = vox_tools_models::models::ask_json(
                &ctx,
                &call,
                a.model_id.as_deref(),
                PLANNER,
                format!("<goal>{}</goal>", a.goal),
            )
            .await?;
            let steps = v.get("steps").cloned().unwrap_or_default();
            let steps: Vec<StepArgs> = serde_json::from_value(steps).map_err(|e| {
                ToolError::failed(format!(
                    "[plan_invalid] the plan of {model} does not have the shape of `steps`: {e}"
                ))
            })?;
            if steps.is_empty() || steps.len() > MAX_MODEL_STEPS {
                return Err(ToolError::failed(format!(
                    "[plan_invalid] the plan of {model} has {} steps; 1 to {MAX_MODEL_STEPS} are taken",
                    steps.len()
                )));
            }
            steps
        }
    };
    let goal = a.goal;
    vox_core::family::run_blocking(move || create(&ctx, &call, &goal, given)).await
}

fn create(
    ctx: &Ctx,
    call: &CallCtx,
    goal: &str,
    given: Vec<StepArgs>,
) -> Result<Planned, ToolError> {
    let plan = store(ctx)?
        .plan_create(goal, &steps(given), actor(call))
        .map_err(db)?;
    let assigned = dispatch(ctx)?;
    Ok(Planned {
        plan: store(ctx)?.plan_get(plan.id).map_err(db)?,
        assigned,
    })
}

fn plan_status(ctx: &Ctx, _call: &CallCtx, a: PlanIdArgs) -> Result<Plan, ToolError> {
    store(ctx)?.plan_get(a.plan_id).map_err(db)
}

fn replan(ctx: &Ctx, call: &CallCtx, a: ReplanArgs) -> Result<Planned, ToolError> {
    vox_tools_common::bounded("reason", &a.reason, 4096)?;
    if let Some(me) = call.acting_agent() {
        let plan = store(ctx)?.plan_get(a.plan_id).map_err(db)?;
        if plan.created_by != me {
            return Err(ToolError::conflict(format!(
                "plan {} is {}'s: an agent changes only the plans it made",
                a.plan_id, plan.created_by
            )));
        }
    }
    store(ctx)?
        .plan_replan(a.plan_id, &steps(a.add), &a.cancel, &a.reason, actor(call))
        .map_err(db)?;
    let assigned = dispatch(ctx)?;
    Ok(Planned {
        plan: store(ctx)?.plan_get(a.plan_id).map_err(db)?,
        assigned,
    })
}

fn handoff(ctx: &Ctx, call: &CallCtx, a: HandoffArgs) -> Result<HandedOff, ToolError> {
    let from =
        crate::orchestration::scope(call, a.agent_id)?.unwrap_or_else(|| OPERATOR.to_owned());
    let handoff = store(ctx)?
        .handoff_record(
            &from,
            &a.to_agent,
            a.task_id,
            a.parent,
            &a.summary,
            &a.context,
        )
        .map_err(db)?;
    Ok(HandedOff {
        handoff,
        assigned: dispatch(ctx)?,
    })
}

fn lineage(ctx: &Ctx, _call: &CallCtx, a: LineageArgs) -> Result<Lineage, ToolError> {
    let limit = a.limit.unwrap_or(100).clamp(1, 1000) as usize;
    Ok(Lineage {
        handoffs: store(ctx)?
            .handoffs(a.task_id, a.agent_id.as_deref(), a.handoff_id, limit)
            .map_err(db)?,
    })
}

pub fn family() -> Family {
    Family {
        name: "plans",
        handlers: handlers(),
        ..Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_plan", async_typed(plan)),
        ("vox_plan_status", blocking(plan_status)),
        ("vox_replan", blocking(replan)),
        ("vox_agent_handoff", blocking(handoff)),
        ("vox_handoff_lineage", blocking(lineage)),
    ]
}
