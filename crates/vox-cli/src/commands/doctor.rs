//! `vox doctor`: what a new user needs to know when something does not work, one line per
//! concern, read-only (it starts nothing, creates nothing, migrates nothing).

use anyhow::Result;
use serde_json::{Value, json};
use std::path::Path;
use std::process::ExitCode;
use vox_cli::config;
use vox_core::Workspace;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

struct Check {
    name: &'static str,
    status: Status,
    message: String,
    details: Value,
}

#[derive(Default)]
struct Report(Vec<Check>);

impl Report {
    fn add(&mut self, name: &'static str, status: Status, message: String, details: Value) {
        self.0.push(Check {
            name,
            status,
            message,
            details,
        });
    }
    fn count(&self, s: Status) -> usize {
        self.0.iter().filter(|c| c.status == s).count()
    }
}

/// Runs every check; exit 1 when any fails.
pub fn run(workspace: Option<&Path>, json_out: bool) -> Result<ExitCode> {
    let mut r = Report::default();
    binaries(&mut r);
    environment(&mut r);
    let profile = profile(&mut r);
    match Workspace::resolve_explained(workspace) {
        Ok((ws, found)) => {
            r.add(
                "workspace",
                Status::Ok,
                format!("{} ({found})", ws.root.display()),
                json!({"root": ws.root, "found_by": found.to_string(), "id": ws.id}),
            );
            gitignore(&mut r, &ws);
            let report = daemon(&mut r, &ws, profile.as_deref());
            if let Some(report) = report {
                subsystems(&mut r, report);
            }
            log_file(&mut r, &ws);
            store(&mut r, &ws);
            skills(&mut r, &ws);
            upstream(&mut r, &ws);
        }
        Err(e) => r.add(
            "workspace",
            Status::Fail,
            e.to_string(),
            json!({"flag": workspace}),
        ),
    }
    sandbox(&mut r);

    let (ok, warn, fail) = (
        r.count(Status::Ok),
        r.count(Status::Warn),
        r.count(Status::Fail),
    );
    if json_out {
        let checks: Vec<Value> =
            r.0.iter()
                .map(|c| {
                    json!({
                        "name": c.name,
                        "status": c.status.as_str(),
                        "message": c.message,
                        "details": c.details,
                    })
                })
                .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"checks": checks, "ok": ok, "warn": warn, "fail": fail})
            )?
        );
    } else {
        for c in &r.0 {
            println!("{:<4}  {:<18} {}", c.status.as_str(), c.name, c.message);
        }
        println!("{ok} ok, {warn} warn, {fail} fail");
    }
    Ok(if fail > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Every `VOX_*` value parses (what `vox` refuses to start with), and no `VOX_*` name is one
/// vox does not read (a typo is a warning naming the nearest variable).
fn environment(r: &mut Report) {
    let bad = vox_core::env::check(|k| std::env::var(k).ok());
    let log = vox_core::env::text("VOX_LOG")
        .ok()
        .flatten()
        .and_then(|spec| {
            tracing_subscriber::EnvFilter::try_new(&spec)
                .err()
                .map(|e| format!("VOX_LOG: `{spec}` is not a log filter: {e}"))
        });
    let mut errors: Vec<String> = bad.iter().map(ToString::to_string).collect();
    errors.extend(log);
    let unknown = vox_core::env::unknown(std::env::vars().map(|(k, _)| k));
    let named: Vec<String> = unknown
        .iter()
        .map(|(n, near)| match near {
            Some(near) => format!("{n} (did you mean {near}?)"),
            None => n.clone(),
        })
        .collect();
    let details =
        json!({"invalid": errors, "unknown": named, "reference": "docs/configuration.md"});
    if !errors.is_empty() {
        r.add("environment", Status::Fail, errors.join("; "), details);
    } else if !named.is_empty() {
        r.add(
            "environment",
            Status::Warn,
            format!("vox reads no variable named {}", named.join(", ")),
            details,
        );
    } else {
        r.add(
            "environment",
            Status::Ok,
            "every VOX_* variable set parses".to_owned(),
            details,
        );
    }
}

fn binaries(r: &mut Report) {
    let version = env!("CARGO_PKG_VERSION");
    match std::env::current_exe() {
        Ok(p) => r.add(
            "vox",
            Status::Ok,
            format!("{} ({version})", p.display()),
            json!({"path": p, "version": version}),
        ),
        Err(e) => r.add(
            "vox",
            Status::Warn,
            format!("cannot tell where this binary is: {e}"),
            json!({"version": version}),
        ),
    }
    let daemon = vox_cli::daemon_exe();
    let details = json!({"path": daemon, "from_env": std::env::var_os("VOX_DAEMON_EXE").is_some()});
    let out = std::process::Command::new(&daemon)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let said = String::from_utf8_lossy(&o.stdout).trim().to_owned();
            let expected = format!("vox-orchestrator-d {version}");
            if said == expected {
                r.add(
                    "vox-orchestrator-d",
                    Status::Ok,
                    format!("{} ({version})", daemon.display()),
                    details,
                );
            } else {
                r.add(
                    "vox-orchestrator-d",
                    Status::Warn,
                    format!(
                        "{} says `{said}`, expected `{expected}`: it is not the daemon of this vox",
                        daemon.display()
                    ),
                    details,
                );
            }
        }
        Ok(o) => r.add(
            "vox-orchestrator-d",
            Status::Fail,
            format!(
                "{} --version failed ({}): {}",
                daemon.display(),
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            details,
        ),
        Err(e) => r.add(
            "vox-orchestrator-d",
            Status::Fail,
            format!(
                "{}: {e}; `vox mcp` cannot start a daemon (install it next to vox, or set VOX_DAEMON_EXE)",
                daemon.display()
            ),
            details,
        ),
    }
}

