//! The HTTP gateway of `vox serve`: REST (`/v1/*`), WebSocket (`/v1/ws`), Streamable HTTP MCP
//! (`/mcp`, both wire eras, through rmcp's tower service), `/health` and `/metrics`.
//!
//! Every path serves one surface: the daemon's profile intersected with the HTTP allowlist
//! ([`ProfileSet::restricted`]), with the read role's extra allowlist inside the same
//! `authorize_tool`. The gateway decides only *who* a caller is (token → role, socket peer →
//! loopback); *what* the caller may do is decided by the orchestrator, as on every other path.
//!
//! The `guard` middleware, on every route:
//! - exactly one `Host` header (400 `host_required` otherwise, `/health` included);
//! - `Host`, an absolute request target and `Origin` parsed as `host[:port]` (`Origin`:
//!   `http(s)://host[:port]`) with `http::uri::Authority`, refusing userinfo, paths and trailing
//!   characters, and the host compared exactly (ignoring case) with the loopback names, the bound
//!   address and `VOX_MCP_HTTP_ALLOWED_HOSTS` (403 otherwise; see [`GatewayConfig::host_allowed`]);
//! - the role from the bearer token; without one, the write role only when
//!   `VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED=1` (accepted only on a 127.0.0.1 or ::1 bind) and the
//!   peer is 127.0.0.1 or ::1 ([`trusted_loopback`]);
//! - the per-caller rate limit.
//!
//! A 2025-era `/mcp` session answers only the caller (agent) that opened it: 404 for anyone
//! else, on POST, GET and DELETE. Each request's [`CallScope`] (this gateway's surface, the
//! caller's role and peer, its session, the agent its token is) is resolved once here; the
//! orchestrator decides the rest, so no tool is named in this crate.

mod config;
mod failures;
pub mod listen;
mod mcp;
pub mod oauth;
mod ws;

pub use config::{ConfigError, GatewayConfig};
pub use ws::{WsRequest, parse_ws_request};

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use vox_core::{CallRun, CallScope, Orchestrator, WorkspaceTools};
use vox_mcp_registry::{Caller, ProfileSet, Role};

/// Largest request body (and WebSocket message) accepted.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Who a request comes from, decided once by the auth middleware.
#[derive(Debug, Clone)]
pub struct Who {
    /// The caller's loopback flag and role, from its peer address and token.
    pub caller: Caller,
    /// The rate-limit and attention key: the role for token callers, the peer IP otherwise.
    pub agent: String,
    /// The session key that scopes the active skill: per WebSocket connection, per legacy
    /// `/mcp` session, and for REST the caller's `X-Vox-Session` header (else the agent).
    /// Always prefixed with the agent, so a caller can only name sessions of its own token or
    /// peer.
    pub session: String,
    /// Whether `session` names one session (a header, a connection, an MCP session) rather
    /// than everything the agent sends; only a named session may activate a skill.
    pub session_named: bool,
    /// The orchestrator agent whose credential (`voxa_…`) the bearer token is: every call is
    /// that agent's, on the agent path.
    pub acting_agent: Option<String>,
    /// What the caller's OAuth access token grants, when it presented one.
    pub grant: Option<Arc<oauth::Grant>>,
}

/// Longest `X-Vox-Session` value accepted.
const MAX_SESSION_HEADER: usize = 128;

/// The REST session key of `agent`'s request: `rest:<agent>`, or `rest:<agent>:<X-Vox-Session>`
/// when that header is a short token of `[A-Za-z0-9_.:-]` (1 to 128 characters); any other
/// value is refused with the message the 400 answer carries.
pub fn rest_session(agent: &str, headers: &axum::http::HeaderMap) -> Result<String, &'static str> {
    match headers.get("x-vox-session").map(|v| v.to_str()) {
        None => Ok(format!("rest:{agent}")),
        Some(Ok(v))
            if !v.is_empty()
                && v.len() <= MAX_SESSION_HEADER
                && v.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-')
                }) =>
        {
            Ok(format!("rest:{agent}:{v}"))
        }
        Some(_) => Err("X-Vox-Session must be 1-128 characters of [A-Za-z0-9_.:-]"),
    }
}

