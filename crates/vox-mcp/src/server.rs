//! The one rmcp `ServerHandler` of vox, over a [`Backend`]: stdio (`vox mcp`, backend: the
//! daemon client) and Streamable HTTP (`/mcp`, backend: the in-process orchestrator with the
//! gateway's surface). rmcp speaks both wire eras; this handler never branches on the era.
//!
//! The handler owns what is the same on every transport: the client's log level, linking
//! the client's cancellation to the call's [`Cancel`], relaying progress and log messages in
//! order before the answer, `list_changed` to 2025-era peers and 2026-07-28 listen streams, and
//! the encoding of outcomes ([`crate::encode`]).

use crate::encode;
use crate::input_rounds::InputRounds;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};
use vox_core::{
    Ask, AskReply, CallEvents, CallRun, Cancel, LogLevel, LogMessage, Progress, SessionEffect,
    ToolOutcome,
};

/// One tool call as the handler hands it to a backend.
pub struct ToolCall {
    /// The tool's name as the client sent it.
    pub name: String,
    /// The call's arguments: the JSON object the client sent, or `null` when it sent none.
    pub arguments: Value,
    /// Its cancellation (fires when the client cancels or goes away), where its progress, log
    /// messages, client requests and session effects go, whether the request carried a
    /// progress token, and the client's log level (the request's `_meta`
    /// `io.modelcontextprotocol/logLevel`, else its `logging/setLevel`).
    pub run: CallRun,
}

/// The `_meta` key of a tool result whose call changed its session: the [`SessionEffect`],
/// which a proxy (`vox mcp`) keeps, opaque, to restore the session on a restarted daemon.
pub const SESSION_META: &str = "vox/session";

