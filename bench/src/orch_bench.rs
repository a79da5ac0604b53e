//! orch-bench: the orchestrator profile's hot paths through a real `vox mcp` session (stdio,
//! JSON-RPC lines, one call at a time), in a fresh temporary workspace:
//!
//! 1. **submit → assigned**: `vox_submit_task` while an agent has room; the dispatcher assigns
//!    the task inside the call, so the round trip is the latency from submitting to assigned
//!    (checked in each answer). The agent completes it after each sample (not timed).
//! 2. **10,000 queued tasks**: `--queued` submits while no agent has room (calls/s), then
//!    `vox_task_status` of random tasks among them (calls/s), then one more submit → assigned
//!    with that queue behind it.
//! 3. **lock claims**: `vox_claim_file` of distinct paths by one agent (calls/s).
//! 4. **RSS**: the daemon's VmRSS with 8 idle agents registered (and the queue above).
//!
//! ```text
//! orch-bench [--vox PATH] [--samples N] [--queued N] [--claims N] [--json]
//! ```
//! `--vox` defaults to the `vox` beside this binary.

use serde_json::{Value, json};
use std::process::Command;
use std::time::Instant;
use vox_bench::{Mcp, summary};

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A tiny deterministic generator for the status lookups.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn main() {
    let mut vox = vox_bench::vox_beside_me();
    let (mut samples, mut queued, mut claims, mut as_json) =
        (1000usize, 10_000usize, 5000usize, false);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = || -> usize {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{a} needs a number"))
        };
        match a.as_str() {
            "--samples" => samples = num(),
            "--queued" => queued = num(),
            "--claims" => claims = num(),
            "--vox" => vox = args.next().expect("--vox needs a path"),
            "--json" => as_json = true,
            other => {
                panic!("unknown argument {other}; see the doc comment of bench/src/orch_bench.rs")
            }
        }
    }
    let ws = tempfile_dir("orchws");
    let home = tempfile_dir("orchhome");
    let mut m = Mcp::start(&vox, &ws, &home, "orchestrator", &[]);
    let mut out = serde_json::Map::new();

    // 1. submit → assigned, one agent with room.
    m.call("vox_spawn_agent", json!({"agent_id": "fast"}));
    let mut lat = Vec::with_capacity(samples);
    for i in 0..samples {
        let t = Instant::now();
        let s = m.call("vox_submit_task", json!({"title": format!("t{i}")}));
        lat.push(t.elapsed());
        assert_eq!(s["task"]["state"], "assigned", "{s}");
        m.call(
            "vox_complete_task",
            json!({"agent_id": "fast", "task_id": s["task"]["id"], "result": "ok"}),
        );
    }
    let (p50, p99) = summary(lat);
    out.insert(
        "submit_to_assigned_us".into(),
        json!({"p50": p50, "p99": p99, "samples": samples}),
    );

    // 2. A deep queue: nobody has room while it fills.
    m.call("vox_pause_agent", json!({"agent_id": "fast"}));
    let t = Instant::now();
    let mut ids = Vec::with_capacity(queued);
    for i in 0..queued {
        let s = m.call(
            "vox_submit_task",
            json!({"title": format!("q{i}"), "priority": (i % 7) as i64}),
        );
        ids.push(s["task"]["id"].as_i64().unwrap());
    }
    let submit_rate = queued as f64 / t.elapsed().as_secs_f64();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let lookups = queued.min(10_000);
    let t = Instant::now();
    for _ in 0..lookups {
        let id = ids[(xorshift(&mut seed) % ids.len() as u64) as usize];
        m.call("vox_task_status", json!({"task_id": id}));
    }
    let status_rate = lookups as f64 / t.elapsed().as_secs_f64();
    m.call("vox_resume_agent", json!({"agent_id": "fast"}));
    out.insert(
        "queued".into(),
        json!({"tasks": queued, "submit_calls_per_s": submit_rate, "status_calls_per_s": status_rate}),
    );

    // 3. Lock claims by one agent, distinct files.
    let t = Instant::now();
    for i in 0..claims {
        let c = m.call(
            "vox_claim_file",
            json!({"agent_id": "fast", "path": format!("src/f{i}.rs")}),
        );
        assert_eq!(c["outcome"], "granted", "{c}");
    }
    out.insert(
        "lock_claims_per_s".into(),
        json!(claims as f64 / t.elapsed().as_secs_f64()),
    );

    // 4. RSS with 8 idle agents (the ninth, `fast`, holds the queue and the locks above).
    for i in 0..8 {
        m.call("vox_spawn_agent", json!({"agent_id": format!("idle-{i}")}));
    }
    // The daemon's info file (pid, profile, socket) sits beside its socket.
    let info: Value = std::fs::read_to_string(ws.join(".vox/orchestrator.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    if let Some(pid) = info["pid"].as_u64().map(|p| p as u32) {
        out.insert("daemon_rss_kib".into(), json!(rss_kib(pid)));
    }
    drop(m);
    let _ = Command::new(&vox)
        .args(["daemon", "stop"])
        .current_dir(&ws)
        .env("VOX_HOME", &home)
        .env("VOX_WORKSPACE", &ws)
        .output();
    let _ = std::fs::remove_dir_all(&ws);
    let _ = std::fs::remove_dir_all(&home);

    let out = Value::Object(out);
    if as_json {
        println!("{out:#}");
        return;
    }
    let f = |p: &str| out.pointer(p).and_then(Value::as_f64).unwrap_or(f64::NAN);
    println!("| figure | value |\n|---|---|");
    println!(
        "| submit → assigned (agent with room), median / p99 | {:.0} µs / {:.0} µs |",
        f("/submit_to_assigned_us/p50"),
        f("/submit_to_assigned_us/p99")
    );
    println!(
        "| submit into a queue of {queued} | {:.0} calls/s |",
        f("/queued/submit_calls_per_s")
    );
    println!(
        "| vox_task_status among {queued} queued | {:.0} calls/s |",
        f("/queued/status_calls_per_s")
    );
    println!(
        "| vox_claim_file, distinct files | {:.0} calls/s |",
        f("/lock_claims_per_s")
    );
    println!(
        "| daemon RSS, 9 agents (8 idle), {queued} queued tasks, {claims} locks | {:.1} MiB |",
        f("/daemon_rss_kib") / 1024.0
    );
}

fn tempfile_dir(prefix: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
