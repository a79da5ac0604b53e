//! `vox_boot_report` (internal): the daemon's own state.

use super::{HandlerEntry, typed};
use crate::orchestrator::{Ctx, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

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

pub fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![("vox_boot_report", typed(boot_report))]
}
