//! Where a workspace's state lives: `<workspace>/.vox/` (socket, lock, store, logs).

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// A resolved workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// The canonical workspace directory.
    pub root: PathBuf,
    /// `<root>/.vox`.
    pub vox_dir: PathBuf,
    /// First 16 hex digits of the SHA-256 of the canonical root path.
    pub id: String,
}

impl Workspace {
    /// `explicit` (a `--workspace` flag), else `VOX_WORKSPACE`, else the nearest ancestor of the
    /// current directory holding `.vox/` or `.git`, else the current directory.
    pub fn resolve(explicit: Option<&Path>) -> std::io::Result<Self> {
        let env = std::env::var_os("VOX_WORKSPACE").map(PathBuf::from);
        let start = match explicit.map(Path::to_path_buf).or(env) {
            Some(p) => p,
            None => {
                let cwd = std::env::current_dir()?;
                cwd.ancestors()
                    .find(|d| d.join(".vox").is_dir() || d.join(".git").exists())
                    .map(Path::to_path_buf)
                    .unwrap_or(cwd)
            }
        };
        Self::at(&start)
    }

    /// The workspace rooted exactly at `root`.
    pub fn at(root: &Path) -> std::io::Result<Self> {
        let root = root.canonicalize().map_err(|e| {
            std::io::Error::new(e.kind(), format!("workspace {}: {e}", root.display()))
        })?;
        let digest = Sha256::digest(root.as_os_str().as_encoded_bytes());
        let id = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        Ok(Workspace {
            vox_dir: root.join(".vox"),
            root,
            id,
        })
    }

    /// Creates `.vox/` if missing, private to the user (0700): it holds the store and socket.
    /// An existing directory keeps its mode.
    pub fn ensure_vox_dir(&self) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        if self.vox_dir.is_dir() {
            return Ok(());
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.vox_dir)
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot create {}: {e}", self.vox_dir.display()),
                )
            })
    }

    /// The daemon's Unix socket.
    pub fn socket_path(&self) -> PathBuf {
        self.vox_dir.join("orchestrator.sock")
    }
    /// Held (flock) by the running daemon for its whole life.
    pub fn daemon_lock_path(&self) -> PathBuf {
        self.vox_dir.join("orchestrator.lock")
    }
    /// Held by a client while it checks for, and maybe spawns, the daemon.
    pub fn spawn_lock_path(&self) -> PathBuf {
        self.vox_dir.join("spawn.lock")
    }
    /// The daemon's pid, profile and socket, written beside the socket.
    pub fn daemon_info_path(&self) -> PathBuf {
        self.vox_dir.join("orchestrator.json")
    }
    /// Where a spawned daemon's stderr goes.
    pub fn daemon_log_path(&self) -> PathBuf {
        self.vox_dir.join("daemon.log")
    }
    /// The journey store (`VOX_DB_PATH` overrides).
    pub fn db_path(&self) -> PathBuf {
        std::env::var_os("VOX_DB_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.vox_dir.join("journey.db"))
    }
    /// Session files used when the store is down under `dev`.
    pub fn session_files_dir(&self) -> PathBuf {
        self.vox_dir.join("sessions")
    }
}
