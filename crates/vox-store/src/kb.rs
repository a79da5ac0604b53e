//! Knowledge-base documents. A document's `source` is unique: ingesting the same file again
//! replaces it instead of duplicating it.

use crate::{Store, StoreError, now_ms};
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

/// A whole document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct KbDocument {
    /// Row id, assigned on first ingest and kept when the document is replaced.
    pub id: i64,
    /// The document's title.
    pub title: String,
    /// Where the document came from (a path or URL); unique in the store.
    pub source: String,
    /// The document's text.
    pub content: String,
    /// SHA-256 of the content, hex: an ingest of unchanged content changes nothing.
    pub sha256: String,
    /// When it was stored or last replaced, in ms since the Unix epoch.
    pub created_at: i64,
}

/// A document without its content, for listings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct KbSummary {
    /// Row id.
    pub id: i64,
    /// The document's title.
    pub title: String,
    /// Where the document came from (a path or URL).
    pub source: String,
    /// Size of the content, in bytes.
    pub bytes: i64,
    /// SHA-256 of the content, hex.
    pub sha256: String,
    /// When it was stored or last replaced, in ms since the Unix epoch.
    pub created_at: i64,
}

const DOC_COLUMNS: &str = "id, title, source, content, sha256, created_at";

fn row_to_doc(r: &rusqlite::Row<'_>) -> rusqlite::Result<KbDocument> {
    Ok(KbDocument {
        id: r.get(0)?,
        title: r.get(1)?,
        source: r.get(2)?,
        content: r.get(3)?,
        sha256: r.get(4)?,
        created_at: r.get(5)?,
    })
}

impl Store {
    /// Inserts or replaces the document with this `source`; returns its id and whether it
    /// changed (false when the same content was already stored).
    pub fn kb_upsert(
        &self,
        title: &str,
        source: &str,
        content: &str,
        sha256: &str,
    ) -> Result<(i64, bool), StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::KbRepo::kb_upsert(&**p, title, source, content, sha256);
        }
        let mut c = self.lite()?;
        let tx = c.transaction().map_err(|e| self.err(e))?;
        let existing: Option<(i64, String)> = tx
            .query_row(
                "SELECT id, sha256 FROM kb_documents WHERE source = ?1",
                [source],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let result = match existing {
            Some((id, old)) if old == sha256 => (id, false),
            Some((id, _)) => {
                tx.execute(
                    "UPDATE kb_documents SET title = ?2, content = ?3, sha256 = ?4, created_at = ?5 WHERE id = ?1",
                    params![id, title, content, sha256, now_ms()],
                )
                .map_err(|e| self.err(e))?;
                (id, true)
            }
            None => {
                tx.execute(
                    "INSERT INTO kb_documents (title, source, content, sha256, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![title, source, content, sha256, now_ms()],
                )
                .map_err(|e| self.err(e))?;
                (tx.last_insert_rowid(), true)
            }
        };
        tx.commit().map_err(|e| self.err(e))?;
        Ok(result)
    }

    /// The document with this id.
    pub fn kb_get(&self, id: i64) -> Result<Option<KbDocument>, StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::KbRepo::kb_get(&**p, id);
        }
        let c = self.lite()?;
        c.query_row(
            &format!("SELECT {DOC_COLUMNS} FROM kb_documents WHERE id = ?1"),
            [id],
            row_to_doc,
        )
        .optional()
        .map_err(|e| self.err(e))
    }

    /// Every document, whole (for building the search index).
    pub fn kb_all(&self) -> Result<Vec<KbDocument>, StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::KbRepo::kb_all(&**p);
        }
        let _long = self.long();
        let c = self.lite()?;
        let mut stmt = c
            .prepare(&format!(
                "SELECT {DOC_COLUMNS} FROM kb_documents ORDER BY id"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt.query_map([], row_to_doc).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Summaries, newest first, below id `before` when given.
    pub fn kb_list(&self, before: Option<i64>, limit: usize) -> Result<Vec<KbSummary>, StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::KbRepo::kb_list(&**p, before, limit);
        }
        let c = self.lite()?;
        let mut stmt = c
            .prepare(
                "SELECT id, title, source, length(CAST(content AS BLOB)), sha256, created_at FROM kb_documents
                 WHERE (?1 IS NULL OR id < ?1) ORDER BY id DESC LIMIT ?2",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map(params![before, limit as i64], |r| {
                Ok(KbSummary {
                    id: r.get(0)?,
                    title: r.get(1)?,
                    source: r.get(2)?,
                    bytes: r.get(3)?,
                    sha256: r.get(4)?,
                    created_at: r.get(5)?,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Deletes a document; returns whether it existed.
    pub fn kb_delete(&self, id: i64) -> Result<bool, StoreError> {
        if let Some(p) = self.postgres() {
            return crate::pg::KbRepo::kb_delete(&**p, id);
        }
        let c = self.lite()?;
        let n = c
            .execute("DELETE FROM kb_documents WHERE id = ?1", [id])
            .map_err(|e| self.err(e))?;
        Ok(n > 0)
    }
}
