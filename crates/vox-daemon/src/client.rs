//! The daemon client: a multiplexed connection to the socket, and adoption (ping, else spawn
//! under a lock) with the profile check.

use crate::MAX_MESSAGE_BYTES;
use crate::rpc::{Line, read_line_bounded};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::oneshot;
use vox_core::Workspace;

/// A failed RPC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The connection is gone (the daemon died or closed it).
    #[error("daemon connection lost: {0}")]
    Disconnected(String),
    /// The daemon answered with a JSON-RPC error.
    #[error("daemon error {code}: {message}")]
    Rpc {
        /// The JSON-RPC error code.
        code: i64,
        /// The error's message.
        message: String,
    },
    /// The caller cancelled the request; the daemon was sent `orch.cancel`.
    #[error("request cancelled")]
    Cancelled,
    /// The daemon's answer did not have the expected shape.
    #[error("malformed daemon answer: {0}")]
    Malformed(String),
}

/// The requests waiting for their answers, by id.
type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, ClientError>>>>>;

/// Whether this client asks the daemon to list workspace tools: `VOX_MCP_WORKSPACE_TOOLS=1` in
/// the client's environment (`VOX_MCP_TIERS=workspace|all` is the deprecated spelling). Each
/// client of one daemon decides for itself.
pub fn workspace_tools_requested() -> bool {
    if vox_core::env::flag("VOX_MCP_WORKSPACE_TOOLS") == Ok(Some(true)) {
        return true;
    }
    match vox_core::env::text("VOX_MCP_TIERS")
        .ok()
        .flatten()
        .as_deref()
    {
        Some("workspace" | "all") => {
            tracing::warn!("VOX_MCP_TIERS is deprecated; set VOX_MCP_WORKSPACE_TOOLS=1");
            true
        }
        _ => false,
    }
}

/// One control connection to the daemon (`orch.ping`, `orch.boot_report`, `orch.retire`,
/// `orch.shutdown`, `research.*`); requests may run concurrently. Tools are called over MCP
/// (`vox_mcp::socket`).
pub struct DaemonClient {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    pending: Pending,
    next_id: AtomicU64,
    alive: Arc<AtomicBool>,
}

impl DaemonClient {
    /// Connects.
    pub async fn connect(socket: &Path) -> std::io::Result<Self> {
        let stream = UnixStream::connect(socket).await?;
        let (read, write) = stream.into_split();
        let pending: Pending = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let (p, a) = (pending.clone(), alive.clone());
        tokio::spawn(async move {
            let mut reader = BufReader::with_capacity(64 * 1024, read);
            let why = loop {
                match read_line_bounded(&mut reader, MAX_MESSAGE_BYTES).await {
                    Ok(Line::Data(line)) => {
                        let Ok(frame) = serde_json::from_slice::<Value>(&line) else {
                            continue;
                        };
                        // The control protocol sends no notifications: only answers.
                        if let Some(id) = frame.get("id").and_then(Value::as_u64) {
                            let waiter = p.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                            if let Some(w) = waiter {
                                let _ = w.send(decode(frame));
                            }
                        }
                    }
                    Ok(Line::TooLong(n)) => tracing::warn!("daemon sent a {n} byte line; dropped"),
                    Ok(Line::Eof) => break "the daemon closed the connection".to_owned(),
                    Err(e) => break e.to_string(),
                }
            };
            a.store(false, Ordering::SeqCst);
            for (_, w) in p.lock().unwrap_or_else(|e| e.into_inner()).drain() {
                let _ = w.send(Err(ClientError::Disconnected(why.clone())));
            }
        });
        Ok(DaemonClient {
            writer: tokio::sync::Mutex::new(write),
            pending,
            next_id: AtomicU64::new(1),
            alive,
        })
    }

    /// Whether the connection is still up.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Sends a request and waits for its answer.
    pub async fn call(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.call_with(method, params, None).await
    }

