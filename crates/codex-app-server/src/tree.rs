//! Ending a process, its process group and every descendant, even one that moved to a group
//! of its own (Codex may start MCP servers and shell commands in new groups).

use std::collections::HashSet;

/// `(pid, ppid, pgid)` of every process in /proc, Linux only (empty elsewhere).
fn processes() -> Vec<(i32, i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return vec![];
    };
    let mut out = vec![];
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let _state = f.next();
        let (Some(ppid), Some(pgrp)) = (f.next(), f.next()) else {
            continue;
        };
        if let (Ok(ppid), Ok(pgrp)) = (ppid.parse(), pgrp.parse()) {
            out.push((pid, ppid, pgrp));
        }
    }
    out
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
