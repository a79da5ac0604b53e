//! Watching: each server (one that went away is started again after its backoff; an HTTP one
//! that stops answering `ping` is marked failed and reconnected), and the `servers.toml` files
//! (a change reloads them: a server removed or changed is stopped, a new one started).

use crate::surface::{Server, Status, Upstreams, lock};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

/// How often a server, and the config files, are looked at.
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(5);

/// Watches `server` until it is retired or the servers stop.
pub(crate) async fn server(upstreams: Weak<Upstreams>, server: Weak<Server>) {
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let (Some(u), Some(server)) = (upstreams.upgrade(), server.upgrade()) else {
            return;
        };
        if u.is_stopped() || server.is_retired() {
            return;
        }
        let conn = server.conn.lock().await.clone();
        match conn {
            Some(c) if c.is_closed() => {
                let _ = u.connection(&server).await;
            }
            Some(c) if server.config.is_http() => {
                if let Err(e) = c.ping(WATCH_EVERY).await {
                    tracing::warn!(target: "vox.upstream", server = %server.config.id, "health check: {e}");
                    *server.conn.lock().await = None;
                    {
                        let mut st = lock(&server.state);
                        st.status = Status::Failed;
                        st.error = Some(format!("health check: {e}"));
                    }
                    let _ = u.connection(&server).await;
                }
            }
            Some(_) => {}
            None => {
                let due = lock(&server.retry_at).is_some_and(|at| Instant::now() >= at);
                let failed = matches!(
                    lock(&server.state).status,
                    Status::Failed | Status::CircuitOpen
                );
                if failed && due {
                    let _ = u.connection(&server).await;
                }
            }
        }
    }
}

/// What a config file looks like from outside: its modification time and length, or none.
fn stamp(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Reloads the servers whenever one of `files` changes, until the servers stop.
pub(crate) async fn config(upstreams: Weak<Upstreams>, files: Vec<std::path::PathBuf>) {
    let mut seen: Vec<_> = files.iter().map(|f| stamp(f)).collect();
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Some(u) = upstreams.upgrade() else { return };
        if u.is_stopped() {
            return;
        }
        let now: Vec<_> = files.iter().map(|f| stamp(f)).collect();
        if now != seen {
            seen = now;
            u.reload();
        }
    }
}

/// Starts watching `server` (and starting it, if it starts at boot).
pub(crate) fn start(u: &Arc<Upstreams>, server: &Arc<Server>, boot: bool) {
    let (me, s) = (Arc::downgrade(u), Arc::downgrade(server));
    tokio::spawn(async move {
        if boot && let (Some(u), Some(s)) = (me.upgrade(), s.upgrade()) {
            let _ = u.connection(&s).await;
        }
        self::server(me, s).await;
    });
}
