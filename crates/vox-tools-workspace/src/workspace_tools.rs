//! Federated workspace tools and resources (`@tool` / `@mcp.resource` in `.vox` files), served
//! under `dev` only: dispatchable by name, advertised to clients that ask for them
//! (`VOX_MCP_WORKSPACE_TOOLS=1` in the client's environment, see
//! `vox_daemon::client::workspace_tools_requested`).

use serde_json::{Value, json};
use std::sync::{Arc, RwLock};
use vox_core::{CallCtx, LogLevel, ToolError};
use vox_workspace_mcp::{RefreshReport, Surface, WorkspaceMcpLoader};

/// The loader and the current surface (scanned on first use, then on refresh).
pub struct WorkspaceTools {
    loader: WorkspaceMcpLoader,
    surface: RwLock<Option<Scanned>>,
}

/// One scan's surface with its tool descriptors, built once per scan (a `tools/list` of
/// thousands of workspace tools must not rebuild them).
#[derive(Clone)]
struct Scanned {
    surface: Arc<Surface>,
    descriptors: Arc<Vec<Value>>,
}

impl Scanned {
    fn new(surface: Arc<Surface>) -> Self {
        let descriptors = surface
            .tools
            .values()
            .map(|t| {
                let mut meta = json!({"vox_source": "workspace", "vox_file": t.file});
                // A tool that uses something the interpreter does not run (a process, the
                // network, ...) is listed, and says why calling it fails.
                if let Some(why) = t.module.function(&t.name).and_then(|f| f.not_executable.clone()) {
                    meta["vox_not_executable"] = json!(why);
                }
                json!({
                    "name": t.name, "title": t.name, "description": t.description, "inputSchema": t.input_schema,
                    "annotations": {"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false},
                    "_meta": meta,
                })
            })
            .collect();
        Scanned {
            surface,
            descriptors: Arc::new(descriptors),
        }
    }
}

/// The `vox_` prefix belongs to the static catalog (and skill macro tools): a workspace tool
/// named `vox_*` is shadowed, so no workspace tool can pass for an infrastructure tool or match a
/// skill's `vox_*` allowlist pattern.
fn is_static(name: &str) -> bool {
    name.starts_with("vox_") || vox_mcp_registry::tool_by_name(name).is_some()
}

impl WorkspaceTools {
    /// Nothing is scanned until first use.
    pub fn new(root: std::path::PathBuf) -> Self {
        WorkspaceTools {
            loader: WorkspaceMcpLoader::new(root),
            surface: RwLock::new(None),
        }
    }

    fn scan(&self, progress: &dyn Fn(usize, usize)) -> Scanned {
        let s = self
            .loader
            .scan_observed(&is_static, progress)
            .unwrap_or_else(|e| Surface::unusable(&e));
        for sh in &s.report.shadowed {
            tracing::warn!(
                file = sh.file,
                "workspace name {} is shadowed: vox_* tool names and skill:// URIs are reserved",
                sh.name
            );
        }
        for d in s
            .report
            .duplicate_tools
            .iter()
            .chain(&s.report.duplicate_resources)
        {
            tracing::warn!(file = d.file, "duplicate workspace name {} skipped", d.name);
        }
        for e in &s.report.errors {
            tracing::warn!(file = e.file, "workspace file has errors: {}", e.diagnostic);
        }
        for f in &s.report.diagnostics {
            for d in f.diagnostics.iter().filter(|d| d.severity == "warning") {
                tracing::info!(
                    file = f.file,
                    "{}:{}: warning[{}]: {}",
                    d.line,
                    d.column,
                    d.code,
                    d.message
                );
            }
        }
        Scanned::new(Arc::new(s))
    }

    fn scanned(&self) -> Scanned {
        if let Some(s) = self
            .surface
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            return s.clone();
        }
        let mut slot = self.surface.write().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert_with(|| self.scan(&|_, _| {})).clone()
    }

    /// The current surface.
    pub fn surface(&self) -> Arc<Surface> {
        self.scanned().surface
    }

