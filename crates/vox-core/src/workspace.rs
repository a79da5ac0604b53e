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
    /// directory keeps its mode and its files, but must be safe to keep state in
    /// ([`Workspace::check_vox_dir`]).
    pub fn ensure_vox_dir(&self) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        if std::fs::symlink_metadata(&self.vox_dir).is_ok() {
            return self.check_vox_dir();
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
        self.check_vox_dir()?;
        self.write_gitignore()
    }

    /// Refuses a `.vox` that another user could swap state under: a symlink (the daemon would
    /// write its log and store wherever it points), not a directory, owned by another user, or
    /// writable by others (world-writable). Group-writable is allowed: a shared checkout with
    /// umask 002 is common, and the group is the user's choice.
    pub fn check_vox_dir(&self) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let dir = self.vox_dir.display();
        let refuse = |why: String| {
            Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("refusing the workspace state directory {dir}: {why}"),
            ))
        };
        let m = std::fs::symlink_metadata(&self.vox_dir)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{dir}: {e}")))?;
        if m.file_type().is_symlink() {
            let to = std::fs::read_link(&self.vox_dir).unwrap_or_default();
            return refuse(format!(
                "it is a symlink (to {}); make it a directory of its own",
                to.display()
            ));
        }
        if !m.is_dir() {
            return refuse("it is not a directory".into());
        }
        let me = current_uid();
        if m.uid() != me {
            return refuse(format!(
                "it is owned by uid {}, not by you (uid {me}); remove it or chown it",
                m.uid()
            ));
        }
        if m.mode() & 0o002 != 0 {
            return refuse(format!(
                "anyone may write in it (mode {:o}); `chmod o-w {dir}`",
                m.mode() & 0o7777
            ));
        }
        Ok(())
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

/// Opens a state file of `.vox/` for writing (`append`, else keeping its bytes for the caller
/// to lock or truncate): created 0600, and never through a symlink (`O_NOFOLLOW`), so a link
/// planted in `.vox/` cannot send the daemon's writes elsewhere.
pub fn open_state_file(path: &Path, append: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            let why = if e.raw_os_error() == Some(libc::ELOOP) {
                "it is a symlink, and state files are never written through one".to_owned()
            } else {
                e.to_string()
            };
            std::io::Error::new(e.kind(), format!("cannot open {}: {why}", path.display()))
        })
}

/// Writes `text` to the state file `path` whole (see [`open_state_file`]).
pub fn write_state_file(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = open_state_file(path, false)?;
    f.set_len(0)?;
    f.write_all(text.as_bytes())
}

/// The effective uid of this process.
fn current_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
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

    #[test]
    fn a_symlinked_or_world_writable_vox_dir_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let root = tmp.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join(".vox")).unwrap();
        let ws = Workspace::at(&root).unwrap();
        let e = ws.ensure_vox_dir().unwrap_err().to_string();
        assert!(e.contains("symlink") && e.contains("elsewhere"), "{e}");

        std::fs::remove_file(root.join(".vox")).unwrap();
        std::fs::create_dir(root.join(".vox")).unwrap();
        std::fs::set_permissions(root.join(".vox"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        let e = ws.ensure_vox_dir().unwrap_err().to_string();
        assert!(e.contains("anyone may write") && e.contains("777"), "{e}");
        std::fs::set_permissions(root.join(".vox"), std::fs::Permissions::from_mode(0o775))
            .unwrap();
        ws.ensure_vox_dir().unwrap();
    }

    #[test]
    fn state_files_are_private_and_never_written_through_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::at(tmp.path()).unwrap();
        ws.ensure_vox_dir().unwrap();
        write_state_file(&ws.daemon_info_path(), "{}\n").unwrap();
        let mode = std::fs::metadata(ws.daemon_info_path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        let target = tmp.path().join("target.txt");
        std::fs::write(&target, "untouched").unwrap();
        std::os::unix::fs::symlink(&target, ws.daemon_log_path()).unwrap();
        let e = open_state_file(&ws.daemon_log_path(), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("symlink"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched");
    }
}
