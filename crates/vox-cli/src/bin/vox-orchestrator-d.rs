//! `vox-orchestrator-d`: the workspace daemon in the foreground.

use clap::Parser;
use std::process::ExitCode;
use vox_cli::args::{ProfileArg, WorkspaceArg};
use vox_core::Workspace;
use vox_daemon::daemon::Daemon;
use vox_daemon::lifetime::Kind;

/// The vox orchestrator daemon: one per workspace, on <workspace>/.vox/orchestrator.sock.
#[derive(Parser)]
// Named explicitly: clap would otherwise take the package name (`vox-cli`) for `--version`.
#[command(name = "vox-orchestrator-d", version)]
struct Args {
    #[command(flatten)]
    workspace: WorkspaceArg,
    #[command(flatten)]
    profile: ProfileArg,
    /// Exit once no client has been attached for VOX_DAEMON_IDLE_SECS (default 300; 0 = never).
    /// `vox mcp` passes it to the daemons it spawns; without it the daemon stays until stopped.
    #[arg(long)]
    exit_when_idle: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = vox_cli::start("info") {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let ws = match Workspace::resolve(args.workspace.dir()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = vox_cli::logging::rotate_when_stderr_is(&ws.daemon_log_path()) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    if let Err(e) = vox_cli::config::install_workspace_profiles(&ws) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let (profile, _) = match vox_cli::config::select_profile(args.profile.profile.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let kind = if args.exit_when_idle {
        match vox_daemon::lifetime::idle_from_env() {
            Ok(idle) => Kind::Spawned { idle },
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        Kind::Started
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        match Daemon::start(ws, profile, vox_tools::families(), kind) {
            Ok(d) => {
                let d = d.with_session_host(vox_mcp::hosted::host());
                d.run().await;
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    })
}
