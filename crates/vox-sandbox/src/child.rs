//! Code that runs in a forked child of a possibly multi-threaded parent.
//!
//! After `fork` only the forking thread exists in the child, and any lock another thread held
//! (the allocator's included) stays held forever, so everything here is restricted to raw,
//! async-signal-safe syscalls on plain data prepared by the parent: no allocation, no locks,
//! no formatting, no `std::io::Error::new` (only `from_raw_os_error`, which is a plain value).
//! We use `std::process::Command::pre_exec` rather than a re-exec'd trampoline: std forks,
//! wires stdio and chdir's, then calls [`setup`], then `execve`s; a failure in [`setup`] comes
//! back to the parent as the `spawn` error (std's own CLOEXEC error pipe), and we add one byte
//! on our own stage pipe to say which step failed.

use std::io;
use std::os::fd::RawFd;

use crate::landlock;

/// Which step of [`setup`] failed (written as one byte on the stage pipe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    Setsid = 1,
    CloseRange = 2,
    Unshare = 3,
    Rlimit = 4,
    Setgroups = 5,
    Setgid = 6,
    Setuid = 7,
    NoNewPrivs = 8,
    Landlock = 9,
    DeathSignal = 10,
}

impl Stage {
    pub fn from_byte(b: u8) -> Option<Stage> {
        use Stage::*;
        [
            Setsid,
            CloseRange,
            Unshare,
            Rlimit,
            Setgroups,
            Setgid,
            Setuid,
            NoNewPrivs,
            Landlock,
            DeathSignal,
        ]
        .into_iter()
        .find(|s| *s as u8 == b)
    }
}

/// The namespaces every command gets: a fresh network namespace (only a loopback that is
/// down: no route anywhere) and a fresh IPC namespace (no System V / POSIX mqueue sharing).
pub const UNSHARE_FLAGS: libc::c_int = libc::CLONE_NEWNET | libc::CLONE_NEWIPC;

/// Everything the child needs, computed in the parent. Plain `Copy` data only.
#[derive(Clone, Copy)]
pub struct ChildPlan {
    pub ruleset_fd: RawFd,
    pub stage_fd: RawFd,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub rlimits: [(libc::__rlimit_resource_t, libc::rlim_t, libc::rlim_t); 5],
}

fn fail(stage_fd: RawFd, stage: Stage) -> io::Error {
    // Read errno first: the write below may change it.
    let errno = io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EPERM);
    let b = stage as u8;
    // SAFETY: write(2) of 1 byte from `b`, a live stack byte; async-signal-safe, as the fork
    // child that calls this requires.
    unsafe { libc::write(stage_fd, &b as *const u8 as *const libc::c_void, 1) };
    io::Error::from_raw_os_error(errno)
}

/// Runs in the child between fork and exec (see the module docs for the rules).
///
/// Order matters: steps that need root (namespaces, rlimits above the current ones, dropping
/// groups) come before `setresuid`; `no_new_privs` and Landlock come last so that the exec'd
/// program starts fully confined.
///
/// # Safety
/// Must only be called in a freshly forked child, before exec.
pub unsafe fn setup(p: &ChildPlan) -> io::Result<()> {
    // SAFETY: the caller guarantees we are a freshly forked child before exec. Every call below
    // is a raw, async-signal-safe syscall taking plain values or pointers to locals that outlive
    // it (`lim`); nothing allocates or takes a lock (a lock held by another thread of the parent
    // at fork time would never be released here). `fail` only reads errno and writes one byte.
    unsafe {
        // Own session and process group (pgid = pid), so the parent can kill the group, and no
        // controlling terminal.
        if libc::setsid() < 0 {
            return Err(fail(p.stage_fd, Stage::Setsid));
        }
        // Any fd the parent process leaked without CLOEXEC (other libraries, other threads)
        // must not reach the command: mark everything above stderr close-on-exec.
        if libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) < 0
        {
            return Err(fail(p.stage_fd, Stage::CloseRange));
        }
        if libc::unshare(UNSHARE_FLAGS) < 0 {
            return Err(fail(p.stage_fd, Stage::Unshare));
        }
        for &(res, soft, hard) in &p.rlimits {
            let lim = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(res, &lim) < 0 {
                return Err(fail(p.stage_fd, Stage::Rlimit));
            }
        }
        if libc::setgroups(0, std::ptr::null()) < 0 {
            return Err(fail(p.stage_fd, Stage::Setgroups));
        }
        if libc::setresgid(p.gid, p.gid, p.gid) < 0 {
            return Err(fail(p.stage_fd, Stage::Setgid));
        }
        if libc::setresuid(p.uid, p.uid, p.uid) < 0 {
            return Err(fail(p.stage_fd, Stage::Setuid));
        }
        // No set-uid binary (su, sudo, ...) can give root back, and Landlock requires it.
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
            return Err(fail(p.stage_fd, Stage::NoNewPrivs));
        }
        if landlock::restrict_self(p.ruleset_fd) < 0 {
            return Err(fail(p.stage_fd, Stage::Landlock));
        }
        // If the thread that spawned us dies, so do we (cleared by credential changes, hence
        // set after setresuid).
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) < 0 {
            return Err(fail(p.stage_fd, Stage::DeathSignal));
        }
    }
    Ok(())
}

