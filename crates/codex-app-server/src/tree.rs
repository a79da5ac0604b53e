//! Ending a process, its process group and every descendant, even one that moved to a group
//! of its own (Codex may start MCP servers and shell commands in new groups).

use std::collections::HashSet;

/// `(ppid, pgid)` of `pid` from /proc, Linux only.
fn stat(pid: i32) -> Option<(i32, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let _state = f.next();
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// The parent of `pid`, if it is alive (Linux).
pub fn parent_of(pid: i32) -> Option<i32> {
    stat(pid).map(|(ppid, _)| ppid)
}

/// `(pid, ppid, pgid)` of every process in /proc, Linux only (empty elsewhere).
fn processes() -> Vec<(i32, i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter_map(|pid| stat(pid).map(|(ppid, pgrp)| (pid, ppid, pgrp)))
        .collect()
}

/// Kills (SIGKILL) the process group `pgid` and every descendant of its leader, even one that
/// moved to a group of its own: what a supervisor does to a host left behind by a crash.
pub fn kill_tree(pgid: i32) {
    let all = descendants(pgid);
    signal(pgid, &all, libc::SIGKILL);
}

/// Every live descendant of `root` (not `root` itself).
pub(crate) fn descendants(root: i32) -> Vec<i32> {
    let all = processes();
    let mut found: HashSet<i32> = HashSet::from([root]);
    let mut out = vec![];
    loop {
        let before = out.len();
        for &(pid, ppid, _) in &all {
            if found.contains(&ppid) && found.insert(pid) {
                out.push(pid);
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// Live processes whose process group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|&(_, _, g)| g == pgid)
        .map(|(p, _, _)| p)
        .filter(|&p| !is_zombie(p))
        .collect()
}

/// Whether `pid` names a running (not exited, not zombie) process.
pub fn is_alive(pid: i32) -> bool {
    std::fs::metadata(format!("/proc/{pid}")).is_ok() && !is_zombie(pid)
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .and_then(|i| s[i + 1..].split_whitespace().next().map(|st| st == "Z"))
        })
        .unwrap_or(false)
}

/// Sends `sig` to the group `pgid` and to each pid in `extra`.
pub(crate) fn signal(pgid: i32, extra: &[i32], sig: i32) {
    if pgid > 1 {
        // SAFETY: killpg has no memory-safety preconditions; a stale group yields ESRCH.
        unsafe {
            libc::killpg(pgid, sig);
        }
    }
    for &pid in extra {
        if pid > 1 {
            // SAFETY: as above.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }
}

/// Kills (SIGKILL) every process whose working directory is `dir` or below it, but this one:
/// what a crashed host's orphans are found by (a shell Codex started in a group of its own
/// outlives the host, reparented, but keeps the worktree as its directory). A process may start
/// another while it dies (a shell loop), so it looks again until none is left (at most about
/// half a second). Returns how many it killed.
pub fn kill_working_under(dir: &std::path::Path) -> usize {
    let me = std::process::id() as i32;
    let mut n = 0;
    for _ in 0..50 {
        let found: Vec<i32> = processes()
            .into_iter()
            .map(|(pid, _, _)| pid)
            .filter(|&pid| pid != me && pid > 1 && !is_zombie(pid))
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(dir))
            })
            .collect();
        if found.is_empty() {
            break;
        }
        for pid in found {
            // SAFETY: kill has no memory-safety preconditions; a gone pid yields ESRCH.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            n += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    n
}
