//! `tools/list` on stdio answered from its encoded bytes.
//!
//! rmcp takes a list as owned values: every `tools/list` cloned each of thousands of `Tool`s
//! (their `_meta` maps deep-copied) and serialized them again, about 24 ms of CPU for 5,000
//! workspace tools. [`ListCacheTransport`] wraps the stdio transport: the first answer to a
//! `tools/list` is encoded once and kept; a later request that serializes to the same bytes
//! (method, params and `_meta` but for its progress token: so the same era, cursor and
//! metadata) is answered with those bytes and never reaches rmcp. [`ToolListCache::invalidate`] drops the answer together with
//! the backend's decoded list (the one place both are forgotten), and an answer computed across
//! an invalidation is never kept (a generation number is taken when its request arrives).
//!
//! The cached frame and rmcp's own frames share one output: [`SharedOutput`] keeps each frame
//! whole (a writer that has begun a line owns the output until its newline).

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage, RequestId, ServerResult, Tool};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Most `tools/list` requests awaiting their answer whose encoding may be kept; beyond it a
/// client flooding lists simply gets uncached answers.
const MAX_PENDING: usize = 64;

/// The backend's decoded tool list and the encoded `tools/list` answer, forgotten together.
#[derive(Default)]
pub struct ToolListCache(Mutex<State>);

#[derive(Default)]
struct State {
    /// Bumped by every invalidation.
    generation: u64,
    tools: Option<Arc<Vec<Tool>>>,
    /// The request's serialization and the `result` JSON of its answer.
    encoded: Option<(String, Arc<[u8]>)>,
    /// `tools/list` requests passed to rmcp: their key and the generation they arrived in.
    pending: HashMap<RequestId, (String, u64)>,
}

impl ToolListCache {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// The current generation: pass it to [`Self::set_tools`] with what was fetched after it.
    pub fn generation(&self) -> u64 {
        self.state().generation
    }
    /// The decoded list, if still valid.
    pub fn tools(&self) -> Option<Arc<Vec<Tool>>> {
        self.state().tools.clone()
    }
    /// Keeps `tools`, fetched after `generation` was read, unless the list changed since.
    pub fn set_tools(&self, generation: u64, tools: Arc<Vec<Tool>>) {
        let mut s = self.state();
        if s.generation == generation {
            s.tools = Some(tools);
        }
    }
    /// The list changed (or the connection is new): forget both forms.
    pub fn invalidate(&self) {
        let mut s = self.state();
        s.generation += 1;
        s.tools = None;
        s.encoded = None;
    }
}

/// A `tools/list` request's cache key: its serialization without the id and without
/// `_meta.progressToken` (rmcp's client puts a new one on every request; no list reports
/// progress), so the era, cursor and other metadata still tell answers apart.
fn key(request: &ClientRequest) -> Option<String> {
    let ClientRequest::ListToolsRequest(r) = request else {
        return None;
    };
    let mut v = serde_json::to_value(r).ok()?;
    if let Some(meta) = v
        .pointer_mut("/params/_meta")
        .and_then(Value::as_object_mut)
    {
        meta.remove("progressToken");
    }
    Some(v.to_string())
}

/// `{"jsonrpc":"2.0","id":…,"result":…}` and a newline.
fn frame(id: &RequestId, result: &[u8]) -> Vec<u8> {
    let id = serde_json::to_string(id).unwrap_or_else(|_| "null".into());
    let mut f = Vec::with_capacity(result.len() + id.len() + 40);
    f.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    f.extend_from_slice(id.as_bytes());
    f.extend_from_slice(b",\"result\":");
    f.extend_from_slice(result);
    f.extend_from_slice(b"}\n");
    f
}

/// The stdio transport with `tools/list` answered from [`ToolListCache`].
pub struct ListCacheTransport<T> {
    inner: T,
    cache: Arc<ToolListCache>,
    out: SharedOutput,
    /// A cached answer and how much of it is written.
    unsent: Option<(Vec<u8>, usize)>,
}

impl<T> ListCacheTransport<T> {
    /// `inner` must write through another clone of `out`.
    pub fn new(inner: T, cache: Arc<ToolListCache>, out: SharedOutput) -> Self {
        ListCacheTransport {
            inner,
            cache,
            out,
            unsent: None,
        }
    }
}

