//! The upstream servers as one source of tools ([`Upstreams`], the core's `UpstreamTools`):
//! each server's connection, started at boot or on first use and restarted with backoff (a
//! circuit opens after repeated failures and says so), its tools checked against their pins
//! (a definition a person has not approved is withheld), and the tools served now.

use crate::config::{ServerConfig, Start};
use crate::server::{Connection, Events};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use vox_core::{CallCtx, ToolError, ToolOutcome, UpstreamTool};
use vox_mcp_registry::{SEPARATOR, UpstreamClass};
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

struct Server {
    config: ServerConfig,
    conn: tokio::sync::Mutex<Option<Arc<Connection>>>,
    state: Mutex<ServerState>,
    /// When the next start may be tried (backoff, an open circuit).
    retry_at: Mutex<Option<Instant>>,
    /// Whether it has ever been listed in the store (its first listing pins every tool).
    listed_once: std::sync::atomic::AtomicBool,
    /// Whether an `on_use` server has been asked for (listed or called) yet.
    used: std::sync::atomic::AtomicBool,
    /// Its resources and prompts as last listed (their own URIs and names).
    resources: Mutex<Vec<Value>>,
    prompts: Mutex<Vec<Value>>,
}

/// The served tools, rebuilt when a server's listing changes.
#[derive(Default)]
struct Served {
    tools: Arc<[UpstreamTool]>,
    /// Served name → (server index, the tool's own name, its class).
    by_name: HashMap<String, (usize, String, UpstreamClass)>,
}

