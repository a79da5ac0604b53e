//! A generic MCP proxy: rmcp's server side towards a client, its client side towards an
//! upstream server that an [`Upstream`] opens (and opens again). It understands no tool:
//! requests and notifications pass through as they are, and the upstream's requests to the
//! client (elicitation, sampling, roots) come back the same way. `vox mcp` puts the workspace
//! daemon behind it; any MCP server can sit there.
//!
//! What the session set is kept and replayed on a new upstream connection: the client's
//! `initialize` (or, for a 2026-07-28 client, its protocol version and capabilities), its log
//! level, its subscriptions, and the [`SESSION_META`] `_meta` of the last result that carried
//! one (opaque here; the upstream reads it back when opened).
//!
//! When the upstream dies, the requests waiting on it are answered at once (a tool call with
//! the upstream's unavailable error, anything else with an internal error); the first tool
//! call that finds it gone says so, and the next request opens it again.

use crate::encode;
use crate::list_cache::ToolListCache;
pub use crate::server::SESSION_META;
use rmcp::model::GetMeta;
use rmcp::model::{
    CallToolResult, CancelledNotification, CancelledNotificationParam, ClientConfig,
    ClientNotification, ClientRequest, ClientResult, ProgressToken, ServerConfig,
    ServerNotification, ServerRequest, ServerResult,
};
use rmcp::service::{
    ClientLifecycleMode, NotificationContext, Peer, PeerRequestOptions, RequestContext,
    RunningService, Service, ServiceError,
};
use rmcp::{ErrorData as McpError, RoleClient, RoleServer};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tokio::io::{AsyncRead, AsyncWrite};
use vox_core::{ToolError, ToolOutcome};

/// An upstream connection as opened: its byte streams, and what must live as long as it (a
/// control connection, a child process).
pub struct Opened {
    /// Bytes from the upstream server (its stdout, or the socket's read half).
    pub input: Pin<Box<dyn AsyncRead + Send + 'static>>,
    /// Bytes to the upstream server (its stdin, or the socket's write half).
    pub output: Pin<Box<dyn AsyncWrite + Send + 'static>>,
    /// Kept alive as long as the connection and dropped with it (a control connection, a child
    /// process).
    pub guard: Box<dyn Send + Sync + 'static>,
}

/// Opens the upstream server's connection.
pub trait Upstream: Send + Sync + 'static {
    /// A new connection; `session` is the [`SESSION_META`] value to restore, if any.
    fn open(&self, session: Option<Value>) -> impl Future<Output = Result<Opened, String>> + Send;
    /// The error a tool call gets when the upstream is gone (`why`).
    fn unavailable(&self, why: &str) -> ToolError;
}

/// What the session set, replayed on a new upstream connection.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// The client's `initialize`; `None` for a client of the 2026-07-28 era.
    pub init: Option<ClientConfig>,
    /// The log level the client set with `logging/setLevel`, if any.
    #[allow(deprecated)]
    pub log_level: Option<rmcp::model::LoggingLevel>,
    /// URIs of the resources the client subscribed to (`resources/subscribe`).
    pub subscribed: BTreeSet<String>,
    /// The [`SESSION_META`] value of the last result that changed the session (for instance the
    /// active skill), opaque to the proxy.
    pub session: Option<Value>,
}

/// A live upstream connection.
struct Link {
    service: RunningService<RoleClient, Downstream>,
    info: ServerConfig,
    _guard: Box<dyn Send + Sync>,
}

/// The proxy: serve it to the client with rmcp (`serve_server`, or `serve_directly` for a
/// session already initialized).
pub struct Proxy<U> {
    upstream: U,
    link: tokio::sync::Mutex<Option<Arc<Link>>>,
    replay: Mutex<Replay>,
    /// The upstream died and no call has said so yet.
    unreported: AtomicBool,
    /// The client's peer, once a request that can reach it came (not a `server/discover`
    /// probe's): where the upstream's notifications and requests go.
    client: ClientPeer,
    /// The client-side tool list cache (stdio), forgotten when the list may have changed.
    tools: Option<Arc<ToolListCache>>,
}

