//! `vox skill …`: the skill catalog read the way the daemon reads it, and running a command in
//! the sandbox `vox_skill_run` uses, both without a daemon.

use anyhow::Result;
use serde_json::{Value, json};
use std::path::Path;
use std::process::ExitCode;
use vox_cli::args::SkillCommand;
use vox_core::Workspace;

/// Runs `vox skill list` or `vox skill run`.
pub fn run(command: SkillCommand) -> Result<ExitCode> {
    match command {
        SkillCommand::List { workspace, output } => list(workspace.dir(), output.json),
        SkillCommand::Run {
            id,
            workspace,
            timeout_ms,
            command,
        } => run_in_sandbox(&id, workspace.dir(), timeout_ms, &command),
    }
}

/// The workspace's skills and those of the skill roots, as the daemon would hydrate them.
fn catalog(workspace: Option<&Path>) -> Result<vox_skills::Catalog> {
    let ws = Workspace::resolve(workspace)?;
    Ok(vox_skills::Catalog::hydrate(&vox_skills::Roots::from_env(
        &ws.root,
    )))
}

/// Every skill found on stdout; the ones that did not load on stderr (or both in one JSON).
fn list(workspace: Option<&Path>, json: bool) -> Result<ExitCode> {
    let c = catalog(workspace)?;
    if json {
        let skills: Vec<Value> = c
            .skills
            .values()
            .map(|s| json!({"id": s.id, "description": s.manifest.description, "tools": s.manifest.tools, "origin": s.origin, "path": s.dir}))
            .collect();
        let errors: Vec<String> = c.errors.iter().map(|e| e.to_string()).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"skills": skills, "errors": errors}))?
        );
    } else {
        for s in c.skills.values() {
            println!("{:<32} {}", s.id, s.manifest.description);
        }
        for e in &c.errors {
            eprintln!("not loaded: {e}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `command` in the skill's sandbox, passes its output through and exits with its status
/// (128 + the signal when a signal ended it, as shells report it).
fn run_in_sandbox(
    id: &str,
    workspace: Option<&Path>,
    timeout_ms: u64,
    command: &[String],
) -> Result<ExitCode> {
    let c = catalog(workspace)?;
    let skill = c.get(id)?;
    let out = vox_sandbox::run(&vox_sandbox::RunRequest {
        skill_dir: &skill.dir,
        argv: command,
        stdin: None,
        limits: vox_sandbox::Limits {
            wall: std::time::Duration::from_millis(timeout_ms),
            ..Default::default()
        },
        cancel: None,
    })?;
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    if let Some(limit) = out.limit {
        eprintln!("vox skill run: stopped by the {limit:?} limit");
    }
    Ok(match out.exit_code {
        Some(0) => ExitCode::SUCCESS,
        Some(n) => ExitCode::from(u8::try_from(n).unwrap_or(1)),
        None => ExitCode::from(128 + out.signal.unwrap_or(9).clamp(0, 127) as u8),
    })
}
