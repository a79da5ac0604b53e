//! What one call carries besides its arguments: who is calling, a cancellation signal, and
//! the sinks for progress and log messages. Transports build it; handlers only read it.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use vox_mcp_registry::Caller;

/// A cancellation signal shared by a call's transport, its deadline and its work.
///
/// Blocking work reads [`Cancel::flag`] between units of work (the interpreter every 1,024
/// steps, the sandbox every 5 ms, an index build every 64 files); async code awaits
/// [`Cancel::cancelled`]. Cancelling is idempotent and never undone.
#[derive(Clone, Default)]
pub struct Cancel(Arc<CancelInner>);

#[derive(Default)]
struct CancelInner {
    flag: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Cancel {
    /// A fresh, uncancelled signal.
    pub fn new() -> Self {
        Self::default()
    }
    /// Cancels: every waiter wakes and every flag reader sees it.
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }
    /// Whether [`Self::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::Relaxed)
    }
    /// The flag itself, for blocking code that takes `&AtomicBool` (`vox_lang`, `vox_sandbox`).
    pub fn flag(&self) -> &AtomicBool {
        &self.0.flag
    }
    /// A guard that cancels when dropped unless [`CancelGuard::disarm`]ed: a transport whose
    /// future can be dropped mid-call (an HTTP handler whose client left) holds one.
    pub fn guard(&self) -> CancelGuard {
        CancelGuard(Some(self.clone()))
    }
    /// Completes once cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            // Register before checking, so a cancel between the check and the await still
            // wakes us.
            notified.as_mut().enable();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// Cancels its [`Cancel`] when dropped, unless disarmed.
pub struct CancelGuard(Option<Cancel>);

impl CancelGuard {
    /// The call finished: nothing to cancel.
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            c.cancel();
        }
    }
}

/// MCP's log levels, in increasing severity (`logging/setLevel`, `notifications/message`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Detailed information for debugging.
    Debug,
    /// Normal operational messages.
    #[default]
    Info,
    /// Normal but significant events.
    Notice,
    /// Something unexpected that did not stop the call.
    Warning,
    /// An operation failed.
    Error,
    /// A critical condition: a component is failing.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

/// One progress report (`notifications/progress` without the token, which the transport adds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The progress so far (increases with each report; in units of `total` when given).
    pub progress: f64,
    /// The total to reach, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// A short human-readable note on the current step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One log message of a handler (`notifications/message` without the transport's framing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogMessage {
    /// The message's severity.
    pub level: LogLevel,
    /// The family (or component) that logged it.
    pub logger: String,
    /// The message: a string or any JSON value.
    pub data: Value,
}

/// What a tool may ask the caller's client while it runs (MCP's server→client requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ask {
    /// `elicitation/create`: the user answers a form (`{message, requestedSchema}`).
    Elicit,
    /// `sampling/createMessage`: the client's model answers (`{messages, maxTokens}`).
    Sample,
}

impl Ask {
    /// The client capability that answers it.
    pub fn capability(self) -> &'static str {
        match self {
            Ask::Elicit => "elicitation",
            Ask::Sample => "sampling",
        }
    }
}

/// Where the client's answer to an [`Ask`] arrives: the result's JSON, or why there is none.
pub type AskReply = tokio::sync::oneshot::Receiver<Result<Value, String>>;

/// Why an [`Ask`] got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskError {
    /// The transport or the client cannot be asked (the text says why).
    Unsupported(String),
    /// The client answered with an error, or went away.
    Failed(String),
    /// No answer within the time the call had left.
    TimedOut,
    /// The call was cancelled while waiting.
    Cancelled,
}

/// Where a call's progress and log messages go: the transport that carries the call.
pub trait CallEvents: Send + Sync {
    /// Sent only when the caller asked for progress (an MCP `progressToken`).
    fn progress(&self, p: Progress);
    /// Sent only at or above the caller's level.
    fn log(&self, m: LogMessage);
    /// Sends `ask` with `params` to the caller's client; the answer arrives on the reply.
    /// `Err` says why this transport or client cannot be asked.
    fn ask(&self, ask: Ask, _params: Value) -> Result<AskReply, String> {
        Err(format!(
            "this transport cannot carry a {} request to its client",
            ask.capability()
        ))
    }
    /// The call changed its session (see [`SessionEffect`]); most transports keep nothing.
    fn session_changed(&self, _effect: SessionEffect) {}
}