/// Kills every process running as `uid` — including any that left the process group with
/// `setsid` — and waits until none is left alive. Works because the uid is private to one run: a helper forked
/// here switches to that uid and calls `kill(-1, SIGKILL)` over and over, which reaches exactly
/// the processes it may signal (its own uid), while the parent watches `/proc` until no other
/// process of the uid is left, then kills the helper. (`kill(-1)` itself cannot tell: it
/// reports success whenever any process exists at all.) Dead processes that were orphaned
/// stay zombies until init reaps them; they hold no resources and cannot fork or write, so we
/// do not wait for that (some inits reap only every second or two).
///
/// Returns `true` when no process of `uid` is left within `timeout`.
pub fn kill_all_of_uid(uid: libc::uid_t, gid: libc::gid_t, timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    // SAFETY: fork in a multi-threaded process is sound as long as the child sticks to
    // async-signal-safe calls, which the block below does.
    let helper = unsafe { libc::fork() };
    if helper == 0 {
        // SAFETY: fork child of a possibly multi-threaded process: only async-signal-safe raw
        // syscalls on plain values and a stack `timespec` follow, and the child never returns
        // (it `_exit`s or is killed by the parent), so no Rust destructor or lock runs here.
        unsafe {
            if libc::setgroups(0, std::ptr::null()) < 0
                || libc::setresgid(gid, gid, gid) < 0
                || libc::setresuid(uid, uid, uid) < 0
            {
                libc::_exit(2);
            }
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 1_000_000,
            };
            loop {
                libc::kill(-1, libc::SIGKILL);
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
        }
    }
    if helper < 0 {
        return false;
    }
    let mut clean = false;
    loop {
        if crate::live_pids_of_uid(uid).iter().all(|&p| p == helper) {
            clean = true;
            break;
        }
        if std::time::Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // SAFETY: kill(2) takes plain integers; `helper` is our child, not reaped until
    // `wait_exit_code` below, so the pid still names it.
    unsafe { libc::kill(helper, libc::SIGKILL) };
    wait_exit_code(helper);
    clean
}

/// Probes, in a throwaway child, whether this process may create the namespaces a run needs.
pub fn can_unshare() -> Result<(), io::Error> {
    // SAFETY: as in `kill_all_of_uid`: the child below makes only async-signal-safe calls.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: fork child: `unshare`, reading errno and `_exit` are async-signal-safe and
        // allocate nothing; the child leaves through `_exit` on every path.
        unsafe {
            if libc::unshare(UNSHARE_FLAGS) < 0 {
                let e = io::Error::last_os_error().raw_os_error().unwrap_or(255);
                libc::_exit(e.clamp(1, 255));
            }
            libc::_exit(0);
        }
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    match wait_exit_code(pid) {
        Some(0) => Ok(()),
        Some(e) => Err(io::Error::from_raw_os_error(e)),
        None => Err(io::Error::other("probe child died")),
    }
}

fn wait_exit_code(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a live local waitpid(2) writes; `pid` is our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
    if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else {
        None
    }
}
