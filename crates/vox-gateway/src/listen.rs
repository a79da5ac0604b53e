//! The gateway's accept loop: what bounds a client that does not finish its request, a crowd
//! of connections, and a process at its file descriptor limit.
//!
//! - Each connection is HTTP/1.1 with a header read timeout: a request whose headers do not
//!   arrive in time (a half-open or trickling client) is closed, and so is a keep-alive
//!   connection idle past it.
//! - At most `max_connections` are served at once; one more is answered `503` with
//!   `Connection: close` at once, without reading it, so it holds no descriptor for long.
//! - An accept error that means "no descriptors or memory now" backs off (up to a second) and
//!   is logged once per burst, instead of spinning on a listener that stays readable.

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// How the accept loop bounds its connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections served at once.
    pub max_connections: usize,
    /// How long a request's headers may take to arrive (and a keep-alive connection may idle).
    pub header_timeout: Duration,
}

/// A connection's place under the limit, held by the connection and by a WebSocket session it
/// upgraded to (the session outlives the HTTP connection's future).
#[derive(Clone)]
pub struct ConnSlot {
    _permit: Arc<OwnedSemaphorePermit>,
}

/// How long shutdown waits for the connections' started requests.
const DRAIN: Duration = Duration::from_secs(10);

/// The answer to a connection over the limit.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\nretry-after: 1\r\ncontent-length: 93\r\n\r\n{\"error\":{\"code\":\"busy\",\"message\":\"too many connections to this gateway; retry in a second\"}}";

/// Serves `app` on `listener` until `shutdown` is cancelled, then lets the connections finish
/// the requests they have started.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut backoff = vox_core::AcceptBackoff::default();
    loop {
        let (tcp, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => {
                    backoff.reset();
                    a
                }
                Err(e) => {
                    backoff.wait(&e).await;
                    continue;
                }
            },
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            turn_away(tcp);
            continue;
        };
        let slot = ConnSlot {
            _permit: Arc::new(permit),
        };
        // Without TCP_NODELAY, a response written in pieces (SSE on /mcp) waits on delayed ACKs.
        let _ = tcp.set_nodelay(true);
        let app = app.clone();
        let in_requests = slot.clone();
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            req.extensions_mut().insert(in_requests.clone());
            let mut app = app.clone();
            async move { tower::Service::call(&mut app, req).await }
        });
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(tcp), service)
                .with_upgrades();
            tokio::pin!(conn);
            // A client that went away mid-request is not the gateway's error.
            tokio::select! {
                _ = conn.as_mut() => {}
                () = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    // Every slot back means every connection (and upgraded session) ended.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(DRAIN, slots.acquire_many(all)).await;
    Ok(())
}

/// Answers a connection over the limit without reading it, and closes it.
fn turn_away(tcp: TcpStream) {
    metrics::counter!("vox_http_connections_refused_total").increment(1);
    // The answer fits any socket buffer: one non-blocking write, and the descriptor is gone.
    let _ = tcp.try_write(BUSY);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_answer_says_its_own_length() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        serde_json::from_str::<serde_json::Value>(body).unwrap();
    }
}
