//! Logs: the `VOX_LOG` filter and `VOX_LOG_FORMAT`, both checked strictly (a filter that does
//! not parse stops `vox` instead of logging at a default), and a daemon's `daemon.log` rotated
//! by size (`VOX_LOG_MAX_BYTES`, `VOX_LOG_FILES`).
//!
//! A spawned daemon's stderr *is* `daemon.log` (the spawner opens it); rotating renames the
//! file and points stderr at a fresh one with `dup2`, so everything written to stderr — log
//! lines, a panic message — lands in the current file.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use tracing_subscriber::EnvFilter;

/// Sets up logging to stderr: `VOX_LOG` (else `default`) and `VOX_LOG_FORMAT`.
pub fn init(default: &str) -> Result<(), String> {
    let filter = match vox_core::env::text("VOX_LOG").map_err(|e| e.to_string())? {
        Some(spec) => EnvFilter::try_new(&spec)
            .map_err(|e| format!("VOX_LOG: `{spec}` is not a log filter: {e}"))?,
        None => EnvFilter::new(default),
    };
    let json = vox_core::env::text("VOX_LOG_FORMAT")
        .map_err(|e| e.to_string())?
        .is_some_and(|f| f == "json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LogWriter)
        .with_ansi(false);
    // A second call (a command that sets up its own level) keeps the first set-up.
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
    Ok(())
}

/// The rotation of `daemon.log`, once this process knows its stderr is that file.
static ROTATION: OnceLock<Rotation> = OnceLock::new();

struct Rotation {
    path: PathBuf,
    max_bytes: u64,
    files: u64,
    written: AtomicU64,
    rotating: Mutex<()>,
}

/// Rotates `log` by size from now on when this process's stderr is that file (a daemon that
/// `vox mcp` or `vox daemon start` spawned); rotates it at once when it is already too big.
pub fn rotate_when_stderr_is(log: &Path) -> Result<(), String> {
    let max_bytes = vox_core::env::number("VOX_LOG_MAX_BYTES")
        .map_err(|e| e.to_string())?
        .unwrap_or(10 * 1024 * 1024);
    let files = vox_core::env::number("VOX_LOG_FILES")
        .map_err(|e| e.to_string())?
        .unwrap_or(5);
    if !stderr_is(log) {
        return Ok(());
    }
    let size = std::fs::metadata(log).map_or(0, |m| m.len());
    let rotation = ROTATION.get_or_init(|| Rotation {
        path: log.to_owned(),
        max_bytes,
        files,
        written: AtomicU64::new(size),
        rotating: Mutex::new(()),
    });
    rotation.maybe_rotate();
    Ok(())
}

fn stderr_is(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(file) = std::fs::metadata(path) else {
        return false;
    };
    let Ok(err) = std::fs::metadata("/proc/self/fd/2") else {
        return false;
    };
    file.dev() == err.dev() && file.ino() == err.ino()
}

impl Rotation {
    fn maybe_rotate(&self) {
        if self.written.load(Ordering::Relaxed) < self.max_bytes {
            return;
        }
        // One rotation at a time; a writer that finds one under way goes on.
        let Ok(_one) = self.rotating.try_lock() else {
            return;
        };
        if self.written.load(Ordering::Relaxed) < self.max_bytes {
            return;
        }
        if let Err(e) = self.rotate() {
            let _ = writeln!(
                std::io::stderr(),
                "vox: cannot rotate {}: {e}",
                self.path.display()
            );
        }
        // Counted from zero either way: a failed rotation is retried after another max_bytes,
        // not on every line.
        self.written.store(0, Ordering::Relaxed);
    }

    /// Shifts the files, then points stderr at a new `daemon.log`.
    fn rotate(&self) -> std::io::Result<()> {
        shift(&self.path, self.files)?;
        let fresh = vox_core::open_state_file(&self.path, true)?;
        // SAFETY: dup2 on two descriptors this process owns: `fresh` stays open until after
        // the call, and fd 2 is replaced atomically (a concurrent write goes to the old file
        // or the new one, never to a closed descriptor).
        if unsafe { libc::dup2(fresh.as_raw_fd(), 2) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// `log.N-1` → `log.N`, …, `log` → `log.1`; the oldest beyond `files` is removed.
fn shift(log: &Path, files: u64) -> std::io::Result<()> {
    let numbered = |i: u64| {
        let mut p = log.as_os_str().to_owned();
        p.push(format!(".{i}"));
        PathBuf::from(p)
    };
    let _ = std::fs::remove_file(numbered(files));
    for i in (1..files).rev() {
        let _ = std::fs::rename(numbered(i), numbered(i + 1));
    }
    std::fs::rename(log, numbered(1))
}

/// One log event's writer: stderr, counted for the rotation, which is checked when the event
/// is written out (on drop).
struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = std::io::stderr().write(buf)?;
        if let Some(r) = ROTATION.get() {
            r.written.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        if let Some(r) = ROTATION.get() {
            r.maybe_rotate();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_shifts_the_numbered_files_and_keeps_a_bounded_number_of_them() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("daemon.log");
        for round in 0..4 {
            std::fs::write(&log, format!("round {round}")).unwrap();
            shift(&log, 2).unwrap();
        }
        let read = |s: &str| std::fs::read_to_string(dir.path().join(s)).unwrap();
        assert_eq!(read("daemon.log.1"), "round 3");
        assert_eq!(read("daemon.log.2"), "round 2");
        assert!(!dir.path().join("daemon.log.3").exists());
    }
}
