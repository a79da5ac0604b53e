//! Bodies of the lang MCP tools (`vox_check`, `vox_validate_source`, `vox_test`, `vox_grammar`,
//! `vox_compiler_introspect`). Each takes a path or source text and returns JSON, so a handler
//! is a thin wrapper that picks arguments out of its input.

use crate::cli::collect_vox_files;
use crate::diag::DiagnosticJson;
use crate::diag::Severity;
use crate::hir::FnRole;
use crate::import::ModuleLoader;
use crate::module::{Analysis, CallOptions, HirSummary, TestOutcome, analyze_with};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value as J;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

/// Why a path-based tool could not run.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// Reading the path failed.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The path holds no `.vox` file.
    #[error("no .vox files under {0}")]
    NoVoxFiles(String),
}

impl ToolError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            ToolError::Io { .. } => "io_error",
            ToolError::NoVoxFiles(_) => "no_vox_files",
        }
    }
}

fn counts(a: &Analysis) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for d in &a.diagnostics {
        match d.severity() {
            Severity::Error => c.0 += 1,
            Severity::Warning => c.1 += 1,
            Severity::Info => c.2 += 1,
        }
    }
    c
}

/// One file's `vox_check` report.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct FileCheck {
    /// The file name.
    pub file: String,
    /// Whether it has no errors.
    pub ok: bool,
    /// Error diagnostics.
    pub errors: usize,
    /// Warning diagnostics.
    pub warnings: usize,
    /// Info diagnostics.
    pub infos: usize,
    /// Every diagnostic, in source order.
    pub diagnostics: Vec<DiagnosticJson>,
}

/// `vox_check` of a file or directory: totals and one report per file.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct PathCheck {
    /// Whether no file has errors.
    pub ok: bool,
    /// Error diagnostics in all files.
    pub errors: usize,
    /// Warning diagnostics in all files.
    pub warnings: usize,
    /// One report per `.vox` file.
    pub files: Vec<FileCheck>,
}

/// `vox_validate_source`: whether the text compiles, its errors, and what it declares.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Validation {
    /// Whether it compiles.
    pub valid: bool,
    /// Its error diagnostics.
    pub errors: Vec<DiagnosticJson>,
    /// Names of its `@tool` functions.
    pub tools: Vec<String>,
    /// Names of its `@mcp.resource` functions.
    pub resources: Vec<String>,
    /// Names of its `@test` functions.
    pub tests: Vec<String>,
}

/// One file's `vox_test` results.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct FileTests {
    /// The file name.
    pub file: String,
    /// Whether it compiled (its tests ran).
    pub compiled: bool,
    /// Why it did not compile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Vec<DiagnosticJson>>,
    /// Each test's outcome.
    pub tests: Vec<TestOutcome>,
}

/// `vox_test`: totals and per-file results.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct TestRun {
    /// Passed tests.
    pub passed: usize,
    /// Failed tests (a file that does not compile counts its declared tests, at least one).
    pub failed: usize,
    /// Per-file results.
    pub files: Vec<FileTests>,
}

/// `vox_compiler_introspect`: the HIR summary and the diagnostics.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Introspection {
    /// The HIR summary (its fields appear at the top level).
    #[serde(flatten)]
    pub hir: HirSummary,
    /// Every diagnostic of the file.
    pub diagnostics: Vec<DiagnosticJson>,
}

fn to_json<T: Serialize>(v: &T) -> J {
    serde_json::to_value(v).unwrap_or(J::Null)
}

fn report(a: &Analysis) -> FileCheck {
    let (errors, warnings, infos) = counts(a);
    FileCheck {
        file: a.source.name.clone(),
        ok: errors == 0,
        errors,
        warnings,
        infos,
        diagnostics: a.diagnostics_json(),
    }
}

/// `vox_check` on source text: diagnostics as JSON. Its imports load through `loader`, as if
/// the text were the file `name`.
pub fn check_source(name: &str, source: &str, loader: &dyn ModuleLoader) -> J {
    to_json(&check_source_report(name, source, loader))
}

/// [`check_source`], typed.
pub fn check_source_report(name: &str, source: &str, loader: &dyn ModuleLoader) -> FileCheck {
    report(&analyze_with(name, source.as_bytes(), loader))
}

fn read_files(path: &Path) -> Result<Vec<(String, Vec<u8>)>, ToolError> {
    let files = collect_vox_files(&[PathBuf::from(path)]).map_err(|source| ToolError::Io {
        path: path.display().to_string(),
        source,
    })?;
    if files.is_empty() {
        return Err(ToolError::NoVoxFiles(path.display().to_string()));
    }
    files
        .into_iter()
        .map(|f| {
            let name = f.display().to_string();
            std::fs::read(&f)
                .map(|b| (name.clone(), b))
                .map_err(|source| ToolError::Io { path: name, source })
        })
        .collect()
}

/// `vox_check` on a file or directory: one report per file, plus totals.
pub fn check_path(path: &Path, loader: &dyn ModuleLoader) -> Result<J, ToolError> {
    check_path_report(path, loader).map(|r| to_json(&r))
}

/// [`check_path`], typed.
pub fn check_path_report(path: &Path, loader: &dyn ModuleLoader) -> Result<PathCheck, ToolError> {
    let files: Vec<FileCheck> = read_files(path)?
        .iter()
        .map(|(name, bytes)| report(&analyze_with(name, bytes, loader)))
        .collect();
    let errors = files.iter().map(|r| r.errors).sum::<usize>();
    Ok(PathCheck {
        ok: errors == 0,
        errors,
        warnings: files.iter().map(|r| r.warnings).sum(),
        files,
    })
}

