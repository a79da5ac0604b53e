//! The `db` subsystem: the workspace journey store every durable family uses: SQLite (WAL) in
//! the workspace by default; with `VOX_DB_URL=postgres://…`, PostgreSQL shared by every
//! replica serving the workspace.

use std::sync::Arc;
use vox_core::{Ctx, Family, StepDone, ToolError};
use vox_mcp_registry::BootStep;
use vox_store::pg::KnowledgeRepos;
use vox_store::{Store, StoreError};

/// The store, or the error a handler returns without it.
pub fn store(ctx: &Ctx) -> Result<&Store, ToolError> {
    Ok(ctx.require::<Arc<Store>>("the journey store")?.as_ref())
}

/// The knowledge profile's repositories, on SQLite or PostgreSQL.
pub fn knowledge(ctx: &Ctx) -> Result<&dyn KnowledgeRepos, ToolError> {
    Ok(ctx
        .require::<Arc<dyn KnowledgeRepos>>("the journey store")?
        .as_ref())
}

/// Whether a quick store operation may run inline on the async worker: yes on SQLite unless a
/// long one (a scan, a batch write) is under way, which it must not stall a worker behind;
/// never on PostgreSQL (a network round trip).
pub fn free(ctx: &Ctx) -> bool {
    store(ctx).is_ok_and(|s| !s.busy())
}

/// A store error as a tool error (not found and conflicts keep their codes).
pub fn db(e: StoreError) -> ToolError {
    match e {
        StoreError::NotFound(m) => ToolError::not_found(m),
        StoreError::Conflict(m) => ToolError::conflict(m),
        StoreError::Invalid(m) => ToolError::invalid_arguments(m),
        other => ToolError::internal(other.to_string()),
    }
}

fn open(ctx: &mut Ctx) -> Result<StepDone, String> {
    if let Some(url) = std::env::var("VOX_DB_URL").ok().filter(|u| !u.is_empty()) {
        return open_postgres(ctx, &url);
    }
    let path = ctx.workspace.db_path();
    let v = serve(ctx, Store::open(&path).map_err(|e| e.to_string())?)?;
    Ok(StepDone::Ready(format!("{} (schema {v})", path.display())))
}

/// Puts `store` in the `Ctx` (itself and as the knowledge repositories) and on /metrics
/// (`vox_store_info{backend}`: its schema version; the store's own counters are
/// `vox_store_transactions_total`, `vox_store_errors_total`, and on PostgreSQL
/// `vox_store_write_lock_wait_seconds`, `vox_store_pool_connections`); its schema version.
fn serve(ctx: &mut Ctx, store: Store) -> Result<i64, String> {
    let v = store.schema_version().map_err(|e| e.to_string())?;
    metrics::gauge!("vox_store_info", "backend" => store.backend_name()).set(v as f64);
    let store = Arc::new(store);
    ctx.insert(store.clone() as Arc<dyn KnowledgeRepos>);
    ctx.insert(store);
    Ok(v)
}

fn open_postgres(ctx: &mut Ctx, url: &str) -> Result<StepDone, String> {
    if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
        return Err(
            "VOX_DB_URL: only postgres:// URLs are read (SQLite is the default; VOX_DB_PATH moves its file)"
                .into(),
        );
    }
    let store = Store::open_postgres(url).map_err(|e| e.to_string())?;
    let id = store
        .store_id()
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let shown = store.location();
    let v = serve(ctx, store)?;
    Ok(StepDone::Ready(format!(
        "PostgreSQL {shown} (schema {v}, store {id}, shared by every replica)"
    )))
}

/// The `store` family: its boot steps and tool handlers.
pub fn family() -> Family {
    Family {
        name: "store",
        steps: vec![(BootStep::Db, open)],
        ..Family::default()
    }
}
