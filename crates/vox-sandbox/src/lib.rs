//! Runs a caller-supplied command for an installed skill (a directory of files) in a sandbox.
//!
//! What a run gets (see README.md for the why of each):
//! - **Scratch copy**: the skill dir is copied (symlinks never followed, size and entry count
//!   bounded) into a fresh `0700` tmpfs (size- and inode-bounded) mounted under the system temp
//!   dir; the command runs in that copy, `HOME` and `TMPDIR` point into it, and it is unmounted
//!   and deleted afterwards.
//! - **Throwaway uid**: the command runs as a uid/gid private to this run (no groups), so
//!   `RLIMIT_NPROC` really applies (root is exempt from it) and every process of the run,
//!   even one that left the process group, can be found and killed.
//! - **Landlock**: read and execute everywhere, write only beneath the scratch dir (and to
//!   `/dev/null`); TCP bind/connect denied (ABI >= 4); signals and abstract unix sockets
//!   scoped to the sandbox (ABI >= 6). No Landlock, or an ABI below 3 → [`SandboxError::Unsupported`],
//!   never an unconfined run.
//! - **Namespaces**: a fresh network namespace (only a loopback that is down) and IPC namespace.
//! - **Environment**: cleared, then only `PATH`, `HOME`, `TMPDIR`, `LANG=C.UTF-8`.
//! - **Limits**: `RLIMIT_CPU`, `RLIMIT_AS`, `RLIMIT_FSIZE`, `RLIMIT_CORE=0`, `RLIMIT_NPROC`;
//!   a wall-clock deadline after which the whole tree is `SIGKILL`ed; stdout and stderr each
//!   capped (drained and discarded past the cap).
//!
//! Needs root (to switch uid, create namespaces and mount the scratch tmpfs) on Linux with
//! Landlock ABI >= 3. `run` blocks; call it from a blocking thread in async code.

mod child;
mod landlock;
mod scratch;

use std::collections::HashSet;
use std::fmt;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// `PATH` inside the sandbox; also where a bare `argv[0]` is looked up.
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// First uid (and gid) of the range throwaway sandbox uids are drawn from.
pub const SANDBOX_UID_BASE: u32 = 1_600_000_000;
/// Size of that range.
pub const SANDBOX_UID_COUNT: u32 = 1 << 24;

/// Resource limits of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// CPU seconds per process (`RLIMIT_CPU`; SIGXCPU at the limit, SIGKILL one second later).
    pub cpu_seconds: u64,
    /// Address space per process (`RLIMIT_AS`): allocations beyond it fail with ENOMEM.
    pub memory_bytes: u64,
    /// Wall clock for the whole run; at the deadline every process of the run is killed.
    pub wall: Duration,
    /// Bytes kept of stdout and, separately, of stderr; the rest is read and discarded.
    pub max_output_bytes: usize,
    /// Processes (and threads) the run may have at once (`RLIMIT_NPROC` on its private uid).
    pub max_processes: u64,
    /// Largest file the command may write (`RLIMIT_FSIZE`; SIGXFSZ beyond it).
    pub max_file_bytes: u64,
    /// Total bytes of regular files copied from the skill dir.
    pub max_copy_bytes: u64,
    /// Files, directories and symlinks copied from the skill dir.
    pub max_copy_files: u64,
    /// Size of the scratch tmpfs (the copy plus everything the command writes, HOME and
    /// TMPDIR included); writes beyond it fail with ENOSPC.
    pub max_scratch_bytes: u64,
    /// Inodes (files, directories, symlinks) the scratch tmpfs holds.
    pub max_scratch_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_seconds: 10,
            memory_bytes: 512 << 20,
            wall: Duration::from_secs(30),
            max_output_bytes: 1 << 20,
            max_processes: 64,
            max_file_bytes: 64 << 20,
            max_copy_bytes: 64 << 20,
            max_copy_files: 10_000,
            max_scratch_bytes: 256 << 20,
            max_scratch_files: 50_000,
        }
    }
}

