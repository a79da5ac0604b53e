//! `vox check`, `vox run` and `vox test` as plain functions: the binary parses flags and hands
//! over its streams; each function returns the process exit code.

use crate::diag::Severity;
use crate::hir::FnRole;
use crate::import::FsLoader;
use crate::module::{CallError, CallOptions, Module, analyze_with};
use serde_json::{Value as J, json};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Collects `.vox` files: a file argument is taken as is, a directory is walked (sorted, hidden
/// directories and `target` skipped).
pub fn collect_vox_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, std::io::Error> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut out)?;
        } else {
            // Reading reports a missing file with its own error, so it is not checked here.
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), std::io::Error> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                walk(&path, out)?;
            }
        } else if name.ends_with(".vox") {
            out.push(path);
        }
    }
    Ok(())
}

/// The `.vox` files under `paths` (the current directory when none is given); a path that
/// cannot be read or a walk error is reported on `err` and gives `None`.
fn files_or_current_dir(paths: &[PathBuf], err: &mut dyn Write) -> Option<Vec<PathBuf>> {
    let default = [PathBuf::from(".")];
    let paths = if paths.is_empty() {
        &default[..]
    } else {
        paths
    };
    // A mistyped path is a usage error: said once, before anything runs, rather than counted
    // as one more file that failed (or, for a directory, as an empty set that passes).
    let mut unreadable = false;
    for p in paths {
        if let Err(e) = std::fs::metadata(p) {
            unreadable = true;
            let why = if e.kind() == std::io::ErrorKind::NotFound {
                "no such file or directory".to_owned()
            } else {
                e.to_string()
            };
            let _ = writeln!(err, "error: cannot read {}: {why}", display(p));
        }
    }
    if unreadable {
        return None;
    }
    match collect_vox_files(paths) {
        Ok(f) => Some(f),
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            None
        }
    }
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

/// `vox check [paths…] [--json]`: prints diagnostics (rustc-style text, or one JSON document)
/// for the `.vox` files under `paths` (default: the current directory), returns 1 when any file
/// has an error or cannot be read.
pub fn check(paths: &[PathBuf], json: bool, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let Some(files) = files_or_current_dir(paths, err) else {
        return 1;
    };
    let (mut errors, mut warnings, mut infos) = (0usize, 0usize, 0usize);
    let (mut declared, mut loaded, mut runnable) = (0usize, 0usize, 0usize);
    let mut failed = false;
    let mut reports = Vec::new();
    for f in &files {
        let bytes = match std::fs::read(f) {
            Ok(b) => b,
            Err(e) => {
                failed = true;
                let _ = writeln!(err, "error: cannot read {}: {e}", display(f));
                reports.push(json!({"file": display(f), "read_error": e.to_string()}));
                continue;
            }
        };
        let a = analyze_with(&display(f), &bytes, &FsLoader::for_file(f));
        for d in &a.diagnostics {
            match d.severity() {
                Severity::Error => errors += 1,
                Severity::Warning => warnings += 1,
                Severity::Info => infos += 1,
            }
        }
        if json {
            // What federation would serve: tools declared, those that load (a declaration
            // with an error is left out) and those the interpreter runs.
            let text = String::from_utf8_lossy(&bytes);
            let file_declared = crate::parser::declared_tools(&text);
            let diagnostics = a.diagnostics_json();
            let (file_loaded, file_runnable) = match a.into_partial_module() {
                Ok(m) => (
                    m.tools().count(),
                    m.tools().filter(|t| t.not_executable.is_none()).count(),
                ),
                Err(_) => (0, 0),
            };
            declared += file_declared;
            loaded += file_loaded;
            runnable += file_runnable;
            reports.push(json!({
                "file": display(f),
                "diagnostics": diagnostics,
                "tools": {"declared": file_declared, "loaded": file_loaded, "runnable": file_runnable},
            }));
        } else {
            let _ = write!(out, "{}", a.render());
        }
    }
    if json {
        let doc = json!({
            "files": reports,
            "errors": errors,
            "warnings": warnings,
            "infos": infos,
            "tools": {"declared": declared, "loaded": loaded, "runnable": runnable},
        });
        let _ = writeln!(out, "{doc}");
    } else {
        let _ = writeln!(
            out,
            "checked {} file(s): {errors} error(s), {warnings} warning(s), {infos} info(s)",
            files.len()
        );
    }
    if failed || errors > 0 { 1 } else { 0 }
}

fn load(file: &Path, err: &mut dyn Write) -> Option<Module> {
    let bytes = match std::fs::read(file) {
        Ok(b) => b,
        Err(e) => {
            let _ = writeln!(err, "error: cannot read {}: {e}", display(file));
            return None;
        }
    };
    match Module::compile_with(&display(file), &bytes, &FsLoader::for_file(file)) {
        Ok(m) => Some(m),
        Err(e) => {
            let _ = write!(err, "{}", e.render());
            let _ = writeln!(err, "error: {e}");
            None
        }
    }
}

