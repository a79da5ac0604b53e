//! The facade against a real process speaking each provider API: `scripted-model` (built with
//! the workspace), scripted per test.

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use vox_llm::{Api, ChatRequest, Endpoint, Facade, FacadeOptions, LlmError, Message, ToolSpec};

/// A scripted model process (killed on drop) and its files.
pub struct Scripted {
    run: scripted_model::process::Running,
    /// The server's base URL, e.g. `http://127.0.0.1:<port>/v1`.
    pub base: String,
    _dir: tempfile::TempDir,
}

impl Scripted {
    /// Starts `scripted-model` on `script` (the binary beside this test's directory).
    pub fn start(script: Value) -> Scripted {
        let dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let bin = exe
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("scripted-model");
        let run = scripted_model::process::Running::start(&bin, &script, dir.path())
            .unwrap_or_else(|e| panic!("{e} (cargo build --workspace builds it)"));
        Scripted {
            base: run.base_url.clone(),
            run,
            _dir: dir,
        }
    }

    /// An endpoint of `api` on this server, model `scripted`, with a test key.
    pub fn endpoint(&self, api: Api) -> Endpoint {
        Endpoint {
            api,
            base_url: self.base.clone(),
            model: "scripted".into(),
            api_key: Some("test-key".into()),
        }
    }

    /// Every request the server logged so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.run.requests()
    }
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest {
        system: Some("You are terse.".into()),
        messages: vec![Message::User {
            content: text.into(),
        }],
        ..Default::default()
    }
}

fn fast() -> Facade {
    Facade::new(FacadeOptions {
        backoff: Duration::from_millis(20),
        ..FacadeOptions::default()
    })
    .unwrap()
}

#[tokio::test]
async fn every_api_streams_text_and_reports_usage() {
    let m = Scripted::start(json!({"actors": [{"name": "a", "match": "MARK", "steps": [
        [{"say": "one two three four"}, {"usage": {"input_tokens": 11, "output_tokens": 4}}],
        [{"say": "one two three four"}, {"usage": {"input_tokens": 11, "output_tokens": 4}}],
        [{"say": "one two three four"}, {"usage": {"input_tokens": 11, "output_tokens": 4}}],
    ]}]}));
    for api in [Api::Chat, Api::Anthropic, Api::Responses] {
        let mut pieces = Vec::new();
        let done = fast()
            .complete(
                &m.endpoint(api),
                &ask("MARK hello"),
                |t| pieces.push(t.to_string()),
                std::future::pending(),
            )
            .await
            .unwrap_or_else(|e| panic!("{api:?}: {e}"));
        assert_eq!(done.text, "one two three four", "{api:?}");
        assert_eq!(pieces.concat(), done.text);
        if api != Api::Responses {
            assert_eq!(pieces.len(), 4, "{api:?} streams word by word: {pieces:?}");
        }
        assert_eq!(done.usage.input_tokens, 11, "{api:?}");
        assert_eq!(done.usage.output_tokens, 4, "{api:?}");
        assert_eq!(done.attempts, 1);
    }
    let paths: Vec<String> = m
        .requests()
        .iter()
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        paths,
        ["/v1/chat/completions", "/v1/messages", "/v1/responses"]
    );
    // Each API got its own body: the system prompt where that API puts it.
    let r = m.requests();
    assert_eq!(r[0]["body"]["messages"][0]["role"], "system");
    assert_eq!(r[1]["body"]["system"], "You are terse.");
    assert_eq!(r[2]["body"]["instructions"], "You are terse.");
}

#[tokio::test]
async fn tool_calls_pass_through_and_their_results_go_back() {
    let m = Scripted::start(json!({"actors": [{"name": "a", "match": "MARK", "steps": [
        [{"call": {"name": "lookup", "arguments": {"q": "rust"}}}],
        [{"say": "found it"}],
        [{"call": {"name": "lookup", "arguments": {"q": "rust"}}}],
        [{"say": "found it"}],
    ]}]}));
    for api in [Api::Chat, Api::Anthropic] {
        let mut req = ask("MARK find rust");
        req.tools = vec![ToolSpec {
            name: "lookup".into(),
            description: "looks things up".into(),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        }];
        let f = fast();
        let first = f
            .complete(&m.endpoint(api), &req, |_| {}, std::future::pending())
            .await
            .unwrap();
        assert_eq!(first.tool_calls.len(), 1, "{api:?}");
        let call = first.tool_calls[0].clone();
        assert_eq!(call.name, "lookup");
        assert_eq!(
            serde_json::from_str::<Value>(&call.arguments).unwrap(),
            json!({"q": "rust"})
        );
        req.messages.push(Message::Assistant {
            content: first.text.clone(),
            tool_calls: vec![call.clone()],
        });
        req.messages.push(Message::Tool {
            call_id: call.id.clone(),
            content: "rust is a language".into(),
        });
        let second = f
            .complete(&m.endpoint(api), &req, |_| {}, std::future::pending())
            .await
            .unwrap();
        assert_eq!(second.text, "found it");
        let body = m.requests().last().unwrap()["body"].to_string();
        assert!(
            body.contains("rust is a language") && body.contains(&call.id),
            "{body}"
        );
    }
}

