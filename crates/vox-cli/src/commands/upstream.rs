//! `vox upstream status` and `vox upstream approve`: through the running daemon's tools
//! (`vox_upstream_status`, `vox_upstream_approve`), or, with no daemon, from the declared
//! servers and the pins in the journey store.

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::path::Path;
use std::process::ExitCode;
use vox_cli::args::UpstreamCommand;
use vox_core::Workspace;

use super::runtime;

/// Runs `vox upstream status` or `vox upstream approve`.
pub fn run(cmd: UpstreamCommand) -> Result<ExitCode> {
    match cmd {
        UpstreamCommand::Status { workspace, output } => status(workspace.dir(), output.json),
        UpstreamCommand::Approve {
            server,
            tool,
            workspace,
        } => approve(workspace.dir(), &server, tool.as_deref()),
    }
}

/// Every declared server's state: the running daemon's (`true`), else the declared servers
/// and their pins (`false`).
pub(super) async fn servers(ws: &Workspace) -> Result<(Value, bool)> {
    if vox_daemon::client::connect_and_ping(ws).await.is_none() {
        return Ok((offline_status(ws)?, false));
    }
    match vox_mcp::stdio::socket_call(ws, "vox_upstream_status", json!({})).await {
        Ok(v) => Ok((v["servers"].clone(), true)),
        // A daemon whose profile runs no upstream server: what is declared, as without one.
        Err(e) if e.contains("tool_not_in_profile") || e.contains("subsystem_not_booted") => {
            Ok((offline_status(ws)?, false))
        }
        Err(e) => bail!("vox_upstream_status: {e}"),
    }
}

fn status(workspace: Option<&Path>, json: bool) -> Result<ExitCode> {
    let ws = Workspace::resolve(workspace)?;
    let (servers, _) = runtime()?.block_on(servers(&ws))?;
    let healthy = servers.as_array().into_iter().flatten().all(|s| {
        s["status"] == "ready"
            && s["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|t| t["withheld"].is_null())
    });
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"servers": servers}))?
        );
    } else {
        print_status(&servers);
    }
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The declared servers and their pins, with no daemon to ask (each `stopped`).
fn offline_status(ws: &Workspace) -> Result<Value> {
    let configs = vox_tools_upstream::config::load(
        &ws.vox_dir,
        vox_tools_upstream::config::user_vox_dir().as_deref(),
    )?;
    let db = ws.vox_dir.join("journey.db");
    let store = if db.exists() {
        Some(vox_store::Store::open(&db).with_context(|| db.display().to_string())?)
    } else {
        None
    };
    let mut out = Vec::new();
    for c in configs {
        let pins = match &store {
            Some(s) => s.upstream_pins(Some(&c.id))?,
            None => Vec::new(),
        };
        let tools: Vec<Value> = pins
            .iter()
            .map(|p| {
                let withheld = match &p.approved {
                    Some(a) if *a == p.seen => Value::Null,
                    Some(_) => json!("changed"),
                    None => json!("new"),
                };
                json!({"tool": p.tool, "served_as": format!("{}__{}", c.id, p.tool), "withheld": withheld, "hash": p.seen})
            })
            .collect();
        out.push(json!({
            "id": c.id, "file": c.file.display().to_string(), "status": "stopped",
            "error": "not running: no daemon runs its servers here", "failures": 0, "restarts": 0, "tools": tools,
        }));
    }
    Ok(Value::Array(out))
}

fn print_status(servers: &Value) {
    let list = servers.as_array().cloned().unwrap_or_default();
    if list.is_empty() {
        println!("no upstream servers are declared (.vox/servers.toml, ~/.vox/servers.toml)");
        return;
    }
    for s in list {
        let tools = s["tools"].as_array().cloned().unwrap_or_default();
        let withheld: Vec<&Value> = tools.iter().filter(|t| !t["withheld"].is_null()).collect();
        println!(
            "{:<16} {:<12} {} tools served, {} withheld, {} restarts",
            s["id"].as_str().unwrap_or(""),
            s["status"].as_str().unwrap_or(""),
            tools.len() - withheld.len(),
            withheld.len(),
            s["restarts"],
        );
        if let Some(e) = s["error"].as_str() {
            println!("  error: {e}");
        }
        for t in withheld {
            println!(
                "  withheld ({}): {}  (vox upstream approve {} {})",
                t["withheld"].as_str().unwrap_or(""),
                t["served_as"].as_str().unwrap_or(""),
                s["id"].as_str().unwrap_or(""),
                t["tool"].as_str().unwrap_or(""),
            );
        }
    }
}

fn approve(workspace: Option<&Path>, server: &str, tool: Option<&str>) -> Result<ExitCode> {
    let ws = Workspace::resolve(workspace)?;
    let mut args = json!({"server": server});
    if let Some(t) = tool {
        args["tool"] = json!(t);
    }
    let pins = runtime()?.block_on(async {
        if vox_daemon::client::connect_and_ping(&ws).await.is_some() {
            return match vox_mcp::stdio::socket_call(&ws, "vox_upstream_approve", args).await {
                Ok(v) => Ok(v["pins"].clone()),
                Err(e) => bail!("vox_upstream_approve: {e}"),
            };
        }
        let db = ws.vox_dir.join("journey.db");
        if !db.exists() {
            bail!(
                "{} has no pins yet: no daemon has listed its servers",
                db.display()
            );
        }
        let store = vox_store::Store::open(&db)?;
        let pins = store.upstream_approve(server, tool, "vox upstream approve")?;
        if pins.is_empty() {
            bail!(
                "no pinned tool of upstream server {server}{}",
                tool.map(|t| format!(" named {t}")).unwrap_or_default()
            );
        }
        Ok(serde_json::to_value(pins)?)
    })?;
    for p in pins.as_array().into_iter().flatten() {
        println!(
            "{}__{}  {}",
            server,
            p["tool"].as_str().unwrap_or(""),
            if p["approved"] == p["seen"] {
                "approved"
            } else {
                "withheld"
            }
        );
    }
    Ok(ExitCode::SUCCESS)
}
