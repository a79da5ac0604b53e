//! The audit trail. A call observer keeps one [`AuditRecord`] per finished tool call (who
//! called: principal, role, loopback, agent, mesh nodes; the tool, its source and upstream
//! server; the decision and its code; how long it took), buffered and written to the journey
//! store at each observer flush (every 500 ms in the daemon), the newest [`KEEP`] kept.
//! Arguments are kept only for the tools of upstream servers whose `servers.toml` entry says
//! `audit_arguments = true`; results never. `vox_audit_query` and `vox audit` read it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vox_core::family::blocking;
use vox_core::{CallCtx, CallObserver, Ctx, Family, ToolError, ToolOutcome};
use vox_mcp_registry::{Role, SEPARATOR, tool_by_name};
use vox_store::{AuditRecord, Store};
use vox_tools_common::store::{db, store};
use vox_tools_upstream::Upstreams;

/// How many records the trail keeps (the oldest go first).
pub const KEEP: i64 = 100_000;
/// Records waiting for a flush beyond which new ones are dropped (and counted).
const MAX_BUFFERED: usize = 50_000;

/// The observer: records buffered until the next flush.
pub struct Audit {
    store: Arc<Store>,
    buffer: Mutex<Vec<AuditRecord>>,
    dropped: std::sync::atomic::AtomicU64,
    /// The upstream servers, asked which keep their calls' arguments (so a reload of
    /// `servers.toml` counts).
    upstreams: Option<Arc<Upstreams>>,
}

fn clip(s: &str) -> String {
    s.chars().take(200).collect()
}

/// Where a tool comes from, and its upstream server.
fn source_of(tool: &str) -> (&'static str, Option<String>) {
    if tool_by_name(tool).is_some() {
        ("catalog", None)
    } else if let Some((server, _)) = tool.split_once(SEPARATOR) {
        ("upstream", Some(clip(server)))
    } else if tool.starts_with("vox_skill_") {
        ("skill", None)
    } else {
        ("workspace", None)
    }
}

impl CallObserver for Audit {
    fn record(
        &self,
        call: &CallCtx,
        tool: &str,
        args: Option<&Value>,
        outcome: &ToolOutcome,
        latency: Duration,
    ) {
        let scope = call.scope();
        let (decision, code) = match outcome {
            ToolOutcome::Ok(_) | ToolOutcome::Content(_) => ("allowed", "ok"),
            ToolOutcome::Denied(d) => ("denied", d.code.as_str()),
            ToolOutcome::Failed(e) => ("allowed", e.code()),
        };
        let (source, server) = source_of(tool);
        let arguments = args
            .filter(|_| server.as_deref().is_some_and(|s| self.keeps_arguments(s)))
            .cloned();
        let record = AuditRecord {
            seq: 0,
            at: vox_store::now_ms(),
            principal: clip(call.principal()),
            role: match scope.caller.role {
                Role::Write => "write".into(),
                Role::Read => "read".into(),
            },
            loopback: scope.caller.loopback,
            agent: scope.agent.as_deref().map(clip),
            mesh_node: (!scope.mesh_origin.is_empty()).then(|| {
                clip(
                    &scope
                        .mesh_origin
                        .iter()
                        .map(|n| &**n)
                        .collect::<Vec<_>>()
                        .join(">"),
                )
            }),
            tool: clip(tool),
            source: source.into(),
            server,
            decision: decision.into(),
            code: code.into(),
            duration_us: latency.as_micros().min(i64::MAX as u128) as i64,
            arguments,
        };
        let mut buffer = self.buffer.lock().unwrap_or_else(|p| p.into_inner());
        if buffer.len() >= MAX_BUFFERED {
            self.dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        buffer.push(record);
    }

    fn wants_arguments(&self, tool: &str) -> bool {
        tool.split_once(SEPARATOR)
            .is_some_and(|(server, _)| self.keeps_arguments(server))
    }

    fn flush(&self) {
        let batch = std::mem::take(&mut *self.buffer.lock().unwrap_or_else(|p| p.into_inner()));
        let dropped = self.dropped.swap(0, std::sync::atomic::Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(target: "vox.audit", dropped, "audit records dropped: the store fell behind");
        }
        if let Err(e) = self.store.audit_append(&batch, KEEP) {
            tracing::warn!(target: "vox.audit", "{} audit records not written: {e}", batch.len());
        }
    }
}

impl Audit {
    /// Whether upstream server `server` opted in to keeping its calls' arguments.
    fn keeps_arguments(&self, server: &str) -> bool {
        self.upstreams
            .as_ref()
            .is_some_and(|u| u.audits_arguments(server))
    }
}

fn after_boot(ctx: &mut Ctx) {
    let Some(store) = ctx.get::<Arc<Store>>().cloned() else {
        return;
    };
    let audit = Arc::new(Audit {
        store,
        buffer: Mutex::default(),
        dropped: Default::default(),
        upstreams: ctx.get::<Arc<Upstreams>>().cloned(),
    });
    ctx.add_call_observer(audit.clone());
    ctx.insert(audit);
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct QueryArgs {
    /// Records after this position (`next` of an earlier answer); the newest `limit` when left
    /// out.
    after: Option<i64>,
    /// At most this many (1 to 1000, default 100).
    limit: Option<u32>,
    /// One tool's name, or a prefix ending in `*` (`github__*`).
    tool: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Page {
    /// Oldest first.
    records: Vec<AuditRecord>,
    /// The position to ask after for the records that follow these.
    next: i64,
}

fn query(ctx: &Ctx, _call: &CallCtx, a: QueryArgs) -> Result<Page, ToolError> {
    let limit = i64::from(a.limit.unwrap_or(100));
    if !(1..=1000).contains(&limit) {
        return Err(ToolError::invalid_arguments("limit: between 1 and 1000"));
    }
    if let Some(t) = &a.tool
        && (t.is_empty() || t.len() > 200)
    {
        return Err(ToolError::invalid_arguments("tool: 1 to 200 characters"));
    }
    // What the calls before this one left in the buffer is in the answer.
    if let Some(audit) = ctx.get::<Arc<Audit>>() {
        audit.flush();
    }
    let s = store(ctx)?;
    let records = s
        .audit_query(a.after, limit, a.tool.as_deref())
        .map_err(db)?;
    let next = records.last().map_or(a.after.unwrap_or(0), |r| r.seq);
    Ok(Page { records, next })
}

/// The audit family.
pub fn families() -> Vec<Family> {
    vec![Family {
        name: "audit",
        handlers: vec![("vox_audit_query", blocking(query))],
        after_boot: Some(after_boot),
        ..Family::default()
    }]
}