/// State shared by every route.
pub struct Shared {
    orch: Arc<Orchestrator>,
    surface: ProfileSet,
    /// The allowlist narrows the daemon's profile (decided once: every request's scope says so).
    narrowed: bool,
    config: GatewayConfig,
    limiter: DefaultKeyedRateLimiter<String>,
    /// Failed authentications by peer address.
    failures: failures::AuthFailures,
    metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// The OAuth resource server, when `VOX_MCP_HTTP_OAUTH_ISSUER` is set.
    oauth: Option<Arc<oauth::OAuth>>,
}

impl Shared {
    /// The scope of `who`'s calls here, resolved once per request: this gateway's surface,
    /// the caller's role and peer, its session, the agent its credential is, and for `/mcp`
    /// (`mcp`) the workspace's tools when they are served to it.
    fn scope(&self, who: &Who, mcp: bool) -> Arc<CallScope> {
        let narrowing = who.grant.as_ref().and_then(|g| g.narrowing.as_ref());
        let surface = match narrowing {
            Some(p) => self.surface.intersect(p),
            None => self.surface.clone(),
        };
        let mut scope = CallScope::new(surface, who.caller, &who.agent, &who.session);
        if narrowing.is_some() {
            scope = scope.narrowed_by("this token's profile scope");
        } else if self.narrowed {
            scope = scope.narrowed_by("this gateway's allowlist");
        }
        if !who.session_named {
            scope = scope.unnamed_session();
        }
        scope = match &who.acting_agent {
            Some(id) => scope.as_agent(id),
            None if mcp && self.serves_workspace(who) => {
                scope.with_workspace_tools(WorkspaceTools::Listed)
            }
            None => scope,
        };
        Arc::new(scope)
    }
    /// Whether `/mcp` serves this caller the workspace's `.vox` tools and resources (and skill
    /// macro tools): only with `VOX_MCP_HTTP_WORKSPACE_TOOLS=1` (dev only, checked at start)
    /// and only to the write role.
    fn serves_workspace(&self, who: &Who) -> bool {
        self.config.workspace_tools && who.caller.role == Role::Write && who.acting_agent.is_none()
    }
}

/// Builds the router, and the OAuth resource server when one is configured (its resource
/// URI defaults to `config`'s address, so `config.port` is the bound port); fails on an
/// allowlist naming unknown tools (deny by default: nothing is silently ignored). `metrics` is
/// the installed Prometheus recorder, if any.
pub fn router(
    orch: Arc<Orchestrator>,
    config: GatewayConfig,
    metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    shutdown: CancellationToken,
) -> Result<(Router, Option<Arc<oauth::OAuth>>), ConfigError> {
    let surface = config.surface(orch.profile())?;
    let oauth = match &config.oauth {
        Some(settings) => Some(Arc::new(
            oauth::OAuth::new(settings.clone(), config.host, config.port).map_err(|message| {
                ConfigError::Invalid {
                    var: "VOX_MCP_HTTP_OAUTH_ISSUER",
                    message,
                }
            })?,
        )),
        None => None,
    };
    let quota = Quota::per_second(config.rate_per_sec).allow_burst(config.rate_burst);
    let narrowed = surface != *orch.profile();
    let shared = Arc::new(Shared {
        orch,
        surface,
        narrowed,
        limiter: RateLimiter::keyed(quota),
        failures: failures::AuthFailures::new(config.auth_failures_per_min.get()),
        metrics,
        oauth: oauth.clone(),
        config,
    });
    let (mcp, owners) = mcp::service(shared.clone(), shutdown);
    let mcp = tower::Layer::layer(
        &axum::middleware::from_fn_with_state(owners, mcp::bind_sessions),
        mcp,
    );
    let app = Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics_route))
        .route("/v1/info", get(info))
        .route("/v1/tools", get(list_tools))
        .route("/v1/tools/call", post(call_tool))
        .route("/v1/ws", get(ws::upgrade))
        .route(PROTECTED_RESOURCE_METADATA, get(resource_metadata))
        .route(
            &format!("{PROTECTED_RESOURCE_METADATA}/{{*resource}}"),
            get(resource_metadata),
        )
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(shared.clone(), guard))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            MAX_BODY_BYTES,
        ))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs(60),
        ))
        .with_state(shared);
    Ok((app, oauth))
}

