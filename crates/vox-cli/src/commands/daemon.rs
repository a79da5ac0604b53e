//! `vox daemon …`: start (or adopt), stop and inspect the workspace daemon through its socket.

use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::path::Path;
use std::process::ExitCode;
use tokio::runtime::Runtime;
use vox_cli::args::DaemonCommand;
use vox_core::Workspace;
use vox_daemon::client::{Use, adopt_or_spawn, connect_and_ping};

use super::{profile_or_exit, runtime};

/// Runs `vox daemon start`, `stop` or `status`.
pub fn run(cmd: DaemonCommand) -> Result<ExitCode> {
    let rt = runtime()?;
    match cmd {
        DaemonCommand::Start {
            profile,
            workspace,
            json,
        } => start(&rt, profile.profile.as_deref(), workspace.dir(), json),
        DaemonCommand::Stop { workspace } => stop(&rt, workspace.dir()),
        DaemonCommand::Status { workspace, json } => status(&rt, workspace.dir(), json),
    }
}

/// Adopts the daemon that serves the workspace, or spawns one that stays until stopped.
fn start(
    rt: &Runtime,
    profile: Option<&str>,
    workspace: Option<&Path>,
    json: bool,
) -> Result<ExitCode> {
    let profile = match profile_or_exit(profile, workspace) {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    let ws = Workspace::resolve(workspace)?;
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

/// Asks the daemon to shut down; success also when none runs.
fn stop(rt: &Runtime, workspace: Option<&Path>) -> Result<ExitCode> {
    let ws = Workspace::resolve(workspace)?;
    rt.block_on(async {
        let Some((c, ping)) = connect_and_ping(&ws).await else {
            println!("no daemon runs for {}", ws.root.display());
            return Ok(ExitCode::SUCCESS);
        };
        c.call("orch.shutdown", json!({})).await?;
        // Return once the process is gone, so a following start does not race it.
        if !vox_daemon::client::wait_until_stopped(&ws, std::time::Duration::from_secs(15)).await {
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

/// The daemon's ping and boot report; exit 1 when no daemon runs.
fn status(rt: &Runtime, workspace: Option<&Path>, json: bool) -> Result<ExitCode> {
    let ws = Workspace::resolve(workspace)?;
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
        // Upstream servers start after boot: their state now goes with the boot report.
        let upstream = match super::upstream::servers(&ws).await {
            Ok((servers, true)) => servers,
            _ => json!([]),
        };
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({
                    "running": true, "ping": ping, "boot_report": report, "upstream": upstream,
                }))?
            );
        } else {
            print_status(&ping, &report);
            for s in upstream.as_array().into_iter().flatten() {
                println!(
                    "upstream {}: {}{}",
                    s["id"].as_str().unwrap_or(""),
                    s["status"].as_str().unwrap_or(""),
                    s["error"]
                        .as_str()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// The text form of `vox daemon status`.
fn print_status(ping: &Value, report: &Value) {
    println!(
        "daemon pid {} profile {} workspace {}",
        ping["pid"], ping["profile"], ping["workspace"]
    );
    println!("{}", lifetime_line(ping));
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
