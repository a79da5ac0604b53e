//! Helpers shared by the integration tests (real processes, real kernel).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use vox_sandbox::{Limits, RunOutcome, RunRequest, SandboxError};

/// A unique token for file names and process command lines.
pub fn unique() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{}{}{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        nanos % 100_000
    )
}

/// A skill dir with SKILL.md and an executable script.
pub fn skill() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("vox-sandbox-test-skill")
        .tempdir()
        .unwrap();
    std::fs::write(
        dir.path().join("SKILL.md"),
        "# Test skill\nmarker-skill-content\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    let script = dir.path().join("bin/hello.sh");
    std::fs::write(&script, "#!/bin/sh\necho hello from $(basename \"$0\")\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

pub fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

pub fn sh(script: &str) -> Vec<String> {
    argv(&["sh", "-c", script])
}

pub fn run_with(skill: &Path, argv: &[String], limits: Limits) -> Result<RunOutcome, SandboxError> {
    vox_sandbox::run(&RunRequest {
        skill_dir: skill,
        argv,
        stdin: None,
        limits,
        cancel: None,
    })
}

pub fn run_ok(skill: &Path, argv: &[String], limits: Limits) -> RunOutcome {
    match run_with(skill, argv, limits) {
        Ok(o) => o,
        Err(e) => panic!("run {argv:?} failed: {e}"),
    }
}

pub fn limits() -> Limits {
    Limits {
        wall: Duration::from_secs(20),
        ..Limits::default()
    }
}

/// Pids (zombies included) whose real, effective, saved or fs uid is `uid`.
pub fn pids_of_uid(uid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.uids.contains(&uid))
        .map(|p| p.pid)
        .collect()
}

/// Pids whose command line contains `needle` (arguments joined by spaces).
pub fn pids_with_cmdline(needle: &str) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.cmdline.contains(needle))
        .map(|p| p.pid)
        .collect()
}

pub struct Proc {
    pub pid: u32,
    pub uids: Vec<u32>,
    pub zombie: bool,
    pub cmdline: String,
}

pub fn processes() -> Vec<Proc> {
    let mut out = Vec::new();
    for ent in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = ent.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(ent.path().join("status")) else {
            continue;
        };
        let uids = status
            .lines()
            .find(|l| l.starts_with("Uid:"))
            .map(|l| {
                l[4..]
                    .split_whitespace()
                    .filter_map(|s| s.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        let zombie = status
            .lines()
            .any(|l| l.starts_with("State:") && l[6..].trim_start().starts_with('Z'));
        let cmdline = std::fs::read(ent.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        out.push(Proc {
            pid,
            uids,
            zombie,
            cmdline,
        });
    }
    out
}

pub fn scratch_root_from_pwd(pwd: &str) -> PathBuf {
    Path::new(pwd.trim()).parent().unwrap().to_path_buf()
}

/// Live (not zombie) pids whose real, effective, saved or fs uid is `uid`.
pub fn live_pids_of_uid(uid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| !p.zombie && p.uids.contains(&uid))
        .map(|p| p.pid)
        .collect()
}

/// Waits (up to `within`) until not even a zombie of `uid` is left for init to reap.
pub fn all_gone_within(uid: u32, within: Duration) -> bool {
    let end = std::time::Instant::now() + within;
    loop {
        if pids_of_uid(uid).is_empty() {
            return true;
        }
        if std::time::Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
