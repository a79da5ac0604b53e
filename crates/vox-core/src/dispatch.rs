//! The one call path: [`Orchestrator::call`] under a [`CallScope`]. Authorization
//! (`authorize_tool` on the scope's surface, narrowed to an agent's public tools on the agent
//! path), the session guards, the agent gate, then the handler under the call's deadline and
//! cancellation, the result cap, and the observers.

use crate::MAX_MESSAGE_BYTES;
use crate::call::{CallCtx, CallRun, CallScope, WorkspaceTools};
use crate::error::{ToolError, ToolOutcome};
use crate::family::{HandlerFuture, run_blocking};
use crate::orchestrator::{Orchestrator, json_len};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vox_mcp_registry::{
    Caller, Denial, DenialCode, ProfileSet, ToolEntry, UpstreamClass, authorize_tool,
    authorize_upstream,
};

/// What the decision allowed: a catalog row, or an upstream server's tool as classified.
#[derive(Clone, Copy)]
enum Decided {
    Catalog(&'static ToolEntry),
    Upstream(UpstreamClass),
}

impl Orchestrator {
    /// Runs tool `name` for `scope`: the only way any path (a transport, a chat's tool loop, a
    /// mesh call, an agent) runs a tool. `run` is the transport's part (cancellation, sinks).
    pub async fn call(
        &self,
        scope: &Arc<CallScope>,
        name: &str,
        args: Value,
        run: CallRun,
    ) -> ToolOutcome {
        let call = CallCtx::run(scope.clone(), run);
        if scope.agent.is_some() {
            return self.call_as_agent(name, args, call).await;
        }
        let kept = self.kept_arguments(name, &args);
        let started = Instant::now();
        let outcome = self.dispatch(name, args, &call).await;
        let outcome = self.narrowed(scope, name, outcome);
        self.observed(&call, name, kept.as_ref(), outcome, started.elapsed())
    }

    /// The agent path: the agent is read again (a retired one is refused), the scope narrowed
    /// to its public tools within the path's surface, authorized, then its gate (a person's
    /// approval, its budget), then the call as any other. Workspace and skill tools are not on
    /// this path.
    async fn call_as_agent(&self, name: &str, args: Value, call: CallCtx) -> ToolOutcome {
        let scope = call.scope().clone();
        let id = scope.agent.as_deref().unwrap_or_default();
        let agent = match self.ctx.hooks().agents.as_ref().map(|d| d.current(id)) {
            Some(Ok(Some(a))) => a,
            Some(Ok(None)) => {
                return ToolOutcome::Failed(ToolError::unauthorized(format!(
                    "agent {id} is retired: its credential no longer works"
                )));
            }
            Some(Err(e)) => return ToolOutcome::Failed(e),
            None => {
                return ToolOutcome::Failed(ToolError::unauthorized(
                    "this daemon's profile runs no agent fleet",
                ));
            }
        };
        let mut narrowed = (*scope).clone();
        narrowed.surface = self.agent_surface(&scope.surface, &agent);
        narrowed.workspace_tools = WorkspaceTools::Off;
        let call = call.with_scope(Arc::new(narrowed));
        let _in_flight = self.ctx.agent_calls.enter(&agent.id, &call.cancel);
        let surface = &call.scope().surface;
        let decided = self.decide(surface, name, call.caller());
        let tool = match decided {
            Ok(Decided::Catalog(t)) => crate::GatedTool::from(t),
            Ok(Decided::Upstream(class)) => crate::GatedTool {
                name,
                lane: "upstream",
                side_effect_class: class.side_effect_class,
            },
            Err(d)
                if d.code == DenialCode::ToolNotInProfile
                    && scope.surface.tools().iter().any(|t| t.name == name) =>
            {
                let mine = agent.profile.tools().iter().any(|t| t.name == name);
                let why = if mine {
                    format!(
                        "tool {name} is the operator's (a person's): no agent calls it, {} included",
                        agent.id
                    )
                } else {
                    format!(
                        "tool {name} is not in agent {}'s profile `{}`",
                        agent.id,
                        agent.profile.canonical()
                    )
                };
                let d = Denial::new(DenialCode::ToolNotInProfile, why);
                return self.observed(&call, name, None, ToolOutcome::Denied(d), Duration::ZERO);
            }
            Err(d) => {
                return self.observed(&call, name, None, ToolOutcome::Denied(d), Duration::ZERO);
            }
        };
        let args = match &self.ctx.hooks().agent_gate {
            Some(gate) => match gate.admit(&agent.id, tool, args, &call.cancel).await {
                Ok(args) => args,
                Err(e) => {
                    return self.observed(
                        &call,
                        name,
                        None,
                        ToolOutcome::Failed(e),
                        Duration::ZERO,
                    );
                }
            },
            None => args,
        };
        let kept = self.kept_arguments(name, &args);
        let started = Instant::now();
        let outcome = self.dispatch(name, args, &call).await;
        self.observed(&call, name, kept.as_ref(), outcome, started.elapsed())
    }

