//! `Orchestrator`: the booted families, the handler table, and the one call path.

use crate::boot::{self, BootReport};
use crate::ctx::{AgentIdentity, Ctx};
use crate::error::ToolError;
use crate::family::{Family, HandlerEntry, StepFn};
use crate::workspace::Workspace;
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use vox_mcp_registry::{
    BOOT_STEPS, BootStep, Caller, ProfileSet, SideEffectClass, TOOL_REGISTRY, ToolEntry,
    visible_tools,
};

/// What a client sees of a tool (MCP field names).
#[derive(Debug, Clone, Serialize)]
pub struct ToolDescriptor {
    /// The MCP tool name.
    pub name: &'static str,
    /// Human-readable title.
    pub title: &'static str,
    /// What the tool does.
    pub description: &'static str,
    /// JSON Schema of the arguments.
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
    /// The schema `structuredContent` of a successful call validates against.
    #[serde(rename = "outputSchema", skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// MCP tool annotations (`readOnlyHint`, `destructiveHint`, ...) derived from the catalog's
    /// side-effect class.
    pub annotations: Value,
    /// vox's own facts about the tool: `vox_exposure`, `vox_side_effect_class`, `vox_requires`,
    /// `vox_lane`.
    #[serde(rename = "_meta")]
    pub meta: Value,
    /// Its position in the catalog; not serialized.
    #[serde(skip)]
    pub index: usize,
}

/// The orchestrator of one workspace under one profile.
pub struct Orchestrator {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) handlers: Vec<Option<HandlerEntry>>,
    descriptors: Vec<ToolDescriptor>,
    /// `descriptors` as a loopback writer on the daemon's profile sees them, encoded once.
    pub(crate) local_tools: Arc<Vec<Value>>,
    pub(crate) timeout: Duration,
    /// The families' `on_stopping`.
    stopping: Vec<fn(&Ctx)>,
}

fn annotations(t: &ToolEntry) -> Value {
    let (read_only, destructive, idempotent, open_world) = match t.side_effect_class {
        SideEffectClass::ReadOnly => (true, false, true, false),
        SideEffectClass::WritesState | SideEffectClass::WritesFiles => (false, false, false, false),
        SideEffectClass::SpawnsProcess => (false, true, false, false),
        SideEffectClass::Network => (false, false, false, true),
        SideEffectClass::Destructive => (false, true, true, false),
    };
    json!({
        "title": t.title, "readOnlyHint": read_only, "destructiveHint": destructive,
        "idempotentHint": idempotent, "openWorldHint": open_world,
    })
}

