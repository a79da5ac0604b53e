//! One live connection to an upstream server: a child in its own process group speaking MCP on
//! its stdin and stdout (rmcp's client over the pipes), its tools listed page by page, calls
//! relayed with their progress, logs, cancellation and the server's requests to the caller's
//! client. Dropping the connection ends the child's process group and every descendant.

use crate::config::{ServerConfig, Transport};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientRequest, ClientResult, ProgressToken, ServerNotification, ServerRequest, ServerResult,
};
use rmcp::service::{
    ClientLifecycleMode, NotificationContext, PeerRequestOptions, RequestContext, RunningService,
    Service, ServiceError,
};
use rmcp::{ErrorData as McpError, RoleClient};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vox_core::{Ask, AskError, CallCtx, LogLevel, ResourceBody, ToolError, ToolOutcome};

/// Most tools one server may list (more is refused, not truncated).
pub const MAX_TOOLS: usize = 2_000;
/// Largest message an upstream server may send (a line of its stdout).
const MAX_LINE_BYTES: usize = vox_core::MAX_MESSAGE_BYTES;
/// Most pages one listing may take.
const MAX_PAGES: usize = 100;
/// Variables every stdio server gets from the daemon's environment (the rest only by name).
const BASE_ENV: [&str; 6] = ["PATH", "HOME", "LANG", "TMPDIR", "USER", "LC_ALL"];
/// How long a server's request to the caller's client may wait for its answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(120);

/// What happens on a connection that its owner must hear of.
pub trait Events: Send + Sync + 'static {
    /// The server said its tool, resource or prompt list changed.
    fn lists_changed(&self);
}

/// A live connection.
pub struct Connection {
    service: RunningService<RoleClient, Relay>,
    calls: Arc<Calls>,
    /// The child's process group (stdio servers), ended on drop.
    pgid: Option<i32>,
    /// Why the server exited, once it did: its last stderr lines.
    stderr: Arc<Mutex<Tail>>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            codex_app_server::tree::kill_tree(pgid);
        }
    }
}

/// The calls in flight on a connection, by the progress token vox gave each.
#[derive(Default)]
struct Calls {
    by_token: Mutex<HashMap<ProgressToken, CallCtx>>,
}

impl Calls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ProgressToken, CallCtx>> {
        self.by_token.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// The call a server's request or log belongs to: MCP does not say which request a
    /// server's request is for, so it goes to a call in flight (the only one, usually).
    fn any(&self) -> Option<CallCtx> {
        self.lock().values().next().cloned()
    }
}

/// The last lines a server wrote to stderr (bounded), for the error that says why it died.
#[derive(Default)]
struct Tail(std::collections::VecDeque<String>);

impl Tail {
    fn push(&mut self, line: String) {
        if self.0.len() == 8 {
            self.0.pop_front();
        }
        self.0.push_back(line.chars().take(400).collect());
    }
    fn text(&self) -> String {
        self.0.iter().cloned().collect::<Vec<_>>().join(" | ")
    }
}

