//! End to end with the rmcp client over the real `vox mcp` and daemon: cancellation reaches the
//! work (a sandboxed process tree, an interpreter loop), progress and log messages reach the
//! client, `logging/setLevel` filters, clients of one daemon choose their own workspace-tool
//! listing, an idle daemon stays idle, and a changed description is a `list_changed`.
// rmcp marks logging deprecated (SEP-2577); 2025-era clients still use it.
#![allow(deprecated)]

mod common;

use common::*;
use rmcp::model::{
    CallToolRequestParams, LoggingMessageNotificationParam, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the client was sent besides answers.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Seen>>);

#[derive(Default)]
struct Seen {
    progress: Vec<ProgressNotificationParam>,
    logs: Vec<LoggingMessageNotificationParam>,
    tools_changed: usize,
}

impl Recorder {
    fn seen<T>(&self, f: impl FnOnce(&mut Seen) -> T) -> T {
        f(&mut self.0.lock().unwrap())
    }
}

#[allow(deprecated)]
impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.seen(|s| s.progress.push(params));
    }
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.seen(|s| s.logs.push(params));
    }
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.seen(|s| s.tools_changed += 1);
    }
}

type RecClient = RunningService<RoleClient, Recorder>;

async fn recording_client(ws: &Ws, args: &[&str]) -> (RecClient, Recorder) {
    let rec = Recorder::default();
    let t = TokioChildProcess::new(ws.mcp_command(args)).unwrap();
    (rec.clone().serve(t).await.expect("MCP initialize"), rec)
}

async fn call_rec(c: &RecClient, name: &str, args: Value) -> rmcp::model::CallToolResult {
    c.call_tool(
        CallToolRequestParams::new(name.to_owned())
            .with_arguments(args.as_object().cloned().unwrap_or_default()),
    )
    .await
    .unwrap()
}

