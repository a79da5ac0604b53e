//! The reference server `@modelcontextprotocol/server-everything` (npm, pinned in
//! `tests/upstream/package.json`) behind vox: started by vox from `.vox/servers.toml`, its tools
//! served as `every__<tool>` under the one decision, calls relayed with their progress,
//! cancelled on the server when the caller cancels, and its process group ended with it.

use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use vox_core::{CallRun, CallScope, Cancel, ToolOutcome};
use vox_mcp_registry::{Caller, ProfileSet, Role};
use vox_tools_harness::Harness;

/// The installed server, or `None` (a skip, but a failure under CI).
fn everything() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/upstream");
    let bin = root.join("node_modules/.bin/mcp-server-everything");
    if bin.exists() {
        return Some(bin.canonicalize().unwrap());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is missing: run `npm ci --prefix tests/upstream`",
        bin.display()
    );
    eprintln!(
        "skipped: {} is missing (npm ci --prefix tests/upstream)",
        bin.display()
    );
    None
}

fn servers_toml(bin: &std::path::Path) -> String {
    format!(
        r#"[servers.every]
command = {bin:?}
args = ["stdio"]
call_timeout_secs = 20
[servers.every.tools.echo]
exposure = "public"
side_effect = "read_only"
read_role = true
[servers.every.tools.get-sum]
exposure = "public"
side_effect = "read_only"
"#
    )
}

fn boot(bin: &std::path::Path) -> Harness {
    let toml = servers_toml(bin);
    Harness::boot_in(move |root| {
        std::fs::create_dir_all(root.join(".vox")).unwrap();
        std::fs::write(root.join(".vox/servers.toml"), toml).unwrap();
    })
}

