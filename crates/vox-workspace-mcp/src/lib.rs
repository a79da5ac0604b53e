//! `WorkspaceMcpLoader`: scans a workspace's `.vox` files, compiles each once (cached by
//! content hash), and builds the federated surface of `@tool` functions and `@mcp.resource`
//! functions under the spec's collision rules:
//!
//! - a static catalog name wins: the workspace tool is *shadowed* (reported, never served);
//! - a second tool name or resource URI across files is skipped: the first file in sorted path
//!   order wins (reported);
//! - a file that fails to compile is reported with its diagnostic and the scan goes on.
//!
//! Every scanned file with any diagnostic is listed in [`RefreshReport::diagnostics`] (errors
//! and warnings in full, infos as one line each), whether or not it contributed tools.
//!
//! The scan globs and the interpreter budgets of the calls come from
//! `contracts/mcp/workspace-mcp-surface.v1.yaml` in the workspace when it exists, else
//! `**/*.vox` minus `target/`, `node_modules/`, `.vox/` and `.git/`, under the interpreter's
//! default budget. The file's keys ([`SurfaceConfig`], strict: an unknown key is an error):
//!
//! ```yaml
//! version: 1                      # required, must be 1
//! scan_globs: ["tools/**/*.vox"]  # required: workspace-relative globs of the files to load
//! exclude_globs: ["**/old/**"]    # optional: files matching one are not loaded
//! budgets:                        # optional: the interpreter's limits per call
//!   default:                      # every workspace tool and resource
//!     max_steps: 10000000         # evaluation steps, 1..=1000000000
//!     max_call_depth: 400         # nested calls, 1..=MAX_CALL_DEPTH_CAP (the native stack guard may stop sooner)
//!     max_wall_ms: 5000           # wall clock in ms, 1..=300000 (the call deadline, VOX_TOOL_TIMEOUT_MS, still applies)
//!     max_memory_bytes: 67108864  # bytes allocated over the call, 1..=1073741824
//!   files:                        # per file (its workspace-relative path), over `default`
//!     tools/heavy.vox: {max_steps: 100000000}
//!   tools:                        # per tool (its name), over its file's and `default`
//!     crunch: {max_wall_ms: 20000}
//! ```
//!
//! Each limit is resolved on its own: a tool's value, else its file's, else `default`'s, else
//! the interpreter's default ([`vox_lang::Budget::default`]). A value above its cap (or 0) is
//! a configuration error naming the key and the cap; a `files` or `tools` key that names no
//! scanned file or served tool is a warning in the report (`vox/workspace/budget-unused`).

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use vox_lang::Module;
use vox_lang::hir::FnRole;

/// Resource URIs a workspace may not declare (the skills' own).
pub const RESERVED_URI_PREFIX: &str = "skill://";

/// Where the surface file lives inside a workspace.
pub const SURFACE_FILE: &str = "contracts/mcp/workspace-mcp-surface.v1.yaml";

/// Largest `.vox` file the loader compiles.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Most evaluation steps a budget may allow.
pub const MAX_STEPS_CAP: u64 = 1_000_000_000;
/// Longest wall clock a budget may allow, in milliseconds (5 minutes).
pub const MAX_WALL_MS_CAP: u64 = 300_000;
/// Most bytes a budget may let a call allocate (1 GiB).
pub const MAX_MEMORY_BYTES_CAP: u64 = 1 << 30;
/// Deepest call nesting a budget may allow. Calls run on threads with 2 MiB of stack and the
/// interpreter's native stack guard (1 MiB, [`vox_lang::Budget::max_stack_bytes`]) ends a call
/// that would use more: measured, simple recursion reaches it after about 1,500 to 2,100 calls
/// in a release build (about 100 to 160 in a debug build), so a deeper limit would not be the
/// one that applies.
pub const MAX_CALL_DEPTH_CAP: u32 = 2_000;

/// `contracts/mcp/workspace-mcp-surface.v1.yaml`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SurfaceConfig {
    /// Schema version; must be 1.
    pub version: u32,
    /// Workspace-relative globs of the `.vox` files to load.
    pub scan_globs: Vec<String>,
    /// Globs of files not to load even when a scan glob matches them.
    #[serde(default)]
    pub exclude_globs: Vec<String>,
    /// The calls' interpreter budgets.
    #[serde(default)]
    pub budgets: Budgets,
}