    /// A copy of the arguments when an observer keeps those of `name` (an audit opt-in).
    fn kept_arguments(&self, name: &str, args: &Value) -> Option<Value> {
        let observers = &self.ctx.hooks().observers;
        observers
            .iter()
            .any(|o| o.wants_arguments(name))
            .then(|| args.clone())
    }

    /// Counts the call and tells the observers (an agent's refusals count too).
    fn observed(
        &self,
        call: &CallCtx,
        name: &str,
        args: Option<&Value>,
        outcome: ToolOutcome,
        elapsed: Duration,
    ) -> ToolOutcome {
        // Static labels: no allocation per call, and unknown names cannot grow the label set.
        let tool_label = vox_mcp_registry::tool_by_name(name).map_or("(other)", |t| t.name);
        metrics::counter!("vox_tool_calls_total", "tool" => tool_label, "outcome" => outcome.label()).increment(1);
        metrics::histogram!("vox_tool_call_seconds", "tool" => tool_label)
            .record(elapsed.as_secs_f64());
        for o in &self.ctx.hooks().observers {
            o.record(call, name, args, &outcome, elapsed);
        }
        outcome
    }

    /// A denial on a surface narrower than the daemon's profile says so when the profile
    /// serves the tool: this path's allowlist is what refused it.
    fn narrowed(&self, scope: &CallScope, name: &str, outcome: ToolOutcome) -> ToolOutcome {
        match (outcome, scope.narrowed_by) {
            (ToolOutcome::Denied(d), Some(by))
                if d.code == DenialCode::ToolNotInProfile
                    && self.ctx.profile.tools().iter().any(|t| t.name == name) =>
            {
                ToolOutcome::Denied(Denial::new(
                    DenialCode::ToolNotInProfile,
                    format!(
                        "tool {name} is in profile `{}` but not on {by}",
                        self.ctx.profile.canonical()
                    ),
                ))
            }
            (other, _) => other,
        }
    }

    /// The one decision for `name` on `surface`: the catalog's row, else an upstream server's
    /// tool of that name, each through its `authorize_*` (the same order, the same codes).
    fn decide(&self, surface: &ProfileSet, name: &str, caller: Caller) -> Result<Decided, Denial> {
        let booted = self.ctx.boot.booted_mask;
        match authorize_tool(surface, name, caller, booted) {
            Ok(t) => Ok(Decided::Catalog(t)),
            Err(d)
                if matches!(
                    d.code,
                    DenialCode::UnknownTool | DenialCode::ToolNotInProfile
                ) =>
            {
                let upstream = self.ctx.hooks().upstream.as_ref();
                match upstream.and_then(|u| u.class_of(name)) {
                    Some(class) => authorize_upstream(surface, name, class, caller, booted)
                        .map(|()| Decided::Upstream(class)),
                    None => Err(d),
                }
            }
            Err(d) => Err(d),
        }
    }