/// `vox_validate_source`: whether the text compiles, its errors, and what it declares.
pub fn validate_source(name: &str, source: &str, loader: &dyn ModuleLoader) -> J {
    to_json(&validate_source_report(name, source, loader))
}

/// [`validate_source`], typed.
pub fn validate_source_report(name: &str, source: &str, loader: &dyn ModuleLoader) -> Validation {
    let a = analyze_with(name, source.as_bytes(), loader);
    let errors: Vec<_> = a
        .diagnostics_json()
        .into_iter()
        .filter(|d| d.severity == Severity::Error)
        .collect();
    let names = |want: fn(&FnRole) -> bool| -> Vec<String> {
        a.functions()
            .iter()
            .filter(|f| want(&f.role))
            .map(|f| f.name.clone())
            .collect()
    };
    Validation {
        valid: errors.is_empty(),
        errors,
        tools: names(|r| matches!(r, FnRole::Tool { .. })),
        resources: names(|r| matches!(r, FnRole::Resource { .. })),
        tests: names(|r| matches!(r, FnRole::Test { .. })),
    }
}

fn test_report(
    name: &str,
    bytes: &[u8],
    loader: &dyn ModuleLoader,
    cancel: Option<&AtomicBool>,
) -> (FileTests, usize, usize) {
    let a = analyze_with(name, bytes, loader);
    let declared = a
        .functions()
        .iter()
        .filter(|f| matches!(f.role, FnRole::Test { .. }))
        .count();
    match a.into_module() {
        Ok(m) => {
            let opts = CallOptions {
                cancel,
                ..CallOptions::default()
            };
            let results = m.run_tests(&opts);
            let passed = results.iter().filter(|t| t.passed).count();
            let failed = results.iter().filter(|t| !t.passed && !t.skipped).count();
            let file = FileTests {
                file: name.to_owned(),
                compiled: true,
                diagnostics: None,
                tests: results,
            };
            (file, passed, failed)
        }
        Err(e) => {
            let file = FileTests {
                file: name.to_owned(),
                compiled: false,
                diagnostics: Some(crate::diag::to_json(&e.file, &e.diagnostics)),
                tests: vec![],
            };
            (file, 0, declared.max(1))
        }
    }
}

/// `vox_test` on source text: structured results. Tests stop early once `cancel` is set.
pub fn test_source(
    name: &str,
    source: &str,
    loader: &dyn ModuleLoader,
    cancel: Option<&AtomicBool>,
) -> J {
    to_json(&test_source_report(name, source, loader, cancel))
}

/// [`test_source`], typed.
pub fn test_source_report(
    name: &str,
    source: &str,
    loader: &dyn ModuleLoader,
    cancel: Option<&AtomicBool>,
) -> TestRun {
    let (file, passed, failed) = test_report(name, source.as_bytes(), loader, cancel);
    TestRun {
        passed,
        failed,
        files: vec![file],
    }
}

/// `vox_test` on a file or directory. Tests stop early once `cancel` is set.
pub fn test_path(
    path: &Path,
    loader: &dyn ModuleLoader,
    cancel: Option<&AtomicBool>,
) -> Result<J, ToolError> {
    test_path_report(path, loader, cancel).map(|r| to_json(&r))
}

/// [`test_path`], typed.
pub fn test_path_report(
    path: &Path,
    loader: &dyn ModuleLoader,
    cancel: Option<&AtomicBool>,
) -> Result<TestRun, ToolError> {
    let mut files = Vec::new();
    let (mut passed, mut failed) = (0, 0);
    for (name, bytes) in read_files(path)? {
        if cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
            break;
        }
        let (f, p, x) = test_report(&name, &bytes, loader, cancel);
        files.push(f);
        passed += p;
        failed += x;
    }
    Ok(TestRun {
        passed,
        failed,
        files,
    })
}

/// `vox_grammar`: the accepted syntax, as Markdown for agents.
pub fn grammar() -> &'static str {
    include_str!("grammar.md")
}

/// `vox_compiler_introspect` on source text: the HIR summary (signatures with input schemas,
/// types, constants, skipped items) and the diagnostics.
pub fn introspect_source(name: &str, source: &str, loader: &dyn ModuleLoader) -> J {
    to_json(&introspect_source_report(name, source, loader))
}

/// [`introspect_source`], typed.
pub fn introspect_source_report(
    name: &str,
    source: &str,
    loader: &dyn ModuleLoader,
) -> Introspection {
    let a = analyze_with(name, source.as_bytes(), loader);
    Introspection {
        hir: a.hir_summary(),
        diagnostics: a.diagnostics_json(),
    }
}

/// `vox_compiler_introspect` on one file.
pub fn introspect_path(path: &Path, loader: &dyn ModuleLoader) -> Result<J, ToolError> {
    introspect_path_report(path, loader).map(|r| to_json(&r))
}

/// [`introspect_path`], typed.
pub fn introspect_path_report(
    path: &Path,
    loader: &dyn ModuleLoader,
) -> Result<Introspection, ToolError> {
    let bytes = std::fs::read(path).map_err(|source| ToolError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let a = analyze_with(&path.display().to_string(), &bytes, loader);
    Ok(Introspection {
        hir: a.hir_summary(),
        diagnostics: a.diagnostics_json(),
    })
}