impl Connection {
    /// Starts `config`'s server (or, over HTTP, opens a session with it) and completes the MCP
    /// handshake within its start timeout.
    pub async fn open(config: &ServerConfig, events: Arc<dyn Events>) -> Result<Self, String> {
        match &config.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => Self::spawn(config, command, args, env, cwd, events).await,
            Transport::Http {
                url,
                headers_env,
                bearer_token_env,
            } => {
                let auth = bearer_token_env.as_deref();
                Self::connect(config, url, headers_env, auth, events).await
            }
        }
    }

    /// A Streamable HTTP session with `url`; header values come from the named variables
    /// (a variable that is unset is an error naming it, never an empty header).
    async fn connect(
        config: &ServerConfig,
        url: &str,
        headers_env: &std::collections::BTreeMap<String, String>,
        bearer_token_env: Option<&str>,
        events: Arc<dyn Events>,
    ) -> Result<Self, String> {
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let var = |name: &str| {
            std::env::var(name)
                .map_err(|_| format!("environment variable {name} (for {}) is not set", config.id))
        };
        let mut http = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
        for (header, name) in headers_env {
            let value = var(name)?;
            let header = http::HeaderName::from_bytes(header.as_bytes())
                .map_err(|e| format!("header {header}: {e}"))?;
            let value = http::HeaderValue::from_str(&value)
                .map_err(|_| format!("the value of {name} is not a valid header value"))?;
            http.custom_headers.insert(header, value);
        }
        http.auth_header = bearer_token_env.map(var).transpose()?;
        crate::tls::install_provider();
        let transport = rmcp::transport::StreamableHttpClientTransport::from_config(http);
        let calls = Arc::new(Calls::default());
        let relay = Relay {
            calls: calls.clone(),
            events,
        };
        let service = tokio::time::timeout(config.start_timeout, handshake(relay, transport))
            .await
            .map_err(|_| {
                format!(
                    "{url} did not complete the MCP handshake within {} s",
                    config.start_timeout.as_secs()
                )
            })?
            .map_err(|e| format!("{url}: {e}"))?;
        Ok(Connection {
            service,
            calls,
            pgid: None,
            stderr: Arc::default(),
        })
    }

    /// A child in its own process group, rmcp's client on its pipes.
    async fn spawn(
        config: &ServerConfig,
        command: &str,
        args: &[String],
        env: &[String],
        cwd: &std::path::Path,
        events: Arc<dyn Events>,
    ) -> Result<Self, String> {
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(args)
            .current_dir(cwd)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        for name in BASE_ENV
            .iter()
            .copied()
            .chain(env.iter().map(String::as_str))
        {
            if let Some(v) = std::env::var_os(name) {
                cmd.env(name, v);
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("could not start `{command}` in {}: {e}", cwd.display()))?;
        let pgid = child.id().map(|p| p as i32);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("the child's pipes were not set up".into());
        };
        let tail = Arc::new(Mutex::new(Tail::default()));
        tokio::spawn(read_stderr(stderr, tail.clone(), config.id.clone()));
        // The child is reaped here; the process group is ended when the connection drops.
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        let calls = Arc::new(Calls::default());
        let relay = Relay {
            calls: calls.clone(),
            events,
        };
        let transport: Pipes =
            rmcp::transport::async_rw::AsyncRwTransport::new(Box::pin(stdout), Box::pin(stdin))
                .with_max_line_length(MAX_LINE_BYTES);
        let started = tokio::time::timeout(config.start_timeout, handshake(relay, transport)).await;
        let guard = KillOnError(pgid);
        let service = match started {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(with_stderr(e, &tail)),
            Err(_) => {
                return Err(with_stderr(
                    format!(
                        "did not complete the MCP handshake within {} s",
                        config.start_timeout.as_secs()
                    ),
                    &tail,
                ));
            }
        };
        guard.disarm();
        Ok(Connection {
            service,
            calls,
            pgid,
            stderr: tail,
        })
    }

    /// Whether the connection is gone (the server exited or closed its output).
    pub fn is_closed(&self) -> bool {
        // rmcp cancels its token only when told to; a transport that closed on its own (the
        // server exited) shows as the service loop's channel closing.
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Why it closed, as far as its stderr says.
    pub fn last_words(&self) -> String {
        lock(&self.stderr).text()
    }

    /// Every tool the server lists, page by page (bounded in pages and tools).
    pub async fn list_tools(&self, timeout: Duration) -> Result<Vec<Value>, String> {
        let peer = self.service.peer();
        paged("tools/list", timeout, |params| async move {
            let page = peer.list_tools(params).await?;
            Ok((to_values(&page.tools), page.next_cursor))
        })
        .await
    }

    /// Whether the server answers a `ping` within `timeout`.
    pub async fn ping(&self, timeout: Duration) -> Result<(), String> {
        let ping = ClientRequest::PingRequest(Default::default());
        match tokio::time::timeout(timeout, self.service.peer().send_request(ping)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("ping failed: {e}")),
            Err(_) => Err(format!("ping not answered within {} s", timeout.as_secs())),
        }
    }

    /// Whether the server said it has resources (`initialize`'s capabilities).
    pub fn has_resources(&self) -> bool {
        self.service
            .peer()
            .peer_info()
            .is_some_and(|i| i.capabilities.resources.is_some())
    }

    /// Whether the server said it has prompts.
    pub fn has_prompts(&self) -> bool {
        self.service
            .peer()
            .peer_info()
            .is_some_and(|i| i.capabilities.prompts.is_some())
    }

    /// Every resource the server lists (bounded as tools are).
    pub async fn list_resources(&self, timeout: Duration) -> Result<Vec<Value>, String> {
        let peer = self.service.peer();
        paged("resources/list", timeout, |params| async move {
            let page = peer.list_resources(params).await?;
            Ok((to_values(&page.resources), page.next_cursor))
        })
        .await
    }

    /// Every prompt the server lists (bounded as tools are).
    pub async fn list_prompts(&self, timeout: Duration) -> Result<Vec<Value>, String> {
        let peer = self.service.peer();
        paged("prompts/list", timeout, |params| async move {
            let page = peer.list_prompts(params).await?;
            Ok((to_values(&page.prompts), page.next_cursor))
        })
        .await
    }

    /// Reads resource `uri` (the server's own URI): its first contents.
    pub async fn read(&self, uri: &str, timeout: Duration) -> Result<ResourceBody, ToolError> {
        let params = rmcp::model::ReadResourceRequestParams::new(uri.to_owned());
        let r = tokio::time::timeout(timeout, self.service.peer().read_resource(params))
            .await
            .map_err(|_| timed_out("resources/read", timeout))?
            .map_err(|e| self.failed("resources/read", e))?;
        let first =
            r.contents.into_iter().next().ok_or_else(|| {
                ToolError::not_found(format!("the server read nothing for {uri}"))
            })?;
        Ok(match first {
            rmcp::model::ResourceContents::TextResourceContents {
                mime_type, text, ..
            } => ResourceBody::typed_text(text, mime_type.unwrap_or_else(|| "text/plain".into())),
            rmcp::model::ResourceContents::BlobResourceContents {
                mime_type, blob, ..
            } => ResourceBody::blob(
                blob,
                mime_type.unwrap_or_else(|| "application/octet-stream".into()),
            ),
            other => {
                let kind = serde_json::to_string(&other).unwrap_or_default();
                return Err(ToolError::unavailable(format!(
                    "the server's contents for {uri} are of a kind vox does not relay: {}",
                    kind.chars().take(120).collect::<String>()
                )));
            }
        })
    }

    /// Gets prompt `name` (the server's own name) with `args`.
    pub async fn prompt(
        &self,
        name: &str,
        args: Value,
        timeout: Duration,
    ) -> Result<Value, ToolError> {
        let mut params = rmcp::model::GetPromptRequestParams::new(name.to_owned());
        if let Value::Object(a) = args {
            params.arguments = Some(a);
        }
        let r = tokio::time::timeout(timeout, self.service.peer().get_prompt(params))
            .await
            .map_err(|_| timed_out("prompts/get", timeout))?
            .map_err(|e| self.failed("prompts/get", e))?;
        serde_json::to_value(&r).map_err(|e| ToolError::internal(e.to_string()))
    }

    fn failed(&self, what: &str, e: ServiceError) -> ToolError {
        match e {
            ServiceError::McpError(e) if e.code == rmcp::model::ErrorCode::INVALID_PARAMS => {
                ToolError::invalid_arguments(format!("the server refused {what}: {}", e.message))
            }
            ServiceError::McpError(e) => {
                ToolError::unavailable(format!("the server refused {what}: {}", e.message))
                    .with_detail(
                        "upstream_error",
                        Some(json!({"code": e.code.0, "message": e.message})),
                    )
            }
            other => lost(&other.to_string(), &self.last_words()),
        }
    }

    /// Calls the server's tool `tool` for `call`: its answer, or a failure saying what
    /// happened. A cancelled call is cancelled on the server too.
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
        call: &CallCtx,
        timeout: Duration,
    ) -> ToolOutcome {
        let Value::Object(arguments) = args else {
            return ToolOutcome::Failed(ToolError::invalid_arguments(
                "arguments must be a JSON object",
            ));
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let peer = self.service.peer();
        let handle = match peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(h) => h,
            Err(e) => return ToolOutcome::Failed(lost(&e.to_string(), &self.last_words())),
        };
        let (id, token) = (handle.id.clone(), handle.progress_token.clone());
        self.calls.lock().insert(token.clone(), call.clone());
        let answer = tokio::select! {
            a = handle.await_response() => Ok(a),
            () = call.cancel.cancelled() => Err("cancelled"),
            () = tokio::time::sleep(timeout) => Err("timeout"),
        };
        self.calls.lock().remove(&token);
        match answer {
            Ok(Ok(ServerResult::CallToolResult(r))) => {
                outcome(serde_json::to_value(&r).unwrap_or_default())
            }
            Ok(Ok(other)) => ToolOutcome::Failed(ToolError::internal(format!(
                "the server answered tools/call with something else: {}",
                serde_json::to_string(&other)
                    .unwrap_or_default()
                    .chars()
                    .take(200)
                    .collect::<String>()
            ))),
            Ok(Err(ServiceError::McpError(e))) => ToolOutcome::Failed(
                ToolError::unavailable(format!("the server refused the call: {}", e.message))
                    .with_detail(
                        "upstream_error",
                        Some(json!({"code": e.code.0, "message": e.message})),
                    ),
            ),
            Ok(Err(e)) => ToolOutcome::Failed(lost(&e.to_string(), &self.last_words())),
            Err(why) => {
                let cancel = CancelledNotification::new(CancelledNotificationParam::new(
                    Some(id),
                    Some(format!("vox: {why}")),
                ));
                let _ = peer.send_notification(cancel.into()).await;
                if why == "cancelled" {
                    ToolOutcome::Failed(ToolError::cancelled(format!("tool {tool} was cancelled")))
                } else {
                    ToolOutcome::Failed(
                        ToolError::unavailable(format!(
                            "the server did not answer within its call timeout ({} s); the call was cancelled on it",
                            timeout.as_secs()
                        ))
                        .with_detail("upstream_timeout", Some(json!({"timeout_secs": timeout.as_secs()}))),
                    )
                }
            }
        }
    }
}

