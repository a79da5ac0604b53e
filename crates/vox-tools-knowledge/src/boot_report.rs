//! `vox_boot_report` (internal): the daemon's own state.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vox_core::HandlerEntry;
use vox_core::family::typed;
use vox_core::{Ctx, ToolError};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Serialize, JsonSchema)]
struct Report {
    /// The canonical profile.
    profile: String,
    /// The workspace root.
    workspace: std::path::PathBuf,
    workspace_id: String,
    boot: vox_core::BootReport,
}

fn boot_report(ctx: &Ctx, _a: NoArgs) -> Result<Report, ToolError> {
    Ok(Report {
        profile: ctx.profile.canonical().to_string(),
        workspace: ctx.workspace.root.clone(),
        workspace_id: ctx.workspace.id.clone(),
        boot: ctx.boot.clone(),
    })
}

pub fn family() -> vox_core::Family {
    vox_core::Family {
        name: "boot_report",
        handlers: handlers(),
        ..vox_core::Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![("vox_boot_report", typed(boot_report))]
}