    /// Rescans, calling `progress(done, total)` per file; returns the report, whether what
    /// clients see changed (a name, a description, a schema, a file), and the resources whose
    /// file changed (their contents may read differently; new and removed ones are list
    /// changes).
    pub fn refresh(&self, progress: &dyn Fn(usize, usize)) -> Refreshed {
        let fresh = self.scan(progress);
        let mut slot = self.surface.write().unwrap_or_else(|p| p.into_inner());
        let changed = slot
            .as_ref()
            .is_none_or(|old| !old.surface.same_listing(&fresh.surface));
        // An unchanged file keeps its compiled module (the scan's cache): a new module means
        // its text changed.
        let updated = slot.as_ref().map_or_else(Vec::new, |old| {
            fresh
                .surface
                .resources
                .values()
                .filter(|r| {
                    old.surface
                        .resources
                        .get(&r.uri)
                        .is_some_and(|o| !Arc::ptr_eq(&o.module, &r.module))
                })
                .map(|r| r.uri.clone())
                .collect()
        });
        let report = fresh.surface.report.clone();
        *slot = Some(fresh);
        Refreshed {
            report,
            changed,
            updated,
        }
    }

    /// Tells clients what a refresh changed.
    pub fn announce(ctx: &vox_core::Ctx, r: &Refreshed) {
        if r.changed {
            ctx.notify_list_changed();
        }
        for uri in &r.updated {
            ctx.notify_resource_updated(uri);
        }
    }

    /// MCP tool descriptors of the federated tools, in name order (built once per scan).
    pub fn descriptors(&self) -> Arc<Vec<Value>> {
        self.scanned().descriptors
    }

    /// MCP resource descriptors, in URI order.
    pub fn resources(&self) -> Vec<Value> {
        self.surface()
            .resources
            .values()
            .map(|r| {
                let mut d = json!({"uri": r.uri, "name": r.name, "description": r.description,
                       "_meta": {"vox_source": "workspace", "vox_file": r.file}});
                if let Some(m) = r.mime_type {
                    d["mimeType"] = json!(m);
                }
                d
            })
            .collect()
    }

    /// Calls a federated tool under its budget (the surface file's, else the interpreter's
    /// default), stopping when the call is cancelled; each `print`ed line goes to the caller as
    /// an `info` log message from the logger named after the tool, and to the daemon's log.
    /// `None` if no such tool.
    pub fn call(&self, name: &str, args: &Value, call: &CallCtx) -> Option<vox_core::ToolOutcome> {
        let surface = self.surface();
        let tool = surface.tools.get(name)?;
        let printed = EventRelay::new(name, &tool.file, call);
        let sink = |line: &str| printed.line(line);
        let files = self.loader.fs();
        let opts = vox_lang::CallOptions {
            budget: tool.budget.budget,
            cancel: Some(call.cancel.flag()),
            log: Some(&sink),
            events: Some(&printed),
            workspace: Some(&files),
        };
        let out = tool.module.call_json(name, args, &opts);
        printed.finish();
        let out = out.map(|o| match o.value {
            Value::Array(blocks) if o.content => vox_core::ToolOutcome::Content(blocks),
            v => vox_core::ToolOutcome::Ok(v),
        });
        Some(out.unwrap_or_else(|e| {
            vox_core::ToolOutcome::Failed(match &e {
                vox_lang::CallError::Budget {
                    kind: vox_lang::BudgetKind::Cancelled,
                    ..
                } => ToolError::cancelled(format!("{name} was cancelled")),
                vox_lang::CallError::Budget { kind, .. } => {
                    let limit = tool
                        .budget
                        .describe(*kind)
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default();
                    // The message keeps the code first for people reading logs; clients read
                    // the detail.
                    let which = format!("{kind:?}").to_lowercase();
                    ToolError::unavailable(format!("{name}: budget_exceeded: {e}{limit}"))
                        .with_detail("budget_exceeded", Some(json!({"limit": which})))
                }
                _ if e.is_input_error() => ToolError::invalid_arguments(e.to_string()),
                _ if e.code() == "tool_error" => ToolError::failed(e.to_string()),
                _ => ToolError::unavailable(format!("{name}: {e}")),
            })
        }))
    }

