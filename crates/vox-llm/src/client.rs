//! The facade: one async client for every provider API. A call streams: each piece of text goes
//! to the caller as it arrives, tool calls are passed through whole, and the answer ends with
//! the provider's token counts. 429 and 5xx answers are retried with backoff (honouring
//! `Retry-After`) while nothing has streamed yet; every wait is bounded; a cancel drops the
//! connection at once.

use crate::wire::{self, Accumulator, Fault};
use crate::{Api, ChatRequest, Endpoint, LlmError, ToolCall, Usage};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use std::future::Future;
use std::time::Duration;

/// Most bytes one streamed answer may have.
pub const MAX_STREAM_BYTES: usize = 16 * 1024 * 1024;
/// Longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Most of an error body kept in the error.
const ERROR_BODY_CHARS: usize = 2000;

/// Timeouts and retries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FacadeOptions {
    /// Longest wait to establish a TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Longest wait for the answer's headers, and between two events of its stream.
    pub idle_timeout: Duration,
    /// Retries after a 429 or 5xx (so `retries + 1` attempts at most).
    pub retries: u32,
    /// The first backoff; each retry doubles it.
    pub backoff: Duration,
}

impl Default for FacadeOptions {
    fn default() -> Self {
        FacadeOptions {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            retries: 3,
            backoff: Duration::from_millis(500),
        }
    }
}

impl FacadeOptions {
    /// The defaults, with `VOX_LLM_TIMEOUT_SECS` (idle timeout) and `VOX_LLM_RETRIES` applied;
    /// a value that does not parse is an error naming the variable.
    pub fn from_env(env: &dyn crate::Env) -> Result<Self, LlmError> {
        let mut o = FacadeOptions::default();
        let bad = |name: &str, v: &str| LlmError::Registry {
            origin: "the environment".into(),
            message: format!("{name} is `{v}`; it is a whole number"),
        };
        if let Some(v) = env.var("VOX_LLM_TIMEOUT_SECS") {
            let secs: u64 = v.parse().map_err(|_| bad("VOX_LLM_TIMEOUT_SECS", &v))?;
            o.idle_timeout = Duration::from_secs(secs.clamp(1, 3600));
        }
        if let Some(v) = env.var("VOX_LLM_RETRIES") {
            let n: u32 = v.parse().map_err(|_| bad("VOX_LLM_RETRIES", &v))?;
            o.retries = n.min(10);
        }
        Ok(o)
    }
}

/// A finished answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The answer's text, all of it.
    pub text: String,
    /// The tool calls the answer made, in order, passed through unrun.
    pub tool_calls: Vec<ToolCall>,
    /// The tokens the call used, as the provider reported them.
    pub usage: Usage,
    /// The provider's reason the answer ended (`stop`, `end_turn`, `tool_calls`, ...).
    pub finish: String,
    /// HTTP attempts it took (1 without retries).
    pub attempts: u32,
}

/// The client. Cheap to clone; one per daemon.
#[derive(Clone)]
pub struct Facade {
    http: reqwest::Client,
    opts: FacadeOptions,
}

