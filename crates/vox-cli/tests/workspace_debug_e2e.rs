//! End to end through `vox mcp` and its daemon: debugging workspace tools. `print` reaches the
//! client as log messages and the daemon log, the refresh report lists every diagnostic per
//! file, the surface file's budgets apply to calls, and a record argument of the wrong shape is
//! an input error naming its path.
// rmcp marks logging deprecated (SEP-2577); 2025-era clients still use it.
#![allow(deprecated)]

mod common;

use common::*;
use rmcp::model::{CallToolRequestParams, LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The log messages the client was sent.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<LoggingMessageNotificationParam>>>);

impl ClientHandler for Logs {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }
}

impl Logs {
    fn take(&self) -> Vec<LoggingMessageNotificationParam> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
    /// Waits until `n` messages arrived (notifications may trail the answer by a moment).
    async fn wait_for(&self, n: usize) -> Vec<LoggingMessageNotificationParam> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.0.lock().unwrap().len() < n && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.take()
    }
}

type LogClient = RunningService<RoleClient, Logs>;

async fn logging_client(ws: &Ws) -> (LogClient, Logs) {
    let logs = Logs::default();
    let t = TokioChildProcess::new(ws.mcp_command(&[])).unwrap();
    (logs.clone().serve(t).await.expect("MCP initialize"), logs)
}

async fn call_tool(c: &LogClient, name: &str, args: Value) -> rmcp::model::CallToolResult {
    c.call_tool(
        CallToolRequestParams::new(name.to_owned())
            .with_arguments(args.as_object().cloned().unwrap_or_default()),
    )
    .await
    .unwrap()
}