/// The key of one session: a socket or WebSocket connection, a 2025-era `/mcp` session, or
/// what a REST caller names in `X-Vox-Session` (always prefixed with the caller's own key, so
/// nobody can name another caller's session). It scopes the active skill.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey(Arc<str>);

impl SessionKey {
    /// A session key as given (the caller's prefix already in it).
    pub fn new(key: &str) -> Self {
        SessionKey(key.into())
    }
}

impl std::ops::Deref for SessionKey {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which tools beyond the static catalog (workspace `.vox` tools, skill macro tools; only under
/// `dev`) a scope reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkspaceTools {
    /// None: not listed, and a name outside the catalog is `unknown_tool`.
    #[default]
    Off,
    /// Callable by name; listed: skill macro tools only (a stdio client that did not opt in).
    Callable,
    /// Listed and callable (`VOX_MCP_WORKSPACE_TOOLS=1`, or an opted-in gateway's write role).
    Listed,
}

/// Everything a path may use to decide a call: resolved once at the edge (the socket peer, a
/// token, an agent credential, a mesh trust list) and never widened after. Every entry point
/// of [`crate::Orchestrator`] takes one, and a handler that calls other tools (a chat's tool
/// loop) calls them under its own caller's scope ([`CallCtx::scope`]).
#[derive(Debug, Clone)]
pub struct CallScope {
    /// What this path serves: the daemon's profile, or narrower (a gateway's allowlist, the
    /// profile a mesh trust list grants a node).
    pub surface: vox_mcp_registry::ProfileSet,
    /// The caller's loopback flag and role, for the authorization decision.
    pub caller: Caller,
    /// The attention and rate-limit key (`stdio:<client name>`, a token's agent name,
    /// `node:<id>`).
    pub principal: Arc<str>,
    /// The orchestrator agent this caller is, proven by the credential the daemon issued it
    /// (`vox_spawn_agent`); `None`: the operator (a person, or a client acting for them). An
    /// agent's calls are narrowed to its own public tools and pass its gate.
    pub agent: Option<Arc<str>>,
    /// The session the call belongs to (scopes the active skill).
    pub session: SessionKey,
    /// Whether `session` names one session (a connection, an MCP session, `X-Vox-Session`)
    /// rather than everything one token sends: only a named session may hold session state
    /// (an active skill).
    pub session_named: bool,
    /// Which tools beyond the static catalog the scope reaches.
    pub workspace_tools: WorkspaceTools,
    /// What narrowed `surface` below the daemon's profile, named in a denial of a tool the
    /// profile serves ("this gateway's allowlist"); `None`: the denial is left as it is.
    pub narrowed_by: Option<&'static str>,
    /// The mesh nodes the call came through, its originator first and the node that sent it
    /// here last (empty: it began on this node). A call this one makes on another node carries
    /// it on, so each hop decides under every node's grant.
    pub mesh_origin: Vec<Arc<str>>,
}

impl CallScope {
    /// A scope on `surface` for `caller`, known as `principal`, in its own named `session`.
    pub fn new(
        surface: vox_mcp_registry::ProfileSet,
        caller: Caller,
        principal: &str,
        session: &str,
    ) -> Self {
        CallScope {
            surface,
            caller,
            principal: principal.into(),
            agent: None,
            session: SessionKey::new(session),
            session_named: true,
            workspace_tools: WorkspaceTools::Off,
            narrowed_by: None,
            mesh_origin: Vec::new(),
        }
    }
    /// The caller is orchestrator agent `id` (its credential was checked): it is also the
    /// attention key, and it reaches no workspace tool.
    pub fn as_agent(mut self, id: &str) -> Self {
        self.principal = id.into();
        self.agent = Some(id.into());
        self.workspace_tools = WorkspaceTools::Off;
        self
    }
    /// Reaches workspace and skill tools as `w` says.
    pub fn with_workspace_tools(mut self, w: WorkspaceTools) -> Self {
        self.workspace_tools = w;
        self
    }
    /// The call came through the mesh nodes `chain` (originator first, sender last).
    pub fn via_mesh(mut self, chain: Vec<Arc<str>>) -> Self {
        self.mesh_origin = chain;
        self
    }
    /// `surface` is the profile narrowed by `by`, which a denial names.
    pub fn narrowed_by(mut self, by: &'static str) -> Self {
        self.narrowed_by = Some(by);
        self
    }
    /// The scope a model acting for this caller runs tools under (a chat's tool loop): the
    /// same caller, agent, session, workspace tools and gate, on the surface less a person's
    /// tools (operator and internal exposure). A model is not a person, whoever it acts for.
    #[must_use]
    pub fn for_model(&self) -> Self {
        let mut s = self.clone();
        s.surface = s.surface.public_only();
        s.narrowed_by = Some(
            "the surface of a model acting for its caller (a person's tools are not a model's)",
        );
        s
    }
    /// `session` covers everything this caller sends (a REST token without `X-Vox-Session`).
    pub fn unnamed_session(mut self) -> Self {
        self.session_named = false;
        self
    }
}

/// What a call changed in its session, reported to the transport that carries the session
/// (so `vox mcp` can carry it on to a restarted daemon without knowing which tool did it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct SessionEffect {
    /// The skill now active in the session (`None`: none).
    pub active_skill: Option<String>,
}

