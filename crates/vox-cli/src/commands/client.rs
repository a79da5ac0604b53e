//! `vox client config`: the configuration an MCP client needs to start `vox mcp`, printed or
//! merged into the client's own file.

use anyhow::{Context, Result};
use std::process::ExitCode;
use vox_cli::args::ClientCommand;
use vox_cli::client::Server;
use vox_core::Workspace;
use vox_mcp_registry::ProfileSet;

/// Prints the snippet (its destination on stderr), or with `--write` merges it and prints the
/// path, naming (or with `--replace` removing) other vox entries for the same workspace.
pub fn run(command: ClientCommand) -> Result<ExitCode> {
    let ClientCommand::Config {
        client,
        profile,
        workspace,
        write,
        replace,
        url,
        token_env,
        workspace_tools,
    } = command;
    let profile = match profile.as_deref().map(ProfileSet::parse) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            eprintln!("error: profile_unknown: {e} (from --profile)");
            return Ok(ExitCode::from(2));
        }
    };
    if let Some(var) = &token_env
        && !(var
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
    {
        eprintln!("error: --token-env {var:?} is not an environment variable name");
        return Ok(ExitCode::from(2));
    }
    if let Some(u) = &url
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        eprintln!("error: --url {u:?} is not an http:// or https:// URL");
        return Ok(ExitCode::from(2));
    }
    let ws = Workspace::resolve(workspace.dir())?;
    let server = match &url {
        Some(u) => Server::http(u, token_env.as_deref()),
        None => {
            let exe = std::env::current_exe().context("cannot tell where the vox binary is")?;
            let s = Server::new(&exe, profile.as_ref().map(ProfileSet::canonical), &ws.root);
            if workspace_tools {
                s.with_workspace_tools()
            } else {
                s
            }
        }
    };
    if !write {
        print!("{}", client.snippet(&server));
        eprintln!(
            "# for {}; `--write` merges it there",
            client.path(&ws.root).display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let path = client.path(&ws.root);
    let existing = std::fs::read_to_string(&path).unwrap_or_default();
    let rivals = client.rivals(&existing, &server);
    if !rivals.is_empty() {
        if replace {
            let kept = client.remove(&existing, &rivals).map_err(|e| {
                anyhow::anyhow!("{}: {e}; the file was left unchanged", path.display())
            })?;
            client
                .replace_file(&ws.root, &kept)
                .map_err(anyhow::Error::msg)?;
            eprintln!("removed from {}: {}", path.display(), rivals.join(", "));
        } else {
            eprintln!(
                "warning: {} also has {} for this workspace; its daemon serves one profile, so a client starting both meets profile_mismatch (`--replace` removes {})",
                path.display(),
                rivals.join(", "),
                if rivals.len() == 1 { "it" } else { "them" }
            );
        }
    }
    let path = client
        .write(&ws.root, &server)
        .map_err(anyhow::Error::msg)?;
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}