fn to_values<T: serde::Serialize>(items: &[T]) -> Vec<Value> {
    items
        .iter()
        .filter_map(|t| serde_json::to_value(t).ok())
        .collect()
}

fn timed_out(what: &str, timeout: Duration) -> ToolError {
    ToolError::unavailable(format!(
        "the server did not answer {what} within {} s",
        timeout.as_secs()
    ))
    .with_detail(
        "upstream_timeout",
        Some(json!({"timeout_secs": timeout.as_secs()})),
    )
}

/// Every item of a paginated list (`what`), each page within `timeout`, at most [`MAX_PAGES`]
/// pages and [`MAX_TOOLS`] items.
async fn paged<F, Fut>(what: &str, timeout: Duration, mut page: F) -> Result<Vec<Value>, String>
where
    F: FnMut(Option<rmcp::model::PaginatedRequestParams>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<Value>, Option<String>), ServiceError>>,
{
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .take()
            .map(|c| rmcp::model::PaginatedRequestParams::default().with_cursor(Some(c)));
        let (mut got, next) = tokio::time::timeout(timeout, page(params))
            .await
            .map_err(|_| format!("{what} did not answer within {} s", timeout.as_secs()))?
            .map_err(|e| format!("{what} failed: {e}"))?;
        items.append(&mut got);
        if items.len() > MAX_TOOLS {
            return Err(format!("{what} lists more than {MAX_TOOLS} items"));
        }
        match next {
            Some(c) => cursor = Some(c),
            None => return Ok(items),
        }
    }
    Err(format!("{what} took more than {MAX_PAGES} pages"))
}