/// `budgets:` of the surface file: limits for every call, per file, per tool.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// For every workspace tool and resource.
    #[serde(default)]
    pub default: BudgetLimits,
    /// By workspace-relative file path; over `default`.
    #[serde(default)]
    pub files: BTreeMap<String, BudgetLimits>,
    /// By tool name; over the file's and `default`.
    #[serde(default)]
    pub tools: BTreeMap<String, BudgetLimits>,
}

/// Some of the interpreter's limits; a limit left out comes from the next level.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct BudgetLimits {
    /// Evaluation steps.
    pub max_steps: Option<u64>,
    /// Nested function calls.
    pub max_call_depth: Option<u32>,
    /// Wall clock, in milliseconds.
    pub max_wall_ms: Option<u64>,
    /// Bytes allocated over the call (cumulative, approximate).
    pub max_memory_bytes: Option<u64>,
}

impl BudgetLimits {
    /// Refuses a 0 or a value above its cap, naming `key.field` and the cap.
    fn check(&self, key: &str) -> Result<(), String> {
        let fields: [(&str, Option<u64>, u64); 4] = [
            ("max_steps", self.max_steps, MAX_STEPS_CAP),
            (
                "max_call_depth",
                self.max_call_depth.map(u64::from),
                MAX_CALL_DEPTH_CAP.into(),
            ),
            ("max_wall_ms", self.max_wall_ms, MAX_WALL_MS_CAP),
            (
                "max_memory_bytes",
                self.max_memory_bytes,
                MAX_MEMORY_BYTES_CAP,
            ),
        ];
        for (field, value, cap) in fields {
            match value {
                Some(0) => return Err(format!("{key}.{field} must be at least 1")),
                Some(v) if v > cap => {
                    return Err(format!("{key}.{field} is {v}, above the cap of {cap}"));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The budget a call runs under, with where each limit came from (for error messages).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolBudget {
    /// The limits.
    pub budget: vox_lang::Budget,
    /// For `max_steps`, `max_call_depth`, `max_wall_ms`, `max_memory_bytes`: the key that
    /// set it (`budgets.tools.crunch`), or `None` for the interpreter's default.
    pub origin: [Option<String>; 4],
}

impl ToolBudget {
    /// Resolves each limit from the most specific level that sets it: `levels` is
    /// (key, limits) from the least to the most specific.
    fn resolve(levels: &[(String, Option<&BudgetLimits>)]) -> ToolBudget {
        let mut out = ToolBudget::default();
        for (key, limits) in levels {
            let Some(l) = limits else { continue };
            if let Some(v) = l.max_steps {
                out.budget.max_steps = v;
                out.origin[0] = Some(key.clone());
            }
            if let Some(v) = l.max_call_depth {
                out.budget.max_call_depth = v;
                out.origin[1] = Some(key.clone());
            }
            if let Some(v) = l.max_wall_ms {
                out.budget.max_wall = std::time::Duration::from_millis(v);
                out.origin[2] = Some(key.clone());
            }
            if let Some(v) = l.max_memory_bytes {
                out.budget.max_memory = usize::try_from(v).unwrap_or(usize::MAX);
                out.origin[3] = Some(key.clone());
            }
        }
        out
    }

    /// Which limit a budget error is about and where it was set: `max_steps = 1000, from
    /// budgets.tools.crunch in contracts/mcp/workspace-mcp-surface.v1.yaml`.
    pub fn describe(&self, kind: vox_lang::BudgetKind) -> Option<String> {
        use vox_lang::BudgetKind as K;
        let b = &self.budget;
        let (field, value, i) = match kind {
            K::Steps => ("max_steps", b.max_steps.to_string(), 0),
            K::Depth => (
                "max_call_depth",
                format!(
                    "{} (or the interpreter's native stack guard, which may stop deep recursion sooner)",
                    b.max_call_depth
                ),
                1,
            ),
            K::Time => ("max_wall_ms", b.max_wall.as_millis().to_string(), 2),
            K::Memory => ("max_memory_bytes", b.max_memory.to_string(), 3),
            K::Cancelled => return None,
        };
        Some(match &self.origin[i] {
            Some(key) => format!("{field} = {value}, from {key} in {SURFACE_FILE}"),
            None => format!(
                "{field} = {value}, the default; set budgets.tools.<name>.{field} in {SURFACE_FILE} to change it"
            ),
        })
    }
}

impl Default for SurfaceConfig {
    fn default() -> Self {
        SurfaceConfig {
            version: 1,
            scan_globs: vec!["**/*.vox".into()],
            exclude_globs: [
                "**/target/**",
                "**/node_modules/**",
                "**/.vox/**",
                "**/.git/**",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
            budgets: Budgets::default(),
        }
    }
}

/// A federated tool.
#[derive(Clone)]
pub struct WorkspaceTool {
    /// The tool name (the `@tool` function's name).
    pub name: String,
    /// The `@tool` description, else `<name> (from <file>)`.
    pub description: String,
    /// JSON Schema of the arguments, derived from the function's parameters.
    pub input_schema: Value,
    /// Workspace-relative path, `/`-separated.
    pub file: String,
    /// The compiled module the function is called in.
    pub module: Arc<Module>,
    /// The budget its calls run under.
    pub budget: ToolBudget,
}

/// A federated resource.
#[derive(Clone)]
pub struct WorkspaceResource {
    /// The URI (or URI template) the `@mcp.resource` declares.
    pub uri: String,
    /// The name of the function that produces it.
    pub name: String,
    /// The `@mcp.resource` description (empty when it has none).
    pub description: String,
    /// `text/plain` for a function that returns `str`; `None` for one that returns `Content`,
    /// whose type is known only when it is read.
    pub mime_type: Option<&'static str>,
    /// Workspace-relative path, `/`-separated.
    pub file: String,
    /// The compiled module the function is called in.
    pub module: Arc<Module>,
    /// The budget its reads run under (its file's, else the default).
    pub budget: ToolBudget,
}

/// A federated `@mcp.prompt` function.
#[derive(Clone)]
pub struct WorkspacePrompt {
    /// The prompt name (the `@mcp.prompt` function's name).
    pub name: String,
    /// The `@mcp.prompt` description, else `<name> (from <file>)`.
    pub description: String,
    /// Its arguments (the function's parameters): name, and whether it is required (no
    /// default, not an `Option`).
    pub arguments: Vec<(String, bool)>,
    /// Workspace-relative path, `/`-separated.
    pub file: String,
    /// The compiled module the function is called in.
    pub module: Arc<Module>,
    /// The budget its gets run under (its file's, else the default).
    pub budget: ToolBudget,
}

/// A name (or URI) that was not federated, and why.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct Skipped {
    /// The tool name or resource URI.
    pub name: String,
    /// Workspace-relative path of the file that declared it.
    pub file: String,
    /// The file that keeps the name (duplicates only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_from: Option<String>,
}

/// A file with an error: its first error, `file:line:column: code: message`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct FileError {
    /// Workspace-relative path, `/`-separated.
    pub file: String,
    /// The first error, `file:line:column: code: message`.
    pub diagnostic: String,
}

/// Most errors and warnings (and, separately, infos) listed per file; the counts are exact.
pub const MAX_LISTED_DIAGNOSTICS: usize = 100;

/// One error or warning of a file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct FileDiagnostic {
    /// Stable code (`vox/syntax/unexpected-token`).
    pub code: String,
    /// `error` or `warning`.
    pub severity: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (characters).
    pub column: usize,
    /// What is wrong, for people.
    pub message: String,
    /// How to fix it, when the compiler knows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

/// Every diagnostic of one scanned file.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct FileDiagnostics {
    /// Workspace-relative path.
    pub file: String,
    /// Whether the file's tools and resources were loaded.
    pub loaded: bool,
    /// How many errors the file has.
    pub errors: usize,
    /// How many warnings the file has.
    pub warnings: usize,
    /// How many infos the file has.
    pub infos: usize,
    /// Errors and warnings in source order (at most [`MAX_LISTED_DIAGNOSTICS`]).
    pub diagnostics: Vec<FileDiagnostic>,
    /// Infos (such as `vox/interp/not-executable`: a declaration the interpreter skips), one
    /// line each, `line:column code: message` (at most [`MAX_LISTED_DIAGNOSTICS`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// How many diagnostics and notes the caps left out.
    #[serde(skip_serializing_if = "is_zero")]
    pub omitted: usize,
    /// The first error, `file:line:column: code: message`, listed or not.
    #[serde(skip)]
    first_error: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl FileDiagnostics {
    fn new(file: &str, loaded: bool) -> Self {
        FileDiagnostics {
            file: file.to_owned(),
            loaded,
            errors: 0,
            warnings: 0,
            infos: 0,
            diagnostics: Vec::new(),
            notes: Vec::new(),
            omitted: 0,
            first_error: None,
        }
    }

    /// One diagnostic, counted, listed while under the cap.
    fn push(
        &mut self,
        code: &str,
        severity: vox_lang::Severity,
        (line, column): (usize, usize),
        message: &str,
        help: Option<&str>,
    ) {
        use vox_lang::Severity as S;
        match severity {
            S::Info => {
                self.infos += 1;
                if self.notes.len() < MAX_LISTED_DIAGNOSTICS {
                    self.notes
                        .push(format!("{line}:{column} {code}: {message}"));
                } else {
                    self.omitted += 1;
                }
                return;
            }
            S::Error => {
                self.errors += 1;
                if self.first_error.is_none() {
                    self.first_error =
                        Some(format!("{}:{line}:{column}: {code}: {message}", self.file));
                }
            }
            S::Warning => self.warnings += 1,
        }
        if self.diagnostics.len() < MAX_LISTED_DIAGNOSTICS {
            self.diagnostics.push(FileDiagnostic {
                code: code.to_owned(),
                severity: match severity {
                    S::Error => "error",
                    _ => "warning",
                }
                .to_owned(),
                line,
                column,
                message: message.to_owned(),
                help: help.map(str::to_owned),
            });
        } else {
            self.omitted += 1;
        }
    }

    /// A compiler's diagnostics of `file`.
    fn of(file: &str, loaded: bool, diags: &[vox_lang::DiagnosticJson]) -> Self {
        let mut out = FileDiagnostics::new(file, loaded);
        for d in diags {
            out.push(
                d.code,
                d.severity,
                (d.line, d.column),
                &d.message,
                d.help.as_deref(),
            );
        }
        out
    }

    /// The first error as `file:line:column: code: message` (the `errors` entry).
    fn first_error(&self) -> Option<FileError> {
        self.first_error.as_ref().map(|d| FileError {
            file: self.file.clone(),
            diagnostic: d.clone(),
        })
    }
}

/// What a scan found: the `vox_workspace_mcp_refresh` answer.
#[derive(Debug, Clone, Serialize, Default, PartialEq, Eq, schemars::JsonSchema)]
pub struct RefreshReport {
    /// How many workspace tools are served.
    pub tool_count: usize,
    /// How many resources (and resource templates) are served.
    pub resource_count: usize,
    /// How many prompts are served.
    pub prompt_count: usize,
    /// Names and URIs a static catalog tool or the skills' `skill://` scheme took; never served.
    pub shadowed: Vec<Skipped>,
    /// Tool names declared again in a later file (in path order); the first file keeps them.
    pub duplicate_tools: Vec<Skipped>,
    /// Resource URIs declared again in a later file; the first file keeps them.
    pub duplicate_resources: Vec<Skipped>,
    /// Prompt names declared again in a later file; the first file keeps them.
    pub duplicate_prompts: Vec<Skipped>,
    /// One entry per file with an error (its first error), whether or not it loaded.
    pub errors: Vec<FileError>,
    /// Every scanned file (and the surface file) with any diagnostic, in path order.
    pub diagnostics: Vec<FileDiagnostics>,
    /// How many `.vox` files the scan matched.
    pub files: usize,
    /// How many of them were compiled by this scan (the others came from the cache).
    pub compiled: usize,
}

/// The federated surface, in deterministic (name / URI) order.
#[derive(Clone, Default)]
pub struct Surface {
    /// The served tools, by name.
    pub tools: BTreeMap<String, WorkspaceTool>,
    /// The served resources, by URI.
    pub resources: BTreeMap<String, WorkspaceResource>,
    /// Resource templates (`@mcp.resource("notes://{id}")`), by template.
    pub templates: BTreeMap<String, WorkspaceResource>,
    /// The served prompts, by name.
    pub prompts: BTreeMap<String, WorkspacePrompt>,
    /// What the scan found, skipped and failed on.
    pub report: RefreshReport,
}

impl Surface {
    /// Whether two surfaces look the same to a client: the same tools with the same
    /// descriptions, schemas and files, and the same resources (decides `list_changed`).
    pub fn same_listing(&self, other: &Surface) -> bool {
        fn tool(t: &WorkspaceTool) -> (&str, &str, &serde_json::Value, &str) {
            (&t.name, &t.description, &t.input_schema, &t.file)
        }
        fn resource(r: &WorkspaceResource) -> (&str, &str, &str, &str) {
            (&r.uri, &r.name, &r.description, &r.file)
        }
        fn prompt(p: &WorkspacePrompt) -> (&str, &str, &[(String, bool)], &str) {
            (&p.name, &p.description, &p.arguments, &p.file)
        }
        self.tools
            .values()
            .map(tool)
            .eq(other.tools.values().map(tool))
            && self
                .resources
                .values()
                .map(resource)
                .eq(other.resources.values().map(resource))
            && self
                .templates
                .values()
                .map(resource)
                .eq(other.templates.values().map(resource))
            && self
                .prompts
                .values()
                .map(prompt)
                .eq(other.prompts.values().map(prompt))
    }
}

impl Surface {
    /// The surface of a workspace whose surface file is unusable: nothing served, the error
    /// reported (in `errors` and `diagnostics`) against the surface file.
    pub fn unusable(e: &LoaderError) -> Surface {
        let mut s = Surface::default();
        let LoaderError::Config { line, column, .. } = e;
        let mut d = FileDiagnostics::new(SURFACE_FILE, false);
        d.push(
            "vox/workspace/surface-config",
            vox_lang::Severity::Error,
            (line.unwrap_or(1), column.unwrap_or(1)),
            &e.to_string(),
            None,
        );
        s.report.errors.push(FileError {
            file: SURFACE_FILE.into(),
            diagnostic: e.to_string(),
        });
        s.report.diagnostics.push(d);
        s
    }
}

/// Why the surface file itself is unusable.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    /// The surface file does not parse, has an unknown key, or holds a value out of range.
    #[error("{path}{}: {message}", location(*line, *column))]
    Config {
        /// The surface file.
        path: PathBuf,
        /// What is wrong, naming the key and its cap where there is one.
        message: String,
        /// 1-based, where known.
        line: Option<usize>,
        /// 1-based column (characters), where known.
        column: Option<usize>,
    },
}

fn location(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}

impl LoaderError {
    fn config(path: &Path, message: impl Into<String>) -> Self {
        LoaderError::Config {
            path: path.to_owned(),
            message: message.into(),
            line: None,
            column: None,
        }
    }
}

/// The 1-based line of the first line of `text` that declares `key` (`key:` or `"key":`),
/// to point a message about a key at it.
fn key_line(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start().trim_start_matches("- ");
            [
                format!("{key}:"),
                format!("\"{key}\":"),
                format!("'{key}':"),
            ]
            .iter()
            .any(|k| l.starts_with(k.as_str()))
        })
        .map(|i| i + 1)
}

/// A module, with the content hash of its file and the fingerprint of the workspace's `.vox`
/// files when it was compiled (its imports are checked separately).
type Cached = (String, String, Arc<Module>);

/// Scans a workspace; keeps compiled modules by content hash between scans.
pub struct WorkspaceMcpLoader {
    root: PathBuf,
    cache: Mutex<HashMap<String, Cached>>,
}

fn globset(path: &Path, globs: &[String]) -> Result<GlobSet, LoaderError> {
    let mut b = GlobSetBuilder::new();
    for g in globs {
        b.add(
            Glob::new(g)
                .map_err(|e| LoaderError::config(path, format!("invalid glob `{g}`: {e}")))?,
        );
    }
    b.build()
        .map_err(|e| LoaderError::config(path, e.to_string()))
}

/// Why a scanned file gave no module: it could not be read, or its diagnostics.
enum NoModule {
    Unreadable(String),
    Compile(vox_lang::CompileError),
}

/// Parses and checks a surface file's text (`path` is for messages).
pub fn parse_config(path: &Path, text: &str) -> Result<SurfaceConfig, LoaderError> {
    let c: SurfaceConfig = serde_norway::from_str(text).map_err(|e| {
        let at = e.location();
        LoaderError::Config {
            path: path.to_owned(),
            message: e.to_string(),
            line: at.as_ref().map(|l| l.line()),
            column: at.as_ref().map(|l| l.column()),
        }
    })?;
    let at_key = |key: &str, message: String| LoaderError::Config {
        path: path.to_owned(),
        message,
        line: key_line(text, key),
        column: None,
    };
    if c.version != 1 {
        return Err(at_key("version", "version must be 1".into()));
    }
    c.budgets
        .default
        .check("budgets.default")
        .map_err(|m| at_key("default", m))?;
    for (level, map) in [("files", &c.budgets.files), ("tools", &c.budgets.tools)] {
        for (key, limits) in map {
            limits
                .check(&format!("budgets.{level}.{key}"))
                .map_err(|m| at_key(key, m))?;
        }
    }
    Ok(c)
}

impl WorkspaceMcpLoader {
    /// A loader for `root`; nothing is read until [`Self::scan`].
    pub fn new(root: PathBuf) -> Self {
        WorkspaceMcpLoader {
            root,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The surface file's settings, or the defaults when there is none.
    pub fn config(&self) -> Result<SurfaceConfig, LoaderError> {
        let path = self.root.join(SURFACE_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => parse_config(&path, &text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SurfaceConfig::default()),
            Err(e) => Err(LoaderError::config(&path, e.to_string())),
        }
    }

    /// The workspace-relative `.vox` files to load, sorted.
    fn files(&self, config: &SurfaceConfig) -> Result<Vec<String>, LoaderError> {
        let path = self.root.join(SURFACE_FILE);
        let include = globset(&path, &config.scan_globs)?;
        let exclude = globset(&path, &config.exclude_globs)?;
        let mut out = Vec::new();
        let walker = ignore::WalkBuilder::new(&self.root)
            .standard_filters(false)
            .filter_entry(|e| {
                !matches!(
                    e.file_name().to_str(),
                    Some(".git" | ".vox" | "target" | "node_modules")
                )
            })
            .build();
        for entry in walker.flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Ok(rel) = entry.path().strip_prefix(&self.root) else {
                continue;
            };
            let rel = rel.to_string_lossy().replace('\\', "/");
            if include.is_match(&rel) && !exclude.is_match(&rel) {
                out.push(rel);
            }
        }
        out.sort();
        Ok(out)
    }

    /// The workspace's files as tools may read them (`fs.read`, imports): confined to the
    /// root, regular files, at most [`MAX_FILE_BYTES`].
    pub fn fs(&self) -> vox_lang::FsLoader {
        vox_lang::FsLoader::new(self.root.clone()).with_max_file_bytes(MAX_FILE_BYTES)
    }

    /// Reads a scanned file and hashes it.
    fn read(&self, rel: &str) -> Result<(Vec<u8>, String), String> {
        let bytes = self.fs().read_file(rel).map_err(|e| match e {
            vox_lang::import::LoadError::Refused(m) => m,
            vox_lang::import::LoadError::NotFound { .. } => "cannot read: not found".into(),
        })?;
        let hash = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok((bytes, hash))
    }

    /// Compiles `rel` unless it is cached and nothing it may import has changed: a module
    /// with imports is compiled again when any scanned `.vox` file changed (`fingerprint`),
    /// since a file an import did not find may have appeared, and when a file it loaded
    /// (scanned or not) reads differently.
    fn module(
        &self,
        rel: &str,
        (bytes, hash): &(Vec<u8>, String),
        (fingerprint, scanned): (&str, &[String]),
        compiled: &mut usize,
    ) -> Result<Arc<Module>, NoModule> {
        let cached = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(rel)
            .cloned();
        if let Some((h, f, m)) = cached
            && h == *hash
            && (m.imports().is_empty() || f == fingerprint)
            && self.imports_unchanged(&m, scanned)
        {
            return Ok(m);
        }
        *compiled += 1;
        let m = Module::compile_partial_with(rel, bytes, &self.fs())
            .map(Arc::new)
            .map_err(NoModule::Compile)?;
        // Only modules are cached: a file that fails may fail because of a file it imports, so
        // it is compiled again on the next scan.
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).insert(
            rel.to_owned(),
            (hash.clone(), fingerprint.to_owned(), m.clone()),
        );
        Ok(m)
    }

