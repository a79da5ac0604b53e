//! `vox_session_*`: agent sessions with message logs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use vox_core::HandlerEntry;
use vox_core::family::typed;
use vox_core::{Ctx, ToolError};
use vox_store::{Session, SessionMessage, SessionStatus, SessionStore};
use vox_tools_common::bounded;
use vox_tools_common::store::db;

#[derive(Serialize, JsonSchema)]
struct OneSession {
    session: Session,
}

#[derive(Serialize, JsonSchema)]
struct WithMessages {
    session: Session,
    /// The most recent messages, oldest first.
    messages: Vec<SessionMessage>,
}

#[derive(Serialize, JsonSchema)]
struct SessionList {
    sessions: Vec<Session>,
    /// `sqlite`, or `files` when the store is down.
    backend: &'static str,
}

#[derive(Serialize, JsonSchema)]
struct Appended {
    appended: bool,
    id: String,
    /// The message's sequence number in its session.
    seq: i64,
}

/// The sessions subsystem's state: SQLite, or JSON files when the store is down (dev).
struct Sessions(Box<dyn SessionStore>);

fn sessions(ctx: &Ctx) -> Result<&dyn SessionStore, ToolError> {
    Ok(ctx
        .require::<Sessions>("the sessions subsystem")?
        .0
        .as_ref())
}

fn boot(ctx: &mut Ctx) -> Result<vox_core::StepDone, String> {
    let store = ctx
        .get::<std::sync::Arc<dyn vox_store::pg::KnowledgeRepos>>()
        .cloned();
    let (sessions, detail): (Box<dyn SessionStore>, String) = match store {
        Some(store) => {
            let backend = store.backend().to_owned();
            (Box::new(store as std::sync::Arc<dyn SessionStore>), backend)
        }
        None => {
            let dir = ctx.workspace.session_files_dir();
            let files = vox_store::FileSessions::open(&dir).map_err(|e| e.to_string())?;
            let detail = format!("file persistence at {} (store unavailable)", dir.display());
            (Box::new(files), detail)
        }
    };
    ctx.insert(Sessions(sessions));
    Ok(vox_core::StepDone::Ready(detail))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    /// A short title (default `untitled`).
    title: Option<String>,
    /// Any JSON object to keep with the session.
    metadata: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    /// The session id (`s_…`).
    id: String,
    /// How many of the most recent messages to return (default 100, at most 1000).
    last: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// `open` or `closed`; both when absent.
    status: Option<StatusArg>,
    /// Most sessions (default 50, at most 500).
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum StatusArg {
    Open,
    Closed,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AppendArgs {
    /// The session id.
    id: String,
    /// Who speaks: e.g. `user`, `assistant`, `tool`, `note`.
    role: String,
    /// The message text (at most 256 KiB).
    content: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CloseArgs {
    /// The session id.
    id: String,
    /// What the session achieved.
    summary: Option<String>,
}

fn create(ctx: &Ctx, a: CreateArgs) -> Result<OneSession, ToolError> {
    let title = a.title.unwrap_or_else(|| "untitled".into());
    bounded("title", &title, 512)?;
    let metadata = Value::Object(a.metadata.unwrap_or_default());
    if metadata.to_string().len() > 64 * 1024 {
        return Err(ToolError::invalid_arguments(
            "`metadata` is larger than 64 KiB",
        ));
    }
    let session = sessions(ctx)?.create(&title, &metadata).map_err(db)?;
    Ok(OneSession { session })
}

fn get(ctx: &Ctx, a: GetArgs) -> Result<WithMessages, ToolError> {
    let last = a.last.unwrap_or(100).min(1000) as usize;
    match sessions(ctx)?.get(&a.id, last).map_err(db)? {
        Some((session, messages)) => Ok(WithMessages { session, messages }),
        None => Err(ToolError::not_found(format!("no session with id {}", a.id))),
    }
}

fn list(ctx: &Ctx, a: ListArgs) -> Result<SessionList, ToolError> {
    let limit = a.limit.unwrap_or(50).clamp(1, 500) as usize;
    let store = sessions(ctx)?;
    let status = a.status.map(|s| match s {
        StatusArg::Open => SessionStatus::Open,
        StatusArg::Closed => SessionStatus::Closed,
    });
    Ok(SessionList {
        sessions: store.list(status, limit).map_err(db)?,
        backend: store.backend(),
    })
}

fn append(ctx: &Ctx, a: AppendArgs) -> Result<Appended, ToolError> {
    bounded("role", &a.role, 64)?;
    if a.content.len() > 256 * 1024 {
        return Err(ToolError::invalid_arguments(
            "`content` is larger than 256 KiB",
        ));
    }
    let m = sessions(ctx)?
        .append(&a.id, &a.role, &a.content)
        .map_err(db)?;
    Ok(Appended {
        appended: true,
        id: a.id,
        seq: m.seq,
    })
}

fn close(ctx: &Ctx, a: CloseArgs) -> Result<OneSession, ToolError> {
    if let Some(s) = &a.summary {
        bounded("summary", s, 64 * 1024)?;
    }
    let session = sessions(ctx)?
        .close(&a.id, a.summary.as_deref())
        .map_err(db)?;
    Ok(OneSession { session })
}

pub fn family() -> vox_core::Family {
    vox_core::Family {
        name: "sessions",
        steps: vec![(vox_mcp_registry::BootStep::Sessions, boot)],
        handlers: handlers(),
        ..vox_core::Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_session_create", typed(create)),
        ("vox_session_get", typed(get)),
        ("vox_session_list", typed(list)),
        ("vox_session_append", typed(append)),
        ("vox_session_close", typed(close)),
    ]
}
