//! Bodies of the lang MCP tools (`vox_check`, `vox_validate_source`, `vox_test`, `vox_grammar`,
//! `vox_compiler_introspect`). Each takes a path or source text and returns JSON, so a handler
//! is a thin wrapper that picks arguments out of its input.

use crate::cli::collect_vox_files;
use crate::diag::Severity;
use crate::hir::FnRole;
use crate::import::ModuleLoader;
use crate::module::{Analysis, CallOptions, analyze_with};
use serde_json::{Value as J, json};
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

fn report(a: &Analysis) -> J {
    let (errors, warnings, infos) = counts(a);
    json!({
        "file": a.source.name,
        "ok": errors == 0,
        "errors": errors,
        "warnings": warnings,
        "infos": infos,
        "diagnostics": a.diagnostics_json(),
    })
}

/// `vox_check` on source text: diagnostics as JSON. Its imports load through `loader`, as if
/// the text were the file `name`.
pub fn check_source(name: &str, source: &str, loader: &dyn ModuleLoader) -> J {
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
    let reports: Vec<J> = read_files(path)?
        .iter()
        .map(|(name, bytes)| report(&analyze_with(name, bytes, loader)))
        .collect();
    let total = |k: &str| {
        reports
            .iter()
            .map(|r| r[k].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    Ok(json!({
        "ok": total("errors") == 0,
        "errors": total("errors"),
        "warnings": total("warnings"),
        "files": reports,
    }))
}

/// `vox_validate_source`: whether the text compiles, its errors, and what it declares.
pub fn validate_source(name: &str, source: &str, loader: &dyn ModuleLoader) -> J {
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
    json!({
        "valid": errors.is_empty(),
        "errors": errors,
        "tools": names(|r| matches!(r, FnRole::Tool { .. })),
        "resources": names(|r| matches!(r, FnRole::Resource { .. })),
        "tests": names(|r| matches!(r, FnRole::Test { .. })),
    })
}

fn test_report(
    name: &str,
    bytes: &[u8],
    loader: &dyn ModuleLoader,
    cancel: Option<&AtomicBool>,
) -> (J, usize, usize) {
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
            let failed = results.len() - passed;
            (
                json!({"file": name, "compiled": true, "tests": results}),
                passed,
                failed,
            )
        }
        Err(e) => {
            let diags = crate::diag::to_json(&e.file, &e.diagnostics);
            (
                json!({"file": name, "compiled": false, "diagnostics": diags, "tests": []}),
                0,
                declared.max(1),
            )
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
    let (file, passed, failed) = test_report(name, source.as_bytes(), loader, cancel);
    json!({"passed": passed, "failed": failed, "files": [file]})
}

/// `vox_test` on a file or directory. Tests stop early once `cancel` is set.
pub fn test_path(
    path: &Path,
    loader: &dyn ModuleLoader,
    cancel: Option<&AtomicBool>,
) -> Result<J, ToolError> {
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
    Ok(json!({"passed": passed, "failed": failed, "files": files}))
}

/// `vox_grammar`: the accepted syntax, as Markdown for agents.
pub fn grammar() -> &'static str {
    include_str!("grammar.md")
}

/// `vox_compiler_introspect` on source text: the HIR summary (signatures with input schemas,
/// types, constants, skipped items) and the diagnostics.
pub fn introspect_source(name: &str, source: &str, loader: &dyn ModuleLoader) -> J {
    let a = analyze_with(name, source.as_bytes(), loader);
    let mut hir = a.hir_json();
    if let J::Object(o) = &mut hir {
        o.insert("diagnostics".into(), json!(a.diagnostics_json()));
    }
    hir
}

/// `vox_compiler_introspect` on one file.
pub fn introspect_path(path: &Path, loader: &dyn ModuleLoader) -> Result<J, ToolError> {
    let bytes = std::fs::read(path).map_err(|source| ToolError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let a = analyze_with(&path.display().to_string(), &bytes, loader);
    let mut hir = a.hir_json();
    if let J::Object(o) = &mut hir {
        o.insert("diagnostics".into(), json!(a.diagnostics_json()));
    }
    Ok(hir)
}