/// What the transport carrying a call gives it besides the scope: its cancellation signal and
/// where its progress, log messages, client requests and session effects go.
#[derive(Clone, Default)]
pub struct CallRun {
    /// Fires when the caller cancels or goes away.
    pub cancel: Cancel,
    /// Where progress, log messages, client requests and session effects go; `None` drops them.
    pub events: Option<Arc<dyn CallEvents>>,
    /// The caller asked for progress (an MCP `progressToken`).
    pub progress: bool,
    /// Messages below this level are dropped; `None` sends none.
    pub log_level: Option<LogLevel>,
}

impl CallRun {
    /// A run cancelled by `cancel`, with no sink.
    pub fn cancelled_by(cancel: Cancel) -> Self {
        CallRun {
            cancel,
            ..CallRun::default()
        }
    }
}

/// The call context a handler receives.
#[derive(Clone)]
pub struct CallCtx {
    scope: Arc<CallScope>,
    /// Fires when the caller cancels or goes away (or the call's deadline passes).
    pub cancel: Cancel,
    events: Option<Arc<dyn CallEvents>>,
    wants_progress: bool,
    /// Messages below this level are dropped; `None` sends none.
    log_level: Option<LogLevel>,
}

impl CallCtx {
    /// A call under `scope` with no progress or log sink and its own cancellation signal.
    pub fn new(scope: Arc<CallScope>) -> Self {
        Self::run(scope, CallRun::default())
    }
    /// A call under `scope`, carried by `run`.
    pub fn run(scope: Arc<CallScope>, run: CallRun) -> Self {
        CallCtx {
            scope,
            cancel: run.cancel,
            events: run.events,
            wants_progress: run.progress,
            log_level: run.log_level,
        }
    }
    /// The transport's part of this call, for a nested call that shares its cancellation and
    /// sinks.
    pub fn as_run(&self) -> CallRun {
        CallRun {
            cancel: self.cancel.clone(),
            events: self.events.clone(),
            progress: self.wants_progress,
            log_level: self.log_level,
        }
    }
    /// The scope the call runs under: the only thing a nested call may use to decide.
    pub fn scope(&self) -> &Arc<CallScope> {
        &self.scope
    }
    /// The caller's role and where it is.
    pub fn caller(&self) -> Caller {
        self.scope.caller
    }
    /// The attention and rate-limit key.
    pub fn principal(&self) -> &str {
        &self.scope.principal
    }
    /// The orchestrator agent calling, if the caller is one.
    pub fn acting_agent(&self) -> Option<&str> {
        self.scope.agent.as_deref()
    }
    /// The session the call belongs to.
    pub fn session(&self) -> &SessionKey {
        &self.scope.session
    }
    /// The same call under another scope (the agent path narrows it).
    pub(crate) fn with_scope(mut self, scope: Arc<CallScope>) -> Self {
        self.scope = scope;
        self
    }
    /// Tells the transport what the call changed in its session (sent even when the caller
    /// asked for no progress or logs: the transport carries the session on with it).
    pub fn session_changed(&self, effect: SessionEffect) {
        if let Some(ev) = &self.events {
            ev.session_changed(effect);
        }
    }
    /// Whether the caller asked for progress (handlers may skip counting otherwise).
    pub fn wants_progress(&self) -> bool {
        self.wants_progress && self.events.is_some()
    }
    /// Reports progress; nothing after cancellation (a cancelled call says nothing more).
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        if let Some(ev) = self.events.as_ref().filter(|_| self.wants_progress)
            && !self.cancel.is_cancelled()
        {
            ev.progress(Progress {
                progress,
                total,
                message,
            });
        }
    }
    /// Whether a message at `level` would be delivered.
    /// Asks the caller's client (`ask` with `params`) and waits for the answer: at most
    /// `timeout`, and not past the call's cancellation. It blocks the thread (on the runtime
    /// it runs under): call it from a blocking thread, as the tool interpreter runs on.
    pub fn ask_blocking(
        &self,
        ask: Ask,
        params: Value,
        timeout: std::time::Duration,
    ) -> Result<Value, AskError> {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return Err(AskError::Unsupported(
                "no runtime to wait for the client's answer on".into(),
            ));
        };
        rt.block_on(self.ask(ask, params, timeout))
    }

    /// [`Self::ask_blocking`] for async code (an upstream server's request relayed to the
    /// caller's client).
    pub async fn ask(
        &self,
        ask: Ask,
        params: Value,
        timeout: std::time::Duration,
    ) -> Result<Value, AskError> {
        let Some(ev) = &self.events else {
            return Err(AskError::Unsupported(format!(
                "this call has no client to send a {} request to",
                ask.capability()
            )));
        };
        let reply = ev.ask(ask, params).map_err(AskError::Unsupported)?;
        tokio::select! {
            r = reply => match r {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(why)) => Err(AskError::Failed(why)),
                Err(_) => Err(AskError::Failed("the client's answer was lost (its connection ended)".into())),
            },
            () = tokio::time::sleep(timeout) => Err(AskError::TimedOut),
            () = self.cancel.cancelled() => Err(AskError::Cancelled),
        }
    }

    /// Whether a log message at `level` would reach the caller (it has a sink and the level admits
    /// it).
    pub fn logs(&self, level: LogLevel) -> bool {
        self.events.is_some() && self.log_level.is_some_and(|min| level >= min)
    }
    /// Sends a log message from `logger` (the tool family) when the caller's level admits it.
    pub fn log(&self, level: LogLevel, logger: &str, data: impl Into<Value>) {
        if self.logs(level)
            && !self.cancel.is_cancelled()
            && let Some(ev) = &self.events
        {
            ev.log(LogMessage {
                level,
                logger: logger.to_owned(),
                data: data.into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn scope() -> Arc<CallScope> {
        Arc::new(CallScope::new(
            vox_mcp_registry::ProfileSet::dev(),
            Caller::LOCAL,
            "a",
            "s",
        ))
    }

    #[derive(Default)]
    struct Recorder(Mutex<Vec<String>>);
    impl CallEvents for Recorder {
        fn progress(&self, p: Progress) {
            self.0.lock().unwrap().push(format!("p{}", p.progress));
        }
        fn log(&self, m: LogMessage) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{:?}:{}", m.level, m.data));
        }
    }

    #[test]
    fn log_level_filters_and_cancellation_silences_a_call() {
        let rec = Arc::new(Recorder::default());
        let run = CallRun {
            events: Some(rec.clone()),
            progress: true,
            log_level: Some(LogLevel::Warning),
            ..CallRun::default()
        };
        let call = CallCtx::run(scope(), run);
        call.log(LogLevel::Info, "t", "quiet");
        call.log(LogLevel::Error, "t", "loud");
        call.progress(1.0, None, None);
        call.cancel.cancel();
        call.progress(2.0, None, None);
        call.log(LogLevel::Emergency, "t", "late");
        assert_eq!(*rec.0.lock().unwrap(), ["Error:\"loud\"", "p1"]);
    }

    #[test]
    fn no_progress_without_a_token_and_no_logs_without_a_level() {
        let rec = Arc::new(Recorder::default());
        let run = CallRun {
            events: Some(rec.clone()),
            ..CallRun::default()
        };
        let call = CallCtx::run(scope(), run);
        call.progress(1.0, Some(2.0), None);
        call.log(LogLevel::Emergency, "t", "x");
        assert!(rec.0.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn cancelled_wakes_a_waiter_registered_before_or_after() {
        let c = Cancel::new();
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.cancelled().await }
        });
        tokio::task::yield_now().await;
        c.cancel();
        waiter.await.unwrap();
        c.cancelled().await; // already cancelled: returns at once
        assert!(c.flag().load(Ordering::Relaxed));
    }
}
