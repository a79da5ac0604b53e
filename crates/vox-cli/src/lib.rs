//! Shared pieces of the `vox` and `vox-orchestrator-d` binaries: their command-line arguments,
//! profile selection, the user config file, MCP client configuration, logging set-up.

pub mod args;
pub mod client;
pub mod config;

/// Logs go to stderr (stdout is the MCP channel in stdio mode), filtered by `VOX_LOG`.
pub fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("VOX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// The `vox-orchestrator-d` binary next to the running executable.
pub fn daemon_exe() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("VOX_DAEMON_EXE") {
        return p.into();
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("vox-orchestrator-d")))
        .unwrap_or_else(|| "vox-orchestrator-d".into())
}
