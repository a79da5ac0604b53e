//! Running the `git` CLI with a hardened, read-only environment, a deadline and an output cap,
//! and the hardening every other git command of the project gets ([`safe_command`]).

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
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
/// discovered, change how pathspecs and diffs are interpreted, or name a program to run. The
/// orchestrator may itself run under a git hook or inside another tool that sets them.
/// `GIT_CONFIG` would make the configuration scan ([`Disarm`]) read another file than the command.
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
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_ATTR_SOURCE",
    "GIT_GLOB_PATHSPECS",
    "GIT_NOGLOB_PATHSPECS",
    "GIT_ICASE_PATHSPECS",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
];

/// Command-line configuration, for every git command the project runs, that overrides whatever
/// the repository's (or the user's or the system's) configuration says about running programs.
///
/// Command-line configuration wins over every configuration file, and git passes it on to the
/// git processes it starts itself (e.g. the `reset --hard` of `worktree add`). What cannot be
/// switched off here is switched off by name ([`Disarm`]: filter drivers, configured hooks) or
/// by the command's own options: every command that can print a patch (`diff`, `log -p`,
/// `show`, `blame`) must be given `--no-ext-diff --no-textconv`, since an empty
/// `diff.<driver>.textconv` or `diff.external` is a command git tries to run.
const SAFETY_CONFIG: &[&str] = &[
    // Hooks: $GIT_DIR/hooks or core.hooksPath (post-checkout, pre-commit, reference-transaction,
    // post-index-change ...). /dev/null is not a directory, so no hook is ever found.
    "core.hooksPath=/dev/null",
    // An fsmonitor hook is a configured program that `git status`, `diff` and `add` would run.
    "core.fsmonitor=false",
    // No pager (we also pass --no-pager and GIT_PAGER=cat).
    "core.pager=cat",
    // No credential helper, no transport at all: a local command never needs the network
    // (and a partial clone's lazy fetch, core.sshCommand, remote helpers are all transport).
    "credential.helper=",
    "protocol.allow=never",
    // Never look inside submodules: a git process started there reads the submodule's own
    // configuration, whose filter drivers we have not disarmed. `diff.submodule=diff` starts one.
    "submodule.recurse=false",
    "diff.submodule=short",
    "status.submoduleSummary=false",
    // gpg.program (and gpg.ssh.program) run for signing and for showing signatures.
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "log.showSignature=false",
    // No automatic gc or maintenance in the background after a commit.
    "gc.auto=0",
    "maintenance.auto=false",
];

/// Command-line configuration for the read-only views, on top of [`SAFETY_CONFIG`]: the output
/// we parse keeps one shape, and nothing is written.
const VIEW_CONFIG: &[&str] = &[
    // Paths come back raw (we use -z everywhere) rather than C-quoted.
    "core.quotepath=off",
    // Colour codes would corrupt both the parsed output and the patch text.
    "color.ui=never",
    // `git diff` rewrites .git/index after a stat refresh even with GIT_OPTIONAL_LOCKS=0.
    "diff.autoRefreshIndex=false",
    // `log.follow` silently changes the meaning of a single-path log.
    "log.follow=false",
    // Keep the a/ b/ prefixes and root-relative paths that readers of a patch expect.
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
];

/// Most bytes of configuration names the scan for [`Disarm`] reads; more fails the command.
const SCAN_CAP: usize = 1024 * 1024;

/// Most drivers and hooks [`Disarm`] neutralizes; more fails the command rather than run one.
const MAX_DISARMED: usize = 1000;

/// A git command with the environment and configuration every git command of the project gets:
/// [`SCRUBBED_ENV`] removed, no prompt, pager or editor, no lazy fetch, no optional locks, and
/// [`SAFETY_CONFIG`]. Not yet [`Disarm`]ed.
fn base_command(cwd: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(cwd).stdin(Stdio::null());
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        // `:` is git's own "no editor": the message is kept as it is.
        .env("GIT_EDITOR", ":")
        .env("GIT_SEQUENCE_EDITOR", ":");
    cmd.arg("--no-pager");
    for setting in SAFETY_CONFIG {
        cmd.arg("-c").arg(setting);
    }
    cmd
}

/// The arguments of the scan for [`Disarm`]: the names of every `filter.<driver>.*` and
/// `hook.<name>.*` setting, from every configuration file git reads for the command (includes
/// followed), NUL-terminated.
const SCAN_ARGS: &[&str] = &[
    "config",
    "--null",
    "--name-only",
    "--get-regexp",
    "^(filter|hook)\\.",
];

