//! `vox check`, `vox run`, `vox test` and `vox fmt`: the vox-lang commands, which write to
//! locked stdout/stderr and return a status that becomes the exit code.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `vox check`: diagnostics, exit 1 when any file has an error.
pub fn check(paths: &[PathBuf], json: bool) -> ExitCode {
    lang_exit(|out, err| vox_lang::cli::check(paths, json, out, err))
}

/// `vox run`: one function of a .vox file, its JSON result on stdout.
pub fn run(file: &Path, function: &str, args: Option<&str>) -> ExitCode {
    lang_exit(|out, err| vox_lang::cli::run(file, function, args, out, err))
}

/// `vox test`: the @test functions, exit 1 on any failure.
pub fn test(paths: &[PathBuf]) -> ExitCode {
    lang_exit(|out, err| vox_lang::cli::test(paths, out, err))
}

/// `vox fmt`: rewrite in the canonical layout, or with `check` only list what would change.
pub fn fmt(paths: &[PathBuf], check: bool) -> ExitCode {
    lang_exit(|out, err| vox_lang::cli::fmt(paths, check, out, err))
}

/// Runs a vox-lang command against locked stdout/stderr and turns its status into an exit code.
fn lang_exit(f: impl FnOnce(&mut dyn std::io::Write, &mut dyn std::io::Write) -> i32) -> ExitCode {
    let (stdout, stderr) = (std::io::stdout(), std::io::stderr());
    let code = f(&mut stdout.lock(), &mut stderr.lock());
    ExitCode::from(code.clamp(0, 255) as u8)
}
