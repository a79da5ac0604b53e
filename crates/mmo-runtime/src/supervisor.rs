//! The supervisor: one process per session. It owns the session's hosts and serves one Unix
//! socket on which Codex hosts reach `mmo_mesh` (through `codex-mmo mesh-stdio`, a byte pipe)
//! and the operator's commands (`inspect`, `stop`, `attach`, `agent-mcp`) reach the session.
//!
//! **Who is calling** is decided here, from the kernel, never from the request: the socket's
//! peer pid is walked up its parent chain. A process under a run's app-server host is that
//! run. The supervisor is a child subreaper, so a process that daemonized out of a host is
//! reparented to the supervisor itself and is refused rather than mistaken for anyone. A
//! process outside the supervisor's tree is the operator, who acts as the root.

use crate::result::JobState;
use crate::store::{NewRun, Run, Session, Store, is_terminal_run, is_terminal_session};
use crate::team::Team;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

/// The longest request line the socket accepts.
const MAX_LINE: usize = 4 << 20;

/// Where the runtime keeps its state under the data directory.
pub struct Paths {
    pub data: PathBuf,
}

impl Paths {
    pub fn db(&self) -> PathBuf {
        self.data.join("runtime").join("state.db")
    }
    pub fn session_dir(&self, id: &str) -> PathBuf {
        self.data.join("runtime").join("sessions").join(id)
    }
    /// The session's socket: in its directory, or under /tmp when that path is too long for a
    /// Unix socket address.
    pub fn socket(&self, id: &str) -> PathBuf {
        let p = self.session_dir(id).join("mesh.sock");
        if p.as_os_str().len() < 100 {
            return p;
        }
        let uid = unsafe { libc::getuid() };
        PathBuf::from(format!("/tmp/codex-mmo-{uid}")).join(format!("{id}.sock"))
    }
    pub fn open(&self) -> Result<Store, String> {
        let db = self.db();
        std::fs::create_dir_all(db.parent().unwrap_or(Path::new(".")))
            .map_err(|e| format!("{}: {e}", db.display()))?;
        let digest = runtime_digest(db.parent().unwrap_or(Path::new(".")));
        Store::open(&db, &digest).map_err(|e| e.to_string())
    }
}

/// The SHA-256 of the running binary: which runner wrote a record. Hashing the binary costs
/// hundreds of milliseconds (it is tens of MiB), so the digest is cached in `cache_dir`, keyed
/// by the binary's path, device, inode, size and modification time; a rebuilt or replaced
/// binary changes the key and is hashed again.
pub fn runtime_digest(cache_dir: &Path) -> String {
    static DIGEST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIGEST
        .get_or_init(|| {
            let Ok(exe) = std::env::current_exe() else {
                return "unknown".into();
            };
            let key = exe_key(&exe);
            let cache = cache_dir.join("runner-digest.json");
            if let Some(k) = &key
                && let Ok(text) = std::fs::read_to_string(&cache)
                && let Ok(v) = serde_json::from_str::<Value>(&text)
                && v["key"] == *k
                && let Some(d) = v["sha256"].as_str()
            {
                return d.to_string();
            }
            use sha2::{Digest, Sha256};
            let Ok(bytes) = std::fs::read(&exe) else {
                return "unknown".into();
            };
            let digest = crate::jobs::hex(&Sha256::digest(&bytes));
            if let Some(k) = key {
                // Written whole, then renamed: a reader sees the old cache or the new one.
                let tmp = cache_dir.join(format!(".runner-digest.{}", std::process::id()));
                let body = json!({"key": k, "sha256": digest}).to_string();
                if std::fs::write(&tmp, body).is_ok() {
                    let _ = std::fs::rename(&tmp, &cache);
                }
            }
            digest
        })
        .clone()
}

/// What identifies one build of the binary on disk.
fn exe_key(exe: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(exe).ok()?;
    Some(format!(
        "{}:{}:{}:{}:{}.{}",
        exe.display(),
        m.dev(),
        m.ino(),
        m.len(),
        m.mtime(),
        m.mtime_nsec()
    ))
}

