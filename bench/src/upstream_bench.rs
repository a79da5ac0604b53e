//! `upstream-bench`: a tool call through vox to an upstream stdio server, side by side with the
//! same call made directly to that server, in one run; and `tools/list` over ten upstream
//! servers of 50 tools each.
//!
//! ```text
//! upstream-bench [--calls N] [--seconds S] [--depth D] [--vox PATH] [--bare PATH]
//! ```
//!
//! The upstream server is `rmcp-bare` (its `echo`), started by vox from `.vox/servers.toml`.
//! 1. direct: `rmcp-bare` on its own; `--calls` sequential calls (default 3000): p50 and p99 µs;
//!    then `--depth` calls kept in flight (default 16) for `--seconds` (default 3): calls/s;
//! 2. through vox: `vox mcp` (dev) in a workspace declaring it, calling `bare__echo`: the
//!    same figures, and the added p50 (targets: ≤ 150 µs; throughput ≥ 0.8× direct);
//! 3. `tools/list` through vox over ten `rmcp-bare --tools 50` servers (500 upstream tools
//!    and the catalog's): the median of 50 warm lists, ms (target: ≤ 20 ms).

use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use vox_bench::{Mcp, summary, vox_beside_me};

struct Opts {
    calls: usize,
    seconds: u64,
    depth: usize,
    vox: String,
    bare: String,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        calls: 3000,
        seconds: 3,
        depth: 16,
        vox: vox_beside_me(),
        bare: std::env::current_exe()
            .map_err(|e| e.to_string())?
            .with_file_name("rmcp-bare")
            .to_string_lossy()
            .into_owned(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--calls" => o.calls = value()?.parse().map_err(|e| format!("--calls: {e}"))?,
            "--seconds" => o.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--depth" => o.depth = value()?.parse().map_err(|e| format!("--depth: {e}"))?,
            "--vox" => o.vox = value()?,
            "--bare" => o.bare = value()?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

/// A workspace whose `.vox/servers.toml` is `servers`.
fn workspace(servers: &str) -> (tempfile::TempDir, tempfile::TempDir) {
    let ws = tempfile::Builder::new()
        .prefix("voxub")
        .tempdir_in("/tmp")
        .unwrap();
    let home = tempfile::Builder::new()
        .prefix("voxubh")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::create_dir_all(ws.path().join(".vox")).unwrap();
    std::fs::write(ws.path().join(".vox/servers.toml"), servers).unwrap();
    (ws, home)
}

/// Lists until `want` upstream tools are served (they come once the servers have started).
fn wait_for(m: &mut Mcp, want: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tools = m.request("tools/list", json!({}));
        let n = tools["result"]["tools"].as_array().map_or(0, |t| {
            t.iter()
                .filter(|t| t["name"].as_str().is_some_and(|n| n.contains("__")))
                .count()
        });
        if n >= want {
            return tools["result"]["tools"].as_array().map_or(0, Vec::len);
        }
        assert!(
            Instant::now() < deadline,
            "only {n} of {want} upstream tools listed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn sequential(m: &mut Mcp, tool: &str, calls: usize) -> (f64, f64) {
    let args = json!({"key": "k"});
    for _ in 0..200 {
        m.call(tool, args.clone());
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        m.call(tool, args.clone());
        samples.push(t.elapsed());
    }
    summary(samples)
}

fn stop_daemon(vox: &str, ws: &Path, home: &Path) {
    let _ = Command::new(vox)
        .args(["daemon", "stop"])
        .current_dir(ws)
        .env("VOX_HOME", home)
        .env("VOX_WORKSPACE", ws)
        .output();
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("upstream-bench: {e}");
            std::process::exit(2);
        }
    };
    let time = Duration::from_secs(o.seconds);
    let args = json!({"key": "k"});

    let mut direct = Mcp::spawn(Command::new(&o.bare));
    let (d50, d99) = sequential(&mut direct, "echo", o.calls);
    let d_rate = direct.throughput("echo", &args, o.depth, time);
    drop(direct);
    eprintln!(
        "direct      p50 {d50:.1} µs  p99 {d99:.1} µs  {d_rate:.0} calls/s at {}",
        o.depth
    );

    let toml = format!(
        "[servers.bare]\ncommand = {:?}\n[servers.bare.tools.echo]\nexposure = \"public\"\nside_effect = \"read_only\"\n",
        o.bare
    );
    let (ws, home) = workspace(&toml);
    let mut vox = Mcp::start(&o.vox, ws.path(), home.path(), "dev", &[]);
    wait_for(&mut vox, 1);
    let (v50, v99) = sequential(&mut vox, "bare__echo", o.calls);
    let v_rate = vox.throughput("bare__echo", &args, o.depth, time);
    drop(vox);
    stop_daemon(&o.vox, ws.path(), home.path());
    eprintln!(
        "through vox p50 {v50:.1} µs  p99 {v99:.1} µs  {v_rate:.0} calls/s at {}; added p50 {:.1} µs, throughput {:.2}x",
        o.depth,
        v50 - d50,
        v_rate / d_rate
    );

    let mut servers = String::new();
    for i in 0..10 {
        servers.push_str(&format!(
            "[servers.s{i}]\ncommand = {:?}\nargs = [\"--tools\", \"50\"]\n",
            o.bare
        ));
    }
    let (ws10, home10) = workspace(&servers);
    let mut vox = Mcp::start(&o.vox, ws10.path(), home10.path(), "dev", &[]);
    let listed = wait_for(&mut vox, 510);
    for _ in 0..10 {
        vox.request("tools/list", json!({}));
    }
    let mut samples = Vec::with_capacity(50);
    for _ in 0..50 {
        let t = Instant::now();
        vox.request("tools/list", json!({}));
        samples.push(t.elapsed());
    }
    drop(vox);
    stop_daemon(&o.vox, ws10.path(), home10.path());
    let (l50, l99) = summary(samples);
    eprintln!(
        "tools/list over 10 servers ({listed} tools): p50 {:.2} ms  p99 {:.2} ms",
        l50 / 1e3,
        l99 / 1e3
    );

    let out: Value = json!({
        "direct": {"p50_us": d50, "p99_us": d99, "calls_per_s": d_rate},
        "through_vox": {"p50_us": v50, "p99_us": v99, "calls_per_s": v_rate},
        "added_p50_us": v50 - d50,
        "throughput_ratio": v_rate / d_rate,
        "depth": o.depth,
        "tools_list_10_servers": {"tools": listed, "p50_ms": l50 / 1e3, "p99_ms": l99 / 1e3},
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