impl<U: Upstream> Proxy<U> {
    /// A proxy to `upstream`, carrying on `replay` (empty for a new session).
    pub fn new(upstream: U, replay: Replay, tools: Option<Arc<ToolListCache>>) -> Self {
        Proxy {
            upstream,
            link: tokio::sync::Mutex::new(None),
            replay: Mutex::new(replay),
            unreported: AtomicBool::new(false),
            client: ClientPeer::default(),
            tools,
        }
    }

    /// The upstream.
    pub fn upstream(&self) -> &U {
        &self.upstream
    }

    /// The upstream died while nobody was waiting on it: the next tool call says so.
    pub fn mark_lost(&self) {
        self.unreported.store(true, Ordering::SeqCst);
    }

    fn replay(&self) -> std::sync::MutexGuard<'_, Replay> {
        self.replay.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live connection: opened (and the session replayed) when there is none; `Err` for a
    /// tool call that finds it dead, which reports that.
    async fn link(&self, ctx: &RequestContext<RoleServer>, call: bool) -> Result<Arc<Link>, Lost> {
        let mut slot = self.link.lock().await;
        if let Some(link) = slot.as_ref() {
            if !link.service.is_closed() {
                return Ok(link.clone());
            }
            *slot = None;
            self.mark_lost();
        }
        if call && self.unreported.swap(false, Ordering::SeqCst) {
            return Err(Lost("the upstream connection closed".into()));
        }
        let link = Arc::new(self.open(ctx).await.map_err(Lost)?);
        // A new upstream serves the session: there is no death left to report.
        self.unreported.store(false, Ordering::SeqCst);
        *slot = Some(link.clone());
        Ok(link)
    }

    /// Opens the upstream in the client's era and replays the session on it.
    async fn open(&self, ctx: &RequestContext<RoleServer>) -> Result<Link, String> {
        let replay = self.replay().clone();
        let opened = self.upstream.open(replay.session.clone()).await?;
        if let Some(tools) = &self.tools {
            tools.invalidate();
        }
        let (info, lifecycle) = match (&replay.init, ctx.meta.protocol_version()) {
            (Some(init), _) => (init.clone(), ClientLifecycleMode::Initialize),
            (None, Some(version)) => {
                let mut info = ClientConfig::default();
                info.protocol_version = version.clone();
                if let Some(c) = ctx.meta.client_info() {
                    info.client_info = c;
                }
                if let Some(c) = ctx.meta.client_capabilities() {
                    info.capabilities = c;
                }
                let preferred_versions = vec![version];
                (info, ClientLifecycleMode::Discover { preferred_versions })
            }
            (None, None) => (ClientConfig::default(), ClientLifecycleMode::Initialize),
        };
        let downstream = Downstream {
            client: self.client.clone(),
            info,
            progress: Arc::default(),
            tools: self.tools.clone(),
        };
        let service = start(downstream, opened.input, opened.output, lifecycle).await?;
        // The upstream's `initialize` answer, as the client gets it (the same fields).
        let info = service
            .peer()
            .peer_info()
            .and_then(|i| serde_json::to_value(&*i).ok())
            .and_then(|v| serde_json::from_value::<ServerConfig>(v).ok())
            .ok_or("the upstream did not say who it is")?;
        let peer = service.peer().clone();
        #[allow(deprecated)] // logging and resources/subscribe are what 2025-era clients use
        if let Some(level) = replay.log_level {
            #[allow(deprecated)]
            let params = rmcp::model::SetLevelRequestParams::new(level);
            let _ = peer.set_level(params).await;
        }
        for uri in &replay.subscribed {
            let params = rmcp::model::SubscribeRequestParams::new(uri.clone());
            #[allow(deprecated)]
            let _ = peer.subscribe(params).await;
        }
        Ok(Link {
            service,
            info,
            _guard: opened.guard,
        })
    }