/// Where the protected resource metadata is served (RFC 9728 §3), also with the resource's
/// path appended (`…/mcp`).
const PROTECTED_RESOURCE_METADATA: &str = "/.well-known/oauth-protected-resource";

/// The protected resource metadata: 404 when OAuth is off.
async fn resource_metadata(State(s): State<Arc<Shared>>) -> Response {
    match &s.oauth {
        Some(o) => Json(o.metadata()).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "not_found",
            "OAuth is not enabled on this gateway (VOX_MCP_HTTP_OAUTH_ISSUER)",
        ),
    }
}

/// `{"error":{"code","message"}}` with a status.
fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    (
        status,
        Json(json!({"error": {"code": code, "message": message.into()}})),
    )
        .into_response()
}

/// 429 `rate_limited` with `Retry-After: 1`.
fn too_many(message: String) -> Response {
    let mut r = error(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// Compares secrets in time independent of where they differ (digests make lengths equal).
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    let (x, y) = (Sha256::digest(a), Sha256::digest(b));
    x.iter()
        .zip(y.iter())
        .fold(0u8, |acc, (p, q)| acc | (p ^ q))
        == 0
}

fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    bearer_token(headers.get(header::AUTHORIZATION)?.as_bytes())
}

/// The token of an `Authorization` header value: what follows `Bearer ` (or `bearer `),
/// without surrounding ASCII whitespace; `None` for any other scheme.
pub fn bearer_token(authorization: &[u8]) -> Option<&[u8]> {
    let rest = authorization
        .strip_prefix(b"Bearer ")
        .or_else(|| authorization.strip_prefix(b"bearer "))?;
    Some(rest.trim_ascii())
}

/// Why a request's Host, request target or Origin refuses it ([`check_host_and_origin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostRefusal {
    /// No `Host` header, or more than one (400 `host_required`).
    HostRequired,
    /// The `Host` header or an absolute request target names no allowed host (403
    /// `host_not_allowed`).
    HostNotAllowed,
    /// The `Origin` header names no allowed origin (403 `origin_not_allowed`).
    OriginNotAllowed,
}

/// The first check of every request: exactly one `Host` header, naming an allowed host (a
/// value that is not visible ASCII names none), as an absolute request target must
/// ([`GatewayConfig::host_allowed`]), and an `Origin`, when present, that is allowed
/// ([`GatewayConfig::origin_allowed`]).
pub fn check_host_and_origin(
    config: &GatewayConfig,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<(), HostRefusal> {
    // HTTP/1.1 requires exactly one Host (RFC 9112 §3.2): without it the rebinding check
    // would have nothing to check. /health is no exception.
    let mut hosts = headers.get_all(header::HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return Err(HostRefusal::HostRequired);
    };
    // An absolute request target (`GET http://name/ …`) names the host as well.
    let target = uri.authority().map(|a| a.as_str());
    if !config.host_allowed(host.to_str().unwrap_or(""))
        || target.is_some_and(|t| !config.host_allowed(t))
    {
        return Err(HostRefusal::HostNotAllowed);
    }
    if let Some(origin) = headers.get(header::ORIGIN)
        && !config.origin_allowed(origin.to_str().unwrap_or(""))
    {
        return Err(HostRefusal::OriginNotAllowed);
    }
    Ok(())
}

/// Only 127.0.0.1 and ::1 count as loopback for trust decisions: other 127/8 addresses can be
/// assigned to containers or forwarded, so they are treated as remote (deny more, not less).
pub fn trusted_loopback(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4 == std::net::Ipv4Addr::LOCALHOST,
        std::net::IpAddr::V6(v6) => {
            v6 == std::net::Ipv6Addr::LOCALHOST
                || v6.to_ipv4_mapped() == Some(std::net::Ipv4Addr::LOCALHOST)
        }
    }
}