fn write(ws: &Ws, rel: &str, text: &str) {
    let p = ws.root().join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

const NOISY: &str = "@tool \"Prints as it goes\"\nfn noisy(n: int) to int {\n    print(\"starting\")\n    let mut i = 0\n    while i < n {\n        i += 1\n        print(\"line {i}\")\n    }\n    n\n}\n";

#[tokio::test]
async fn print_in_a_workspace_tool_reaches_the_client_as_info_log_messages_and_the_daemon_log() {
    let ws = Ws::new()
        .with_env("VOX_LOG", "info")
        .with_env("VOX_WORKSPACE_WATCH", "0");
    write(&ws, "tools/noisy.vox", NOISY);
    let (c, logs) = logging_client(&ws).await;
    // No level set: nothing is sent.
    let r = call_tool(&c, "noisy", json!({"n": 2})).await;
    assert_eq!(r.structured_content, Some(json!({"result": 2})));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(logs.take().is_empty(), "logs sent without a level");

    c.set_level(rmcp::model::SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .unwrap();
    let r = call_tool(&c, "noisy", json!({"n": 2})).await;
    assert_eq!(r.structured_content, Some(json!({"result": 2})));
    let got = logs.wait_for(3).await;
    let seen: Vec<(LoggingLevel, Option<&str>, &Value)> = got
        .iter()
        .map(|m| (m.level, m.logger.as_deref(), &m.data))
        .collect();
    assert_eq!(
        seen,
        [
            (LoggingLevel::Info, Some("noisy"), &json!("starting")),
            (LoggingLevel::Info, Some("noisy"), &json!("line 1")),
            (LoggingLevel::Info, Some("noisy"), &json!("line 2")),
        ]
    );

    // A warning level filters the prints out.
    c.set_level(rmcp::model::SetLevelRequestParams::new(
        LoggingLevel::Warning,
    ))
    .await
    .unwrap();
    call_tool(&c, "noisy", json!({"n": 1})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        logs.take().is_empty(),
        "an info print passed a warning level"
    );

    // Past the per-call cap, the rest are counted in one warning.
    c.set_level(rmcp::model::SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .unwrap();
    call_tool(&c, "noisy", json!({"n": 1100})).await;
    let got = logs.wait_for(1001).await;
    assert_eq!(got.len(), 1001, "{:?}", got.last());
    assert_eq!(got[999].data, json!("line 999"));
    assert_eq!(got[1000].level, LoggingLevel::Warning);
    assert!(
        got[1000]
            .data
            .as_str()
            .unwrap()
            .starts_with("101 more printed or logged lines"),
        "{:?}",
        got[1000]
    );
    c.cancel().await.unwrap();

    // The daemon log has the prints, with the tool and file.
    let log = std::fs::read_to_string(ws.vox_dir().join("daemon.log")).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("print: starting"))
        .unwrap_or_else(|| panic!("no print in the daemon log:\n{log}"));
    assert!(line.contains("INFO"), "{line}");
    assert!(line.contains("noisy"), "{line}");
    assert!(line.contains("tools/noisy.vox"), "{line}");
    assert!(log.contains("print: line 1100"));
}

#[tokio::test]
async fn a_tool_with_a_small_budget_in_the_surface_file_fails_where_the_default_succeeds() {
    let ws = Ws::new().with_env("VOX_WORKSPACE_WATCH", "0");
    let body = "(n: int) to int {\n    let mut i = 0\n    while i < n {\n        i += 1\n    }\n    i\n}\n";
    write(
        &ws,
        "tools/count.vox",
        &format!("@tool\nfn count{body}\n@tool\nfn count_free{body}"),
    );
    write(
        &ws,
        "tools/other.vox",
        "@tool\nfn deep(n: int) to int {\n    if n == 0 { 0 } else { 1 + deep(n - 1) }\n}\n",
    );
    write(
        &ws,
        "contracts/mcp/workspace-mcp-surface.v1.yaml",
        "version: 1\nscan_globs: [\"tools/**/*.vox\"]\nbudgets:\n  files:\n    tools/other.vox: {max_call_depth: 20}\n  tools:\n    count: {max_steps: 1000}\n",
    );
    let c = ws.client(&[]).await;
    assert_eq!(
        ok(&c, "count_free", json!({"n": 5000})).await,
        json!({"result": 5000})
    );
    let e = err(&c, "count", json!({"n": 5000})).await;
    assert_eq!(
        e["detail"],
        json!({"code": "budget_exceeded", "data": {"limit": "steps"}})
    );
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.starts_with("count: budget_exceeded: step limit exceeded at tools/count.vox:"),
        "{e}"
    );
    assert!(
        msg.contains("max_steps = 1000, from budgets.tools.count in contracts/mcp/workspace-mcp-surface.v1.yaml"),
        "{e}"
    );
    // Small inputs stay within it.
    assert_eq!(
        ok(&c, "count", json!({"n": 10})).await,
        json!({"result": 10})
    );
    // The file's depth limit applies to its tools.
    assert_eq!(
        ok(&c, "deep", json!({"n": 10})).await,
        json!({"result": 10})
    );
    let e = err(&c, "deep", json!({"n": 50})).await;
    let msg = e["message"].as_str().unwrap();
    assert!(msg.contains("recursion depth limit exceeded"), "{e}");
    assert!(msg.contains("max_call_depth = 20 ("), "{e}");
    assert!(
        msg.contains(
            "from budgets.files.tools/other.vox in contracts/mcp/workspace-mcp-surface.v1.yaml"
        ),
        "{e}"
    );

    // Raising the budget in the file takes effect at the next refresh.
    write(
        &ws,
        "contracts/mcp/workspace-mcp-surface.v1.yaml",
        "version: 1\nscan_globs: [\"tools/**/*.vox\"]\nbudgets:\n  tools:\n    count: {max_steps: 1000000}\n",
    );
    ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert_eq!(
        ok(&c, "count", json!({"n": 5000})).await,
        json!({"result": 5000})
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_bad_surface_file_is_a_clear_error_in_the_refresh_report() {
    let ws = Ws::new().with_env("VOX_WORKSPACE_WATCH", "0");
    write(&ws, "tools/one.vox", "@tool\nfn one() to int { 1 }\n");
    write(
        &ws,
        "contracts/mcp/workspace-mcp-surface.v1.yaml",
        "version: 1\nscan_globs: [\"tools/**/*.vox\"]\nbudgets:\n  tools:\n    one: {max_wall_ms: 900000}\n",
    );
    let c = ws.client(&[]).await;
    let report = ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert_eq!(report["tool_count"], 0, "{report}");
    let e = &report["errors"][0];
    assert_eq!(e["file"], "contracts/mcp/workspace-mcp-surface.v1.yaml");
    assert!(
        e["diagnostic"]
            .as_str()
            .unwrap()
            .contains("budgets.tools.one.max_wall_ms is 900000, above the cap of 300000"),
        "{report}"
    );
    let d = &report["diagnostics"][0];
    assert_eq!(d["file"], "contracts/mcp/workspace-mcp-surface.v1.yaml");
    assert_eq!(d["diagnostics"][0]["code"], "vox/workspace/surface-config");
    assert_eq!(d["diagnostics"][0]["line"], 5);
    // An unknown key names itself.
    write(
        &ws,
        "contracts/mcp/workspace-mcp-surface.v1.yaml",
        "version: 1\nscan_globs: [\"tools/**/*.vox\"]\nbudgets:\n  tools:\n    one: {max_time: 5}\n",
    );
    let report = ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    let msg = report["errors"][0]["diagnostic"].as_str().unwrap();
    assert!(msg.contains("unknown field `max_time`"), "{msg}");
    assert!(msg.contains("workspace-mcp-surface.v1.yaml"), "{msg}");
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn the_refresh_report_lists_every_diagnostic_of_every_file() {
    let ws = Ws::new().with_env("VOX_WORKSPACE_WATCH", "0");
    write(
        &ws,
        "tools/bad.vox",
        "@tool\nfn one( to int { 1 }\n\n@tool\nfn two() to int {\n    ret 2\n}\n\n@tool\nfn three() { let = 3 }\n",
    );
    write(
        &ws,
        "tools/ui.vox",
        "component Panel() {\n    <div>hi</div>\n}\n\n@mcp.tool \"Old\"\nfn old() to int { 1 }\n",
    );
    write(&ws, "tools/clean.vox", "@tool\nfn clean() to int { 1 }\n");
    let c = ws.client(&[]).await;
    let report = ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    let files: Vec<&str> = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["file"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["tools/bad.vox", "tools/ui.vox"], "{report}");
    let bad = &report["diagnostics"][0];
    // What compiled is served: `two` has only a warning.
    assert_eq!(bad["loaded"], true);
    assert_eq!(bad["warnings"], 1);
    let lines: Vec<u64> = bad["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            for k in ["code", "severity", "message"] {
                assert!(d[k].is_string(), "{d}");
            }
            assert!(d["column"].as_u64().unwrap() >= 1);
            d["line"].as_u64().unwrap()
        })
        .collect();
    for l in [2, 6, 10] {
        assert!(lines.contains(&l), "no diagnostic on line {l}: {bad}");
    }
    let ui = &report["diagnostics"][1];
    assert_eq!(ui["loaded"], true);
    assert_eq!(
        ui["diagnostics"][0]["code"],
        "vox/decorator/mcp-tool-deprecated"
    );
    assert!(
        ui["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("1:1 vox/interp/not-executable:"),
        "{ui}"
    );
    // The old fields still say which file failed.
    assert_eq!(report["errors"].as_array().unwrap().len(), 1);
    assert_eq!(report["errors"][0]["file"], "tools/bad.vox");
    // clean, old, and bad.vox's `two`.
    assert_eq!(report["tool_count"], 3);
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_record_argument_of_the_wrong_shape_is_an_input_error_naming_its_path() {
    let ws = Ws::new().with_env("VOX_WORKSPACE_WATCH", "0");
    write(
        &ws,
        "tools/orders.vox",
        "type Line { sku: str, qty: int }\ntype Order { id: str, lines: list[Line] }\n\n@tool\nfn units(order: Order) to int {\n    order.lines.fold(0, fn(acc, l) { acc + l.qty })\n}\n",
    );
    let c = ws.client(&[]).await;
    let good =
        json!({"order": {"id": "o", "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 3}]}});
    assert_eq!(ok(&c, "units", good).await, json!({"result": 5}));
    let bad =
        json!({"order": {"id": "o", "lines": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": "3"}]}});
    let e = err(&c, "units", bad).await;
    assert_eq!(e["code"], "invalid_arguments", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("`order.lines[1].qty` must be an integer, got string"),
        "{e}"
    );
    let missing = json!({"order": {"lines": []}});
    let e = err(&c, "units", missing).await;
    assert_eq!(e["code"], "invalid_arguments", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("`order.id` is missing"),
        "{e}"
    );
    c.cancel().await.unwrap();
}

/// Files written the way real Vox projects are (tables, endpoints, components, std namespaces,
/// script statements, a declaration with a syntax error) federate their tools through
/// `vox mcp`: what runs answers, a tool that uses an effect is listed with the reason and
/// fails with it, a broken declaration costs only itself, `fs.read` sees the workspace.
#[tokio::test]
async fn real_vox_files_federate_every_tool_that_compiles() {
    let ws = Ws::new()
        .with_env("VOX_WORKSPACE_WATCH", "0")
        .with_env("VOX_MCP_WORKSPACE_TOOLS", "1");
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../vox-lang/tests/fixtures/realvox");
    for name in ["app.vox", "scripts.vox", "broken.vox", "config.json"] {
        let text = std::fs::read_to_string(fixtures.join(name)).unwrap();
        write(&ws, &format!("realvox/{name}"), &text);
    }
    let c = ws.client(&[]).await;
    let listed = tools(&c).await;
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
    for want in [
        "order_total",
        "describe",
        "config_path",
        "read_config",
        "release",
        "first",
        "second",
        "calls_broken",
    ] {
        assert!(names.contains(&want), "{want} not listed: {names:?}");
    }
    assert!(
        !names.contains(&"broken"),
        "a declaration with a syntax error is served"
    );
    // A tool that itself needs an effect is listed, and says why calling it fails.
    let git = listed
        .iter()
        .find(|t| t.name == "git_status")
        .expect("listed");
    assert_eq!(
        git.meta.as_ref().unwrap()["vox_not_executable"],
        "`std.process.run` runs processes"
    );
    let order = listed.iter().find(|t| t.name == "order_total").unwrap();
    assert!(
        order
            .meta
            .as_ref()
            .unwrap()
            .get("vox_not_executable")
            .is_none()
    );
    assert_eq!(
        ok(&c, "order_total", json!({"prices": ["19.99", 5]})).await["result"],
        "26.9892"
    );
    let config = ok(&c, "read_config", json!({"file": "realvox/config.json"})).await;
    assert_eq!(config["level"], 2, "{config}");
    let outside = err(&c, "read_config", json!({"file": "../../etc/passwd"})).await;
    assert!(
        outside["message"].as_str().unwrap().contains("outside"),
        "{outside}"
    );
    let release = err(&c, "release", json!({})).await;
    assert!(
        release["message"]
            .as_str()
            .unwrap()
            .contains("`std.process.run` runs processes"),
        "{release}"
    );
    let report = ok(&c, "vox_workspace_mcp_refresh", json!({})).await;
    let broken = report["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["file"] == "realvox/broken.vox")
        .expect("broken.vox reported");
    assert_eq!(broken["loaded"], true);
    assert_eq!(broken["errors"], 2, "{broken}");
    c.cancel().await.unwrap();
}