/// One command to run.
#[derive(Debug, Clone)]
pub struct RunRequest<'a> {
    /// The installed skill; copied, never written.
    pub skill_dir: &'a Path,
    /// The command: `argv[0]` is a bare name looked up in [`SANDBOX_PATH`], or a path
    /// (relative paths are relative to the scratch copy, e.g. `./run.sh`).
    pub argv: &'a [String],
    /// Bytes for stdin; `None` gives `/dev/null`.
    pub stdin: Option<&'a [u8]>,
    /// Resource ceilings for this run (CPU, memory, wall clock, output, processes, scratch).
    pub limits: Limits,
    /// When it turns true, every process of the run is killed (checked every 5 ms) and the
    /// outcome says [`LimitHit::Cancelled`].
    pub cancel: Option<&'a std::sync::atomic::AtomicBool>,
}

/// Which limit ended or cut the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    /// Killed at the wall-clock deadline.
    Wall,
    /// The command's process used up its CPU seconds (SIGXCPU, or SIGKILL at the hard limit).
    Cpu,
    /// The command's process wrote past `max_file_bytes` (SIGXFSZ).
    FileSize,
    /// The command finished but stdout or stderr was cut at `max_output_bytes`.
    Output,
    /// The caller cancelled the run ([`RunRequest::cancel`]); every process was killed.
    Cancelled,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// Exit status when the command exited.
    pub exit_code: Option<i32>,
    /// Signal number when the command was killed by a signal.
    pub signal: Option<i32>,
    /// Stdout (lossy UTF-8), at most `max_output_bytes` bytes of it.
    pub stdout: String,
    /// Stderr (lossy UTF-8), at most `max_output_bytes` bytes of it.
    pub stderr: String,
    /// Whether stdout was cut at `max_output_bytes` (the rest was read and dropped).
    pub stdout_truncated: bool,
    /// Whether stderr was cut at `max_output_bytes` (the rest was read and dropped).
    pub stderr_truncated: bool,
    /// The limit that ended the run (or cut its output), if any. A failed allocation under
    /// `memory_bytes` shows as the program's own error (ENOMEM, MemoryError, ...): the kernel
    /// gives no signal for it, so it is not reported here.
    pub limit: Option<LimitHit>,
    /// Wall time from spawn to reap.
    pub duration_ms: u64,
    /// User + system CPU time of the command and the descendants it waited for.
    pub cpu_ms: u64,
    /// The throwaway uid (= gid) the command ran as.
    pub sandbox_uid: u32,
}

/// Why a run did not happen.
#[derive(Debug)]
pub enum SandboxError {
    /// The kernel or our privileges do not allow full confinement; nothing was run.
    Unsupported(String),
    /// The request itself is wrong (empty argv, unknown program, not a directory, ...).
    InvalidRequest(String),
    /// An I/O error setting up, running or cleaning up.
    Io {
        /// The step that failed, e.g. "creating a pipe" or "writing stdin".
        context: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl fmt::Display for SandboxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxError::Unsupported(m) => write!(f, "sandbox unsupported: {m}"),
            SandboxError::InvalidRequest(m) => write!(f, "invalid sandbox request: {m}"),
            SandboxError::Io { context, source } => {
                write!(f, "sandbox I/O error: {context}: {source}")
            }
        }
    }
}

impl std::error::Error for SandboxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SandboxError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn io_error(context: impl Into<String>, source: io::Error) -> SandboxError {
    SandboxError::Io {
        context: context.into(),
        source,
    }
}

/// What the kernel offers (returned by [`probe`] when a run is possible).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Support {
    /// Landlock ABI version (>= 3).
    pub landlock_abi: u32,
    /// Landlock also denies TCP bind/connect (ABI >= 4), on top of the network namespace.
    pub landlock_tcp: bool,
    /// Landlock scopes signals and abstract unix sockets to the sandbox (ABI >= 6).
    pub landlock_scopes: bool,
}

