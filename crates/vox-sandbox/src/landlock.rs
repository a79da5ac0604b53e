//! Raw Landlock (no crate: three syscalls and a handful of constants, see
//! `Documentation/userspace-api/landlock.rst` in the kernel tree).
//!
//! The ruleset is built in the parent; the child only calls `landlock_restrict_self` on the
//! already-built ruleset fd (async-signal-safe: one syscall, no allocation).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Lowest ABI we accept: ABI 3 adds `TRUNCATE`; below it `truncate(2)` of a file outside the
/// scratch dir could not be denied, so the write confinement would not be complete.
pub const MIN_ABI: u32 = 3;

const CREATE_RULESET_VERSION: u32 = 1 << 0;
const RULE_PATH_BENEATH: libc::c_int = 1;

// Filesystem access rights (ABI in which each appeared).
pub const FS_EXECUTE: u64 = 1 << 0; // 1
pub const FS_WRITE_FILE: u64 = 1 << 1; // 1
pub const FS_READ_FILE: u64 = 1 << 2; // 1
pub const FS_READ_DIR: u64 = 1 << 3; // 1
pub const FS_REMOVE_DIR: u64 = 1 << 4; // 1
pub const FS_REMOVE_FILE: u64 = 1 << 5; // 1
pub const FS_MAKE_CHAR: u64 = 1 << 6; // 1
pub const FS_MAKE_DIR: u64 = 1 << 7; // 1
pub const FS_MAKE_REG: u64 = 1 << 8; // 1
pub const FS_MAKE_SOCK: u64 = 1 << 9; // 1
pub const FS_MAKE_FIFO: u64 = 1 << 10; // 1
pub const FS_MAKE_BLOCK: u64 = 1 << 11; // 1
pub const FS_MAKE_SYM: u64 = 1 << 12; // 1
pub const FS_REFER: u64 = 1 << 13; // 2
pub const FS_TRUNCATE: u64 = 1 << 14; // 3
pub const FS_IOCTL_DEV: u64 = 1 << 15; // 5

// Network access rights (ABI 4).
pub const NET_BIND_TCP: u64 = 1 << 0;
pub const NET_CONNECT_TCP: u64 = 1 << 1;

// Scopes (ABI 6).
pub const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
pub const SCOPE_SIGNAL: u64 = 1 << 1;

/// Rights that make sense on a non-directory (a rule on a file must not carry others).
const FS_FILE_RIGHTS: u64 = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV;
const FS_READ_EXEC: u64 = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI the kernel offers, or the errno of the probe (`ENOSYS`: not built in,
/// `EOPNOTSUPP`: built in but disabled at boot).
pub fn abi_version() -> Result<u32, i32> {
    // SAFETY: the documented version query: null attr, size 0, VERSION flag.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(r as u32)
    }
}

/// Turns a probe result into "usable ABI" or the refusal reason.
pub fn check_abi(probe: Result<u32, i32>) -> Result<u32, String> {
    match probe {
        Ok(abi) if abi >= MIN_ABI => Ok(abi),
        Ok(abi) => Err(format!(
            "the kernel's Landlock ABI is {abi}, vox-sandbox needs at least {MIN_ABI} \
             (truncate of files outside the scratch dir cannot be denied below it); refusing to run unconfined"
        )),
        Err(e) if e == libc::ENOSYS => {
            Err("the kernel has no Landlock (landlock_create_ruleset: ENOSYS); refusing to run unconfined".into())
        }
        Err(e) if e == libc::EOPNOTSUPP => Err(
            "Landlock is built in but disabled (add `landlock` to the lsm= boot parameter); refusing to run unconfined"
                .into(),
        ),
        Err(e) => Err(format!(
            "Landlock probe failed: {}; refusing to run unconfined",
            io::Error::from_raw_os_error(e)
        )),
    }
}

/// What a ruleset built for `abi` handles (denies unless a rule allows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handled {
    pub fs: u64,
    pub net: u64,
    pub scoped: u64,
}

pub fn handled_for(abi: u32) -> Handled {
    let mut fs = FS_EXECUTE
        | FS_WRITE_FILE
        | FS_READ_FILE
        | FS_READ_DIR
        | FS_REMOVE_DIR
        | FS_REMOVE_FILE
        | FS_MAKE_CHAR
        | FS_MAKE_DIR
        | FS_MAKE_REG
        | FS_MAKE_SOCK
        | FS_MAKE_FIFO
        | FS_MAKE_BLOCK
        | FS_MAKE_SYM;
    if abi >= 2 {
        fs |= FS_REFER;
    }
    if abi >= 3 {
        fs |= FS_TRUNCATE;
    }
    if abi >= 5 {
        fs |= FS_IOCTL_DEV;
    }
    let net = if abi >= 4 {
        NET_BIND_TCP | NET_CONNECT_TCP
    } else {
        0
    };
    let scoped = if abi >= 6 {
        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    } else {
        0
    };
    Handled { fs, net, scoped }
}

