//! `vox_skill_*`: install, uninstall, list, info, search and use skills.

use crate::skills_state::{Instructions, Skills, instructions, macro_tool_name, skill_err};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use vox_core::CallCtx;
use vox_core::HandlerEntry;
use vox_core::family::{async_typed, blocking, run_blocking, typed};
use vox_core::{Ctx, ToolError};
use vox_skills::store::{Origin, SearchHit, Shadowed};
use vox_skills::{FrontMatterFormat, Skill};
use vox_tools_common::bounded;

fn skills(ctx: &Ctx) -> Result<&Skills, ToolError> {
    ctx.get::<Arc<Skills>>()
        .map(|s| s.as_ref())
        .ok_or_else(|| ToolError::unavailable("skills are not served under this profile"))
}

/// Skill resources (`skill://`), and under `dev` the macro tools `vox_skill_<id>`.
struct SkillSurface {
    skills: Arc<Skills>,
    macros: bool,
}

impl vox_core::DynamicTools for SkillSurface {
    fn descriptors(&self, _advertise_workspace: bool) -> Vec<Value> {
        if self.macros {
            self.skills.macro_descriptors()
        } else {
            vec![]
        }
    }
    fn has_tool(&self, name: &str) -> bool {
        self.macros && self.skills.has_macro(name)
    }
    fn call(
        &self,
        name: &str,
        args: &Value,
        _call: &vox_core::CallCtx,
    ) -> Option<vox_core::ToolOutcome> {
        self.macros
            .then(|| self.skills.call_macro(name, args))
            .flatten()
            .map(Into::into)
    }
    fn resources(&self) -> Vec<Value> {
        self.skills.resources()
    }
    fn read(&self, uri: &str) -> Option<Result<vox_core::ResourceBody, ToolError>> {
        self.skills.read(uri)
    }
    fn prompts(&self) -> Vec<Value> {
        self.skills.prompts()
    }
    fn get_prompt(&self, name: &str, args: &Value) -> Option<Result<Value, ToolError>> {
        self.skills.get_prompt(name, args)
    }
}

/// The session's active skill narrows every call it makes.
struct ActiveSkill(Arc<Skills>);

impl vox_core::SessionGuard for ActiveSkill {
    fn check(
        &self,
        session: &str,
        tool: &str,
        args: &Value,
    ) -> Result<(), vox_mcp_registry::Denial> {
        self.0.check(session, tool, args)
    }
    fn end_session(&self, session: &str) {
        self.0.end_session(session);
    }
    fn restore(
        &self,
        scope: &vox_core::CallScope,
        effect: &vox_core::SessionEffect,
    ) -> Result<(), ToolError> {
        match effect.active_skill.as_deref() {
            Some(id) => self.0.restore(&scope.session, &scope.principal, id),
            None => {
                self.0.activate(&scope.session, &scope.principal, None)?;
            }
        }
        Ok(())
    }
}

/// Skills are hydrated under `dev` and any profile that serves the skill tools; macro tools
/// exist under `dev` only.
fn hydrate(ctx: &mut Ctx) {
    let serves = ctx.profile.is_dev() || ctx.profile.tools().iter().any(|t| t.lane == "skills");
    if !serves {
        return;
    }
    let skills = Arc::new(Skills::hydrate(&ctx.workspace.root));
    ctx.insert(skills.clone());
    ctx.add_dynamic_tools(Arc::new(SkillSurface {
        skills: skills.clone(),
        macros: ctx.profile.is_dev(),
    }));
    ctx.add_session_guard(Arc::new(ActiveSkill(skills)));
}

/// A skill as tools show it.
#[derive(Serialize, JsonSchema)]
struct Summary {
    id: String,
    description: String,
    /// The tools the skill may use (exact names or trailing-`*` prefixes); empty means any.
    tools: Vec<String>,
    tags: Vec<String>,
    origin: Origin,
    /// Its directory relative to the workspace; null for a skill of another root.
    path: Option<String>,
    format: FrontMatterFormat,
    /// The name of its macro tool (served under `dev`).
    macro_tool: String,
}