/// Checks everything a run needs — Landlock ABI >= 3, root, permission to create network
/// and IPC namespaces — and says what is missing as [`SandboxError::Unsupported`].
pub fn probe() -> Result<Support, SandboxError> {
    let abi = landlock::check_abi(landlock::abi_version()).map_err(SandboxError::Unsupported)?;
    require_root()?;
    child::can_unshare().map_err(|e| {
        SandboxError::Unsupported(format!(
            "cannot create a network namespace (unshare CLONE_NEWNET|CLONE_NEWIPC): {e}; refusing to run with network access"
        ))
    })?;
    Ok(Support {
        landlock_abi: abi,
        landlock_tcp: abi >= 4,
        landlock_scopes: abi >= 6,
    })
}

fn require_root() -> Result<(), SandboxError> {
    // SAFETY: geteuid(2) takes no arguments, cannot fail and touches no memory of ours.
    check_root(unsafe { libc::geteuid() })
}

fn check_root(euid: libc::uid_t) -> Result<(), SandboxError> {
    if euid != 0 {
        return Err(SandboxError::Unsupported(format!(
            "vox-sandbox must run as root (it is uid {euid}): it switches the command to a throwaway uid so that \
             the process limit holds and every process of the run can be killed; refusing to run"
        )));
    }
    Ok(())
}

