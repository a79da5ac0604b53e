//! `vox`: the MCP orchestrator's command line. The arguments are declared in `vox_cli::args`,
//! each command's body lives in `commands/`; this file only parses, sets up logging and
//! dispatches.

use clap::Parser;
use std::process::ExitCode;
use vox_cli::args::{Cli, Command};

mod commands;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `vox doctor` reports a bad environment as a failed check instead of refusing to run.
    if matches!(cli.command, Command::Doctor { .. }) {
        let _ = vox_cli::logging::init("warn");
    } else if let Err(e) = vox_cli::start("warn") {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
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