    async fn dispatch(&self, name: &str, args: Value, call: &CallCtx) -> ToolOutcome {
        let scope = call.scope();
        let authorized = self.decide(&scope.surface, name, call.caller());
        // The active skill's allowlist narrows whatever the profile allows.
        if matches!(
            &authorized,
            Ok(_)
                | Err(Denial {
                    code: DenialCode::UnknownTool,
                    ..
                })
        ) {
            for g in &self.ctx.hooks().guards {
                if let Err(d) = g.check(call.session(), name, &args) {
                    return ToolOutcome::Denied(d);
                }
            }
        }
        let tool = match authorized {
            Ok(Decided::Catalog(t)) => t,
            Ok(Decided::Upstream(_)) => return self.dispatch_upstream(name, args, call).await,
            // Under dev, a name outside the static catalog may be a federated workspace tool
            // or a skill's macro tool.
            Err(d)
                if d.code == DenialCode::UnknownTool
                    && scope.workspace_tools != WorkspaceTools::Off
                    && !self.ctx.hooks().dynamic.is_empty() =>
            {
                return self.dispatch_workspace(name, args, d, call).await;
            }
            Err(d) => return ToolOutcome::Denied(d),
        };
        let args = match args {
            Value::Null => json!({}),
            Value::Object(_) => args,
            other => {
                return ToolOutcome::Failed(ToolError::invalid_arguments(format!(
                    "arguments must be a JSON object, got {}",
                    json_kind(&other)
                )));
            }
        };
        let Some(handler) = &self.handlers[tool.index] else {
            return ToolOutcome::Failed(ToolError::internal(format!("tool {name} has no handler")));
        };
        // A panicking handler still answers, and does not take its connection's task with it.
        let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            (handler.call)(self.ctx.clone(), call.clone(), args)
        }));
        let work = match started {
            Ok(work) => CatchPanic(work),
            Err(panic) => return ToolOutcome::Failed(panicked(name, &panic)),
        };
        match self.under_deadline(name, call, work).await {
            Ok(v) => cap_result(name, v),
            Err(e) => ToolOutcome::Failed(e),
        }
    }

    /// Runs a handler's future until it ends, the call is cancelled, or the deadline passes.
    /// Cancellation and the deadline both cancel the call's signal, which stops blocking work
    /// at its next check (an interpreter step, a sandbox poll, an indexed file).
    async fn under_deadline<T>(
        &self,
        name: &str,
        call: &CallCtx,
        work: impl std::future::Future<Output = Result<T, ToolError>>,
    ) -> Result<T, ToolError> {
        tokio::select! {
            r = work => r,
            _ = call.cancel.cancelled() => {
                Err(ToolError::cancelled(format!("tool {name} was cancelled")))
            }
            _ = tokio::time::sleep(self.timeout) => {
                call.cancel.cancel();
                Err(ToolError::unavailable(format!(
                    "tool {name} did not finish within {} ms",
                    self.timeout.as_millis()
                )).with_detail("deadline_exceeded", Some(json!({"timeout_ms": self.timeout.as_millis() as u64}))))
            }
        }
    }

    async fn dispatch_upstream(&self, name: &str, args: Value, call: &CallCtx) -> ToolOutcome {
        let Some(upstream) = self.ctx.hooks().upstream.as_ref() else {
            return ToolOutcome::Failed(ToolError::internal("no upstream servers"));
        };
        let args = if args.is_null() { json!({}) } else { args };
        let work = async { Ok(upstream.call(name, args, call).await) };
        match self.under_deadline(name, call, work).await {
            Ok(outcome) => capped(name, outcome),
            Err(e) => ToolOutcome::Failed(e),
        }
    }

    async fn dispatch_workspace(
        &self,
        name: &str,
        args: Value,
        unknown: Denial,
        call: &CallCtx,
    ) -> ToolOutcome {
        let args = if args.is_null() { json!({}) } else { args };
        let ctx = self.ctx.clone();
        let owned = name.to_owned();
        let inner = call.clone();
        let work = run_blocking(move || {
            Ok(ctx
                .hooks()
                .dynamic
                .iter()
                .find_map(|p| p.call(&owned, &args, &inner)))
        });
        match self.under_deadline(name, call, work).await {
            Ok(Some(outcome)) => capped(name, outcome),
            Err(e) => ToolOutcome::Failed(e),
            Ok(None) => ToolOutcome::Denied(unknown),
        }
    }
}

/// A handler's future whose panics become internal errors.
struct CatchPanic(HandlerFuture);

impl std::future::Future for CatchPanic {
    type Output = Result<Value, ToolError>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.0.as_mut().poll(cx)));
        match polled {
            Ok(p) => p,
            Err(panic) => std::task::Poll::Ready(Err(panicked("a tool", &panic))),
        }
    }
}

fn panicked(name: &str, panic: &Box<dyn std::any::Any + Send>) -> ToolError {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    ToolError::internal(format!("{name} panicked: {what}"))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `outcome` under the result cap: a value or content blocks too large are refused.
fn capped(name: &str, outcome: ToolOutcome) -> ToolOutcome {
    match outcome {
        ToolOutcome::Ok(v) => cap_result(name, v),
        ToolOutcome::Content(blocks) => match cap_result(name, Value::Array(blocks)) {
            ToolOutcome::Ok(Value::Array(blocks)) => ToolOutcome::Content(blocks),
            other => other,
        },
        other => other,
    }
}

/// A result larger than the message cap would flood a model's context: refuse it, saying so.
fn cap_result(name: &str, v: Value) -> ToolOutcome {
    let len = json_len(&v);
    if len > MAX_MESSAGE_BYTES / 2 {
        return ToolOutcome::Failed(ToolError::unavailable(format!(
            "tool {name} produced {len} bytes, above the {} byte result cap; narrow the request (limit, path, line range)",
            MAX_MESSAGE_BYTES / 2
        ))
        .with_detail(
            "result_too_large",
            Some(json!({"bytes": len, "cap": MAX_MESSAGE_BYTES / 2})),
        ));
    }
    ToolOutcome::Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_future_becomes_an_internal_error() {
        let work: HandlerFuture = Box::pin(async { panic!("boom") });
        match CatchPanic(work).await {
            Err(e) => assert!(e.message().contains("boom"), "{e}"),
            Ok(v) => panic!("{v:?}"),
        }
    }
}
