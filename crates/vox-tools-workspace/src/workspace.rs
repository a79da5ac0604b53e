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
    /// Prompts a prompt of another provider hides (a workspace prompt and an installed skill
    /// of one name: `prompts/get` answers the first provider's). `file` is the hidden one
    /// (`skill:<id>` for a skill), `kept_from` the one served.
    hidden_prompts: Vec<vox_workspace_mcp::Skipped>,
}

/// The prompt-name collisions between the workspace's `.vox` prompts and the other prompt
/// providers (installed skills), in provider order: the first provider of a name keeps it.
fn hidden_prompts(ctx: &Ctx, wt: &Arc<WorkspaceTools>) -> Vec<vox_workspace_mcp::Skipped> {
    let surface = wt.surface();
    let providers = &ctx.hooks().dynamic;
    let is_workspace =
        |p: &Arc<dyn vox_core::DynamicTools>| std::ptr::addr_eq(Arc::as_ptr(p), Arc::as_ptr(wt));
    let from = |workspace: bool, name: &str| {
        if workspace {
            surface
                .prompts
                .get(name)
                .map_or_else(|| "workspace".to_owned(), |p| p.file.clone())
        } else {
            format!("skill:{name}")
        }
    };
    let mut first: std::collections::HashMap<String, bool> = Default::default();
    let mut hidden = vec![];
    for p in providers {
        let workspace = is_workspace(p);
        for d in p.prompts() {
            let Some(name) = d["name"].as_str() else {
                continue;
            };
            match first.get(name) {
                None => {
                    first.insert(name.to_owned(), workspace);
                }
                Some(&kept) if kept != workspace => hidden.push(vox_workspace_mcp::Skipped {
                    name: name.to_owned(),
                    file: from(workspace, name),
                    kept_from: Some(from(kept, name)),
                }),
                Some(_) => {}
            }
        }
    }
    hidden
}

fn refresh(ctx: &Ctx, call: &CallCtx, _a: NoArgs) -> Result<Refreshed, ToolError> {
    let wt = ctx.get::<Arc<WorkspaceTools>>().ok_or_else(|| {
        ToolError::unavailable("workspace tools are served under the dev profile only")
    })?;
    let r = wt.refresh(&|done, total| {
        call.progress(
            done as f64,
            Some(total as f64),
            Some(format!("compiled {done} of {total} .vox files")),
        );
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
    let hidden_prompts = hidden_prompts(ctx, wt);
    for h in &hidden_prompts {
        call.log(
            LogLevel::Warning,
            "workspace",
            format!(
                "prompt {} of {} is hidden by the one of {}",
                h.name,
                h.file,
                h.kept_from.as_deref().unwrap_or_default()
            ),
        );
    }
    Ok(Refreshed {
        report,
        changed: r.changed,
        hidden_prompts,
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
