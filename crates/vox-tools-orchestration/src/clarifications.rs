//! Clarifications (a person in the loop): `vox_ask_clarification`, `vox_feedback_list`,
//! `vox_resolve_feedback`, and the `clarification_inbox` boot step. The questions and the
//! tasks they gate live in the store, so a restart loses none.

use crate::orchestration::{actor, dispatch, operator_only};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use vox_core::family::blocking;
use vox_core::{CallCtx, Ctx, Family, HandlerEntry, StepDone, ToolError};
use vox_mcp_registry::BootStep;
use vox_store::{Assignment, Clarification, Store};
use vox_tools_common::store::{db, store};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AskArgs {
    /// The question for a person (at most 8 KiB).
    question: String,
    /// Suggested answers (at most 16).
    #[serde(default)]
    options: Vec<String>,
    /// Tasks that wait until it is answered (at most 64).
    #[serde(default)]
    gates: Vec<i64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// Resolved ones too (default: only pending).
    #[serde(default)]
    all: bool,
    /// At most this many (default 100, at most 1000).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct Inbox {
    /// Newest first.
    clarifications: Vec<Clarification>,
}

/// What the person does with a question.
#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Action {
    /// Answer it (`answer` required): the gated tasks go on.
    Answer,
    /// Drop it unanswered: the gated tasks go on.
    Dismiss,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ResolveArgs {
    /// The clarification's id.
    id: i64,
    action: Action,
    /// The answer (with `answer`; at most 64 KiB).
    answer: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Resolved {
    clarification: Clarification,
    /// Tasks the lifted gates let the dispatcher assign.
    assigned: Vec<Assignment>,
}

fn ask(ctx: &Ctx, call: &CallCtx, a: AskArgs) -> Result<Clarification, ToolError> {
    for &t in &a.gates {
        crate::orchestration::own_task(call, store(ctx)?, t, "holds back with a question")?;
    }
    let q = store(ctx)?
        .clarification_ask(&a.question, &a.options, &a.gates, actor(call))
        .map_err(db)?;
    crate::orchestration::changed(ctx);
    Ok(q)
}

fn list(ctx: &Ctx, _call: &CallCtx, a: ListArgs) -> Result<Inbox, ToolError> {
    let limit = a.limit.unwrap_or(100).clamp(1, 1000) as usize;
    Ok(Inbox {
        clarifications: store(ctx)?.clarifications(a.all, limit).map_err(db)?,
    })
}

fn resolve(ctx: &Ctx, call: &CallCtx, a: ResolveArgs) -> Result<Resolved, ToolError> {
    operator_only(call, "answers clarifications (a person)")?;
    let answer = match (a.action, a.answer) {
        (Action::Answer, Some(text)) => Some(text),
        (Action::Answer, None) => {
            return Err(ToolError::invalid_arguments(
                "`answer` is required with action `answer`",
            ));
        }
        (Action::Dismiss, Some(_)) => {
            return Err(ToolError::invalid_arguments(
                "`answer` goes with action `answer`, not `dismiss`",
            ));
        }
        (Action::Dismiss, None) => None,
    };
    let clarification = store(ctx)?
        .clarification_resolve(a.id, answer.as_deref(), actor(call))
        .map_err(db)?;
    Ok(Resolved {
        clarification,
        assigned: dispatch(ctx)?,
    })
}

/// Pending questions are in the store; the step counts them and what they hold back.
fn inbox(ctx: &mut Ctx) -> Result<StepDone, String> {
    let Some(s) = ctx.get::<Arc<Store>>() else {
        return Err("needs the journey store, which is not open".into());
    };
    let pending = s.clarifications(false, 10_000).map_err(|e| e.to_string())?;
    let gated: usize = pending.iter().map(|q| q.gates.len()).sum();
    Ok(StepDone::Ready(format!(
        "{} pending clarifications restored, gating {gated} tasks",
        pending.len()
    )))
}

pub fn family() -> Family {
    Family {
        name: "clarifications",
        steps: vec![(BootStep::ClarificationInbox, inbox)],
        handlers: handlers(),
        ..Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_ask_clarification", blocking(ask)),
        ("vox_feedback_list", blocking(list)),
        ("vox_resolve_feedback", blocking(resolve)),
    ]
}
