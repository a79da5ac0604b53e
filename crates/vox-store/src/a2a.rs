//! Agent-to-agent messages on the journey store (the embedded mesh): a message is stored once;
//! each recipient has a delivery that stays open until it acknowledges the message, so an inbox
//! read is idempotent and delivery is at least once.

use crate::sql::{Sql, SqlExt, params};
use crate::{Store, StoreError, now_ms};
use serde::Serialize;

/// One message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct A2aMessage {
    /// Row id.
    pub id: i64,
    /// The conversation thread (`m<id>` of its first message unless the sender named one).
    pub thread: String,
    /// The sending agent's id.
    pub sender: String,
    /// An agent id; `*` for a broadcast; `bulletin` for the bulletin board.
    pub recipient: String,
    /// The message text.
    pub body: String,
    /// When it was sent, in ms since the Unix epoch.
    pub created_at: i64,
}

/// Open deliveries per recipient.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct QueueStat {
    /// The agent the deliveries are for (or `*`, `bulletin`).
    pub recipient: String,
    /// Messages not acknowledged yet.
    pub pending: i64,
    /// Messages acknowledged.
    pub acked: i64,
    /// The oldest pending message's time, if any.
    pub oldest_pending_at: Option<i64>,
}

const COLUMNS: &str = "m.id, m.thread, m.sender, m.recipient, m.body, m.created_at";

fn row(r: &crate::sql::Row) -> crate::sql::Result<A2aMessage> {
    Ok(A2aMessage {
        id: r.get(0)?,
        thread: r.get(1)?,
        sender: r.get(2)?,
        recipient: r.get(3)?,
        body: r.get(4)?,
        created_at: r.get(5)?,
    })
}

impl Store {
    /// Stores a message and opens a delivery for each of `to` (in one transaction). `thread`
    /// defaults to the message's own id.
    pub fn a2a_send(
        &self,
        sender: &str,
        recipient: &str,
        to: &[String],
        thread: Option<&str>,
        body: &str,
    ) -> Result<A2aMessage, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        tx.execute(
            "INSERT INTO a2a_messages (thread, sender, recipient, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![thread.unwrap_or(""), sender, recipient, body, now],
        )
        .map_err(|e| self.err(e))?;
        let id = tx.last_insert_rowid().map_err(|e| self.err(e))?;
        let thread = match thread {
            Some(t) => t.to_string(),
            None => {
                let t = format!("m{id}");
                tx.execute(
                    "UPDATE a2a_messages SET thread = ?2 WHERE id = ?1",
                    params![id, t],
                )
                .map_err(|e| self.err(e))?;
                t
            }
        };
        for r in to {
            tx.execute(
                "INSERT INTO a2a_deliveries (message_id, recipient) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![id, r],
            )
            .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(A2aMessage {
            id,
            thread,
            sender: sender.into(),
            recipient: recipient.into(),
            body: body.into(),
            created_at: now,
        })
    }

    /// Stores a message that came from another node, with its mesh-wide id `origin`, and opens
    /// a delivery for each of `to`; `None` when that origin is stored already (a redelivery).
    pub fn a2a_receive(
        &self,
        origin: &str,
        sender: &str,
        recipient: &str,
        to: &[String],
        thread: &str,
        body: &str,
    ) -> Result<Option<A2aMessage>, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let inserted = tx
            .execute(
                "INSERT INTO a2a_messages (thread, sender, recipient, body, created_at, origin)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
                params![thread, sender, recipient, body, now, origin],
            )
            .map_err(|e| self.err(e))?;
        if inserted == 0 {
            return Ok(None);
        }
        let id = tx.last_insert_rowid().map_err(|e| self.err(e))?;
        for r in to {
            tx.execute(
                "INSERT INTO a2a_deliveries (message_id, recipient) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![id, r],
            )
            .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(A2aMessage {
            id,
            thread: thread.into(),
            sender: sender.into(),
            recipient: recipient.into(),
            body: body.into(),
            created_at: now,
        }))
    }

    /// Removes a message that could not be sent on (its deliveries go with it).
    pub fn a2a_forget(&self, id: i64) -> Result<(), StoreError> {
        self.conn()?
            .execute("DELETE FROM a2a_messages WHERE id = ?1", params![id])
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// A recipient's unacknowledged messages, oldest first (reading does not remove them: the
    /// same read gives the same messages until they are acknowledged).
    pub fn a2a_inbox(&self, recipient: &str, limit: usize) -> Result<Vec<A2aMessage>, StoreError> {
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let rows = {
            let mut stmt = tx
                .prepare(&format!(
                    "SELECT {COLUMNS} FROM a2a_deliveries d JOIN a2a_messages m ON m.id = d.message_id
                     WHERE d.recipient = ?1 AND d.acked_at IS NULL ORDER BY m.id LIMIT ?2"
                ))
                .map_err(|e| self.err(e))?;
            stmt.query_map(params![recipient, limit as i64], row)
                .map_err(|e| self.err(e))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.err(e))?
        };
        for m in &rows {
            tx.execute(
                "UPDATE a2a_deliveries SET reads = reads + 1 WHERE message_id = ?1 AND recipient = ?2",
                params![m.id, recipient],
            )
            .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(rows)
    }

    /// Acknowledges messages for a recipient; returns how many were newly acknowledged (an
    /// acknowledgement repeated, or of a message not addressed to it, counts none).
    pub fn a2a_ack(&self, recipient: &str, ids: &[i64]) -> Result<usize, StoreError> {
        let now = now_ms();
        let mut c = self.conn()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let mut n = 0;
        for id in ids {
            n += tx
                .execute(
                    "UPDATE a2a_deliveries SET acked_at = ?3 WHERE message_id = ?1 AND recipient = ?2 AND acked_at IS NULL",
                    params![id, recipient, now],
                )
                .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(n)
    }

    /// Messages newest first, of one thread and/or involving one agent (sent by it or to it),
    /// before message `before`.
    pub fn a2a_history(
        &self,
        thread: Option<&str>,
        agent: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<A2aMessage>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare(&format!(
                "SELECT {COLUMNS} FROM a2a_messages m
                 WHERE (?1 IS NULL OR m.thread = ?1)
                   AND (?2 IS NULL OR m.sender = ?2 OR m.recipient = ?2
                        OR EXISTS (SELECT 1 FROM a2a_deliveries d WHERE d.message_id = m.id AND d.recipient = ?2))
                   AND (?3 IS NULL OR m.id < ?3)
                 ORDER BY m.id DESC LIMIT ?4"
            ))
            .map_err(|e| self.err(e))?;
        stmt.query_map(params![thread, agent, before, limit as i64], row)
            .map_err(|e| self.err(e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.err(e))
    }

    /// Pending and acknowledged deliveries per recipient.
    pub fn a2a_queue_stats(&self) -> Result<Vec<QueueStat>, StoreError> {
        let c = self.conn()?;
        let mut stmt = c
            .prepare(
                "SELECT d.recipient, COUNT(*) - COUNT(d.acked_at), COUNT(d.acked_at),
                        MIN(CASE WHEN d.acked_at IS NULL THEN m.created_at END)
                 FROM a2a_deliveries d JOIN a2a_messages m ON m.id = d.message_id
                 GROUP BY d.recipient ORDER BY d.recipient",
            )
            .map_err(|e| self.err(e))?;
        stmt.query_map((), |r| {
            Ok(QueueStat {
                recipient: r.get(0)?,
                pending: r.get(1)?,
                acked: r.get(2)?,
                oldest_pending_at: r.get(3)?,
            })
        })
        .map_err(|e| self.err(e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| self.err(e))
    }
}
