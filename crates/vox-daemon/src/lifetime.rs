//! How long the daemon lives. One started on purpose (`vox daemon start`, `vox serve`, by hand)
//! stays until it is stopped. One spawned by a client (`vox mcp`) exits once no client has been
//! attached for its idle limit (`VOX_DAEMON_IDLE_SECS`, default 300; 0 = never), so the next
//! client with other settings gets a fresh daemon instead of a refusal or a stale one.
//!
//! A connection counts as a client once it attaches (`orch.ping {"attach": true}`); status
//! probes (`vox daemon status`, `vox doctor`) ping without attaching and keep nobody alive.
//! Deciding to exit and attaching take one lock, so a client either attaches before the
//! daemon closes or is turned away and spawns a new one.

use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The default idle limit of a spawned daemon.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(300);

/// The environment variable that sets the idle limit, in seconds.
pub const IDLE_VAR: &str = "VOX_DAEMON_IDLE_SECS";

/// Reads [`IDLE_VAR`]: `None` means never exit.
pub fn idle_from_env() -> Result<Option<Duration>, String> {
    match vox_core::env::number(IDLE_VAR).map_err(|e| e.to_string())? {
        None => Ok(Some(DEFAULT_IDLE)),
        Some(0) => Ok(None),
        Some(n) => Ok(Some(Duration::from_secs(n))),
    }
}

/// Who started the daemon, which decides whether it exits when idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Started on purpose: stays until stopped.
    Started,
    /// Spawned by a client: exits after `idle` without clients (`None`: never).
    Spawned {
        /// How long it waits without clients before exiting; `None`: it never exits on its own.
        idle: Option<Duration>,
    },
}

struct State {
    kind: Kind,
    clients: usize,
    /// When the last client left (or the daemon started).
    idle_since: Instant,
    /// The daemon decided to exit; nobody attaches any more.
    closing: bool,
}

/// The daemon's lifetime: its kind and the attached clients.
#[derive(Clone)]
pub struct Lifetime(Arc<Mutex<State>>);

/// One attached client; dropping it detaches.
pub struct Attached(Lifetime);

impl Drop for Attached {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.clients -= 1;
        if s.clients == 0 {
            s.idle_since = Instant::now();
        }
    }
}

/// What `orch.ping` reports as `lifetime`.
#[derive(Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// `started` (stays) or `spawned` (exits when idle).
    pub kind: String,
    /// Attached clients now.
    pub clients: usize,
    /// The idle limit of a spawned daemon; absent when it never exits on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_exit_secs: Option<u64>,
    /// With no client attached: milliseconds until it exits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exits_in_ms: Option<u64>,
}