/// A skill as tools show it. Its directory is given relative to the workspace (callers off this
/// machine learn nothing about the host's layout); skills from other roots show only their origin.
fn summary(ctx: &Ctx, s: &Skill) -> Summary {
    let path = s
        .dir
        .strip_prefix(&ctx.workspace.root)
        .ok()
        .map(|p| p.display().to_string());
    Summary {
        id: s.id.clone(),
        description: s.manifest.description.clone(),
        tools: s.manifest.tools.clone(),
        tags: s.manifest.tags.clone(),
        origin: s.origin,
        path,
        format: s.manifest.format,
        macro_tool: macro_tool_name(&s.id),
    }
}

#[derive(Serialize, JsonSchema)]
struct Installed {
    installed: Summary,
}

#[derive(Serialize, JsonSchema)]
struct Uninstalled {
    /// The id of the skill removed.
    uninstalled: String,
}

#[derive(Serialize, JsonSchema)]
struct List {
    skills: Vec<Summary>,
    /// Skill directories that did not load.
    errors: Vec<ListError>,
    /// Skill ids also found in a root of lower precedence (not served from there).
    shadowed: Vec<Shadowed>,
}

#[derive(Serialize, JsonSchema)]
struct ListError {
    path: String,
    message: String,
}

/// One skill in full.
#[derive(Serialize, JsonSchema)]
struct Info {
    #[serde(flatten)]
    summary: Summary,
    /// The skill's files, relative to its directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<Vec<String>>,
    /// Why its files could not be listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    files_error: Option<String>,
    license: Option<String>,
    compatibility: Option<String>,
    metadata: BTreeMap<String, String>,
    /// The Markdown instructions.
    instructions: String,
    /// Whether it is the active skill of this session.
    active: bool,
}

#[derive(Serialize, JsonSchema)]
struct Hits {
    hits: Vec<SearchHit>,
}

/// The skill now active (with its instructions), or null with nothing else.
#[derive(Serialize, JsonSchema)]
struct Activation {
    active: Option<String>,
    #[serde(flatten)]
    instructions: Option<Instructions>,
}

