//! A node's link to the mesh over NATS. Directed traffic (messages, calls, results) goes over
//! JetStream: one work-queue stream, `VOX_MESH`, with two subjects per node
//! (`vox.mesh.<node>.in` for messages and calls, `vox.mesh.<node>.result` for the results of
//! calls it made), each read by one durable consumer of that node, so what is sent to a node
//! that is down waits for it. Heartbeats are plain NATS on `vox.mesh.heartbeat`: every node
//! hears every other, and one that stops is marked down after three missed beats.

use crate::config::{Auth, MeshConfig};
use crate::identity::NodeKey;
use crate::wire::{MAX_ENVELOPE, Opened, Wire, open, open_broadcast, seal, seal_broadcast};
use crate::{MeshError, now_ms};
use async_nats::jetstream::{self, AckKind, consumer, stream};
use futures_util::StreamExt;
use serde::Serialize;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The JetStream stream holding every node's queues.
pub const STREAM: &str = "VOX_MESH";
/// The plain NATS subject every node's heartbeat is published on.
pub const HEARTBEAT_SUBJECT: &str = "vox.mesh.heartbeat";
/// A node is down after this many heartbeats missed.
const MISSED_BEATS: u32 = 3;
/// How far ahead of this node's clock a peer's heartbeat may be dated.
const MAX_CLOCK_AHEAD_MS: i64 = 60_000;
/// How long a consumer waits for an acknowledgement before it delivers again: also how long
/// messages a node had pulled but not acknowledged when it died wait after it restarts.
/// Handlers only store (calls run in the background), so a few seconds is ample.
const ACK_WAIT: Duration = Duration::from_secs(5);

/// A node's two durable queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// Messages and calls to this node (`a2a_remote_worker_poller`).
    In,
    /// Results of calls this node made (`a2a_remote_result_poller`).
    Result,
}

impl Queue {
    fn suffix(self) -> &'static str {
        match self {
            Queue::In => "in",
            Queue::Result => "result",
        }
    }
    /// The NATS subject of this queue for node id `node` (`vox.mesh.<node>.in` or `.result`).
    pub fn subject(self, node: &str) -> String {
        format!("vox.mesh.{node}.{}", self.suffix())
    }
    fn consumer(self, node: &str) -> String {
        format!("{}-{node}", self.suffix())
    }
}

/// The prefix of node `node`'s reply subjects (`_INBOX_<node>`): its NATS user may subscribe
/// to `_INBOX_<node>.>` and to no other node's.
pub fn inbox_prefix(node: &str) -> String {
    format!("_INBOX_{node}")
}

/// The `permissions` of node `node`'s own NATS user, in nats-server's configuration syntax:
/// it may publish to every node's queues and the heartbeat, and of JetStream's API only look
/// up (or create) the mesh's stream and look up, create, pull from and acknowledge its own two
/// consumers, whose filter the create subject fixes to its own queue; it may subscribe to the
/// heartbeat and its own reply inboxes. So a login can neither read another node's queue nor
/// take its messages (`docs/mesh-nats.md`).
pub fn nats_permissions(node: &str) -> String {
    let mut publish = vec![
        format!("\"{}\"", Queue::In.subject("*")),
        format!("\"{}\"", Queue::Result.subject("*")),
        format!("\"{HEARTBEAT_SUBJECT}\""),
        format!("\"$JS.API.STREAM.INFO.{STREAM}\""),
        format!("\"$JS.API.STREAM.CREATE.{STREAM}\""),
    ];
    for q in [Queue::In, Queue::Result] {
        let (c, s) = (q.consumer(node), q.subject(node));
        publish.extend([
            format!("\"$JS.API.CONSUMER.INFO.{STREAM}.{c}\""),
            format!("\"$JS.API.CONSUMER.CREATE.{STREAM}.{c}.{s}\""),
            format!("\"$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{c}\""),
            format!("\"$JS.ACK.{STREAM}.{c}.>\""),
        ]);
    }
    format!(
        "permissions: {{\n  publish: {{ allow: [\n    {}\n  ] }}\n  subscribe: {{ allow: [\"{HEARTBEAT_SUBJECT}\", \"{}.>\"] }}\n}}",
        publish.join(",\n    "),
        inbox_prefix(node)
    )
}

