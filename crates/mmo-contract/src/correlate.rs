//! Mechanical correlation of a result with evidence the runtime captured itself.
//!
//! Shape validation says a result *looks* right; correlation checks that the evidence it cites
//! exists: an object with `command` and `exit_code` must match a captured command event, and an
//! object with `relative_path` and `sha256` must name a regular, non-symlink file inside the
//! delegated tree whose bytes hash to that value. Neither establishes semantic correctness.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Component, Path};

/// A command the runtime parsed from the worker's event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandEvent {
    pub command: String,
    pub exit_code: i64,
}

/// What a result is correlated against.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// Commands captured for this job.
    pub commands: &'a [CommandEvent],
    /// Root of the delegated tree that `relative_path` values are resolved in.
    pub tree: &'a Path,
}

/// One uncorrelated claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorrelationError {
    /// JSON pointer of the object making the claim.
    pub pointer: String,
    /// Stable rule id.
    pub rule: &'static str,
    pub message: String,
}

/// Check every evidence-bearing object in `result`.
pub fn correlate(result: &Value, evidence: Evidence<'_>) -> Vec<CorrelationError> {
    let mut out = Vec::new();
    walk(result, "", evidence, &mut out);
    out
}

fn walk(v: &Value, ptr: &str, ev: Evidence<'_>, out: &mut Vec<CorrelationError>) {
    match v {
        Value::Object(o) => {
            if let (Some(cmd), Some(code)) = (o.get("command"), o.get("exit_code")) {
                check_command(cmd, code, ptr, ev, out);
            }
            if let (Some(path), Some(hash)) = (o.get("relative_path"), o.get("sha256")) {
                check_file(path, hash, ptr, ev, out);
            }
            for (k, child) in o {
                walk(
                    child,
                    &format!("{ptr}/{}", k.replace('~', "~0").replace('/', "~1")),
                    ev,
                    out,
                );
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                walk(child, &format!("{ptr}/{i}"), ev, out);
            }
        }
        _ => {}
    }
}

fn fail(out: &mut Vec<CorrelationError>, ptr: &str, rule: &'static str, message: String) {
    out.push(CorrelationError {
        pointer: ptr.to_string(),
        rule,
        message,
    });
}

fn check_command(
    cmd: &Value,
    code: &Value,
    ptr: &str,
    ev: Evidence<'_>,
    out: &mut Vec<CorrelationError>,
) {
    let (Some(cmd), Some(code)) = (cmd.as_str(), code.as_i64()) else {
        fail(
            out,
            ptr,
            "evidence_command_shape",
            "command must be a string and exit_code an integer".into(),
        );
        return;
    };
    if !ev
        .commands
        .iter()
        .any(|c| c.command == cmd && c.exit_code == code)
    {
        fail(
            out,
            ptr,
            "evidence_command_uncorrelated",
            format!("no captured command event `{cmd}` exited with {code}"),
        );
    }
}

fn check_file(
    path: &Value,
    hash: &Value,
    ptr: &str,
    ev: Evidence<'_>,
    out: &mut Vec<CorrelationError>,
) {
    let (Some(rel), Some(hash)) = (path.as_str(), hash.as_str()) else {
        fail(
            out,
            ptr,
            "evidence_file_shape",
            "relative_path and sha256 must be strings".into(),
        );
        return;
    };
    let rel_path = Path::new(rel);
    if rel.is_empty()
        || !rel_path
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
    {
        fail(
            out,
            ptr,
            "evidence_file_outside_tree",
            format!("`{rel}` is not a plain relative path inside the delegated tree"),
        );
        return;
    }
    // Walk component by component so a symlinked directory cannot lead outside the tree.
    let mut cur = ev.tree.to_path_buf();
    for c in rel_path.components() {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => {
                fail(
                    out,
                    ptr,
                    "evidence_file_symlink",
                    format!("`{rel}` passes through a symlink"),
                );
                return;
            }
            Ok(_) => {}
            Err(_) => {
                fail(
                    out,
                    ptr,
                    "evidence_file_missing",
                    format!("`{rel}` does not exist in the delegated tree"),
                );
                return;
            }
        }
    }
    match std::fs::symlink_metadata(&cur) {
        Ok(m) if m.is_file() => {}
        _ => {
            fail(
                out,
                ptr,
                "evidence_file_not_regular",
                format!("`{rel}` is not a regular file"),
            );
            return;
        }
    }
    match std::fs::read(&cur) {
        Ok(bytes) => {
            let actual: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            if actual != hash {
                fail(
                    out,
                    ptr,
                    "evidence_file_hash_mismatch",
                    format!("`{rel}` hashes to {actual}, not {hash}"),
                );
            }
        }
        Err(e) => fail(
            out,
            ptr,
            "evidence_file_missing",
            format!("`{rel}` cannot be read: {e}"),
        ),
    }
}