/// A connection lost mid-call.
fn lost(why: &str, stderr: &str) -> ToolError {
    let said = if stderr.is_empty() {
        String::new()
    } else {
        format!(" (its stderr: {stderr})")
    };
    ToolError::unavailable(format!(
        "the upstream server went away during the call: {why}{said}; it is restarted for the next call"
    ))
    .with_detail("upstream_unavailable", None)
}

/// A `CallToolResult` as the outcome vox answers with: its content blocks and structured
/// content as they were; `isError` as a tool error carrying its text.
fn outcome(result: Value) -> ToolOutcome {
    let mut blocks: Vec<Value> = result["content"].as_array().cloned().unwrap_or_default();
    if result["isError"] == json!(true) {
        let text: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
        let message = if text.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            text.join("\n")
        };
        return ToolOutcome::Failed(
            ToolError::new(vox_core::ErrorKind::Failed, message)
                .with_detail("upstream_tool_error", Some(result)),
        );
    }
    if let Some(s) = result.get("structuredContent").filter(|s| !s.is_null()) {
        blocks.push(json!({"type": "structured", "structured": s}));
    }
    ToolOutcome::Content(blocks)
}

fn with_stderr(e: String, tail: &Arc<Mutex<Tail>>) -> String {
    let said = lock(tail).text();
    if said.is_empty() {
        e
    } else {
        format!("{e} (its stderr: {said})")
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Ends the process group if the connection is not made.
struct KillOnError(Option<i32>);

impl KillOnError {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for KillOnError {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            codex_app_server::tree::kill_tree(pgid);
        }
    }
}

async fn read_stderr(stderr: tokio::process::ChildStderr, tail: Arc<Mutex<Tail>>, id: String) {
    use tokio::io::AsyncBufReadExt;
    // Lines are read bounded: a server that floods stderr is read and dropped, never held.
    let mut lines = tokio::io::BufReader::with_capacity(16 * 1024, stderr);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match tokio::io::AsyncReadExt::take(&mut lines, 64 * 1024)
            .read_until(b'\n', &mut buf)
            .await
        {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let line = String::from_utf8_lossy(&buf).trim_end().to_owned();
                tracing::debug!(target: "vox.upstream", server = %id, "{line}");
                lock(&tail).push(line);
            }
        }
    }
}

