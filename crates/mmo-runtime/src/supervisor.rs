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
use crate::session::{Paths, admit_root, resumed_root, stop_session};
use crate::store::{NewRun, Run, Session, Store};
use crate::team::Team;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};

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

/// Runs the supervisor of session `id` until the session ends: a new session (`starting`), or
/// with `resume` a suspended one that `codex-mmo resume` marked `resuming`. A resumed session
/// keeps its runs: the root continues its own thread (or, operator-driven, runs again), and its
/// suspended and paused jobs wait for an authorized controller's `continue`.
pub async fn serve(paths: Paths, id: String, resume: bool) -> Result<(), String> {
    let store = Arc::new(paths.open()?);
    let session = claim(&store, &id, resume)?;
    // A new session that cannot start has failed; a resumed one that cannot is suspended again
    // (its evidence and threads are still there for a later resume).
    let fail = |why: String| {
        let state = if resume { "suspended" } else { "failed" };
        let _ = store.set_session_state(&id, state, Some(&why));
        let _ = store.set_supervisor(&id, None);
        why
    };
    let snapshot = load_snapshot(&session.snapshot, &fail)?;
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
    let root = take_root(&store, &session, &snapshot.profile, resume).map_err(fail)?;
    let (changed, _) = tokio::sync::watch::channel(0u64);
    let (done, done_rx) = tokio::sync::watch::channel(false);
    let team = Arc::new(Team {
        store: store.clone(),
        session: id.clone(),
        snapshot: snapshot.dir,
        dir: PathBuf::from(&session.dir),
        workspace: PathBuf::from(&session.workspace),
        profile: snapshot.profile,
        ceilings: snapshot.ceilings,
        capacities: snapshot.capacities,
        root_ref: root.run_ref.clone(),
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
    run_root(&team, root, session.task.clone(), resume);
    team.notify();
    tokio::spawn(crate::stall::watch(team.clone()));
    accept_until_done(&team, listener, done_rx).await?;
    let _ = store.set_supervisor(&id, None);
    Ok(())
}

/// Takes session `id` for this supervisor: it must be `starting` (or `resuming` with `resume`),
/// and no other supervisor may have claimed it.
fn claim(store: &Store, id: &str, resume: bool) -> Result<Session, String> {
    let session = store.session(id).map_err(|e| e.to_string())?;
    let expected = if resume { "resuming" } else { "starting" };
    if session.state != expected
        || !store
            .claim_session(id, expected, std::process::id())
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
    Ok(session)
}

/// What a session runs, from its verified snapshot.
struct Snapshot {
    dir: PathBuf,
    profile: mmo_profile::model::Profile,
    ceilings: crate::admission::Ceilings,
    capacities: crate::admission::Capacities,
}

/// Checked again where it takes effect: the operator may have withdrawn a consent since the
/// snapshot was compiled, and a snapshot directory is only as trusted as whoever wrote it.
fn check_credential_destinations(
    dirs: &mmo_profile::store::Dirs,
    catalog: &Value,
) -> Result<(), String> {
    let consent = mmo_profile::consent::Consent::load(&dirs.config).map_err(|e| e.to_string())?;
    let catalog: mmo_profile::catalog::Catalog =
        serde_json::from_value(catalog.clone()).map_err(|e| format!("catalog.json: {e}"))?;
    let mut d = mmo_profile::diag::Diags::default();
    consent.check(&catalog, "catalog.json", &mut d);
    if d.is_empty() {
        Ok(())
    } else {
        Err(mmo_profile::Rejected(d.into_sorted()).to_string())
    }
}

/// Verifies and reads snapshot `address`; a snapshot that fails is the session's failure
/// (`fail` records it and gives the reason back).
fn load_snapshot(address: &str, fail: &dyn Fn(String) -> String) -> Result<Snapshot, String> {
    let dirs = mmo_profile::store::Dirs::from_env().map_err(|e| e.to_string())?;
    let dir = dirs.snapshot_dir(address);
    mmo_profile::snapshot::verify_snapshot(&dir).map_err(|e| fail(e.to_string()))?;
    let read = |name: &str| -> Result<Value, String> {
        let p = dir.join(name);
        serde_json::from_str(
            &std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?,
        )
        .map_err(|e| format!("{}: {e}", p.display()))
    };
    let profile = serde_json::from_value(read("profile.json")?)
        .map_err(|e| fail(format!("profile.json: {e}")))?;
    let ceilings = crate::admission::Ceilings::from_json(&read("ceilings.json")?.to_string())
        .map_err(|e| fail(format!("ceilings.json: {e}")))?;
    let catalog = read("catalog.json")?;
    check_credential_destinations(&dirs, &catalog).map_err(fail)?;
    let capacities = crate::admission::Capacities::from_catalog_json(&catalog.to_string())
        .map_err(|e| fail(format!("catalog.json: {e}")))?;
    Ok(Snapshot {
        dir,
        profile,
        ceilings,
        capacities,
    })
}

/// The session's root run, admitted under the store's admission lock: a new one, or with
/// `resume` the suspended or paused root the session had.
fn take_root(
    store: &Store,
    session: &Session,
    profile: &mmo_profile::model::Profile,
    resume: bool,
) -> Result<Run, String> {
    let id = &session.id;
    let _lock = store.admission_lock().map_err(|e| e.to_string())?;
    if resume {
        resumed_root(store, id)?;
    }
    admit_root(store, profile, id)?;
    if resume {
        return resumed_root(store, id);
    }
    let role = profile.agents.get(&profile.root);
    store
        .create_run(&NewRun {
            run_ref: &crate::ids::new_id("run"),
            session: id,
            job: None,
            role: &profile.root,
            parent: None,
            depth: 0,
            lineage: &[],
            task_kind: None,
            task: session.task.as_deref(),
            literal: None,
            write_scope: &[],
            is_writer: false,
            resource_group: role.and_then(|a| a.resource_group.as_deref()),
            units: role.map(|a| a.resource_units).unwrap_or(1),
        })
        .map_err(|e| e.to_string())
}

/// Starts the root: its host on its task (continuing its own thread after a resume), or, with
/// no task, the operator is the root (`codex-mmo agent-mcp`) and there is no root host.
fn run_root(team: &Arc<Team>, root: Run, task: Option<String>, resume: bool) {
    match task {
        Some(task) if resume => crate::host::continue_root(
            team.clone(),
            root,
            task,
            crate::host::CONTINUE_ROOT_MESSAGE.to_string(),
        ),
        Some(task) => crate::host::start_root(team.clone(), root, task),
        None => {
            let _ = team.store.transition(
                &root.run_ref,
                JobState::Running,
                Some(if resume {
                    "operator-driven: resumed, no root host"
                } else {
                    "operator-driven: no root host"
                }),
            );
        }
    }
}

/// Serves the socket until the session is done (or a signal stops it), then a moment more:
/// new callers find no socket and read the store; those already connected or queued are
/// answered with the final state.
async fn accept_until_done(
    team: &Arc<Team>,
    listener: UnixListener,
    mut done: tokio::sync::watch::Receiver<bool>,
) -> Result<(), String> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| e.to_string())?;
    loop {
        tokio::select! {
            conn = listener.accept() => {
                if let Ok((stream, _)) = conn {
                    tokio::spawn(connection(team.clone(), stream));
                }
            }
            _ = done.wait_for(|d| *d) => break,
            _ = term.recv() => { stop_session(team, JobState::Stopped, "the supervisor was asked to stop (SIGTERM)").await; }
            _ = int.recv() => { stop_session(team, JobState::Stopped, "the supervisor was interrupted").await; }
        }
    }
    let _ = std::fs::remove_file(&team.socket);
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
    Ok(())
}