/// Host/Origin validation, authentication, and the per-caller rate limit, for every route.
async fn guard(
    State(s): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut req: Request,
    next: Next,
) -> Response {
    let headers = req.headers();
    match check_host_and_origin(&s.config, headers, req.uri()) {
        Ok(()) => {}
        Err(HostRefusal::HostRequired) => {
            return error(
                StatusCode::BAD_REQUEST,
                "host_required",
                "a request needs exactly one Host header",
            );
        }
        Err(HostRefusal::HostNotAllowed) => {
            return error(
                StatusCode::FORBIDDEN,
                "host_not_allowed",
                "the Host header names no allowed host",
            );
        }
        Err(HostRefusal::OriginNotAllowed) => {
            return error(
                StatusCode::FORBIDDEN,
                "origin_not_allowed",
                "the Origin header names no allowed origin",
            );
        }
    }
    let path = req.uri().path().to_owned();
    // Health, and where a client learns how to get a token, need no token.
    if path == "/health" || path == "/ready" || path.starts_with(PROTECTED_RESOURCE_METADATA) {
        return next.run(req).await;
    }
    let loopback = trusted_loopback(peer.ip());
    if let Some(left) = s.failures.blocked(peer.ip()) {
        return too_many(format!(
            "too many failed authentications from {}; retry in {} s",
            peer.ip(),
            left.as_secs() + 1
        ));
    }
    let token = bearer(headers);
    let who = match identify(&s, token, peer.ip()).await {
        Ok(who) => who,
        Err(refused) => {
            if token.is_some() {
                s.failures.failed(peer.ip());
            }
            return refused.response(s.oauth.as_deref());
        }
    };
    if path == "/metrics" {
        // Metrics: loopback peers, or the static write token from anywhere.
        let write_token = who.as_ref().is_some_and(|w| {
            w.role == Role::Write && w.acting_agent.is_none() && w.grant.is_none()
        }) && token.is_some();
        if loopback || write_token {
            return next.run(req).await;
        }
        return error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "metrics are served to loopback peers or the write token",
        );
    }
    let Some(Identity {
        role,
        agent,
        acting_agent,
        grant,
    }) = who
    else {
        return Refused::NoCredential.response(s.oauth.as_deref());
    };
    if s.limiter.check_key(&agent).is_err() {
        return too_many("too many requests; slow down".into());
    }
    let session = match rest_session(&agent, req.headers()) {
        Ok(s) => s,
        Err(m) => return error(StatusCode::BAD_REQUEST, "invalid_request", m),
    };
    let session_named = req.headers().contains_key("x-vox-session");
    req.extensions_mut().insert(Who {
        caller: Caller { loopback, role },
        agent,
        session,
        session_named,
        acting_agent,
        grant: grant.map(Arc::new),
    });
    next.run(req).await
}

/// Who a credential is, before the rate limit and the session are applied.
struct Identity {
    role: Role,
    agent: String,
    acting_agent: Option<String>,
    grant: Option<oauth::Grant>,
}

/// Why a request is not let in.
enum Refused {
    /// No credential, or one that is no token at all (401).
    NoCredential,
    /// A token that is neither static, an agent's, nor a good OAuth token.
    Token(oauth::Refusal),
}