/// User + system CPU time of a process, in clock ticks.
fn cpu_ticks(pid: u64) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesised command name: state is field 3; utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn write(ws: &Ws, rel: &str, text: &str) {
    let p = ws.root().join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn sleeper_skill(ws: &Ws) {
    write(
        ws,
        ".vox/skills/sleeper/SKILL.md",
        "---\nname: sleeper\ndescription: Runs commands that take a while.\n---\nRun things.\n",
    );
}

#[tokio::test]
async fn cancelling_a_skill_run_kills_its_process_tree_within_a_second() {
    let ws = Ws::new();
    sleeper_skill(&ws);
    let (c, rec) = recording_client(&ws, &[]).await;
    let marker = format!("30.{}", std::process::id());
    let script = format!("sleep {marker} & sleep {marker}; wait");
    let mut call = Box::pin(call_rec(
        &c,
        "vox_skill_run",
        json!({"id": "sleeper", "command": ["sh", "-c", script], "timeout_ms": 25000}),
    ));
    let started = Instant::now();
    // Wait until both sleeps run, then drop the call: rmcp sends notifications/cancelled.
    loop {
        tokio::select! {
            r = &mut call => panic!("the run ended before it was cancelled: {r:?}"),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        if pids_running(&format!("sleep {marker}")).len() >= 2 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the sleeps never started"
        );
    }
    drop(call);
    let cancelled = Instant::now();
    while !pids_running(&format!("sleep {marker}")).is_empty() {
        assert!(
            cancelled.elapsed() < Duration::from_secs(1),
            "sleep still running {:?} after cancel",
            cancelled.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The run reported progress while it ran (every 500 ms).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let progress = rec.seen(|s| s.progress.len());
    // The daemon still serves, and the cancelled call sent nothing after its cancel.
    let r = call_rec(&c, "vox_skill_list", json!({})).await;
    assert_ne!(r.is_error, Some(true));
    assert_eq!(rec.seen(|s| s.progress.len()), progress);
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn cancelling_a_looping_vox_tool_stops_the_interpreter() {
    let ws = Ws::new();
    // The default 10 million steps take well under the 500 ms below on a fast machine.
    spinner(&ws);
    let c = ws.client(&[]).await;
    let pid = daemon_pid(&ws);
    let spin = call(&c, "spin", json!({}));
    let cut = tokio::time::timeout(Duration::from_millis(500), spin).await;
    assert!(cut.is_err(), "spin returned: {cut:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = cpu_ticks(pid) - before;
    // A loop still running would use about 100 ticks (one core) in that second.
    assert!(
        used < 20,
        "the daemon used {used} ticks in the second after the cancel"
    );
    assert!(ok(&c, "vox_grammar", json!({})).await["grammar"].is_string());
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn kb_ingest_of_500_files_reports_progress_and_logs_at_the_clients_level() {
    let ws = Ws::new();
    for i in 0..500 {
        write(
            &ws,
            &format!("docs/d{i:03}.md"),
            &format!("# Doc {i}\nword{i} text\n"),
        );
    }
    let (c, rec) = recording_client(&ws, &["--profile", "knowledge"]).await;
    // No level set: no log messages.
    let r = call_rec(&c, "vox_kb_ingest", json!({"path": "docs/**/*.md"})).await;
    assert_ne!(r.is_error, Some(true), "{:?}", r.structured_content);
    assert_eq!(r.structured_content.unwrap()["ingested"], 500);
    let progress = rec.seen(|s| std::mem::take(&mut s.progress));
    assert!(
        progress.len() >= 500,
        "{} progress notifications",
        progress.len()
    );
    assert!(progress.windows(2).all(|w| w[0].progress <= w[1].progress));
    assert_eq!(progress.last().unwrap().progress, 500.0);
    assert_eq!(progress.last().unwrap().total, Some(500.0));
    assert!(rec.seen(|s| s.logs.is_empty()));

    let warning = rmcp::model::LoggingLevel::Warning;
    c.set_level(rmcp::model::SetLevelRequestParams::new(warning))
        .await
        .unwrap();
    call_rec(&c, "vox_kb_ingest", json!({"path": "docs/**/*.md"})).await;
    assert!(
        rec.seen(|s| s.logs.is_empty()),
        "an info message passed a warning level"
    );

    let info = rmcp::model::LoggingLevel::Info;
    c.set_level(rmcp::model::SetLevelRequestParams::new(info))
        .await
        .unwrap();
    call_rec(&c, "vox_kb_ingest", json!({"path": "docs/**/*.md"})).await;
    let logs = rec.seen(|s| std::mem::take(&mut s.logs));
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert_eq!(logs[0].logger.as_deref(), Some("kb"));
    assert_eq!(logs[0].data, json!("ingesting 500 documents"));
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_vox_tool_reports_progress_and_logs_to_its_caller() {
    let ws = Ws::new();
    write(
        &ws,
        "tools/steps.vox",
        "@tool \"Counts to n, telling the caller\"\nfn steps(n: int) to int {\n    for i in range(1, n + 1) {\n        progress(i, n, \"step \" + str(i))\n        log(\"warning\", \"step \" + str(i))\n    }\n    n\n}\n",
    );
    let (c, rec) = recording_client(&ws, &[]).await;
    // No level chosen: progress only.
    let r = call_rec(&c, "steps", json!({"n": 3})).await;
    assert_eq!(r.structured_content, Some(json!({"result": 3})));
    let progress = rec.seen(|s| std::mem::take(&mut s.progress));
    let got: Vec<_> = progress
        .iter()
        .map(|p| (p.progress, p.total, p.message.clone()))
        .collect();
    assert_eq!(
        got,
        [1.0, 2.0, 3.0].map(|i| (i, Some(3.0), Some(format!("step {i}"))))
    );
    assert!(rec.seen(|s| s.logs.is_empty()));
    c.set_level(rmcp::model::SetLevelRequestParams::new(
        rmcp::model::LoggingLevel::Warning,
    ))
    .await
    .unwrap();
    call_rec(&c, "steps", json!({"n": 3})).await;
    let logs = rec.seen(|s| std::mem::take(&mut s.logs));
    let got: Vec<_> = logs
        .iter()
        .map(|l| (l.logger.clone(), l.data.clone()))
        .collect();
    assert_eq!(
        got,
        (1..=3)
            .map(|i| (Some("steps".to_owned()), json!(format!("step {i}"))))
            .collect::<Vec<_>>()
    );
    c.set_level(rmcp::model::SetLevelRequestParams::new(
        rmcp::model::LoggingLevel::Error,
    ))
    .await
    .unwrap();
    call_rec(&c, "steps", json!({"n": 2})).await;
    assert!(
        rec.seen(|s| s.logs.is_empty()),
        "a warning passed an error level"
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn workspace_refresh_reports_progress_and_warns_about_broken_files() {
    let ws = Ws::new();
    write(
        &ws,
        "tools/ok.vox",
        "@tool \"One\"\nfn one() to int { 1 }\n",
    );
    write(
        &ws,
        "tools/bad.vox",
        "@tool \"Broken\"\nfn broken( to int { 1 }\n",
    );
    let (c, rec) = recording_client(&ws, &[]).await;
    c.set_level(rmcp::model::SetLevelRequestParams::new(
        rmcp::model::LoggingLevel::Warning,
    ))
    .await
    .unwrap();
    let r = call_rec(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert_ne!(r.is_error, Some(true));
    let (progress, logs) = rec.seen(|s| (s.progress.clone(), s.logs.clone()));
    assert_eq!(
        progress.last().map(|p| (p.progress, p.total)),
        Some((2.0, Some(2.0)))
    );
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(
        logs[0]
            .data
            .as_str()
            .unwrap()
            .starts_with("tools/bad.vox has errors (what compiled is served)"),
        "{logs:?}"
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn two_clients_of_one_daemon_choose_their_own_workspace_listing() {
    let ws = Ws::new();
    write(
        &ws,
        "tools/one.vox",
        "@tool \"One\"\nfn one() to int { 1 }\n",
    );
    let plain = ws.client(&[]).await;
    let mut cmd = ws.mcp_command(&[]);
    cmd.env("VOX_MCP_WORKSPACE_TOOLS", "1");
    let listing = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let with: Vec<String> = tool_names(&listing).await;
    let without: Vec<String> = tool_names(&plain).await;
    assert!(with.iter().any(|n| n == "one"), "{with:?}");
    assert!(!without.iter().any(|n| n == "one"), "{without:?}");
    // Both are served by one daemon, and both may call the tool.
    assert_eq!(ok(&plain, "one", json!({})).await["result"], 1);
    assert_eq!(ok(&listing, "one", json!({})).await["result"], 1);
    listing.cancel().await.unwrap();
    plain.cancel().await.unwrap();
}

#[tokio::test]
async fn an_idle_daemon_watching_a_workspace_uses_no_cpu_and_writes_no_log() {
    // At info, every refresh writes a line: a daemon that rescans itself shows in its log.
    let ws = Ws::new().with_env("VOX_LOG", "info");
    write(
        &ws,
        "tools/one.vox",
        "@tool \"One\"\nfn one() to int { 1 }\n",
    );
    for i in 0..200 {
        write(
            &ws,
            &format!("tools/gen/t{i}.vox"),
            &format!("@tool \"T{i}\"\nfn t{i}() to int {{ {i} }}\n"),
        );
    }
    let c = ws.client(&[]).await;
    // Make it scan and watch, then leave it alone.
    assert_eq!(ok(&c, "one", json!({})).await["result"], 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = daemon_pid(&ws);
    let log = ws.vox_dir().join("daemon.log");
    let log_len = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let used = cpu_ticks(pid) - before;
    // 1% of a core over 10 s is 10 ticks.
    assert!(used < 10, "the idle daemon used {used} ticks in 10 s");
    assert_eq!(
        std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0),
        log_len,
        "the idle daemon's log grew"
    );
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_changed_description_alone_is_a_tool_list_change() {
    // Refreshed by hand only: the watcher would race the explicit refreshes.
    let ws = Ws::new()
        .with_env("VOX_WORKSPACE_WATCH", "0")
        .with_env("VOX_MCP_WORKSPACE_TOOLS", "1");
    write(
        &ws,
        "tools/one.vox",
        "@tool \"One\"\nfn one() to int { 1 }\n",
    );
    let (c, rec) = recording_client(&ws, &[]).await;
    let first = call_rec(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert_ne!(first.is_error, Some(true));
    let description = |tools: Vec<rmcp::model::Tool>| {
        tools
            .into_iter()
            .find(|t| t.name == "one")
            .and_then(|t| t.description)
            .map(|d| d.to_string())
    };
    // Listed (and cached by `vox mcp`) before the change.
    assert_eq!(
        description(c.list_all_tools().await.unwrap()).as_deref(),
        Some("One")
    );
    write(
        &ws,
        "tools/one.vox",
        "@tool \"The number one\"\nfn one() to int { 1 }\n",
    );
    let r = call_rec(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert_eq!(r.structured_content.unwrap()["changed"], true);
    let deadline = Instant::now() + Duration::from_secs(5);
    while rec.seen(|s| s.tools_changed) == 0 {
        assert!(Instant::now() < deadline, "no tools/list_changed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The cached list was dropped with the change: the next one has the new description.
    assert_eq!(
        description(c.list_all_tools().await.unwrap()).as_deref(),
        Some("The number one")
    );
    // An unchanged rescan is not a change.
    let r = call_rec(&c, "vox_workspace_mcp_refresh", json!({})).await;
    assert_eq!(r.structured_content.unwrap()["changed"], false);
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn the_call_deadline_stops_the_work_not_only_the_wait() {
    let ws = Ws::new().with_env("VOX_TOOL_TIMEOUT_MS", "500");
    sleeper_skill(&ws);
    let c = ws.client(&[]).await;
    let marker = format!("30.{}8", std::process::id());
    let started = Instant::now();
    let e = err(
        &c,
        "vox_skill_run",
        json!({"id": "sleeper", "command": ["sleep", marker], "timeout_ms": 25000}),
    )
    .await;
    assert_eq!(e["code"], "unavailable", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("did not finish within 500 ms")
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // The sandboxed process went with the deadline (the sandbox's own wall is 25 s).
    let after = Instant::now();
    while !pids_running(&format!("sleep {marker}")).is_empty() {
        assert!(
            after.elapsed() < Duration::from_secs(1),
            "sleep outlived the deadline"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.cancel().await.unwrap();
}

#[tokio::test]
async fn a_client_that_exits_mid_call_takes_its_work_with_it() {
    let ws = Ws::new();
    sleeper_skill(&ws);
    let c = ws.client(&[]).await;
    let marker = format!("30.{}9", std::process::id());
    let call = tokio::spawn({
        let peer = c.peer().clone();
        let marker = marker.clone();
        async move {
            peer.call_tool(
                CallToolRequestParams::new("vox_skill_run").with_arguments(
                    json!({"id": "sleeper", "command": ["sleep", marker], "timeout_ms": 25000})
                        .as_object()
                        .cloned()
                        .unwrap(),
                ),
            )
            .await
        }
    });
    let started = Instant::now();
    while pids_running(&format!("sleep {marker}")).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the sleep never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The `vox mcp` process goes away without a word (SIGKILL): its socket closes.
    let adapter = pids_running("vox mcp")
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/environ"))
                .unwrap_or_default()
                .contains(ws.root().to_str().unwrap())
        })
        .collect::<Vec<_>>();
    assert_eq!(adapter.len(), 1, "{adapter:?}");
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; the pid is this
    // test's own `vox mcp` (found by its workspace in /proc just above).
    unsafe { libc::kill(adapter[0] as i32, libc::SIGKILL) };
    let killed = Instant::now();
    while !pids_running(&format!("sleep {marker}")).is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(1),
            "sleep still running {:?} after its client died",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    call.abort();
}

/// A spinning tool that only a cancel or the daemon's death stops (the most steps and wall
/// time a tool may have).
fn spinner(ws: &Ws) {
    write(
        ws,
        "tools/spin.vox",
        "@tool \"Loop for ever\"\nfn spin() to int {\n    let mut i = 0\n    while true { i += 1 }\n    i\n}\n",
    );
    write(
        ws,
        "contracts/mcp/workspace-mcp-surface.v1.yaml",
        "version: 1\nscan_globs: [\"tools/**/*.vox\"]\nbudgets:\n  tools:\n    spin:\n      max_steps: 1000000000\n      max_wall_ms: 300000\n",
    );
}

/// `vox mcp` hands its stdin and stdout to the daemon, which serves the session itself: a
/// thousand calls cost `vox mcp` next to no CPU (relaying, they cost it a tick or more each
/// ten calls on this VM).
#[tokio::test]
async fn a_stdio_session_is_served_by_the_daemon_not_relayed() {
    let ws = Ws::new();
    let c = ws.client(&["--profile", "knowledge"]).await;
    ok(&c, "vox_memory_store", json!({"key": "k", "value": "v"})).await;
    let adapter = pids_running("vox mcp")
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/environ"))
                .unwrap_or_default()
                .contains(ws.root().to_str().unwrap())
        })
        .collect::<Vec<_>>();
    assert_eq!(adapter.len(), 1, "{adapter:?}");
    let before = cpu_ticks(adapter[0] as u64);
    for _ in 0..1000 {
        ok(&c, "vox_memory_recall", json!({"key": "k"})).await;
    }
    let used = cpu_ticks(adapter[0] as u64) - before;
    assert!(
        used <= 2,
        "vox mcp used {used} ticks over 1,000 handed-off calls"
    );
    c.cancel().await.unwrap();
}

/// A call in flight when the daemon dies is answered `daemon_unavailable` by `vox mcp` (from the
/// pending table the daemon kept), and the next call respawns the daemon.
#[tokio::test]
async fn a_call_in_flight_when_the_daemon_dies_is_answered_and_the_next_respawns() {
    let ws = Ws::new();
    spinner(&ws);
    let c = ws.client(&[]).await;
    let pid = daemon_pid(&ws);
    let answered = kill_daemon_under_call(c.peer(), "spin", pid).await;
    assert_eq!(answered.is_error, Some(true));
    let text = format!("{:?}", answered.content);
    assert!(text.contains("daemon_unavailable"), "{text}");
    assert!(text.contains("daemon.log"), "{text}");
    assert!(ok(&c, "vox_grammar", json!({})).await["grammar"].is_string());
    assert_ne!(daemon_pid(&ws), pid);
    c.cancel().await.unwrap();
}
