//! `vox mcp`: serves MCP on stdio. The daemon takes the session over when it can (the hand-off
//! fast path); otherwise this process relays it, and carries on relaying a session whose
//! daemon died.

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use vox_core::Workspace;

use super::{profile_or_exit, warn_if_empty};

/// Connects to (or spawns) the workspace daemon and serves the client's session until it ends.
pub fn run(profile: Option<String>, workspace: Option<PathBuf>) -> Result<ExitCode> {
    let profile = match profile_or_exit(profile.as_deref()) {
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
        match vox_mcp::stdio::connect(ws, profile.canonical().to_owned(), vox_cli::daemon_exe())
            .await
        {
            Ok(server) => match server.backend().hand_off().await {
                vox_mcp::stdio::Handoff::Ended => Ok(ExitCode::SUCCESS),
                vox_mcp::stdio::Handoff::Kept => {
                    let input = server.watch_input(vox_mcp::pipes::stdin());
                    let lists = server.backend().list_cache();
                    serve_stdio(server, input, Some(lists)).await
                }
                vox_mcp::stdio::Handoff::Lost(state, pending) => {
                    resume_stdio(server, state, pending).await
                }
            },
            Err(e) => {
                // The client shows a failed handshake's error, not a closed connection: answer
                // the handshake with the reason, then end.
                eprintln!("error: {e}");
                let refusal = vox_mcp::refusal::Refusal::new(e.code(), e.to_string(), e.data());
                let _ = serve_stdio(refusal, vox_mcp::pipes::stdin(), None).await;
                Ok(ExitCode::FAILURE)
            }
        }
    })
}

/// Serves one MCP session on stdio until the client closes its input; with `lists`,
/// `tools/list` is answered from its encoded bytes once the list has been sent.
async fn serve_stdio<S, R>(
    server: S,
    input: R,
    lists: Option<std::sync::Arc<vox_mcp::list_cache::ToolListCache>>,
) -> Result<ExitCode>
where
    S: rmcp::Service<rmcp::RoleServer>,
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    use rmcp::ServiceExt;
    let out = vox_mcp::list_cache::SharedOutput::new(vox_mcp::pipes::stdout());
    let transport = vox_mcp::stdio::transport(input, out, lists.unwrap_or_default());
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

/// Carries on, relaying, a session the daemon served until it died: answers the requests it
/// left unanswered, then serves the initialized session (its level, subscriptions and active
/// skill) until the client closes its input.
async fn resume_stdio(
    server: vox_mcp::McpServer<vox_mcp::stdio::DaemonBackend>,
    state: vox_daemon::frames::SessionState,
    pending: vox_daemon::handoff::Pending,
) -> Result<ExitCode> {
    let out = vox_mcp::list_cache::SharedOutput::new(vox_mcp::pipes::stdout());
    let answered =
        vox_mcp::stdio::answer_pending(&pending, server.backend().workspace(), &out).await;
    server.backend().resume(&state, answered > 0).await;
    let notifier = server.change_notifier();
    let lists = server.backend().list_cache();
    let server = server.resume(&state);
    let input = server.watch_input(vox_mcp::pipes::stdin());
    let peer = state.peer.and_then(|p| serde_json::from_value(p).ok());
    let initialized = peer.is_some();
    let service =
        rmcp::service::serve_directly(server, vox_mcp::stdio::transport(input, out, lists), peer);
    if initialized {
        notifier.adopt_peer(service.peer().clone());
    }
    service
        .waiting()
        .await
        .context("MCP session ended with an error")?;
    Ok(ExitCode::SUCCESS)
}
