//! `vox mesh …`: this node's key (read from the workspace, no daemon) and the mesh as the
//! running daemon sees it (asked through its socket).

use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::path::Path;
use std::process::ExitCode;
use vox_cli::args::MeshCommand;
use vox_core::Workspace;

use super::runtime;

/// Runs `vox mesh key` or `vox mesh status`.
pub fn run(cmd: MeshCommand) -> Result<ExitCode> {
    match cmd {
        MeshCommand::Key { workspace } => {
            let ws = Workspace::resolve(workspace.dir())?;
            ws.ensure_vox_dir()?;
            let key = vox_mesh::NodeKey::load_or_create(&ws.vox_dir.join("mesh-node.nk"))?;
            println!("{}", key.id());
            Ok(ExitCode::SUCCESS)
        }
        MeshCommand::Status { workspace, output } => status(workspace.dir(), output.json),
    }
}

/// Asks the daemon for its nodes and queue statistics; exit 1 when no daemon runs.
fn status(workspace: Option<&Path>, json: bool) -> Result<ExitCode> {
    let ws = Workspace::resolve(workspace)?;
    runtime()?.block_on(async {
        if vox_daemon::client::connect_and_ping(&ws).await.is_none() {
            eprintln!("no daemon runs for {}", ws.root.display());
            return Ok(ExitCode::FAILURE);
        }
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
        print_status(nodes, stats);
        Ok(ExitCode::SUCCESS)
    })
}

/// One line per node, then this node's queues (or why there are none).
fn print_status(nodes: &Value, stats: &Value) {
    println!(
        "{:<58} {:<12} {:<9} {:>6} {:>8} {:>8}",
        "NODE", "NAME", "STATUS", "AGENTS", "PENDING", "LAG_MS"
    );
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
            r["inbox_waiting"],
            r["inbox_unacked"],
            r["results_waiting"],
            r["calls_out_open"],
            r["calls_in_open"],
            r["refused"]
        ),
        None => println!("embedded mesh: no messaging engine configured (VOX_MESH_NATS_URL)"),
    }
}
