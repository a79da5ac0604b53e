//! `vox`: the MCP orchestrator's command line. The arguments are declared in `vox_cli::args`,
//! each command's body lives in `commands/`; this file only parses, sets up logging and
//! dispatches.

use clap::Parser;
use std::process::ExitCode;
use vox_cli::args::{Cli, Command};

mod commands;

fn main() -> ExitCode {
    vox_cli::init_logging("warn");
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Mcp { .. } | Command::Serve { .. }) {
        // Reporting commands end quietly when their reader goes away (`vox profile list | head`),
        // as other command-line tools do, instead of panicking in `println!`.
        // SAFETY: restoring the default disposition of one signal before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match commands::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