/// Every upstream server of the workspace.
pub struct Upstreams {
    servers: Vec<Arc<Server>>,
    store: Option<Arc<Store>>,
    served: Mutex<Arc<Served>>,
    notifier: tokio::sync::broadcast::Sender<Value>,
    me: Weak<Upstreams>,
    /// Set by [`Upstreams::stop`]: nothing is started any more.
    stopped: std::sync::atomic::AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The pinned form of a tool's definition: `sha256:<hex>` of its canonical JSON (name, title,
/// description, schemas, annotations; keys sorted).
pub fn definition(tool: &Value) -> (Value, String) {
    let mut def = serde_json::Map::new();
    for key in [
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
    ] {
        if let Some(v) = tool.get(key).filter(|v| !v.is_null()) {
            def.insert(key.to_owned(), v.clone());
        }
    }
    let def = Value::Object(def);
    // serde_json's map is ordered by key: the text is canonical.
    let hash = Sha256::digest(def.to_string().as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    (def, format!("sha256:{hex}"))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl Upstreams {
    /// The servers of `configs`, none started yet.
    pub fn new(
        configs: Vec<ServerConfig>,
        store: Option<Arc<Store>>,
        notifier: tokio::sync::broadcast::Sender<Value>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Upstreams {
            servers: configs
                .into_iter()
                .map(|config| {
                    let state = ServerState {
                        id: config.id.clone(),
                        transport: match config.transport {
                            crate::config::Transport::Stdio { .. } => "stdio",
                            crate::config::Transport::Http { .. } => "http",
                        },
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
                        listed_once: Default::default(),
                        used: Default::default(),
                        resources: Mutex::default(),
                        prompts: Mutex::default(),
                    })
                })
                .collect(),
            store,
            served: Mutex::default(),
            notifier,
            me: me.clone(),
            stopped: Default::default(),
        })
    }

    /// Starts the servers configured to start at boot, in the background, and watches every
    /// server: one that went away is started again (after its backoff), an HTTP one that stops
    /// answering `ping` is marked failed and reconnected.
    pub fn start_at_boot(self: &Arc<Self>) {
        for (i, s) in self.servers.iter().enumerate() {
            let me = Arc::downgrade(self);
            let boot = s.config.start == Start::Boot;
            tokio::spawn(async move {
                if boot && let Some(u) = me.upgrade() {
                    let _ = u.connection(i).await;
                }
                watch(me, i).await;
            });
        }
    }

    /// Stops every server (its process group and every descendant).
    pub fn stop(&self) {
        self.stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        for s in &self.servers {
            if let Ok(mut conn) = s.conn.try_lock() {
                *conn = None;
            }
            lock(&s.state).status = Status::Stopped;
        }
    }

    /// Every server's state, in id order.
    pub fn status(&self) -> Vec<ServerState> {
        self.servers
            .iter()
            .map(|s| lock(&s.state).clone())
            .collect()
    }

    /// Whether a server of that id is declared.
    pub fn has_server(&self, id: &str) -> bool {
        self.servers.iter().any(|s| s.config.id == id)
    }

    /// The live connection of server `i`: started (again) when there is none and its backoff
    /// allows, then listed.
    async fn connection(&self, i: usize) -> Result<Arc<Connection>, ToolError> {
        let server = &self.servers[i];
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
        if self.stopped.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ToolError::unavailable(format!(
                "upstream server {} is stopped: the daemon is stopping",
                server.config.id
            )));
        }
        lock(&server.state).status = Status::Starting;
        let events: Arc<dyn Events> = Arc::new(Changed {
            upstreams: self.me.clone(),
            server: i,
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
                self.take_listing(i, &tools);
                self.list_the_rest(i, &conn).await;
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

    /// Records server `i`'s listing against the pins and serves what is approved.
    fn take_listing(&self, i: usize, tools: &[Value]) {
        let server = &self.servers[i];
        let id = &server.config.id;
        let first = match &self.store {
            Some(store) => {
                !server
                    .listed_once
                    .swap(true, std::sync::atomic::Ordering::SeqCst)
                    && store.upstream_pins(Some(id)).is_ok_and(|p| p.is_empty())
            }
            None => false,
        };
        let mut states = Vec::with_capacity(tools.len());
        for t in tools {
            let Some(own) = t["name"].as_str() else {
                continue;
            };
            let served_as = format!("{id}{SEPARATOR}{own}");
            let (def, hash) = definition(t);
            let withheld = if !valid_name(&served_as) {
                Some(Withheld::BadName)
            } else {
                match &self.store {
                    None => Some(Withheld::NoStore),
                    Some(store) => {
                        let trust = first || server.config.trust_new_tools;
                        match store.upstream_pin_seen(id, own, &hash, &def, trust) {
                            Ok(p) if p.approved.as_deref() == Some(hash.as_str()) => None,
                            Ok(p) if p.approved.is_none() => Some(Withheld::New),
                            Ok(_) => Some(Withheld::Changed),
                            Err(e) => {
                                tracing::warn!(target: "vox.upstream", server = %id, "pin of {own}: {e}");
                                Some(Withheld::NoStore)
                            }
                        }
                    }
                }
            };
            if let Some(w) = &withheld {
                tracing::warn!(target: "vox.upstream", server = %id, tool = %own, reason = ?w, "tool withheld until a person approves it (vox upstream approve {id} {own})");
            }
            states.push(ToolState {
                tool: own.to_owned(),
                served_as,
                withheld,
                hash,
            });
        }
        lock(&server.state).tools = states;
        self.rebuild(HashMap::from([(i, tools.to_vec())]));
    }

    /// Serves the approved tools of every server again (after a listing or an approval), and
    /// tells clients when what is served changed.
    fn rebuild(&self, listings: HashMap<usize, Vec<Value>>) {
        let mut guard = lock(&self.served);
        let mut by_name = HashMap::new();
        let mut tools: Vec<UpstreamTool> = Vec::new();
        for (i, server) in self.servers.iter().enumerate() {
            let st = lock(&server.state);
            let descriptors = listings.get(&i);
            for t in st.tools.iter().filter(|t| t.withheld.is_none()) {
                let class = server.config.class_of(&t.tool);
                // The descriptor as listed now, else the one served before.
                let descriptor = match descriptors
                    .and_then(|d| d.iter().find(|v| v["name"] == t.tool.as_str()))
                {
                    Some(v) => served_descriptor(v, &server.config.id, &t.served_as, class),
                    None => match guard.tools.iter().find(|u| u.name == t.served_as) {
                        Some(u) => u.descriptor.clone(),
                        None => continue,
                    },
                };
                by_name.insert(t.served_as.clone(), (i, t.tool.clone(), class));
                tools.push(UpstreamTool {
                    name: t.served_as.clone(),
                    descriptor,
                    class,
                });
            }
        }
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let changed = tools.len() != guard.tools.len()
            || tools
                .iter()
                .zip(guard.tools.iter())
                .any(|(a, b)| a.descriptor != b.descriptor || a.class != b.class);
        *guard = Arc::new(Served {
            tools: tools.into(),
            by_name,
        });
        drop(guard);
        if changed {
            let _ = self
                .notifier
                .send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        }
    }

    /// A person approved `server`'s tools (one, or every withheld one): serve them now.
    pub fn approved(&self, server: &str) -> Result<(), ToolError> {
        let Some(i) = self.servers.iter().position(|s| s.config.id == server) else {
            return Err(ToolError::not_found(format!("no upstream server {server}")));
        };
        let Some(store) = &self.store else {
            return Err(ToolError::unavailable("the journey store is down"));
        };
        let pins = store
            .upstream_pins(Some(server))
            .map_err(vox_tools_common::store::db)?;
        {
            let mut st = lock(&self.servers[i].state);
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
        let me = self.me.upgrade();
        if let Some(me) = me {
            tokio::spawn(async move { me.relist(i).await });
        }
        Ok(())
    }

    /// Lists server `i` again (its lists changed, or some tools were approved).
    async fn relist(&self, i: usize) {
        let Ok(conn) = self.connection(i).await else {
            return;
        };
        match conn.list_tools(self.servers[i].config.start_timeout).await {
            Ok(tools) => self.take_listing(i, &tools),
            Err(e) => {
                tracing::warn!(target: "vox.upstream", server = %self.servers[i].config.id, "listing again: {e}");
            }
        }
        self.list_the_rest(i, &conn).await;
    }

    /// Lists server `i`'s resources and prompts (when it has them), and tells clients.
    async fn list_the_rest(&self, i: usize, conn: &Connection) {
        let server = &self.servers[i];
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

    /// Starts, once, the `start = "on_use"` servers: the first listing is their first use (a
    /// client learns their tools from the `list_changed` that follows).
    fn start_on_first_use(&self) {
        for (i, s) in self.servers.iter().enumerate() {
            if s.config.start == Start::OnUse
                && !s.used.swap(true, std::sync::atomic::Ordering::SeqCst)
                && let Some(me) = self.me.upgrade()
                && tokio::runtime::Handle::try_current().is_ok()
            {
                tokio::spawn(async move {
                    let _ = me.connection(i).await;
                });
            }
        }
    }

    fn server_index(&self, id: &str) -> Option<usize> {
        self.servers.iter().position(|s| s.config.id == id)
    }

    fn served(&self) -> Arc<Served> {
        lock(&self.served).clone()
    }
}

/// A tool's descriptor as vox serves it: its name prefixed, its description, schemas and
/// annotations as the server said, `_meta` saying where it is from and how vox classifies it.
fn served_descriptor(tool: &Value, server: &str, served_as: &str, class: UpstreamClass) -> Value {
    let mut d = tool.clone();
    d["name"] = json!(served_as);
    let mut d = from_upstream(d, server);
    let mut meta = d["_meta"].as_object().cloned().unwrap_or_default();
    meta.insert(
        "vox_class".into(),
        json!({
            "exposure": class.exposure.as_str(),
            "side_effect_class": class.side_effect_class.as_str(),
            "read_role_eligible": class.read_role_eligible,
        }),
    );
    d["_meta"] = Value::Object(meta);
    d
}

/// How often a server is looked at (gone? answering?).
const WATCH_EVERY: Duration = Duration::from_secs(5);

/// Watches server `i` until the servers stop or are dropped.
async fn watch(upstreams: Weak<Upstreams>, i: usize) {
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Some(u) = upstreams.upgrade() else { return };
        if u.stopped.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let server = &u.servers[i];
        let conn = server.conn.lock().await.clone();
        match conn {
            Some(c) if c.is_closed() => {
                let _ = u.connection(i).await;
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
                    let _ = u.connection(i).await;
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
                    let _ = u.connection(i).await;
                }
            }
        }
    }
}

/// A connection's events for its server.
struct Changed {
    upstreams: Weak<Upstreams>,
    server: usize,
}

impl Events for Changed {
    fn lists_changed(&self) {
        if let Some(u) = self.upstreams.upgrade() {
            let i = self.server;
            tokio::spawn(async move { u.relist(i).await });
        }
    }
}

impl vox_core::UpstreamTools for Upstreams {
    fn resources(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for s in &self.servers {
            let id = &s.config.id;
            for r in lock(&s.resources).iter() {
                let Some(uri) = r["uri"].as_str() else {
                    continue;
                };
                let mut d = r.clone();
                d["uri"] = json!(resource_uri(id, uri));
                out.push((id.clone(), from_upstream(d, id)));
            }
        }
        out
    }

    fn prompts(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for s in &self.servers {
            let id = &s.config.id;
            for p in lock(&s.prompts).iter() {
                let Some(name) = p["name"].as_str() else {
                    continue;
                };
                let mut d = p.clone();
                d["name"] = json!(format!("{id}{SEPARATOR}{name}"));
                out.push((id.clone(), from_upstream(d, id)));
            }
        }
        out
    }

    fn server_of(&self, uri_or_name: &str) -> Option<String> {
        let server = match split_resource_uri(uri_or_name) {
            Some((server, _)) => server,
            None => uri_or_name.split_once(SEPARATOR)?.0,
        };
        self.server_index(server).map(|_| server.to_owned())
    }

    fn read<'a>(&'a self, uri: &'a str) -> vox_core::UpstreamFuture<'a, vox_core::ResourceBody> {
        Box::pin(async move {
            let missing = || ToolError::not_found(format!("no resource {uri}"));
            let (server, own) = split_resource_uri(uri).ok_or_else(missing)?;
            let i = self.server_index(server).ok_or_else(missing)?;
            let conn = self.connection(i).await?;
            conn.read(own, self.servers[i].config.call_timeout).await
        })
    }

    fn get_prompt<'a>(&'a self, name: &'a str, args: Value) -> vox_core::UpstreamFuture<'a, Value> {
        Box::pin(async move {
            let missing = || ToolError::not_found(format!("no prompt {name}"));
            let (server, own) = name.split_once(SEPARATOR).ok_or_else(missing)?;
            let i = self.server_index(server).ok_or_else(missing)?;
            let conn = self.connection(i).await?;
            conn.prompt(own, args, self.servers[i].config.call_timeout)
                .await
        })
    }

    fn tools(&self) -> Arc<[UpstreamTool]> {
        self.start_on_first_use();
        self.served().tools.clone()
    }

    fn class_of(&self, name: &str) -> Option<UpstreamClass> {
        self.served().by_name.get(name).map(|(_, _, c)| *c)
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        args: Value,
        call: &'a CallCtx,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ToolOutcome> + Send + 'a>> {
        Box::pin(async move {
            let Some((i, own, _)) = self.served().by_name.get(name).cloned() else {
                return ToolOutcome::Failed(ToolError::not_found(format!(
                    "upstream tool {name} is not served now"
                )));
            };
            let conn = match self.connection(i).await {
                Ok(c) => c,
                Err(e) => return ToolOutcome::Failed(e),
            };
            let timeout = self.servers[i].config.call_timeout;
            let outcome = conn.call(&own, args, call, timeout).await;
            if conn.is_closed() {
                // Gone mid-call: start it again now, so the next call finds it.
                if let Some(me) = self.me.upgrade() {
                    tokio::spawn(async move {
                        let _ = me.connection(i).await;
                    });
                }
            }
            outcome
        })
    }
}

/// Where a server's resources live in vox's namespace: `upstream://<server>/<its own URI>`.
const RESOURCE_SCHEME: &str = "upstream://";

fn resource_uri(server: &str, uri: &str) -> String {
    format!("{RESOURCE_SCHEME}{server}/{uri}")
}

/// `(server, its own URI)` of a namespaced resource URI.
fn split_resource_uri(uri: &str) -> Option<(&str, &str)> {
    uri.strip_prefix(RESOURCE_SCHEME)?.split_once('/')
}

/// `_meta` saying a descriptor is from upstream server `server`.
fn from_upstream(mut d: Value, server: &str) -> Value {
    let mut meta = d
        .get("_meta")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    meta.insert("vox_source".into(), json!("upstream"));
    meta.insert("vox_server".into(), json!(server));
    d["_meta"] = Value::Object(meta);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_hashes_the_same_whatever_its_key_order() {
        let a = json!({"name": "t", "description": "d", "inputSchema": {"type": "object", "properties": {"x": {}, "a": {}}}, "_meta": {"x": 1}});
        let b = json!({"inputSchema": {"properties": {"a": {}, "x": {}}, "type": "object"}, "description": "d", "name": "t"});
        assert_eq!(definition(&a).1, definition(&b).1);
        let c = json!({"name": "t", "description": "changed", "inputSchema": {"type": "object"}});
        assert_ne!(definition(&a).1, definition(&c).1);
        assert!(definition(&a).1.starts_with("sha256:"));
    }

    #[test]
    fn served_descriptors_say_where_they_are_from() {
        let d = served_descriptor(
            &json!({"name": "now", "inputSchema": {"type": "object"}, "_meta": {"theirs": 1}}),
            "time",
            "time__now",
            UpstreamClass::default(),
        );
        assert_eq!(d["name"], "time__now");
        assert_eq!(d["_meta"]["vox_source"], "upstream");
        assert_eq!(d["_meta"]["vox_server"], "time");
        assert_eq!(d["_meta"]["theirs"], 1);
        assert_eq!(d["_meta"]["vox_class"]["exposure"], "operator");
    }
}