/// What this node last heard from a peer.
#[derive(Debug, Clone, Serialize)]
pub struct PeerState {
    /// The peer's node id.
    pub node: String,
    /// The name it announces (or the trust list gives, until heard).
    pub name: String,
    /// The workspace it serves (its root path, as it reports it).
    pub workspace: String,
    /// The ids of the agents it runs.
    pub agents: Vec<String>,
    /// Agent-to-agent messages waiting on it for delivery, summed over its agents.
    pub pending: i64,
    /// `up`, or `down` (no heartbeat for three intervals), or `unseen` (trusted, never heard).
    pub status: &'static str,
    /// Milliseconds since its last heartbeat arrived.
    pub last_seen_ms_ago: Option<u64>,
    /// How late its last heartbeat arrived (receive time minus send time, both clocks').
    pub lag_ms: Option<i64>,
}

struct Heard {
    name: String,
    workspace: String,
    agents: Vec<String>,
    pending: i64,
    at: Instant,
    lag_ms: i64,
}

/// Counters for `/metrics` and `vox mesh status`.
#[derive(Default)]
pub struct Counters {
    /// Envelopes stored in another node's queue.
    pub sent: AtomicU64,
    /// Envelopes opened from this node's queues.
    pub received: AtomicU64,
    /// Envelopes (or heartbeats) refused: unopenable, untrusted, misaddressed or stale.
    pub refused: AtomicU64,
    /// Queue deliveries that came a second time (not acknowledged in time before).
    pub redelivered: AtomicU64,
    /// Heartbeats accepted from other nodes.
    pub heartbeats: AtomicU64,
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CounterValues {
    /// Envelopes stored in another node's queue.
    pub sent: u64,
    /// Envelopes opened from this node's queues.
    pub received: u64,
    /// Envelopes (or heartbeats) refused.
    pub refused: u64,
    /// Queue deliveries that came a second time.
    pub redelivered: u64,
    /// Heartbeats accepted from other nodes.
    pub heartbeats: u64,
}

/// This node's connection to the mesh: the NATS client, its JetStream context, the node key, the
/// trust list and what it heard from each peer.
pub struct Link {
    client: async_nats::Client,
    js: jetstream::Context,
    key: Arc<NodeKey>,
    config: MeshConfig,
    heard: Mutex<HashMap<String, Heard>>,
    /// Traffic counters since the link connected.
    pub counters: Counters,
}

impl Link {
    /// Connects to the NATS server with the configured credentials and makes sure the mesh's
    /// stream exists.
    pub async fn connect(config: MeshConfig, key: Arc<NodeKey>) -> Result<Arc<Self>, MeshError> {
        let opts = match &config.auth {
            Auth::None => async_nats::ConnectOptions::new(),
            Auth::CredsFile(path) => async_nats::ConnectOptions::with_credentials_file(path)
                .await
                .map_err(|e| MeshError::Config(format!("VOX_MESH_NATS_CREDS {path}: {e}")))?,
            Auth::UserPassword(u, p) => {
                async_nats::ConnectOptions::with_user_and_password(u.clone(), p.clone())
            }
            Auth::Token(t) => async_nats::ConnectOptions::with_token(t.clone()),
            Auth::NkeyFile(path) => {
                let seed = std::fs::read_to_string(path)
                    .map_err(|e| MeshError::Config(format!("VOX_MESH_NATS_NKEY {path}: {e}")))?;
                async_nats::ConnectOptions::with_nkey(seed.trim().to_owned())
            }
        };
        let client = opts
            .name(format!("vox node {} ({})", config.name, key.id()))
            // Replies (JetStream's answers and the messages a pull brings) come on inboxes only
            // this node's NATS user may subscribe to: `_INBOX_<node id>.>`.
            .custom_inbox_prefix(inbox_prefix(key.id()))
            .connection_timeout(Duration::from_secs(5))
            .connect(config.url.as_str())
            .await
            .map_err(|e| MeshError::Nats(format!("cannot connect to {}: {e}", config.url)))?;
        let js = jetstream::new(client.clone());
        js.get_or_create_stream(stream::Config {
            name: STREAM.into(),
            subjects: vec!["vox.mesh.*.in".into(), "vox.mesh.*.result".into()],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            max_age: Duration::from_secs(7 * 24 * 3600),
            max_message_size: MAX_ENVELOPE as i32,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .map_err(|e| MeshError::Nats(format!("the {STREAM} stream: {e}")))?;
        Ok(Arc::new(Link {
            client,
            js,
            key,
            config,
            heard: Mutex::new(HashMap::new()),
            counters: Counters::default(),
        }))
    }

    /// This node's id (its public key).
    pub fn node(&self) -> &str {
        self.key.id()
    }

    /// The configuration the link connected with.
    pub fn config(&self) -> &MeshConfig {
        &self.config
    }

    /// Whether `node` is on the trust list.
    pub fn trusts(&self, node: &str) -> bool {
        self.config.peer(node).is_some()
    }

    /// Sends `wire` to `node`'s `queue` and waits until JetStream has stored it. `dedupe_id`
    /// makes a resend to the same node within two minutes a no-op (JetStream's message id, made
    /// of it and the node: one stream holds every node's queue).
    pub async fn send(
        &self,
        node: &str,
        queue: Queue,
        wire: &Wire,
        dedupe_id: &str,
    ) -> Result<(), MeshError> {
        if !crate::identity::is_node_id(node) {
            return Err(MeshError::Config(format!("`{node}` is not a node id")));
        }
        let started = Instant::now();
        let body = seal(&self.key, node, now_ms(), wire)?;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("{dedupe_id}>{node}").as_str());
        self.js
            .publish_with_headers(queue.subject(node), headers, body.into())
            .await
            .map_err(|e| MeshError::Nats(format!("sending to node {node}: {e}")))?
            .await
            .map_err(|e| MeshError::Nats(format!("node {node}'s queue did not store it: {e}")))?;
        self.counters.sent.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("vox_mesh_envelopes_total", "event" => "sent").increment(1);
        metrics::histogram!("vox_mesh_send_seconds").record(started.elapsed().as_secs_f64());
        Ok(())
    }

    /// Consumes this node's `queue` until the connection ends: each envelope that opens is
    /// handed to `handle` and acknowledged once it returns `Ok` (so a crash before that means
    /// it comes again: handlers are idempotent); one refused (forged, misaddressed, from a node
    /// off the trust list) is terminated, never redelivered; a handler's error asks for
    /// redelivery a second later.
    pub async fn consume<F, Fut>(&self, queue: Queue, mut handle: F) -> Result<(), MeshError>
    where
        F: FnMut(Opened) -> Fut,
        Fut: Future<Output = Result<(), String>>,
    {
        let me = self.node().to_owned();
        let stream = self
            .js
            .get_stream(STREAM)
            .await
            .map_err(|e| MeshError::Nats(e.to_string()))?;
        let name = queue.consumer(&me);
        let consumer: consumer::PullConsumer = stream
            .get_or_create_consumer(
                &name,
                consumer::pull::Config {
                    durable_name: Some(name.clone()),
                    filter_subject: queue.subject(&me),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: ACK_WAIT,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| MeshError::Nats(format!("consumer {name}: {e}")))?;
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| MeshError::Nats(format!("consumer {name}: {e}")))?;
        while let Some(m) = messages.next().await {
            let m = match m {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(consumer = name, "mesh consumer: {e}");
                    continue;
                }
            };
            if m.info().is_ok_and(|i| i.delivered > 1) {
                self.counters.redelivered.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("vox_mesh_envelopes_total", "event" => "redelivered")
                    .increment(1);
            }
            let ack = match open(&m.payload, &self.key, |n| self.trusts(n)) {
                Err(e) => {
                    self.counters.refused.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!("vox_mesh_envelopes_total", "event" => "refused")
                        .increment(1);
                    tracing::warn!(consumer = name, "refused: {e}");
                    AckKind::Term
                }
                Ok(o) => {
                    self.counters.received.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!("vox_mesh_envelopes_total", "event" => "received")
                        .increment(1);
                    match handle(o).await {
                        Ok(()) => AckKind::Ack,
                        Err(e) => {
                            tracing::warn!(consumer = name, "handling failed, again in 1s: {e}");
                            AckKind::Nak(Some(Duration::from_secs(1)))
                        }
                    }
                }
            };
            if let Err(e) = m.ack_with(ack).await {
                tracing::warn!(consumer = name, "acknowledging: {e}");
            }
        }
        Err(MeshError::Nats(format!("consumer {name} ended")))
    }

