//! Running the `git` CLI with a hardened, read-only environment, a deadline and an output cap.

use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::RepoError;

/// How much of git's standard error is kept for error messages; the rest is drained and dropped.
const STDERR_CAP: usize = 16 * 1024;

/// How long to wait for the stderr reader after git has exited. A grandchild that inherited the
/// pipe could keep it open forever; we would rather lose the message than hang.
const STDERR_GRACE: Duration = Duration::from_millis(200);

/// Variables that would point git at another repository, index or object store than the one we
/// discovered, or change how pathspecs and diffs are interpreted. The orchestrator may itself run
/// under a git hook or inside another tool that sets them.
const SCRUBBED_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_SHALLOW_FILE",
    "GIT_GRAFT_FILE",
    "GIT_REPLACE_REF_BASE",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
    "GIT_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
];

/// Command-line configuration that overrides repository and user configuration which could
/// otherwise run programs, write files, reach the network or change the output we parse.
const HARDENING_CONFIG: &[&str] = &[
    // Paths come back raw (we use -z everywhere) rather than C-quoted.
    "core.quotepath=off",
    // Colour codes would corrupt both the parsed output and the patch text.
    "color.ui=never",
    // An fsmonitor hook is a configured program that `git status` would run.
    "core.fsmonitor=false",
    // `git diff` rewrites .git/index after a stat refresh even with GIT_OPTIONAL_LOCKS=0.
    "diff.autoRefreshIndex=false",
    // `log.showSignature` would start gpg for every commit.
    "log.showSignature=false",
    // `log.follow` silently changes the meaning of a single-path log.
    "log.follow=false",
    // Keep the a/ b/ prefixes and root-relative paths that readers of a patch expect.
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    // No transport at all: a read-only view must never fetch (e.g. a partial clone's lazy fetch).
    "protocol.allow=never",
];

/// Captured result of one git invocation.
#[derive(Debug)]
pub(crate) struct GitOutput {
    /// Standard output, at most the requested cap.
    pub stdout: Vec<u8>,
    /// Standard error (lossily decoded, trimmed, capped).
    pub stderr: String,
    /// Whether git exited successfully. Meaningless when `overflowed` (we killed it).
    pub success: bool,
    /// True when standard output was longer than the cap; git was stopped early.
    pub overflowed: bool,
}

/// Runs git in a repository's working tree with a deadline.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    pub timeout: Duration,
    pub cancel: Option<CancelCheck>,
}

/// Asked while git runs whether the caller gave up.
#[derive(Clone)]
pub(crate) struct CancelCheck(pub std::sync::Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for CancelCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CancelCheck")
    }
}

/// How often a running git command looks at the caller's cancel check.
const CANCEL_POLL: Duration = Duration::from_millis(20);

/// Why waiting for git's output stopped.
enum Waited<T> {
    Got(T),
    Timeout,
    Cancelled,
}

impl Git {
    /// Runs `git <hardening> <args>` in `cwd`, keeping at most `cap` bytes of standard output.
    ///
    /// Returns the output whatever the exit status; callers decide what a failure means.
    pub fn run<S: AsRef<OsStr>>(
        &self,
        cwd: &Path,
        args: &[S],
        cap: usize,
    ) -> Result<GitOutput, RepoError> {
        let mut cmd = Command::new("git");
        cmd.current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for var in SCRUBBED_ENV {
            cmd.env_remove(var);
        }
        cmd.env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_LITERAL_PATHSPECS", "1")
            .env("GIT_PAGER", "cat")
            .env("PAGER", "cat")
            .env("LC_ALL", "C")
            .env("LANGUAGE", "C");
        cmd.arg("--no-pager");
        for setting in HARDENING_CONFIG {
            cmd.arg("-c").arg(setting);
        }
        cmd.args(args);

        let command_name = args
            .first()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .unwrap_or_default();
        let started = Instant::now();
        let deadline = started + self.timeout;

        let mut child = cmd.spawn().map_err(RepoError::Spawn)?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            kill_and_reap(&mut child);
            return Err(RepoError::Spawn(std::io::Error::other(
                "git's standard streams were not captured",
            )));
        };

        let (out_tx, out_rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = out_tx.send(read_capped(stdout, cap));
        });
        let (err_tx, err_rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = err_tx.send(read_stderr(stderr));
        });

        // A deadline that passed while git was starting is a timeout, whatever git managed to
        // write by now (otherwise the outcome would depend on thread scheduling).
        let received = if deadline <= Instant::now() {
            Waited::Timeout
        } else {
            self.receive(&out_rx, deadline)
        };
        let (stdout, overflowed) = match received {
            Waited::Got(Ok(read)) => read,
            Waited::Got(Err(err)) => {
                kill_and_reap(&mut child);
                return Err(RepoError::Io {
                    command: command_name,
                    source: err,
                });
            }
            Waited::Cancelled => {
                kill_and_reap(&mut child);
                return Err(RepoError::Cancelled {
                    command: command_name,
                });
            }
            Waited::Timeout => {
                kill_and_reap(&mut child);
                return Err(RepoError::Timeout {
                    command: command_name,
                    seconds: self.timeout.as_secs_f64(),
                });
            }
        };

        let status = if overflowed {
            // We stopped reading; git would block or die of SIGPIPE. Do not wait for either.
            kill_and_reap(&mut child);
            None
        } else {
            match wait_until(&mut child, deadline) {
                Some(status) => Some(status),
                None => {
                    kill_and_reap(&mut child);
                    return Err(RepoError::Timeout {
                        command: command_name,
                        seconds: self.timeout.as_secs_f64(),
                    });
                }
            }
        };

        let stderr = err_rx.recv_timeout(STDERR_GRACE).unwrap_or_default();
        Ok(GitOutput {
            stdout,
            stderr,
            success: status.is_some_and(|s| s.success()),
            overflowed,
        })
    }

    /// Waits for the output reader until the deadline, asking the cancel check between slices.
    fn receive<T>(&self, rx: &mpsc::Receiver<T>, deadline: Instant) -> Waited<T> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Waited::Timeout;
            }
            let slice = match &self.cancel {
                Some(_) => left.min(CANCEL_POLL),
                None => left,
            };
            match rx.recv_timeout(slice) {
                Ok(v) => return Waited::Got(v),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Waited::Timeout,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if self.cancel.as_ref().is_some_and(|c| (c.0)()) {
                        return Waited::Cancelled;
                    }
                }
            }
        }
    }
}

/// Reads up to `cap` bytes, then reports whether more was available.
fn read_capped(reader: impl Read, cap: usize) -> std::io::Result<(Vec<u8>, bool)> {
    let mut buf = Vec::new();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(limit).read_to_end(&mut buf)?;
    let overflowed = buf.len() > cap;
    buf.truncate(cap);
    Ok((buf, overflowed))
}

/// Keeps the head of standard error and drains the rest so git never blocks writing to it.
fn read_stderr(mut reader: impl Read) -> String {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = STDERR_CAP.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).trim().to_owned()
}

/// Polls for exit until the deadline. Standard output has already closed, so git is normally
/// exiting and the first poll succeeds; the backoff only matters for a wedged process.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    let mut pause = Duration::from_micros(50);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) => {}
            Err(_) => return None,
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

fn kill_and_reap(child: &mut Child) {
    // Either call can fail only because the process is already gone, which is what we want.
    let _ = child.kill();
    let _ = child.wait();
}
