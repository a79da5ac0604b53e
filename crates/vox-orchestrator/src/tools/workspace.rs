//! `vox_workspace_mcp_refresh`: rescan the workspace's `.vox` files.

use super::{HandlerEntry, blocking};
use crate::call::{CallCtx, LogLevel};
use crate::orchestrator::{Ctx, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

fn refresh(ctx: &Ctx, call: &CallCtx, _a: NoArgs) -> Result<Value, ToolError> {
    let wt = ctx.workspace_tools.as_ref().ok_or_else(|| {
        ToolError::Unavailable("workspace tools are served under the dev profile only".into())
    })?;
    let (report, changed) = wt.refresh(&|done, total| {
        call.progress(
            done as f64,
            Some(total as f64),
            Some(format!("compiled {done} of {total} .vox files")),
        )
    });
    for e in &report.errors {
        call.log(
            LogLevel::Warning,
            "workspace",
            format!("{} not loaded: {}", e.file, e.diagnostic),
        );
    }
    if changed {
        crate::workspace_tools::notify_list_changed(ctx);
    }
    let mut v = serde_json::to_value(report).map_err(|e| ToolError::Internal(e.to_string()))?;
    v["changed"] = Value::Bool(changed);
    Ok(v)
}

pub fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![("vox_workspace_mcp_refresh", blocking(refresh))]
}
