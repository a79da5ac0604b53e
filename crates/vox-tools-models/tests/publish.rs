//! Publishing to webhooks in process, against small local HTTP servers: no redirect is
//! followed, a status URL off the webhook's origin is not fetched, a webhook on a non-public
//! address is refused unless `.vox/publish.toml`'s `allow_private` lists it, and a webhook's
//! answer is bounded. (Built with `news-publish`, as `cargo nextest run --workspace` builds it.)
#![cfg(feature = "news-publish")]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vox_tools_harness::Harness;

/// One request a [`Server`] got: method, path and body.
#[derive(Debug, Clone)]
struct Got {
    method: String,
    path: String,
    body: String,
}

/// What a [`Server`] answers a request: status, extra headers, body.
type Reply = (u16, Vec<(String, String)>, Vec<u8>);

/// A local HTTP/1.1 server on 127.0.0.1 (one request per connection) that records every
/// connection and request and answers each with `reply`.
struct Server {
    port: u16,
    connections: Arc<Mutex<usize>>,
    got: Arc<Mutex<Vec<Got>>>,
}

impl Server {
    fn start(reply: impl Fn(&Got) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (connections, got) = (Arc::new(Mutex::new(0)), Arc::new(Mutex::new(Vec::new())));
        let (c, g, reply) = (connections.clone(), got.clone(), Arc::new(reply));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                *c.lock().unwrap() += 1;
                let (g, reply) = (g.clone(), reply.clone());
                std::thread::spawn(move || serve(stream, &g, &*reply));
            }
        });
        Server {
            port,
            connections,
            got,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }

    fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }
}

fn serve(stream: TcpStream, got: &Mutex<Vec<Got>>, reply: &dyn Fn(&Got) -> Reply) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if r.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_owned(),
        parts.next().unwrap_or("").to_owned(),
    );
    let mut len = 0;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.trim().eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; len];
    let _ = r.read_exact(&mut body);
    let req = Got {
        method,
        path,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    got.lock().unwrap().push(req.clone());
    let (status, headers, body) = reply(&req);
    let mut out = stream;
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = out.write_all(head.as_bytes());
    let _ = out.write_all(&body);
}

fn json_reply(status: u16, v: Value) -> Reply {
    (
        status,
        vec![("Content-Type".into(), "application/json".into())],
        v.to_string().into_bytes(),
    )
}

/// A workspace with an approved draft; its id.
async fn approved_draft(h: &Harness) -> i64 {
    let r = h
        .ok(
            "vox_research_persist_claims",
            json!({"question": "what do the notes say?", "source": "tester", "claims": [
                {"text": "alpha comes first", "citations": [{"file": "NOTES.md", "lines": [1, 1]}]},
            ]}),
        )
        .await;
    let d = h
        .ok("vox_news_draft", json!({"run_id": r["run"]["id"]}))
        .await;
    let id = d["id"].as_i64().unwrap();
    h.ok("vox_news_approve", json!({"draft_id": id})).await;
    id
}

fn harness() -> Harness {
    Harness::boot_in(|root| std::fs::write(root.join("NOTES.md"), "alpha\nbeta\n").unwrap())
}

fn set_config(h: &Harness, toml: &str) {
    std::fs::write(h.root().join(".vox").join("publish.toml"), toml).unwrap();
}

/// `allow_private` for the local servers, and one webhook destination `hook` at `url`.
fn local_hook(url: &str) -> String {
    format!(
        "allow_private = [\"127.0.0.0/8\"]\n\n[destinations.hook]\nkind = \"webhook\"\nurl = \"{url}\"\n"
    )
}

async fn publish_fails(h: &Harness, draft: i64, code: &str) -> String {
    let e = h
        .fails(
            "vox_news_publish",
            json!({"draft_id": draft, "destination": "hook"}),
            code,
        )
        .await;
    e["error"]["message"].as_str().unwrap().to_owned()
}

async fn last_submission(h: &Harness) -> Value {
    let s = h.ok("vox_scientia_submissions", json!({})).await;
    s["submissions"][0].clone()
}

