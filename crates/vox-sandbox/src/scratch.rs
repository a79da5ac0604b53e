//! The scratch directory: a fresh private copy of the skill, owned by the run's throwaway uid,
//! deleted when the run ends.
//!
//! Layout: `<tmp>/vox-sandbox-<pid>-<n>-<uid>/` — a private tmpfs mount of bounded size and
//! inode count (so the command cannot fill the host's disk), mode 0700, the only tree Landlock
//! lets the command write to — holding `work/` (the copy, the working directory), `home/`
//! (HOME) and `tmp/` (TMPDIR). Dropping the [`Scratch`] unmounts (lazily) and removes it.

use std::ffi::CString;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt, lchown};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::SandboxError;

static COUNTER: AtomicU64 = AtomicU64::new(0);

pub struct Scratch {
    pub root: PathBuf,
    pub work: PathBuf,
    pub home: PathBuf,
    pub tmp: PathBuf,
    mounted: bool,
}

/// Size bounds of the scratch tmpfs.
#[derive(Clone, Copy)]
pub struct ScratchSize {
    pub bytes: u64,
    pub inodes: u64,
}

impl Scratch {
    /// Creates the scratch tree under the system temp dir, owned by `uid:gid`.
    pub fn create(uid: u32, gid: u32, size: ScratchSize) -> Result<Scratch, SandboxError> {
        let base = std::env::temp_dir();
        let pid = std::process::id();
        let mut last_err = None;
        for _ in 0..64 {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let root = base.join(format!("vox-sandbox-{pid}-{n}-{uid}"));
            match DirBuilder::new().mode(0o700).create(&root) {
                Ok(()) => {
                    let mut s = Scratch {
                        work: root.join("work"),
                        home: root.join("home"),
                        tmp: root.join("tmp"),
                        root,
                        mounted: false,
                    };
                    // From here on the guard deletes whatever was made.
                    mount_tmpfs(&s.root, uid, gid, size)?;
                    s.mounted = true;
                    for d in [&s.work, &s.home, &s.tmp] {
                        DirBuilder::new()
                            .mode(0o700)
                            .create(d)
                            .map_err(|e| io_err("creating scratch dir", d, e))?;
                    }
                    for d in [&s.root, &s.work, &s.home, &s.tmp] {
                        lchown(d, Some(uid), Some(gid))
                            .map_err(|e| io_err("chown of scratch dir", d, e))?;
                    }
                    return Ok(s);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
                Err(e) => return Err(io_err("creating scratch dir", &root, e)),
            }
        }
        Err(io_err(
            "creating scratch dir",
            &base,
            last_err.unwrap_or_else(|| io::Error::other("no free name")),
        ))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.mounted
            && let Ok(c) = CString::new(self.root.as_os_str().as_bytes())
            // SAFETY: valid C string. MNT_DETACH: gone from the tree now, freed when the last
            // user (none: every process of the run is dead) lets go.
            && unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0
        {
            let _ = fs::remove_dir(&self.root);
            return;
        }
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn mount_tmpfs(root: &Path, uid: u32, gid: u32, size: ScratchSize) -> Result<(), SandboxError> {
    let unsupported = |e: io::Error| {
        SandboxError::Unsupported(format!(
            "cannot mount a size-bounded tmpfs for the scratch dir at {}: {e}; refusing to run with an unbounded scratch",
            root.display()
        ))
    };
    let target = CString::new(root.as_os_str().as_bytes())
        .map_err(|_| unsupported(io::Error::other("path contains NUL")))?;
    let data = CString::new(format!(
        "size={},nr_inodes={},mode=0700,uid={uid},gid={gid}",
        size.bytes.max(4096),
        size.inodes.max(16)
    ))
    .expect("no NUL in formatted numbers");
    // SAFETY: valid C strings; a fresh empty directory we own as the mount point.
    let r = unsafe {
        libc::mount(
            c"vox-sandbox".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr() as *const libc::c_void,
        )
    };
    if r < 0 {
        return Err(unsupported(io::Error::last_os_error()));
    }
    Ok(())
}

fn io_err(what: &str, path: &Path, e: io::Error) -> SandboxError {
    SandboxError::Io {
        context: format!("{what} {}", path.display()),
        source: e,
    }
}

/// Bounds on the copy.
#[derive(Clone, Copy)]
pub struct CopyBounds {
    pub max_bytes: u64,
    pub max_entries: u64,
}

/// Copies `src` (a directory) into the existing directory `dst` without following symlinks:
/// regular files and directories are copied (mode bits kept, set-id bits dropped), symlinks
/// are recreated only when their target is relative without `..` (so no chain of them can
/// lead out of the copy), anything else (devices, fifos, sockets, escaping symlinks) is an
/// `InvalidRequest`. Everything is chowned to `uid:gid`.
pub fn copy_tree(
    src: &Path,
    dst: &Path,
    uid: u32,
    gid: u32,
    bounds: CopyBounds,
) -> Result<(), SandboxError> {
    let mut bytes: u64 = 0;
    let mut entries: u64 = 0;
    // Iterative walk: a deep tree cannot overflow the stack.
    let mut stack: Vec<(PathBuf, PathBuf)> = vec![(src.to_path_buf(), dst.to_path_buf())];
    while let Some((from_dir, to_dir)) = stack.pop() {
        let rd = fs::read_dir(&from_dir).map_err(|e| io_err("reading skill dir", &from_dir, e))?;
        for ent in rd {
            let ent = ent.map_err(|e| io_err("reading skill dir", &from_dir, e))?;
            entries += 1;
            if entries > bounds.max_entries {
                return Err(SandboxError::InvalidRequest(format!(
                    "skill dir {} has more than {} files and directories (Limits::max_copy_files)",
                    src.display(),
                    bounds.max_entries
                )));
            }
            let from = ent.path();
            let to = to_dir.join(ent.file_name());
            let md = fs::symlink_metadata(&from).map_err(|e| io_err("stat", &from, e))?;
            let ft = md.file_type();
            let mode = md.permissions().mode() & 0o777;
            if ft.is_dir() {
                DirBuilder::new()
                    .mode(0o700)
                    .create(&to)
                    .map_err(|e| io_err("creating", &to, e))?;
                fs::set_permissions(&to, fs::Permissions::from_mode(mode))
                    .map_err(|e| io_err("chmod", &to, e))?;
                lchown(&to, Some(uid), Some(gid)).map_err(|e| io_err("chown", &to, e))?;
                stack.push((from, to));
            } else if ft.is_file() {
                let remaining = bounds.max_bytes - bytes;
                let n = copy_file(&from, &to, mode, remaining)?;
                if n > remaining {
                    return Err(SandboxError::InvalidRequest(format!(
                        "skill dir {} holds more than {} bytes (Limits::max_copy_bytes)",
                        src.display(),
                        bounds.max_bytes
                    )));
                }
                bytes += n;
                lchown(&to, Some(uid), Some(gid)).map_err(|e| io_err("chown", &to, e))?;
            } else if ft.is_symlink() {
                let target = fs::read_link(&from).map_err(|e| io_err("readlink", &from, e))?;
                if !symlink_stays_inside(&target) {
                    return Err(SandboxError::InvalidRequest(format!(
                        "skill file {} is a symlink to {}, which may point outside the skill dir \
                         (only relative targets without `..` are copied)",
                        from.display(),
                        target.display()
                    )));
                }
                std::os::unix::fs::symlink(&target, &to).map_err(|e| io_err("symlink", &to, e))?;
                lchown(&to, Some(uid), Some(gid)).map_err(|e| io_err("chown", &to, e))?;
            } else {
                return Err(SandboxError::InvalidRequest(format!(
                    "skill file {} is not a regular file, directory or symlink",
                    from.display()
                )));
            }
        }
    }
    Ok(())
}

/// Copies at most `limit + 1` bytes (so the caller sees "too big") without following a
/// symlink at `from`. Returns the number of bytes copied.
fn copy_file(from: &Path, to: &Path, mode: u32, limit: u64) -> Result<u64, SandboxError> {
    let src = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(from)
        .map_err(|e| io_err("opening", from, e))?;
    let mut dst: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(to)
        .map_err(|e| io_err("creating", to, e))?;
    let n = io::copy(&mut src.take(limit.saturating_add(1)), &mut dst)
        .map_err(|e| io_err("copying", from, e))?;
    dst.flush().map_err(|e| io_err("writing", to, e))?;
    dst.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(|e| io_err("chmod", to, e))?;
    Ok(n)
}

pub fn symlink_stays_inside(target: &Path) -> bool {
    !target.as_os_str().is_empty()
        && target
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlink_targets() {
        assert!(symlink_stays_inside(Path::new("a/b")));
        assert!(symlink_stays_inside(Path::new("./a")));
        assert!(!symlink_stays_inside(Path::new("../a")));
        assert!(!symlink_stays_inside(Path::new("a/../../b")));
        assert!(!symlink_stays_inside(Path::new("/etc/passwd")));
        assert!(!symlink_stays_inside(Path::new("")));
    }
}