impl Refused {
    /// 401 with the challenge (the OAuth one when OAuth is on), 403 `insufficient_scope`, or
    /// 503 when the authorization server cannot be reached to check a token.
    fn response(self, oauth: Option<&oauth::OAuth>) -> Response {
        let (status, code, message, challenge) = match self {
            Refused::NoCredential => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid bearer token is required".to_owned(),
                oauth.map(|o| o.challenge(None)),
            ),
            Refused::Token(oauth::Refusal::Invalid(why)) => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                format!("a valid bearer token is required: {why}"),
                oauth.map(|o| o.challenge(Some(("invalid_token", &why)))),
            ),
            Refused::Token(oauth::Refusal::InsufficientScope(why)) => (
                StatusCode::FORBIDDEN,
                "insufficient_scope",
                why.clone(),
                oauth.map(|o| o.challenge(Some(("insufficient_scope", &why)))),
            ),
            Refused::Token(oauth::Refusal::Unavailable(why)) => {
                let mut r = error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "oauth_unavailable",
                    format!("the authorization server cannot be reached to check the token: {why}"),
                );
                r.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                return r;
            }
        };
        let mut r = error(status, code, message);
        let challenge = challenge
            .and_then(|c| HeaderValue::from_str(&c).ok())
            .unwrap_or(HeaderValue::from_static("Bearer"));
        r.headers_mut().insert(header::WWW_AUTHENTICATE, challenge);
        r
    }
}

/// Who the credential says the caller is: the static write or read token, an agent's
/// credential, an OAuth access token, or no token on a loopback gateway that allows it.
/// `Ok(None)`: no credential that lets it in.
async fn identify(
    s: &Shared,
    token: Option<&[u8]>,
    peer: std::net::IpAddr,
) -> Result<Option<Identity>, Refused> {
    let plain = |role: Role, agent: &str| Identity {
        role,
        agent: agent.to_owned(),
        acting_agent: None,
        grant: None,
    };
    let Some(t) = token else {
        // Accepted at startup only on a 127.0.0.1 or ::1 bind; and only for peers that count
        // as loopback (another 127/8 source address can reach that bind).
        let allowed = s.config.allow_unauthenticated && trusted_loopback(peer);
        return Ok(allowed.then(|| plain(Role::Write, &format!("http:{peer}"))));
    };
    let matches = |secret: &Option<String>| {
        secret
            .as_deref()
            .is_some_and(|w| same_secret(t, w.as_bytes()))
    };
    if matches(&s.config.write_token) {
        return Ok(Some(plain(Role::Write, "http:write")));
    }
    if matches(&s.config.read_token) {
        return Ok(Some(plain(Role::Read, "http:read")));
    }
    let Ok(text) = std::str::from_utf8(t) else {
        return Err(Refused::Token(oauth::Refusal::Invalid(
            "the token is not UTF-8".into(),
        )));
    };
    // An agent's credential (issued by vox_spawn_agent): the request is that agent's, and
    // decided on the agent path (its own profile's public tools, approvals, budget).
    if let Ok(a) = s.orch.authenticate_agent(text) {
        return Ok(Some(Identity {
            role: Role::Write,
            agent: a.id.clone(),
            acting_agent: Some(a.id),
            grant: None,
        }));
    }
    let Some(oauth) = &s.oauth else {
        return Err(Refused::Token(oauth::Refusal::Invalid(
            "the token is not one this gateway accepts".into(),
        )));
    };
    let grant = oauth.verify(text).await.map_err(Refused::Token)?;
    Ok(Some(Identity {
        role: grant.role,
        agent: format!("oauth:{}", grant.subject),
        acting_agent: None,
        grant: Some(grant),
    }))
}

/// Liveness, always 200: `ok`, or `degraded` with the subsystems that failed to boot and why.
async fn health(State(s): State<Arc<Shared>>) -> Json<Value> {
    Json(health_body(&s))
}

/// Readiness: 200 when every subsystem of the profile booted, else 503 with the same body as
/// `/health` (a load balancer stops sending work to a replica whose store is down).
async fn ready(State(s): State<Arc<Shared>>) -> Response {
    let body = health_body(&s);
    let status = if body["status"] == "ok" {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// `ok`, or `degraded` naming what is down: the subsystems that failed to boot, and the
/// authorization server while its keys cannot be fetched (OAuth tokens are refused with 503).
fn health_body(s: &Shared) -> Value {
    let boot = &s.orch.ctx().boot;
    let mut failed = boot.failed.clone();
    if let Some(why) = s.oauth.as_ref().and_then(|o| o.status()) {
        failed.insert("oauth", why);
    }
    if failed.is_empty() {
        json!({"status": "ok", "profile": boot.profile})
    } else {
        json!({"status": "degraded", "profile": boot.profile, "failed": failed})
    }
}

async fn metrics_route(State(s): State<Arc<Shared>>) -> Response {
    match &s.metrics {
        Some(h) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            h.render(),
        )
            .into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "not_found",
            "metrics are not enabled",
        ),
    }
}

