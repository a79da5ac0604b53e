use super::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CustomRequest, CustomResult,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, ServerHandler};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};

/// A server with one tool, `slow`, that answers after `seconds`, and one custom method.
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let secs = request
            .arguments
            .and_then(|a| a.get("seconds").and_then(Value::as_u64))
            .unwrap_or(0);
        tokio::time::sleep(Duration::from_secs(secs)).await;
        Ok(CallToolResult::structured(json!({"slept": secs})).into())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Ok(CustomResult(json!({"method": request.method})))
    }
}

/// Sends `input` on a connection served by `Echo` over `LineTransport`, then closes its
/// sending side; returns every frame the server wrote before it closed.
async fn exchange(input: &str) -> Vec<Value> {
    let (client, server) = tokio::io::duplex(1 << 16);
    let (read, mut write) = tokio::io::split(server);
    let (out, mut frames) = tokio::sync::mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        while let Some(line) = frames.recv().await {
            write.write_all(line.as_bytes()).await.unwrap();
            write.write_all(b"\n").await.unwrap();
        }
    });
    let serving = tokio::spawn(async move {
        let transport = LineTransport::new(BufReader::new(read), out);
        if let Ok(running) = rmcp::serve_server(Echo, transport).await {
            let _ = running.waiting().await;
        }
    });
    let (mut from, mut to) = tokio::io::split(client);
    to.write_all(input.as_bytes()).await.unwrap();
    to.shutdown().await.unwrap();
    let mut text = String::new();
    from.read_to_string(&mut text).await.unwrap();
    serving.await.unwrap();
    writer.await.unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn line(v: Value) -> String {
    format!("{v}\n")
}

#[tokio::test]
async fn a_one_shot_request_is_answered_without_an_initialize_and_nothing_else_is_sent() {
    let frames = exchange(&line(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow", "arguments": {}}}))).await;
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["id"], 1);
    assert_eq!(
        frames[0]["result"]["structuredContent"],
        json!({"slept": 0})
    );
    assert_eq!(frames[0]["result"]["isError"], false);
    let frames = exchange(&line(
        json!({"jsonrpc": "2.0", "id": "a", "method": "session/inspect"}),
    ))
    .await;
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["result"], json!({"method": "session/inspect"}));
}

#[tokio::test]
async fn an_mcp_session_is_initialized_by_its_client() {
    let frames = exchange(&format!(
        "{}{}{}",
        line(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        ),
        line(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        line(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})),
    ))
    .await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(frames[0]["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(frames[1]["id"], 2);
}

#[tokio::test]
async fn lines_that_are_not_requests_are_answered_and_the_connection_goes_on() {
    let frames = exchange(&format!(
        "not json\n\n{}{}",
        line(json!({"jsonrpc": "2.0", "id": 7, "no": "method"})),
        line(json!({"jsonrpc": "2.0", "id": 8, "method": "session/x"})),
    ))
    .await;
    assert_eq!(frames.len(), 3, "{frames:?}");
    assert_eq!(frames[0]["error"]["code"], -32700);
    assert_eq!(frames[0]["id"], Value::Null);
    assert_eq!(frames[1]["error"]["code"], -32600);
    assert_eq!(frames[1]["id"], 7);
    assert_eq!(frames[2]["id"], 8);
}

#[tokio::test]
async fn a_line_over_the_limit_ends_the_connection_with_an_error() {
    let frames = exchange(&format!(
        "{}\n{}",
        "x".repeat(MAX_LINE + 1),
        line(json!({"jsonrpc": "2.0", "id": 1, "method": "session/x"}))
    ))
    .await;
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["error"]["code"], -32600);
    assert!(
        frames[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"),
        "{frames:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn requests_still_running_when_the_peer_stops_sending_are_answered() {
    // Longer than rmcp's own five seconds of draining after the input ends.
    let frames = exchange(&format!(
        "{}{}",
        line(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 30}}})
        ),
        line(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 1}}})
        ),
    ))
    .await;
    let ids: Vec<&Value> = frames.iter().map(|f| &f["id"]).collect();
    assert_eq!(ids, [&json!(2), &json!(1)], "{frames:?}");
}

#[tokio::test]
async fn long_lines_are_refused_without_being_kept() {
    let data = format!("{}\nok\n", "x".repeat(100));
    let mut lines = BoundedLines::new(data.as_bytes(), 50);
    assert!(lines.next_line().await.unwrap().is_err());
    assert_eq!(lines.next_line().await.unwrap().unwrap(), "ok");
    assert!(lines.next_line().await.is_none());
}

#[tokio::test]
async fn a_peer_without_an_identity_has_every_request_refused() {
    let (out, mut frames) = tokio::sync::mpsc::unbounded_channel::<String>();
    let input = format!(
        "{}{}{}",
        line(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})),
        line(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        line(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {}})),
    );
    refuse(input.as_bytes(), out, "no identity here").await;
    let mut got = Vec::new();
    while let Ok(f) = frames.try_recv() {
        got.push(serde_json::from_str::<Value>(&f).unwrap());
    }
    assert_eq!(got.len(), 2, "{got:?}");
    for (f, id) in got.iter().zip([1, 2]) {
        assert_eq!(f["id"], id);
        assert_eq!(f["error"]["code"], -32001);
        assert_eq!(f["error"]["message"], "refused: no identity here");
    }
}
