//! A connection that reads only as fast as its client takes the answers. A client that sends
//! requests and never reads would otherwise have the daemon read, run and queue answers without
//! end; here, while an answer waits for the client to read (the socket's buffer full), no more
//! requests are read, and a client that takes nothing for [`STALL_LIMIT`] is cut off.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long an answer may wait for its client to read before the connection is closed.
pub const STALL_LIMIT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Pace {
    /// An answer waits for the client to read.
    stalled: bool,
    /// The client took nothing for [`STALL_LIMIT`]: the connection is over.
    broken: bool,
    /// The reader, waiting for the writer to move.
    reader: Option<Waker>,
}

fn lock(p: &Mutex<Pace>) -> std::sync::MutexGuard<'_, Pace> {
    p.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Pairs a connection's halves so the reader waits while the writer is stalled.
pub fn pace<R, W>(read: R, write: W) -> (PacedReader<R>, PacedWriter<W>) {
    let pace = Arc::new(Mutex::new(Pace::default()));
    (
        PacedReader {
            inner: read,
            pace: pace.clone(),
        },
        PacedWriter {
            inner: write,
            pace,
            limit: STALL_LIMIT,
            deadline: None,
        },
    )
}

/// The read half: pending while the writer is stalled, closed once it is broken.
pub struct PacedReader<R> {
    inner: R,
    pace: Arc<Mutex<Pace>>,
}

impl<R: AsyncRead + Unpin> AsyncRead for PacedReader<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        {
            let mut p = lock(&self.pace);
            if p.broken {
                return Poll::Ready(Ok(()));
            }
            if p.stalled {
                p.reader = Some(cx.waker().clone());
                return Poll::Pending;
            }
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

/// The write half: marks the connection stalled while the client does not read, and fails
/// once it has not read for the limit.
pub struct PacedWriter<W> {
    inner: W,
    pace: Arc<Mutex<Pace>>,
    limit: Duration,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<W> PacedWriter<W> {
    /// Applies `f` to the writer's outcome: a write that moved clears the stall; one that
    /// waits starts (or checks) the stall's clock.
    fn paced<T>(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        let mut p = lock(&self.pace);
        match outcome {
            Poll::Ready(r) => {
                self.deadline = None;
                if p.stalled {
                    p.stalled = false;
                    if let Some(w) = p.reader.take() {
                        w.wake();
                    }
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                p.stalled = true;
                let limit = self.limit;
                let deadline = self
                    .deadline
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
                if deadline.as_mut().poll(cx).is_ready() {
                    p.broken = true;
                    if let Some(w) = p.reader.take() {
                        w.wake();
                    }
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the client read no answer for {} s", limit.as_secs()),
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for PacedWriter<W> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.paced(cx, outcome)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.inner).poll_flush(cx);
        self.paced(cx, outcome)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_client_that_never_reads_stops_the_reading_and_is_cut_off() {
        // A duplex pipe with a small buffer stands for the socket: the "client" end never reads.
        let (server, mut client) = tokio::io::duplex(64);
        let (server_read, server_write) = tokio::io::split(server);
        let (mut reader, mut writer) = pace(server_read, server_write);
        client.write_all(b"request\n").await.unwrap();
        let mut buf = [0u8; 8];
        reader.read_exact(&mut buf).await.unwrap();
        // The answer does not fit: the writer stalls.
        let write = tokio::spawn(async move { writer.write_all(&[b'x'; 1024]).await });
        tokio::task::yield_now().await;
        client.write_all(b"another\n").await.unwrap();
        let read = tokio::time::timeout(Duration::from_secs(5), reader.read(&mut buf)).await;
        assert!(read.is_err(), "no request is read while an answer waits");
        tokio::time::sleep(STALL_LIMIT).await;
        let e = write.await.unwrap().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert_eq!(
            reader.read(&mut buf).await.unwrap(),
            0,
            "and the reading ends"
        );
    }

    #[tokio::test]
    async fn a_client_that_reads_is_served_as_before() {
        let (server, client) = tokio::io::duplex(64);
        let (server_read, server_write) = tokio::io::split(server);
        let (mut reader, mut writer) = pace(server_read, server_write);
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let drain = tokio::spawn(async move {
            let mut all = Vec::new();
            client_read.read_to_end(&mut all).await.map(|_| all.len())
        });
        client_write.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        reader.read_exact(&mut buf).await.unwrap();
        writer.write_all(&[b'y'; 100_000]).await.unwrap();
        writer.shutdown().await.unwrap();
        drop(writer);
        drop(reader);
        assert_eq!(drain.await.unwrap().unwrap(), 100_000);
    }
}
