//! mesh-bench: the mesh end to end, through real `vox mcp` sessions of real daemons
//! (`vox daemon start --profile orchestrator,mesh`), in fresh temporary workspaces:
//!
//! 1. **embedded latency**: on one daemon, `vox_a2a_send` to agent `r`, then `vox_a2a_inbox`
//!    of `r` until the message is there (the acknowledgement after it is not timed).
//! 2. **NATS latency**: the same between two daemons on two workspaces joined over a local
//!    nats-server with JetStream: sent on node A, read on node B.
//! 3. **messages/s** from A to B: `--senders` sessions on A send `--messages` in all; timed
//!    until B's inbox holds every one.
//! 4. **failover**: kill -9 of B; the time until A marks it down (three missed heartbeats of
//!    `--heartbeat-ms`), then, with messages sent while it was down, the time from restarting
//!    it until they are all in its inbox.
//!
//! ```text
//! mesh-bench [--vox PATH] [--samples N] [--messages N] [--senders N] [--heartbeat-ms N] [--json]
//! ```
//! `--vox` defaults to the `vox` beside this binary; nats-server is `VOX_NATS_SERVER`, else
//! Debian's `/usr/sbin/nats-server`, else the PATH.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use vox_bench::{Mcp, summary};
use vox_mesh::server::NatsServer;

const PROFILE: &str = "orchestrator,mesh";

struct Node {
    ws: PathBuf,
    home: PathBuf,
    env: Vec<(String, String)>,
}

impl Node {
    fn new(base: &Path, name: &str, env: &[(String, String)]) -> Node {
        let ws = base.join(name);
        std::fs::create_dir_all(&ws).unwrap();
        Node {
            home: base.join(format!("{name}-home")),
            ws,
            env: env.to_vec(),
        }
    }
    fn vox(&self, vox: &str, args: &[&str]) -> String {
        let out = Command::new(vox)
            .args(args)
            .arg("--workspace")
            .arg(&self.ws)
            .env("VOX_HOME", &self.home)
            .env("VOX_LOG", "warn")
            .env_remove("VOX_PROFILE")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("vox");
        assert!(out.status.success(), "vox {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
    fn start(&self, vox: &str) {
        self.vox(vox, &["daemon", "start", "--profile", PROFILE]);
    }
    fn session(&self, vox: &str) -> Mcp {
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Mcp::start(vox, &self.ws, &self.home, PROFILE, &env)
    }
    fn kill9(&self) {
        let info: Value = serde_json::from_str(
            &std::fs::read_to_string(self.ws.join(".vox/orchestrator.json")).unwrap(),
        )
        .unwrap();
        let pid = info["pid"].as_i64().unwrap() as i32;
        // SAFETY: kill(2) takes plain integers and touches no memory of ours; `pid` is this
        // bench workspace's daemon, read from its `orchestrator.json`.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        // SAFETY: signal 0 only asks whether `pid` still exists.
        while unsafe { libc::kill(pid, 0) } == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Sends one message on `from` to agent `r` (on `node`, when given) and reads `to`'s inbox of
/// `r` until it is there; acknowledges it; the time from the send to the read.
fn one(from: &mut Mcp, to: &mut Mcp, node: Option<&str>, body: &str) -> Duration {
    let mut args = json!({"to": "r", "body": body, "thread": "bench"});
    if let Some(n) = node {
        args["node"] = json!(n);
    }
    let t0 = Instant::now();
    from.call("vox_a2a_send", args);
    loop {
        let got = to.call("vox_a2a_inbox", json!({"agent_id": "r", "limit": 1}));
        if let Some(m) = got["messages"].as_array().and_then(|m| m.first()) {
            let took = t0.elapsed();
            assert_eq!(m["body"], body);
            to.call(
                "vox_a2a_ack",
                json!({"agent_id": "r", "message_ids": [m["id"]]}),
            );
            return took;
        }
    }
}

fn pending(m: &mut Mcp) -> i64 {
    m.call("vox_mesh_queue_stats", json!({}))["queues"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|q| q["recipient"] == "r")
        .map(|q| q["pending"].as_i64().unwrap_or(0))
        .sum()
}

fn status_of(m: &mut Mcp, node: &str) -> String {
    m.call("vox_mesh_nodes", json!({}))["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|n| n["node_id"] == node)
        .map(|n| n["status"].as_str().unwrap_or("").to_owned())
        .unwrap_or_default()
}

fn until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
    t0.elapsed()
}

fn main() {
    let mut vox = vox_bench::vox_beside_me();
    let (mut samples, mut messages, mut senders, mut heartbeat_ms, mut as_json) =
        (500usize, 2000usize, 4usize, 2000u64, false);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--vox" {
            vox = args.next().expect("--vox PATH");
            continue;
        }
        let mut num = || args.next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match a.as_str() {
            "--samples" => samples = num() as usize,
            "--messages" => messages = num() as usize,
            "--senders" => senders = num().max(1) as usize,
            "--heartbeat-ms" => heartbeat_ms = num(),
            "--json" => as_json = true,
            other => panic!("unknown argument {other}"),
        }
    }
    let base = tempfile::tempdir().unwrap();
    let mut out = serde_json::Map::new();

    // 1. Embedded: one daemon.
    let solo = Node::new(base.path(), "solo", &[]);
    solo.start(&vox);
    {
        let mut op = solo.session(&vox);
        let mut reader = solo.session(&vox);
        op.call(
            "vox_spawn_agent",
            json!({"agent_id": "r", "profile": "mesh"}),
        );
        let lat: Vec<Duration> = (0..samples)
            .map(|i| one(&mut op, &mut reader, None, &format!("e{i}")))
            .collect();
        let (p50, p99) = summary(lat);
        out.insert("embedded_p50_us".into(), json!(p50));
        out.insert("embedded_p99_us".into(), json!(p99));
    }
    solo.vox(&vox, &["daemon", "stop"]);

    // 2–4. Two nodes over NATS.
    let nats_dir = base.path().join("nats");
    std::fs::create_dir_all(&nats_dir).unwrap();
    let nats = NatsServer::start(&nats_dir, "").expect("nats-server");
    let env = vec![("VOX_MESH_NATS_URL".to_string(), nats.url())];
    let (a, b) = (
        Node::new(base.path(), "a", &env),
        Node::new(base.path(), "b", &env),
    );
    let (ida, idb) = (a.vox(&vox, &["mesh", "key"]), b.vox(&vox, &["mesh", "key"]));
    for (n, name, peer) in [(&a, "a", &idb), (&b, "b", &ida)] {
        std::fs::write(
            n.ws.join(".vox/mesh.toml"),
            format!(
                "name = \"{name}\"\nheartbeat_ms = {heartbeat_ms}\n[[peer]]\nnode = \"{peer}\"\n"
            ),
        )
        .unwrap();
    }
    a.start(&vox);
    b.start(&vox);
    let mut sa = a.session(&vox);
    let mut sb = b.session(&vox);
    sb.call(
        "vox_spawn_agent",
        json!({"agent_id": "r", "profile": "mesh"}),
    );
    until("a hears b", Duration::from_secs(30), || {
        status_of(&mut sa, &idb) == "up"
    });
    let lat: Vec<Duration> = (0..samples)
        .map(|i| one(&mut sa, &mut sb, Some(&idb), &format!("n{i}")))
        .collect();
    let (p50, p99) = summary(lat);
    out.insert("nats_p50_us".into(), json!(p50));
    out.insert("nats_p99_us".into(), json!(p99));

    // 3. Throughput.
    let before = pending(&mut sb);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for k in 0..senders {
            let (a, vox, idb) = (&a, &vox, &idb);
            s.spawn(move || {
                let mut m = a.session(vox);
                for i in (k..messages).step_by(senders) {
                    m.call(
                        "vox_a2a_send",
                        json!({"to": "r", "node": idb, "body": format!("t{i}")}),
                    );
                }
            });
        }
    });
    let sent_s = t0.elapsed().as_secs_f64();
    until("b has every message", Duration::from_secs(120), || {
        pending(&mut sb) >= before + messages as i64
    });
    let all_s = t0.elapsed().as_secs_f64();
    out.insert("sent_per_s".into(), json!(messages as f64 / sent_s));
    out.insert("delivered_per_s".into(), json!(messages as f64 / all_s));