#[tokio::test]
async fn a_429_is_retried_and_an_error_that_persists_is_reported_with_its_attempts() {
    let m = Scripted::start(json!({"actors": [{"name": "a", "match": "MARK", "steps": [
        [{"status": 429}],
        [{"say": "after the retry"}],
        [{"status": 503}], [{"status": 503}], [{"status": 503}],
        [{"status": 400}],
    ]}]}));
    let f = Facade::new(FacadeOptions {
        retries: 2,
        backoff: Duration::from_millis(20),
        ..FacadeOptions::default()
    })
    .unwrap();
    let ep = m.endpoint(Api::Chat);
    let done = f
        .complete(&ep, &ask("MARK"), |_| {}, std::future::pending())
        .await
        .unwrap();
    assert_eq!(done.text, "after the retry");
    assert_eq!(done.attempts, 2);
    let e = f
        .complete(&ep, &ask("MARK"), |_| {}, std::future::pending())
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            LlmError::Status {
                status: 503,
                attempts: 3,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.code(), "llm_http_status");
    // A 400 is not retried.
    let e = f
        .complete(&ep, &ask("MARK"), |_| {}, std::future::pending())
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            LlmError::Status {
                status: 400,
                attempts: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("scripted-model answers 400"));
}

#[tokio::test]
async fn a_cancel_mid_stream_drops_the_call_at_once_and_silence_times_out() {
    let m = Scripted::start(json!({"actors": [{"name": "a", "match": "MARK", "steps": [
        [{"say": "partial answer"}, {"hang": true}],
        [{"say": "partial answer"}, {"hang": true}],
    ]}]}));
    let ep = m.endpoint(Api::Anthropic);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut tx = Some(tx);
    let t = Instant::now();
    let e = fast()
        .complete(
            &ep,
            &ask("MARK"),
            |_| {
                // The first text arrived: cancel.
                if let Some(tx) = tx.take() {
                    let _ = tx.send(());
                }
            },
            async {
                let _ = rx.await;
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(e, LlmError::Cancelled), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());

    let slow = Facade::new(FacadeOptions {
        idle_timeout: Duration::from_secs(1),
        ..FacadeOptions::default()
    })
    .unwrap();
    let e = slow
        .complete(&ep, &ask("MARK"), |_| {}, std::future::pending())
        .await
        .unwrap_err();
    assert_eq!(e.code(), "llm_timeout", "{e}");
}

#[tokio::test]
async fn nothing_listening_is_a_transport_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let f = Facade::new(FacadeOptions {
        retries: 1,
        backoff: Duration::from_millis(10),
        ..FacadeOptions::default()
    })
    .unwrap();
    let e = f
        .complete(
            &Endpoint {
                api: Api::Chat,
                base_url: format!("http://127.0.0.1:{port}/v1"),
                model: "m".into(),
                api_key: None,
            },
            &ask("x"),
            |_| {},
            std::future::pending(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), "llm_transport", "{e}");
}

/// A one-shot HTTP server answering every connection with `body` as an event stream.
fn raw_server(body: &'static str) -> String {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut buf = [0u8; 65536];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
            );
        }
    });
    format!("http://127.0.0.1:{port}/v1")
}

#[tokio::test]
async fn every_error_code_is_produced() {
    let mut seen = std::collections::BTreeSet::new();
    let f = Facade::new(FacadeOptions {
        retries: 0,
        idle_timeout: Duration::from_secs(1),
        ..FacadeOptions::default()
    })
    .unwrap();
    let call = |base: String, api: Api| {
        let f = f.clone();
        async move {
            f.complete(
                &Endpoint {
                    api,
                    base_url: base,
                    model: "m".into(),
                    api_key: None,
                },
                &ask("MARK"),
                |_| {},
                std::future::pending(),
            )
            .await
            .unwrap_err()
        }
    };
    seen.insert(
        call(raw_server("data: {not json\n\n"), Api::Chat)
            .await
            .code(),
    );
    seen.insert(
        call(
            raw_server("data: {\"error\":{\"message\":\"boom\"}}\n\n"),
            Api::Chat,
        )
        .await
        .code(),
    );
    // A stream that ends before its answer does.
    seen.insert(
        call(
            raw_server("event: message_start\ndata: {}\n\n"),
            Api::Anthropic,
        )
        .await
        .code(),
    );
    let m = Scripted::start(json!({"actors": [{"name": "a", "match": "MARK", "steps": [
        [{"status": 500}], [{"hang": true}], [{"say": "x"}, {"hang": true}]]}]}));
    seen.insert(call(m.base.clone(), Api::Chat).await.code());
    seen.insert(call(m.base.clone(), Api::Chat).await.code());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut tx = Some(tx);
    seen.insert(
        f.complete(
            &m.endpoint(Api::Chat),
            &ask("MARK"),
            |_| {
                if let Some(t) = tx.take() {
                    let _ = t.send(());
                }
            },
            async {
                let _ = rx.await;
            },
        )
        .await
        .unwrap_err()
        .code(),
    );
    seen.insert(call("http://127.0.0.1:1/v1".into(), Api::Chat).await.code());
    let r = vox_llm::Registry::load(&|_: &str| None).unwrap();
    seen.insert(r.model("no/such").unwrap_err().code());
    seen.insert(
        r.endpoint("openai/gpt-5", &|_: &str| None)
            .unwrap_err()
            .code(),
    );
    let mut bad = vox_llm::Registry::default();
    seen.insert(bad.merge("x = 1", "test").unwrap_err().code());
    let all: std::collections::BTreeSet<&str> = LlmError::CODES.iter().copied().collect();
    assert_eq!(seen, all);
}