impl Facade {
    /// A client with these timeouts and retries; fails only if the HTTP client cannot be built.
    pub fn new(opts: FacadeOptions) -> Result<Facade, LlmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(opts.connect_timeout)
            .user_agent(concat!("vox-llm/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Transport {
                url: String::new(),
                message: e.to_string(),
            })?;
        Ok(Facade { http, opts })
    }

    /// The timeouts and retries in use.
    pub fn options(&self) -> FacadeOptions {
        self.opts
    }

    /// Asks `ep` for an answer to `req`, streaming its text to `on_text` as it arrives. Ends with
    /// [`LlmError::Cancelled`] as soon as `cancel` completes (the connection is dropped then).
    pub async fn complete<F, C>(
        &self,
        ep: &Endpoint,
        req: &ChatRequest,
        mut on_text: F,
        cancel: C,
    ) -> Result<Completion, LlmError>
    where
        F: FnMut(&str) + Send,
        C: Future<Output = ()>,
    {
        tokio::select! {
            biased;
            _ = cancel => Err(LlmError::Cancelled),
            r = self.run(ep, req, &mut on_text) => r,
        }
    }

    async fn run(
        &self,
        ep: &Endpoint,
        req: &ChatRequest,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Completion, LlmError> {
        let url = format!("{}{}", ep.base_url, wire::path(ep.api));
        let body = serde_json::to_vec(&wire::body(ep.api, &ep.model, req)).map_err(|e| {
            LlmError::Protocol {
                url: url.clone(),
                message: e.to_string(),
            }
        })?;
        let idle = self.opts.idle_timeout;
        let timeout = || LlmError::Timeout {
            url: url.clone(),
            seconds: idle.as_secs(),
        };
        let mut attempt = 0u32;
        let response = loop {
            attempt += 1;
            let mut rq = self
                .http
                .post(&url)
                .header("content-type", "application/json")
                .header("accept", "text/event-stream")
                .body(body.clone());
            rq = match (ep.api, &ep.api_key) {
                (Api::Anthropic, Some(k)) => rq
                    .header("x-api-key", k)
                    .header("anthropic-version", "2023-06-01"),
                (Api::Anthropic, None) => rq.header("anthropic-version", "2023-06-01"),
                (_, Some(k)) => rq.bearer_auth(k),
                (_, None) => rq,
            };
            let sent = tokio::time::timeout(idle, rq.send())
                .await
                .map_err(|_| timeout())?;
            let r = match sent {
                Ok(r) => r,
                Err(e) if attempt <= self.opts.retries && (e.is_connect() || e.is_request()) => {
                    tokio::time::sleep(self.backoff(attempt, None)).await;
                    continue;
                }
                Err(e) => {
                    return Err(LlmError::Transport {
                        url,
                        message: e.to_string(),
                    });
                }
            };
            let status = r.status().as_u16();
            if (200..300).contains(&status) {
                break r;
            }
            let retryable = status == 429 || (500..600).contains(&status);
            if retryable && attempt <= self.opts.retries {
                let after = r
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                tokio::time::sleep(self.backoff(attempt, after)).await;
                continue;
            }
            let text = tokio::time::timeout(idle, r.text())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            return Err(LlmError::Status {
                url,
                status,
                attempts: attempt,
                body: text.chars().take(ERROR_BODY_CHARS).collect(),
            });
        };

        let mut seen = 0usize;
        let bytes = response.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(|e| e.to_string())?;
            seen += chunk.len();
            if seen > MAX_STREAM_BYTES {
                return Err(format!("the answer is over {MAX_STREAM_BYTES} bytes"));
            }
            Ok(chunk)
        });
        let mut events = Box::pin(bytes.eventsource());
        let mut acc = Accumulator::default();
        let fault = |f: Fault| match f {
            Fault::Protocol(message) => LlmError::Protocol {
                url: url.clone(),
                message,
            },
            Fault::Model(message) => LlmError::Model {
                url: url.clone(),
                message,
            },
        };
        while !acc.done {
            let next = tokio::time::timeout(idle, events.next())
                .await
                .map_err(|_| timeout())?;
            let Some(event) = next else {
                break;
            };
            let event = event.map_err(|e| LlmError::Transport {
                url: url.clone(),
                message: e.to_string(),
            })?;
            if let Some(delta) = acc
                .on_event(ep.api, &event.event, &event.data)
                .map_err(fault)?
            {
                on_text(&delta);
            }
        }
        // A Chat Completions server may close without `[DONE]` once it sent a finish reason.
        let ended = acc.done || (ep.api == Api::Chat && acc.finish.is_some());
        if !ended {
            return Err(LlmError::Protocol {
                url,
                message: "the stream ended before the answer did".into(),
            });
        }
        Ok(Completion {
            tool_calls: acc.tool_calls(),
            text: std::mem::take(&mut acc.text),
            usage: acc.usage,
            finish: acc.finish.unwrap_or_else(|| "stop".into()),
            attempts: attempt,
        })
    }

    /// The wait before retry `attempt`: the server's `Retry-After` (at most 30 s), else the
    /// exponential backoff.
    fn backoff(&self, attempt: u32, after: Option<Duration>) -> Duration {
        after
            .map(|a| a.min(MAX_RETRY_AFTER))
            .unwrap_or_else(|| self.opts.backoff.saturating_mul(1 << (attempt - 1).min(6)))
    }
}
