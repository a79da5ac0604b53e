//! `vox_boot_report` (internal): the daemon's own state.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use vox_core::HandlerEntry;
use vox_core::family::typed;
use vox_core::{Ctx, ToolError};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

fn boot_report(ctx: &Ctx, _a: NoArgs) -> Result<Value, ToolError> {
    Ok(json!({
        "profile": ctx.profile.canonical(),
        "workspace": ctx.workspace.root,
        "workspace_id": ctx.workspace.id,
        "boot": ctx.boot,
    }))
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
