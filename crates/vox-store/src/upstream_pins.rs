//! Pins of upstream MCP servers' tool definitions: the hash of the definition a person
//! approved (`approved`, `None` until someone does) and of the one last seen (`seen`, with the
//! definition itself so a person sees what they approve). A tool is served only while the two
//! agree.

use crate::sql::{OptionalExtension, SqlExt, params};
use crate::{Store, StoreError, now_ms};
use serde::Serialize;

/// One tool's pin.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct UpstreamPin {
    /// The server id.
    pub server: String,
    /// The tool's own name on that server.
    pub tool: String,
    /// The hash of the approved definition (`sha256:<hex>`), `None` while none is.
    pub approved: Option<String>,
    /// The hash of the definition last seen.
    pub seen: String,
    /// The definition last seen (name, description, schemas, annotations).
    pub definition: serde_json::Value,
    /// When it was first seen, in ms since the Unix epoch.
    pub first_seen: i64,
    /// When `seen` or `approved` last changed.
    pub updated_at: i64,
    /// Who approved the current `approved` (`first-seen` when it was pinned unasked).
    pub approved_by: Option<String>,
}

const COLUMNS: &str =
    "server, tool, approved, seen, definition, first_seen, updated_at, approved_by";

fn row(r: &crate::sql::Row) -> crate::sql::Result<UpstreamPin> {
    let def: String = r.get(4)?;
    Ok(UpstreamPin {
        server: r.get(0)?,
        tool: r.get(1)?,
        approved: r.get(2)?,
        seen: r.get(3)?,
        definition: serde_json::from_str(&def).unwrap_or(serde_json::Value::Null),
        first_seen: r.get(5)?,
        updated_at: r.get(6)?,
        approved_by: r.get(7)?,
    })
}

impl Store {
    /// Records that `server` offers `tool` with the definition hashed `hash`: a tool never
    /// seen is pinned to it (approved, by `first-seen`) when `trust_new` says so, else left
    /// unapproved; a known tool keeps its approved hash and records what it is now. The pin
    /// as it stands after.
    pub fn upstream_pin_seen(
        &self,
        server: &str,
        tool: &str,
        hash: &str,
        definition: &serde_json::Value,
        trust_new: bool,
    ) -> Result<UpstreamPin, StoreError> {
        let now = now_ms();
        let c = self.conn()?;
        let (approved, by) = if trust_new {
            (Some(hash), Some("first-seen"))
        } else {
            (None, None)
        };
        c.execute(
            "INSERT INTO upstream_pins (server, tool, approved, seen, definition, first_seen, updated_at, approved_by)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)
             ON CONFLICT (server, tool) DO UPDATE SET
                 seen = excluded.seen, definition = excluded.definition,
                 updated_at = CASE WHEN upstream_pins.seen = excluded.seen
                                   THEN upstream_pins.updated_at ELSE excluded.updated_at END",
            params![server, tool, approved, hash, definition.to_string(), now, by],
        )
        .map_err(|e| self.err(e))?;
        drop(c);
        self.upstream_pin(server, tool)?
            .ok_or_else(|| StoreError::Invalid(format!("pin {server}/{tool} vanished")))
    }

    /// One pin.
    pub fn upstream_pin(
        &self,
        server: &str,
        tool: &str,
    ) -> Result<Option<UpstreamPin>, StoreError> {
        self.conn()?
            .query_row(
                &format!("SELECT {COLUMNS} FROM upstream_pins WHERE server = ?1 AND tool = ?2"),
                params![server, tool],
                row,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Every pin, of one server or of all, by server and tool.
    pub fn upstream_pins(&self, server: Option<&str>) -> Result<Vec<UpstreamPin>, StoreError> {
        let c = self.conn()?;
        let pins = match server {
            Some(s) => c.query_map(
                &format!("SELECT {COLUMNS} FROM upstream_pins WHERE server = ?1 ORDER BY tool"),
                params![s],
                row,
            ),
            None => c.query_map(
                &format!("SELECT {COLUMNS} FROM upstream_pins ORDER BY server, tool"),
                (),
                row,
            ),
        };
        pins.map_err(|e| self.err(e))
    }

    /// Approves what `server`'s tools (one `tool`, or all) look like now; the pins changed.
    pub fn upstream_approve(
        &self,
        server: &str,
        tool: Option<&str>,
        by: &str,
    ) -> Result<Vec<UpstreamPin>, StoreError> {
        let c = self.conn()?;
        let set = "UPDATE upstream_pins SET approved = seen, approved_by = ?2, updated_at = ?3
             WHERE server = ?1 AND (approved IS NULL OR approved <> seen)";
        match tool {
            Some(t) => c.execute(
                &format!("{set} AND tool = ?4"),
                params![server, by, now_ms(), t],
            ),
            None => c.execute(set, params![server, by, now_ms()]),
        }
        .map_err(|e| self.err(e))?;
        drop(c);
        let mut pins = self.upstream_pins(Some(server))?;
        pins.retain(|p| tool.is_none_or(|t| p.tool == t));
        Ok(pins)
    }
}
