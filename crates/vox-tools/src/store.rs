//! The `db` subsystem: the workspace journey store (SQLite, WAL) every durable family uses.

use std::sync::Arc;
use vox_core::{Ctx, Family, StepDone, ToolError};
use vox_mcp_registry::BootStep;
use vox_store::{Store, StoreError};

/// The store, or the error a handler returns without it.
pub fn store(ctx: &Ctx) -> Result<&Store, ToolError> {
    Ok(ctx.require::<Arc<Store>>("the journey store")?.as_ref())
}

/// Whether a quick store operation may run inline on the async worker: yes unless a long one
/// (a scan, a batch write) is under way, which it must not stall a worker behind.
pub fn free(ctx: &Ctx) -> bool {
    store(ctx).is_ok_and(|s| !s.busy())
}

/// A store error as a tool error (not found and conflicts keep their codes).
pub fn db(e: StoreError) -> ToolError {
    match e {
        StoreError::NotFound(m) => ToolError::NotFound(m),
        StoreError::Conflict(m) => ToolError::Conflict(m),
        StoreError::Invalid(m) => ToolError::InvalidArguments(m),
        other => ToolError::Internal(other.to_string()),
    }
}

fn open(ctx: &mut Ctx) -> Result<StepDone, String> {
    let path = ctx.workspace.db_path();
    let store = Store::open(&path).map_err(|e| e.to_string())?;
    let v = store.schema_version().map_err(|e| e.to_string())?;
    ctx.insert(Arc::new(store));
    Ok(StepDone::Ready(format!("{} (schema {v})", path.display())))
}

pub fn family() -> Family {
    Family {
        name: "store",
        steps: vec![(BootStep::Db, open)],
        ..Family::default()
    }
}
