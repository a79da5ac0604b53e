//! `vox mcp`: serves MCP on stdio. The daemon takes the session over when it can (the hand-off
//! fast path); otherwise this process proxies it to an MCP session on the daemon's socket, and
//! carries on proxying a session whose daemon died.

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use vox_core::Workspace;

use super::{profile_or_exit, warn_if_empty};

/// Connects to (or spawns) the workspace daemon and serves the client's session until it ends.
pub fn run(profile: Option<String>, workspace: Option<PathBuf>) -> Result<ExitCode> {
    let profile = match profile_or_exit(profile.as_deref(), workspace.as_deref()) {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    warn_if_empty(&profile);
    let ws = Workspace::resolve(workspace.as_deref())?;
    // One thread: the adapter only relays, and keeping stdin, stdout and the socket on one
    // thread saves cross-thread wake-ups on every call.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let upstream = vox_mcp::stdio::DaemonUpstream::connect(
            ws,
            profile.canonical().to_owned(),
            vox_cli::daemon_exe(),
        );
        match upstream.await {
            Ok(upstream) => {
                vox_mcp::stdio::serve(upstream)
                    .await
                    .context("MCP session ended with an error")?;
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                // The client shows a failed handshake's error, not a closed connection: answer
                // the handshake with the reason, then end.
                eprintln!("error: {e}");
                let refusal = vox_mcp::refusal::Refusal::new(e.code(), e.to_string(), e.data());
                let _ = serve_stdio(refusal, vox_mcp::pipes::stdin()).await;
                Ok(ExitCode::FAILURE)
            }
        }
    })
}

/// Serves one MCP session on stdio until the client closes its input.
async fn serve_stdio<S, R>(server: S, input: R) -> Result<ExitCode>
where
    S: rmcp::Service<rmcp::RoleServer>,
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    use rmcp::ServiceExt;
    let out = vox_mcp::list_cache::SharedOutput::new(vox_mcp::pipes::stdout());
    let transport = vox_mcp::stdio::transport(input, out, Default::default());
    let service = server
        .serve(transport)
        .await
        .context("MCP session failed to start")?;
    service
        .waiting()
        .await
        .context("MCP session ended with an error")?;
    Ok(ExitCode::SUCCESS)
}