#[tokio::test]
async fn a_webhook_that_redirects_is_a_failed_attempt_and_the_redirect_is_not_followed() {
    let h = harness();
    let draft = approved_draft(&h).await;
    let elsewhere = Server::start(|_| json_reply(200, json!({"ok": true})));
    for code in [307, 302, 301, 308] {
        let to = elsewhere.url(&format!("/took-it-{code}"));
        let hook = Server::start(move |_| (code, vec![("Location".into(), to.clone())], vec![]));
        set_config(&h, &local_hook(&hook.url("/drafts")));
        let m = publish_fails(&h, draft, "tool_error").await;
        assert!(
            m.contains(&format!("HTTP {code}"))
                && m.contains(&elsewhere.url(&format!("/took-it-{code}")))
                && m.contains("not followed"),
            "{m}"
        );
        assert_eq!(hook.got().len(), 1, "the webhook got the draft once");
        assert_eq!(hook.got()[0].method, "POST");
        let sub = last_submission(&h).await;
        assert_eq!(sub["state"], "failed", "{sub}");
        assert_eq!(sub["detail"], json!(m), "{sub}");
    }
    assert_eq!(elsewhere.connections(), 0, "{:?}", elsewhere.got());
}

#[tokio::test]
async fn a_status_url_off_the_webhooks_origin_fails_the_submission_and_is_not_fetched() {
    let h = harness();
    let draft = approved_draft(&h).await;
    let other = Server::start(|_| json_reply(200, json!({"state": "published", "secret": "s3"})));
    let other_status = other.url("/status/j1");
    let hook = Server::start(move |_| {
        json_reply(
            202,
            json!({"job": "j1", "status_url": other_status.clone()}),
        )
    });
    set_config(&h, &local_hook(&hook.url("/drafts")));
    let m = publish_fails(&h, draft, "refused").await;
    assert!(
        m.contains("status_url") && m.contains(&other.url("/status/j1")) && m.contains("origin"),
        "{m}"
    );
    let sub = last_submission(&h).await;
    assert_eq!(
        (&sub["state"], &sub["status_url"]),
        (&json!("failed"), &Value::Null),
        "{sub}"
    );
    // The failed submission has no status URL to poll.
    let j = h
        .ok(
            "vox_external_job_status",
            json!({"submission_id": sub["id"]}),
        )
        .await;
    assert_eq!(j["state"], "failed", "{j}");
    assert!(!j.to_string().contains("s3"), "{j}");
    assert_eq!(other.connections(), 0, "{:?}", other.got());

    // The same origin on another scheme, or a relative URL, is off it too.
    for status_url in [
        "https://127.0.0.1:{port}/s",
        "/status/j1",
        "ftp://127.0.0.1/s",
    ] {
        let hook = Server::start(move |g| {
            let port = g.path.trim_start_matches("/p").to_owned();
            json_reply(
                202,
                json!({"status_url": status_url.replace("{port}", &port)}),
            )
        });
        set_config(&h, &local_hook(&hook.url(&format!("/p{}", hook.port))));
        publish_fails(&h, draft, "refused").await;
        assert_eq!(hook.got().len(), 1);
    }
}

#[tokio::test]
async fn a_status_url_on_the_webhooks_origin_is_polled_without_following_redirects() {
    let h = harness();
    let draft = approved_draft(&h).await;
    let elsewhere = Server::start(|_| json_reply(200, json!({"state": "published"})));
    // A webhook naming a status URL on its own origin: pending, and polled there; its redirect
    // is a failure, not followed.
    let me = Arc::new(Mutex::new(0u16));
    let (me2, to) = (me.clone(), elsewhere.url("/status"));
    let own = Server::start(move |g| match (g.method.as_str(), g.path.as_str()) {
        ("POST", _) => json_reply(
            202,
            json!({"status_url": format!("http://127.0.0.1:{}/status/j1", me2.lock().unwrap())}),
        ),
        (_, "/status/j1") => (302, vec![("Location".into(), to.clone())], vec![]),
        _ => json_reply(404, json!({})),
    });
    *me.lock().unwrap() = own.port;
    set_config(&h, &local_hook(&own.url("/drafts")));
    let sub = h
        .ok(
            "vox_news_publish",
            json!({"draft_id": draft, "destination": "hook"}),
        )
        .await;
    assert_eq!(sub["state"], "pending", "{sub}");
    assert_eq!(sub["status_url"], json!(own.url("/status/j1")), "{sub}");
    let e = h
        .fails(
            "vox_external_job_status",
            json!({"submission_id": sub["id"]}),
            "tool_error",
        )
        .await;
    let m = e["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("HTTP 302") && m.contains(&elsewhere.url("/status")),
        "{m}"
    );
    assert_eq!(own.got().len(), 2, "{:?}", own.got());
    assert_eq!(elsewhere.connections(), 0, "{:?}", elsewhere.got());
    let sub = last_submission(&h).await;
    assert_eq!(sub["state"], "pending", "still pending: {sub}");
}