/// The profile in force and where it came from; `None` when it cannot be decided.
fn profile(r: &mut Report) -> Option<String> {
    match config::select_profile(None) {
        Ok((p, source)) => {
            let from = match &source {
                config::Source::Default => "the default".to_owned(),
                s => s.to_string(),
            };
            r.add(
                "profile",
                Status::Ok,
                format!("{} (from {from})", p.canonical()),
                json!({"profile": p.canonical(), "source": source.to_string(), "config": config::config_path()}),
            );
            Some(p.canonical().to_owned())
        }
        Err(e) => {
            r.add(
                "profile",
                Status::Fail,
                e.to_string(),
                json!({"config": config::config_path()}),
            );
            None
        }
    }
}

fn gitignore(r: &mut Report, ws: &Workspace) {
    if !ws.vox_dir.is_dir() {
        return;
    }
    let path = ws.vox_dir.join(".gitignore");
    if path.exists() {
        r.add(
            ".vox/.gitignore",
            Status::Ok,
            path.display().to_string(),
            json!({"path": path}),
        );
    } else {
        r.add(
            ".vox/.gitignore",
            Status::Warn,
            format!(
                "{} is missing: the store, socket and logs could be committed (write `*` into it)",
                path.display()
            ),
            json!({"path": path}),
        );
    }
}