async fn info(
    State(s): State<Arc<Shared>>,
    axum::Extension(who): axum::Extension<Who>,
) -> Json<Value> {
    let names = |role: Role| -> Vec<String> {
        let caller = Caller {
            loopback: who.caller.loopback,
            role,
        };
        let who = Who {
            caller,
            ..who.clone()
        };
        s.orch
            .list(&s.scope(&who, false))
            .into_iter()
            .filter_map(|d| d["name"].as_str().map(str::to_owned))
            .collect()
    };
    Json(json!({
        "profile": s.orch.profile().canonical(),
        "version": env!("CARGO_PKG_VERSION"),
        "auth_required": !s.config.allow_unauthenticated,
        "roles": {
            "write": if s.config.write_token.is_some() || s.config.allow_unauthenticated { json!(names(Role::Write)) } else { json!(null) },
            "read": if s.config.read_token.is_some() { json!(names(Role::Read)) } else { json!(null) },
        },
        "oauth": s.oauth.as_ref().map(|o| json!({"issuer": o.issuer(), "resource": o.resource()})),
        "you": {
            "role": match who.caller.role { Role::Write => "write", Role::Read => "read" },
            "loopback": who.caller.loopback,
            "principal": who.agent,
            "subject": who.grant.as_ref().map(|g| g.subject.clone()),
            "client_id": who.grant.as_ref().and_then(|g| g.client_id.clone()),
            "profile": who.grant.as_ref().and_then(|g| g.narrowing.as_ref()).map(|p| p.canonical().to_owned()),
        },
    }))
}

async fn list_tools(
    State(s): State<Arc<Shared>>,
    axum::Extension(who): axum::Extension<Who>,
) -> Json<Value> {
    let tools: Vec<Value> = s
        .orch
        .list(&s.scope(&who, false))
        .into_iter()
        .map(|mut d| {
            let mut t = json!({"name": d["name"].take(), "description": d["description"].take(), "input_schema": d["inputSchema"].take(), "lane": d["_meta"]["vox_lane"].take()});
            if let Some(o) = d.get_mut("outputSchema") {
                t["output_schema"] = o.take();
            }
            t
        })
        .collect();
    Json(json!({"tools": tools}))
}