/// The filter drivers and configured hooks a repository's configuration names, to be turned off
/// by name: no single setting turns them all off.
///
/// * A filter driver (`filter.<driver>.clean`, `.smudge`, `.process`) runs for every path a
///   `filter=<driver>` attribute names (in `.gitattributes`, `.git/info/attributes`, the global
///   or system attributes) whenever git hashes a working-tree file (`status`, `diff`, `add`) or
///   writes one (`checkout`, `worktree add`, `apply`). Setting its three commands to the empty
///   string makes git skip it, and `required=false` makes that skip no error: the content passes
///   through unfiltered.
/// * A configured hook (`hook.<name>.command` with `hook.<name>.event`, git 2.54 and later) is
///   not found through `core.hooksPath`; `hook.<name>.enabled=false` turns it off. Older git
///   ignores the setting.
///
/// The settings go through `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>` rather
/// than `-c`, which cannot carry a driver name containing `=`. git hands them on to the git
/// processes it starts.
///
/// Configuration written between the scan and the command is not seen: the scan runs right
/// before every command to keep that window short.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Disarm {
    filters: Vec<OsString>,
    hooks: Vec<OsString>,
}

impl Disarm {
    /// Reads the output of a scan with [`SCAN_ARGS`].
    fn parse(names: &[u8]) -> Disarm {
        let mut filters = BTreeSet::new();
        let mut hooks = BTreeSet::new();
        for key in names.split(|b| *b == 0).filter(|k| !k.is_empty()) {
            // Section and variable names come back lower-cased; the subsection (the driver's or
            // hook's name) as written, and it may itself contain dots.
            let (set, rest) = if let Some(rest) = key.strip_prefix(b"filter.") {
                (&mut filters, rest)
            } else if let Some(rest) = key.strip_prefix(b"hook.") {
                (&mut hooks, rest)
            } else {
                continue;
            };
            // `hook.jobs` and the like have no subsection: nothing to disarm.
            if let Some(dot) = rest.iter().rposition(|b| *b == b'.') {
                set.insert(rest[..dot].to_vec());
            }
        }
        Disarm {
            filters: filters.into_iter().map(os_string).collect(),
            hooks: hooks.into_iter().map(os_string).collect(),
        }
    }

    fn len(&self) -> usize {
        self.filters.len() + self.hooks.len()
    }

    /// The `(key, value)` settings that turn everything found off.
    fn settings(&self) -> Vec<(OsString, &'static str)> {
        let key = |section: &str, name: &OsString, var: &str| {
            let mut k = OsString::from(section);
            k.push(".");
            k.push(name);
            k.push(".");
            k.push(var);
            k
        };
        let mut out = Vec::with_capacity(self.filters.len() * 4 + self.hooks.len());
        for name in &self.filters {
            for (var, value) in [
                ("clean", ""),
                ("smudge", ""),
                ("process", ""),
                ("required", "false"),
            ] {
                out.push((key("filter", name, var), value));
            }
        }
        for name in &self.hooks {
            out.push((key("hook", name, "enabled"), "false"));
        }
        out
    }

    /// Passes the settings to `cmd` through git's configuration environment.
    fn apply(&self, cmd: &mut Command) {
        let settings = self.settings();
        if settings.is_empty() {
            return;
        }
        cmd.env("GIT_CONFIG_COUNT", settings.len().to_string());
        for (i, (key, value)) in settings.into_iter().enumerate() {
            cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
                .env(format!("GIT_CONFIG_VALUE_{i}"), value);
        }
    }
}

#[cfg(unix)]
fn os_string(bytes: Vec<u8>) -> OsString {
    use std::os::unix::ffi::OsStringExt;
    OsString::from_vec(bytes)
}

#[cfg(not(unix))]
fn os_string(bytes: Vec<u8>) -> OsString {
    OsString::from(String::from_utf8_lossy(&bytes).into_owned())
}

/// A `git` command to run in `dir` that runs no program the configuration names: see
/// [`crate::safe_git_command`].
pub(crate) fn safe_command(dir: &Path, timeout: Duration) -> Result<Command, RepoError> {
    let git = Git {
        timeout,
        cancel: None,
    };
    let deadline = Instant::now() + timeout;
    match git.disarm(dir, "config", deadline)? {
        Ok(disarm) => {
            let mut cmd = base_command(dir);
            disarm.apply(&mut cmd);
            Ok(cmd)
        }
        Err(failed) => Err(RepoError::Git {
            command: "config".to_owned(),
            stderr: failed.stderr,
        }),
    }
}

