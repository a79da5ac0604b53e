//! Which Codex to run: `CODEX_MMO_CODEX_JS` (a `codex.js` run with `node`) or `codex` on PATH.

use crate::Error;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The environment variable naming the npm package's `bin/codex.js`.
pub const CODEX_JS_VAR: &str = "CODEX_MMO_CODEX_JS";

/// A program and the arguments that come before `app-server`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexCommand {
    /// The executable: `node`, or the `codex` found on `PATH`.
    pub program: PathBuf,
    /// Arguments before `app-server` (the `codex.js` path when run with `node`).
    pub args: Vec<OsString>,
}

impl CodexCommand {
    /// `node <codex.js>`.
    pub fn node(codex_js: impl Into<PathBuf>) -> Self {
        CodexCommand {
            program: PathBuf::from("node"),
            args: vec![codex_js.into().into_os_string()],
        }
    }

    /// A `codex` executable run directly.
    pub fn binary(path: impl Into<PathBuf>) -> Self {
        CodexCommand {
            program: path.into(),
            args: vec![],
        }
    }
}

/// `CODEX_MMO_CODEX_JS` when set (and non-empty), else `codex` on PATH.
pub fn find_codex() -> Result<CodexCommand, Error> {
    find_codex_in(
        std::env::var_os(CODEX_JS_VAR),
        std::env::var_os("PATH").as_deref(),
    )
}

pub(crate) fn find_codex_in(
    js: Option<OsString>,
    path: Option<&std::ffi::OsStr>,
) -> Result<CodexCommand, Error> {
    if let Some(js) = js.filter(|v| !v.is_empty()) {
        let js = PathBuf::from(js);
        if js.is_file() {
            return Ok(CodexCommand::node(js));
        }
        return Err(Error::CodexNotFound(format!(
            "{CODEX_JS_VAR}={} is not a file (install @openai/codex with npm and point it at \
             <dir>/node_modules/@openai/codex/bin/codex.js)",
            js.display()
        )));
    }
    if let Some(path) = path {
        for dir in std::env::split_paths(path) {
            let candidate = dir.join("codex");
            if is_executable(&candidate) {
                return Ok(CodexCommand::binary(candidate));
            }
        }
    }
    Err(Error::CodexNotFound(format!(
        "{CODEX_JS_VAR} is unset and no `codex` executable is on PATH (tried both)"
    )))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn js_variable_wins_and_must_name_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let js = dir.path().join("codex.js");
        std::fs::write(&js, "").unwrap();
        let c = find_codex_in(Some(js.clone().into()), None).unwrap();
        assert_eq!(c, CodexCommand::node(&js));

        let missing = dir.path().join("nope.js");
        let e = find_codex_in(Some(missing.clone().into()), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains(&missing.display().to_string()), "{e}");
    }

    #[test]
    fn path_is_searched_then_both_are_named_in_the_error() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let e = find_codex_in(None, Some(dir.path().as_os_str()))
            .unwrap_err()
            .to_string();
        assert!(e.contains(CODEX_JS_VAR) && e.contains("PATH"), "{e}");

        let bin = dir.path().join("codex");
        std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let c = find_codex_in(Some("".into()), Some(dir.path().as_os_str())).unwrap();
        assert_eq!(c, CodexCommand::binary(bin));
    }
}