/// What a sandboxed command did.
#[derive(Serialize, JsonSchema)]
struct Run {
    skill: String,
    /// Exit status when the command exited.
    exit_code: Option<i32>,
    /// Signal number when it was killed by a signal.
    signal: Option<i32>,
    stdout: String,
    stderr: String,
    stdout_truncated: bool,
    stderr_truncated: bool,
    /// The limit that ended the run or cut its output: `wall`, `cpu`, `file_size`, `output`.
    limit: Option<&'static str>,
    duration_ms: u64,
    cpu_ms: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct InstallArgs {
    /// The skill directory (holding SKILL.md): relative to the workspace root, or absolute inside
    /// the workspace or a skill search root.
    path: String,
    /// Overwrite an installed skill with the same id.
    #[serde(default)]
    replace: bool,
}

fn install(ctx: &Ctx, a: InstallArgs) -> Result<Installed, ToolError> {
    bounded("path", &a.path, 4096)?;
    let skill = skills(ctx)?.install(&a.path, a.replace)?;
    ctx.notify_list_changed();
    Ok(Installed {
        installed: summary(ctx, &skill),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    /// The skill id (its directory name).
    id: String,
}

fn uninstall(ctx: &Ctx, a: IdArgs) -> Result<Uninstalled, ToolError> {
    bounded("id", &a.id, 64)?;
    skills(ctx)?.uninstall(&a.id)?;
    ctx.notify_list_changed();
    Ok(Uninstalled { uninstalled: a.id })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

fn list(ctx: &Ctx, _a: NoArgs) -> Result<List, ToolError> {
    let catalog = skills(ctx)?.catalog();
    Ok(List {
        skills: catalog.skills.values().map(|s| summary(ctx, s)).collect(),
        errors: catalog
            .errors
            .iter()
            .map(|e| ListError {
                path: e.path.clone(),
                message: e.to_string(),
            })
            .collect(),
        shadowed: catalog.shadowed.clone(),
    })
}

fn info(ctx: &Ctx, call: &CallCtx, a: IdArgs) -> Result<Info, ToolError> {
    bounded("id", &a.id, 64)?;
    let sk = skills(ctx)?;
    let catalog = sk.catalog();
    let s = catalog.get(&a.id).map_err(skill_err)?;
    // The same bounded walk install uses: sorted, no links followed, limits enforced.
    let (files, files_error) = match vox_skills::store::tree_files(&s.dir) {
        Ok(files) => (
            Some(files.iter().map(|f| f.display().to_string()).collect()),
            None,
        ),
        Err(e) => (None, Some(e.to_string())),
    };
    Ok(Info {
        summary: summary(ctx, s),
        files,
        files_error,
        license: s.manifest.license.clone(),
        compatibility: s.manifest.compatibility.clone(),
        metadata: s.manifest.metadata.clone(),
        instructions: s.manifest.body.clone(),
        active: sk.active(call.session()).is_some_and(|x| x.id == s.id),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Free text; BM25 over id, name, tags, description and instructions.
    query: String,
    /// Most hits (default 10, at most 100).
    limit: Option<usize>,
}

fn search(ctx: &Ctx, a: SearchArgs) -> Result<Hits, ToolError> {
    bounded("query", &a.query, 1000)?;
    let hits = skills(ctx)?
        .catalog()
        .search(&a.query, a.limit.unwrap_or(10))
        .map_err(skill_err)?;
    Ok(Hits { hits })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UseArgs {
    /// The skill to activate for this session; null (or absent) deactivates.
    id: Option<String>,
}

fn use_skill(ctx: &Ctx, call: &CallCtx, a: UseArgs) -> Result<Activation, ToolError> {
    if let Some(id) = &a.id {
        bounded("id", id, 64)?;
    }
    // Without a named session every request of one token would share one active skill, so
    // one client could restrict (or release) all the others.
    if !call.scope().session_named {
        return Err(ToolError::invalid_arguments(
            "vox_skill_use over HTTP needs a session: send an X-Vox-Session header (REST), use one WebSocket connection, or a 2025-era /mcp session",
        ));
    }
    let activation =
        match skills(ctx)?.activate(call.session(), call.principal(), a.id.as_deref())? {
            Some(s) => Activation {
                active: Some(s.id.clone()),
                instructions: Some(instructions(&s)),
            },
            None => Activation {
                active: None,
                instructions: None,
            },
        };
    call.session_changed(vox_core::SessionEffect {
        active_skill: activation.active.clone(),
    });
    Ok(activation)
}

/// Longest wall clock a caller may ask for: below the call deadline (`VOX_TOOL_TIMEOUT_MS`,
/// 30 s by default), so the sandbox, not the deadline, ends a long run and reports it.
const MAX_RUN_MS: u64 = 25_000;
/// Largest stdin accepted.
const MAX_STDIN_BYTES: usize = 1 << 20;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    /// The installed skill whose files the command runs beside.
    id: String,
    /// The command and its arguments; argv[0] is looked up in PATH or is a path inside the skill
    /// (for example `./scripts/check.sh`).
    command: Vec<String>,
    /// Text for the command's stdin.
    stdin: Option<String>,
    /// Wall clock in milliseconds (default 10,000, at most 25,000).
    timeout_ms: Option<u64>,
}

/// How often a running command reports progress (elapsed milliseconds of its wall clock).
const RUN_PROGRESS_EVERY: Duration = Duration::from_millis(500);

async fn run(ctx: Arc<Ctx>, call: CallCtx, a: RunArgs) -> Result<Run, ToolError> {
    bounded("id", &a.id, 64)?;
    if a.command.is_empty()
        || a.command.len() > 256
        || a.command.iter().map(String::len).sum::<usize>() > 64 * 1024
    {
        return Err(ToolError::invalid_arguments(
            "`command` must hold 1-256 arguments of at most 64 KiB in all",
        ));
    }
    if a.stdin.as_ref().is_some_and(|s| s.len() > MAX_STDIN_BYTES) {
        return Err(ToolError::invalid_arguments(format!(
            "`stdin` is larger than {MAX_STDIN_BYTES} bytes"
        )));
    }
    let timeout = a.timeout_ms.unwrap_or(10_000);
    if timeout == 0 || timeout > MAX_RUN_MS {
        return Err(ToolError::invalid_arguments(format!(
            "`timeout_ms` must be between 1 and {MAX_RUN_MS}"
        )));
    }
    let skill_dir = skills(&ctx)?
        .catalog()
        .get(&a.id)
        .map_err(skill_err)?
        .dir
        .clone();
    let id = a.id.clone();
    let sandboxed = {
        let call = call.clone();
        run_blocking(move || {
            let req = vox_sandbox::RunRequest {
                skill_dir: &skill_dir,
                argv: &a.command,
                stdin: a.stdin.as_deref().map(str::as_bytes),
                limits: vox_sandbox::Limits {
                    wall: Duration::from_millis(timeout),
                    max_output_bytes: 256 * 1024,
                    ..Default::default()
                },
                cancel: Some(call.cancel.flag()),
            };
            vox_sandbox::run(&req).map_err(|e| match e {
                vox_sandbox::SandboxError::Unsupported(m) => ToolError::unavailable(format!(
                    "refusing to run skill {} unconfined: {m}",
                    a.id
                )),
                vox_sandbox::SandboxError::InvalidRequest(m) => ToolError::invalid_arguments(m),
                other => ToolError::internal(other.to_string()),
            })
        })
    };
    tokio::pin!(sandboxed);
    let started = Instant::now();
    let mut tick = tokio::time::interval_at(
        tokio::time::Instant::now() + RUN_PROGRESS_EVERY,
        RUN_PROGRESS_EVERY,
    );
    let out = loop {
        tokio::select! {
            out = &mut sandboxed => break out?,
            _ = tick.tick(), if call.wants_progress() => {
                let ms = started.elapsed().as_millis() as f64;
                call.progress(ms, Some(timeout as f64), Some(format!("running for {:.1} s", ms / 1000.0)));
            }
        }
    };
    let limit = out.limit.map(|l| match l {
        vox_sandbox::LimitHit::Wall => "wall",
        vox_sandbox::LimitHit::Cpu => "cpu",
        vox_sandbox::LimitHit::FileSize => "file_size",
        vox_sandbox::LimitHit::Output => "output",
        vox_sandbox::LimitHit::Cancelled => "cancelled",
    });
    if out.limit == Some(vox_sandbox::LimitHit::Cancelled) {
        return Err(ToolError::cancelled(format!("skill {id} run cancelled")));
    }
    Ok(Run {
        skill: id,
        exit_code: out.exit_code,
        signal: out.signal,
        stdout: out.stdout,
        stderr: out.stderr,
        stdout_truncated: out.stdout_truncated,
        stderr_truncated: out.stderr_truncated,
        limit,
        duration_ms: out.duration_ms,
        cpu_ms: out.cpu_ms,
    })
}

pub fn family() -> vox_core::Family {
    vox_core::Family {
        name: "skills",
        handlers: handlers(),
        after_boot: Some(hydrate),
        ..vox_core::Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_skill_install", typed(install)),
        ("vox_skill_uninstall", typed(uninstall)),
        ("vox_skill_list", typed(list)),
        ("vox_skill_info", blocking(info)),
        ("vox_skill_search", typed(search)),
        ("vox_skill_use", blocking(use_skill)),
        ("vox_skill_run", async_typed(run)),
    ]
}