#[tokio::test]
async fn a_webhook_on_a_non_public_address_is_refused_unless_allow_private_lists_it() {
    let h = harness();
    let draft = approved_draft(&h).await;
    let hook = Server::start(|_| json_reply(200, json!({"ok": true})));
    let p = hook.port;
    for (url, shown) in [
        (format!("http://127.0.0.1:{p}/drafts"), "127.0.0.1"),
        (format!("http://localhost:{p}/drafts"), "127.0.0.1"),
        (format!("http://[::ffff:127.0.0.1]:{p}/drafts"), "127.0.0.1"),
        (format!("http://0x7f.1:{p}/drafts"), "127.0.0.1"),
        (format!("http://[::1]:{p}/drafts"), "::1"),
    ] {
        set_config(
            &h,
            &format!("[destinations.hook]\nkind = \"webhook\"\nurl = \"{url}\"\n"),
        );
        let m = publish_fails(&h, draft, "refused").await;
        assert!(
            m.contains(shown) && m.contains("loopback") && m.contains("allow_private"),
            "{url}: {m}"
        );
        let sub = last_submission(&h).await;
        assert_eq!(sub["state"], "failed", "{sub}");
    }
    // A listed network that is not the webhook's does not allow it.
    set_config(
        &h,
        &format!(
            "allow_private = [\"10.0.0.0/8\", \"::1\"]\n[destinations.hook]\nkind = \"webhook\"\nurl = \"{}\"\n",
            hook.url("/drafts")
        ),
    );
    publish_fails(&h, draft, "refused").await;
    assert_eq!(hook.connections(), 0, "nothing was sent: {:?}", hook.got());

    // Listed, it is reached (by name too: localhost's addresses outside the list are not used).
    for listed in ["127.0.0.1/32", "127.0.0.0/8", "::ffff:127.0.0.1"] {
        for url in [hook.url("/drafts"), format!("http://localhost:{p}/drafts")] {
            set_config(
                &h,
                &format!(
                    "allow_private = [\"{listed}\"]\n[destinations.hook]\nkind = \"webhook\"\nurl = \"{url}\"\n"
                ),
            );
            let sub = h
                .ok(
                    "vox_news_publish",
                    json!({"draft_id": draft, "destination": "hook"}),
                )
                .await;
            assert_eq!(sub["state"], "published", "{listed} {url}: {sub}");
        }
    }
    let got = hook.got();
    assert_eq!(got.len(), 6, "{got:?}");
    assert!(got[0].body.contains("alpha comes first"), "{got:?}");
}

#[tokio::test]
async fn a_webhooks_answer_is_bounded() {
    let h = harness();
    let draft = approved_draft(&h).await;
    let hook = Server::start(|_| (200, vec![], vec![b'x'; 1024 * 1024]));
    set_config(&h, &local_hook(&hook.url("/drafts")));
    let m = publish_fails(&h, draft, "tool_error").await;
    assert!(m.contains("more than 65536 bytes"), "{m}");
    assert!(m.len() < 1024, "{m}");
}

#[tokio::test]
async fn publish_toml_refuses_unknown_keys_and_bad_networks_naming_them() {
    let h = harness();
    let draft = approved_draft(&h).await;
    for (toml, named) in [
        ("allow_privat = [\"127.0.0.1\"]\n", "allow_privat"),
        (
            "[destinations.hook]\nkind = \"webhook\"\nurl = \"http://127.0.0.1:9/\"\nallow_private = [\"127.0.0.1\"]\n",
            "allow_private",
        ),
        ("allow_private = [\"127.0.0.1/33\"]\n", "127.0.0.1/33"),
        ("allow_private = [\"localhost\"]\n", "localhost"),
    ] {
        set_config(&h, toml);
        let e = h
            .fails(
                "vox_news_publish",
                json!({"draft_id": draft, "destination": "hook"}),
                "invalid_arguments",
            )
            .await;
        let m = e["error"]["message"].as_str().unwrap();
        assert!(m.contains(".vox/publish.toml") && m.contains(named), "{m}");
    }
}
