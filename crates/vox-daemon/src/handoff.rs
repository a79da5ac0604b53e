//! Handing a stdio MCP session to the daemon.
//!
//! A relay costs a bare server's round trip twice over: every call crossed `vox mcp` twice
//! (client → `vox mcp` → daemon → `vox mcp` → client), and on a small VM each wake-up of a
//! sleeping process costs about as much as a whole call of a bare server. So `vox mcp` passes
//! its standard input and output to the daemon (`SCM_RIGHTS` on a connection of its own, with
//! `orch.serve_stdio`) and the daemon serves that MCP session itself: one hop, as for a bare
//! server. `vox mcp` stays as the process the client waits on; that connection is its link:
//! the daemon tells it what it would need to carry the session on (`orch.session` frames) and
//! says `orch.stdio_done` when the session ends; `vox mcp` exits then, and a connection that
//! closes without it means the daemon died, when `vox mcp` takes the session back.
//!
//! [`Pending`] is the one thing a dead daemon cannot tell: which requests it had read and not
//! answered. It is a small table in memory both processes map (a sealed `memfd`, so neither can
//! resize it under the other), written by the daemon as requests come and go (no system call
//! per request), read by `vox mcp` only after the daemon is gone, to answer each of them.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, Interest, ReadBuf};
use tokio::net::unix::OwnedReadHalf;

/// A stdio MCP session handed to the daemon, for the host that serves it (`vox_mcp::hosted`).
pub struct StdioSession {
    /// The orchestrator the session calls.
    pub orch: std::sync::Arc<vox_core::Orchestrator>,
    /// The MCP client's input and output.
    pub input: OwnedFd,
    /// The MCP client's output (where the session's answers go).
    pub output: OwnedFd,
    /// Where the requests read and not yet answered are recorded.
    pub pending: Pending,
    /// Whose session it is, resolved from the handoff request (its session key is the
    /// handoff connection's).
    pub scope: std::sync::Arc<vox_core::CallScope>,
    /// Sends `orch.session` with this state to `vox mcp`.
    pub report: Box<dyn Fn(&crate::frames::SessionState) + Send + Sync>,
    /// Fires when `vox mcp`'s connection closes (it died): the session ends with it.
    pub closed: vox_core::Cancel,
}

/// Most descriptors a connection may pass (stdin, stdout, the pending table); more are closed.
pub const MAX_FDS: usize = 3;

/// Sends `bytes` with `fds` attached on a connected stream socket, blocking until written.
pub fn send_with_fds(
    sock: &std::os::unix::net::UnixStream,
    bytes: &[u8],
    fds: &[BorrowedFd<'_>],
) -> io::Result<()> {
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let data_len = std::mem::size_of_val(raw.as_slice());
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(data_len as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: msghdr is plain data; every pointer set below outlives the sendmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !raw.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer is CMSG_SPACE(data_len) bytes, room for one header and
        // `raw`; CMSG_FIRSTHDR of a buffer that size is non-null.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(data_len as u32) as _;
            std::ptr::copy_nonoverlapping(raw.as_ptr(), libc::CMSG_DATA(cmsg).cast(), raw.len());
        }
    }
    // SAFETY: `msg` points at `iov` (over `bytes`) and, when fds are sent, at `control`, all
    // alive until sendmsg(2) returns; the kernel only reads them. MSG_NOSIGNAL: no SIGPIPE.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut sent = n as usize;
    // The descriptors went with the first byte; the rest (if the kernel took less) follows.
    while sent < bytes.len() {
        sent += io::Write::write(&mut &*sock, &bytes[sent..])?;
    }
    Ok(())
}