/// rmcp's transport over a child's stdout and stdin.
type Pipes = rmcp::transport::async_rw::AsyncRwTransport<
    RoleClient,
    std::pin::Pin<Box<tokio::process::ChildStdout>>,
    std::pin::Pin<Box<tokio::process::ChildStdin>>,
>;

type Handshake = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<RunningService<RoleClient, Relay>, String>> + Send>,
>;

/// The MCP handshake over `transport`. Its future is not `Send` (rmcp selects on a borrowed
/// cancellation token): it runs on a blocking thread; the session runs on the runtime.
fn handshake<T, E, A>(relay: Relay, transport: T) -> Handshake
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
    A: 'static,
{
    let runtime = tokio::runtime::Handle::current();
    Box::pin(async move {
        tokio::task::spawn_blocking(move || {
            runtime
                .block_on(rmcp::service::serve_client_with_lifecycle(
                    relay,
                    transport,
                    ClientLifecycleMode::Initialize,
                ))
                .map_err(|e| format!("did not start an MCP session: {e}"))
        })
        .await
        .map_err(|e| format!("the handshake panicked: {e}"))?
    })
}

/// The client side towards the server: what it sends reaches the call it belongs to.
struct Relay {
    calls: Arc<Calls>,
    events: Arc<dyn Events>,
}

