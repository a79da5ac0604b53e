//! Calls between mesh nodes (`vox_mesh_dispatch`), recorded on both sides. The caller keeps
//! an `out` row from sending until the result arrives; the callee keeps an `in` row from the
//! moment it starts, so a call JetStream delivers again (the callee crashed before
//! acknowledging it) is answered from the record, never run a second time.

use crate::sql::{OptionalExtension, Sql, SqlExt, params};
use crate::{Store, StoreError, now_ms};
use serde::Serialize;
use serde_json::Value;

/// Which side of a mesh call a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallDirection {
    /// This node called another (it waits for the result).
    Out,
    /// Another node called this one (this node runs it).
    In,
}

impl CallDirection {
    fn as_str(self) -> &'static str {
        match self {
            CallDirection::Out => "out",
            CallDirection::In => "in",
        }
    }
}

/// A call between mesh nodes, as one side recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct MeshCall {
    /// The call's mesh-unique id, the same on both nodes.
    pub call_id: String,
    /// The other node.
    pub node: String,
    /// The tool called.
    pub tool: String,
    /// The call's arguments.
    pub arguments: Value,
    /// `sent` (waiting for the other node), `running` (this node runs it), `done`, `failed`.
    pub state: String,
    /// The tool's result, or the error it ended with.
    pub result: Option<Value>,
    /// When this side recorded it, in ms since the Unix epoch.
    pub created_at: i64,
    /// When it ended (done or failed), in ms since the Unix epoch.
    pub finished_at: Option<i64>,
}

const COLUMNS: &str = "call_id, node, tool, arguments, state, result, created_at, finished_at";

fn row(r: &crate::sql::Row) -> crate::sql::Result<MeshCall> {
    let args: String = r.get(3)?;
    let result: Option<String> = r.get(5)?;
    Ok(MeshCall {
        call_id: r.get(0)?,
        node: r.get(1)?,
        tool: r.get(2)?,
        arguments: serde_json::from_str(&args).unwrap_or(Value::Null),
        state: r.get(4)?,
        result: result.and_then(|s| serde_json::from_str(&s).ok()),
        created_at: r.get(6)?,
        finished_at: r.get(7)?,
    })
}

impl Store {
    /// Records a call this node (`me`) sends to `node`; its id, unique in the mesh, is
    /// `<me>:c<n>` (a message of that node is `<me>:m<n>`: the two share JetStream's
    /// duplicate window).
    pub fn mesh_call_out(
        &self,
        me: &str,
        node: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<MeshCall, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        tx.execute(
            "INSERT INTO mesh_calls (call_id, direction, node, tool, arguments, state, created_at)
             VALUES ('', 'out', ?1, ?2, ?3, 'sent', ?4)",
            params![node, tool, arguments.to_string(), now],
        )
        .map_err(|e| self.err(e))?;
        let call_id = format!("{me}:c{}", tx.last_insert_rowid().map_err(|e| self.err(e))?);
        tx.execute(
            "UPDATE mesh_calls SET call_id = ?1 WHERE seq = ?2",
            params![call_id, tx.last_insert_rowid().map_err(|e| self.err(e))?],
        )
        .map_err(|e| self.err(e))?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(MeshCall {
            call_id,
            node: node.into(),
            tool: tool.into(),
            arguments: arguments.clone(),
            state: "sent".into(),
            result: None,
            created_at: now,
            finished_at: None,
        })
    }

    /// Starts a call `node` made to this one: `None` when it is new (now `running`), else the
    /// record of the earlier delivery.
    pub fn mesh_call_in(
        &self,
        call_id: &str,
        node: &str,
        tool: &str,
        arguments: &Value,
    ) -> Result<Option<MeshCall>, StoreError> {
        let c = self.conn()?;
        let inserted = c
            .execute(
                "INSERT INTO mesh_calls (call_id, direction, node, tool, arguments, state, created_at)
                 VALUES (?1, 'in', ?2, ?3, ?4, 'running', ?5) ON CONFLICT DO NOTHING",
                params![call_id, node, tool, arguments.to_string(), now_ms()],
            )
            .map_err(|e| self.err(e))?;
        if inserted == 1 {
            return Ok(None);
        }
        drop(c);
        self.mesh_call(CallDirection::In, call_id)
    }

    /// Ends a call with its result; `false` when there is no such call, or it ended already.
    pub fn mesh_call_finish(
        &self,
        direction: CallDirection,
        call_id: &str,
        ok: bool,
        result: &Value,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn()?
            .execute(
                "UPDATE mesh_calls SET state = ?3, result = ?4, finished_at = ?5
                 WHERE direction = ?1 AND call_id = ?2 AND state IN ('sent', 'running')",
                params![
                    direction.as_str(),
                    call_id,
                    if ok { "done" } else { "failed" },
                    result.to_string(),
                    now_ms()
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    /// The record of call `call_id` on this side (`direction`), if any.
    pub fn mesh_call(
        &self,
        direction: CallDirection,
        call_id: &str,
    ) -> Result<Option<MeshCall>, StoreError> {
        self.conn()?
            .query_row(
                &format!("SELECT {COLUMNS} FROM mesh_calls WHERE direction = ?1 AND call_id = ?2"),
                params![direction.as_str(), call_id],
                row,
            )
            .optional()
            .map_err(|e| self.err(e))
    }

    /// Calls other nodes made that this one was still running when it stopped.
    pub fn mesh_calls_interrupted(&self) -> Result<Vec<MeshCall>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare(&format!(
                "SELECT {COLUMNS} FROM mesh_calls WHERE direction = 'in' AND state = 'running' ORDER BY seq"
            ))
            .map_err(|e| self.err(e))?;
        stmt.query_map((), row)
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// Calls in one direction still open (`sent` or `running`).
    pub fn mesh_calls_open(&self, direction: CallDirection) -> Result<i64, StoreError> {
        self.conn()?
            .query_row(
                "SELECT COUNT(*) FROM mesh_calls WHERE direction = ?1 AND state IN ('sent', 'running')",
                params![direction.as_str()],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))
    }
}