async fn call_tool(
    State(s): State<Arc<Shared>>,
    axum::Extension(who): axum::Extension<Who>,
    body: Bytes,
) -> Response {
    let (name, args) = match parse_call_body(&body) {
        Ok(call) => call,
        Err(message) => return error(StatusCode::BAD_REQUEST, "invalid_request", message),
    };
    let run = CallRun::default();
    // Dropped with the handler's future when the client goes away: the work stops too.
    let guard = run.cancel.guard();
    let outcome = s.orch.call(&s.scope(&who, false), &name, args, run).await;
    guard.disarm();
    let (status, body) = vox_mcp::encode::rest(outcome);
    let mut r = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(&body),
    )
        .into_response();
    // An OAuth caller whose token lacks the write scope is told so in the standard way
    // (RFC 6750 §3.1), so a client can ask for a token with more scope.
    if let (Some(o), Some(_)) = (&s.oauth, &who.grant)
        && body["error"]["code"] == "insufficient_role"
        && let Ok(v) = HeaderValue::from_str(&o.challenge(Some((
            "insufficient_scope",
            "this tool needs the write role",
        ))))
    {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

/// A `/v1/tools/call` body, `{"name": <string>, "args"?: <any>}`: the tool's name and its
/// arguments (`null` when absent), or the message of the 400 `invalid_request` answer.
pub fn parse_call_body(body: &[u8]) -> Result<(String, Value), String> {
    let req: Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let Some(name) = req.get("name").and_then(Value::as_str) else {
        return Err("body needs a string `name`".to_owned());
    };
    let args = req.get("args").cloned().unwrap_or(Value::Null);
    Ok((name.to_owned(), args))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> GatewayConfig {
        GatewayConfig::from_lookup(|k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| (*v).to_owned())
        })
        .unwrap()
    }

    #[test]
    fn host_origin_and_target_are_checked_in_order() {
        let c = config(&[("VOX_MCP_HTTP_BEARER_TOKEN", "0123456789abcdef-write")]);
        let headers = |pairs: &[(header::HeaderName, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(k, HeaderValue::from_str(v).unwrap());
            }
            h
        };
        let root = Uri::from_static("/");
        let check = |h: &HeaderMap, uri: &Uri| check_host_and_origin(&c, h, uri);
        assert_eq!(check(&headers(&[]), &root), Err(HostRefusal::HostRequired));
        let two = headers(&[(header::HOST, "localhost"), (header::HOST, "localhost")]);
        assert_eq!(check(&two, &root), Err(HostRefusal::HostRequired));
        let local = headers(&[(header::HOST, "localhost:3921")]);
        assert_eq!(check(&local, &root), Ok(()));
        let evil = Uri::from_static("http://evil.example/v1/info");
        assert_eq!(check(&local, &evil), Err(HostRefusal::HostNotAllowed));
        let remote = headers(&[(header::HOST, "evil.example")]);
        assert_eq!(check(&remote, &root), Err(HostRefusal::HostNotAllowed));
        let origin = headers(&[
            (header::HOST, "127.0.0.1"),
            (header::ORIGIN, "http://evil.example"),
        ]);
        assert_eq!(check(&origin, &root), Err(HostRefusal::OriginNotAllowed));
    }

    #[test]
    fn bearer_session_body_and_ws_parsing() {
        assert_eq!(bearer_token(b"Bearer  tok \t"), Some(&b"tok"[..]));
        assert_eq!(bearer_token(b"bearer tok"), Some(&b"tok"[..]));
        assert_eq!(bearer_token(b"Basic tok"), None);
        let mut h = HeaderMap::new();
        assert_eq!(rest_session("a", &h).unwrap(), "rest:a");
        h.insert("x-vox-session", HeaderValue::from_static("s-1.x:y_z"));
        assert_eq!(rest_session("a", &h).unwrap(), "rest:a:s-1.x:y_z");
        h.insert("x-vox-session", HeaderValue::from_static("a/b"));
        assert!(rest_session("a", &h).is_err());
        assert_eq!(
            parse_call_body(br#"{"name":"t","args":{"k":1}}"#).unwrap(),
            ("t".to_owned(), json!({"k": 1}))
        );
        assert_eq!(parse_call_body(br#"{"name":"t"}"#).unwrap().1, Value::Null);
        assert_eq!(
            parse_call_body(br#"{"name":1}"#).unwrap_err(),
            "body needs a string `name`"
        );
        assert!(
            parse_call_body(b"{")
                .unwrap_err()
                .starts_with("body is not JSON")
        );
        assert_eq!(
            parse_ws_request(r#"{"id":7,"type":"call_tool","name":"t"}"#).unwrap(),
            WsRequest::CallTool {
                id: json!(7),
                name: "t".into(),
                args: Value::Null
            }
        );
        assert_eq!(
            parse_ws_request(r#"{"type":"list_tools"}"#).unwrap(),
            WsRequest::ListTools { id: Value::Null }
        );
        let refused = |text: &str| parse_ws_request(text).unwrap_err();
        assert_eq!(refused(r#"{"id":"x","type":"nope"}"#)["id"], "x");
        assert_eq!(
            refused(r#"{"id":1.5,"type":"list_tools"}"#)["id"],
            Value::Null
        );
        assert_eq!(
            refused(r#"{"id":-0,"type":"list_tools"}"#)["id"],
            Value::Null
        );
        assert_eq!(refused(r#"{"id":2,"type":"call_tool"}"#)["status"], 400);
        assert_eq!(refused("nope")["type"], "error");
    }
}