/// Runs `req.argv` in the sandbox and waits for it (and everything it started) to end.
///
/// Blocks for at most about `req.limits.wall` plus cleanup. Never runs the command unconfined:
/// if any confinement step fails the command is not executed and an error is returned.
pub fn run(req: &RunRequest<'_>) -> Result<RunOutcome, SandboxError> {
    validate(req)?;
    let abi = landlock::check_abi(landlock::abi_version()).map_err(SandboxError::Unsupported)?;
    require_root()?;
    let ids = UidLease::acquire()?;
    let (uid, gid) = (ids.uid, ids.uid);

    let size = scratch::ScratchSize {
        bytes: req.limits.max_scratch_bytes,
        inodes: req.limits.max_scratch_files,
    };
    let scratch = scratch::Scratch::create(uid, gid, size)?;
    let bounds = scratch::CopyBounds {
        max_bytes: req.limits.max_copy_bytes,
        max_entries: req.limits.max_copy_files,
    };
    scratch::copy_tree(req.skill_dir, &scratch.work, uid, gid, bounds).map_err(|e| match e {
        SandboxError::Io { source, .. } if source.raw_os_error() == Some(libc::ENOSPC) => {
            SandboxError::InvalidRequest(format!(
                "skill dir {} does not fit the scratch dir (Limits::max_scratch_bytes / max_scratch_files)",
                req.skill_dir.display()
            ))
        }
        e => e,
    })?;
    let program = resolve_program(&req.argv[0], &scratch.work)?;
    let ruleset = landlock::Ruleset::build(abi, &scratch.root).map_err(|e| {
        SandboxError::Unsupported(format!(
            "cannot build the Landlock ruleset: {e}; refusing to run unconfined"
        ))
    })?;

    let (stage_r, stage_w) = stage_pipe()?;
    let stdin = match req.stdin {
        Some(bytes) => Stdio::from(stdin_memfd(bytes)?),
        None => Stdio::null(),
    };
    let l = &req.limits;
    let plan = child::ChildPlan {
        ruleset_fd: ruleset.raw_fd(),
        stage_fd: stage_w.as_raw_fd(),
        uid,
        gid,
        rlimits: [
            (
                libc::RLIMIT_CPU,
                l.cpu_seconds,
                l.cpu_seconds.saturating_add(1),
            ),
            (libc::RLIMIT_AS, l.memory_bytes, l.memory_bytes),
            (libc::RLIMIT_FSIZE, l.max_file_bytes, l.max_file_bytes),
            (libc::RLIMIT_CORE, 0, 0),
            (libc::RLIMIT_NPROC, l.max_processes, l.max_processes),
        ],
    };

    let mut cmd = Command::new(&program);
    cmd.arg0(&req.argv[0])
        .args(&req.argv[1..])
        .env_clear()
        .env("PATH", SANDBOX_PATH)
        .env("HOME", &scratch.home)
        .env("TMPDIR", &scratch.tmp)
        .env("LANG", "C.UTF-8")
        .current_dir(&scratch.work)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the hook runs in the forked child before exec, which is `child::setup`'s contract;
    // it only makes async-signal-safe raw syscalls on `plan`'s plain data (fds and ids copied
    // into the closure), so it neither allocates nor takes a lock another parent thread may hold.
    unsafe {
        cmd.pre_exec(move || child::setup(&plan));
    }
    let started = Instant::now();
    let spawned = cmd.spawn();
    drop(cmd); // closes our copy of the stdin memfd
    drop(stage_w);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return Err(spawn_error(e, read_stage(&stage_r), &req.argv[0], &program)),
    };
    drop(ruleset);
    let pid = child.id() as libc::pid_t;

    let (tx, rx) = mpsc::channel();
    let cap = l.max_output_bytes;
    let mut setup_err = None;
    for (which, stream) in [
        (
            0u8,
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
        (
            1u8,
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ),
    ] {
        let tx = tx.clone();
        if let Some(stream) = stream {
            let spawned = std::thread::Builder::new()
                .name("vox-sandbox-output".into())
                .spawn(move || {
                    let _ = tx.send((which, read_capped(stream, cap)));
                });
            if let Err(e) = spawned {
                // Do not return with the command running: fall through to the kill below.
                setup_err = Some(io_error("spawning an output reader thread", e));
                break;
            }
        } else {
            let _ = tx.send((which, (Vec::new(), false)));
        }
    }
    drop(tx);

    let deadline = if setup_err.is_some() {
        started
    } else {
        started + l.wall
    };
    let ended = wait_exit_until(pid, deadline, req.cancel);
    // The command is done (or out of time): kill its process group while its pid still
    // names it (it is not reaped yet), reap it, then kill whatever else runs as the run's uid.
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; the child is not
    // reaped yet, so `-pid` still names its process group (it called setsid).
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    let reaped = reap(pid);
    let duration_ms = started.elapsed().as_millis() as u64;
    let all_gone = child::kill_all_of_uid(uid, gid, Duration::from_secs(10));
    if let Some(e) = setup_err {
        return Err(e);
    }
    let (status, rusage) = reaped.map_err(|e| io_error("waiting for the command", e))?;

    let mut out = (Vec::new(), false);
    let mut err = (Vec::new(), false);
    let drain_deadline = Instant::now() + Duration::from_secs(5);
    for _ in 0..2 {
        let left = drain_deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((0, v)) => out = v,
            Ok((_, v)) => err = v,
            Err(_) => break,
        }
    }
    if !all_gone {
        return Err(io_error(
            format!("cleaning up sandbox uid {uid}"),
            io::Error::other("processes of the run were still alive after being killed"),
        ));
    }

    let (exit_code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    };
    let cpu_ms = tv_ms(rusage.ru_utime) + tv_ms(rusage.ru_stime);
    let limit = if ended == Ended::Cancelled {
        Some(LimitHit::Cancelled)
    } else if ended == Ended::Deadline {
        Some(LimitHit::Wall)
    } else if signal == Some(libc::SIGXCPU)
        || (signal == Some(libc::SIGKILL) && cpu_ms >= l.cpu_seconds.saturating_mul(1000))
    {
        Some(LimitHit::Cpu)
    } else if signal == Some(libc::SIGXFSZ) {
        Some(LimitHit::FileSize)
    } else if out.1 || err.1 {
        Some(LimitHit::Output)
    } else {
        None
    };
    drop(scratch);
    drop(ids);
    Ok(RunOutcome {
        exit_code,
        signal,
        stdout: String::from_utf8_lossy(&out.0).into_owned(),
        stderr: String::from_utf8_lossy(&err.0).into_owned(),
        stdout_truncated: out.1,
        stderr_truncated: err.1,
        limit,
        duration_ms,
        cpu_ms,
        sandbox_uid: uid,
    })
}