    /// Reads a federated resource under its file's budget; `None` if no such URI.
    pub fn read(&self, uri: &str) -> Option<Result<vox_core::ResourceBody, ToolError>> {
        let surface = self.surface();
        // A plain resource, else the first template (in template order) the URI matches.
        let r = surface.resources.get(uri).or_else(|| {
            surface
                .templates
                .values()
                .find(|t| vox_lang::template::matches(&t.uri, uri).is_some())
        })?;
        let sink = |line: &str| {
            tracing::info!(target: "vox.workspace", resource = uri, file = r.file, "print: {}", clip(line));
        };
        let files = self.loader.fs();
        let opts = vox_lang::CallOptions {
            budget: r.budget.budget,
            log: Some(&sink),
            events: None,
            cancel: None,
            workspace: Some(&files),
        };
        Some(
            r.module
                .read_resource(uri, &opts)
                .map(|r| match (r.text, r.blob) {
                    (_, Some(blob)) => vox_core::ResourceBody::blob(blob, r.mime_type),
                    (text, None) => {
                        vox_core::ResourceBody::typed_text(text.unwrap_or_default(), r.mime_type)
                    }
                })
                .map_err(|e| ToolError::unavailable(format!("{uri}: {e}"))),
        )
    }
}

/// What a refresh found.
pub struct Refreshed {
    /// The loader's report: files scanned, tools found, problems.
    pub report: RefreshReport,
    /// What clients list changed.
    pub changed: bool,
    /// Resources whose source file changed.
    pub updated: Vec<String>,
}

/// Most `print`ed and `log`ged lines of one call sent to its caller; the rest are counted, and the count is
/// sent once the call ends (the daemon log gets every line).
pub const MAX_PRINTED_LINES: usize = 1_000;
/// Longest `print`ed line sent as is; longer ones are cut (a log frame must stay well under
/// the socket's 4 MiB line limit).
pub const MAX_PRINTED_CHARS: usize = 8_192;

/// A line cut to [`MAX_PRINTED_CHARS`] characters, saying how much was left out.
fn clip(line: &str) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(MAX_PRINTED_CHARS) {
        None => line.into(),
        Some((at, _)) => format!(
            "{}… ({} more bytes not shown)",
            &line[..at],
            line.len() - at
        )
        .into(),
    }
}

/// Forwards one call's `print`s and `log`s to its caller (MCP `notifications/message`, `print`
/// at level `info`, logger = the tool's name) and to the daemon's log, and its `progress` to
/// the caller when it asked for progress. At most [`MAX_PRINTED_LINES`] messages and as many
/// progress notifications are sent per call.
struct EventRelay<'a> {
    tool: &'a str,
    file: &'a str,
    call: &'a CallCtx,
    sent: std::sync::atomic::AtomicUsize,
    progressed: std::sync::atomic::AtomicUsize,
}

impl vox_lang::ToolEvents for EventRelay<'_> {
    fn log(&self, level: &str, message: &str) {
        let message = clip(message);
        tracing::info!(target: "vox.workspace", tool = self.tool, file = self.file, "log {level}: {message}");
        let Ok(level) = serde_json::from_value::<LogLevel>(json!(level)) else {
            return;
        };
        if self.call.logs(level)
            && self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < MAX_PRINTED_LINES
        {
            self.call.log(level, self.tool, message.into_owned());
        }
    }

    fn ask(
        &self,
        kind: vox_lang::AskKind,
        params: Value,
        timeout: std::time::Duration,
    ) -> Result<Value, vox_lang::AskFailure> {
        use vox_lang::AskFailure as F;
        let ask = match kind {
            vox_lang::AskKind::Elicit => vox_core::Ask::Elicit,
            vox_lang::AskKind::Sample => vox_core::Ask::Sample,
        };
        tracing::info!(target: "vox.workspace", tool = self.tool, file = self.file, "asks the client ({})", ask.capability());
        self.call
            .ask_blocking(ask, params, timeout)
            .map_err(|e| match e {
                vox_core::AskError::Unsupported(w) => F::Unsupported(w),
                vox_core::AskError::Failed(w) => F::Failed(w),
                vox_core::AskError::TimedOut => F::TimedOut,
                vox_core::AskError::Cancelled => F::Cancelled,
            })
    }

    fn progress(&self, done: f64, total: Option<f64>, message: Option<&str>) {
        if self
            .progressed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            < MAX_PRINTED_LINES
        {
            self.call
                .progress(done, total, message.map(|m| clip(m).into_owned()));
        }
    }
}