impl Lifetime {
    /// A lifetime of `kind` with no client attached, idle from now.
    pub fn new(kind: Kind) -> Self {
        Lifetime(Arc::new(Mutex::new(State {
            kind,
            clients: 0,
            idle_since: Instant::now(),
            closing: false,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Attaches a client; `None` once the daemon is closing.
    pub fn attach(&self) -> Option<Attached> {
        let mut s = self.lock();
        if s.closing {
            return None;
        }
        s.clients += 1;
        Some(Attached(self.clone()))
    }

    /// From now on the daemon stays (a `vox daemon start` adopted it).
    pub fn keep(&self) {
        self.lock().kind = Kind::Started;
    }

    /// Closes now if this is a spawned daemon with no client attached; says whether it did.
    /// A client that needs another profile retires such a daemon instead of being refused.
    pub fn retire_if_unattended(&self) -> bool {
        let mut s = self.lock();
        if s.closing {
            return true;
        }
        if matches!(s.kind, Kind::Spawned { .. }) && s.clients == 0 {
            s.closing = true;
        }
        s.closing
    }

    /// Whether the daemon decided to exit.
    pub fn closing(&self) -> bool {
        self.lock().closing
    }

    /// The lifetime as `orch.ping` reports it.
    pub fn report(&self) -> Report {
        let s = self.lock();
        let (kind, idle) = match s.kind {
            Kind::Started => ("started", None),
            Kind::Spawned { idle } => ("spawned", idle),
        };
        let exits_in_ms = match idle {
            Some(limit) if s.clients == 0 => {
                Some(limit.saturating_sub(s.idle_since.elapsed()).as_millis() as u64)
            }
            _ => None,
        };
        Report {
            kind: kind.into(),
            clients: s.clients,
            idle_exit_secs: idle.map(|d| d.as_secs()),
            exits_in_ms,
        }
    }

    /// Resolves when the daemon should exit for lack of clients; never for a daemon that stays
    /// (started, an idle limit of 0, or one already closing for another reason, whose stop
    /// was sent by whoever closed it). `busy` says whether requests are still being answered:
    /// a daemon with work in flight is not idle.
    pub async fn idle_exit(&self, busy: impl Fn() -> bool) {
        loop {
            let wait = {
                let mut s = self.lock();
                match s.kind {
                    Kind::Spawned { idle: Some(limit) } if !s.closing => {
                        let idle_for = s.idle_since.elapsed();
                        if s.clients > 0 || busy() {
                            // Looked at again when the limit could first be reached.
                            Some(limit.min(Duration::from_secs(1)))
                        } else if idle_for >= limit {
                            s.closing = true;
                            return;
                        } else {
                            Some(limit - idle_for)
                        }
                    }
                    // A started daemon never becomes a spawned one again.
                    _ => None,
                }
            };
            match wait {
                Some(wait) => tokio::time::sleep(wait.max(Duration::from_millis(10))).await,
                None => std::future::pending().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_started_daemon_reports_no_exit() {
        let l = Lifetime::new(Kind::Started);
        let r = l.report();
        assert_eq!(
            (r.kind.as_str(), r.idle_exit_secs, r.exits_in_ms),
            ("started", None, None)
        );
        assert!(!l.retire_if_unattended());
    }

    #[tokio::test]
    async fn a_daemon_that_stays_never_reaches_its_idle_exit() {
        for kind in [Kind::Started, Kind::Spawned { idle: None }] {
            let l = Lifetime::new(kind);
            let exit = tokio::time::timeout(Duration::from_millis(300), l.idle_exit(|| false));
            assert!(exit.await.is_err(), "{kind:?} stays");
        }
    }

    #[test]
    fn clients_hold_a_spawned_daemon_and_closing_turns_new_ones_away() {
        let l = Lifetime::new(Kind::Spawned {
            idle: Some(Duration::from_secs(300)),
        });
        let a = l.attach().unwrap();
        assert_eq!(l.report().clients, 1);
        assert_eq!(l.report().exits_in_ms, None);
        assert!(!l.retire_if_unattended(), "a client is attached");
        drop(a);
        let r = l.report();
        assert_eq!(r.clients, 0);
        assert!(r.exits_in_ms.unwrap() > 299_000);
        assert!(l.retire_if_unattended());
        assert!(l.attach().is_none(), "closing: nobody attaches");
    }

    #[test]
    fn keep_turns_a_spawned_daemon_into_one_that_stays() {
        let l = Lifetime::new(Kind::Spawned {
            idle: Some(Duration::from_secs(1)),
        });
        l.keep();
        assert_eq!(l.report().kind, "started");
        assert!(!l.retire_if_unattended());
    }

    #[tokio::test]
    async fn idle_exit_waits_for_the_limit_after_the_last_client() {
        let l = Lifetime::new(Kind::Spawned {
            idle: Some(Duration::from_millis(300)),
        });
        let a = l.attach().unwrap();
        let watcher = tokio::spawn({
            let l = l.clone();
            async move { l.idle_exit(|| false).await }
        });
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(!watcher.is_finished(), "a client is attached");
        drop(a);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !watcher.is_finished(),
            "the limit has not passed since the client left"
        );
        tokio::time::timeout(Duration::from_secs(5), watcher)
            .await
            .expect("exits once the limit passes")
            .unwrap();
        assert!(l.closing());
    }
}
