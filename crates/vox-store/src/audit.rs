//! The audit trail: one row per tool call, appended in batches, read by cursor, pruned to a
//! bound.

use crate::sql::{SqlExt, params};
use crate::{Store, StoreError};
use serde::Serialize;

/// One tool call as the audit trail keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct AuditRecord {
    /// Its position in the trail (0 before it is stored).
    pub seq: i64,
    /// When it ended, in ms since the Unix epoch.
    pub at: i64,
    /// Who called: `stdio:<client>`, a token's name, `node:<id>`, an agent's id.
    pub principal: String,
    /// The caller's role: `write` (a local transport or the write token) or `read`.
    pub role: String,
    /// Whether the caller came from loopback.
    pub loopback: bool,
    /// The orchestrator agent that called, if one did.
    pub agent: Option<String>,
    /// The mesh node the call came from, if it came through the mesh.
    pub mesh_node: Option<String>,
    /// The tool's name as called.
    pub tool: String,
    /// `catalog`, `upstream`, `workspace` or `skill`.
    pub source: String,
    /// The upstream server, for an upstream tool.
    pub server: Option<String>,
    /// `allowed` (the tool ran) or `denied` (the decision refused it).
    pub decision: String,
    /// `ok`, the denial code, or the tool error's code.
    pub code: String,
    /// How long it took, in µs.
    pub duration_us: i64,
    /// Its arguments, when its server opted in.
    pub arguments: Option<serde_json::Value>,
}

const COLUMNS: &str = "seq, at, principal, role, loopback, agent, mesh_node, tool, source, server, decision, code, duration_us, arguments";

fn row(r: &crate::sql::Row) -> crate::sql::Result<AuditRecord> {
    let args: Option<String> = r.get(13)?;
    Ok(AuditRecord {
        seq: r.get(0)?,
        at: r.get(1)?,
        principal: r.get(2)?,
        role: r.get(3)?,
        loopback: r.get::<i64>(4)? != 0,
        agent: r.get(5)?,
        mesh_node: r.get(6)?,
        tool: r.get(7)?,
        source: r.get(8)?,
        server: r.get(9)?,
        decision: r.get(10)?,
        code: r.get(11)?,
        duration_us: r.get(12)?,
        arguments: args.and_then(|a| serde_json::from_str(&a).ok()),
    })
}

impl Store {
    /// Appends `records` in one transaction, then keeps only the newest `keep` rows.
    pub fn audit_append(&self, records: &[AuditRecord], keep: i64) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        for a in records {
            tx.execute(
                "INSERT INTO audit_log (at, principal, role, loopback, agent, mesh_node, tool, source, server, decision, code, duration_us, arguments)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    a.at,
                    a.principal,
                    a.role,
                    i64::from(a.loopback),
                    a.agent,
                    a.mesh_node,
                    a.tool,
                    a.source,
                    a.server,
                    a.decision,
                    a.code,
                    a.duration_us,
                    a.arguments.as_ref().map(|v| v.to_string()),
                ],
            )
            .map_err(|e| self.err(e))?;
        }
        tx.execute(
            "DELETE FROM audit_log WHERE seq <= (SELECT MAX(seq) FROM audit_log) - ?1",
            params![keep],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))
    }

    /// At most `limit` records, oldest first: those after `after` (a seq), or the newest
    /// when it is `None`; `tool` narrows to one tool (or, ending in `*`, a prefix).
    pub fn audit_query(
        &self,
        after: Option<i64>,
        limit: i64,
        tool: Option<&str>,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let order = if after.is_some() { "ASC" } else { "DESC" };
        let after = after.unwrap_or(0);
        let sql = |filter: &str| {
            format!(
                "SELECT {COLUMNS} FROM audit_log WHERE seq > ?1 {filter} ORDER BY seq {order} LIMIT ?2"
            )
        };
        let c = self.conn()?;
        let rows = match tool.map(|t| (t, t.strip_suffix('*'))) {
            // A prefix is compared as a prefix (no LIKE: `_` is in most tool names).
            Some((_, Some(prefix))) => c.query_map(
                &sql("AND substr(tool, 1, CAST(?3 AS INTEGER)) = ?4"),
                params![after, limit, prefix.chars().count() as i64, prefix],
                row,
            ),
            Some((t, None)) => c.query_map(&sql("AND tool = ?3"), params![after, limit, t], row),
            None => c.query_map(&sql(""), params![after, limit], row),
        };
        let mut rows = rows.map_err(|e| self.err(e))?;
        if order == "DESC" {
            rows.reverse();
        }
        Ok(rows)
    }
}