    /// Whether every file `m` imported still reads the same. Called only when the
    /// fingerprint of the scanned files is unchanged, so only imported files the scan does not
    /// cover (`scanned`, sorted) are read again, with the loader's checks.
    fn imports_unchanged(&self, m: &Module, scanned: &[String]) -> bool {
        let fs = self.fs();
        m.imported_files()
            .iter()
            .filter(|f| scanned.binary_search(&f.source.name).is_err())
            .all(|f| {
                fs.read_file(&f.source.name)
                    .is_ok_and(|b| vox_lang::decode_source(&b).0 == f.source.text)
            })
    }

    /// Scans and applies the collision rules. `is_static` says whether a name belongs to the
    /// static catalog (which always wins).
    pub fn scan(&self, is_static: &dyn Fn(&str) -> bool) -> Result<Surface, LoaderError> {
        self.scan_observed(is_static, &|_, _| {})
    }

    /// [`Self::scan`], calling `progress(done, total)` as files are compiled.
    pub fn scan_observed(
        &self,
        is_static: &dyn Fn(&str) -> bool,
        progress: &dyn Fn(usize, usize),
    ) -> Result<Surface, LoaderError> {
        let config = self.config()?;
        let files = self.files(&config)?;
        let mut s = Surface::default();
        s.report.files = files.len();
        let read: Vec<Result<(Vec<u8>, String), String>> =
            files.iter().map(|rel| self.read(rel)).collect();
        let mut fingerprint = Sha256::new();
        for (rel, r) in files.iter().zip(&read) {
            fingerprint.update(rel.as_bytes());
            fingerprint.update([0]);
            fingerprint.update(r.as_ref().map_or("-", |(_, h)| h.as_str()).as_bytes());
            fingerprint.update([b'\n']);
        }
        let fingerprint: String = fingerprint
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let budget = |file: &str, tool: Option<&str>| {
            let b = &config.budgets;
            let mut levels = vec![
                ("budgets.default".to_owned(), Some(&b.default)),
                (format!("budgets.files.{file}"), b.files.get(file)),
            ];
            if let Some(t) = tool {
                levels.push((format!("budgets.tools.{t}"), b.tools.get(t)));
            }
            ToolBudget::resolve(&levels)
        };
        for (done, (rel, r)) in files.iter().zip(&read).enumerate() {
            progress(done, files.len());
            let got = r
                .as_ref()
                .map_err(|m| NoModule::Unreadable(m.clone()))
                .and_then(|r| self.module(rel, r, (&fingerprint, &files), &mut s.report.compiled));
            let diags = match &got {
                Ok(m) => FileDiagnostics::of(
                    rel,
                    true,
                    &vox_lang::diag::to_json(m.source(), m.diagnostics()),
                ),
                Err(NoModule::Compile(e)) => FileDiagnostics::of(
                    rel,
                    false,
                    &vox_lang::diag::to_json(&e.file, &e.diagnostics),
                ),
                Err(NoModule::Unreadable(m)) => {
                    let mut d = FileDiagnostics::new(rel, false);
                    d.push(
                        "vox/workspace/unreadable",
                        vox_lang::Severity::Error,
                        (1, 1),
                        m,
                        None,
                    );
                    d
                }
            };
            if let Some(e) = diags.first_error() {
                s.report.errors.push(e);
            } else if got.is_err() {
                s.report.errors.push(FileError {
                    file: rel.clone(),
                    diagnostic: format!("{rel}: does not compile"),
                });
            }
            if diags.errors + diags.warnings + diags.infos > 0 {
                s.report.diagnostics.push(diags);
            }
            let Ok(module) = got else { continue };
            for f in module.tools() {
                let name = f.name.clone();
                if is_static(&name) {
                    s.report.shadowed.push(Skipped {
                        name,
                        file: rel.clone(),
                        kept_from: None,
                    });
                    continue;
                }
                if let Some(first) = s.tools.get(&name) {
                    s.report.duplicate_tools.push(Skipped {
                        name,
                        file: rel.clone(),
                        kept_from: Some(first.file.clone()),
                    });
                    continue;
                }
                let description = match &f.role {
                    FnRole::Tool {
                        description: Some(d),
                        ..
                    } => d.clone(),
                    _ => format!("{name} (from {rel})"),
                };
                let input_schema = module
                    .input_schema(&name)
                    .unwrap_or_else(|| serde_json::json!({"type": "object"}));
                s.tools.insert(
                    name.clone(),
                    WorkspaceTool {
                        budget: budget(rel, Some(&name)),
                        name,
                        description,
                        input_schema,
                        file: rel.clone(),
                        module: module.clone(),
                    },
                );
            }
            for f in module.resources() {
                let FnRole::Resource { uri, description } = &f.role else {
                    continue;
                };
                // `skill://` belongs to the installed skills, as `vox_*` names belong to the
                // catalog: a workspace file cannot stand in for a skill's instructions.
                if uri.starts_with(RESERVED_URI_PREFIX) {
                    s.report.shadowed.push(Skipped {
                        name: uri.clone(),
                        file: rel.clone(),
                        kept_from: None,
                    });
                    continue;
                }
                let into = if vox_lang::template::is_template(uri) {
                    &mut s.templates
                } else {
                    &mut s.resources
                };
                if let Some(first) = into.get(uri) {
                    s.report.duplicate_resources.push(Skipped {
                        name: uri.clone(),
                        file: rel.clone(),
                        kept_from: Some(first.file.clone()),
                    });
                    continue;
                }
                into.insert(
                    uri.clone(),
                    WorkspaceResource {
                        uri: uri.clone(),
                        name: f.name.clone(),
                        description: description.clone().unwrap_or_default(),
                        mime_type: (f.ret == vox_lang::hir::Ty::Str).then_some("text/plain"),
                        file: rel.clone(),
                        module: module.clone(),
                        budget: budget(rel, None),
                    },
                );
            }
            for f in module.prompts() {
                let name = f.name.clone();
                if let Some(first) = s.prompts.get(&name) {
                    s.report.duplicate_prompts.push(Skipped {
                        name,
                        file: rel.clone(),
                        kept_from: Some(first.file.clone()),
                    });
                    continue;
                }
                let description = match &f.role {
                    FnRole::Prompt {
                        description: Some(d),
                    } => d.clone(),
                    _ => format!("{name} (from {rel})"),
                };
                let arguments = f
                    .params
                    .iter()
                    .map(|p| {
                        let optional =
                            p.has_default || matches!(p.ty, vox_lang::hir::Ty::Option { .. });
                        (p.name.clone(), !optional)
                    })
                    .collect();
                s.prompts.insert(
                    name.clone(),
                    WorkspacePrompt {
                        budget: budget(rel, Some(&name)),
                        name,
                        description,
                        arguments,
                        file: rel.clone(),
                        module: module.clone(),
                    },
                );
            }
        }
        // Forget files that are gone so the cache does not grow with renames.
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|k, _| files.binary_search(k).is_ok());
        s.report.tool_count = s.tools.len();
        s.report.resource_count = s.resources.len() + s.templates.len();
        s.report.prompt_count = s.prompts.len();
        if let Some(d) = self.unused_budgets(&config, &files, &s) {
            let at = s
                .report
                .diagnostics
                .partition_point(|x| x.file.as_str() < SURFACE_FILE);
            s.report.diagnostics.insert(at, d);
        }
        progress(files.len(), files.len());
        Ok(s)
    }

