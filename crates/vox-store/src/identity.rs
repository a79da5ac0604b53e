//! The store's identity: a random id inside the database (`store_meta`, migration 2) and in a
//! file beside it, so that a database file that lost its data is told apart from a new store.

use crate::StoreError;
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use std::path::{Path, PathBuf};

pub fn path(db: &Path) -> PathBuf {
    let mut name = db
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "journey.db".into());
    name.push(".id");
    db.with_file_name(name)
}

pub fn lost(db: &Path, id: String, why: String) -> StoreError {
    StoreError::Lost {
        path: db.to_owned(),
        id_path: path(db),
        id,
        why,
    }
}

/// The id the identity file records; `None` when there is no such file (a new store, or one
/// from before identities).
fn recorded(db: &Path) -> Result<Option<String>, StoreError> {
    let p = path(db);
    let text = match std::fs::read_to_string(&p) {
        Ok(t) => t,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None);
        }
        Err(e) => {
            return Err(StoreError::Identity {
                path: p,
                message: e.to_string(),
            });
        }
    };
    let id = text.trim();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(StoreError::Identity {
            path: p,
            message: format!("`{id}` is not a store id"),
        });
    }
    Ok(Some(id.to_owned()))
}

/// The id recorded inside the database, if it has one.
pub fn stored_id(conn: &Connection) -> rusqlite::Result<Option<String>> {
    let has_meta: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'store_meta'",
        [],
        |r| r.get(0),
    )?;
    if !has_meta {
        return Ok(None);
    }
    conn.query_row(
        "SELECT value FROM store_meta WHERE key = 'store_id'",
        [],
        |r| r.get(0),
    )
    .optional()
}

pub fn check(db: &Path) -> Result<Option<String>, StoreError> {
    let Some(id) = recorded(db)? else {
        return Ok(None);
    };
    match std::fs::metadata(db) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(lost(db, id, "the file is missing".into()));
        }
        Err(e) => {
            return Err(StoreError::Identity {
                path: db.to_owned(),
                message: e.to_string(),
            });
        }
        Ok(m) if m.len() == 0 => {
            return Err(lost(db, id, "the file is empty (0 bytes)".into()));
        }
        Ok(_) => {}
    }
    // Read-only: looking must not change the file.
    let sqlite = |source| StoreError::Sqlite {
        path: db.to_owned(),
        source,
    };
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite)?;
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .map_err(sqlite)?;
    if tables == 0 {
        return Err(lost(db, id, "the file has no tables".into()));
    }
    match stored_id(&conn).map_err(sqlite)? {
        Some(found) if found == id => Ok(Some(id)),
        Some(found) => Err(lost(db, id, format!("it holds another store ({found})"))),
        None => Err(lost(
            db,
            id,
            "it holds another store (one without an identity)".into(),
        )),
    }
}

/// Writes the identity file (to a temporary name, then renamed into place).
pub fn record(db: &Path, id: &str) -> Result<(), StoreError> {
    let p = path(db);
    let tmp = p.with_extension(format!("id.tmp{}", std::process::id()));
    let io = |e: std::io::Error| StoreError::Identity {
        path: p.clone(),
        message: e.to_string(),
    };
    std::fs::write(&tmp, format!("{id}\n")).map_err(io)?;
    std::fs::rename(&tmp, &p).map_err(io)
}
