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

/// How [`Workspace::resolve`] found the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The `--workspace` flag.
    Flag,
    /// `VOX_WORKSPACE`.
    Env,
    /// The nearest ancestor of the current directory holding `.vox/`.
    VoxDir,
    /// The nearest ancestor of the current directory holding `.git`.
    Git,
    /// Nothing above the current directory marks a workspace.
    CurrentDir,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Found::Flag => "from --workspace",
            Found::Env => "from VOX_WORKSPACE",
            Found::VoxDir => "the nearest directory with .vox/",
            Found::Git => "the nearest directory with .git",
            Found::CurrentDir => "the current directory: no .vox/ or .git above it",
        })
    }
}

/// What `.vox/.gitignore` holds: the directory is machine-local state, never committed.
const GITIGNORE: &str = "*\n";

impl Workspace {
    /// `explicit` (a `--workspace` flag), else `VOX_WORKSPACE`, else the nearest ancestor of the
    /// current directory holding `.vox/` or `.git`, else the current directory.
    pub fn resolve(explicit: Option<&Path>) -> std::io::Result<Self> {
        Self::resolve_explained(explicit).map(|(ws, _)| ws)
    }

    /// [`Workspace::resolve`], and which rule found it.
    pub fn resolve_explained(explicit: Option<&Path>) -> std::io::Result<(Self, Found)> {
        let (start, found) = if let Some(p) = explicit {
            (p.to_path_buf(), Found::Flag)
        } else if let Some(p) = std::env::var_os("VOX_WORKSPACE") {
            (PathBuf::from(p), Found::Env)
        } else {
            let cwd = std::env::current_dir()?;
            let marked = cwd.ancestors().find_map(|d| {
                if d.join(".vox").is_dir() {
                    Some((d.to_path_buf(), Found::VoxDir))
                } else if d.join(".git").exists() {
                    Some((d.to_path_buf(), Found::Git))
                } else {
                    None
                }
            });
            marked.unwrap_or((cwd, Found::CurrentDir))
        };
        Ok((Self::at(&start)?, found))
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
    /// A new directory gets a `.gitignore` of `*`, so its state is never committed. An existing
    /// directory keeps its mode and its files.
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
            })?;
        self.write_gitignore()
    }

    /// Writes `.vox/.gitignore` unless one exists (create-new: a racing creator's or the user's
    /// file is never overwritten).
    fn write_gitignore(&self) -> std::io::Result<()> {
        use std::io::Write;
        let path = self.vox_dir.join(".gitignore");
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => f.write_all(GITIGNORE.as_bytes()).map_err(|e| {
                std::io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(std::io::Error::new(
                e.kind(),
                format!("cannot write {}: {e}", path.display()),
            )),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_vox_dir_gets_a_gitignore_and_an_existing_one_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::at(tmp.path()).unwrap();
        ws.ensure_vox_dir().unwrap();
        let ignore = ws.vox_dir.join(".gitignore");
        assert_eq!(std::fs::read_to_string(&ignore).unwrap(), "*\n");
        std::fs::write(&ignore, "mine\n").unwrap();
        ws.ensure_vox_dir().unwrap();
        ws.write_gitignore().unwrap();
        assert_eq!(std::fs::read_to_string(&ignore).unwrap(), "mine\n");
    }
}