fn validate(req: &RunRequest<'_>) -> Result<(), SandboxError> {
    let bad = |m: String| Err(SandboxError::InvalidRequest(m));
    let Some(argv0) = req.argv.first() else {
        return bad("argv is empty".into());
    };
    if argv0.is_empty() {
        return bad("argv[0] is empty".into());
    }
    if let Some(a) = req.argv.iter().find(|a| a.contains('\0')) {
        return bad(format!("argument {a:?} contains a NUL byte"));
    }
    match std::fs::metadata(req.skill_dir) {
        Ok(md) if md.is_dir() => {}
        Ok(_) => {
            return bad(format!(
                "skill dir {} is not a directory",
                req.skill_dir.display()
            ));
        }
        Err(e) => return bad(format!("skill dir {}: {e}", req.skill_dir.display())),
    }
    let l = &req.limits;
    if l.cpu_seconds == 0 || l.memory_bytes == 0 || l.wall.is_zero() || l.max_processes == 0 {
        return bad(
            "limits must be positive (cpu_seconds, memory_bytes, wall, max_processes)".into(),
        );
    }
    Ok(())
}

/// Finds the executable for `argv0`: a path (relative to the scratch copy) or a bare name
/// looked up in [`SANDBOX_PATH`].
fn resolve_program(argv0: &str, work: &Path) -> Result<PathBuf, SandboxError> {
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if argv0.contains('/') {
        let p = Path::new(argv0);
        let full = if p.is_absolute() {
            p.to_path_buf()
        } else {
            work.join(p)
        };
        if executable(&full) {
            return Ok(full);
        }
        return Err(SandboxError::InvalidRequest(if full.exists() {
            format!("program {argv0:?} is not an executable file")
        } else {
            format!("program {argv0:?} not found (relative paths are relative to the skill copy)")
        }));
    }
    SANDBOX_PATH
        .split(':')
        .map(|d| Path::new(d).join(argv0))
        .find(|p| executable(p))
        .ok_or_else(|| {
            SandboxError::InvalidRequest(format!("program {argv0:?} not found in {SANDBOX_PATH}"))
        })
}

fn spawn_error(
    e: io::Error,
    stage: Option<child::Stage>,
    argv0: &str,
    program: &Path,
) -> SandboxError {
    use child::Stage;
    let refuse = |what: &str| SandboxError::Unsupported(format!("{what}: {e}; refusing to run"));
    match stage {
        Some(Stage::Unshare) => {
            refuse("cannot create a network namespace (unshare CLONE_NEWNET|CLONE_NEWIPC)")
        }
        Some(Stage::Setgroups | Stage::Setgid | Stage::Setuid) => {
            refuse("cannot switch to the sandbox uid")
        }
        Some(Stage::NoNewPrivs) => refuse("cannot set no_new_privs"),
        Some(Stage::Landlock) => refuse("cannot enforce the Landlock ruleset"),
        Some(s) => io_error(format!("setting up the sandboxed process ({s:?})"), e),
        None => match e.raw_os_error() {
            Some(libc::ENOENT | libc::EACCES | libc::ENOEXEC | libc::ENOTDIR | libc::ELOOP) => {
                SandboxError::InvalidRequest(format!(
                    "cannot execute {argv0:?} ({}): {e}",
                    program.display()
                ))
            }
            _ => io_error(format!("starting {argv0:?}"), e),
        },
    }
}

