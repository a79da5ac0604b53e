//! The upstream servers as one source of tools ([`Upstreams`], the core's `UpstreamTools`):
//! each server's connection, started at boot or on first use and restarted with backoff (a
//! circuit opens after repeated failures and says so), its listing (pinned in `pins`), the
//! tools served now, and reloading `servers.toml` (a server removed or changed is stopped).

use crate::config::{ServerConfig, Start};
use crate::federation::Changed;
use crate::server::{Connection, Events};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use vox_core::{ToolError, UpstreamTool};
use vox_mcp_registry::UpstreamClass;
use vox_store::Store;

/// Failed starts in a row after which the circuit opens.
const CIRCUIT_FAILURES: u32 = 5;
/// How long an open circuit stays open before one more try.
const CIRCUIT_OPEN: Duration = Duration::from_secs(60);

/// A server's state, as `vox upstream status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not started yet (`start = "on_use"`), or stopped with the daemon.
    Stopped,
    /// Starting.
    Starting,
    /// Connected; its approved tools are served.
    Ready,
    /// Its last start failed; the next use tries again after a backoff.
    Failed,
    /// It failed to start too many times in a row: not tried again until the circuit closes.
    CircuitOpen,
}

/// Why a listed tool is not served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Withheld {
    /// Its definition differs from the one a person approved.
    Changed,
    /// The server added it after its first listing, and its config does not trust new tools.
    New,
    /// Its name is not a valid MCP tool name (or too long with the server's prefix).
    BadName,
    /// The journey store is down: no definition can be checked against its pin.
    NoStore,
}

/// A listed tool and what became of it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ToolState {
    /// Its own name on the server.
    pub tool: String,
    /// The name vox serves it as.
    pub served_as: String,
    /// Why it is withheld; absent when it is served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub withheld: Option<Withheld>,
    /// The hash of its current definition.
    pub hash: String,
}

/// One server's state.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ServerState {
    /// Its id.
    pub id: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// The file that declares it.
    pub file: String,
    /// Its state.
    pub status: Status,
    /// Why it failed (its last error), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Failed starts in a row.
    pub failures: u32,
    /// How many times it was started again after it went away.
    pub restarts: u32,
    /// Its tools as last listed.
    pub tools: Vec<ToolState>,
}

/// One declared server: its config, its connection and what it last said.
pub(crate) struct Server {
    pub(crate) config: ServerConfig,
    pub(crate) conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
    pub(crate) state: Mutex<ServerState>,
    /// When the next start may be tried (backoff, an open circuit).
    pub(crate) retry_at: Mutex<Option<Instant>>,
    /// Until when what it lists is pinned as first seen (set at its first listing: a minute
    /// when the store had no pin of it, else already past; its first call ends it).
    pub(crate) first_seen_until: Mutex<Option<Instant>>,
    /// Whether an `on_use` server has been asked for (listed or called) yet.
    used: AtomicBool,
    /// Removed from (or changed in) `servers.toml`: never started again.
    retired: AtomicBool,
    /// Its resources and prompts as last listed (their own URIs and names).
    pub(crate) resources: Mutex<Vec<Value>>,
    pub(crate) prompts: Mutex<Vec<Value>>,
}

impl Server {
    fn new(config: ServerConfig) -> Arc<Self> {
        let state = ServerState {
            id: config.id.clone(),
            transport: if config.is_http() { "http" } else { "stdio" },
            file: config.file.display().to_string(),
            status: Status::Stopped,
            error: None,
            failures: 0,
            restarts: 0,
            tools: Vec::new(),
        };
        Arc::new(Server {
            config,
            conn: tokio::sync::Mutex::new(None),
            state: Mutex::new(state),
            retry_at: Mutex::new(None),
            first_seen_until: Mutex::new(None),
            used: AtomicBool::default(),
            retired: AtomicBool::default(),
            resources: Mutex::default(),
            prompts: Mutex::default(),
        })
    }