/// Captured result of one git invocation.
#[derive(Debug)]
pub(crate) struct GitOutput {
    /// Standard output, at most the requested cap.
    pub stdout: Vec<u8>,
    /// Standard error (lossily decoded, trimmed, capped).
    pub stderr: String,
    /// Whether git exited successfully. Meaningless when `overflowed` (we killed it).
    pub success: bool,
    /// git's exit code, when it exited (not killed, not by a signal).
    pub code: Option<i32>,
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
    /// Returns the output whatever the exit status; callers decide what a failure means. When
    /// the configuration cannot be read for [`Disarm`], that failure is returned as the
    /// command's (git would have failed the same way).
    pub fn run<S: AsRef<OsStr>>(
        &self,
        cwd: &Path,
        args: &[S],
        cap: usize,
    ) -> Result<GitOutput, RepoError> {
        let command_name = args
            .first()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .unwrap_or_default();
        let deadline = Instant::now() + self.timeout;
        let disarm = match self.disarm(cwd, &command_name, deadline)? {
            Ok(disarm) => disarm,
            Err(failed) => return Ok(failed),
        };
        let mut cmd = base_command(cwd);
        disarm.apply(&mut cmd);
        cmd.env("GIT_LITERAL_PATHSPECS", "1")
            .env("LC_ALL", "C")
            .env("LANGUAGE", "C");
        for setting in VIEW_CONFIG {
            cmd.arg("-c").arg(setting);
        }
        cmd.args(args);
        self.collect(cmd, &command_name, cap, deadline)
    }

    /// Scans the configuration `cwd`'s git commands read for what [`Disarm`] turns off; the
    /// scan's own output when it failed. Deadline and cancellation are the command's.
    fn disarm(
        &self,
        cwd: &Path,
        command_name: &str,
        deadline: Instant,
    ) -> Result<Result<Disarm, GitOutput>, RepoError> {
        let mut cmd = base_command(cwd);
        cmd.env("LC_ALL", "C").env("LANGUAGE", "C").args(SCAN_ARGS);
        let out = self.collect(cmd, command_name, SCAN_CAP, deadline)?;
        if out.overflowed {
            return Err(RepoError::Git {
                command: command_name.to_owned(),
                stderr: format!(
                    "the configuration names more than {SCAN_CAP} bytes of filter drivers and hooks"
                ),
            });
        }
        match out.code {
            // 1: no such setting.
            Some(0 | 1) => {}
            _ => return Ok(Err(out)),
        }
        let disarm = Disarm::parse(&out.stdout);
        if disarm.len() > MAX_DISARMED {
            return Err(RepoError::Git {
                command: command_name.to_owned(),
                stderr: format!(
                    "the configuration names more than {MAX_DISARMED} filter drivers and hooks"
                ),
            });
        }
        Ok(Ok(disarm))
    }

    /// Runs `cmd` until `deadline`, keeping at most `cap` bytes of standard output.
    fn collect(
        &self,
        mut cmd: Command,
        command_name: &str,
        cap: usize,
        deadline: Instant,
    ) -> Result<GitOutput, RepoError> {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let command_name = command_name.to_owned();

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
            code: status.and_then(|s| s.code()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disarm_finds_every_filter_driver_and_configured_hook_by_name() {
        let names = b"filter.evil.clean\0filter.evil.smudge\0filter.we=ird.na.me.process\0\
            filter.Evil.required\0filter.clean\0hook.jobs\0hook.lint.command\0hook.lint.event\0\
            diff.evil.textconv\0";
        let disarm = Disarm::parse(names);
        assert_eq!(
            disarm.filters,
            [
                OsString::from("Evil"),
                OsString::from("evil"),
                OsString::from("we=ird.na.me")
            ]
        );
        assert_eq!(disarm.hooks, [OsString::from("lint")]);
        let settings: Vec<(String, &str)> = disarm
            .settings()
            .into_iter()
            .map(|(k, v)| (k.to_string_lossy().into_owned(), v))
            .collect();
        assert_eq!(settings.len(), 13);
        assert!(settings.contains(&("filter.we=ird.na.me.process".to_owned(), "")));
        assert!(settings.contains(&("filter.evil.required".to_owned(), "false")));
        assert!(settings.contains(&("hook.lint.enabled".to_owned(), "false")));
    }

    #[test]
    fn nothing_to_disarm_sets_no_configuration() {
        let disarm = Disarm::parse(b"");
        assert_eq!(disarm, Disarm::default());
        let mut cmd = Command::new("git");
        disarm.apply(&mut cmd);
        assert!(cmd.get_envs().next().is_none());
    }
}