/// The parent pid of `pid`, from /proc.
fn parent_of(pid: u32) -> Option<u32> {
    codex_app_server::tree::parent_of(pid as i32).and_then(|p| u32::try_from(p).ok())
}

/// Who a connection's peer is.
#[derive(Debug, PartialEq)]
pub enum Identity {
    Run(String),
    Operator,
    Refused(String),
}

/// Walks the peer's ancestry: the first host found names the run.
pub fn identify(peer: u32, hosts: &HashMap<u32, String>, supervisor: u32) -> Identity {
    let mut pid = peer;
    for _ in 0..256 {
        if let Some(run) = hosts.get(&pid) {
            return Identity::Run(run.clone());
        }
        if pid == supervisor {
            return Identity::Refused(format!(
                "process {peer} runs under the supervisor but under no agent host (it left its host's process tree), so it has no identity here"
            ));
        }
        match parent_of(pid) {
            Some(p) if p != 0 && p != pid => pid = p,
            _ => return Identity::Operator,
        }
    }
    Identity::Refused(format!("process {peer}: its ancestry is too deep to check"))
}

/// Creates a session for a compiled snapshot: its directory and its row (state `starting`).
pub fn create_session(
    paths: &Paths,
    store: &Store,
    address: &str,
    snapshot: &Path,
    workspace: &Path,
    task: Option<&str>,
) -> Result<Session, String> {
    let profile: Value = serde_json::from_str(
        &std::fs::read_to_string(snapshot.join("profile.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let id = crate::jobs::new_id("mmo");
    let dir = paths.session_dir(&id);
    std::fs::create_dir_all(dir.join("logs")).map_err(|e| format!("{}: {e}", dir.display()))?;
    store
        .create_session(
            &id,
            profile["id"].as_str().unwrap_or("?"),
            address,
            &workspace.to_string_lossy(),
            &dir.to_string_lossy(),
            task,
        )
        .map_err(|e| e.to_string())
}

/// How long `codex-mmo run` waits for a new session's supervisor to take it.
pub const START_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// A session whose supervisor is gone while the session was live: its hosts are ended, its
/// active runs become `suspended` with their partial evidence, and so does the session.
pub fn recover(store: &Store, session: &Session) -> Result<bool, String> {
    if is_terminal_session(&session.state) || session.state == "suspended" {
        return Ok(false);
    }
    if session
        .supervisor_pid
        .is_some_and(|p| alive(p as u32) && is_supervisor_of(p as u32, &session.id))
    {
        return Ok(false);
    }
    if matches!(session.state.as_str(), "starting" | "resuming") {
        // Not taken yet, or its supervisor died while taking it. `codex-mmo run` and `resume`
        // wait at most START_WAIT for their supervisor, so one still untaken well after that
        // never will be. A new session then failed; a resumed one is suspended again, as it was.
        if session.supervisor_pid.is_none()
            && crate::store::now_ms() - session.updated_at < 2 * START_WAIT.as_millis() as i64
        {
            return Ok(false);
        }
        let (state, why) = match (session.state.as_str(), session.supervisor_pid) {
            ("starting", None) => ("failed", "its supervisor never took the session"),
            ("starting", Some(_)) => (
                "failed",
                "its supervisor exited before it started the session",
            ),
            (_, None) => (
                "suspended",
                "no new supervisor took the session to resume it",
            ),
            (_, Some(_)) => (
                "suspended",
                "its new supervisor exited before it resumed the session",
            ),
        };
        store
            .set_session_state(&session.id, state, Some(why))
            .map_err(|e| e.to_string())?;
        if session.state == "starting" {
            return Ok(true);
        }
    }
    for run in store.runs(&session.id).map_err(|e| e.to_string())? {
        if let Some(pid) = run.host_pid.filter(|_| run.is_active()) {
            end_stray_host(pid as u32);
        }
        if run.is_active()
            && let Some(job) = &run.job
        {
            if store.result(job).map_err(|e| e.to_string())?.is_none() {
                let partial = last_message(store, &run.run_ref).unwrap_or_default();
                let _ = store.put_result(job, &partial, false, false);
            }
            // A writer's changes so far, from its kept worktree.
            if run.is_writer
                && let Ok(text) = std::fs::read_to_string(crate::host::worktree_record_in(
                    Path::new(&session.dir),
                    job,
                ))
                && let Ok(wt) = serde_json::from_str(&text)
            {
                crate::host::keep_partial_patch(store, job, &wt);
            }
        }
    }
    let suspended = store
        .suspend_active(&session.id)
        .map_err(|e| e.to_string())?;
    store
        .controls_unknown(&session.id)
        .map_err(|e| e.to_string())?;
    let _ = store.audit(
        &session.id,
        "runtime",
        "recover",
        &session.id,
        &json!({"suspended": suspended}),
    );
    store
        .set_session_state(
            &session.id,
            "suspended",
            Some(
                "the supervisor stopped while the session was live; its active runs are suspended",
            ),
        )
        .map_err(|e| e.to_string())?;
    Ok(true)
}

/// The text of a run's last agent message, if it has one.
pub(crate) fn last_message(store: &Store, run: &str) -> Option<String> {
    let kinds = ["agentMessage".to_string()];
    let events = store.events(run, 0, usize::MAX, Some(&kinds)).ok()?;
    let last = events.last()?;
    let v: Value = serde_json::from_str(&last.body).ok()?;
    v.get("text").and_then(Value::as_str).map(str::to_string)
}

/// Active runs per role in the other live sessions of `profile_id` (`max_active` counts across
/// the stable profile id). A session counts while its supervisor runs; one whose supervisor is
/// gone holds nothing (its runs are suspended when it is next looked at).
pub fn active_elsewhere(
    store: &Store,
    profile_id: &str,
    session: &str,
) -> Result<std::collections::BTreeMap<String, u32>, crate::store::StoreError> {
    store.active_roles_elsewhere(profile_id, session, |id, pid| {
        pid.is_some_and(|p| alive(p as u32) && is_supervisor_of(p as u32, id))
    })
}

/// A process that is running (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    codex_app_server::tree::is_alive(pid as i32)
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

fn is_supervisor_of(pid: u32, session: &str) -> bool {
    let c = cmdline(pid);
    c.contains("supervise") && c.contains(session)
}

/// Ends a host left behind by a dead supervisor: its process group and descendants, only if it
/// still is an app-server (a reused pid is left alone).
fn end_stray_host(pid: u32) {
    if alive(pid) && cmdline(pid).contains("app-server") {
        codex_app_server::tree::kill_tree(pid as i32);
    }
}

/// Runs the supervisor of session `id` until the session ends: a new session (`starting`), or
/// with `resume` a suspended one that `codex-mmo resume` marked `resuming`. A resumed session
/// keeps its runs: the root continues its own thread (or, operator-driven, runs again), and its
/// suspended and paused jobs wait for an authorized controller's `continue`.
pub async fn serve(paths: Paths, id: String, resume: bool) -> Result<(), String> {
    let store = Arc::new(paths.open()?);
    let session = store.session(&id).map_err(|e| e.to_string())?;
    let expected = if resume { "resuming" } else { "starting" };
    if session.state != expected
        || !store
            .claim_session(&id, expected, std::process::id())
            .map_err(|e| e.to_string())?
    {
        return Err(format!(
            "session {id} is `{}` and {}; this supervisor was started to take a `{expected}` one",
            session.state,
            if session.supervisor_pid.is_some() {
                "has a supervisor"
            } else {
                "has none"
            }
        ));
    }
    // A new session that cannot start has failed; a resumed one that cannot is suspended again
    // (its evidence and threads are still there for a later resume).
    let fail = |why: String| {
        let state = if resume { "suspended" } else { "failed" };
        let _ = store.set_session_state(&id, state, Some(&why));
        let _ = store.set_supervisor(&id, None);
        why
    };
    let snapshot = mmo_profile::store::Dirs::from_env()
        .map_err(|e| e.to_string())?
        .snapshot_dir(&session.snapshot);
    mmo_profile::snapshot::verify_snapshot(&snapshot).map_err(|e| fail(e.to_string()))?;
    let read = |name: &str| -> Result<Value, String> {
        let p = snapshot.join(name);
        serde_json::from_str(
            &std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?,
        )
        .map_err(|e| format!("{}: {e}", p.display()))
    };
    let profile: mmo_profile::model::Profile = serde_json::from_value(read("profile.json")?)
        .map_err(|e| fail(format!("profile.json: {e}")))?;
    let ceilings = crate::admission::Ceilings::from_json(&read("ceilings.json")?.to_string())
        .map_err(|e| fail(format!("ceilings.json: {e}")))?;
    let capacities =
        crate::admission::Capacities::from_catalog_json(&read("catalog.json")?.to_string())
            .map_err(|e| fail(format!("catalog.json: {e}")))?;

    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let socket = paths.socket(&id);
    if let Some(parent) = socket.parent() {
        std::fs::create_dir_all(parent).map_err(|e| fail(format!("{}: {e}", parent.display())))?;
    }
    let _ = std::fs::remove_file(&socket);
    let listener =
        UnixListener::bind(&socket).map_err(|e| fail(format!("{}: {e}", socket.display())))?;

    let root_ref = match resume {
        true => resumed_root(&store, &id).map_err(fail)?.run_ref,
        false => crate::jobs::new_id("run"),
    };
    let root_role = profile.root.clone();
    let root_units = profile
        .agents
        .get(&root_role)
        .map(|a| a.resource_units)
        .unwrap_or(1);
    let root_group = profile
        .agents
        .get(&root_role)
        .and_then(|a| a.resource_group.clone());
    let lock = store.admission_lock().map_err(|e| fail(e.to_string()))?;
    admit_root(&store, &profile, &id).map_err(fail)?;
    let root = if resume {
        resumed_root(&store, &id).map_err(fail)?
    } else {
        store
            .create_run(&NewRun {
                run_ref: &root_ref,
                session: &id,
                job: None,
                role: &root_role,
                parent: None,
                depth: 0,
                lineage: &[],
                task_kind: None,
                task: session.task.as_deref(),
                literal: None,
                write_scope: &[],
                is_writer: false,
                resource_group: root_group.as_deref(),
                units: root_units,
            })
            .map_err(|e| fail(e.to_string()))?
    };
    drop(lock);
    let (changed, _) = tokio::sync::watch::channel(0u64);
    let (done, mut done_rx) = tokio::sync::watch::channel(false);
    let team = Arc::new(Team {
        store: store.clone(),
        session: id.clone(),
        snapshot,
        dir: PathBuf::from(&session.dir),
        workspace: PathBuf::from(&session.workspace),
        profile,
        ceilings,
        capacities,
        root_ref: root_ref.clone(),
        exe: std::env::current_exe().map_err(|e| fail(e.to_string()))?,
        socket: socket.clone(),
        codex: codex_app_server::find_codex().map_err(|e| e.to_string()),
        hosts: Mutex::new(HashMap::new()),
        admit: tokio::sync::Mutex::new(()),
        control_locks: Default::default(),
        changed,
        done,
    });
    store
        .set_supervisor(&id, Some(std::process::id()))
        .map_err(|e| e.to_string())?;
    store
        .set_session_state(
            &id,
            "running",
            resume.then_some("resumed by the operator after a suspension"),
        )
        .map_err(|e| e.to_string())?;
    let _ = store.audit(&id, "runtime", if resume { "session_resume" } else { "session_start" }, &id, &json!({"snapshot": session.snapshot, "workspace": session.workspace, "pid": std::process::id()}));
    match session.task.clone() {
        Some(task) if resume => crate::host::continue_root(
            team.clone(),
            root,
            task,
            crate::host::CONTINUE_ROOT_MESSAGE.to_string(),
        ),
        Some(task) => crate::host::start_root(team.clone(), root, task),
        None => {
            // Operator-driven: the operator is the root (`codex-mmo agent-mcp`); no root host.
            let _ = store.transition(
                &root_ref,
                JobState::Running,
                Some(if resume {
                    "operator-driven: resumed, no root host"
                } else {
                    "operator-driven: no root host"
                }),
            );
        }
    }
    team.notify();
    tokio::spawn(crate::stall::watch(team.clone()));

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| e.to_string())?;
    loop {
        tokio::select! {
            conn = listener.accept() => {
                if let Ok((stream, _)) = conn {
                    let team = team.clone();
                    tokio::spawn(async move { connection(team, stream).await });
                }
            }
            _ = done_rx.wait_for(|d| *d) => break,
            _ = term.recv() => { stop_session(&team, JobState::Stopped, "the supervisor was asked to stop (SIGTERM)").await; }
            _ = int.recv() => { stop_session(&team, JobState::Stopped, "the supervisor was interrupted").await; }
        }
    }
    // New callers find no socket and read the store; those already connected or queued get a
    // moment to be answered with the final state.
    let _ = std::fs::remove_file(&socket);
    let grace = tokio::time::sleep(Duration::from_millis(100));
    tokio::pin!(grace);
    loop {
        tokio::select! {
            conn = listener.accept() => {
                if let Ok((stream, _)) = conn {
                    tokio::spawn(connection(team.clone(), stream));
                }
            }
            _ = &mut grace => break,
        }
    }
    drop(listener);
    let _ = store.set_supervisor(&id, None);
    Ok(())
}

/// Admission of a session's root, decided under the store's admission lock (the caller holds
/// it): the root is an instance of its role too, and `max_active` holds across the profile's
/// sessions.
pub fn admit_root(
    store: &Store,
    profile: &mmo_profile::model::Profile,
    session: &str,
) -> Result<(), String> {
    let root_role = &profile.root;
    let elsewhere = active_elsewhere(store, &profile.id, session).map_err(|e| e.to_string())?;
    let running = elsewhere.get(root_role).copied().unwrap_or(0);
    let root_max = profile
        .agents
        .get(root_role)
        .map(|a| a.max_active)
        .unwrap_or(1);
    if running >= root_max {
        return Err(format!(
            "[admission_max_active] role `{root_role}` (the root) has max_active = {root_max} across the sessions of profile `{}` and {running} are active in other sessions; stop one, or raise the root's max_active",
            profile.id
        ));
    }
    Ok(())
}

/// The root run of a session being resumed. A root that ended cannot be resumed (a terminal
/// root session stays terminal), nor can one that is still active (its supervisor is live).
fn resumed_root(store: &Store, id: &str) -> Result<Run, String> {
    let root = store
        .runs(id)
        .map_err(|e| e.to_string())?
        .into_iter()
        .find(|r| r.parent.is_none())
        .ok_or_else(|| format!("session {id} has no root run to resume"))?;
    if !matches!(root.state.as_str(), "suspended" | "paused") {
        return Err(format!(
            "the root run {} is `{}`; only a suspended or paused root is resumed",
            root.run_ref, root.state
        ));
    }
    Ok(root)
}

/// Ends every active run as `end` (`stopped`, or `cancelled` at a harness boundary) and the
/// session as `stopped`.
pub async fn stop_session(team: &Arc<Team>, end: JobState, reason: &str) {
    let _ = team.store.audit(
        &team.session,
        "operator",
        "session_stop",
        &team.session,
        &json!({"reason": reason}),
    );
    let runs = team.store.runs(&team.session).unwrap_or_default();
    let mut stops = Vec::new();
    for r in runs
        .into_iter()
        .filter(|r| r.is_active() || matches!(r.state.as_str(), "suspended" | "paused"))
    {
        let team = team.clone();
        let reason = reason.to_string();
        stops.push(tokio::spawn(async move {
            crate::host::stop_run(&team, &r.run_ref, end, &reason).await
        }));
    }
    for s in stops {
        let _ = s.await;
    }
    let _ = team
        .store
        .set_session_state(&team.session, "stopped", Some(reason));
    finish(team).await;
}

/// Ends the supervisor once the session is terminal: workers still active are stopped first.
pub async fn finish(team: &Arc<Team>) {
    let runs = team.store.runs(&team.session).unwrap_or_default();
    for r in runs
        .into_iter()
        .filter(|r| r.is_active() || r.state == "paused")
    {
        crate::host::stop_run(team, &r.run_ref, JobState::Cancelled, "the session ended").await;
    }
    team.notify();
    let _ = team.done.send(true);
}

/// One connection: JSON-RPC lines in, answers out. Requests run concurrently (an
/// `agents_wait` does not hold up the calls behind it).
async fn connection(team: Arc<Team>, stream: UnixStream) {
    let peer = stream.peer_cred().ok();
    let hosts: HashMap<u32, String> = team
        .hosts
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(|(r, h)| h.pid.map(|p| (p, r.clone())))
        .collect();
    let same_user = peer
        .as_ref()
        .is_some_and(|c| c.uid() == unsafe { libc::getuid() });
    let identity = match peer.as_ref().and_then(|c| c.pid()) {
        Some(pid) if same_user => identify(pid as u32, &hosts, std::process::id()),
        _ => Identity::Refused(
            "the peer's credentials could not be read, or it is another user".into(),
        ),
    };
    let (read, mut write) = stream.into_split();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if write.write_all(line.as_bytes()).await.is_err()
                || write.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
    });
    let caller: Result<(Run, bool), String> = match &identity {
        Identity::Run(r) => team
            .store
            .run(r)
            .map(|r| (r, false))
            .map_err(|e| e.to_string()),
        Identity::Operator => team
            .store
            .run(&team.root_ref)
            .map(|r| (r, true))
            .map_err(|e| e.to_string()),
        Identity::Refused(why) => Err(why.clone()),
    };
    let mut lines = BufReader::new(read).take_lines(MAX_LINE);
    while let Some(line) = lines.next_line_bounded().await {
        let line = match line {
            Ok(l) => l,
            Err(why) => {
                let _ = tx.send(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": why}}).to_string());
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let msg: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                let _ = tx.send(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!("not JSON: {e}")}}).to_string());
                continue;
            }
        };
        let id = msg.get("id").cloned();
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let team = team.clone();
        let tx = tx.clone();
        let caller = caller.clone();
        tokio::spawn(async move {
            let answer = match &caller {
                Err(why) => Some(Err((-32001, format!("refused: {why}")))),
                Ok((run, operator)) => {
                    if let Some(op) = method.strip_prefix("session/") {
                        if *operator {
                            Some(operator_call(&team, op, params).await)
                        } else {
                            Some(Err((
                                -32001,
                                format!(
                                    "refused: `{method}` is for the operator, and agent run {} is not the operator",
                                    run.run_ref
                                ),
                            )))
                        }
                    } else {
                        // A run's row may have changed since the connection opened: reread it.
                        match team.store.run(&run.run_ref) {
                            Ok(now) => {
                                crate::mesh::handle(&team, &now, *operator, &method, params).await
                            }
                            Err(e) => Some(Err((-32603, e.to_string()))),
                        }
                    }
                }
            };
            if let (Some(answer), Some(id)) = (answer, id) {
                let msg = match answer {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                    Err((code, message)) => {
                        json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                    }
                };
                let _ = tx.send(msg.to_string());
            }
        });
    }
    drop(tx);
    let _ = writer.await;
}

