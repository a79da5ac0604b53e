//! The compiler subsystem's tools: `vox_check`, `vox_validate_source`, `vox_test`,
//! `vox_grammar`, `vox_compiler_introspect`. The bodies live in `vox_lang::tools`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};
use vox_core::CallCtx;
use vox_core::HandlerEntry;
use vox_core::family::{blocking, typed};
use vox_core::{Ctx, ToolError};
use vox_lang::tools::{FileCheck, Introspection, PathCheck, TestRun, Validation};

/// Source text is bounded like any other argument; files are bounded by vox-lang itself.
const MAX_SOURCE: usize = 1024 * 1024;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Input {
    /// A workspace-relative .vox file or directory (give `path` or `source`).
    path: Option<String>,
    /// Source text to use instead of a file.
    source: Option<String>,
    /// File name to report for `source` (default `input.vox`).
    name: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SourceInput {
    /// The source text.
    source: String,
    /// File name to report (default `input.vox`).
    name: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

enum Target {
    Path(PathBuf),
    Source(String, String),
}

fn workspace_path(ctx: &Ctx, rel: &str) -> Result<PathBuf, ToolError> {
    let p = Path::new(rel);
    if rel.is_empty()
        || p.is_absolute()
        || p.components().any(|c| matches!(c, Component::ParentDir))
    {
        return Err(ToolError::invalid_arguments(format!(
            "`path` must be relative and stay inside the workspace: `{rel}`"
        )));
    }
    let full = ctx.workspace.root.join(p);
    // A symlink inside the workspace must not lead the tool outside it.
    let real = full
        .canonicalize()
        .map_err(|e| ToolError::not_found(format!("cannot read `{rel}`: {e}")))?;
    if !real.starts_with(&ctx.workspace.root) {
        return Err(ToolError::invalid_arguments(format!(
            "`{rel}` resolves outside the workspace"
        )));
    }
    Ok(real)
}

fn target(ctx: &Ctx, i: Input) -> Result<Target, ToolError> {
    match (i.path, i.source) {
        (Some(p), None) => Ok(Target::Path(workspace_path(ctx, &p)?)),
        (None, Some(s)) => {
            if s.len() > MAX_SOURCE {
                return Err(ToolError::invalid_arguments(format!(
                    "`source` is {} bytes; the limit is {MAX_SOURCE}",
                    s.len()
                )));
            }
            Ok(Target::Source(
                i.name.unwrap_or_else(|| "input.vox".into()),
                s,
            ))
        }
        _ => Err(ToolError::invalid_arguments(
            "give exactly one of `path` or `source`",
        )),
    }
}

fn lang_err(e: vox_lang::tools::ToolError) -> ToolError {
    match e {
        vox_lang::tools::ToolError::NoVoxFiles(_) => ToolError::not_found(e.to_string()),
        vox_lang::tools::ToolError::Io { .. } => ToolError::not_found(e.to_string()),
    }
}

/// Imports resolve inside the workspace: next to the importing file, then at the root.
fn loader(ctx: &Ctx) -> vox_lang::FsLoader {
    vox_lang::FsLoader::new(ctx.workspace.root.clone())
}

/// `vox_check` of a path (totals and files) or of source text (one file's report).
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
enum Check {
    Path(PathCheck),
    Source(FileCheck),
}

fn check(ctx: &Ctx, i: Input) -> Result<Check, ToolError> {
    let loader = loader(ctx);
    match target(ctx, i)? {
        Target::Path(p) => vox_lang::tools::check_path_report(&p, &loader)
            .map(Check::Path)
            .map_err(lang_err),
        Target::Source(name, s) => Ok(Check::Source(vox_lang::tools::check_source_report(
            &name, &s, &loader,
        ))),
    }
}

fn validate(ctx: &Ctx, i: SourceInput) -> Result<Validation, ToolError> {
    if i.source.len() > MAX_SOURCE {
        return Err(ToolError::invalid_arguments(format!(
            "`source` is {} bytes; the limit is {MAX_SOURCE}",
            i.source.len()
        )));
    }
    Ok(vox_lang::tools::validate_source_report(
        i.name.as_deref().unwrap_or("input.vox"),
        &i.source,
        &loader(ctx),
    ))
}

fn test(ctx: &Ctx, call: &CallCtx, i: Input) -> Result<TestRun, ToolError> {
    let loader = loader(ctx);
    let cancel = Some(call.cancel.flag());
    match target(ctx, i)? {
        Target::Path(p) => vox_lang::tools::test_path_report(&p, &loader, cancel).map_err(lang_err),
        Target::Source(name, s) => Ok(vox_lang::tools::test_source_report(
            &name, &s, &loader, cancel,
        )),
    }
}

#[derive(Serialize, JsonSchema)]
struct Grammar {
    /// The accepted syntax, as Markdown.
    grammar: &'static str,
}

fn grammar(_ctx: &Ctx, _a: NoArgs) -> Result<Grammar, ToolError> {
    Ok(Grammar {
        grammar: vox_lang::tools::grammar(),
    })
}

fn introspect(ctx: &Ctx, i: Input) -> Result<Introspection, ToolError> {
    let loader = loader(ctx);
    match target(ctx, i)? {
        Target::Path(p) => vox_lang::tools::introspect_path_report(&p, &loader).map_err(lang_err),
        Target::Source(name, s) => Ok(vox_lang::tools::introspect_source_report(
            &name, &s, &loader,
        )),
    }
}

pub fn family() -> vox_core::Family {
    vox_core::Family {
        name: "lang",
        handlers: handlers(),
        ..vox_core::Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_check", typed(check)),
        ("vox_validate_source", typed(validate)),
        ("vox_test", blocking(test)),
        ("vox_grammar", typed(grammar)),
        ("vox_compiler_introspect", typed(introspect)),
    ]
}