    /// [`Self::call`] that, when `cancel` fires first, sends `orch.cancel` and answers
    /// [`ClientError::Cancelled`] (a late answer is dropped).
    pub async fn call_with(
        &self,
        method: &str,
        params: Value,
        cancel: Option<&vox_core::Cancel>,
    ) -> Result<Value, ClientError> {
        if !self.is_alive() {
            return Err(ClientError::Disconnected(
                "the daemon closed the connection".into(),
            ));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, tx);
        let written = self
            .send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        if let Err(e) = written {
            self.forget(id);
            self.alive.store(false, Ordering::SeqCst);
            return Err(e);
        }
        let lost = || {
            Err(ClientError::Disconnected(
                "the daemon closed the connection".into(),
            ))
        };
        let Some(cancel) = cancel else {
            return rx.await.unwrap_or_else(|_| lost());
        };
        tokio::select! {
            answer = rx => answer.unwrap_or_else(|_| lost()),
            _ = cancel.cancelled() => {
                self.forget(id);
                let _ = self
                    .send(&json!({"jsonrpc": "2.0", "method": "orch.cancel", "params": {"id": id}}))
                    .await;
                Err(ClientError::Cancelled)
            }
        }
    }

    /// Sends a notification (no answer comes).
    pub async fn notify(&self, method: &str, params: Value) -> Result<(), ClientError> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    async fn send(&self, frame: &Value) -> Result<(), ClientError> {
        let mut bytes =
            serde_json::to_vec(frame).map_err(|e| ClientError::Disconnected(e.to_string()))?;
        bytes.push(b'\n');
        self.writer
            .lock()
            .await
            .write_all(&bytes)
            .await
            .map_err(|e| ClientError::Disconnected(e.to_string()))
    }

    fn forget(&self, id: u64) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }
}

fn decode(frame: Value) -> Result<Value, ClientError> {
    if let Some(e) = frame.get("error") {
        return Err(ClientError::Rpc {
            code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
            message: e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        });
    }
    Ok(frame.get("result").cloned().unwrap_or(Value::Null))
}

/// Why a client could not get a daemon for its profile. Each message names the daemon's log.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    /// A daemon runs for this workspace with another profile (`profile_mismatch`, 409).
    #[error(
        "profile_mismatch: the daemon for {workspace} serves profile `{running}`, not `{requested}`. Request `{running}`, or one profile for both (`--profile {running},{requested}`), or stop it (`vox daemon stop --workspace {workspace}`); to serve two profiles to one client as two servers, give each its own workspace or use `vox serve` with per-token surfaces (daemon log: {log})"
    )]
    ProfileMismatch {
        /// The workspace root.
        workspace: String,
        /// The canonical profile the daemon serves.
        running: String,
        /// The canonical profile the client asked for.
        requested: String,
        /// The daemon's log (a path, or where its output goes).
        log: String,
    },
    /// The running daemon speaks another socket protocol (an older or newer vox).
    #[error(
        "protocol_mismatch: the daemon for {workspace} speaks socket protocol {running}, this vox speaks {}; stop it (`vox daemon stop --workspace {workspace}`) so this version can start its own (daemon log: {log})",
        crate::PROTOCOL_VERSION
    )]
    Protocol {
        /// The workspace root.
        workspace: String,
        /// The socket protocol version the daemon reports (`none` when it reports none).
        running: String,
        /// The daemon's log (a path, or where its output goes).
        log: String,
    },
    /// No daemon could be started, or one holds the workspace without answering
    /// (`daemon_unavailable`).
    #[error("daemon_unavailable: cannot start the daemon: {message} (daemon log: {log})")]
    Spawn {
        /// What went wrong.
        message: String,
        /// The daemon's log file.
        log: String,
    },
    /// Talking to the daemon failed (`daemon_unavailable`).
    #[error("daemon_unavailable: {message} (daemon log: {log})")]
    Io {
        /// What went wrong.
        message: String,
        /// The daemon's log file.
        log: String,
    },
    /// `VOX_AGENT_TOKEN` names no agent the daemon knows (or one that retired).
    #[error("unauthorized: {message}")]
    Unauthorized {
        /// The daemon's refusal.
        message: String,
    },
}

impl AdoptError {
    /// The spec's error code that leads the message.
    pub fn code(&self) -> &'static str {
        match self {
            AdoptError::ProfileMismatch { .. } => "profile_mismatch",
            AdoptError::Protocol { .. } => "protocol_mismatch",
            AdoptError::Spawn { .. } | AdoptError::Io { .. } => "daemon_unavailable",
            AdoptError::Unauthorized { .. } => "unauthorized",
        }
    }

    /// The facts behind the message, for a JSON-RPC error's `data`.
    pub fn data(&self) -> Value {
        match self {
            AdoptError::ProfileMismatch {
                workspace,
                running,
                requested,
                log,
            } => {
                json!({"workspace": workspace, "running_profile": running, "requested_profile": requested, "log": log})
            }
            AdoptError::Protocol {
                workspace,
                running,
                log,
            } => {
                json!({"workspace": workspace, "running_protocol": running, "protocol": crate::PROTOCOL_VERSION, "log": log})
            }
            AdoptError::Spawn { log, .. } | AdoptError::Io { log, .. } => json!({"log": log}),
            AdoptError::Unauthorized { .. } => json!({}),
        }
    }
}