    /// Warnings for `budgets.files` keys that name no scanned file and `budgets.tools` keys
    /// that name no served tool (a typo there would otherwise change nothing, silently).
    fn unused_budgets(
        &self,
        config: &SurfaceConfig,
        files: &[String],
        s: &Surface,
    ) -> Option<FileDiagnostics> {
        let text = std::fs::read_to_string(self.root.join(SURFACE_FILE)).unwrap_or_default();
        let mut d = FileDiagnostics::new(SURFACE_FILE, true);
        let files: BTreeSet<&str> = files.iter().map(String::as_str).collect();
        for key in config.budgets.files.keys() {
            if !files.contains(key.as_str()) {
                d.push(
                    "vox/workspace/budget-unused",
                    vox_lang::Severity::Warning,
                    (key_line(&text, key).unwrap_or(1), 1),
                    &format!("budgets.files.{key} names no scanned .vox file, so it applies to nothing"),
                    Some("keys of budgets.files are workspace-relative paths, such as tools/math.vox"),
                );
            }
        }
        for key in config.budgets.tools.keys() {
            if !s.tools.contains_key(key) {
                d.push(
                    "vox/workspace/budget-unused",
                    vox_lang::Severity::Warning,
                    (key_line(&text, key).unwrap_or(1), 1),
                    &format!("budgets.tools.{key} names no served workspace tool, so it applies to nothing"),
                    None,
                );
            }
        }
        (d.warnings > 0).then_some(d)
    }
}