    // 4. Failover.
    drop(sb);
    b.kill9();
    let down = until("a marks b down", Duration::from_secs(60), || {
        status_of(&mut sa, &idb) == "down"
    });
    out.insert("down_detected_ms".into(), json!(down.as_millis()));
    for i in 0..100 {
        sa.call(
            "vox_a2a_send",
            json!({"to": "r", "node": idb, "body": format!("d{i}")}),
        );
    }
    let t0 = Instant::now();
    b.start(&vox);
    let mut sb = b.session(&vox);
    until("b catches up", Duration::from_secs(60), || {
        pending(&mut sb) >= before + messages as i64 + 100
    });
    out.insert(
        "restart_to_caught_up_ms".into(),
        json!(t0.elapsed().as_millis()),
    );
    drop((sa, sb));
    a.vox(&vox, &["daemon", "stop"]);
    b.vox(&vox, &["daemon", "stop"]);

    let out = Value::Object(out);
    if as_json {
        println!("{out}");
        return;
    }
    let f = |k: &str| out[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "A2A send → inbox, embedded: p50 {:.0} µs, p99 {:.0} µs ({samples} samples)",
        f("embedded_p50_us"),
        f("embedded_p99_us")
    );
    println!(
        "A2A send → inbox, over NATS between two daemons: p50 {:.0} µs, p99 {:.0} µs",
        f("nats_p50_us"),
        f("nats_p99_us")
    );
    println!(
        "{messages} messages A → B with {senders} senders: {:.0} sent/s, {:.0} delivered/s",
        f("sent_per_s"),
        f("delivered_per_s")
    );
    println!(
        "failover: kill -9 of B marked down after {:.0} ms (heartbeat {heartbeat_ms} ms); restart → 100 queued messages delivered in {:.0} ms",
        f("down_detected_ms"),
        f("restart_to_caught_up_ms")
    );
}