/// How a client uses the daemon it adopts or spawns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// An MCP client (`vox mcp`): the connection attaches, and a daemon it spawns exits once
    /// no client has been attached for `VOX_DAEMON_IDLE_SECS`.
    Client,
    /// `vox daemon start`: the daemon stays until stopped, including one a client spawned.
    Keep,
}

impl Use {
    /// An `orch.ping` that attaches (or keeps) only a daemon serving `profile`.
    fn ping_params(self, profile: &str) -> Value {
        match self {
            Use::Client => json!({"attach": true, "profile": profile}),
            Use::Keep => json!({"keep": true, "profile": profile}),
        }
    }
}

/// Connects to the running daemon and pings it without attaching (a status probe).
pub async fn connect_and_ping(ws: &Workspace) -> Option<(DaemonClient, Value)> {
    let client = DaemonClient::connect(&ws.socket_path()).await.ok()?;
    let ping = tokio::time::timeout(Duration::from_secs(5), client.call("orch.ping", json!({})))
        .await
        .ok()?
        .ok()?;
    Some((client, ping))
}

fn log_of(ws: &Workspace) -> String {
    ws.daemon_log_path().display().to_string()
}

fn check_profile(ws: &Workspace, ping: &Value, requested: &str) -> Result<(), AdoptError> {
    let protocol = ping.get("protocol_version").and_then(Value::as_u64);
    let log = ping.get("log").and_then(Value::as_str).map_or_else(
        || "the terminal of the process that runs it".to_owned(),
        str::to_owned,
    );
    if protocol != Some(u64::from(crate::PROTOCOL_VERSION)) {
        return Err(AdoptError::Protocol {
            workspace: ws.root.display().to_string(),
            running: protocol.map_or_else(|| "none".into(), |p| p.to_string()),
            log,
        });
    }
    // A daemon that predates profiles reports none: it counts as dev.
    let running = ping.get("profile").and_then(Value::as_str).unwrap_or("dev");
    if running != requested {
        return Err(AdoptError::ProfileMismatch {
            workspace: ws.root.display().to_string(),
            running: running.to_owned(),
            requested: requested.to_owned(),
            log,
        });
    }
    Ok(())
}

/// Whether a daemon that serves another profile is one a client spawned and nobody uses any
/// more: then it is asked to retire (it agrees only if still nobody is attached) and waited
/// for, instead of refusing the new client until its idle limit passes.
async fn retired(ws: &Workspace, client: &DaemonClient, ping: &Value) -> bool {
    let unattended = ping.pointer("/lifetime/kind").and_then(Value::as_str) == Some("spawned")
        && ping.pointer("/lifetime/clients").and_then(Value::as_u64) == Some(0);
    if !unattended {
        return false;
    }
    let agreed = client
        .call("orch.retire", json!({}))
        .await
        .is_ok_and(|a| a["retired"] == true);
    agreed && wait_until_stopped(ws, Duration::from_secs(15)).await
}

/// The running daemon if it serves `profile`, attached (or kept) as `how` says; `None` when
/// none answers, it is closing, or it was a spawned daemon of another profile nobody used
/// (retired now). One ping: the daemon attaches only if it serves `profile`, so a refused client
/// holds nothing.
async fn adopt(
    ws: &Workspace,
    profile: &str,
    how: Use,
) -> Result<Option<(DaemonClient, Value)>, AdoptError> {
    let Ok(client) = DaemonClient::connect(&ws.socket_path()).await else {
        return Ok(None);
    };
    let asked = tokio::time::timeout(
        Duration::from_secs(5),
        client.call("orch.ping", how.ping_params(profile)),
    )
    .await;
    let ping = match asked {
        Ok(Ok(ping)) => ping,
        // A daemon of another protocol may not know the profile field: a plain ping says
        // which protocol it speaks.
        Ok(Err(ClientError::Rpc { code, .. })) if code == crate::rpc::codes::INVALID_PARAMS => {
            match connect_and_ping(ws).await {
                Some((_, ping)) => {
                    check_profile(ws, &ping, profile)?;
                    return Ok(None);
                }
                None => return Ok(None),
            }
        }
        // Closing, or not answering: as if no daemon ran.
        _ => return Ok(None),
    };
    match check_profile(ws, &ping, profile) {
        Ok(()) => Ok(Some((client, ping))),
        Err(AdoptError::ProfileMismatch { .. }) if retired(ws, &client, &ping).await => Ok(None),
        Err(e) => Err(e),
    }
}

