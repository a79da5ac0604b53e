//! The daemon's life: one per workspace (an exclusive lock held while it runs), boot, the
//! socket (mode 0600) beside its pid/profile file, and a graceful stop.

use crate::lifetime::{Kind, Lifetime};
use crate::rpc::{self, InFlight};
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::UnixListener;
use tokio::sync::watch;
use vox_core::{Family, Orchestrator, Workspace};
use vox_mcp_registry::{ProfileSet, SubsystemId};

/// Why the daemon could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The `.vox` directory, the lock file or the boot could not be set up (why).
    #[error("{0}")]
    Setup(String),
    /// Another daemon holds the workspace's lock.
    #[error(
        "a daemon already runs for workspace {workspace} ({info}); `vox daemon status` shows it, `vox daemon stop` stops it (daemon log: {log} when vox mcp or vox daemon start started it)"
    )]
    AlreadyRunning {
        /// The workspace root.
        workspace: String,
        /// Its info file (pid, profile, socket, start time, as JSON), or `no info`.
        info: String,
        /// The running daemon's log file.
        log: String,
    },
    /// Every subsystem the profile requires failed to boot.
    #[error("every subsystem profile `{profile}` requires failed: {failures}")]
    AllRequiredFailed {
        /// The canonical profile.
        profile: String,
        /// Each failed subsystem and why, `subsystem: error` joined by `; `.
        failures: String,
    },
}

/// A daemon that owns its workspace: the lock is released when this is dropped.
pub struct Daemon {
    orch: Arc<Orchestrator>,
    listener: UnixListener,
    lifetime: Lifetime,
    host: Option<Arc<dyn crate::host::SessionHost>>,
    _lock: File,
}

impl Daemon {
    /// Takes the workspace lock, boots, and binds the socket. Must run inside a tokio runtime.
    /// `kind` says whether it stays until stopped or exits when no client is left.
    pub fn start(
        ws: Workspace,
        profile: ProfileSet,
        families: Vec<Family>,
        kind: Kind,
    ) -> Result<Self, DaemonError> {
        ws.ensure_vox_dir()
            .map_err(|e| DaemonError::Setup(e.to_string()))?;
        let lock_path = ws.daemon_lock_path();
        let lock = vox_core::open_state_file(&lock_path, false)
            .map_err(|e| DaemonError::Setup(e.to_string()))?;
        if lock.try_lock().is_err() {
            let info =
                std::fs::read_to_string(ws.daemon_info_path()).unwrap_or_else(|_| "no info".into());
            return Err(DaemonError::AlreadyRunning {
                workspace: ws.root.display().to_string(),
                info: info.trim().to_owned(),
                log: ws.daemon_log_path().display().to_string(),
            });
        }
        // A store that existed and lost its data stops the daemon instead of degrading it:
        // serving on would hide the loss (and a fallback could write beside it).
        if profile.closure_mask() & SubsystemId::Db.bit() != 0 {
            vox_store::Store::check_not_lost(&ws.db_path())
                .map_err(|e| DaemonError::Setup(e.to_string()))?;
        }
        let orch = Orchestrator::boot(ws.clone(), profile.clone(), families)
            .map_err(DaemonError::Setup)?;
        let report = orch.boot_report();
        for (sub, why) in &report.failed {
            tracing::warn!(subsystem = sub, "subsystem down: {why}");
        }
        if report.all_required_failed(&profile) {
            let failures = report
                .failed
                .iter()
                .map(|(s, w)| format!("{s}: {w}"))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(DaemonError::AllRequiredFailed {
                profile: profile.canonical().to_owned(),
                failures,
            });
        }
        let socket = ws.socket_path();
        // We hold the lock, so a socket file left here belongs to a dead daemon.
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)
            .map_err(|e| DaemonError::Setup(format!("cannot bind {}: {e}", socket.display())))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| DaemonError::Setup(format!("cannot chmod {}: {e}", socket.display())))?;
        let info = serde_json::json!({
            "pid": std::process::id(),
            "profile": profile.canonical(),
            "socket": socket,
            "started_at_ms": vox_store::now_ms(),
        });
        vox_core::write_state_file(&ws.daemon_info_path(), &format!("{info}\n")).map_err(|e| {
            DaemonError::Setup(format!(
                "cannot write {}: {e}",
                ws.daemon_info_path().display()
            ))
        })?;
        tracing::info!(
            profile = profile.canonical(),
            booted = ?report.booted,
            micros = report.total_micros,
            "daemon listening on {}",
            socket.display()
        );
        Ok(Daemon {
            orch: orch.shared(),
            listener,
            lifetime: Lifetime::new(kind),
            host: None,
            _lock: lock,
        })
    }

    /// Serves MCP sessions (socket connections, and stdio sessions `vox mcp` hands off) with
    /// `host`; without one the daemon serves only control requests.
    pub fn with_session_host(mut self, host: Arc<dyn crate::host::SessionHost>) -> Self {
        self.host = Some(host);
        self
    }

    /// The booted orchestrator.
    pub fn orchestrator(&self) -> &Arc<Orchestrator> {
        &self.orch
    }

    /// Serves until `orch.shutdown`, SIGTERM, SIGINT or (for a spawned daemon) its idle
    /// limit without clients; lets in-flight calls finish (up to 10 s), flushes the attention
    /// ledger, and removes the socket and info file.
    pub async fn run(self) {
        let (stop_tx, mut stop_rx) = watch::channel(false);
        let in_flight = InFlight::default();
        let orch = self.orch.clone();
        let flusher = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            loop {
                tick.tick().await;
                let o = orch.clone();
                let _ = tokio::task::spawn_blocking(move || o.flush_observers()).await;
            }
        });
        let signals = stop_tx.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return;
            };
            tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
            let _ = signals.send(true);
        });
        let idle = {
            let (lifetime, in_flight, stop) =
                (self.lifetime.clone(), in_flight.clone(), stop_tx.clone());
            tokio::spawn(async move {
                lifetime.idle_exit(|| in_flight.count() > 0).await;
                tracing::info!(
                    "no client for the idle limit ({}); exiting",
                    crate::lifetime::IDLE_VAR
                );
                let _ = stop.send(true);
            })
        };
        let server = tokio::spawn(rpc::serve(
            self.listener,
            self.orch.clone(),
            stop_tx,
            in_flight.clone(),
            self.lifetime.clone(),
            self.host.clone(),
        ));
        let _ = stop_rx.wait_for(|s| *s).await;
        let _ = server.await;
        let ws = self.orch.workspace().clone();
        let _ = std::fs::remove_file(ws.socket_path());
        let deadline = Instant::now() + Duration::from_secs(10);
        // Our own `orch.shutdown` request counts as one until its answer is sent.
        while in_flight.count() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        flusher.abort();
        idle.abort();
        let orch = self.orch.clone();
        let _ = tokio::task::spawn_blocking(move || {
            orch.stopping();
            orch.flush_observers();
        })
        .await;
        let _ = std::fs::remove_file(ws.daemon_info_path());
        // Give the writer tasks a moment to deliver the last answers.
        tokio::time::sleep(Duration::from_millis(20)).await;
        tracing::info!("daemon stopped");
    }
}
