//! One module per `vox` command; `run` sends the parsed command line to its module.
//!
//! The helpers below are the ones several commands share: the runtime of the commands that
//! talk to a daemon, and the profile checks of the commands that start one.

use anyhow::{Context, Result};
use std::process::ExitCode;
use vox_cli::args::{Cli, Command};
use vox_cli::config::select_profile;
use vox_mcp_registry::ProfileSet;

mod audit;
mod bundle;
mod ci;
mod client;
mod completions;
mod daemon;
mod doctor;
mod lang;
mod mcp;
mod mesh;
mod profile;
mod serve;
mod skill;
mod upstream;

/// Runs the command; an `Err` is reported by `main` as `error: …` with exit code 1.
pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Mcp { profile, workspace } => mcp::run(profile.profile, workspace.workspace),
        Command::Serve {
            profile,
            workspace,
            host,
            port,
        } => serve::run(profile.profile, workspace.workspace, host, port),
        Command::Ci { command } => ci::run(command),
        Command::Profile { command } => profile::run(command),
        Command::Bundle { command } => bundle::run(command),
        Command::Daemon { command } => daemon::run(command),
        Command::Mesh { command } => mesh::run(command),
        Command::Upstream { command } => upstream::run(command),
        Command::Audit {
            workspace,
            output,
            follow,
            limit,
            tool,
        } => audit::run(workspace.dir(), output.json, follow, limit, tool),
        Command::Check { paths, json } => Ok(lang::check(&paths, json)),
        Command::Run {
            file,
            function,
            args,
        } => Ok(lang::run(&file, &function, args.as_deref())),
        Command::Test { paths } => Ok(lang::test(&paths)),
        Command::Fmt { paths, check } => Ok(lang::fmt(&paths, check)),
        Command::Skill { command } => skill::run(command),
        Command::Client { command } => client::run(command),
        Command::Completions { shell } => Ok(completions::run(shell)),
        Command::Doctor { workspace, output } => doctor::run(workspace.dir(), output.json),
    }
}

/// The multi-thread runtime of the commands that talk to a daemon or serve one.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Exit code 2 for a usage error such as `profile_unknown`.
/// The workspace's own profiles (`.vox/profiles/`) are installed first, so the flag may name
/// one.
fn profile_or_exit(
    flag: Option<&str>,
    workspace: Option<&std::path::Path>,
) -> Result<ProfileSet, ExitCode> {
    if let Ok(ws) = vox_core::Workspace::resolve(workspace)
        && let Err(e) = vox_cli::config::install_workspace_profiles(&ws)
    {
        eprintln!("error: {e}");
        return Err(ExitCode::from(2));
    }
    select_profile(flag).map(|(p, _)| p).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

/// Says on stderr when a profile serves nothing in this build: a client would otherwise see an
/// empty `tools/list` and no reason for it.
fn warn_if_empty(profile: &ProfileSet) {
    if !profile.is_dev() && profile.tools().iter().next().is_none() {
        eprintln!(
            "warning: profile `{}` serves no tool in this build (its tools have not landed yet; `vox profile show {}` lists them); clients will see an empty tools/list",
            profile.canonical(),
            profile.canonical()
        );
    }
}