/// Adopts the workspace daemon if it serves `profile`, or spawns `daemon_exe` and waits for it.
/// An exclusive lock around "ping, else spawn" makes concurrent clients end on one daemon.
pub async fn adopt_or_spawn(
    ws: &Workspace,
    profile: &str,
    daemon_exe: &Path,
    how: Use,
) -> Result<(DaemonClient, Value), AdoptError> {
    let io = |message: String| AdoptError::Io {
        message,
        log: log_of(ws),
    };
    if let Some(adopted) = adopt(ws, profile, how).await? {
        return Ok(adopted);
    }
    ws.ensure_vox_dir().map_err(|e| io(e.to_string()))?;
    let lock_path = ws.spawn_lock_path();
    let lock = vox_core::open_state_file(&lock_path, false).map_err(|e| io(e.to_string()))?;
    let lock = tokio::task::spawn_blocking(move || lock.lock().map(|()| lock))
        .await
        .map_err(|e| io(e.to_string()))?
        .map_err(|e| io(format!("cannot lock {}: {e}", lock_path.display())))?;
    // Someone may have spawned it while we waited for the lock.
    if let Some(adopted) = adopt(ws, profile, how).await? {
        return Ok(adopted);
    }
    // A daemon that is shutting down keeps its lock until it exits: wait for that before
    // spawning, or the new daemon would find the workspace taken.
    if !wait_until_stopped(ws, Duration::from_secs(10)).await {
        return Err(AdoptError::Spawn {
            message: format!(
                "a daemon holds {} but does not answer on {}",
                ws.daemon_lock_path().display(),
                ws.socket_path().display()
            ),
            log: log_of(ws),
        });
    }
    let result = spawn_and_wait(ws, profile, daemon_exe, how).await;
    drop(lock);
    result
}

/// Whether no daemon holds the workspace lock (the lock dies with the daemon process).
pub fn daemon_stopped(ws: &Workspace) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(ws.daemon_lock_path())
    {
        Ok(f) => f.try_lock().is_ok(),
        Err(_) => true,
    }
}

/// Polls [`daemon_stopped`] until it holds or `limit` passes.
pub async fn wait_until_stopped(ws: &Workspace, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if daemon_stopped(ws) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn spawn_and_wait(
    ws: &Workspace,
    profile: &str,
    daemon_exe: &Path,
    how: Use,
) -> Result<(DaemonClient, Value), AdoptError> {
    use std::os::unix::process::CommandExt;
    let log_path = ws.daemon_log_path();
    let spawn_error = |message: String| AdoptError::Spawn {
        message,
        log: log_path.display().to_string(),
    };
    let log = vox_core::open_state_file(&log_path, true).map_err(|e| spawn_error(e.to_string()))?;
    let mut command = std::process::Command::new(daemon_exe);
    command
        .arg("--workspace")
        .arg(&ws.root)
        .arg("--profile")
        .arg(profile);
    if how == Use::Client {
        command.arg("--exit-when-idle");
    }
    let mut child = command
        .env_remove("VOX_PROFILE")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        // Its own process group: the daemon outlives the client and its terminal's signals.
        .process_group(0)
        .spawn()
        .map_err(|e| spawn_error(format!("{}: {e}", daemon_exe.display())))?;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(adopted) = adopt(ws, profile, how).await? {
            // Reap in the background so the exited daemon does not linger as a zombie.
            std::thread::spawn(move || child.wait());
            return Ok(adopted);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(spawn_error(format!(
                "the daemon exited ({status}): {}",
                tail.join(" | ")
            )));
        }
        if Instant::now() > deadline {
            return Err(spawn_error(format!(
                "no answer on {} after 15 s",
                ws.socket_path().display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
