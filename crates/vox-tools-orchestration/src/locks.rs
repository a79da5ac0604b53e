//! File locks: `vox_claim_file`, `vox_release_file`, `vox_transfer_file`,
//! `vox_check_file_owner`, `vox_my_files`, `vox_lock_status`, `vox_conflicts`. A lock's lease
//! runs from its claim and from each of its holder's heartbeats; a lapsed one is free.

use crate::orchestration::{agent_for, changed, dispatch};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vox_core::family::{blocking, quick};
use vox_core::{CallCtx, Ctx, Family, ToolError};
use vox_store::{Assignment, Claim, FileLock, LockConflict};
use vox_tools_common::store::{db, free, store};

/// The default lease (seconds).
const DEFAULT_LEASE_SECS: u32 = 300;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ClaimArgs {
    /// Workspace-relative path.
    path: String,
    /// The agent claiming it (the operator names it; an agent is itself).
    agent_id: Option<String>,
    /// The task it is for: the lock is released when that task ends.
    task_id: Option<i64>,
    /// How long the lease runs without a heartbeat (default 300, 1 to 86400).
    lease_secs: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReleaseArgs {
    path: String,
    agent_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Released {
    /// Whether the agent held it.
    released: bool,
    path: String,
    assigned: Vec<Assignment>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TransferArgs {
    path: String,
    /// The agent receiving it.
    to_agent: String,
    /// The agent giving it (the operator names it; an agent is itself).
    agent_id: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PathArgs {
    path: String,
}

#[derive(Serialize, JsonSchema)]
struct Owner {
    path: String,
    /// The live lock, or null when the file is free.
    lock: Option<FileLock>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct MineArgs {
    agent_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Locks {
    locks: Vec<FileLock>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StatusArgs {}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ConflictArgs {
    /// Past conflicts too (default: only those whose holder still holds the file).
    #[serde(default)]
    all: bool,
    /// At most this many (default 100, at most 1000).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct Conflicts {
    /// Newest first: who holds the file and who asked for it.
    conflicts: Vec<LockConflict>,
}

fn claim(ctx: &Ctx, call: &CallCtx, a: ClaimArgs) -> Result<Claim, ToolError> {
    let agent = agent_for(call, a.agent_id)?;
    let secs = a.lease_secs.unwrap_or(DEFAULT_LEASE_SECS);
    if !(1..=86_400).contains(&secs) {
        return Err(ToolError::invalid_arguments(format!(
            "`lease_secs` is 1 to 86400, not {secs}"
        )));
    }
    let claim = store(ctx)?
        .lock_claim(&a.path, &agent, a.task_id, i64::from(secs) * 1000)
        .map_err(db)?;
    changed(ctx);
    Ok(claim)
}

fn release(ctx: &Ctx, call: &CallCtx, a: ReleaseArgs) -> Result<Released, ToolError> {
    let agent = agent_for(call, a.agent_id)?;
    let path = vox_store::normalize_path(&a.path).map_err(db)?;
    let released = store(ctx)?.lock_release(&path, &agent).map_err(db)?;
    Ok(Released {
        released,
        path,
        // A task waiting for the file may go now.
        assigned: dispatch(ctx)?,
    })
}

fn transfer(ctx: &Ctx, call: &CallCtx, a: TransferArgs) -> Result<FileLock, ToolError> {
    let from = agent_for(call, a.agent_id)?;
    let lock = store(ctx)?
        .lock_transfer(&a.path, &from, &a.to_agent)
        .map_err(db)?;
    changed(ctx);
    Ok(lock)
}

fn owner(ctx: &Ctx, _call: &CallCtx, a: PathArgs) -> Result<Owner, ToolError> {
    let path = vox_store::normalize_path(&a.path).map_err(db)?;
    Ok(Owner {
        lock: store(ctx)?.lock_owner(&path).map_err(db)?,
        path,
    })
}

fn mine(ctx: &Ctx, call: &CallCtx, a: MineArgs) -> Result<Locks, ToolError> {
    let agent = agent_for(call, a.agent_id)?;
    Ok(Locks {
        locks: store(ctx)?.locks(Some(&agent), 10_000).map_err(db)?,
    })
}

fn status(ctx: &Ctx, _call: &CallCtx, _a: StatusArgs) -> Result<Locks, ToolError> {
    Ok(Locks {
        locks: store(ctx)?.locks(None, 10_000).map_err(db)?,
    })
}

fn conflicts(ctx: &Ctx, _call: &CallCtx, a: ConflictArgs) -> Result<Conflicts, ToolError> {
    let limit = a.limit.unwrap_or(100).clamp(1, 1000) as usize;
    Ok(Conflicts {
        conflicts: store(ctx)?.lock_conflicts(a.all, limit).map_err(db)?,
    })
}

pub fn family() -> Family {
    Family {
        name: "locks",
        handlers: vec![
            ("vox_claim_file", quick(claim, free)),
            ("vox_release_file", quick(release, free)),
            ("vox_transfer_file", quick(transfer, free)),
            ("vox_check_file_owner", quick(owner, free)),
            ("vox_my_files", blocking(mine)),
            ("vox_lock_status", blocking(status)),
            ("vox_conflicts", blocking(conflicts)),
        ],
        ..Family::default()
    }
}