/// `vox run <file> <fn> [--args '<json object>']`: prints the JSON result on `out` and returns
/// 0; a compile error, input error, tool error or run-time error goes to `err` with 1.
/// Printed lines go to `err` as well, so `out` holds only the result.
pub fn run(
    file: &Path,
    func: &str,
    args_json: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    let Some(module) = load(file, err) else {
        return 1;
    };
    let args: J = match args_json {
        None => J::Null,
        Some(text) => match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                let _ = writeln!(err, "error[invalid_input]: --args is not valid JSON: {e}");
                return 1;
            }
        },
    };
    match module.call_json(func, &args, &CallOptions::default()) {
        Ok(o) => {
            for line in &o.logs {
                let _ = writeln!(err, "{line}");
            }
            let _ = writeln!(out, "{}", o.value);
            0
        }
        Err(e) => {
            if let CallError::Tool { logs, .. } | CallError::Runtime { logs, .. } = &e {
                for line in logs {
                    let _ = writeln!(err, "{line}");
                }
            }
            let _ = writeln!(err, "error[{}]: {e}", e.code());
            1
        }
    }
}

/// `vox test [paths…]`: runs every `@test` function (default path: the current directory),
/// prints one line per test and the closing line `N passed, N failed`; returns 1 on any
/// failure. A file that does not compile counts as one failure per test it declares (at least
/// one).
pub fn test(paths: &[PathBuf], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let Some(files) = files_or_current_dir(paths, err) else {
        return 1;
    };
    let (mut passed, mut failed, mut skipped) = (0usize, 0usize, 0usize);
    for f in &files {
        let bytes = match std::fs::read(f) {
            Ok(b) => b,
            Err(e) => {
                let _ = writeln!(err, "error: cannot read {}: {e}", display(f));
                failed += 1;
                continue;
            }
        };
        let a = analyze_with(&display(f), &bytes, &FsLoader::for_file(f));
        let declared = a
            .functions()
            .iter()
            .filter(|f| matches!(f.role, FnRole::Test { .. }))
            .count();
        let module = match a.into_module() {
            Ok(m) => m,
            Err(e) => {
                let _ = write!(err, "{}", e.render());
                let _ = writeln!(out, "FAIL {}: does not compile", display(f));
                failed += declared.max(1);
                continue;
            }
        };
        for t in module.run_tests(&CallOptions::default()) {
            let label = t
                .label
                .as_ref()
                .map(|l| format!(" ({l})"))
                .unwrap_or_default();
            let verdict = if t.skipped {
                skipped += 1;
                "skipped: "
            } else if t.passed {
                passed += 1;
                "ok"
            } else {
                failed += 1;
                "FAILED: "
            };
            let why = if t.passed {
                ""
            } else {
                t.message.as_deref().unwrap_or("")
            };
            let _ = writeln!(
                out,
                "test {}::{}{label} ... {verdict}{why}",
                display(f),
                t.name
            );
            if !t.passed && !t.skipped {
                for line in &t.logs {
                    let _ = writeln!(out, "    | {line}");
                }
            }
        }
    }
    if skipped > 0 {
        let _ = writeln!(out, "{passed} passed, {failed} failed, {skipped} skipped");
    } else {
        let _ = writeln!(out, "{passed} passed, {failed} failed");
    }
    if failed > 0 { 1 } else { 0 }
}

/// `vox fmt [paths…] [--check]`: rewrites `.vox` files in their canonical layout (default path:
/// the current directory), or with `check` only lists the files that would change. Returns 1
/// when a file cannot be read or formatted, or (with `check`) when any file would change.
pub fn fmt(paths: &[PathBuf], check: bool, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let Some(files) = files_or_current_dir(paths, err) else {
        return 1;
    };
    let (mut changed, mut failed) = (0usize, 0usize);
    for f in &files {
        let name = display(f);
        let text = match std::fs::read(f).map(String::from_utf8) {
            Ok(Ok(t)) => t,
            Ok(Err(_)) => {
                let _ = writeln!(err, "error: {name}: not formatted: not valid UTF-8");
                failed += 1;
                continue;
            }
            Err(e) => {
                let _ = writeln!(err, "error: cannot read {name}: {e}");
                failed += 1;
                continue;
            }
        };
        let formatted = match crate::fmt::format(&name, &text) {
            Ok(t) => t,
            Err(e) => {
                let _ = writeln!(err, "error: {name}: {e}");
                failed += 1;
                continue;
            }
        };
        if formatted == text {
            continue;
        }
        changed += 1;
        if check {
            let line = text
                .lines()
                .zip(formatted.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| text.lines().count().min(formatted.lines().count()))
                + 1;
            let _ = writeln!(
                out,
                "would reformat {name} (first difference on line {line})"
            );
        } else if let Err(e) = write_atomically(f, &formatted) {
            let _ = writeln!(err, "error: cannot write {name}: {e}");
            failed += 1;
            changed -= 1;
        } else {
            let _ = writeln!(out, "formatted {name}");
        }
    }
    let unchanged = files.len() - changed - failed;
    if check {
        let _ = writeln!(
            out,
            "{changed} file(s) would be reformatted, {unchanged} already formatted, {failed} failed"
        );
        if changed > 0 || failed > 0 { 1 } else { 0 }
    } else {
        let _ = writeln!(
            out,
            "formatted {changed} file(s), {unchanged} unchanged, {failed} failed"
        );
        if failed > 0 { 1 } else { 0 }
    }
}

/// Replaces `path` by writing a sibling and renaming it over, so a crash never leaves half a
/// file; the permissions are kept.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let tmp_name = format!(
        ".{}.vox-fmt-{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    );
    let tmp = dir.map_or_else(|| PathBuf::from(&tmp_name), |d| d.join(&tmp_name));
    let perms = std::fs::metadata(path)?.permissions();
    std::fs::write(&tmp, text)?;
    std::fs::set_permissions(&tmp, perms)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
