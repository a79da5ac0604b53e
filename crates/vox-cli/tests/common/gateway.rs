//! `vox serve` for the gateway end-to-end tests: the server process on a free port, and raw
//! HTTP/1.1 and WebSocket clients.

use super::VOX;
use super::Ws;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const WRITE: &str = "write-token-0123456789";
pub const READ: &str = "read-token-0123456789";

pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub ws: Ws,
}

impl Server {
    pub fn start(ws: Ws, profile: &str, env: &[(&str, &str)]) -> Result<Server, String> {
        let mut cmd = Command::new(VOX);
        cmd.args(["serve", "--profile", profile])
            .current_dir(ws.root())
            .env("VOX_HOME", ws.home.path())
            .env("VOX_WORKSPACE", ws.root())
            .env("VOX_MCP_HTTP_PORT", "0")
            .env("VOX_LOG", "warn")
            .env_remove("VOX_PROFILE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for k in [
            "VOX_MCP_HTTP_BEARER_TOKEN",
            "VOX_MCP_HTTP_READ_BEARER_TOKEN",
            "VOX_MCP_HTTP_ALLOWED_TOOLS",
            "VOX_MCP_HTTP_WORKSPACE_TOOLS",
        ] {
            cmd.env_remove(k);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        if line.is_empty() {
            let out = child.wait_with_output().unwrap();
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let addr = line
            .split("http://")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        Ok(Server { child, addr, ws })
    }

    pub fn tokens(ws: Ws, profile: &str) -> Server {
        Self::start(
            ws,
            profile,
            &[
                ("VOX_MCP_HTTP_BEARER_TOKEN", WRITE),
                ("VOX_MCP_HTTP_READ_BEARER_TOKEN", READ),
            ],
        )
        .unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.ws.stop_daemon();
        let _ = self.child.wait();
    }
}

pub struct Reply {
    pub status: u16,
    pub headers: String,
    pub body: Value,
}

/// One HTTP/1.1 request from `from` (a local source address) with `Connection: close`.
pub async fn http_from(
    from: &str,
    to: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Reply {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut s = sock.connect(to).await.unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Length: {}\r\n",
        to.port(),
        body.len()
    );
    if !body.is_empty() {
        req.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    // A server may answer (413) and close before reading a large body: keep what it said.
    let _ = s.write_all(req.as_bytes()).await;
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    Reply {
        status,
        headers: head.to_owned(),
        body: serde_json::from_str(body).unwrap_or(Value::String(body.to_owned())),
    }
}

pub async fn http(
    to: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
    http_from("127.0.0.1", to, method, path, &headers, body).await
}

pub async fn rest_call(s: &Server, token: Option<&str>, name: &str, args: Value) -> Reply {
    http(
        s.addr,
        "POST",
        "/v1/tools/call",
        token,
        Some(&json!({"name": name, "args": args})),
    )
    .await
}

pub fn names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

pub type WsStream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A `/v1/ws` connection with a bearer token.
pub async fn ws_connect(addr: SocketAddr, token: &str) -> WsStream {
    let url = format!("ws://{addr}/v1/ws");
    let mut req = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(
        url.as_str(),
    )
    .unwrap();
    req.headers_mut()
        .insert("Authorization", format!("Bearer {token}").parse().unwrap());
    tokio_tungstenite::connect_async(req).await.unwrap().0
}

/// Sends one `/v1/ws` message and returns the next frame, parsed.
pub async fn ws_ask(socket: &mut WsStream, v: Value) -> Value {
    use futures_util::{SinkExt, StreamExt};
    socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            v.to_string().into(),
        ))
        .await
        .unwrap();
    let m = socket.next().await.unwrap().unwrap();
    serde_json::from_str(m.to_text().unwrap()).unwrap()
}

/// Sends `request` exactly as given (no Host or other header added) and returns the status and
/// the whole answer.
pub async fn raw_request(to: SocketAddr, request: &str) -> (u16, String) {
    let mut conn = tokio::net::TcpStream::connect(to).await.unwrap();
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = conn.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}