/// One connection: who its peer is, decided from the kernel (`identify`), then `mmo_mesh`
/// served to it (`mesh::serve`; requests run concurrently, so an `agents_wait` does not hold
/// up the calls behind it).
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
    crate::mesh::serve(team, stream, caller).await;
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
    fn a_snapshot_sending_a_credential_without_consent_does_not_load() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = mmo_profile::store::Dirs {
            data: tmp.path().join("data"),
            config: tmp.path().join("config"),
        };
        std::fs::create_dir_all(&dirs.config).unwrap();
        let mut catalog = mmo_profile::catalog::Catalog::builtin();
        let builtin = serde_json::to_value(&catalog).unwrap();
        assert_eq!(check_credential_destinations(&dirs, &builtin), Ok(()));
        let route = catalog
            .routes
            .values_mut()
            .find(|r| r.provider.is_none())
            .unwrap();
        route.base_url = Some("https://collector.example/v1".into());
        route.credential_env = Some("OPENAI_API_KEY".into());
        let json = serde_json::to_value(&catalog).unwrap();
        let err = check_credential_destinations(&dirs, &json).unwrap_err();
        assert!(err.contains("catalog_credential_destination"), "{err}");
        std::fs::write(
            dirs.config.join("credentials.toml"),
            "[[allow]]\ncredential_env = \"OPENAI_API_KEY\"\norigin = \"https://collector.example\"\n",
        )
        .unwrap();
        assert_eq!(check_credential_destinations(&dirs, &json), Ok(()));
    }
}