fn stage_pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a live `[c_int; 2]`, the two slots pipe2(2) writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
        return Err(io_error("creating a pipe", io::Error::last_os_error()));
    }
    // SAFETY: pipe2 succeeded, so both are new fds that nothing else owns; each `OwnedFd` is
    // the only owner of its fd and closes it once.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn read_stage(r: &OwnedFd) -> Option<child::Stage> {
    let mut b = 0u8;
    // SAFETY: read(2) of at most 1 byte into `b`, a live stack byte; `r` is open (borrowed
    // for the call) and non-blocking, so this cannot hang.
    let n = unsafe { libc::read(r.as_raw_fd(), &mut b as *mut u8 as *mut libc::c_void, 1) };
    if n == 1 {
        child::Stage::from_byte(b)
    } else {
        None
    }
}

/// Stdin as a sealed memfd: no writer thread (nor SIGPIPE in the caller's process when the
/// command does not read it), nothing on disk.
fn stdin_memfd(bytes: &[u8]) -> Result<File, SandboxError> {
    // SAFETY: the name is a NUL-terminated static C string; memfd_create(2) only reads it.
    let fd = unsafe {
        libc::memfd_create(
            c"vox-sandbox-stdin".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(io_error(
            "creating the stdin memfd",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: `fd >= 0` is a new fd memfd_create just returned; nothing else owns it, so the
    // `File` is its only owner and closes it once.
    let mut f = unsafe { File::from_raw_fd(fd) };
    f.write_all(bytes)
        .map_err(|e| io_error("writing stdin", e))?;
    f.rewind().map_err(|e| io_error("writing stdin", e))?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: F_ADD_SEALS takes an integer argument and touches no memory of ours; the fd is
    // `f`'s, open for the call.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(io_error(
            "sealing the stdin memfd",
            io::Error::last_os_error(),
        ));
    }
    Ok(f)
}

/// Reads to EOF, keeping at most `cap` bytes; the flag says whether anything was dropped.
fn read_capped(mut r: impl Read, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = cap - kept.len();
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (kept, truncated)
}

/// Waits until `pid` has exited (without reaping it) or the deadline passes. True if it exited.
/// How waiting for the command ended.
#[derive(PartialEq, Eq)]
enum Ended {
    Exited,
    Deadline,
    Cancelled,
}

/// How often a wait looks at the cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(5);

fn wait_exit_until(
    pid: libc::pid_t,
    deadline: Instant,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Ended {
    // SAFETY: pidfd_open takes plain integers; `pid` is our own child, not reaped yet (only
    // `reap` does, after this wait), so it cannot name another process.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: `raw >= 0` is a new fd the kernel just returned (O_CLOEXEC by default); nothing
    // else owns it, so the `OwnedFd` is its only owner and closes it once.
    let pidfd = (raw >= 0).then(|| unsafe { OwnedFd::from_raw_fd(raw as i32) });
    loop {
        if exited(pid) {
            return Ended::Exited;
        }
        if cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
            return Ended::Cancelled;
        }
        let mut left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ended::Deadline;
        }
        if cancel.is_some() {
            left = left.min(CANCEL_POLL);
        }
        match &pidfd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
                // SAFETY: `p` is one live `pollfd` on the stack (count 1) for the duration of
                // the call; its fd is `pidfd`'s, open while this loop runs.
                unsafe { libc::poll(&mut p, 1, ms) };
            }
            None => std::thread::sleep(left.min(Duration::from_millis(5))),
        }
    }
}

fn exited(pid: libc::pid_t) -> bool {
    // SAFETY: `siginfo_t` is plain C data, for which all-zero bytes are a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a live, writable siginfo_t for the duration of the call; WNOWAIT leaves
    // the child unreaped, so its pid stays ours for the later kill and `reap`.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: `si_pid` reads the union member waitid fills for child events (WEXITED); when no
    // child has changed state (WNOHANG) the struct stays zeroed and this reads 0, never `pid`.
    r == 0 && unsafe { info.si_pid() } == pid
}