    /// Messages waiting in `queue` of this node, and delivered but not acknowledged yet.
    pub async fn backlog(&self, queue: Queue) -> Result<(u64, u64), MeshError> {
        let stream = self
            .js
            .get_stream(STREAM)
            .await
            .map_err(|e| MeshError::Nats(e.to_string()))?;
        let name = queue.consumer(self.node());
        match stream.consumer_info(&name).await {
            Ok(i) => Ok((i.num_pending, i.num_ack_pending as u64)),
            Err(e) => Err(MeshError::Nats(format!("consumer {name}: {e}"))),
        }
    }

    /// Announces this node every interval with what `announce` says, and listens to the other
    /// nodes' announcements, until the connection ends.
    pub async fn heartbeats(
        self: Arc<Self>,
        announce: impl Fn() -> Wire + Send + 'static,
    ) -> Result<(), MeshError> {
        let mut sub = self
            .client
            .subscribe(HEARTBEAT_SUBJECT)
            .await
            .map_err(|e| MeshError::Nats(e.to_string()))?;
        // One task both beats and listens, so stopping it (the node going away) stops both.
        let mut tick = tokio::time::interval(self.config.heartbeat);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    self.record_peer_gauges();
                    let env = seal_broadcast(&self.key, now_ms(), &announce());
                    if let Err(e) = self.client.publish(HEARTBEAT_SUBJECT, env.into()).await {
                        tracing::warn!("heartbeat: {e}");
                    }
                }
                m = sub.next() => {
                    let Some(m) = m else { break };
                    match open_broadcast(&m.payload, |n| n == self.node() || self.trusts(n)) {
                        // Our own beat is not a peer's.
                        Ok(o) if o.from == self.node() => {}
                        Ok(o) => self.heard(o),
                        Err(e) => {
                            self.counters.refused.fetch_add(1, Ordering::Relaxed);
                            metrics::counter!("vox_mesh_envelopes_total", "event" => "refused")
                                .increment(1);
                            tracing::debug!("heartbeat refused: {e}");
                        }
                    }
                }
            }
        }
        Err(MeshError::Nats("the heartbeat subscription ended".into()))
    }

    fn heard(&self, o: Opened) {
        let Wire::Heartbeat {
            name,
            workspace,
            agents,
            pending,
        } = o.wire
        else {
            return;
        };
        let lag_ms = now_ms() - o.sent_at_ms;
        // A beat replayed later, or dated far ahead, says nothing about the node now.
        let stale_after = (self.config.heartbeat * MISSED_BEATS).as_millis() as i64;
        if lag_ms > stale_after || lag_ms < -MAX_CLOCK_AHEAD_MS {
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("vox_mesh_envelopes_total", "event" => "refused").increment(1);
            tracing::debug!(node = o.from, lag_ms, "a stale heartbeat, ignored");
            return;
        }
        self.counters.heartbeats.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("vox_mesh_envelopes_total", "event" => "heartbeat").increment(1);
        self.heard.lock().unwrap_or_else(|p| p.into_inner()).insert(
            o.from,
            Heard {
                name,
                workspace,
                agents,
                pending,
                at: Instant::now(),
                lag_ms,
            },
        );
    }

    /// `vox_mesh_peers{status}`: how many trusted nodes are up, down, unseen.
    fn record_peer_gauges(&self) {
        let peers = self.peers();
        for status in ["up", "down", "unseen"] {
            let n = peers.iter().filter(|p| p.status == status).count();
            metrics::gauge!("vox_mesh_peers", "status" => status).set(n as f64);
        }
    }

    /// Every trusted node, as last heard.
    pub fn peers(&self) -> Vec<PeerState> {
        let heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
        let down_after = self.config.heartbeat * MISSED_BEATS;
        self.config
            .peers
            .iter()
            .map(|p| match heard.get(&p.node) {
                Some(h) => PeerState {
                    node: p.node.clone(),
                    name: p.name.clone().unwrap_or_else(|| h.name.clone()),
                    workspace: h.workspace.clone(),
                    agents: h.agents.clone(),
                    pending: h.pending,
                    status: if h.at.elapsed() > down_after {
                        "down"
                    } else {
                        "up"
                    },
                    last_seen_ms_ago: Some(h.at.elapsed().as_millis() as u64),
                    lag_ms: Some(h.lag_ms),
                },
                None => PeerState {
                    node: p.node.clone(),
                    name: p.name.clone().unwrap_or_default(),
                    workspace: String::new(),
                    agents: Vec::new(),
                    pending: 0,
                    status: "unseen",
                    last_seen_ms_ago: None,
                    lag_ms: None,
                },
            })
            .collect()
    }

    /// The counters' current values.
    pub fn counter_values(&self) -> CounterValues {
        let c = &self.counters;
        CounterValues {
            sent: c.sent.load(Ordering::Relaxed),
            received: c.received.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
            redelivered: c.redelivered.load(Ordering::Relaxed),
            heartbeats: c.heartbeats.load(Ordering::Relaxed),
        }
    }
}