/// The families' handlers, indexed like `TOOL_REGISTRY`, and their boot steps, indexed like
/// `BOOT_STEPS`. Errors name every catalog row without a handler, every handler without a
/// catalog row, every contract step without a function and every step registered twice: the
/// daemon refuses to start on any of them.
pub fn assemble(families: Vec<Family>) -> Result<Assembled, String> {
    let mut handlers: Vec<Option<HandlerEntry>> = TOOL_REGISTRY.iter().map(|_| None).collect();
    let mut steps: Vec<Option<(StepFn, &str)>> = BOOT_STEPS.iter().map(|_| None).collect();
    let (mut after_boot, mut started, mut stopping) = (Vec::new(), Vec::new(), Vec::new());
    let mut problems = Vec::new();
    for f in families {
        for (name, entry) in f.handlers {
            match vox_mcp_registry::tool_by_name(name) {
                Some(t) if handlers[t.index].is_some() => {
                    problems.push(format!("tool {name} has two handlers"));
                }
                Some(t) => handlers[t.index] = Some(entry),
                None => problems.push(format!("handler {name} has no catalog row")),
            }
        }
        for (step, func) in f.steps {
            match &steps[step as usize] {
                Some((_, other)) => problems.push(format!(
                    "boot step {} is registered by {other} and {}",
                    step.name(),
                    f.name
                )),
                None => steps[step as usize] = Some((func, f.name)),
            }
        }
        after_boot.extend(f.after_boot);
        started.extend(f.on_started);
        stopping.extend(f.on_stopping);
    }
    for t in TOOL_REGISTRY.iter().filter(|t| t.built) {
        if handlers[t.index].is_none() {
            problems.push(format!("catalog tool {} has no handler", t.name));
        }
    }
    for step in BootStep::ALL {
        if steps[step as usize].is_none() {
            problems.push(format!("boot step {} has no function", step.name()));
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok(Assembled {
        handlers,
        steps: steps.into_iter().flatten().map(|(f, _)| f).collect(),
        after_boot,
        started,
        stopping,
    })
}

/// The families, put together: handlers by catalog index, step functions by boot step.
pub struct Assembled {
    /// Each catalog tool's handler, by catalog index; `None` for a tool no family serves.
    pub handlers: Vec<Option<HandlerEntry>>,
    /// Each boot step's function, by index in `BOOT_STEPS`.
    pub steps: Vec<StepFn>,
    /// The families' after-boot hooks.
    pub after_boot: Vec<fn(&mut Ctx)>,
    /// The families' on-started hooks.
    pub started: Vec<fn(Arc<Ctx>)>,
    /// The families' on-stopping hooks.
    pub stopping: Vec<fn(&Ctx)>,
}

impl Orchestrator {
    /// Boots `families` for `workspace` under `profile`: the contract's steps in order (only
    /// those of the profile's closure), then each family's `after_boot`, then `on_started`.
    pub fn boot(
        workspace: Workspace,
        profile: ProfileSet,
        families: Vec<Family>,
    ) -> Result<Self, String> {
        let Assembled {
            handlers,
            steps,
            after_boot,
            started,
            stopping,
        } = assemble(families)?;
        let mut ctx = Ctx::new(workspace, profile.clone());
        let report = boot::boot(&profile, |i| steps[i](&mut ctx));
        ctx.boot = report;
        for f in after_boot {
            f(&mut ctx);
        }
        let descriptors = TOOL_REGISTRY
            .iter()
            .filter_map(|t| {
                let h = handlers[t.index].as_ref()?;
                Some(ToolDescriptor {
                    name: t.name,
                    title: t.title,
                    description: t.description,
                    input_schema: h.schema.clone(),
                    output_schema: h.output_schema.clone(),
                    annotations: annotations(t),
                    meta: json!({
                        "vox_exposure": t.exposure.as_str(),
                        "vox_side_effect_class": t.side_effect_class.as_str(),
                        "vox_requires": t.requires,
                        "vox_lane": t.lane,
                    }),
                    index: t.index,
                })
            })
            .collect();
        // A bad value stopped `vox` at start (`env::check`); here it can only be unset.
        let timeout_ms = crate::env::number("VOX_TOOL_TIMEOUT_MS")
            .ok()
            .flatten()
            .unwrap_or(30_000);
        let ctx = Arc::new(ctx);
        for f in started {
            f(ctx.clone());
        }
        let mut orch = Orchestrator {
            ctx,
            handlers,
            descriptors,
            local_tools: Arc::default(),
            timeout: Duration::from_millis(timeout_ms),
            stopping,
        };
        let local = orch.catalog_tools(&orch.ctx.profile, Caller::LOCAL);
        orch.local_tools = Arc::new(
            local
                .into_iter()
                .filter_map(|d| serde_json::to_value(d).ok())
                .collect(),
        );
        Ok(orch)
    }

    /// The boot report.
    pub fn boot_report(&self) -> &BootReport {
        &self.ctx.boot
    }
    /// The active profile.
    pub fn profile(&self) -> &ProfileSet {
        &self.ctx.profile
    }
    /// The workspace.
    pub fn workspace(&self) -> &Workspace {
        &self.ctx.workspace
    }
    /// The shared context.
    pub fn ctx(&self) -> &Arc<Ctx> {
        &self.ctx
    }

    /// The orchestrator in an `Arc`, reachable from its context ([`Ctx::orchestrator`]) so a
    /// handler may call other tools as its caller would.
    pub fn shared(self) -> Arc<Self> {
        let o = Arc::new(self);
        o.ctx.set_orchestrator(&o);
        o
    }

    /// Forgets what was scoped to a session that ended (its active skill).
    pub fn end_session(&self, session: &str) {
        for g in &self.ctx.hooks().guards {
            g.end_session(session);
        }
    }

    /// The daemon is stopping: each family ends what it runs outside this process (blocking).
    pub fn stopping(&self) {
        for f in &self.stopping {
            f(&self.ctx);
        }
    }

    /// Persists what the observers recorded (blocking; periodically and at shutdown).
    pub fn flush_observers(&self) {
        for o in &self.ctx.hooks().observers {
            o.flush();
        }
    }

    /// The agent a credential belongs to: `Unauthorized` when none (or it retired), or when
    /// this daemon runs no agent fleet.
    pub fn authenticate_agent(&self, credential: &str) -> Result<AgentIdentity, ToolError> {
        let dir = self.ctx.hooks().agents.as_ref().ok_or_else(|| {
            ToolError::unauthorized(
                "an agent credential was given, but this daemon's profile runs no agent fleet",
            )
        })?;
        dir.authenticate(credential)?.ok_or_else(|| {
            ToolError::unauthorized(
                "the agent credential (VOX_AGENT_TOKEN) is unknown, or its agent is retired",
            )
        })
    }

    /// What agent `a` may call on a transport serving `base` (the daemon's profile, or a
    /// gateway's narrower surface): `base` narrowed to the agent's public tools. Tools of
    /// `operator` (or `internal`) exposure are a person's (deciding approvals, spawning agents,
    /// trust overrides): no agent is offered them, whatever its profile.
    /// The catalog tools `caller` may call on `surface`, in name order.
    pub(crate) fn catalog_tools(
        &self,
        surface: &ProfileSet,
        caller: Caller,
    ) -> Vec<&ToolDescriptor> {
        let mut d = self.descriptors.iter().peekable();
        visible_tools(surface, caller, self.ctx.boot.booted_mask)
            .filter_map(|t| {
                while d.peek().is_some_and(|x| x.index < t.index) {
                    d.next();
                }
                d.peek().filter(|x| x.index == t.index).copied()
            })
            .collect()
    }

    /// What agent `a` may call: `base` narrowed to the public tools of the agent's own profile.
    pub fn agent_surface(&self, base: &ProfileSet, a: &AgentIdentity) -> ProfileSet {
        base.intersect(&a.profile.public_only())
    }
}

/// The size of a value's JSON encoding, counted without building the string.
pub fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_the_encoded_length() {
        let v = json!({"key": "ä", "n": [1, 2.5, null], "s": "a\"b"});
        assert_eq!(json_len(&v), serde_json::to_vec(&v).unwrap().len());
    }

    #[test]
    fn assembling_names_missing_steps_and_handlers() {
        let Err(e) = assemble(vec![]) else {
            panic!("an empty family list assembled")
        };
        assert!(e.contains("boot step db has no function"), "{e}");
        assert!(
            e.contains("catalog tool vox_memory_store has no handler"),
            "{e}"
        );
    }
}
