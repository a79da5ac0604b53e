//! Durable key/value memories with tags.

use crate::{Store, StoreError, now_ms};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

/// One memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Memory {
    /// The memory's key, unique in the store.
    pub key: String,
    /// What is remembered.
    pub value: String,
    /// Labels for filtering and search.
    pub tags: Vec<String>,
    /// When the key was first stored, in ms since the Unix epoch.
    pub created_at: i64,
    /// When it was last stored (value or tags), in ms since the Unix epoch.
    pub updated_at: i64,
}

fn row_to_memory(r: &rusqlite::Row<'_>) -> rusqlite::Result<Memory> {
    let tags: String = r.get(2)?;
    Ok(Memory {
        key: r.get(0)?,
        value: r.get(1)?,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        created_at: r.get(3)?,
        updated_at: r.get(4)?,
    })
}

const COLUMNS: &str = "key, value, tags, created_at, updated_at";

impl Store {
    /// Stores or overwrites a memory; returns it and whether it replaced an existing one.
    pub fn memory_put(
        &self,
        key: &str,
        value: &str,
        tags: &[String],
    ) -> Result<(Memory, bool), StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::MemoryRepo::memory_put(&**p, key, value, tags);
        }
        let now = now_ms();
        let tags_json = serde_json::to_string(tags).unwrap_or_else(|_| "[]".into());
        let mut c = self.lite()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let existed: Option<i64> = tx
            .query_row(
                "SELECT created_at FROM memories WHERE key = ?1",
                [key],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        tx.execute(
            "INSERT INTO memories (key, value, tags, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value, tags = excluded.tags, updated_at = excluded.updated_at",
            params![key, value, tags_json, now],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok((
            Memory {
                key: key.to_owned(),
                value: value.to_owned(),
                tags: tags.to_vec(),
                created_at: existed.unwrap_or(now),
                updated_at: now,
            },
            existed.is_some(),
        ))
    }

    /// The memory under `key`, if any.
    pub fn memory_get(&self, key: &str) -> Result<Option<Memory>, StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::MemoryRepo::memory_get(&**p, key);
        }
        let c = self.lite()?;
        let mut stmt = c
            .prepare_cached(&format!("SELECT {COLUMNS} FROM memories WHERE key = ?1"))
            .map_err(|e| self.err(e))?;
        stmt.query_row([key], row_to_memory)
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Memories in key order after `after`, under `prefix`, with `tag`, at most `limit`.
    pub fn memory_list(
        &self,
        prefix: Option<&str>,
        tag: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Memory>, StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::MemoryRepo::memory_list(&**p, prefix, tag, after, limit);
        }
        let c = self.lite()?;
        let mut stmt = c
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM memories
                 WHERE (?1 IS NULL OR substr(key, 1, length(?1)) = ?1)
                   AND (?2 IS NULL OR EXISTS (SELECT 1 FROM json_each(memories.tags) WHERE value = ?2))
                   AND (?3 IS NULL OR key > ?3)
                 ORDER BY key LIMIT ?4"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![prefix, tag, after, limit as i64], row_to_memory)
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Every memory (for building the search index).
    pub fn memory_all(&self) -> Result<Vec<Memory>, StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::MemoryRepo::memory_all(&**p);
        }
        let _long = self.long();
        self.memory_list(None, None, None, usize::MAX >> 1)
    }

    /// Deletes the memory under `key`; returns whether there was one.
    pub fn memory_delete(&self, key: &str) -> Result<bool, StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::MemoryRepo::memory_delete(&**p, key);
        }
        let c = self.lite()?;
        let n = c
            .execute("DELETE FROM memories WHERE key = ?1", [key])
            .map_err(|e| self.err(e))?;
        Ok(n > 0)
    }
}