impl<T> Transport<RoleServer> for ListCacheTransport<T>
where
    T: Transport<RoleServer, Error = io::Error>,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        // rmcp answers a tracked `tools/list`: its result is encoded and kept if still current.
        if let Some(id) = crate::in_flight::answered_id(&item) {
            let pending = self.cache.state().pending.remove(id);
            if let (Some((k, generation)), JsonRpcMessage::Response(r)) = (pending, &item)
                && let ServerResult::ListToolsResult(list) = &r.result
                && let Ok(result) = serde_json::to_vec(list)
            {
                let mut s = self.cache.state();
                if s.generation == generation {
                    s.encoded = Some((k, result.into()));
                }
            }
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // A cached answer still being written when this future was dropped (rmcp polls
            // `receive` in a `select!`) is finished first: the output is ours until its newline.
            if let Err(e) = self.finish_unsent().await {
                tracing::debug!("cached tools/list answer not written: {e}");
                return None;
            }
            let message = self.inner.receive().await?;
            let JsonRpcMessage::Request(req) = &message else {
                return Some(message);
            };
            let Some(k) = key(&req.request) else {
                return Some(message);
            };
            let mut s = self.cache.state();
            match &s.encoded {
                Some((cached, bytes)) if *cached == k => {
                    self.unsent = Some((frame(&req.id, bytes), 0));
                }
                _ => {
                    if s.pending.len() >= MAX_PENDING {
                        s.pending.clear();
                    }
                    let generation = s.generation;
                    s.pending.insert(req.id.clone(), (k, generation));
                    return Some(message);
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.inner.close().await
    }
}

impl<T> ListCacheTransport<T> {
    /// Writes what is left of the cached answer in `unsent`. Cancel-safe: progress is recorded
    /// in the same poll that makes it.
    async fn finish_unsent(&mut self) -> io::Result<()> {
        while let Some((bytes, at)) = &mut self.unsent {
            if *at == bytes.len() {
                self.out.flush().await?;
                self.unsent = None;
                break;
            }
            match self.out.write(&bytes[*at..]).await? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => *at += n,
            }
        }
        Ok(())
    }
}

/// One output written by several writers, each frame (a line) whole: a writer that has written
/// part of a line owns the output until it writes the line's newline; the others wait.
pub struct SharedOutput {
    shared: Arc<Mutex<Shared>>,
    id: u64,
}

struct Shared {
    out: crate::pipes::Output,
    /// The writer in the middle of a line.
    owner: Option<u64>,
    next_id: u64,
    waiting: Vec<Waker>,
}

impl SharedOutput {
    /// Wraps `out`; clone the result once per writer.
    pub fn new(out: crate::pipes::Output) -> Self {
        SharedOutput {
            shared: Arc::new(Mutex::new(Shared {
                out,
                owner: None,
                next_id: 1,
                waiting: Vec::new(),
            })),
            id: 0,
        }
    }
    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Clone for SharedOutput {
    /// Another writer of the same output.
    fn clone(&self) -> Self {
        let id = {
            let mut s = self.lock();
            s.next_id += 1;
            s.next_id
        };
        SharedOutput {
            shared: self.shared.clone(),
            id,
        }
    }
}

impl AsyncWrite for SharedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut s = self.lock();
        if s.owner.is_some_and(|o| o != self.id) {
            s.waiting.push(cx.waker().clone());
            return Poll::Pending;
        }
        let written = s.out.as_mut().poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &written
            && *n > 0
        {
            if buf[n - 1] == b'\n' {
                s.owner = None;
                for w in s.waiting.drain(..) {
                    w.wake();
                }
            } else {
                s.owner = Some(self.id);
            }
        }
        written
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.lock().out.as_mut().poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.lock().out.as_mut().poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn frames_of_two_writers_stay_whole_through_a_full_pipe() {
        // A small pipe: each 100 KiB frame takes many partial writes.
        let (rx, tx) = tokio::net::UnixStream::pair().unwrap();
        let out = SharedOutput::new(Box::pin(tx));
        let line = |c: u8| {
            let mut l = vec![c; 100 * 1024];
            l.push(b'\n');
            l
        };
        let (mut a, mut b) = (out.clone(), out.clone());
        let (la, lb) = (line(b'a'), line(b'b'));
        let wa = tokio::spawn(async move {
            for _ in 0..5 {
                a.write_all(&la).await.unwrap();
            }
        });
        let wb = tokio::spawn(async move {
            for _ in 0..5 {
                b.write_all(&lb).await.unwrap();
            }
        });
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            let mut rx = rx;
            let mut buf = vec![0; 8192];
            while all.len() < 10 * (100 * 1024 + 1) {
                let n = rx.read(&mut buf).await.unwrap();
                all.extend_from_slice(&buf[..n]);
            }
            all
        });
        wa.await.unwrap();
        wb.await.unwrap();
        drop(out);
        let all = reader.await.unwrap();
        let lines: Vec<&[u8]> = all
            .split(|c| *c == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 10);
        for l in lines {
            assert!(l.iter().all(|c| *c == l[0]), "a frame was interleaved");
        }
    }

    #[test]
    fn an_answer_fetched_across_an_invalidation_is_not_kept() {
        let c = ToolListCache::default();
        let g = c.generation();
        c.invalidate();
        c.set_tools(g, Arc::new(vec![]));
        assert!(c.tools().is_none());
        let g = c.generation();
        c.set_tools(g, Arc::new(vec![]));
        assert!(c.tools().is_some());
        c.invalidate();
        assert!(c.tools().is_none());
    }
}