/// What differs between transports: where lists and calls are answered.
pub trait Backend: Send + Sync + 'static {
    /// The `instructions` of the server's info.
    fn instructions(&self) -> String;
    /// Whether lists can change while connected (`listChanged` is advertised then).
    fn lists_change(&self) -> bool;
    /// The tools this caller may call (`tools/list`), shared until the list changes.
    fn list_tools(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<Arc<Vec<Tool>>, McpError>> + Send;
    /// Runs one tool call to its outcome; protocol failures (not tool errors) are `Err`.
    fn call_tool(
        &self,
        ctx: &RequestContext<RoleServer>,
        call: ToolCall,
    ) -> impl Future<Output = Result<ToolOutcome, McpError>> + Send;
    /// The concrete resources this caller may read (`resources/list`).
    fn list_resources(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<Vec<rmcp::model::Resource>, McpError>> + Send;
    /// Resource template descriptors (`uriTemplate`, `name`, `description`).
    fn list_resource_templates(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<Vec<Value>, McpError>> + Send;
    /// `{"values", "total", "hasMore"}` for argument `argument` of prompt `name` (`prompt`) or
    /// of resource template `name`, from the text `value`.
    fn complete(
        &self,
        ctx: &RequestContext<RoleServer>,
        prompt: bool,
        name: &str,
        argument: &str,
        value: &str,
    ) -> impl Future<Output = Result<Value, McpError>> + Send;
    /// Prompt descriptors (`name`, `description`, `arguments`), in name order.
    fn list_prompts(
        &self,
        ctx: &RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<Vec<Value>, McpError>> + Send;
    /// A prompt's `{"description", "messages"}` for these (string) arguments; a missing prompt
    /// is `invalid_params`.
    fn get_prompt(
        &self,
        ctx: &RequestContext<RoleServer>,
        name: &str,
        arguments: Value,
    ) -> impl Future<Output = Result<Value, McpError>> + Send;
    /// The contents of a resource; a missing one is `resource_not_found`.
    fn read_resource(
        &self,
        ctx: &RequestContext<RoleServer>,
        uri: &str,
    ) -> impl Future<Output = Result<vox_core::ResourceBody, McpError>> + Send;
    /// The session's state changed (the client initialized, set its log level, subscribed or
    /// unsubscribed): what `vox mcp` needs to carry a handed-off session on. Others ignore it.
    fn session_changed(&self, _state: SessionState) {}
    /// A call changed the session (see [`SessionEffect`]).
    fn session_effect(&self, _effect: &SessionEffect) {}
}

pub use vox_daemon::frames::SessionState;

/// The MCP server: one per stdio client, one per `/mcp` session.
pub struct McpServer<B> {
    backend: Arc<B>,
    /// `logging/setLevel`; `None` until the client sets one.
    log_level: Mutex<Option<LogLevel>>,
    listeners: Arc<Listeners>,
}

impl<B: Backend> McpServer<B> {
    /// A server answering through `backend`, with no log level set yet.
    pub fn new(backend: B) -> Self {
        McpServer {
            backend: Arc::new(backend),
            log_level: Mutex::new(None),
            listeners: Arc::default(),
        }
    }
    /// The backend.
    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }
    /// A handle that sends `list_changed` to this server's client.
    pub fn change_notifier(&self) -> ChangeNotifier {
        ChangeNotifier(self.listeners.clone())
    }
    /// The state [`Backend::session_changed`] reports (without what its calls chose, which the
    /// backend keeps).
    fn session_state(&self) -> SessionState {
        SessionState {
            peer: self
                .listeners
                .legacy()
                .and_then(|p| p.peer_info().and_then(|i| serde_json::to_value(i).ok())),
            log_level: *self.log_level.lock().unwrap_or_else(|p| p.into_inner()),
            subscribed: self
                .listeners
                .subscribed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .cloned()
                .collect(),
            session: None,
        }
    }

    /// Carries on a session another process served until now: its log level and subscriptions
    /// (the client's `initialize` goes to rmcp's `serve_directly`, and [`Self::adopt_peer`]
    /// once it runs).
    pub fn resume(self, state: &SessionState) -> Self {
        *self.log_level.lock().unwrap_or_else(|p| p.into_inner()) = state.log_level;
        self.listeners
            .subscribed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(state.subscribed.iter().take(MAX_SUBSCRIPTIONS).cloned());
        self
    }

    /// Wraps the client's input so that its end also ends open `subscriptions/listen` streams
    /// (instead of holding the session open through rmcp's drain timeout).
    pub fn watch_input<R>(&self, inner: R) -> WatchedInput<R> {
        WatchedInput {
            inner,
            closed: self.listeners.input_closed.clone(),
        }
    }
}

#[allow(deprecated)] // rmcp's LoggingLevel: logging is deprecated by SEP-2577 but still sent
fn from_rmcp(l: rmcp::model::LoggingLevel) -> LogLevel {
    use rmcp::model::LoggingLevel as L;
    match l {
        L::Debug => LogLevel::Debug,
        L::Info => LogLevel::Info,
        L::Notice => LogLevel::Notice,
        L::Warning => LogLevel::Warning,
        L::Error => LogLevel::Error,
        L::Critical => LogLevel::Critical,
        L::Alert => LogLevel::Alert,
        L::Emergency => LogLevel::Emergency,
    }
}

#[allow(deprecated)]
pub(crate) fn to_rmcp(l: LogLevel) -> rmcp::model::LoggingLevel {
    use rmcp::model::LoggingLevel as L;
    match l {
        LogLevel::Debug => L::Debug,
        LogLevel::Info => L::Info,
        LogLevel::Notice => L::Notice,
        LogLevel::Warning => L::Warning,
        LogLevel::Error => L::Error,
        LogLevel::Critical => L::Critical,
        LogLevel::Alert => L::Alert,
        LogLevel::Emergency => L::Emergency,
    }
}

enum Event {
    Progress(Progress),
    Log(LogMessage),
    /// Everything queued before it has been sent.
    Flush(oneshot::Sender<()>),
}

/// A call's events, relayed in order to the MCP peer by one task per call. The task starts
/// with the first event: most calls send none, and a task per call would cost every call.
struct PeerEvents {
    peer: rmcp::Peer<RoleServer>,
    token: Option<rmcp::model::ProgressToken>,
    cancel: Cancel,
    tx: std::sync::OnceLock<mpsc::UnboundedSender<Event>>,
    /// Where client requests are sent from (a call's `ask` comes from a blocking thread).
    runtime: tokio::runtime::Handle,
    /// A 2026-07-28 call's asks, answered through `input_required` rounds instead.
    rounds: Option<InputRounds>,
    /// What the call changed in its session, last.
    effect: Mutex<Option<SessionEffect>>,
}

impl CallEvents for PeerEvents {
    fn progress(&self, p: Progress) {
        if self.token.is_some() {
            let _ = self.sender().send(Event::Progress(p));
        }
    }
    fn log(&self, m: LogMessage) {
        let _ = self.sender().send(Event::Log(m));
    }
    fn session_changed(&self, effect: SessionEffect) {
        *self.effect.lock().unwrap_or_else(|p| p.into_inner()) = Some(effect);
    }
    /// A server→client request of the 2025 era, to a client that declared the capability.
    fn ask(&self, ask: Ask, params: Value) -> Result<AskReply, String> {
        if let Some(rounds) = &self.rounds {
            return rounds.ask(ask, params);
        }
        let request = client_request(&self.peer, ask, params)?;
        let (tx, rx) = oneshot::channel();
        let peer = self.peer.clone();
        let cancel = self.cancel.clone();
        self.runtime.spawn(async move {
            let mut tx = tx;
            // Stops waiting when the call is cancelled or stops waiting itself.
            let answer = tokio::select! {
                r = peer.send_request(request) => r,
                () = cancel.cancelled() => return,
                () = tx.closed() => return,
            };
            let _ = tx.send(match answer {
                Ok(rmcp::model::ClientResult::ElicitResult(r)) => {
                    serde_json::to_value(r).map_err(|e| e.to_string())
                }
                Ok(rmcp::model::ClientResult::CreateMessageResult(r)) => {
                    serde_json::to_value(r).map_err(|e| e.to_string())
                }
                Ok(_) => Err(format!(
                    "the client answered the {} request with another kind of result",
                    ask.capability()
                )),
                Err(rmcp::ServiceError::McpError(e)) => {
                    Err(format!("the client refused: {}", e.message))
                }
                Err(e) => Err(e.to_string()),
            });
        });
        Ok(rx)
    }
}

/// The request `ask` makes of this peer; `Err` when its client cannot answer it: it speaks
/// the 2026-07-28 era (no server→client requests) or did not declare the capability.
fn client_request(
    peer: &rmcp::Peer<RoleServer>,
    ask: Ask,
    params: Value,
) -> Result<rmcp::model::ServerRequest, String> {
    use rmcp::model::ServerRequest;
    let Some(info) = peer.peer_info() else {
        return Err(format!(
            "the client did not initialize a session, so it cannot be sent a {} request",
            ask.capability()
        ));
    };
    if !info.protocol_version.has_initialize() {
        return Err(format!(
            "protocol {} has no server-to-client requests",
            info.protocol_version
        ));
    }
    let declared = match ask {
        Ask::Elicit => info.capabilities.elicitation.is_some(),
        Ask::Sample => info.capabilities.sampling.is_some(),
    };
    if !declared {
        return Err(format!(
            "the client did not declare the `{}` capability",
            ask.capability()
        ));
    }
    let invalid =
        |e: serde_json::Error| format!("the {} request is invalid: {e}", ask.capability());
    Ok(match ask {
        Ask::Elicit => ServerRequest::ElicitRequest(rmcp::model::Request::new(
            serde_json::from_value(params).map_err(invalid)?,
        )),
        Ask::Sample => ServerRequest::CreateMessageRequest(rmcp::model::Request::new(
            serde_json::from_value(params).map_err(invalid)?,
        )),
    })
}

impl PeerEvents {
    fn new(
        peer: rmcp::Peer<RoleServer>,
        token: Option<rmcp::model::ProgressToken>,
        cancel: Cancel,
        rounds: Option<InputRounds>,
    ) -> Arc<Self> {
        Arc::new(PeerEvents {
            peer,
            token,
            cancel,
            tx: std::sync::OnceLock::new(),
            runtime: tokio::runtime::Handle::current(),
            rounds,
            effect: Mutex::default(),
        })
    }

    fn sender(&self) -> &mpsc::UnboundedSender<Event> {
        self.tx.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(relay(
                rx,
                self.peer.clone(),
                self.token.clone(),
                self.cancel.clone(),
            ));
            tx
        })
    }

    /// Waits until everything queued so far was sent (nothing to wait for if nothing was).
    async fn flush(&self) {
        let Some(tx) = self.tx.get() else {
            return;
        };
        let (done, wait) = oneshot::channel();
        if tx.send(Event::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

async fn relay(
    mut rx: mpsc::UnboundedReceiver<Event>,
    peer: rmcp::Peer<RoleServer>,
    token: Option<rmcp::model::ProgressToken>,
    cancel: Cancel,
) {
    while let Some(ev) = rx.recv().await {
        // A cancelled call says nothing more (its answer is dropped too).
        if cancel.is_cancelled() && !matches!(ev, Event::Flush(_)) {
            continue;
        }
        let sent = match ev {
            Event::Progress(p) => match &token {
                Some(t) => {
                    let mut n = rmcp::model::ProgressNotificationParam::new(t.clone(), p.progress);
                    n.total = p.total;
                    n.message = p.message;
                    peer.notify_progress(n).await
                }
                None => Ok(()),
            },
            Event::Log(m) => {
                #[allow(deprecated)]
                let n = rmcp::model::LoggingMessageNotificationParam::new(to_rmcp(m.level), m.data)
                    .with_logger(m.logger);
                #[allow(deprecated)]
                peer.notify_logging_message(n).await
            }
            Event::Flush(done) => {
                let _ = done.send(());
                Ok(())
            }
        };
        if let Err(e) = sent {
            tracing::debug!("call notification not delivered: {e}");
        }
    }
}

/// Where change notifications go: the 2025-era peer once it has initialized, and the open
/// `subscriptions/listen` streams of the 2026-07-28 era (which has no unsolicited
/// notifications).
struct Listeners {
    legacy: Mutex<Option<rmcp::Peer<RoleServer>>>,
    /// The resource URIs this client subscribed to (`resources/subscribe`).
    subscribed: Mutex<std::collections::BTreeSet<String>>,
    streams: Mutex<Vec<rmcp::service::SubscriptionSink>>,
    /// Turns true when the client's input ends: open listen streams then end at once.
    input_closed: tokio::sync::watch::Sender<bool>,
}

impl Default for Listeners {
    fn default() -> Self {
        Listeners {
            legacy: Default::default(),
            subscribed: Default::default(),
            streams: Default::default(),
            input_closed: tokio::sync::watch::channel(false).0,
        }
    }
}

impl Listeners {
    /// The 2025-era peer, once it has initialized.
    fn legacy(&self) -> Option<rmcp::Peer<RoleServer>> {
        self.legacy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
    /// The open listen streams (a copy: sending awaits).
    fn streams(&self) -> Vec<rmcp::service::SubscriptionSink> {
        self.streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// Most `subscriptions/listen` streams one client may hold open.
const MAX_LISTEN_STREAMS: usize = 64;
/// Most resources one client may subscribe to.
const MAX_SUBSCRIPTIONS: usize = 1_000;

/// Sends `notifications/{tools,resources}/list_changed` to one server's client.
#[derive(Clone)]
pub struct ChangeNotifier(Arc<Listeners>);

impl ChangeNotifier {
    /// The 2025-era peer of a resumed session (it initialized with another process).
    pub fn adopt_peer(&self, peer: rmcp::Peer<RoleServer>) {
        *self.0.legacy.lock().unwrap_or_else(|p| p.into_inner()) = Some(peer);
    }

    /// Tells the client that resource `uri` changed, if it subscribed to it.
    pub async fn resource_updated(&self, uri: &str) {
        let subscribed = self
            .0
            .subscribed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(uri);
        let legacy = self.0.legacy();
        if let (true, Some(peer)) = (subscribed, legacy)
            && let Err(e) = peer
                .notify_resource_updated(rmcp::model::ResourceUpdatedNotificationParam::new(uri))
                .await
        {
            tracing::debug!("resource update not delivered: {e}");
        }
        let streams = self.0.streams();
        for sink in streams {
            let wanted = sink
                .accepted()
                .resource_subscriptions
                .as_ref()
                .is_some_and(|uris| uris.iter().any(|u| u == uri));
            if wanted && let Err(e) = sink.notify_resource_updated(uri).await {
                tracing::debug!("resource update not delivered on a listen stream: {e}");
            }
        }
    }

    /// Passes the orchestrator's change notifications (`orch.ctx().notifier`) to this client
    /// until its server is gone: resource updates and list changes (a tool list change
    /// invalidates `cache` first, the stdio transport's tool list cache).
    pub fn forward(
        &self,
        mut changes: tokio::sync::broadcast::Receiver<Value>,
        cache: Option<Arc<crate::list_cache::ToolListCache>>,
    ) {
        let weak = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            loop {
                let frame = match changes.recv().await {
                    Ok(f) => f,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return,
                };
                let Some(listeners) = weak.upgrade() else {
                    return;
                };
                let notifier = ChangeNotifier(listeners);
                match frame.get("method").and_then(Value::as_str) {
                    Some("notifications/resources/updated") => {
                        if let Some(uri) = frame["params"]["uri"].as_str() {
                            notifier.resource_updated(uri).await;
                        }
                    }
                    Some("notifications/tools/list_changed") => {
                        if let Some(cache) = &cache {
                            cache.invalidate();
                        }
                        notifier.notify(List::Tools).await;
                    }
                    Some("notifications/resources/list_changed") => {
                        notifier.notify(List::Resources).await;
                    }
                    Some("notifications/prompts/list_changed") => {
                        notifier.notify(List::Prompts).await;
                    }
                    _ => {}
                }
            }
        });
    }

    /// Tells the client that one of its lists changed.
    pub async fn notify(&self, list: List) {
        let legacy = self.0.legacy();
        if let Some(peer) = legacy {
            let sent = match list {
                List::Tools => peer.notify_tool_list_changed().await,
                List::Resources => peer.notify_resource_list_changed().await,
                List::Prompts => peer.notify_prompt_list_changed().await,
            };
            if let Err(e) = sent {
                tracing::debug!("notification not delivered: {e}");
            }
        }
        let streams = self.0.streams();
        for sink in streams {
            let accepted = sink.accepted();
            let sent = match list {
                List::Tools if accepted.tools_list_changed == Some(true) => {
                    sink.notify_tool_list_changed().await
                }
                List::Resources if accepted.resources_list_changed == Some(true) => {
                    sink.notify_resource_list_changed().await
                }
                List::Prompts if accepted.prompts_list_changed == Some(true) => {
                    sink.notify_prompt_list_changed().await
                }
                _ => Ok(()),
            };
            if let Err(e) = sent {
                tracing::debug!("subscription notification not delivered: {e}");
            }
        }
    }
}

/// A list a client may be told changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// `tools/list`.
    Tools,
    /// `resources/list`.
    Resources,
    /// `prompts/list`.
    Prompts,
}

/// An input stream that reports its end (EOF or an error) to the server's listen streams.
pub struct WatchedInput<R> {
    inner: R,
    closed: tokio::sync::watch::Sender<bool>,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WatchedInput<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let ended = match &poll {
            std::task::Poll::Ready(Ok(())) => buf.filled().len() == before && buf.remaining() > 0,
            std::task::Poll::Ready(Err(_)) => true,
            std::task::Poll::Pending => false,
        };
        if ended {
            self.closed.send_replace(true);
        }
        poll
    }
}

#[allow(deprecated)] // enable_logging and set_level: SEP-2577 deprecates logging; 2025 clients use it
impl<B: Backend> ServerHandler for McpServer<B> {
    fn get_info(&self) -> ServerConfig {
        let builder = ServerCapabilities::builder()
            .enable_tools()
            .enable_logging()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_completions();
        let caps = if self.backend.lists_change() {
            builder
                .enable_tool_list_changed()
                .enable_resources_list_changed()
                .enable_prompts_list_changed()
                .build()
        } else {
            builder.build()
        };
        let mut info = ServerConfig::new(caps);
        info.server_info = Implementation::new("vox", env!("CARGO_PKG_VERSION"));
        info.with_instructions(self.backend.instructions())
    }

    /// Remembers the client's level: handler log messages below it are not sent.
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.log_level.lock().unwrap_or_else(|p| p.into_inner()) = Some(from_rmcp(request.level));
        self.backend.session_changed(self.session_state());
        Ok(())
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        *self
            .listeners
            .legacy
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(context.peer);
        self.backend.session_changed(self.session_state());
    }

    /// The 2026-07-28 era's `subscriptions/listen`: tool and resource list changes.
    /// List changes where lists change, and updates of the resources asked for (at most
    /// [`MAX_SUBSCRIPTIONS`]; a URI nobody serves simply never changes).
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut offered = rmcp::model::SubscriptionFilter::new();
        if self.backend.lists_change() {
            offered.tools_list_changed = Some(true);
            offered.resources_list_changed = Some(true);
            offered.prompts_list_changed = Some(true);
        }
        offered.resource_subscriptions = requested
            .resource_subscriptions
            .as_ref()
            .map(|uris| uris.iter().take(MAX_SUBSCRIPTIONS).cloned().collect());
        Some(requested.intersection(&offered))
    }

    /// Keeps the stream's sink registered until the client cancels the listen request or its
    /// input ends (the guard unregisters it however the future ends).
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        struct Registered<'a>(&'a Listeners, rmcp::model::RequestId);
        impl Drop for Registered<'_> {
            fn drop(&mut self) {
                self.0
                    .streams
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .retain(|s| s.id() != &self.1);
            }
        }
        let sink = context.sink().clone();
        {
            let mut streams = self
                .listeners
                .streams
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if streams.len() >= MAX_LISTEN_STREAMS {
                return Err(McpError::invalid_request(
                    format!(
                        "{MAX_LISTEN_STREAMS} listen streams are already open; cancel one first"
                    ),
                    None,
                ));
            }
            streams.push(sink.clone());
        }
        let _registered = Registered(&self.listeners, sink.id().clone());
        let mut closed = self.listeners.input_closed.subscribe();
        tokio::select! {
            _ = context.cancelled() => {}
            _ = closed.wait_for(|c| *c) => {}
        }
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        let resources = self.backend.list_resources(&context).await?;
        Ok(rmcp::model::ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let body = self.backend.read_resource(&context, &request.uri).await?;
        let contents = match (body.text, body.blob) {
            (_, Some(blob)) => rmcp::model::ResourceContents::blob(blob, request.uri),
            (text, None) => {
                rmcp::model::ResourceContents::text(text.unwrap_or_default(), request.uri)
            }
        }
        .with_mime_type(body.mime_type);
        Ok(rmcp::model::ReadResourceResult::new(vec![contents]).into())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        let templates = self.backend.list_resource_templates(&context).await?;
        let templates = serde_json::from_value(Value::Array(templates)).map_err(|e| {
            McpError::internal_error(format!("a resource template descriptor: {e}"), None)
        })?;
        Ok(rmcp::model::ListResourceTemplatesResult::with_all_items(
            templates,
        ))
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        let (prompt, name) = match &request.r#ref {
            rmcp::model::Reference::Prompt(p) => (true, p.name.clone()),
            rmcp::model::Reference::Resource(r) => (false, r.uri.clone()),
            other => {
                return Err(McpError::invalid_params(
                    format!("cannot complete for {other:?}"),
                    None,
                ));
            }
        };
        let got = self
            .backend
            .complete(
                &context,
                prompt,
                &name,
                &request.argument.name,
                &request.argument.value,
            )
            .await?;
        let completion: rmcp::model::CompletionInfo = serde_json::from_value(got)
            .map_err(|e| McpError::internal_error(format!("a completion: {e}"), None))?;
        Ok(rmcp::model::CompleteResult::new(completion))
    }

    /// Remembers `uri` (one this client can list): `notifications/resources/updated` follows
    /// when its source changes.
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let listed = self.backend.list_resources(&context).await?;
        if !listed.iter().any(|r| r.uri == request.uri) {
            return Err(McpError::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        let mut subscribed = self
            .listeners
            .subscribed
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if subscribed.len() >= MAX_SUBSCRIPTIONS && !subscribed.contains(&request.uri) {
            return Err(McpError::invalid_request(
                format!(
                    "{MAX_SUBSCRIPTIONS} resources are already subscribed to; unsubscribe first"
                ),
                None,
            ));
        }
        subscribed.insert(request.uri);
        drop(subscribed);
        self.backend.session_changed(self.session_state());
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.listeners
            .subscribed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&request.uri);
        self.backend.session_changed(self.session_state());
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        let prompts = self.backend.list_prompts(&context).await?;
        let prompts = serde_json::from_value(Value::Array(prompts))
            .map_err(|e| McpError::internal_error(format!("a prompt descriptor: {e}"), None))?;
        Ok(rmcp::model::ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let got = self
            .backend
            .get_prompt(&context, &request.name, args)
            .await?;
        let mut result: rmcp::model::GetPromptResult = serde_json::from_value(got)
            .map_err(|e| McpError::internal_error(format!("prompt {}: {e}", request.name), None))?;
        // The 2026-07-28 era says which kind of result this is (rmcp's constructors do).
        result
            .result_type
            .get_or_insert(rmcp::model::ResultType::COMPLETE);
        Ok(result.into())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.backend.list_tools(&context).await?;
        Ok(ListToolsResult::with_all_items(tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let token = context.meta.get_progress_token();
        #[allow(deprecated)]
        let log_level = context
            .meta
            .log_level()
            .map(from_rmcp)
            .or(*self.log_level.lock().unwrap_or_else(|p| p.into_inner()));
        let cancel = Cancel::new();
        // The 2026-07-28 era answers a tool's asks by retries (`input_required`).
        let rounds = if context
            .protocol_version()
            .is_some_and(|v| !v.has_initialize())
        {
            Some(
                InputRounds::new(
                    context.meta.client_capabilities(),
                    request.input_responses.as_ref(),
                    request.request_state.as_deref(),
                )
                .map_err(|e| McpError::invalid_params(e, None))?,
            )
        } else {
            None
        };
        let events = PeerEvents::new(context.peer.clone(), token.clone(), cancel.clone(), rounds);
        let call = ToolCall {
            name: request.name.to_string(),
            arguments: request.arguments.map(Value::Object).unwrap_or(Value::Null),
            run: CallRun {
                cancel: cancel.clone(),
                events: Some(events.clone()),
                progress: token.is_some(),
                log_level,
            },
        };
        let work = self.backend.call_tool(&context, call);
        tokio::pin!(work);
        let outcome = tokio::select! {
            biased;
            o = &mut work => o,
            // The client cancelled (or its session ended): the backend stops the work and
            // returns soon; rmcp drops whatever is answered.
            _ = context.ct.cancelled() => {
                cancel.cancel();
                work.await
            }
        };
        // Progress and log messages go out before the answer.
        events.flush().await;
        if let Some(needed) = events.rounds.as_ref().and_then(InputRounds::input_required) {
            return Ok(CallToolResponse::InputRequired(needed));
        }
        let mut result = encode::call_result(outcome?)?;
        let effect = events
            .effect
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(effect) = effect {
            self.backend.session_effect(&effect);
            let meta = result.meta.get_or_insert_with(Default::default);
            meta.0.insert(
                SESSION_META.into(),
                serde_json::to_value(&effect).unwrap_or_default(),
            );
        }
        Ok(result.into())
    }
}