/// Waits until server `id` is ready (it starts at boot, in the background).
async fn ready(h: &Harness, id: &str) -> Value {
    for _ in 0..200 {
        let s = h.ok("vox_upstream_status", json!({"server": id})).await;
        if s["servers"][0]["status"] == "ready" {
            return s["servers"][0].clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "{id} never became ready: {}",
        h.ok("vox_upstream_status", json!({})).await
    );
}

fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_server_is_served_under_vox_names_and_the_one_decision() {
    let Some(bin) = everything() else { return };
    let h = boot(&bin);
    let status = ready(&h, "every").await;
    assert!(status["tools"].as_array().unwrap().len() >= 10, "{status}");

    // Tools the server registers right after `initialize` (for a client that can sample),
    // announced with list_changed, are first seen too, not withheld as added.
    let sampling = "every__trigger-sampling-request".to_owned();
    let mut listed = h.orch().list(&h.operator("s"));
    for _ in 0..100 {
        if names(&listed).contains(&sampling) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        listed = h.orch().list(&h.operator("s"));
    }
    assert!(names(&listed).contains(&sampling), "{:?}", names(&listed));
    let echo = listed
        .iter()
        .find(|t| t["name"] == "every__echo")
        .expect("every__echo listed");
    assert_eq!(echo["_meta"]["vox_source"], "upstream");
    assert_eq!(echo["_meta"]["vox_server"], "every");
    assert_eq!(
        echo["inputSchema"]["properties"]["message"]["type"],
        "string"
    );
    assert!(names(&listed).contains(&"every__get-env".to_owned()));

    let out = h.ok("every__echo", json!({"message": "hello"})).await;
    assert!(out.to_string().contains("Echo: hello"), "{out}");
    let sum = h.ok("every__get-sum", json!({"a": 2, "b": 3})).await;
    assert!(sum.to_string().contains('5'), "{sum}");

    // The read role off loopback: only the tool its config made public and read-role eligible.
    let read = Arc::new(CallScope::new(
        ProfileSet::dev().public_only(),
        Caller {
            loopback: false,
            role: Role::Read,
        },
        "reader",
        "r",
    ));
    let seen = names(&h.orch().list(&read));
    let upstream: Vec<&String> = seen.iter().filter(|n| n.starts_with("every__")).collect();
    assert_eq!(upstream, ["every__echo"], "{seen:?}");
    for tool in ["every__get-env", "every__get-sum", "every__echo"] {
        let allowed = !matches!(
            h.call_in(&read, tool, json!({"message": "x", "a": 1, "b": 2}))
                .await,
            ToolOutcome::Denied(_)
        );
        assert_eq!(
            allowed,
            seen.contains(&tool.to_owned()),
            "{tool}: list and call disagree"
        );
    }
    // A standard profile serves no upstream tool.
    let knowledge = Arc::new(CallScope::new(
        ProfileSet::parse("knowledge").unwrap(),
        Caller::LOCAL,
        "k",
        "k",
    ));
    assert!(
        !names(&h.orch().list(&knowledge))
            .iter()
            .any(|n| n.contains("__"))
    );
    let (code, _) = h
        .err_in(&knowledge, "every__echo", json!({"message": "x"}))
        .await;
    assert_eq!(code, "tool_not_in_profile");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_relayed_and_a_cancelled_call_is_cancelled_on_the_server() {
    let Some(bin) = everything() else { return };
    let h = boot(&bin);
    ready(&h, "every").await;
    let (out, rec) = h
        .call_recorded(
            &h.operator("s"),
            "every__trigger-long-running-operation",
            json!({"duration": 1, "steps": 3}),
        )
        .await;
    assert!(matches!(out, ToolOutcome::Content(_)), "{out:?}");
    let progress = rec.progress.lock().unwrap().len();
    assert!(progress >= 2, "progress relayed: {progress}");

    let cancel = Cancel::new();
    let run = CallRun {
        cancel: cancel.clone(),
        ..CallRun::default()
    };
    let scope = h.operator("s");
    let started = std::time::Instant::now();
    let call = h.orch().call(
        &scope,
        "every__trigger-long-running-operation",
        json!({"duration": 30, "steps": 30}),
        run,
    );
    let canceller = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    };
    let (out, ()) = tokio::join!(call, canceller);
    let ToolOutcome::Failed(e) = out else {
        panic!("{out:?}")
    };
    assert_eq!(e.code(), "cancelled");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The server is still there for the next call.
    let again = h.ok("every__echo", json!({"message": "after"})).await;
    assert!(again.to_string().contains("after"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_fails_its_call_clearly_and_the_next_call_works() {
    let Some(bin) = everything() else { return };
    let h = boot(&bin);
    ready(&h, "every").await;
    let pgid = server_pgid(&bin);
    let scope = h.operator("s");
    let call = h.call_in(
        &scope,
        "every__trigger-long-running-operation",
        json!({"duration": 10, "steps": 10}),
    );
    let killer = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        // SAFETY: kill(2) of the server's process group, which this test's daemon started.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    };
    let (out, ()) = tokio::join!(call, killer);
    let ToolOutcome::Failed(e) = out else {
        panic!("{out:?}")
    };
    assert_eq!(e.code(), "unavailable", "{e}");
    assert!(e.message().contains("went away"), "{e}");
    let mut last = None;
    for _ in 0..50 {
        match h.call("every__echo", json!({"message": "back"})).await {
            ToolOutcome::Content(c) => {
                assert!(Value::Array(c).to_string().contains("back"));
                let s = h
                    .ok("vox_upstream_status", json!({"server": "every"}))
                    .await;
                assert!(s["servers"][0]["restarts"].as_u64().unwrap() >= 1, "{s}");
                return;
            }
            other => last = Some(other),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the server did not come back: {last:?}");
}

/// The process group of the one running `mcp-server-everything` started for this test's
/// workspace (its leader runs `bin`).
fn server_pgid(bin: &std::path::Path) -> i32 {
    let me = std::process::id() as i32;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd);
        let ours = cmd.contains(&*bin.to_string_lossy()) || cmd.contains("server-everything");
        if ours && parent_of(pid) == Some(me) {
            return pid;
        }
    }
    panic!("no server-everything child of this test");
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_and_prompts_are_federated_under_namespaced_uris_and_names() {
    let Some(bin) = everything() else { return };
    let h = boot(&bin);
    ready(&h, "every").await;
    let scope = h.operator("s");
    let mut resources = h.orch().resources(&scope);
    for _ in 0..50 {
        if !resources.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        resources = h.orch().resources(&scope);
    }
    let doc = resources
        .iter()
        .find(|r| r["uri"] == "upstream://every/demo://resource/static/document/architecture.md")
        .unwrap_or_else(|| panic!("{resources:?}"));
    assert_eq!(doc["_meta"]["vox_server"], "every");
    let (orch, s2) = (h.orch().clone(), scope.clone());
    let body = tokio::task::spawn_blocking(move || {
        orch.read_resource(
            &s2,
            "upstream://every/demo://resource/static/document/architecture.md",
        )
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(body.mime_type, "text/markdown");
    assert!(body.text.unwrap().len() > 100);

    let prompts = h.orch().prompts(&scope);
    assert!(
        prompts.iter().any(|p| p["name"] == "every__args-prompt"),
        "{prompts:?}"
    );
    let (orch, s2) = (h.orch().clone(), scope.clone());
    let got = tokio::task::spawn_blocking(move || {
        orch.get_prompt(&s2, "every__args-prompt", &json!({"city": "Lyon"}))
    })
    .await
    .unwrap()
    .unwrap();
    assert!(got.to_string().contains("Lyon"), "{got}");

    // Off the operator's surface (a read token, a model's public surface, a standard
    // profile): none of them.
    let read = Arc::new(CallScope::new(
        ProfileSet::dev(),
        Caller {
            loopback: true,
            role: Role::Read,
        },
        "reader",
        "r",
    ));
    assert!(
        h.orch()
            .resources(&read)
            .iter()
            .all(|r| !r["uri"].as_str().unwrap().starts_with("upstream://"))
    );
    let public = Arc::new(scope.for_model());
    assert!(
        h.orch()
            .prompts(&public)
            .iter()
            .all(|p| !p["name"].as_str().unwrap().contains("__"))
    );
    let (orch, p2) = (h.orch().clone(), public.clone());
    let refused = tokio::task::spawn_blocking(move || {
        orch.read_resource(
            &p2,
            "upstream://every/demo://resource/static/document/architecture.md",
        )
    })
    .await
    .unwrap();
    assert_eq!(refused.unwrap_err().code(), "not_found");
}

/// `server-everything` in its Streamable HTTP mode on a free loopback port; killed on drop.
struct HttpServer {
    child: std::process::Child,
    url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_server(bin: &std::path::Path) -> HttpServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = std::process::Command::new(bin)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    HttpServer {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_server_is_served_like_a_stdio_one() {
    let Some(bin) = everything() else { return };
    let server = http_server(&bin);
    let toml = format!(
        "[servers.web]\nurl = {:?}\nheaders_env = {{ \"X-Vox-Home\" = \"HOME\" }}\n[servers.nokey]\nurl = {:?}\nbearer_token_env = \"VOX_TEST_UNSET_TOKEN\"\n",
        server.url, server.url
    );
    let h = Harness::boot_in(move |root| {
        std::fs::create_dir_all(root.join(".vox")).unwrap();
        std::fs::write(root.join(".vox/servers.toml"), toml).unwrap();
    });
    let status = ready(&h, "web").await;
    assert_eq!(status["transport"], "http");
    let out = h.ok("web__echo", json!({"message": "over http"})).await;
    assert!(out.to_string().contains("Echo: over http"), "{out}");
    let (out, rec) = h
        .call_recorded(
            &h.operator("s"),
            "web__trigger-long-running-operation",
            json!({"duration": 1, "steps": 2}),
        )
        .await;
    assert!(matches!(out, ToolOutcome::Content(_)), "{out:?}");
    assert!(
        !rec.progress.lock().unwrap().is_empty(),
        "progress over HTTP"
    );
    // A credential variable that is not set: the server fails to start, saying which.
    let nokey = h
        .ok("vox_upstream_status", json!({"server": "nokey"}))
        .await;
    let s = &nokey["servers"][0];
    assert_ne!(s["status"], "ready", "{s}");
    assert!(
        s["error"]
            .as_str()
            .unwrap_or("")
            .contains("VOX_TEST_UNSET_TOKEN"),
        "{s}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_while_idle_is_started_again_without_waiting_for_a_call() {
    let Some(bin) = everything() else { return };
    let h = boot(&bin);
    ready(&h, "every").await;
    let pgid = server_pgid(&bin);
    // SAFETY: kill(2) of the server's process group, which this test's daemon started.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    for _ in 0..150 {
        let s = h
            .ok("vox_upstream_status", json!({"server": "every"}))
            .await;
        let s = &s["servers"][0];
        if s["status"] == "ready" && s["restarts"].as_u64() >= Some(1) {
            assert_ne!(server_pgid(&bin), pgid, "a new process");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "not started again: {}",
        h.ok("vox_upstream_status", json!({})).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_use_server_starts_at_its_first_listing_not_at_boot() {
    let Some(bin) = everything() else { return };
    let toml =
        format!("[servers.lazy]\ncommand = {bin:?}\nargs = [\"stdio\"]\nstart = \"on_use\"\n");
    let h = Harness::boot_in(move |root| {
        std::fs::create_dir_all(root.join(".vox")).unwrap();
        std::fs::write(root.join(".vox/servers.toml"), toml).unwrap();
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let s = h.ok("vox_upstream_status", json!({"server": "lazy"})).await;
    assert_eq!(s["servers"][0]["status"], "stopped", "{s}");
    let _ = h.orch().list(&h.operator("s"));
    ready(&h, "lazy").await;
    assert!(names(&h.orch().list(&h.operator("s"))).contains(&"lazy__echo".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_removed_from_servers_toml_is_stopped_and_one_added_is_started() {
    let Some(bin) = everything() else { return };
    let h = boot(&bin);
    ready(&h, "every").await;
    let old = server_pgid(&bin);
    // The file now declares another server instead.
    let toml = format!("[servers.other]\ncommand = {bin:?}\nargs = [\"stdio\"]\n");
    std::fs::write(h.root().join(".vox/servers.toml"), toml).unwrap();
    let mut found = false;
    for _ in 0..200 {
        let s = h.ok("vox_upstream_status", json!({})).await;
        if s["servers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["id"] == "other" && x["status"] == "ready")
        {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(found, "other never became ready");
    let names = names(&h.orch().list(&h.operator("s")));
    assert!(names.contains(&"other__echo".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("every__")), "{names:?}");
    let (code, _) = h.err("every__echo", json!({"message": "x"})).await;
    assert_eq!(code, "unknown_tool");
    let s = h.ok("vox_upstream_status", json!({})).await;
    let ids: Vec<&str> = s["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["id"].as_str())
        .collect();
    assert_eq!(ids, ["other"]);
    // The retired server's process is gone.
    for _ in 0..50 {
        if !std::path::Path::new(&format!("/proc/{old}")).exists()
            || std::fs::read_to_string(format!("/proc/{old}/stat")).is_ok_and(|t| t.contains(") Z"))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the retired server {old} is still running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_tool_named_like_an_upstream_tool_is_shadowed_not_listed_twice() {
    let Some(bin) = everything() else { return };
    let toml = servers_toml(&bin);
    let h = Harness::boot_in(move |root| {
        std::fs::create_dir_all(root.join(".vox")).unwrap();
        std::fs::write(root.join(".vox/servers.toml"), toml).unwrap();
        std::fs::create_dir_all(root.join("tools")).unwrap();
        std::fs::write(
            root.join("tools/clash.vox"),
            "@tool \"Not the server's echo\"\nfn every__echo(message: str) to str {\n    \"workspace\"\n}\n",
        )
        .unwrap();
    });
    ready(&h, "every").await;
    let report = h.ok("vox_workspace_mcp_refresh", json!({})).await;
    assert_eq!(
        report["tool_count"], 1,
        "the workspace has its tool: {report}"
    );
    let listed = names(&h.orch().list(&h.operator("s")));
    assert_eq!(
        listed.iter().filter(|n| *n == "every__echo").count(),
        1,
        "{listed:?}"
    );
    let out = h.ok("every__echo", json!({"message": "which"})).await;
    assert!(
        out.to_string().contains("Echo: which"),
        "the server's tool runs: {out}"
    );
}
