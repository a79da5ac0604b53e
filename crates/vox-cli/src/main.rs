//! `vox`: the MCP orchestrator's command line.

use anyhow::{Context, Result, bail};
use clap::{CommandFactory, Parser, Subcommand};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use vox_cli::config::{self, select_profile};
use vox_core::Workspace;
use vox_daemon::client::{Use, adopt_or_spawn, connect_and_ping};
use vox_mcp_registry::{PROFILES, ProfileSet, subsystem_names};

mod ci;
mod doctor;

const BUNDLES: &str = include_str!("../../../contracts/bundles/catalog.toml");

#[derive(Parser)]
#[command(
    name = "vox",
    version,
    about = "vox: one MCP tool surface for AI agents, sliced by capability profiles"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP on stdio, adopting or spawning the workspace daemon.
    Mcp {
        /// Capability profile ids, comma-separated (default: VOX_PROFILE, ~/.vox/config.toml, dev).
        #[arg(long)]
        profile: Option<String>,
        /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
    /// Run the daemon in the foreground with the HTTP gateway (REST, WebSocket, /mcp) and no stdio.
    Serve {
        /// Capability profile ids, comma-separated (default: VOX_PROFILE, ~/.vox/config.toml, dev).
        #[arg(long)]
        profile: Option<String>,
        /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
    /// CI gates.
    Ci {
        #[command(subcommand)]
        command: CiCommand,
    },
    /// Inspect capability profiles.
    Profile {
        #[command(subcommand)]
        command: ProfileCommand,
    },
    /// Plugin bundles and the profiles they select.
    Bundle {
        #[command(subcommand)]
        command: BundleCommand,
    },
    /// Start, stop or inspect the workspace daemon.
    Daemon {
        #[command(subcommand)]
        command: DaemonCommand,
    },
    /// This node in a mesh of nodes: its key, and the nodes and queues its daemon sees.
    Mesh {
        #[command(subcommand)]
        command: MeshCommand,
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
        #[command(subcommand)]
        command: SkillCommand,
    },
    /// Configure an MCP client to serve vox over stdio.
    Client {
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
        /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum MeshCommand {
    /// Print this node's id (its public key, for the other nodes' `.vox/mesh.toml`), creating
    /// its key (`.vox/mesh-node.nk`) if missing.
    Key {
        /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
    /// The nodes (status, heartbeat lag, agents, pending messages) and this node's queues, as
    /// its running daemon sees them; exit 1 when no daemon runs.
    Status {
        /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum ClientCommand {
    /// Print the client's configuration for `vox mcp` (with --write, merge it into the client's file).
    Config {
        /// The MCP client.
        #[arg(long, value_enum)]
        client: vox_cli::client::Client,
        /// Capability profile ids, comma-separated; the server is then named `vox-<profile>`
        /// (default: none pinned, `vox mcp` decides at start).
        #[arg(long)]
        profile: Option<String>,
        /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Merge the server into the client's file (created if missing; other servers and keys
        /// are kept) and print its path.
        #[arg(long)]
        write: bool,
    },
}

#[derive(Subcommand)]
enum SkillCommand {
    /// Every skill found, and the ones that did not load.
    List {
        /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Run a command for a skill in the sandbox `vox_skill_run` uses; exits with its status.
    Run {
        /// The skill id.
        id: String,
        /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Wall clock in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Subcommand)]
enum CiCommand {
    /// Catalog ↔ handlers ↔ input schemas ↔ profiles: nothing missing, nothing extra.
    OperationsVerify {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
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
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Every bundled skill meets the SKILL.md format and names only catalog tools.
    AgentskillsCompliance {
        /// The directory of skills.
        #[arg(default_value = "skills")]
        dir: PathBuf,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum ProfileCommand {
    /// Every profile with its description.
    List {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// The composed profile: tools, subsystem closure, max exposure.
    Show {
        /// Profile ids, comma-separated.
        ids: String,
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum BundleCommand {
    /// Every bundle and its profile.
    List {
        /// Print one JSON document.
        #[arg(long)]
        json: bool,
    },
    /// Write the bundle's profile as VOX_PROFILE into ~/.vox/config.toml (if it declares one).
    Apply {
        /// The bundle id (see `vox bundle list`).
        bundle: String,
    },
}

#[derive(Subcommand)]
enum DaemonCommand {
    /// Start (or adopt) the daemon for the workspace and profile; it stays until stopped.
    Start {
        /// Capability profile ids, comma-separated (default: VOX_PROFILE, ~/.vox/config.toml, dev).
        #[arg(long)]
        profile: Option<String>,
        /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Print the daemon's ping answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ask the workspace daemon to stop, and wait until it has.
    Stop {
        /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
        #[arg(long)]
        workspace: Option<PathBuf>,
    },
    /// Ping the workspace daemon: who started it, when it exits, its boot report. Exit 1 when
    /// no daemon runs.
    Status {
        /// Workspace directory (default: VOX_WORKSPACE, else the nearest ancestor with .vox or .git).
        #[arg(long)]
        workspace: Option<PathBuf>,
        /// Print JSON (`{"running": false, ...}` when no daemon runs).
        #[arg(long)]
        json: bool,
    },
}

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
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Mcp { profile, workspace } => mcp(profile, workspace),
        Command::Serve { profile, workspace } => serve(profile, workspace),
        Command::Ci { command } => match command {
            CiCommand::OperationsVerify { json } => ci::operations_verify(json),
            CiCommand::McpVoxSurfaceParity {
                root,
                fixtures,
                json,
            } => ci::surface_parity(&root, &fixtures, json),
            CiCommand::AgentskillsCompliance { dir, json } => {
                ci::agentskills_compliance(&dir, json)
            }
        },
        Command::Profile { command } => profile_cmd(command),
        Command::Bundle { command } => bundle_cmd(command),
        Command::Daemon { command } => daemon_cmd(command),
        Command::Mesh { command } => mesh_cmd(command),
        Command::Check { paths, json } => Ok(lang_exit(|out, err| {
            vox_lang::cli::check(&paths, json, out, err)
        })),
        Command::Run {
            file,
            function,
            args,
        } => Ok(lang_exit(|out, err| {
            vox_lang::cli::run(&file, &function, args.as_deref(), out, err)
        })),
        Command::Test { paths } => Ok(lang_exit(|out, err| vox_lang::cli::test(&paths, out, err))),
        Command::Fmt { paths, check } => Ok(lang_exit(|out, err| {
            vox_lang::cli::fmt(&paths, check, out, err)
        })),
        Command::Skill { command } => skill_cmd(command),
        Command::Client { command } => client_cmd(command),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "vox", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor { workspace, json } => doctor::run(workspace.as_deref(), json),
    }
}

fn client_cmd(command: ClientCommand) -> Result<ExitCode> {
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
    let ws = Workspace::resolve(workspace.as_deref())?;
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

fn skill_cmd(command: SkillCommand) -> Result<ExitCode> {
    let catalog = |workspace: Option<&std::path::Path>| -> Result<vox_skills::Catalog> {
        let ws = Workspace::resolve(workspace)?;
        Ok(vox_skills::Catalog::hydrate(&vox_skills::Roots::from_env(
            &ws.root,
        )))
    };
    match command {
        SkillCommand::List { workspace, json } => {
            let c = catalog(workspace.as_deref())?;
            if json {
                let skills: Vec<Value> = c
                    .skills
                    .values()
                    .map(|s| json!({"id": s.id, "description": s.manifest.description, "tools": s.manifest.tools, "origin": s.origin, "path": s.dir}))
                    .collect();
                let errors: Vec<String> = c.errors.iter().map(|e| e.to_string()).collect();
                println!(
                    "{}",
                    serde_json::to_string_pretty(&json!({"skills": skills, "errors": errors}))?
                );
            } else {
                for s in c.skills.values() {
                    println!("{:<32} {}", s.id, s.manifest.description);
                }
                for e in &c.errors {
                    eprintln!("not loaded: {e}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        SkillCommand::Run {
            id,
            workspace,
            timeout_ms,
            command,
        } => {
            let c = catalog(workspace.as_deref())?;
            let skill = c.get(&id)?;
            let out = vox_sandbox::run(&vox_sandbox::RunRequest {
                skill_dir: &skill.dir,
                argv: &command,
                stdin: None,
                limits: vox_sandbox::Limits {
                    wall: std::time::Duration::from_millis(timeout_ms),
                    ..Default::default()
                },
                cancel: None,
            })?;
            print!("{}", out.stdout);
            eprint!("{}", out.stderr);
            if let Some(limit) = out.limit {
                eprintln!("vox skill run: stopped by the {limit:?} limit");
            }
            Ok(match out.exit_code {
                Some(0) => ExitCode::SUCCESS,
                Some(n) => ExitCode::from(u8::try_from(n).unwrap_or(1)),
                None => ExitCode::from(128 + out.signal.unwrap_or(9).clamp(0, 127) as u8),
            })
        }
    }
}

/// Runs a vox-lang command against locked stdout/stderr and turns its status into an exit code.
fn lang_exit(f: impl FnOnce(&mut dyn std::io::Write, &mut dyn std::io::Write) -> i32) -> ExitCode {
    let (stdout, stderr) = (std::io::stdout(), std::io::stderr());
    let code = f(&mut stdout.lock(), &mut stderr.lock());
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// Exit code 2 for a usage error such as `profile_unknown`.
fn profile_or_exit(flag: Option<&str>) -> Result<ProfileSet, ExitCode> {
    select_profile(flag).map(|(p, _)| p).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

/// Says on stderr when a profile serves nothing in this build: a client would otherwise see an
/// empty `tools/list` and no reason for it.
fn warn_if_empty(profile: &ProfileSet) {
    if !profile.is_dev() && profile.tools().iter().next().is_none() {
        eprintln!(
            "warning: profile `{}` serves no tool in this build (its tools have not landed yet; `vox profile show {}` lists them); clients will see an empty tools/list",
            profile.canonical(),
            profile.canonical()
        );
    }
}

fn mcp(profile: Option<String>, workspace: Option<PathBuf>) -> Result<ExitCode> {
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

fn serve(profile: Option<String>, workspace: Option<PathBuf>) -> Result<ExitCode> {
    let profile = match profile_or_exit(profile.as_deref()) {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    let config = match vox_gateway::GatewayConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    warn_if_empty(&profile);
    // Everything the configuration can get wrong is reported before the daemon takes the
    // workspace: a refused start leaves no socket or info file behind.
    if let Err(e) = config.surface(&profile) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    let ws = Workspace::resolve(workspace.as_deref())?;
    vox_cli::init_logging("info");
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| anyhow::anyhow!("metrics recorder: {e}"))?;
    runtime()?.block_on(async move {
        let daemon = match vox_daemon::daemon::Daemon::start(
            ws,
            profile,
            vox_tools::families(),
            vox_daemon::lifetime::Kind::Started,
        ) {
            Ok(d) => d.with_session_host(vox_mcp::hosted::host()),
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(ExitCode::FAILURE);
            }
        };
        let shutdown = tokio_util::sync::CancellationToken::new();
        let addr = std::net::SocketAddr::new(config.host, config.port);
        let upkeep_handle = metrics.clone();
        let app = match vox_gateway::router(
            daemon.orchestrator().clone(),
            config,
            Some(metrics),
            shutdown.clone(),
        ) {
            Ok(app) => app,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot bind {addr}"))?;
        let bound = listener.local_addr()?;
        println!(
            "vox serve: listening on http://{bound} (profile {})",
            daemon.orchestrator().profile().canonical()
        );
        // The recorder keeps every histogram sample until upkeep folds them into its summaries:
        // without this task the daemon's memory would grow with each call.
        let upkeep = tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                tick.tick().await;
                upkeep_handle.run_upkeep();
            }
        });
        let http = tokio::spawn(vox_gateway::serve(listener, app, shutdown.clone()));
        // The daemon stops on SIGTERM/SIGINT or orch.shutdown; then the gateway drains.
        daemon.run().await;
        shutdown.cancel();
        upkeep.abort();
        let _ = http.await;
        Ok(ExitCode::SUCCESS)
    })
}

fn profile_json(p: &ProfileSet) -> Value {
    json!({
        "profile": p.canonical(),
        "ids": p.ids(),
        "max_exposure": p.max_exposure().as_str(),
        "requires": subsystem_names(p.requires_mask()),
        "subsystem_closure": subsystem_names(p.closure_mask()),
        "tools": p.tools().iter().map(|t| json!({
            "name": t.name, "lane": t.lane, "exposure": t.exposure.as_str(),
            "side_effect_class": t.side_effect_class.as_str(), "requires": t.requires,
        })).collect::<Vec<_>>(),
    })
}

fn profile_cmd(cmd: ProfileCommand) -> Result<ExitCode> {
    match cmd {
        ProfileCommand::List { json } => {
            let mut rows = vec![
                json!({"id": "dev", "description": "Every tool (synthesized; the default)", "tools": ProfileSet::dev().tools().iter().count(), "max_exposure": "internal"}),
            ];
            for p in PROFILES.iter() {
                let set = ProfileSet::parse(p.id).expect("manifest profiles compose");
                rows.push(json!({"id": p.id, "description": p.description, "tools": set.tools().iter().count(), "max_exposure": p.max_exposure.as_str()}));
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for r in rows {
                    println!(
                        "{:<18} {:>3} tools  {:<9} {}",
                        r["id"].as_str().unwrap_or(""),
                        r["tools"],
                        r["max_exposure"].as_str().unwrap_or(""),
                        r["description"].as_str().unwrap_or("")
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ProfileCommand::Show { ids, json } => {
            let p = match ProfileSet::parse(&ids) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!(
                        "error: profile_unknown: {e} (from the argument of `vox profile show`)"
                    );
                    return Ok(ExitCode::from(2));
                }
            };
            let v = profile_json(&p);
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("profile:           {}", p.canonical());
                println!("max exposure:      {}", p.max_exposure().as_str());
                println!(
                    "requires:          {}",
                    subsystem_names(p.requires_mask()).join(", ")
                );
                println!(
                    "subsystem closure: {}",
                    subsystem_names(p.closure_mask()).join(", ")
                );
                println!("tools ({}):", p.tools().iter().count());
                for t in p.tools().iter() {
                    println!(
                        "  {:<26} {:<10} {:<9} {}",
                        t.name,
                        t.lane,
                        t.exposure.as_str(),
                        t.side_effect_class.as_str()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn bundle_cmd(cmd: BundleCommand) -> Result<ExitCode> {
    let catalog = vox_contracts::parse_bundles(BUNDLES)
        .map_err(|e| anyhow::anyhow!("bundle catalog: {e}"))?;
    match cmd {
        BundleCommand::List { json } => {
            if json {
                let rows: Vec<Value> = catalog.bundles.iter().map(|(id, b)| json!({"id": id, "profile": b.profile, "description": b.description})).collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for (id, b) in &catalog.bundles {
                    println!(
                        "{:<16} {:<30} {}",
                        id,
                        b.profile.as_deref().unwrap_or("(leaves profile alone)"),
                        b.description
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        BundleCommand::Apply { bundle } => {
            let Some(b) = catalog.bundles.get(&bundle) else {
                let known: Vec<&str> = catalog.bundles.keys().map(String::as_str).collect();
                bail!("unknown bundle `{bundle}` (known: {})", known.join(", "));
            };
            match &b.profile {
                Some(spec) => {
                    let p = ProfileSet::parse(spec)
                        .map_err(|e| anyhow::anyhow!("bundle {bundle}: {e}"))?;
                    let path = config::write_profile(p.canonical())?;
                    println!(
                        "{bundle}: VOX_PROFILE = \"{}\" written to {}",
                        p.canonical(),
                        path.display()
                    );
                }
                None => println!(
                    "{bundle}: declares no profile; {} left unchanged",
                    config::config_path().display()
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn mesh_cmd(cmd: MeshCommand) -> Result<ExitCode> {
    match cmd {
        MeshCommand::Key { workspace } => {
            let ws = Workspace::resolve(workspace.as_deref())?;
            ws.ensure_vox_dir()?;
            let key = vox_mesh::NodeKey::load_or_create(&ws.vox_dir.join("mesh-node.nk"))?;
            println!("{}", key.id());
            Ok(ExitCode::SUCCESS)
        }
        MeshCommand::Status { workspace, json } => {
            let ws = Workspace::resolve(workspace.as_deref())?;
            runtime()?.block_on(async {
                let Some((c, _)) = vox_daemon::client::connect_and_ping(&ws).await else {
                    eprintln!("no daemon runs for {}", ws.root.display());
                    return Ok(ExitCode::FAILURE);
                };
                drop(c);
                let mut answers = Vec::new();
                for tool in ["vox_mesh_nodes", "vox_mesh_queue_stats"] {
                    match vox_mcp::stdio::socket_call(&ws, tool, json!({})).await {
                        Ok(v) => answers.push(v),
                        Err(e) => bail!("{tool}: {e}"),
                    }
                }
                let (nodes, stats) = (&answers[0], &answers[1]);
                if json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&json!({"nodes": nodes["nodes"], "queues": stats}))?
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                println!("{:<58} {:<12} {:<9} {:>6} {:>8} {:>8}", "NODE", "NAME", "STATUS", "AGENTS", "PENDING", "LAG_MS");
                for n in nodes["nodes"].as_array().into_iter().flatten() {
                    println!(
                        "{:<58} {:<12} {:<9} {:>6} {:>8} {:>8}",
                        n["node_id"].as_str().unwrap_or(""),
                        n["name"].as_str().unwrap_or(""),
                        n["status"].as_str().unwrap_or(""),
                        n["agents"].as_array().map_or(0, Vec::len),
                        n["pending"],
                        n["lag_ms"].as_i64().map_or("-".into(), |l| l.to_string()),
                    );
                }
                match stats["remote"].as_object() {
                    Some(r) => println!(
                        "inbox: {} waiting, {} unacknowledged; results waiting: {}; calls open: {} out, {} in; refused: {}",
                        r["inbox_waiting"], r["inbox_unacked"], r["results_waiting"],
                        r["calls_out_open"], r["calls_in_open"], r["refused"]
                    ),
                    None => println!("embedded mesh: no messaging engine configured (VOX_MESH_NATS_URL)"),
                }
                Ok(ExitCode::SUCCESS)
            })
        }
    }
}

fn daemon_cmd(cmd: DaemonCommand) -> Result<ExitCode> {
    let rt = runtime()?;
    match cmd {
        DaemonCommand::Start {
            profile,
            workspace,
            json,
        } => {
            let profile = match profile_or_exit(profile.as_deref()) {
                Ok(p) => p,
                Err(code) => return Ok(code),
            };
            let ws = Workspace::resolve(workspace.as_deref())?;
            let ping = rt.block_on(adopt_or_spawn(
                &ws,
                profile.canonical(),
                &vox_cli::daemon_exe(),
                Use::Keep,
            ));
            match ping {
                Ok((_, ping)) if json => {
                    println!("{}", serde_json::to_string_pretty(&ping)?);
                    Ok(ExitCode::SUCCESS)
                }
                Ok((_, ping)) => {
                    println!(
                        "daemon pid {} serves profile {} for {}",
                        ping["pid"],
                        ping["profile"].as_str().unwrap_or("?"),
                        ws.root.display()
                    );
                    println!("{}", lifetime_line(&ping));
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        DaemonCommand::Stop { workspace } => {
            let ws = Workspace::resolve(workspace.as_deref())?;
            rt.block_on(async {
                let Some((c, ping)) = connect_and_ping(&ws).await else {
                    println!("no daemon runs for {}", ws.root.display());
                    return Ok(ExitCode::SUCCESS);
                };
                c.call("orch.shutdown", json!({})).await?;
                // Return once the process is gone, so a following start does not race it.
                if !vox_daemon::client::wait_until_stopped(&ws, std::time::Duration::from_secs(15))
                    .await
                {
                    bail!(
                        "daemon pid {} did not stop within 15 s (daemon log: {})",
                        ping["pid"],
                        ws.daemon_log_path().display()
                    );
                }
                println!("stopped daemon pid {}", ping["pid"]);
                Ok(ExitCode::SUCCESS)
            })
        }
        DaemonCommand::Status { workspace, json } => {
            let ws = Workspace::resolve(workspace.as_deref())?;
            rt.block_on(async {
                let Some((c, ping)) = connect_and_ping(&ws).await else {
                    if json {
                        println!(
                            "{}",
                            serde_json::to_string_pretty(&json!({
                                "running": false,
                                "workspace": ws.root,
                                "log": ws.daemon_log_path(),
                            }))?
                        );
                    } else {
                        eprintln!("no daemon runs for {}", ws.root.display());
                    }
                    return Ok(ExitCode::FAILURE);
                };
                let report = c.call("orch.boot_report", json!({})).await?;
                if json {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(
                            &json!({"running": true, "ping": ping, "boot_report": report})
                        )?
                    );
                } else {
                    println!(
                        "daemon pid {} profile {} workspace {}",
                        ping["pid"], ping["profile"], ping["workspace"]
                    );
                    println!("{}", lifetime_line(&ping));
                    println!(
                        "log: {}",
                        ping["log"]
                            .as_str()
                            .unwrap_or("the terminal of the process that runs it")
                    );
                    println!("booted: {}", report["booted"]);
                    if let Some(f) = report["failed"].as_object().filter(|f| !f.is_empty()) {
                        for (s, why) in f {
                            println!("failed: {s}: {}", why.as_str().unwrap_or(""));
                        }
                    }
                }
                Ok(ExitCode::SUCCESS)
            })
        }
    }
}

/// Who started the daemon and when it exits, from its ping's `lifetime`.
fn lifetime_line(ping: &Value) -> String {
    let l = &ping["lifetime"];
    let clients = l["clients"].as_u64().unwrap_or(0);
    match (l["kind"].as_str(), l["idle_exit_secs"].as_u64()) {
        (Some("spawned"), Some(idle)) => match l["exits_in_ms"].as_u64() {
            Some(ms) => format!(
                "lifetime: spawned by a client; no client attached, exits in {} s ({} = {idle})",
                ms.div_ceil(1000),
                vox_daemon::lifetime::IDLE_VAR
            ),
            None => format!(
                "lifetime: spawned by a client; {clients} client(s) attached, exits {idle} s after the last one leaves"
            ),
        },
        (Some("spawned"), None) => format!(
            "lifetime: spawned by a client; stays ({} = 0); {clients} client(s) attached",
            vox_daemon::lifetime::IDLE_VAR
        ),
        _ => format!(
            "lifetime: started (vox daemon start, vox serve or by hand); stays until `vox daemon stop`; {clients} client(s) attached"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