    /// Its first call ends the first-seen window: what it adds from now on waits for a person.
    pub(crate) fn first_call(&self) {
        let mut until = lock(&self.first_seen_until);
        let now = Instant::now();
        if until.is_none_or(|t| t > now) {
            *until = Some(now);
        }
    }

    pub(crate) fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    /// Ends its connection (its process group and every descendant) for good.
    fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        if let Ok(mut conn) = self.conn.try_lock() {
            *conn = None;
        }
        lock(&self.state).status = Status::Stopped;
    }
}

/// The served tools, rebuilt when a server's listing changes.
#[derive(Default)]
pub(crate) struct Served {
    pub(crate) tools: Arc<[UpstreamTool]>,
    /// Served name → (its server, the tool's own name, its class).
    pub(crate) by_name: HashMap<String, (Arc<Server>, String, UpstreamClass)>,
}

/// Where the servers are declared: the workspace's `.vox` and the user's directory.
#[derive(Clone)]
pub struct Sources {
    /// `<workspace>/.vox`.
    pub vox_dir: PathBuf,
    /// `~/.vox` (or `$VOX_HOME`).
    pub home: Option<PathBuf>,
}

impl Sources {
    fn files(&self) -> Vec<PathBuf> {
        std::iter::once(self.vox_dir.join("servers.toml"))
            .chain(self.home.iter().map(|h| h.join("servers.toml")))
            .collect()
    }
}

/// Every upstream server of the workspace.
pub struct Upstreams {
    servers: Mutex<Arc<Vec<Arc<Server>>>>,
    sources: Option<Sources>,
    pub(crate) store: Option<Arc<Store>>,
    pub(crate) served: Mutex<Arc<Served>>,
    pub(crate) notifier: tokio::sync::broadcast::Sender<Value>,
    pub(crate) me: Weak<Upstreams>,
    /// Set by [`Upstreams::stop`]: nothing is started any more.
    stopped: AtomicBool,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Upstreams {
    /// The servers of `configs` (read from `sources`, which a reload reads again), none
    /// started yet.
    pub fn new(
        configs: Vec<ServerConfig>,
        sources: Option<Sources>,
        store: Option<Arc<Store>>,
        notifier: tokio::sync::broadcast::Sender<Value>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Upstreams {
            servers: Mutex::new(Arc::new(configs.into_iter().map(Server::new).collect())),
            sources,
            store,
            served: Mutex::default(),
            notifier,
            me: me.clone(),
            stopped: AtomicBool::default(),
        })
    }

    /// The servers now, in id order.
    pub(crate) fn servers(&self) -> Arc<Vec<Arc<Server>>> {
        lock(&self.servers).clone()
    }