impl<'a> EventRelay<'a> {
    fn new(tool: &'a str, file: &'a str, call: &'a CallCtx) -> Self {
        EventRelay {
            tool,
            file,
            call,
            sent: std::sync::atomic::AtomicUsize::new(0),
            progressed: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn line(&self, line: &str) {
        let line = clip(line);
        tracing::info!(target: "vox.workspace", tool = self.tool, file = self.file, "print: {line}");
        if !self.call.logs(LogLevel::Info) {
            return;
        }
        let n = self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n < MAX_PRINTED_LINES {
            self.call.log(LogLevel::Info, self.tool, line.into_owned());
        }
    }

    /// Says how many lines were not sent, if any.
    fn finish(&self) {
        let n = self.sent.load(std::sync::atomic::Ordering::Relaxed);
        if n > MAX_PRINTED_LINES {
            self.call.log(
                LogLevel::Warning,
                self.tool,
                format!(
                    "{} more printed or logged lines of this call were not sent (at most {MAX_PRINTED_LINES} are); the daemon log has them all",
                    n - MAX_PRINTED_LINES
                ),
            );
        }
    }
}

/// How long the workspace must be quiet after a `.vox` change before the automatic refresh.
const DEBOUNCE: std::time::Duration = std::time::Duration::from_millis(250);

fn relevant(path: &std::path::Path, root: &std::path::Path) -> bool {
    let Ok(rel) = path.strip_prefix(root) else {
        return false;
    };
    let skipped = rel.components().any(|c| {
        matches!(
            c.as_os_str().to_str(),
            Some(".git" | ".vox" | "target" | "node_modules")
        )
    });
    !skipped
        && (rel.extension().is_some_and(|e| e == "vox")
            || rel == std::path::Path::new(vox_workspace_mcp::SURFACE_FILE))
}

/// Whether an event can change what a scan finds. Opening and reading a file (which every
/// scan does) and metadata changes cannot; reacting to them made an idle daemon rescan
/// itself forever.
fn changes_content(kind: &notify::EventKind) -> bool {
    use notify::EventKind;
    use notify::event::ModifyKind;
    match kind {
        EventKind::Create(_) | EventKind::Remove(_) => true,
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        EventKind::Modify(_) => true,
        EventKind::Access(_) | EventKind::Any | EventKind::Other => false,
    }
}

/// Watches the workspace (`notify`) and refreshes the surface after changes settle, notifying
/// clients when the served set changed. `VOX_WORKSPACE_WATCH=0` turns it off.
pub fn watch(ctx: Arc<vox_core::Ctx>) {
    use notify::Watcher;
    if vox_core::env::flag("VOX_WORKSPACE_WATCH") == Ok(Some(false))
        || ctx.get::<Arc<WorkspaceTools>>().is_none()
    {
        return;
    }
    let root = ctx.workspace.root.clone();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let filter_root = root.clone();
    let handler = move |res: notify::Result<notify::Event>| {
        if let Ok(ev) = res
            && changes_content(&ev.kind)
            && ev.paths.iter().any(|p| relevant(p, &filter_root))
        {
            let _ = tx.send(());
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("workspace watch unavailable: {e}");
            return;
        }
    };
    if let Err(e) = watcher.watch(&root, notify::RecursiveMode::Recursive) {
        tracing::warn!("cannot watch {}: {e}", root.display());
        return;
    }
    std::thread::spawn(move || {
        let _keep = watcher;
        while rx.recv().is_ok() {
            // Debounce: wait until no change arrived for DEBOUNCE.
            while rx.recv_timeout(DEBOUNCE).is_ok() {}
            let Some(wt) = ctx.get::<Arc<WorkspaceTools>>() else {
                return;
            };
            let r = wt.refresh(&|_, _| {});
            tracing::info!(
                tools = r.report.tool_count,
                resources = r.report.resource_count,
                changed = r.changed,
                "workspace tools refreshed"
            );
            WorkspaceTools::announce(&ctx, &r);
        }
    });
}

impl vox_core::DynamicTools for WorkspaceTools {
    fn descriptors(&self, advertise_workspace: bool) -> Vec<Value> {
        if advertise_workspace {
            WorkspaceTools::descriptors(self).as_ref().clone()
        } else {
            vec![]
        }
    }
    fn has_tool(&self, name: &str) -> bool {
        self.surface().tools.contains_key(name)
    }
    fn call(&self, name: &str, args: &Value, call: &CallCtx) -> Option<vox_core::ToolOutcome> {
        WorkspaceTools::call(self, name, args, call)
    }
    fn resources(&self) -> Vec<Value> {
        WorkspaceTools::resources(self)
    }
    fn read(&self, uri: &str) -> Option<Result<vox_core::ResourceBody, ToolError>> {
        WorkspaceTools::read(self, uri)
    }
    fn resource_templates(&self) -> Vec<Value> {
        self.surface()
            .templates
            .values()
            .map(|r| {
                json!({"uriTemplate": r.uri, "name": r.name, "description": r.description,
                       "_meta": {"vox_source": "workspace", "vox_file": r.file}})
            })
            .collect()
    }
    fn prompts(&self) -> Vec<Value> {
        self.surface()
            .prompts
            .values()
            .map(|p| {
                let arguments: Vec<Value> = p
                    .arguments
                    .iter()
                    .map(|(name, required)| json!({"name": name, "required": required}))
                    .collect();
                json!({"name": p.name, "description": p.description, "arguments": arguments,
                       "_meta": {"vox_source": "workspace", "vox_file": p.file}})
            })
            .collect()
    }
    fn complete(
        &self,
        prompt: bool,
        name: &str,
        argument: &str,
        value: &str,
    ) -> Option<Result<Value, ToolError>> {
        let surface = self.surface();
        let (module, budget, function) = if prompt {
            let p = surface.prompts.get(name)?;
            (p.module.clone(), p.budget.budget, p.name.clone())
        } else {
            let t = surface.templates.get(name)?;
            (t.module.clone(), t.budget.budget, t.name.clone())
        };
        let files = self.loader.fs();
        let opts = vox_lang::CallOptions {
            budget,
            workspace: Some(&files),
            ..Default::default()
        };
        Some(
            module
                .complete(&function, argument, value, &opts)
                .map(|mut values| {
                    // MCP allows at most 100 values per answer.
                    let total = values.len();
                    values.truncate(100);
                    json!({"values": values, "total": total, "hasMore": total > 100})
                })
                .map_err(|e| ToolError::unavailable(format!("completing {argument}: {e}"))),
        )
    }
    fn get_prompt(&self, name: &str, args: &Value) -> Option<Result<Value, ToolError>> {
        let surface = self.surface();
        let p = surface.prompts.get(name)?;
        let files = self.loader.fs();
        let opts = vox_lang::CallOptions {
            budget: p.budget.budget,
            workspace: Some(&files),
            ..Default::default()
        };
        Some(
            p.module
                .get_prompt(name, args, &opts)
                .map(|messages| json!({"description": p.description, "messages": messages}))
                .map_err(|e| {
                    if e.is_input_error() {
                        ToolError::invalid_arguments(format!("prompt {name}: {e}"))
                    } else {
                        ToolError::unavailable(format!("prompt {name}: {e}"))
                    }
                }),
        )
    }
}