/// The daemon answers on its socket in the protocol of this build: its boot report, when it
/// does.
fn daemon(r: &mut Report, ws: &Workspace, profile: Option<&str>) -> Option<Value> {
    let info_path = ws.daemon_info_path();
    let info: Option<Value> = std::fs::read_to_string(&info_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let answered = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()
        .and_then(|rt| {
            rt.block_on(async {
                let (c, ping) = vox_daemon::client::connect_and_ping(ws).await?;
                let report = c.call("orch.boot_report", json!({})).await.ok();
                Some((ping, report))
            })
        });
    let (ping, report) = answered.unzip();
    let details = json!({"socket": ws.socket_path(), "info": info, "ping": ping});
    let Some(ping) = ping else {
        match info {
            Some(info) if !vox_daemon::client::daemon_stopped(ws) => r.add(
                "daemon",
                Status::Fail,
                format!(
                    "pid {} holds {} but does not answer on {}",
                    info["pid"],
                    ws.daemon_lock_path().display(),
                    ws.socket_path().display()
                ),
                details,
            ),
            Some(info) => r.add(
                "daemon",
                Status::Warn,
                format!(
                    "not running; {} is left from pid {} (the next start replaces it)",
                    info_path.display(),
                    info["pid"]
                ),
                details,
            ),
            None => r.add(
                "daemon",
                Status::Ok,
                "not running (`vox mcp` starts one on demand)".into(),
                details,
            ),
        }
        return None;
    };
    let running = ping["profile"].as_str().unwrap_or("dev");
    let summary = format!(
        "running: pid {}, profile {running}, version {}",
        ping["pid"],
        ping["version"].as_str().unwrap_or("?")
    );
    if ping["protocol_version"].as_u64() != Some(u64::from(vox_daemon::PROTOCOL_VERSION)) {
        r.add(
            "daemon",
            Status::Fail,
            format!(
                "{summary}; it speaks socket protocol {}, this vox {}: stop it (`vox daemon stop`)",
                ping["protocol_version"],
                vox_daemon::PROTOCOL_VERSION
            ),
            details,
        );
    } else if profile.is_some_and(|p| p != running) {
        r.add(
            "daemon",
            Status::Warn,
            format!(
                "{summary}; `vox mcp` here asks for profile {} and would be refused (profile_mismatch): `vox daemon stop` first",
                profile.unwrap_or_default()
            ),
            details,
        );
    } else {
        r.add("daemon", Status::Ok, summary, details);
    }
    report.flatten()
}

/// The running daemon's boot report: a subsystem that did not boot is a failure (its tools
/// answer 503 and `/ready` says so).
fn subsystems(r: &mut Report, report: Value) {
    let failed = report["failed"].as_object().cloned().unwrap_or_default();
    if failed.is_empty() {
        let booted = report["booted"].as_array().map_or(0, Vec::len);
        r.add("subsystems", Status::Ok, format!("{booted} booted"), report);
    } else {
        let why: Vec<String> = failed
            .iter()
            .map(|(s, e)| format!("{s}: {}", e.as_str().unwrap_or("")))
            .collect();
        r.add(
            "subsystems",
            Status::Fail,
            format!("not booted: {}", why.join("; ")),
            report,
        );
    }
}

fn log_file(r: &mut Report, ws: &Workspace) {
    let path = ws.daemon_log_path();
    let message = match std::fs::metadata(&path) {
        Ok(m) => format!("{} ({} bytes)", path.display(), m.len()),
        Err(_) => format!("{} (not written yet)", path.display()),
    };
    r.add("log", Status::Ok, message, json!({"path": path}));
}

fn store(r: &mut Report, ws: &Workspace) {
    if let Some(url) = std::env::var("VOX_DB_URL").ok().filter(|u| !u.is_empty()) {
        return postgres(r, &url);
    }
    let path = ws.db_path();
    let details = json!({"path": path});
    if !path.exists() {
        r.add(
            "store",
            Status::Ok,
            format!(
                "{} (not created yet; the daemon creates it)",
                path.display()
            ),
            details,
        );
        return;
    }
    match vox_store::inspect(&path) {
        Ok(h) if h.schema_version > h.latest => r.add(
            "store",
            Status::Fail,
            format!(
                "{}: schema version {} is newer than this build knows ({})",
                path.display(),
                h.schema_version,
                h.latest
            ),
            json!({"path": path, "schema_version": h.schema_version, "latest": h.latest}),
        ),
        Ok(h) => r.add(
            "store",
            Status::Ok,
            if h.schema_version == h.latest {
                format!("{} (schema version {})", path.display(), h.schema_version)
            } else {
                format!(
                    "{} (schema version {}; migrates to {} at the next start)",
                    path.display(),
                    h.schema_version,
                    h.latest
                )
            },
            json!({"path": path, "schema_version": h.schema_version, "latest": h.latest, "tables": h.tables}),
        ),
        Err(e) => r.add("store", Status::Fail, e.to_string(), details),
    }
}

/// `VOX_DB_URL`: the database answers (within 5 s), and its schema is one this build knows.
fn postgres(r: &mut Report, url: &str) {
    match vox_store::pg::inspect(url, std::time::Duration::from_secs(5)) {
        Ok(h) if h.schema_version > h.latest => r.add(
            "store",
            Status::Fail,
            format!(
                "VOX_DB_URL: schema version {} is newer than this build knows ({})",
                h.schema_version, h.latest
            ),
            json!({"schema_version": h.schema_version, "latest": h.latest}),
        ),
        Ok(h) => r.add(
            "store",
            Status::Ok,
            format!(
                "VOX_DB_URL: PostgreSQL, schema version {} ({} tables)",
                h.schema_version, h.tables
            ),
            json!({"schema_version": h.schema_version, "latest": h.latest, "tables": h.tables}),
        ),
        Err(e) => r.add("store", Status::Fail, format!("VOX_DB_URL: {e}"), json!({})),
    }
}

fn skills(r: &mut Report, ws: &Workspace) {
    let roots = vox_skills::Roots::from_env(&ws.root);
    let c = vox_skills::Catalog::hydrate(&roots);
    let details = json!({
        "skills": c.skills.keys().collect::<Vec<_>>(),
        "errors": c.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
    });
    if c.errors.is_empty() {
        r.add(
            "skills",
            Status::Ok,
            format!("{} found", c.skills.len()),
            details,
        );
    } else {
        r.add(
            "skills",
            Status::Warn,
            format!(
                "{} found, {} did not load (`vox skill list` says why)",
                c.skills.len(),
                c.errors.len()
            ),
            details,
        );
    }
}

/// The upstream servers: their config parses; as the daemon sees them (or, without one, their
/// pins), none failed and no tool waits for a person's approval.
fn upstream(r: &mut Report, ws: &Workspace) {
    let state = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|rt| rt.block_on(super::upstream::servers(ws)));
    let (servers, live) = match state {
        Ok(s) => s,
        Err(e) => {
            r.add("upstream", Status::Fail, format!("{e:#}"), json!({}));
            return;
        }
    };
    let list = servers.as_array().cloned().unwrap_or_default();
    let down: Vec<&str> = list
        .iter()
        .filter(|s| live && s["status"] != "ready")
        .filter_map(|s| s["id"].as_str())
        .collect();
    let withheld: Vec<String> = list
        .iter()
        .flat_map(|s| s["tools"].as_array().cloned().unwrap_or_default())
        .filter(|t| !t["withheld"].is_null())
        .filter_map(|t| t["served_as"].as_str().map(str::to_owned))
        .collect();
    let details = json!({"servers": servers, "daemon": live});
    let failed: Vec<&str> = list
        .iter()
        .filter(|s| live && matches!(s["status"].as_str(), Some("failed" | "circuit_open")))
        .filter_map(|s| s["id"].as_str())
        .collect();
    if !failed.is_empty() {
        r.add(
            "upstream",
            Status::Fail,
            format!(
                "failed to start: {} (`vox upstream status` says why)",
                failed.join(", ")
            ),
            details,
        );
        return;
    }
    if down.is_empty() && withheld.is_empty() {
        let how = if live {
            "ready"
        } else {
            "declared; no daemon runs"
        };
        r.add(
            "upstream",
            Status::Ok,
            format!("{} {how}", list.len()),
            details,
        );
        return;
    }
    r.add(
        "upstream",
        Status::Warn,
        format!(
            "not ready: {}; withheld until approved: {} (`vox upstream status`)",
            if down.is_empty() {
                "none".into()
            } else {
                down.join(", ")
            },
            if withheld.is_empty() {
                "none".into()
            } else {
                withheld.join(", ")
            },
        ),
        details,
    );
}

fn sandbox(r: &mut Report) {
    match vox_sandbox::probe() {
        Ok(s) => r.add(
            "sandbox",
            Status::Ok,
            format!(
                "Landlock ABI {}{}, network namespace: vox_skill_run can run",
                s.landlock_abi,
                if s.landlock_tcp { " (with TCP rules)" } else { "" }
            ),
            json!({"landlock_abi": s.landlock_abi, "landlock_tcp": s.landlock_tcp, "landlock_scopes": s.landlock_scopes}),
        ),
        Err(e) => r.add(
            "sandbox",
            Status::Warn,
            format!("unavailable, vox_skill_run refuses: {e}"),
            json!({"error": e.to_string()}),
        ),
    }
}