fn reap(pid: libc::pid_t) -> io::Result<(libc::c_int, libc::rusage)> {
    let mut status = 0;
    // SAFETY: `rusage` is plain C data, for which all-zero bytes are a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `ru` are live locals wait4(2) writes; `pid` is our own child,
        // which only this function reaps.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            return Ok((status, ru));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn tv_ms(tv: libc::timeval) -> u64 {
    (tv.tv_sec as u64).saturating_mul(1000) + (tv.tv_usec as u64) / 1000
}

/// A uid (= gid) from the sandbox range that no process on the machine and no other run in
/// this process is using, held until dropped.
struct UidLease {
    uid: u32,
}

static LEASED: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

impl UidLease {
    fn acquire() -> Result<UidLease, SandboxError> {
        let busy = uids_in_use();
        let state = std::collections::hash_map::RandomState::new();
        for attempt in 0u64..64 {
            let mut h = state.build_hasher();
            h.write_u32(std::process::id());
            h.write_u64(attempt);
            h.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
            );
            let uid = SANDBOX_UID_BASE + (h.finish() % SANDBOX_UID_COUNT as u64) as u32;
            if busy.contains(&uid) {
                continue;
            }
            let mut leased = LEASED.lock().unwrap_or_else(|p| p.into_inner());
            if leased.get_or_insert_with(HashSet::new).insert(uid) {
                return Ok(UidLease { uid });
            }
        }
        Err(io_error(
            "choosing a sandbox uid",
            io::Error::other("no free uid found"),
        ))
    }
}

impl Drop for UidLease {
    fn drop(&mut self) {
        let mut leased = LEASED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(set) = leased.as_mut() {
            set.remove(&self.uid);
        }
    }
}

/// Pid, zombie state, and real, effective, saved and filesystem uids of every process
/// (`/proc/<pid>/status`).
fn for_each_process_uids(mut f: impl FnMut(libc::pid_t, bool, &[u32])) {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return;
    };
    for ent in rd.flatten() {
        let Some(pid) = ent
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(ent.path().join("status")) else {
            continue;
        };
        if let Some(line) = status.lines().find(|l| l.starts_with("Uid:")) {
            let uids: Vec<u32> = line[4..]
                .split_whitespace()
                .filter_map(|s| s.parse().ok())
                .collect();
            let zombie = status
                .lines()
                .any(|l| l.starts_with("State:") && l[6..].trim_start().starts_with('Z'));
            f(pid, zombie, &uids);
        }
    }
}

/// Sandbox-range uids some process uses.
fn uids_in_use() -> HashSet<u32> {
    let range = SANDBOX_UID_BASE..SANDBOX_UID_BASE + SANDBOX_UID_COUNT;
    let mut set = HashSet::new();
    for_each_process_uids(|_, _, uids| set.extend(uids.iter().filter(|u| range.contains(u))));
    set
}

/// Live (not zombie) processes that have `uid` as any of their uids.
pub(crate) fn live_pids_of_uid(uid: u32) -> Vec<libc::pid_t> {
    let mut pids = Vec::new();
    for_each_process_uids(|pid, zombie, uids| {
        if !zombie && uids.contains(&uid) {
            pids.push(pid);
        }
    });
    pids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_root_caller_is_refused_clearly() {
        assert!(check_root(0).is_ok());
        match check_root(1000) {
            Err(SandboxError::Unsupported(m)) => {
                assert!(
                    m.contains("must run as root") && m.contains("uid 1000"),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn output_is_capped_while_draining() {
        let (kept, truncated) = read_capped(&[1u8; 10_000][..], 100);
        assert_eq!((kept.len(), truncated), (100, true));
        let (kept, truncated) = read_capped(&[1u8; 100][..], 100);
        assert_eq!((kept.len(), truncated), (100, false));
    }
}
