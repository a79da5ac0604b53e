//! `vox completions <shell>`: generated from the same clap tree that parses the command line,
//! so the script cannot drift from the flags.

use clap::CommandFactory;
use std::process::ExitCode;
use vox_cli::args::Cli;

/// Writes the completion script for `shell` to stdout.
pub fn run(shell: clap_complete::Shell) -> ExitCode {
    clap_complete::generate(shell, &mut Cli::command(), "vox", &mut std::io::stdout());
    ExitCode::SUCCESS
}
