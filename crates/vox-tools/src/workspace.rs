//! `vox_workspace_mcp_refresh`: rescan the workspace's `.vox` files.

use crate::workspace_tools::WorkspaceTools;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use vox_core::HandlerEntry;
use vox_core::family::blocking;
use vox_core::{CallCtx, LogLevel};
use vox_core::{Ctx, ToolError};
use vox_mcp_registry::BootStep;

/// The compiler subsystem; under `dev` it also brings the federated workspace tools, asked
/// first for names beyond the catalog.
fn boot(ctx: &mut Ctx) -> Result<vox_core::StepDone, String> {
    if !ctx.profile.is_dev() {
        return Ok(vox_core::StepDone::Ready("vox-lang".into()));
    }
    let wt = Arc::new(WorkspaceTools::new(ctx.workspace.root.clone()));
    ctx.insert(wt.clone());
    ctx.add_dynamic_tools(wt);
    Ok(vox_core::StepDone::Ready(
        "vox-lang; workspace tools scan on first use".into(),
    ))
}

/// Setting up a recursive watch walks the tree: keep it off the boot path.
fn start_watching(ctx: Arc<Ctx>) {
    std::thread::spawn(move || crate::workspace_tools::watch(ctx));
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// The scan's report and whether what clients see changed.
#[derive(Serialize, JsonSchema)]
struct Refreshed {
    #[serde(flatten)]
    report: vox_workspace_mcp::RefreshReport,
    /// Whether a tool or resource name, description, schema or file changed.
    changed: bool,
}

fn refresh(ctx: &Ctx, call: &CallCtx, _a: NoArgs) -> Result<Refreshed, ToolError> {
    let wt = ctx.get::<Arc<WorkspaceTools>>().ok_or_else(|| {
        ToolError::Unavailable("workspace tools are served under the dev profile only".into())
    })?;
    let r = wt.refresh(&|done, total| {
        call.progress(
            done as f64,
            Some(total as f64),
            Some(format!("compiled {done} of {total} .vox files")),
        )
    });
    WorkspaceTools::announce(ctx, &r);
    let report = r.report;
    for e in &report.errors {
        let loaded = report
            .diagnostics
            .iter()
            .any(|d| d.file == e.file && d.loaded);
        let what = if loaded {
            "has errors (what compiled is served)"
        } else {
            "not loaded"
        };
        call.log(
            LogLevel::Warning,
            "workspace",
            format!("{} {what}: {}", e.file, e.diagnostic),
        );
    }
    Ok(Refreshed {
        report,
        changed: r.changed,
    })
}

pub fn family() -> vox_core::Family {
    vox_core::Family {
        name: "workspace",
        steps: vec![(BootStep::Compiler, boot)],
        handlers: handlers(),
        on_started: Some(start_watching),
        ..vox_core::Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![("vox_workspace_mcp_refresh", blocking(refresh))]
}
