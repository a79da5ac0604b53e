//! `vox client config`: the configuration an MCP client needs to start `vox mcp`, printed or
//! merged into the client's own file.

use anyhow::{Context, Result};
use std::process::ExitCode;
use vox_cli::args::ClientCommand;
use vox_core::Workspace;
use vox_mcp_registry::ProfileSet;

/// Prints the snippet (its destination on stderr), or with `--write` merges it and prints the path.
pub fn run(command: ClientCommand) -> Result<ExitCode> {
    let ClientCommand::Config {
        client,
        profile,
        workspace,
        write,
    } = command;
    let profile = match profile.as_deref().map(ProfileSet::parse) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            eprintln!("error: profile_unknown: {e} (from --profile)");
            return Ok(ExitCode::from(2));
        }
    };
    let ws = Workspace::resolve(workspace.dir())?;
    let exe = std::env::current_exe().context("cannot tell where the vox binary is")?;
    let server =
        vox_cli::client::Server::new(&exe, profile.as_ref().map(ProfileSet::canonical), &ws.root);
    if write {
        let path = client
            .write(&ws.root, &server)
            .map_err(anyhow::Error::msg)?;
        println!("{}", path.display());
    } else {
        print!("{}", client.snippet(&server));
        eprintln!(
            "# for {}; `--write` merges it there",
            client.path(&ws.root).display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