impl Service<RoleClient> for Relay {
    async fn handle_request(
        &self,
        request: ServerRequest,
        _ctx: RequestContext<RoleClient>,
    ) -> Result<ClientResult, McpError> {
        let (ask, params) = match request {
            ServerRequest::PingRequest(_) => return Ok(ClientResult::empty(())),
            ServerRequest::ListRootsRequest(_) => {
                return Ok(ClientResult::ListRootsResult(Default::default()));
            }
            ServerRequest::CreateMessageRequest(r) => {
                (Ask::Sample, serde_json::to_value(&r.params))
            }
            ServerRequest::ElicitRequest(r) => (Ask::Elicit, serde_json::to_value(&r.params)),
            _ => {
                return Err(McpError::new(
                    rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                    "vox does not relay this request from an upstream server",
                    None,
                ));
            }
        };
        let params = params.map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let Some(call) = self.calls.any() else {
            return Err(McpError::invalid_request(
                "no call is in flight whose client could answer this request",
                None,
            ));
        };
        let answer = call.ask(ask, params, ASK_TIMEOUT).await.map_err(|e| {
            let why = match e {
                AskError::Unsupported(w) | AskError::Failed(w) => w,
                AskError::TimedOut => "the client did not answer in time".into(),
                AskError::Cancelled => "the call was cancelled".into(),
            };
            McpError::internal_error(why, None)
        })?;
        let result = match ask {
            Ask::Sample => serde_json::from_value(answer).map(ClientResult::CreateMessageResult),
            Ask::Elicit => serde_json::from_value(answer).map(ClientResult::ElicitResult),
        };
        result.map_err(|e| McpError::internal_error(format!("the client's answer: {e}"), None))
    }

    async fn handle_notification(
        &self,
        notification: ServerNotification,
        _ctx: NotificationContext<RoleClient>,
    ) -> Result<(), McpError> {
        match notification {
            ServerNotification::ProgressNotification(p) => {
                let call = self.calls.lock().get(&p.params.progress_token).cloned();
                if let Some(call) = call {
                    call.progress(p.params.progress, p.params.total, p.params.message);
                }
            }
            #[allow(deprecated)] // 2025-era servers log this way; clients still read it
            ServerNotification::LoggingMessageNotification(m) => {
                if let Some(call) = self.calls.any() {
                    let level = serde_json::to_value(m.params.level)
                        .ok()
                        .and_then(|v| serde_json::from_value::<LogLevel>(v).ok())
                        .unwrap_or_default();
                    let logger = m.params.logger.unwrap_or_else(|| "upstream".into());
                    call.log(level, &logger, m.params.data);
                }
            }
            ServerNotification::ToolListChangedNotification(_)
            | ServerNotification::ResourceListChangedNotification(_)
            | ServerNotification::PromptListChangedNotification(_) => self.events.lists_changed(),
            _ => {}
        }
        Ok(())
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.client_info = rmcp::model::Implementation::new("vox", env!("CARGO_PKG_VERSION"));
        info.capabilities =
            serde_json::from_value(json!({"sampling": {}, "elicitation": {}, "roots": {}}))
                .unwrap_or_default();
        info
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_their_content_and_structured_content() {
        let ok = outcome(
            json!({"content": [{"type": "text", "text": "hi"}], "structuredContent": {"a": 1}}),
        );
        let ToolOutcome::Content(blocks) = ok else {
            panic!()
        };
        assert_eq!(blocks[0]["text"], "hi");
        assert_eq!(
            blocks[1],
            json!({"type": "structured", "structured": {"a": 1}})
        );
        let err =
            outcome(json!({"content": [{"type": "text", "text": "bad path"}], "isError": true}));
        let ToolOutcome::Failed(e) = err else {
            panic!()
        };
        assert_eq!(e.code(), "tool_error");
        assert!(e.message().contains("bad path"));
    }
}
