//! Standard input and output of `vox mcp`, read and written on the runtime's own thread.
//!
//! tokio's `stdin()`/`stdout()` do every read and write on its blocking pool: a thread hand-off,
//! two context switches, per read and per write. On a stdio round trip that was most of
//! `vox mcp`'s CPU (about 175 µs per `tools/call`, ten context switches). What an MCP client
//! hands a child is a pipe (Python, Rust) or a socket pair (Node): those are put in
//! non-blocking mode and driven by the runtime's reactor like any socket. A terminal or a file
//! keeps tokio's handles, because `O_NONBLOCK` on a terminal is shared with the shell that owns
//! it and would outlive this process.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::pin::Pin;
use tokio::io::{AsyncRead, AsyncWrite};

/// The MCP channel's input.
pub type Input = Pin<Box<dyn AsyncRead + Send>>;
/// The MCP channel's output.
pub type Output = Pin<Box<dyn AsyncWrite + Send>>;

enum Kind {
    Pipe,
    Socket,
    Other,
}

/// A duplicate of `fd` and what it is.
fn classify(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<(OwnedFd, Kind)> {
    let owned = fd.try_clone_to_owned()?;
    let file = File::from(owned);
    let t = file.metadata()?.file_type();
    let kind = if t.is_fifo() {
        Kind::Pipe
    } else if t.is_socket() {
        Kind::Socket
    } else {
        Kind::Other
    };
    Ok((OwnedFd::from(file), kind))
}

/// A stream socket on `fd`, non-blocking, registered with the runtime (which must be running).
fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(s)
}

/// A handed-off client input (in the daemon): a pipe or a socket; anything else is refused,
/// and `vox mcp` keeps such a session ([`can_hand_off`]).
pub fn input_from(fd: OwnedFd) -> io::Result<Input> {
    match classify(fd.as_fd())? {
        (fd, Kind::Pipe) => Ok(Box::pin(tokio::net::unix::pipe::Receiver::from_owned_fd(
            fd,
        )?)),
        (fd, Kind::Socket) => Ok(Box::pin(socket(fd)?)),
        (_, Kind::Other) => Err(not_a_channel()),
    }
}

/// A handed-off client output (in the daemon): a pipe or a socket.
pub fn output_from(fd: OwnedFd) -> io::Result<Output> {
    match classify(fd.as_fd())? {
        (fd, Kind::Pipe) => Ok(Box::pin(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?)),
        (fd, Kind::Socket) => Ok(Box::pin(socket(fd)?)),
        (_, Kind::Other) => Err(not_a_channel()),
    }
}

fn not_a_channel() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "a handed-off session's input and output are pipes or sockets",
    )
}

/// Whether `vox mcp`'s stdin and stdout can be handed to the daemon: both pipes or sockets (a
/// terminal or a file stays with `vox mcp`, which relays).
pub fn can_hand_off() -> bool {
    let channel = |fd: std::os::fd::BorrowedFd<'_>| {
        classify(fd).is_ok_and(|(_, k)| matches!(k, Kind::Pipe | Kind::Socket))
    };
    channel(io::stdin().as_fd()) && channel(io::stdout().as_fd())
}

/// Standard input: a non-blocking pipe or socket when it is one, else tokio's.
pub fn stdin() -> Input {
    let direct = || -> io::Result<Option<Input>> {
        let (fd, kind) = classify(io::stdin().as_fd())?;
        Ok(match kind {
            Kind::Pipe => Some(Box::pin(tokio::net::unix::pipe::Receiver::from_owned_fd(
                fd,
            )?)),
            Kind::Socket => Some(Box::pin(socket(fd)?)),
            Kind::Other => None,
        })
    };
    match direct() {
        Ok(Some(r)) => r,
        _ => Box::pin(tokio::io::stdin()),
    }
}

/// Standard output: a non-blocking pipe or socket when it is one, else tokio's.
pub fn stdout() -> Output {
    let direct = || -> io::Result<Option<Output>> {
        let (fd, kind) = classify(io::stdout().as_fd())?;
        Ok(match kind {
            Kind::Pipe => Some(Box::pin(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?)),
            Kind::Socket => Some(Box::pin(socket(fd)?)),
            Kind::Other => None,
        })
    };
    match direct() {
        Ok(Some(w)) => w,
        _ => Box::pin(tokio::io::stdout()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn pipes_and_sockets_are_driven_directly_and_files_are_not() {
        let (r, _w) = std::io::pipe().unwrap();
        assert!(matches!(classify(r.as_fd()).unwrap().1, Kind::Pipe));
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(matches!(classify(a.as_fd()).unwrap().1, Kind::Socket));
        let f = tempfile::tempfile().unwrap();
        assert!(matches!(classify(f.as_fd()).unwrap().1, Kind::Other));
    }

    #[tokio::test]
    async fn a_pipe_reads_and_writes_through_the_reactor() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (r, w) = std::io::pipe().unwrap();
        let mut tx =
            tokio::net::unix::pipe::Sender::from_owned_fd(classify(w.as_fd()).unwrap().0).unwrap();
        let mut rx =
            tokio::net::unix::pipe::Receiver::from_owned_fd(classify(r.as_fd()).unwrap().0)
                .unwrap();
        drop((r, w));
        tx.write_all(b"{\"jsonrpc\":\"2.0\"}\n").await.unwrap();
        drop(tx);
        let mut got = String::new();
        rx.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "{\"jsonrpc\":\"2.0\"}\n");
    }
}