/// The session's state as `inspect` shows it.
pub fn inspect_value(store: &Store, session: &Session, live: Option<&Team>) -> Value {
    let runs = store.runs(&session.id).unwrap_or_default();
    let views: Vec<Value> = runs
        .iter()
        .map(|r| match live {
            Some(t) => t.view(r),
            None => crate::team::view_of(store, r, None),
        })
        .collect();
    let digest = store.runtime_digest();
    json!({
        "session": session.id,
        "profile": session.profile_id,
        "snapshot": session.snapshot,
        "workspace": session.workspace,
        "state": session.state,
        "reason": session.reason,
        "tainted": session.tainted,
        "supervisor_pid": session.supervisor_pid,
        "package_version": session.package_version,
        "runtime_digest": session.runtime_digest,
        "runner_matches_installed": session.runtime_digest == digest
            && session.package_version == crate::store::PACKAGE_VERSION,
        "runs": views,
        "active": runs.iter().filter(|r| r.is_active()).count(),
        "audit": store.audit_log(&session.id).unwrap_or_default(),
    })
}

async fn operator_call(team: &Arc<Team>, op: &str, params: Value) -> Result<Value, (i64, String)> {
    let err = |e: crate::store::StoreError| (-32603, e.to_string());
    match op {
        "inspect" => {
            let s = team.store.session(&team.session).map_err(err)?;
            Ok(inspect_value(&team.store, &s, Some(team)))
        }
        "stop" => {
            // `{"cancel": true}`: a harness boundary (smoke's wall timeout) cancels the work.
            let (end, why) = if params.get("cancel").and_then(Value::as_bool) == Some(true) {
                (
                    JobState::Cancelled,
                    "cancelled at the harness's wall timeout",
                )
            } else {
                (JobState::Stopped, "stopped by the operator")
            };
            let team2 = team.clone();
            tokio::spawn(async move { stop_session(&team2, end, why).await });
            Ok(json!({"stopping": true}))
        }
        "events" => {
            let after = params.get("after").and_then(Value::as_i64).unwrap_or(0);
            let wait_ms = params
                .get("wait_ms")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(30_000);
            let mut rx = team.changed.subscribe();
            let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
            loop {
                rx.borrow_and_update();
                let events = team
                    .store
                    .session_events(&team.session, after, 200)
                    .map_err(err)?;
                let s = team.store.session(&team.session).map_err(err)?;
                if !events.is_empty() || wait_ms == 0 || is_terminal_session(&s.state) {
                    let runs: Vec<Value> = team
                        .store
                        .runs(&team.session)
                        .map_err(err)?
                        .iter()
                        .map(|r| team.view(r))
                        .collect();
                    return Ok(json!({"events": events, "state": s.state, "runs": runs}));
                }
                tokio::select! {
                    _ = rx.changed() => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
                if tokio::time::Instant::now() >= deadline {
                    let runs: Vec<Value> = team
                        .store
                        .runs(&team.session)
                        .map_err(err)?
                        .iter()
                        .map(|r| team.view(r))
                        .collect();
                    return Ok(json!({"events": [], "state": s.state, "runs": runs}));
                }
            }
        }
        _ => Err((
            -32601,
            format!("the supervisor has no operator method `session/{op}`"),
        )),
    }
}

/// Bounded line reading: a line longer than the limit is an error, not an allocation.
trait TakeLines {
    fn take_lines(self, max: usize) -> BoundedLines<Self>
    where
        Self: Sized;
}

impl<R: tokio::io::AsyncBufRead + Unpin> TakeLines for R {
    fn take_lines(self, max: usize) -> BoundedLines<Self> {
        BoundedLines { r: self, max }
    }
}

pub struct BoundedLines<R> {
    r: R,
    max: usize,
}

impl<R: tokio::io::AsyncBufRead + Unpin> BoundedLines<R> {
    /// The next line; `None` at the end; `Err` for an oversized or non-UTF-8 line.
    pub async fn next_line_bounded(&mut self) -> Option<Result<String, String>> {
        let mut buf = Vec::new();
        loop {
            let chunk = match self.r.fill_buf().await {
                Ok(c) => c,
                Err(e) => return Some(Err(e.to_string())),
            };
            if chunk.is_empty() {
                return if buf.is_empty() {
                    None
                } else {
                    Some(String::from_utf8(buf).map_err(|_| "a line is not UTF-8".into()))
                };
            }
            let (take, end) = match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            buf.extend_from_slice(&chunk[..take]);
            self.r.consume(take);
            if buf.len() > self.max {
                return Some(Err(format!("a line is longer than {} bytes", self.max)));
            }
            if end {
                buf.pop();
                if buf.last() == Some(&b'\r') {
                    buf.pop();
                }
                return Some(String::from_utf8(buf).map_err(|_| "a line is not UTF-8".into()));
            }
        }
    }
}

/// Whether a run is finished for good (re-exported for the CLI).
pub fn run_is_terminal(r: &Run) -> bool {
    is_terminal_run(&r.state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn identity_comes_from_the_process_tree() {
        // A "host" with a child: the child is the host's run.
        let mut host = Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let hpid = host.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let child = loop {
            let kids: Vec<u32> = std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
                .filter(|p| parent_of(*p) == Some(hpid))
                .collect();
            if let Some(k) = kids.first() {
                break *k;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the host's child did not start"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let me = std::process::id();
        let hosts = HashMap::from([(hpid, "run_a".to_string())]);
        assert_eq!(identify(child, &hosts, me), Identity::Run("run_a".into()));
        assert_eq!(identify(hpid, &hosts, me), Identity::Run("run_a".into()));
        // Under the supervisor but under no host: refused, never the operator.
        let no_hosts = HashMap::new();
        assert!(matches!(
            identify(child, &no_hosts, me),
            Identity::Refused(_)
        ));
        // Outside the supervisor's tree: the operator.
        let outside = parent_of(me).unwrap();
        assert_eq!(identify(outside, &hosts, me), Identity::Operator);
        unsafe {
            libc::kill(child as i32, libc::SIGKILL);
        }
        let _ = host.kill();
        let _ = host.wait();
    }

    #[test]
    fn a_session_its_supervisor_never_took_fails_after_the_start_wait() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db"), "digest").unwrap();
        let fresh = store
            .create_session("s1", "p", "addr", "/w", "/d", None)
            .unwrap();
        assert!(!recover(&store, &fresh).unwrap(), "still within the wait");
        assert_eq!(store.session("s1").unwrap().state, "starting");
        let mut old = fresh.clone();
        old.updated_at -= 3 * START_WAIT.as_millis() as i64;
        assert!(recover(&store, &old).unwrap());
        let s = store.session("s1").unwrap();
        assert_eq!(s.state, "failed");
        assert!(s.reason.unwrap().contains("never took"));
    }

    #[test]
    fn a_resume_no_supervisor_took_is_suspended_again_and_only_one_supervisor_claims() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("state.db"), "digest").unwrap();
        store
            .create_session("s1", "p", "addr", "/w", "/d", None)
            .unwrap();
        assert!(
            !store.mark_resuming("s1").unwrap(),
            "only a suspended session"
        );
        store.set_session_state("s1", "suspended", None).unwrap();
        assert!(store.mark_resuming("s1").unwrap());
        assert!(!store.mark_resuming("s1").unwrap(), "a second resume loses");
        let resuming = store.session("s1").unwrap();
        assert!(
            !recover(&store, &resuming).unwrap(),
            "still within the wait"
        );
        let mut old = resuming.clone();
        old.updated_at -= 3 * START_WAIT.as_millis() as i64;
        assert!(recover(&store, &old).unwrap());
        assert_eq!(store.session("s1").unwrap().state, "suspended");
        // Two supervisors racing for one session: the first claim wins.
        assert!(store.mark_resuming("s1").unwrap());
        assert!(store.claim_session("s1", "resuming", 1).unwrap());
        assert!(!store.claim_session("s1", "resuming", 2).unwrap());
        assert!(!store.claim_session("s1", "starting", 3).unwrap());
    }

    #[test]
    fn long_lines_are_refused_without_being_kept() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let data = format!("{}\nok\n", "x".repeat(100));
            let mut lines = BufReader::new(data.as_bytes()).take_lines(50);
            assert!(lines.next_line_bounded().await.unwrap().is_err());
        });
    }
}
