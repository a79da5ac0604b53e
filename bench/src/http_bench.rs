//! `http-bench`: closed-loop load on `tools/call` over REST (`/v1/tools/call`), Streamable HTTP
//! MCP (any MCP URL, so peers are measured with the same tool) and vox's WebSocket (`/v1/ws`).
//!
//! ```text
//! http-bench --mode rest|mcp|ws --url URL --tool NAME [--args JSON] [--token T]
//!            [--clients 1,16,64] [--seconds 5] [--calls N]
//! ```
//! `--url` is the server base (`http://127.0.0.1:3921`) for rest and ws, and the MCP endpoint
//! for mcp. Each client sends its next call when the previous answer arrived. A step (one
//! `--clients` count) lasts `--seconds`; with `--calls N` it ends once its clients have made N
//! calls in all, or at `--seconds` (60 when only `--calls` is given), whichever comes first.
//! Bounded: loopback URLs only, at most 60 s and 256 clients per step.

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone)]
struct Opts {
    mode: String,
    url: String,
    tool: String,
    args: Value,
    token: Option<String>,
    clients: Vec<usize>,
    seconds: u64,
    /// Calls per step, over all its clients.
    calls: Option<u64>,
}

fn parse() -> Result<Opts, String> {
    parse_from(std::env::args().skip(1))
}

fn parse_from(mut it: impl Iterator<Item = String>) -> Result<Opts, String> {
    let mut o = Opts {
        mode: "rest".into(),
        url: String::new(),
        tool: String::new(),
        args: json!({}),
        token: None,
        clients: vec![1, 16, 64],
        seconds: 5,
        calls: None,
    };
    let mut seconds = None;
    while let Some(a) = it.next() {
        let mut v = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--mode" => o.mode = v()?,
            "--url" => o.url = v()?,
            "--tool" => o.tool = v()?,
            "--args" => o.args = serde_json::from_str(&v()?).map_err(|e| format!("--args: {e}"))?,
            "--token" => o.token = Some(v()?),
            "--clients" => {
                o.clients = v()?
                    .split(',')
                    .map(|c| c.trim().parse().map_err(|e| format!("--clients: {e}")))
                    .collect::<Result<_, _>>()?;
            }
            "--seconds" => seconds = Some(v()?.parse().map_err(|e| format!("--seconds: {e}"))?),
            "--calls" => {
                let n: u64 = v()?.parse().map_err(|e| format!("--calls: {e}"))?;
                if n == 0 {
                    return Err("--calls must be at least 1".into());
                }
                o.calls = Some(n);
            }
            other => return Err(format!("unknown option {other}")),
        }
    }
    // A call count alone is bounded by the longest step allowed, not by the default duration.
    o.seconds = seconds.unwrap_or(if o.calls.is_some() { 60 } else { o.seconds });
    let host = o
        .url
        .split("://")
        .nth(1)
        .unwrap_or("")
        .split(['/', ':'])
        .next()
        .unwrap_or("");
    if !matches!(host, "127.0.0.1" | "localhost" | "[") {
        return Err(format!("--url must be a loopback URL, got {}", o.url));
    }
    if o.tool.is_empty() || !["rest", "mcp", "ws"].contains(&o.mode.as_str()) {
        return Err("give --mode rest|mcp|ws and --tool".into());
    }
    if o.seconds > 60 || o.clients.iter().any(|&c| c == 0 || c > 256) {
        return Err("at most 60 s and 1..=256 clients".into());
    }
    Ok(o)
}

type Http = Client<HttpConnector, Full<Bytes>>;

fn http_client() -> Http {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(c)
}

async fn post(
    http: &Http,
    url: &str,
    headers: &[(String, String)],
    body: &Value,
) -> Result<(hyper::http::response::Parts, Bytes), String> {
    let mut req = Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let req = req
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let res = http.request(req).await.map_err(|e| e.to_string())?;
    let (parts, body) = res.into_parts();
    let bytes = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((parts, bytes))
}

/// The JSON-RPC answer in a plain JSON or a server-sent-events body.
fn rpc_answer(body: &[u8]) -> Option<Value> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Some(v);
    }
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
}

fn auth(o: &Opts) -> Vec<(String, String)> {
    o.token
        .iter()
        .map(|t| ("authorization".to_owned(), format!("Bearer {t}")))
        .collect()
}

/// Calls a step may still make (shared by its clients); unbounded without `--calls`.
struct Budget(Option<AtomicU64>);

impl Budget {
    /// Takes one call from the budget; false once it is spent.
    fn take(&self) -> bool {
        self.0.as_ref().is_none_or(|left| {
            left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
        })
    }
}

