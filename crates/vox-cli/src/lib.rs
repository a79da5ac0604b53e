//! Shared pieces of the `vox` and `vox-orchestrator-d` binaries: their command-line arguments,
//! profile selection, the user config file, MCP client configuration, logging set-up.

pub mod args;
pub mod client;
pub mod config;
pub mod logging;

/// Checks every `VOX_*` variable (a bad value is an error naming it) and sets up logging.
pub fn start(default_log: &str) -> Result<(), String> {
    let errors = vox_core::env::check(|k| std::env::var(k).ok());
    if !errors.is_empty() {
        return Err(errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\nerror: "));
    }
    logging::init(default_log)
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
