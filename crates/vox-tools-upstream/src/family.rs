//! The `upstream` family: the `upstream_servers` boot step (reads `servers.toml`, registers
//! the servers as the core's upstream tools, starts those that start at boot once the daemon
//! runs, stops them all with it) and the operator's tools `vox_upstream_status` and
//! `vox_upstream_approve`.

use crate::surface::{ServerState, Upstreams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use vox_core::family::blocking;
use vox_core::{CallCtx, Ctx, Family, StepDone, ToolError};
use vox_mcp_registry::BootStep;
use vox_store::{Store, UpstreamPin};
use vox_tools_common::store::{db, store};

fn boot(ctx: &mut Ctx) -> Result<StepDone, String> {
    let sources = crate::surface::Sources {
        vox_dir: ctx.workspace.vox_dir.clone(),
        home: crate::config::user_vox_dir(),
    };
    let configs = crate::config::load(&sources.vox_dir, sources.home.as_deref())
        .map_err(|e| e.to_string())?;
    let n = configs.len();
    let store = ctx.get::<Arc<Store>>().cloned();
    let upstreams = Upstreams::new(configs, Some(sources), store, ctx.notifier.clone());
    ctx.set_upstream_tools(upstreams.clone());
    ctx.insert(upstreams);
    Ok(StepDone::Ready(format!(
        "{n} upstream server(s) declared (.vox/servers.toml, ~/.vox/servers.toml)"
    )))
}

fn on_started(ctx: Arc<Ctx>) {
    if let Some(u) = ctx.get::<Arc<Upstreams>>()
        && tokio::runtime::Handle::try_current().is_ok()
    {
        u.start_at_boot();
    }
}

fn on_stopping(ctx: &Ctx) {
    if let Some(u) = ctx.get::<Arc<Upstreams>>() {
        u.stop();
    }
}

fn upstreams(ctx: &Ctx) -> Result<&Arc<Upstreams>, ToolError> {
    ctx.require::<Arc<Upstreams>>("the upstream servers")
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatusArgs {
    /// One server's id (all by default).
    server: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Status {
    /// Every server (or the one asked for), in id order.
    servers: Vec<ServerState>,
}

fn status(ctx: &Ctx, _call: &CallCtx, a: StatusArgs) -> Result<Status, ToolError> {
    let u = upstreams(ctx)?;
    if let Some(s) = &a.server
        && !u.has_server(s)
    {
        return Err(ToolError::not_found(format!("no upstream server {s}")));
    }
    let mut servers = u.status();
    servers.retain(|s| a.server.as_ref().is_none_or(|id| &s.id == id));
    Ok(Status { servers })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ApproveArgs {
    /// The server's id.
    server: String,
    /// One tool's own name on that server (every withheld tool of the server by default).
    tool: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Approved {
    /// The server's pins after the approval.
    pins: Vec<UpstreamPin>,
}

fn approve(ctx: &Ctx, call: &CallCtx, a: ApproveArgs) -> Result<Approved, ToolError> {
    let u = upstreams(ctx)?;
    if !u.has_server(&a.server) {
        return Err(ToolError::not_found(format!(
            "no upstream server {}",
            a.server
        )));
    }
    let pins = store(ctx)?
        .upstream_approve(&a.server, a.tool.as_deref(), call.principal())
        .map_err(db)?;
    if let Some(t) = &a.tool
        && pins.is_empty()
    {
        return Err(ToolError::not_found(format!(
            "upstream server {} has listed no tool {t}",
            a.server
        )));
    }
    u.approved(&a.server)?;
    Ok(Approved { pins })
}

/// The family.
pub fn family() -> Family {
    Family {
        name: "upstream",
        steps: vec![(BootStep::UpstreamServers, boot)],
        handlers: vec![
            ("vox_upstream_status", blocking(status)),
            ("vox_upstream_approve", blocking(approve)),
        ],
        on_started: Some(on_started),
        on_stopping: Some(on_stopping),
        ..Family::default()
    }
}
