//! `vox audit`: the audit trail, through the running daemon (`vox_audit_query`) or, with no
//! daemon, from the workspace's journey store.

use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use vox_core::Workspace;

use super::runtime;

/// Prints the newest `limit` records (of `tool`), then with `follow` every new one.
pub fn run(
    workspace: Option<&Path>,
    json: bool,
    follow: bool,
    limit: u32,
    tool: Option<String>,
) -> Result<ExitCode> {
    if !(1..=1000).contains(&limit) {
        bail!("--limit: between 1 and 1000");
    }
    let ws = Workspace::resolve(workspace)?;
    runtime()?.block_on(async {
        let mut after: Option<i64> = None;
        loop {
            let page = page(&ws, after, limit, tool.as_deref()).await?;
            for r in page["records"].as_array().into_iter().flatten() {
                print_record(r, json);
            }
            after = page["next"].as_i64().or(after);
            if !follow {
                return Ok(ExitCode::SUCCESS);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

async fn page(ws: &Workspace, after: Option<i64>, limit: u32, tool: Option<&str>) -> Result<Value> {
    if vox_daemon::client::connect_and_ping(ws).await.is_some() {
        let mut args = json!({"limit": limit});
        if let Some(a) = after {
            args["after"] = json!(a);
        }
        if let Some(t) = tool {
            args["tool"] = json!(t);
        }
        return vox_mcp::stdio::socket_call(ws, "vox_audit_query", args)
            .await
            .map_err(|e| anyhow::anyhow!("vox_audit_query: {e}"));
    }
    let db = ws.vox_dir.join("journey.db");
    if !db.exists() {
        return Ok(json!({"records": [], "next": after.unwrap_or(0)}));
    }
    let store = vox_store::Store::open(&db)?;
    let records = store.audit_query(after, i64::from(limit), tool)?;
    let next = records.last().map_or(after.unwrap_or(0), |r| r.seq);
    Ok(json!({"records": records, "next": next}))
}

fn print_record(r: &Value, json: bool) {
    if json {
        println!("{r}");
        return;
    }
    let at = r["at"].as_i64().unwrap_or(0);
    let who = match (r["agent"].as_str(), r["mesh_node"].as_str()) {
        (Some(a), _) => format!("agent {a}"),
        (None, Some(n)) => format!("node {n}"),
        _ => r["principal"].as_str().unwrap_or("").to_owned(),
    };
    println!(
        "{:>6} {} {:<24} {:<5} {:<40} {:<8} {:<22} {:>8} µs",
        r["seq"],
        at,
        who,
        r["role"].as_str().unwrap_or(""),
        r["tool"].as_str().unwrap_or(""),
        r["decision"].as_str().unwrap_or(""),
        r["code"].as_str().unwrap_or(""),
        r["duration_us"],
    );
}
