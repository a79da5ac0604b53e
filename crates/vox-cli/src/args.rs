//! The command-line arguments of `vox` (and the flags `vox-orchestrator-d` shares with it).
//!
//! They live in the library, apart from the command bodies, so that both binaries take a flag
//! from one definition: its name, its help and its default are written once here and
//! `#[command(flatten)]`ed wherever a command accepts it.

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};

/// `--workspace`: every command that acts on one workspace takes it the same way.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct WorkspaceArg {
    /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
    #[arg(long)]
    pub workspace: Option<PathBuf>,
}

impl WorkspaceArg {
    /// The directory given, if any, as `vox_core::Workspace::resolve` takes it.
    pub fn dir(&self) -> Option<&Path> {
        self.workspace.as_deref()
    }
}

/// `--profile` of the commands that start or adopt a daemon: the same fallbacks apply to all.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ProfileArg {
    /// Capability profile ids, comma-separated (default: VOX_PROFILE, ~/.vox/config.toml, dev).
    #[arg(long)]
    pub profile: Option<String>,
}

/// `--json` of the reporting commands that print one JSON document instead of text.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct JsonArg {
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// `vox`, its version and its subcommands.
#[derive(Parser)]
#[command(
    name = "vox",
    version,
    about = "vox: one MCP tool surface for AI agents, sliced by capability profiles"
)]
pub struct Cli {
    /// The subcommand to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands of `vox`.
#[derive(Subcommand)]
pub enum Command {
    /// Serve MCP on stdio, adopting or spawning the workspace daemon.
    Mcp {
        /// The profile to serve (or to require of an adopted daemon).
        #[command(flatten)]
        profile: ProfileArg,
        /// The workspace whose daemon to use.
        #[command(flatten)]
        workspace: WorkspaceArg,
    },
    /// Run the daemon in the foreground with the HTTP gateway (REST, WebSocket, /mcp) and no stdio.
    Serve {
        /// The profile the daemon serves.
        #[command(flatten)]
        profile: ProfileArg,
        /// The workspace to serve.
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// The address to listen on (over `VOX_MCP_HTTP_HOST`; default 127.0.0.1).
        #[arg(long)]
        host: Option<std::net::IpAddr>,
        /// The port to listen on, 0 for any free one (over `VOX_MCP_HTTP_PORT`; default 3921).
        #[arg(long)]
        port: Option<u16>,
    },
    /// CI gates.
    Ci {
        /// The gate to run.
        #[command(subcommand)]
        command: CiCommand,
    },
    /// Inspect capability profiles.
    Profile {
        /// What to show.
        #[command(subcommand)]
        command: ProfileCommand,
    },
    /// Plugin bundles and the profiles they select.
    Bundle {
        /// What to do with bundles.
        #[command(subcommand)]
        command: BundleCommand,
    },
    /// Start, stop or inspect the workspace daemon.
    Daemon {
        /// What to do with the daemon.
        #[command(subcommand)]
        command: DaemonCommand,
    },
    /// This node in a mesh of nodes: its key, and the nodes and queues its daemon sees.
    Mesh {
        /// What to show or create.
        #[command(subcommand)]
        command: MeshCommand,
    },
    /// Upstream MCP servers (.vox/servers.toml, ~/.vox/servers.toml): their state and tools,
    /// and a person's approval of tool definitions that changed or were added.
    Upstream {
        /// What to show or approve.
        #[command(subcommand)]
        command: UpstreamCommand,
    },
    /// The audit trail: every tool call (catalog, workspace, skill, upstream) with its caller,
    /// decision, outcome and duration, oldest first.
    Audit {
        /// The workspace whose trail to read.
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// Whether to print JSON (one record per line).
        #[command(flatten)]
        output: JsonArg,
        /// Keep printing calls as they are recorded, until interrupted.
        #[arg(long)]
        follow: bool,
        /// The newest this many (1 to 1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// One tool, or a prefix ending in `*` (`github__*`).
        #[arg(long)]
        tool: Option<String>,
    },
    /// Check .vox files (or directories of them); exit 1 when any has an error.
    Check {
        /// Files or directories (default: the current directory).
        paths: Vec<PathBuf>,
        /// Print one JSON document instead of rustc-style diagnostics.
        #[arg(long)]
        json: bool,
    },
    /// Run one function of a .vox file; prints its JSON result.
    Run {
        /// The .vox file.
        file: PathBuf,
        /// The function to call.
        function: String,
        /// Arguments as a JSON object.
        #[arg(long)]
        args: Option<String>,
    },
    /// Run the @test functions of .vox files; exit 1 on any failure.
    Test {
        /// Files or directories (default: the current directory).
        paths: Vec<PathBuf>,
    },
    /// Rewrite .vox files in their canonical layout; with --check, list the files that would
    /// change and exit 1 if any would.
    Fmt {
        /// Files or directories (default: the current directory).
        paths: Vec<PathBuf>,
        /// Change nothing: list the files that would change, exit 1 if any would.
        #[arg(long)]
        check: bool,
    },
    /// Skills of the workspace and the skill roots (the same catalog the daemon serves).
    Skill {
        /// What to do with skills.
        #[command(subcommand)]
        command: SkillCommand,
    },
    /// Configure an MCP client to serve vox over stdio.
    Client {
        /// What to configure.
        #[command(subcommand)]
        command: ClientCommand,
    },
    /// Print a shell completion script (e.g. `vox completions bash > ~/.local/share/bash-completion/completions/vox`).
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Check the binaries, workspace, daemon, profile, store and sandbox; exit 1 if anything fails.
    Doctor {
        /// The workspace to check.
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// Whether to print JSON.
        #[command(flatten)]
        output: JsonArg,
    },
}

/// `vox mesh …`.
#[derive(Subcommand)]
pub enum MeshCommand {
    /// Print this node's id (its public key, for the other nodes' `.vox/mesh.toml`), creating
    /// its key (`.vox/mesh-node.nk`) if missing.
    Key {
        /// The workspace whose node key to print.
        #[command(flatten)]
        workspace: WorkspaceArg,
    },
    /// The nodes (status, heartbeat lag, agents, pending messages) and this node's queues, as
    /// its running daemon sees them; exit 1 when no daemon runs.
    Status {
        /// The workspace whose daemon to ask.
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// Whether to print JSON.
        #[command(flatten)]
        output: JsonArg,
    },
}

/// `vox upstream …`.
#[derive(Subcommand)]
pub enum UpstreamCommand {
    /// Every upstream server: its state (ready, starting, failed, circuit open, stopped), its
    /// last error, and its tools served and withheld, as the running daemon sees them (without
    /// a daemon: the declared servers and their pins); exit 1 when a server is not ready or a
    /// tool is withheld.
    Status {
        /// The workspace whose servers to show.
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// Whether to print JSON.
        #[command(flatten)]
        output: JsonArg,
    },
    /// Approve what a server's tools look like now (one tool, or every withheld one), so they
    /// are served again.
    Approve {
        /// The server's id.
        server: String,
        /// One tool's own name on that server (default: every withheld tool of the server).
        tool: Option<String>,
        /// The workspace whose servers to approve.
        #[command(flatten)]
        workspace: WorkspaceArg,
    },
}

/// `vox client …`.
#[derive(Subcommand)]
pub enum ClientCommand {
    /// Print the client's configuration for `vox mcp` (with --write, merge it into the client's file).
    Config {
        /// The MCP client.
        #[arg(long, value_enum)]
        client: crate::client::Client,
        /// Capability profile ids, comma-separated; the server is then named `vox-<profile>`
        /// (default: none pinned, `vox mcp` decides at start).
        #[arg(long)]
        profile: Option<String>,
        /// The workspace the server entry serves.
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// Merge the server into the client's file (created if missing; other servers and keys
        /// are kept) and print its path; another vox entry for the same workspace is named on
        /// stderr (a client starting both would meet `profile_mismatch`).
        #[arg(long)]
        write: bool,
        /// With `--write`: remove those other vox entries for the same workspace.
        #[arg(long, requires = "write")]
        replace: bool,
        /// An entry for a `vox serve`'s `/mcp` at this URL instead of starting `vox mcp`.
        #[arg(long, conflicts_with_all = ["profile", "workspace_tools"])]
        url: Option<String>,
        /// With `--url`: the environment variable holding its bearer token (the client reads it;
        /// the token is never written).
        #[arg(long, requires = "url")]
        token_env: Option<String>,
        /// List the workspace's `.vox` tools to the client (`VOX_MCP_WORKSPACE_TOOLS=1`).
        #[arg(long)]
        workspace_tools: bool,
    },
}

/// `vox skill …`.
#[derive(Subcommand)]
pub enum SkillCommand {
    /// Every skill found, and the ones that did not load.
    List {
        /// The workspace whose skill roots to list.
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// Whether to print JSON.
        #[command(flatten)]
        output: JsonArg,
    },
    /// Run a command for a skill in the sandbox `vox_skill_run` uses; exits with its status.
    Run {
        /// The skill id.
        id: String,
        /// The workspace whose skill roots to find the skill in.
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// Wall clock in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

/// `vox ci …`.
#[derive(Subcommand)]
pub enum CiCommand {
    /// Catalog ↔ handlers ↔ input schemas ↔ profiles: nothing missing, nothing extra.
    OperationsVerify {
        /// Whether to print JSON.
        #[command(flatten)]
        output: JsonArg,
    },
    /// Serve the example workspace and round-trip every tool and resource fixture; the served
    /// set and the fixtures must match exactly.
    McpVoxSurfaceParity {
        /// The project root.
        #[arg(long, default_value = ".")]
        root: PathBuf,
        /// The fixtures file, relative to the root.
        #[arg(long, default_value = "contracts/mcp/workspace-tool-fixtures.v1.json")]
        fixtures: PathBuf,
        /// Whether to print JSON.
        #[command(flatten)]
        output: JsonArg,
    },
    /// Every bundled skill meets the SKILL.md format and names only catalog tools.
    AgentskillsCompliance {
        /// The directory of skills.
        #[arg(default_value = "skills")]
        dir: PathBuf,
        /// Whether to print JSON.
        #[command(flatten)]
        output: JsonArg,
    },
}

/// `vox profile …`.
#[derive(Subcommand)]
pub enum ProfileCommand {
    /// Every profile with its description.
    List {
        /// Whether to print JSON.
        #[command(flatten)]
        output: JsonArg,
    },
    /// The composed profile: tools, subsystem closure, max exposure.
    Show {
        /// Profile ids, comma-separated.
        ids: String,
        /// Whether to print JSON.
        #[command(flatten)]
        output: JsonArg,
    },
}

/// `vox bundle …`.
#[derive(Subcommand)]
pub enum BundleCommand {
    /// Every bundle and its profile.
    List {
        /// Whether to print JSON.
        #[command(flatten)]
        output: JsonArg,
    },
    /// Write the bundle's profile as VOX_PROFILE into ~/.vox/config.toml (if it declares one).
    Apply {
        /// The bundle id (see `vox bundle list`).
        bundle: String,
    },
}

/// `vox daemon …`.
#[derive(Subcommand)]
pub enum DaemonCommand {
    /// Start (or adopt) the daemon for the workspace and profile; it stays until stopped.
    Start {
        /// The profile the daemon serves (or must already serve).
        #[command(flatten)]
        profile: ProfileArg,
        /// The workspace whose daemon to start.
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// Print the daemon's ping answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ask the workspace daemon to stop, and wait until it has.
    Stop {
        /// The workspace whose daemon to stop.
        #[command(flatten)]
        workspace: WorkspaceArg,
    },
    /// Ping the workspace daemon: who started it, when it exits, its boot report. Exit 1 when
    /// no daemon runs.
    Status {
        /// The workspace whose daemon to ping.
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// Print JSON (`{"running": false, ...}` when no daemon runs).
        #[arg(long)]
        json: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_tree_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_argument_of_every_subcommand_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let builtin = matches!(a.get_id().as_str(), "help" | "version");
                if !builtin && a.get_help().is_none() && a.get_long_help().is_none() {
                    missing.push(format!("{path} {}", a.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() && sub.get_long_about().is_none() {
                    missing.push(format!("{path} {} (the subcommand)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "vox", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }
}