/// One client's loop until `deadline` or until the step's budget is spent; returns its
/// latencies in microseconds.
async fn client(o: Opts, deadline: Instant, budget: Arc<Budget>) -> Result<Vec<f64>, String> {
    let more = || Instant::now() < deadline && budget.take();
    let mut lat = Vec::new();
    match o.mode.as_str() {
        "rest" => {
            let http = http_client();
            let url = format!("{}/v1/tools/call", o.url);
            let body = json!({"name": o.tool, "args": o.args});
            let headers = auth(&o);
            while more() {
                let t = Instant::now();
                let (parts, _) = post(&http, &url, &headers, &body).await?;
                if !parts.status.is_success() {
                    return Err(format!("HTTP {}", parts.status));
                }
                lat.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        "mcp" => {
            let http = http_client();
            let mut headers = auth(&o);
            let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "http-bench", "version": "1"}}});
            let (parts, _) = post(&http, &o.url, &headers, &init).await?;
            if !parts.status.is_success() {
                return Err(format!("initialize: HTTP {}", parts.status));
            }
            if let Some(sid) = parts
                .headers
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                headers.push(("mcp-session-id".into(), sid.to_owned()));
            }
            headers.push(("mcp-protocol-version".into(), "2025-11-25".into()));
            post(
                &http,
                &o.url,
                &headers,
                &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            .await?;
            let mut id = 1u64;
            while more() {
                let t = Instant::now();
                let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": o.tool, "arguments": o.args}});
                let (parts, body) = post(&http, &o.url, &headers, &call).await?;
                let answer = rpc_answer(&body)
                    .ok_or(format!("HTTP {}: no JSON-RPC answer", parts.status))?;
                if answer.get("error").is_some() || answer["result"]["isError"] == json!(true) {
                    return Err(format!("tools/call failed: {answer}"));
                }
                lat.push(t.elapsed().as_secs_f64() * 1e6);
                id += 1;
            }
        }
        _ => {
            use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};
            let url = format!("{}/v1/ws", o.url.replacen("http", "ws", 1));
            let mut req = url
                .as_str()
                .into_client_request()
                .map_err(|e| e.to_string())?;
            if let Some(t) = &o.token {
                req.headers_mut().insert(
                    "authorization",
                    format!("Bearer {t}").parse().map_err(|_| "bad token")?,
                );
            }
            let (mut ws, _) = tokio_tungstenite::connect_async(req)
                .await
                .map_err(|e| e.to_string())?;
            let mut id = 0u64;
            while more() {
                let t = Instant::now();
                let msg = json!({"id": id, "type": "call_tool", "name": o.tool, "args": o.args})
                    .to_string();
                ws.send(Message::Text(msg.into()))
                    .await
                    .map_err(|e| e.to_string())?;
                let m = ws
                    .next()
                    .await
                    .ok_or("closed")?
                    .map_err(|e| e.to_string())?;
                let v: Value =
                    serde_json::from_str(m.to_text().unwrap_or("")).map_err(|e| e.to_string())?;
                if v["type"] != "call_tool_result" || v["is_error"] == json!(true) {
                    return Err(format!("call failed: {v}"));
                }
                lat.push(t.elapsed().as_secs_f64() * 1e6);
                id += 1;
            }
        }
    }
    Ok(lat)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((sorted.len().saturating_sub(1)) as f64 * p).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

#[tokio::main]
async fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("http-bench: {e}");
            std::process::exit(2);
        }
    };
    let mut report = vec![];
    for &n in &o.clients {
        let start = Instant::now();
        let deadline = start + Duration::from_secs(o.seconds);
        let budget = Arc::new(Budget(o.calls.map(AtomicU64::new)));
        let tasks: Vec<_> = (0..n)
            .map(|_| tokio::spawn(client(o.clone(), deadline, budget.clone())))
            .collect();
        let mut all = vec![];
        for t in tasks {
            match t.await {
                Ok(Ok(l)) => all.extend(l),
                Ok(Err(e)) => {
                    eprintln!("http-bench: {e}");
                    std::process::exit(1);
                }
                Err(e) => {
                    eprintln!("http-bench: {e}");
                    std::process::exit(1);
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        all.sort_by(f64::total_cmp);
        let rate = all.len() as f64 / secs;
        eprintln!(
            "{:<5} clients={n:<4} calls={:<8} {:>9.0} calls/s  p50 {:>8.1} µs  p99 {:>8.1} µs",
            o.mode,
            all.len(),
            rate,
            pct(&all, 0.5),
            pct(&all, 0.99)
        );
        report.push(json!({"mode": o.mode, "clients": n, "calls": all.len(), "calls_per_sec": rate, "p50_us": pct(&all, 0.5), "p99_us": pct(&all, 0.99)}));
    }
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &str) -> Result<Opts, String> {
        parse_from(a.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn calls_bounds_each_step_and_seconds_stays_the_time_limit() {
        let base = "--mode rest --url http://127.0.0.1:3921 --tool vox_memory_recall";
        let o = args(&format!("{base} --calls 500")).unwrap();
        assert_eq!((o.calls, o.seconds), (Some(500), 60));
        let o = args(&format!("{base} --calls 500 --seconds 3")).unwrap();
        assert_eq!((o.calls, o.seconds), (Some(500), 3));
        let o = args(base).unwrap();
        assert_eq!((o.calls, o.seconds), (None, 5));
        assert!(args(&format!("{base} --calls 0")).is_err());
        assert!(args(&format!("{base} --calls x")).is_err());
    }
}