/// A built ruleset: read + execute everywhere, every handled filesystem right beneath the
/// scratch dir, writes to `/dev/null`, no TCP bind/connect (ABI >= 4), scoped signals and
/// abstract unix sockets (ABI >= 6).
pub struct Ruleset {
    fd: OwnedFd,
    pub handled: Handled,
}

impl Ruleset {
    pub fn build(abi: u32, scratch: &Path) -> io::Result<Ruleset> {
        let handled = handled_for(abi);
        let attr = RulesetAttr {
            handled_access_fs: handled.fs,
            handled_access_net: handled.net,
            scoped: handled.scoped,
        };
        // SAFETY: attr is a valid struct of the given size; the kernel accepts a larger struct
        // as long as the fields it does not know are zero (they are, see `handled_for`).
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                std::mem::size_of::<RulesetAttr>(),
                0u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd the kernel just returned to us (O_CLOEXEC).
        let fd = unsafe { OwnedFd::from_raw_fd(r as RawFd) };
        let rs = Ruleset { fd, handled };
        rs.allow(Path::new("/"), FS_READ_EXEC)?;
        rs.allow(scratch, handled.fs)?;
        let dev_null = Path::new("/dev/null");
        if dev_null.exists() {
            rs.allow(
                dev_null,
                FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV,
            )?;
        }
        Ok(rs)
    }

    fn allow(&self, path: &Path, access: u64) -> io::Result<()> {
        let c = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
        // SAFETY: `c` is a NUL-terminated path that outlives the call; open(2) only reads it.
        // O_PATH opens without reading the file.
        let raw = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw >= 0` is a new fd open(2) just returned; nothing else owns it, so the
        // `OwnedFd` is its only owner and closes it once.
        let pfd = unsafe { OwnedFd::from_raw_fd(raw) };
        let is_dir = std::fs::metadata(path)?.is_dir();
        let mut allowed = access & self.handled.fs;
        if !is_dir {
            allowed &= FS_FILE_RIGHTS;
        }
        let attr = PathBeneathAttr {
            allowed_access: allowed,
            parent_fd: pfd.as_raw_fd(),
        };
        // SAFETY: `self.fd` is the ruleset fd this value owns (open for its lifetime), `attr` is
        // a `repr(C)` `landlock_path_beneath_attr` on the stack that outlives the call, and
        // `pfd` (its `parent_fd`) stays open until after it; the kernel only reads `attr`.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("landlock_add_rule({}): {e}", path.display()),
            ));
        }
        Ok(())
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Child side: enforce the ruleset on the calling thread (the only one after fork) and its
/// future descendants. Async-signal-safe: a single syscall. Requires `PR_SET_NO_NEW_PRIVS`.
///
/// # Safety
/// Only a raw syscall; safe to call between fork and exec.
pub unsafe fn restrict_self(ruleset_fd: RawFd) -> libc::c_long {
    // SAFETY: landlock_restrict_self takes an fd and flags, plain integers, and touches no
    // memory of ours; a bad fd is an error return, not undefined behaviour.
    unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset_fd, 0u32) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_missing_or_old_landlock() {
        assert!(
            check_abi(Err(libc::ENOSYS))
                .unwrap_err()
                .contains("no Landlock")
        );
        assert!(
            check_abi(Err(libc::EOPNOTSUPP))
                .unwrap_err()
                .contains("disabled")
        );
        assert!(check_abi(Ok(1)).unwrap_err().contains("at least 3"));
        assert!(check_abi(Ok(2)).unwrap_err().contains("refusing"));
        assert_eq!(check_abi(Ok(3)), Ok(3));
        assert_eq!(check_abi(Ok(7)), Ok(7));
    }

    #[test]
    fn handles_every_write_right_the_abi_knows() {
        let h3 = handled_for(3);
        assert_ne!(h3.fs & FS_TRUNCATE, 0);
        assert_ne!(h3.fs & FS_REFER, 0);
        assert_eq!(h3.net, 0);
        let h7 = handled_for(7);
        assert_ne!(h7.fs & FS_IOCTL_DEV, 0);
        assert_eq!(h7.net, NET_BIND_TCP | NET_CONNECT_TCP);
        assert_eq!(h7.scoped, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL);
    }
}