    /// Server `id`, if it is declared now.
    pub(crate) fn server(&self, id: &str) -> Option<Arc<Server>> {
        self.servers().iter().find(|s| s.config.id == id).cloned()
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Starts the servers configured to start at boot, in the background; watches every
    /// server, and the config files.
    pub fn start_at_boot(self: &Arc<Self>) {
        for s in self.servers().iter() {
            crate::watch::start(self, s, s.config.start == Start::Boot);
        }
        if let Some(sources) = &self.sources {
            let files = sources.files();
            tokio::spawn(crate::watch::config(Arc::downgrade(self), files));
        }
    }

    /// Reads `servers.toml` again: a server removed or changed is stopped (its process group
    /// ended), one added or changed is started as its config says; an unchanged one keeps
    /// running. A file that does not parse leaves everything as it is (and says why).
    pub fn reload(&self) {
        let Some(sources) = &self.sources else { return };
        let configs = match crate::config::load(&sources.vox_dir, sources.home.as_deref()) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(target: "vox.upstream", "servers.toml not reloaded: {e}");
                return;
            }
        };
        let old = self.servers();
        let mut next = Vec::with_capacity(configs.len());
        let mut started = Vec::new();
        for config in configs {
            match old.iter().find(|s| s.config == config) {
                Some(same) => next.push(same.clone()),
                None => {
                    let s = Server::new(config);
                    started.push(s.clone());
                    next.push(s);
                }
            }
        }
        for s in old
            .iter()
            .filter(|s| !next.iter().any(|n| Arc::ptr_eq(n, s)))
        {
            tracing::info!(target: "vox.upstream", server = %s.config.id, "retired: removed or changed in servers.toml");
            s.retire();
        }
        *lock(&self.servers) = Arc::new(next);
        self.rebuild(None);
        let _ = self
            .notifier
            .send(json!({"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}));
        if let Some(me) = self.me.upgrade() {
            for s in &started {
                crate::watch::start(&me, s, s.config.start == Start::Boot);
            }
        }
    }

    /// Stops every server (its process group and every descendant).
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        for s in self.servers().iter() {
            s.retire();
        }
    }

    /// Every server's state, in id order.
    pub fn status(&self) -> Vec<ServerState> {
        self.servers()
            .iter()
            .map(|s| lock(&s.state).clone())
            .collect()
    }

    /// Whether a server of that id is declared.
    pub fn has_server(&self, id: &str) -> bool {
        self.server(id).is_some()
    }

    /// Whether server `id` is declared with `audit_arguments = true`.
    pub fn audits_arguments(&self, id: &str) -> bool {
        self.server(id).is_some_and(|s| s.config.audit_arguments)
    }

    /// The live connection of `server`: started (again) when there is none and its backoff
    /// allows, then listed.
    pub(crate) async fn connection(
        &self,
        server: &Arc<Server>,
    ) -> Result<Arc<Connection>, ToolError> {
        let mut slot = server.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.is_closed() {
                return Ok(c.clone());
            }
            let words = c.last_words();
            *slot = None;
            let mut st = lock(&server.state);
            st.restarts += 1;
            st.status = Status::Failed;
            st.error = Some(if words.is_empty() {
                "the server exited".into()
            } else {
                format!("the server exited (its stderr: {words})")
            });
        }
        if let Some(at) = *lock(&server.retry_at)
            && Instant::now() < at
        {
            let st = lock(&server.state);
            let wait = at.saturating_duration_since(Instant::now()).as_millis();
            let what = if st.status == Status::CircuitOpen {
                format!(
                    "its circuit is open after {} failed starts in a row",
                    st.failures
                )
            } else {
                "it failed to start".into()
            };
            return Err(ToolError::unavailable(format!(
                "upstream server {} is not available: {what}; next try in {wait} ms; last error: {}",
                server.config.id,
                st.error.as_deref().unwrap_or("none")
            ))
            .with_detail("upstream_unavailable", Some(json!({"server": server.config.id, "retry_in_ms": wait as u64}))));
        }
        if self.is_stopped() || server.is_retired() {
            return Err(ToolError::unavailable(format!(
                "upstream server {} is stopped (the daemon is stopping, or servers.toml no longer declares it so)",
                server.config.id
            )));
        }
        lock(&server.state).status = Status::Starting;
        let events: Arc<dyn Events> = Arc::new(Changed {
            upstreams: self.me.clone(),
            server: Arc::downgrade(server),
        });
        let opened = Connection::open(&server.config, events).await;
        let listed = match opened {
            Ok(c) => match c.list_tools(server.config.start_timeout).await {
                Ok(tools) => Ok((Arc::new(c), tools)),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match listed {
            Ok((conn, tools)) => {
                *lock(&server.retry_at) = None;
                *slot = Some(conn.clone());
                drop(slot);
                self.take_listing(server, &tools);
                self.list_the_rest(server, &conn).await;
                // Ready once its tools are served: who sees `ready` can call them.
                let mut st = lock(&server.state);
                st.status = Status::Ready;
                st.error = None;
                st.failures = 0;
                Ok(conn)
            }
            Err(e) => {
                let mut st = lock(&server.state);
                st.failures += 1;
                st.error = Some(e.clone());
                let backoff = if st.failures >= CIRCUIT_FAILURES {
                    st.status = Status::CircuitOpen;
                    CIRCUIT_OPEN
                } else {
                    st.status = Status::Failed;
                    Duration::from_millis(250 << st.failures.min(6))
                };
                *lock(&server.retry_at) = Some(Instant::now() + backoff);
                tracing::warn!(target: "vox.upstream", server = %server.config.id, "could not start: {e}");
                Err(ToolError::unavailable(format!(
                    "upstream server {} could not start: {e}",
                    server.config.id
                ))
                .with_detail(
                    "upstream_unavailable",
                    Some(json!({"server": server.config.id})),
                ))
            }
        }
    }

    /// Lists `server` again (its lists changed, or some tools were approved).
    pub(crate) async fn relist(&self, server: &Arc<Server>) {
        let Ok(conn) = self.connection(server).await else {
            return;
        };
        match conn.list_tools(server.config.start_timeout).await {
            Ok(tools) => self.take_listing(server, &tools),
            Err(e) => {
                tracing::warn!(target: "vox.upstream", server = %server.config.id, "listing again: {e}");
            }
        }
        self.list_the_rest(server, &conn).await;
    }

    /// Lists `server`'s resources and prompts (when it has them), and tells clients.
    async fn list_the_rest(&self, server: &Server, conn: &Connection) {
        let timeout = server.config.start_timeout;
        let id = &server.config.id;
        let resources = if conn.has_resources() {
            conn.list_resources(timeout).await
        } else {
            Ok(Vec::new())
        };
        let prompts = if conn.has_prompts() {
            conn.list_prompts(timeout).await
        } else {
            Ok(Vec::new())
        };
        let unwrap = |r: Result<Vec<Value>, String>| {
            r.unwrap_or_else(|e| {
                tracing::warn!(target: "vox.upstream", server = %id, "{e}");
                Vec::new()
            })
        };
        let (resources, prompts) = (unwrap(resources), unwrap(prompts));
        let changed = {
            let (mut r, mut p) = (lock(&server.resources), lock(&server.prompts));
            let changed = *r != resources || *p != prompts;
            (*r, *p) = (resources, prompts);
            changed
        };
        if changed {
            for method in [
                "notifications/resources/list_changed",
                "notifications/prompts/list_changed",
            ] {
                let _ = self
                    .notifier
                    .send(json!({"jsonrpc": "2.0", "method": method}));
            }
        }
    }

    /// A person approved `server`'s tools (one, or every withheld one): serve them now.
    pub fn approved(&self, server: &str) -> Result<(), ToolError> {
        let Some(s) = self.server(server) else {
            return Err(ToolError::not_found(format!("no upstream server {server}")));
        };
        let Some(store) = &self.store else {
            return Err(ToolError::unavailable("the journey store is down"));
        };
        let pins = store
            .upstream_pins(Some(server))
            .map_err(vox_tools_common::store::db)?;
        {
            let mut st = lock(&s.state);
            for t in &mut st.tools {
                let approved = pins
                    .iter()
                    .any(|p| p.tool == t.tool && p.approved.as_deref() == Some(t.hash.as_str()));
                if approved && matches!(t.withheld, Some(Withheld::Changed | Withheld::New)) {
                    t.withheld = None;
                }
            }
        }
        // Descriptors of newly approved tools come with the next listing: list again.
        if let Some(me) = self.me.upgrade() {
            tokio::spawn(async move { me.relist(&s).await });
        }
        Ok(())
    }

    /// Starts, once, the `start = "on_use"` servers: the first listing is their first use (a
    /// client learns their tools from the `list_changed` that follows).
    pub(crate) fn start_on_first_use(&self) {
        for s in self.servers().iter() {
            if s.config.start == Start::OnUse
                && !s.used.swap(true, Ordering::SeqCst)
                && let Some(me) = self.me.upgrade()
                && tokio::runtime::Handle::try_current().is_ok()
            {
                let s = s.clone();
                tokio::spawn(async move {
                    let _ = me.connection(&s).await;
                });
            }
        }
    }

    pub(crate) fn served(&self) -> Arc<Served> {
        lock(&self.served).clone()
    }
}