    /// Sends `request` upstream and waits for its answer, or cancels it upstream when the
    /// client cancels.
    async fn forward(
        &self,
        link: &Link,
        mut request: ClientRequest,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ServiceError> {
        let downstream_token = ctx.meta.get_progress_token();
        let mut meta = ctx.meta;
        meta.0.remove("progressToken");
        *request.get_meta_mut() = meta;
        let peer = link.service.peer();
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await?;
        let (id, token) = (handle.id.clone(), handle.progress_token.clone());
        let progress = link.service.service().progress.clone();
        if let Some(t) = downstream_token {
            lock(&progress).insert(token.clone(), t);
        }
        let answer = tokio::select! {
            a = handle.await_response() => a,
            () = ctx.ct.cancelled() => {
                let cancel =
                    CancelledNotification::new(CancelledNotificationParam::new(Some(id), None));
                let _ = peer.send_notification(cancel.into()).await;
                Err(ServiceError::Cancelled { reason: None })
            }
        };
        lock(&progress).remove(&token);
        answer
    }

    /// Keeps what an answered request set in the session.
    fn remember(&self, kept: Kept, result: &ServerResult) {
        let mut replay = self.replay();
        match (kept, result) {
            (Kept::Level(level), _) => replay.log_level = Some(level),
            (Kept::Subscribed(uri), _) => {
                replay.subscribed.insert(uri);
            }
            (Kept::Unsubscribed(uri), _) => {
                replay.subscribed.remove(&uri);
            }
            (Kept::Call, ServerResult::CallToolResult(r)) => {
                if let Some(s) = r.meta.as_ref().and_then(|m| m.0.get(SESSION_META)) {
                    replay.session = Some(s.clone());
                }
            }
            _ => {}
        }
    }

    /// The answer to a request the upstream could not answer (`why`).
    fn lost_answer(&self, call: bool, why: &str) -> Result<ServerResult, McpError> {
        let e = self.upstream.unavailable(why);
        if call {
            let r: CallToolResult = encode::call_result(ToolOutcome::Failed(e))?;
            return Ok(ServerResult::CallToolResult(r));
        }
        Err(McpError::internal_error(e.to_string(), Some(e.to_json())))
    }
}

/// The client side of a session on the upstream's streams, its handshake done.
type Starting =
    Pin<Box<dyn Future<Output = Result<RunningService<RoleClient, Downstream>, String>> + Send>>;

/// Starts the upstream session.
fn start(
    downstream: Downstream,
    input: Pin<Box<dyn AsyncRead + Send + 'static>>,
    output: Pin<Box<dyn AsyncWrite + Send + 'static>>,
    lifecycle: ClientLifecycleMode,
) -> Starting {
    let transport =
        rmcp::transport::async_rw::AsyncRwTransport::<RoleClient, _, _>::new(input, output)
            .with_max_line_length(vox_core::MAX_MESSAGE_BYTES);
    // The handshake's future is not `Send` (rmcp selects on a borrowed cancellation token):
    // it runs on a blocking thread; the session it starts runs on the runtime.
    let runtime = tokio::runtime::Handle::current();
    Box::pin(async move {
        tokio::task::spawn_blocking(move || {
            runtime
                .block_on(rmcp::service::serve_client_with_lifecycle(
                    downstream, transport, lifecycle,
                ))
                .map_err(|e| format!("the upstream did not start a session: {e}"))
        })
        .await
        .map_err(|e| format!("the upstream handshake panicked: {e}"))?
    })
}

/// What a request sets in the session once answered (taken before it is sent, so the request
/// is not copied).
#[allow(deprecated)] // the client's log level, as 2025-era clients set it
enum Kept {
    Level(rmcp::model::LoggingLevel),
    Subscribed(String),
    Unsubscribed(String),
    Call,
    Nothing,
}

impl Kept {
    #[allow(deprecated)]
    fn of(request: &ClientRequest) -> Self {
        match request {
            ClientRequest::SetLevelRequest(r) => Kept::Level(r.params.level),
            ClientRequest::SubscribeRequest(r) => Kept::Subscribed(r.params.uri.clone()),
            ClientRequest::UnsubscribeRequest(r) => Kept::Unsubscribed(r.params.uri.clone()),
            ClientRequest::CallToolRequest(_) => Kept::Call,
            _ => Kept::Nothing,
        }
    }
}

/// Why there is no upstream connection.
struct Lost(String);

fn lock<K, V>(m: &Mutex<HashMap<K, V>>) -> std::sync::MutexGuard<'_, HashMap<K, V>> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<U: Upstream> Service<RoleServer> for Proxy<U> {
    async fn handle_request(
        &self,
        request: ClientRequest,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ServerResult, McpError> {
        if !matches!(request, ClientRequest::DiscoverRequest(_)) {
            self.client.set(&ctx.peer);
        }
        if let ClientRequest::InitializeRequest(r) = &request {
            self.replay().init = Some(r.params.clone());
            *self.link.lock().await = None;
            let link = self.link(&ctx, false).await.map_err(|Lost(why)| {
                let e = self.upstream.unavailable(&why);
                McpError::internal_error(e.to_string(), Some(e.to_json()))
            })?;
            return Ok(ServerResult::InitializeResult(link.info.clone()));
        }
        let kept = Kept::of(&request);
        let call = matches!(kept, Kept::Call);
        let link = match self.link(&ctx, call).await {
            Ok(link) => link,
            Err(Lost(why)) => return self.lost_answer(call, &why),
        };
        match self.forward(&link, request, ctx).await {
            Ok(result) => {
                self.remember(kept, &result);
                Ok(result)
            }
            Err(ServiceError::McpError(e)) => Err(e),
            Err(ServiceError::Cancelled { .. }) => {
                Err(McpError::internal_error("the request was cancelled", None))
            }
            Err(e) => {
                // The connection is gone: the next request opens another.
                *self.link.lock().await = None;
                self.lost_answer(call, &e.to_string())
            }
        }
    }

    async fn handle_notification(
        &self,
        notification: ClientNotification,
        ctx: NotificationContext<RoleServer>,
    ) -> Result<(), McpError> {
        // rmcp turns the client's cancellations into the request's token, which [`Self::forward`]
        // passes on; the upstream handshake sends its own `initialized`.
        if matches!(
            notification,
            ClientNotification::CancelledNotification(_)
                | ClientNotification::InitializedNotification(_)
        ) {
            return Ok(());
        }
        let link = self.link.lock().await.clone();
        if let Some(link) = link {
            let mut notification = notification;
            *notification.get_meta_mut() = ctx.meta;
            let _ = link.service.peer().send_notification(notification).await;
        }
        Ok(())
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::default()
    }
}

/// The client's peer, shared by the proxy and its upstream connections.
#[derive(Clone, Default)]
struct ClientPeer(Arc<OnceLock<Peer<RoleServer>>>);

impl ClientPeer {
    fn set(&self, peer: &Peer<RoleServer>) {
        if self.0.get().is_none() {
            let _ = self.0.set(peer.clone());
        }
    }
    fn get(&self) -> Option<&Peer<RoleServer>> {
        self.0.get()
    }
}

/// The proxy's client side: what the upstream sends is passed to the client.
struct Downstream {
    client: ClientPeer,
    info: ClientConfig,
    /// Upstream progress tokens of requests in flight, and the client's token for each.
    progress: Arc<Mutex<HashMap<ProgressToken, ProgressToken>>>,
    tools: Option<Arc<ToolListCache>>,
}

impl Service<RoleClient> for Downstream {
    async fn handle_request(
        &self,
        request: ServerRequest,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ClientResult, McpError> {
        let Some(client) = self.client.get() else {
            return Err(McpError::internal_error("no client to ask yet", None));
        };
        client.send_request(request).await.map_err(|e| match e {
            ServiceError::McpError(e) => e,
            other => McpError::internal_error(format!("the client did not answer: {other}"), None),
        })
    }

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        ctx: NotificationContext<RoleClient>,
    ) -> Result<(), McpError> {
        let mut notification = notification;
        *notification.get_meta_mut() = ctx.meta;
        match &mut notification {
            ServerNotification::ProgressNotification(p) => {
                // Progress of a request the client asked progress for, under its own token.
                let Some(token) = lock(&self.progress).get(&p.params.progress_token).cloned()
                else {
                    return Ok(());
                };
                p.params.progress_token = token;
            }
            ServerNotification::ToolListChangedNotification(_) => {
                if let Some(tools) = &self.tools {
                    tools.invalidate();
                }
            }
            _ => {}
        }
        if let Some(client) = self.client.get() {
            let _ = client.send_notification(notification).await;
        }
        Ok(())
    }

    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }
}
