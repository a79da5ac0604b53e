//! `vox_memory_*`: durable key/value memories.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vox_core::HandlerEntry;
use vox_core::family::{quick, typed};
use vox_core::{Ctx, ToolError};
use vox_store::Memory;
use vox_tools_common::bounded;
use vox_tools_common::store::db;

const MAX_KEY: usize = 512;
const MAX_VALUE: usize = 256 * 1024;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StoreArgs {
    /// The key, e.g. `project/deploy-target` (at most 512 bytes).
    key: String,
    /// The text to remember (at most 256 KiB).
    value: String,
    /// Optional tags for filtering.
    #[serde(default)]
    tags: Vec<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct KeyArgs {
    /// The exact key.
    key: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// Only keys starting with this prefix.
    prefix: Option<String>,
    /// Only memories with this tag.
    tag: Option<String>,
    /// The `next_cursor` of a previous page.
    cursor: Option<String>,
    /// Page size (default 50, at most 500).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct Stored {
    stored: bool,
    /// Whether a memory under this key was overwritten.
    replaced: bool,
    key: String,
    updated_at: i64,
}

/// `found` with the memory, or not `found` with the key asked for.
#[derive(Serialize, JsonSchema)]
struct Recalled {
    found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<Memory>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Page {
    memories: Vec<Memory>,
    /// Pass as `cursor` for the next page; null on the last one.
    next_cursor: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Forgotten {
    /// Whether a memory was removed.
    forgotten: bool,
    key: String,
}

fn store(ctx: &Ctx, a: StoreArgs) -> Result<Stored, ToolError> {
    bounded("key", &a.key, MAX_KEY)?;
    if a.value.len() > MAX_VALUE {
        return Err(ToolError::invalid_arguments(format!(
            "`value` is {} bytes; the limit is {MAX_VALUE}",
            a.value.len()
        )));
    }
    if a.tags.len() > 32 || a.tags.iter().any(|t| t.is_empty() || t.len() > 64) {
        return Err(ToolError::invalid_arguments(
            "`tags`: at most 32 tags of 1 to 64 bytes",
        ));
    }
    let (m, replaced) = vox_tools_common::store::knowledge(ctx)?
        .memory_put(&a.key, &a.value, &a.tags)
        .map_err(db)?;
    crate::search::memory_indexed(ctx, &a.key, Some((&a.value, &a.tags)))?;
    Ok(Stored {
        stored: true,
        replaced,
        key: m.key,
        updated_at: m.updated_at,
    })
}

fn recall(ctx: &Ctx, _call: &vox_core::CallCtx, a: KeyArgs) -> Result<Recalled, ToolError> {
    bounded("key", &a.key, MAX_KEY)?;
    Ok(
        match vox_tools_common::store::knowledge(ctx)?
            .memory_get(&a.key)
            .map_err(db)?
        {
            Some(m) => Recalled {
                found: true,
                memory: Some(m),
                key: None,
            },
            None => Recalled {
                found: false,
                memory: None,
                key: Some(a.key),
            },
        },
    )
}

fn list(ctx: &Ctx, a: ListArgs) -> Result<Page, ToolError> {
    let limit = a.limit.unwrap_or(50).clamp(1, 500) as usize;
    let mut page = vox_tools_common::store::knowledge(ctx)?
        .memory_list(
            a.prefix.as_deref(),
            a.tag.as_deref(),
            a.cursor.as_deref(),
            limit + 1,
        )
        .map_err(db)?;
    let next = (page.len() > limit).then(|| {
        page.truncate(limit);
        page.last().map(|m| m.key.clone())
    });
    Ok(Page {
        memories: page,
        next_cursor: next.flatten(),
    })
}

fn forget(ctx: &Ctx, a: KeyArgs) -> Result<Forgotten, ToolError> {
    bounded("key", &a.key, MAX_KEY)?;
    let removed = vox_tools_common::store::knowledge(ctx)?
        .memory_delete(&a.key)
        .map_err(db)?;
    if removed {
        crate::search::memory_indexed(ctx, &a.key, None)?;
    }
    Ok(Forgotten {
        forgotten: removed,
        key: a.key,
    })
}

pub fn family() -> vox_core::Family {
    vox_core::Family {
        name: "memory",
        steps: vec![(vox_mcp_registry::BootStep::Memory, boot)],
        handlers: handlers(),
        ..vox_core::Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_memory_store", typed(store)),
        (
            "vox_memory_recall",
            quick(recall, vox_tools_common::store::free),
        ),
        ("vox_memory_list", typed(list)),
        ("vox_memory_forget", typed(forget)),
        ("vox_memory_search", typed(search)),
    ]
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Words to look for in keys, values and tags.
    query: String,
    /// Most results (default 10, at most 100).
    limit: Option<u32>,
}

fn search(ctx: &Ctx, a: SearchArgs) -> Result<crate::search::MemoryHits, ToolError> {
    crate::search::memory_search(ctx, &a.query, a.limit.unwrap_or(10).clamp(1, 100) as usize)
}

fn boot(ctx: &mut Ctx) -> Result<vox_core::StepDone, String> {
    Ok(vox_core::StepDone::Ready(
        if ctx
            .get::<std::sync::Arc<dyn vox_store::pg::KnowledgeRepos>>()
            .is_some()
        {
            "store-backed".into()
        } else {
            "no store: memory tools stay down".into()
        },
    ))
}