/// One `recvmsg` into `buf`, keeping received descriptors in `fds` (beyond [`MAX_FDS`] they
/// are closed). Non-blocking: `WouldBlock` when nothing is there.
fn recv_with_fds(fd: RawFd, buf: &mut [u8], fds: &mut VecDeque<OwnedFd>) -> io::Result<usize> {
    // Every read of every connection comes here: the control buffer lives on the stack,
    // aligned for `cmsghdr`, with room for MAX_FDS descriptors.
    #[repr(C, align(8))]
    struct Control([u8; 64]);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) };
    debug_assert!(space as usize <= 64);
    let mut control = Control([0; 64]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: `msghdr` is plain C data, for which all-zero bytes are a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` points at `iov` (over `buf`, writable) and at `control` (`space` bytes,
    // aligned for `cmsghdr`), all alive until recvmsg(2) returns; it writes within them only.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel filled `control` up to msg_controllen with well-formed headers; each
    // SCM_RIGHTS payload is an array of descriptors now owned by this process.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    let owned = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                    if fds.len() < MAX_FDS {
                        fds.push_back(owned);
                    }
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok(n as usize)
}

/// The read half of a daemon connection that keeps the descriptors its client passes.
pub struct FdReader {
    half: OwnedReadHalf,
    fds: VecDeque<OwnedFd>,
}

impl FdReader {
    /// A reader over `half` that has received no descriptor yet.
    pub fn new(half: OwnedReadHalf) -> Self {
        FdReader {
            half,
            fds: VecDeque::new(),
        }
    }
    /// The descriptors received so far, oldest first.
    pub fn take_fds(&mut self) -> Vec<OwnedFd> {
        self.fds.drain(..).collect()
    }
}

impl AsyncRead for FdReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.half.as_ref().poll_read_ready(cx))?;
            let stream = this.half.as_ref();
            let fd = stream.as_raw_fd();
            let unfilled = buf.initialize_unfilled();
            match stream.try_io(Interest::READABLE, || {
                recv_with_fds(fd, unfilled, &mut this.fds)
            }) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// Slots of the pending table: requests read and not yet answered. Beyond them a request is
/// simply not recorded (a dead daemon's answer to it is then the client's own timeout).
const SLOTS: usize = 256;
/// Bytes per slot: state (4), kind (1), id length (1), the id's JSON text.
const SLOT: usize = 128;
const ID_MAX: usize = SLOT - 6;
const TABLE: usize = SLOTS * SLOT;
const FREE: u32 = 0;
const WRITING: u32 = 1;
const USED: u32 = 2;

/// What a pending request was, for the answer `vox mcp` gives it if the daemon dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingKind {
    /// A `tools/call`: answered with a tool error (`daemon_unavailable`) if the daemon dies.
    ToolCall,
    /// Any other request: answered with a JSON-RPC error if the daemon dies.
    Other,
}

/// The table of requests the daemon has read and not answered, shared by both processes.
pub struct Pending {
    base: *mut u8,
    fd: OwnedFd,
}

// SAFETY: `base` is only a raw pointer because it came from mmap: the value owns the mapping
// and its fd outright (no other Rust value aliases them), the mapping lives as long as the value,
// and munmap in `Drop` is valid from any thread.
unsafe impl Send for Pending {}
// SAFETY: through `&self` the mapping is touched only by atomic loads and stores of the slot
// states, by the one writer that won a slot's FREE -> WRITING compare-exchange (which alone
// writes that slot's bytes), and by readers of USED slots, whose bytes the Release store of USED
// published; a read length is clamped to `ID_MAX`, so it stays inside the slot whatever the
// other process wrote.
unsafe impl Sync for Pending {}

impl Drop for Pending {
    fn drop(&mut self) {
        // SAFETY: base was returned by mmap of TABLE bytes and is not used after this.
        unsafe { libc::munmap(self.base.cast(), TABLE) };
    }
}

impl Pending {
    /// A new, empty, sealed table (in `vox mcp`).
    pub fn create() -> io::Result<Self> {
        // SAFETY: a NUL-terminated name; flags are valid.
        let raw = unsafe {
            libc::memfd_create(
                c"vox-pending".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw >= 0` is a new fd memfd_create just returned; nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: ftruncate(2) and fcntl(F_ADD_SEALS) take integers only, on `fd`, which is
        // open for the calls; no memory of ours is touched.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), TABLE as libc::off_t) != 0 {
                return Err(io::Error::last_os_error());
            }
            let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
            if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Self::map(fd)
    }

    /// Maps a table passed by `vox mcp` (in the daemon): refused unless it is sealed at its
    /// size, so that it cannot shrink under the mapping.
    pub fn map(fd: OwnedFd) -> io::Result<Self> {
        // SAFETY: `fd` is open for the calls; F_GET_SEALS takes no pointer, and fstat(2) writes
        // only `st`, a live, zero-initialized `stat` (plain C data, valid all-zero).
        let (seals, size) = unsafe {
            let seals = libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS);
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
                return Err(io::Error::last_os_error());
            }
            (seals, st.st_size)
        };
        if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 || size != TABLE as libc::off_t {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the pending-request table is not a sealed memfd of the expected size",
            ));
        }
        // SAFETY: a shared mapping of TABLE bytes of a file that is exactly that size and
        // cannot shrink.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                TABLE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Pending {
            base: base.cast(),
            fd,
        })
    }

    /// The descriptor to pass to the daemon.
    pub fn fd(&self) -> BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    fn state(&self, slot: usize) -> &AtomicU32 {
        // SAFETY: slot < SLOTS, so the 4 aligned bytes at slot * SLOT are inside the mapping.
        unsafe { &*(self.base.add(slot * SLOT) as *const AtomicU32) }
    }

    /// Records request `id` (its JSON text); the slot to [`Self::remove`] it with, `None` when
    /// the table is full or the id longer than a slot holds.
    pub fn insert(&self, id: &str, kind: PendingKind) -> Option<usize> {
        if id.len() > ID_MAX {
            return None;
        }
        for slot in 0..SLOTS {
            if self
                .state(slot)
                .compare_exchange(FREE, WRITING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // SAFETY: this writer owns the slot (WRITING); the bytes are inside it.
                unsafe {
                    let p = self.base.add(slot * SLOT);
                    *p.add(4) = matches!(kind, PendingKind::ToolCall) as u8;
                    *p.add(5) = id.len() as u8;
                    std::ptr::copy_nonoverlapping(id.as_ptr(), p.add(6), id.len());
                }
                self.state(slot).store(USED, Ordering::Release);
                return Some(slot);
            }
        }
        None
    }

    /// The request in `slot` was answered.
    pub fn remove(&self, slot: usize) {
        if slot < SLOTS {
            self.state(slot).store(FREE, Ordering::Release);
        }
    }

    /// The requests recorded and not removed (read once the writer is gone).
    pub fn pending(&self) -> Vec<(String, PendingKind)> {
        (0..SLOTS)
            .filter(|&s| self.state(s).load(Ordering::Acquire) == USED)
            .filter_map(|s| {
                // SAFETY: a USED slot was completely written before its state was stored.
                let (kind, id) = unsafe {
                    let p = self.base.add(s * SLOT);
                    let len = (*p.add(5) as usize).min(ID_MAX);
                    (
                        *p.add(4),
                        std::slice::from_raw_parts(p.add(6), len).to_vec(),
                    )
                };
                let kind = if kind == 1 {
                    PendingKind::ToolCall
                } else {
                    PendingKind::Other
                };
                String::from_utf8(id).ok().map(|id| (id, kind))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_table_written_through_one_mapping_is_read_through_another() {
        let table = Pending::create().unwrap();
        let other = Pending::map(table.fd().try_clone_to_owned().unwrap()).unwrap();
        let a = other.insert("1", PendingKind::ToolCall).unwrap();
        other.insert("\"x y\"", PendingKind::Other).unwrap();
        assert!(
            other
                .insert(&"9".repeat(ID_MAX + 1), PendingKind::Other)
                .is_none()
        );
        other.remove(a);
        assert_eq!(
            table.pending(),
            vec![("\"x y\"".to_owned(), PendingKind::Other)]
        );
        for i in 0..SLOTS {
            let _ = other.insert(&i.to_string(), PendingKind::Other);
        }
        assert!(other.insert("full", PendingKind::Other).is_none());
    }

    #[test]
    fn an_unsealed_or_resizable_file_is_refused() {
        let f = tempfile::tempfile().unwrap();
        f.set_len(TABLE as u64).unwrap();
        assert!(Pending::map(OwnedFd::from(f)).is_err());
    }

    #[tokio::test]
    async fn descriptors_travel_with_their_line() {
        use tokio::io::AsyncBufReadExt;
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (r, _w) = std::io::pipe().unwrap();
        send_with_fds(&a, b"{\"method\":\"x\"}\n", &[r.as_fd(), r.as_fd()]).unwrap();
        b.set_nonblocking(true).unwrap();
        let (half, _write) = tokio::net::UnixStream::from_std(b).unwrap().into_split();
        let mut reader = tokio::io::BufReader::new(FdReader::new(half));
        let mut line = String::new();
        reader.read_line(&mut line).await.unwrap();
        assert_eq!(line, "{\"method\":\"x\"}\n");
        assert_eq!(reader.get_mut().take_fds().len(), 2);
    }

    #[tokio::test]
    async fn descriptors_beyond_the_bound_are_closed_not_kept() {
        use tokio::io::AsyncBufReadExt;
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let (r, _w) = std::io::pipe().unwrap();
        let five = [r.as_fd(), r.as_fd(), r.as_fd(), r.as_fd(), r.as_fd()];
        send_with_fds(&a, b"one\n", &five).unwrap();
        send_with_fds(&a, b"two\n", &five).unwrap();
        b.set_nonblocking(true).unwrap();
        let (half, _write) = tokio::net::UnixStream::from_std(b).unwrap().into_split();
        let mut reader = tokio::io::BufReader::new(FdReader::new(half));
        let mut line = String::new();
        reader.read_line(&mut line).await.unwrap();
        reader.read_line(&mut line).await.unwrap();
        assert_eq!(line, "one\ntwo\n");
        assert_eq!(reader.get_mut().take_fds().len(), MAX_FDS);
    }
}
