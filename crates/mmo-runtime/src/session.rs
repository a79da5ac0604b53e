//! A session's life outside any one live process: creating it, recovering it when its
//! supervisor is gone, the root's admission across the profile's live sessions, stopping it,
//! and how `inspect` shows it. The supervisor (`supervisor`) runs a session; the operator's
//! commands and `mmo_mesh`'s operator methods (`mesh`) read and stop it through here.

use crate::host::finish;
use crate::result::JobState;
use crate::store::{Run, Session, Store, StoreError, is_terminal_session};
use crate::team::Team;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
            let digest = crate::ids::hex(&Sha256::digest(&bytes));
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
    let id = crate::ids::new_id("mmo");
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
                let partial = store.last_agent_message(&run.run_ref).unwrap_or_default();
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

/// Active runs per role in the other live sessions of `profile_id` (`max_active` counts across
/// the stable profile id). A session counts while its supervisor runs; one whose supervisor is
/// gone holds nothing (its runs are suspended when it is next looked at).
pub fn active_elsewhere(
    store: &Store,
    profile_id: &str,
    session: &str,
) -> Result<std::collections::BTreeMap<String, u32>, StoreError> {
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
pub(crate) fn resumed_root(store: &Store, id: &str) -> Result<Run, String> {
    let root = store
        .runs(id)
        .map_err(|e| e.to_string())?
        .into_iter()
        .find(|r| r.parent.is_none())
        .ok_or_else(|| format!("session {id} has no root run to resume"))?;
    if !matches!(root.state, JobState::Suspended | JobState::Paused) {
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
        .filter(|r| r.is_active() || matches!(r.state, JobState::Suspended | JobState::Paused))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewRun;

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
    fn inspection_says_whether_a_run_was_written_by_the_installed_runner() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        let old = Store::open(&db, "old-digest").unwrap();
        old.create_session("s1", "p", "addr", "/w", "/d", None)
            .unwrap();
        let run = old
            .create_run(&NewRun {
                run_ref: "r1",
                session: "s1",
                job: None,
                role: "lead",
                parent: None,
                depth: 0,
                lineage: &[],
                task_kind: None,
                task: None,
                literal: None,
                write_scope: &[],
                is_writer: false,
                resource_group: None,
                units: 1,
            })
            .unwrap();
        assert_eq!(
            crate::team::view_of(&old, &run, None)["runner_matches_installed"],
            true
        );
        // Another binary installed since: the same rows no longer match it.
        let new = Store::open(&db, "new-digest").unwrap();
        let run = new.run("r1").unwrap();
        assert_eq!(
            crate::team::view_of(&new, &run, None)["runner_matches_installed"],
            false
        );
        let session = new.session("s1").unwrap();
        assert_eq!(
            inspect_value(&new, &session, None)["runner_matches_installed"],
            false
        );
    }
}
