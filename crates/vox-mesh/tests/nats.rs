//! Links on a real nats-server with JetStream: sealed messages between trusted nodes, refusal
//! of an untrusted one, durable delivery to a node that was away, redelivery after a failed
//! handler, heartbeats up and down, and credentials checked by the server.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use vox_mesh::link::{inbox_prefix, nats_permissions};
use vox_mesh::server::{NatsServer, available};
use vox_mesh::{Auth, Link, MeshConfig, NodeKey, Peer, Queue, Wire};

const AUTH: &str = "authorization { user: vox, password: s3cret }";

/// A nats-server storing under `dir`, or `None` (the test skipped) where none is installed
/// and this is not CI.
fn nats(dir: &std::path::Path, auth: &str) -> Option<NatsServer> {
    if !available() && std::env::var_os("CI").is_none() {
        eprintln!("skipped: no nats-server here (.ci/run installs it)");
        return None;
    }
    Some(NatsServer::start(dir, auth).unwrap())
}

fn key() -> Arc<NodeKey> {
    let seed = nkeys::KeyPair::new(nkeys::KeyPairType::Server)
        .seed()
        .unwrap();
    Arc::new(NodeKey::from_seed(&seed).unwrap())
}

fn config(url: &str, name: &str, trusts: &[&NodeKey]) -> MeshConfig {
    MeshConfig {
        url: url.into(),
        auth: Auth::UserPassword("vox".into(), "s3cret".into()),
        name: name.into(),
        heartbeat: Duration::from_millis(100),
        peers: trusts
            .iter()
            .map(|k| Peer {
                node: k.id().into(),
                name: None,
                profile: "mesh".into(),
            })
            .collect(),
    }
}

fn msg(id: &str, body: &str) -> Wire {
    Wire::A2a {
        id: id.into(),
        sender: "agent-a".into(),
        recipient: "agent-b".into(),
        thread: "t".into(),
        body: body.into(),
    }
}

type Got = Arc<Mutex<Vec<(String, Wire)>>>;

/// Consumes `link`'s inbox in the background into `got`; the handler fails once for a body
/// of "fail once".
fn consume(link: Arc<Link>, got: Got) -> tokio::task::JoinHandle<()> {
    let failed = Arc::new(Mutex::new(false));
    tokio::spawn(async move {
        let _ = link
            .consume(Queue::In, |o| {
                let got = got.clone();
                let failed = failed.clone();
                async move {
                    if let Wire::A2a { body, .. } = &o.wire
                        && body == "fail once"
                        && !std::mem::replace(&mut *failed.lock().unwrap(), true)
                    {
                        return Err("not now".into());
                    }
                    got.lock().unwrap().push((o.from, o.wire));
                    Ok(())
                }
            })
            .await;
    })
}

async fn wait_for(got: &Got, n: usize) -> Vec<(String, Wire)> {
    for _ in 0..200 {
        if got.lock().unwrap().len() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    got.lock().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_nodes_exchange_durably_and_strangers_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = nats(dir.path(), AUTH) else {
        return;
    };
    let (ka, kb, kc) = (key(), key(), key());
    let a = Link::connect(config(&server.url(), "a", &[&kb]), ka.clone())
        .await
        .unwrap();
    let b = Link::connect(config(&server.url(), "b", &[&ka]), kb.clone())
        .await
        .unwrap();
    // c trusts b, but b does not trust c.
    let c = Link::connect(config(&server.url(), "c", &[&kb]), kc.clone())
        .await
        .unwrap();

    let got: Got = Arc::default();
    let worker = consume(b.clone(), got.clone());
    a.send(kb.id(), Queue::In, &msg("a:1", "hello"), "a:1")
        .await
        .unwrap();
    c.send(kb.id(), Queue::In, &msg("c:1", "let me in"), "c:1")
        .await
        .unwrap();
    a.send(kb.id(), Queue::In, &msg("a:2", "fail once"), "a:2")
        .await
        .unwrap();
    // The same message id twice in the window is stored once.
    a.send(kb.id(), Queue::In, &msg("a:2", "fail once"), "a:2")
        .await
        .unwrap();
    let seen = wait_for(&got, 2).await;
    assert_eq!(
        seen,
        vec![
            (ka.id().to_owned(), msg("a:1", "hello")),
            (ka.id().to_owned(), msg("a:2", "fail once")),
        ]
    );
    let counters = b.counter_values();
    assert_eq!(counters.refused, 1, "{counters:?}");
    assert!(counters.redelivered >= 1, "{counters:?}");

    // b goes away; what a sends meanwhile waits in b's durable queue.
    worker.abort();
    let _ = worker.await;
    drop(b);
    for i in 3..6 {
        a.send(
            kb.id(),
            Queue::In,
            &msg(&format!("a:{i}"), "while away"),
            &format!("a:{i}"),
        )
        .await
        .unwrap();
    }
    let b = Link::connect(config(&server.url(), "b", &[&ka]), kb.clone())
        .await
        .unwrap();
    let got2: Got = Arc::default();
    let worker = consume(b.clone(), got2.clone());
    let seen = wait_for(&got2, 3).await;
    assert_eq!(seen.len(), 3, "{seen:?}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        got2.lock().unwrap().len(),
        3,
        "nothing acknowledged comes again"
    );
    assert_eq!(b.backlog(Queue::In).await.unwrap(), (0, 0));
    worker.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_stops_beating_is_marked_down() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = nats(dir.path(), AUTH) else {
        return;
    };
    let (ka, kb) = (key(), key());
    let a = Link::connect(config(&server.url(), "a", &[&kb]), ka.clone())
        .await
        .unwrap();
    let b = Link::connect(config(&server.url(), "b", &[&ka]), kb.clone())
        .await
        .unwrap();
    assert_eq!(a.peers()[0].status, "unseen");
    // An eavesdropper on the server records every beat.
    let spy = async_nats::ConnectOptions::with_user_and_password("vox".into(), "s3cret".into())
        .connect(server.url())
        .await
        .unwrap();
    let mut recorded = spy.subscribe("vox.mesh.heartbeat").await.unwrap();
    let beat = |name: &'static str| {
        move || Wire::Heartbeat {
            name: name.into(),
            workspace: format!("/w/{name}"),
            agents: vec![format!("{name}-1")],
            pending: 0,
        }
    };
    let ha = tokio::spawn(a.clone().heartbeats(beat("a")));
    let hb = tokio::spawn(b.clone().heartbeats(beat("b")));
    tokio::time::sleep(Duration::from_millis(400)).await;
    let p = &a.peers()[0];
    assert_eq!(
        (p.status, p.name.as_str(), p.agents.clone()),
        ("up", "b", vec!["b-1".to_string()])
    );
    hb.abort();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(a.peers()[0].status, "down");
    // Replaying one of b's recorded beats does not bring it back.
    let mut replay = None;
    while let Ok(Some(m)) = tokio::time::timeout(
        Duration::from_millis(50),
        futures_util::StreamExt::next(&mut recorded),
    )
    .await
    {
        if String::from_utf8_lossy(&m.payload).contains(kb.id()) {
            replay = Some(m.payload);
        }
    }
    spy.publish("vox.mesh.heartbeat", replay.expect("a beat of b"))
        .await
        .unwrap();
    spy.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(a.peers()[0].status, "down", "a replayed beat is stale");
    ha.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_checks_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = nats(dir.path(), AUTH) else {
        return;
    };
    let mut c = config(&server.url(), "x", &[]);
    c.auth = Auth::UserPassword("vox".into(), "wrong".into());
    let e = Link::connect(c, key()).await.err().unwrap();
    assert_eq!(e.code(), "mesh_unreachable", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mesh_outlives_a_restart_of_the_nats_server() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut server) = nats(dir.path(), AUTH) else {
        return;
    };
    let (ka, kb) = (key(), key());
    let a = Link::connect(config(&server.url(), "a", &[&kb]), ka.clone())
        .await
        .unwrap();
    let b = Link::connect(config(&server.url(), "b", &[&ka]), kb.clone())
        .await
        .unwrap();
    let got: Got = Arc::default();
    let worker = tokio::spawn({
        let (b, got) = (b.clone(), got.clone());
        async move {
            // As the daemon does: a consumer that ends is started again.
            loop {
                let _ = consume(b.clone(), got.clone()).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    a.send(kb.id(), Queue::In, &msg("a:1", "before"), "a:1")
        .await
        .unwrap();
    assert_eq!(wait_for(&got, 1).await.len(), 1);
    // kill -9 of the server; its JetStream store (the stream, the durable consumers) stays.
    server.restart().unwrap();
    let mut sent = false;
    for _ in 0..100 {
        if a.send(kb.id(), Queue::In, &msg("a:2", "after"), "a:2")
            .await
            .is_ok()
        {
            sent = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(sent, "the link reconnects and sends again");
    let seen = wait_for(&got, 2).await;
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1].1, msg("a:2", "after"));
    worker.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_may_authenticate_to_nats_with_an_nkey() {
    let dir = tempfile::tempdir().unwrap();
    let user = nkeys::KeyPair::new(nkeys::KeyPairType::User);
    let auth = format!(
        "authorization {{ users = [ {{ nkey: {} }} ] }}",
        user.public_key()
    );
    let Some(server) = nats(dir.path(), &auth) else {
        return;
    };
    let seed_file = dir.path().join("user.nk");
    std::fs::write(&seed_file, user.seed().unwrap()).unwrap();
    let mut c = config(&server.url(), "x", &[]);
    c.auth = Auth::NkeyFile(seed_file.display().to_string());
    Link::connect(c.clone(), key())
        .await
        .expect("the nkey is accepted");
    let stranger = dir.path().join("stranger.nk");
    std::fs::write(
        &stranger,
        nkeys::KeyPair::new(nkeys::KeyPairType::User)
            .seed()
            .unwrap(),
    )
    .unwrap();
    c.auth = Auth::NkeyFile(stranger.display().to_string());
    assert!(
        Link::connect(c, key()).await.is_err(),
        "an unknown nkey is refused"
    );
}

/// One NATS user per node (`user`, password `pw-<user>`), each with its node's permissions.
fn per_node_auth(nodes: &[(&str, &NodeKey)]) -> String {
    let users: Vec<String> = nodes
        .iter()
        .map(|(u, k)| {
            format!(
                "{{ user: {u}, password: pw-{u}\n{} }}",
                nats_permissions(k.id())
            )
        })
        .collect();
    format!("authorization {{ users: [\n{}\n] }}", users.join(",\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_node_logs_in_as_its_own_user_and_reads_only_its_own_queues() {
    let dir = tempfile::tempdir().unwrap();
    let (ka, kb, kc) = (key(), key(), key());
    let auth = per_node_auth(&[("a", &ka), ("b", &kb), ("c", &kc)]);
    let Some(server) = nats(dir.path(), &auth) else {
        return;
    };
    let login = |user: &str, trusts: &[&NodeKey]| {
        let mut c = config(&server.url(), user, trusts);
        c.auth = Auth::UserPassword(user.into(), format!("pw-{user}"));
        c
    };
    let a = Link::connect(login("a", &[&kb]), ka.clone()).await.unwrap();
    let b = Link::connect(login("b", &[&ka]), kb.clone()).await.unwrap();
    let got: Got = Arc::default();
    let worker = consume(b.clone(), got.clone());
    a.send(kb.id(), Queue::In, &msg("a:1", "hello"), "a:1")
        .await
        .unwrap();
    assert_eq!(
        wait_for(&got, 1).await,
        vec![(ka.id().to_owned(), msg("a:1", "hello"))]
    );
    // b answers on a's result queue, which a consumes.
    let result = Wire::Result {
        id: "a:c1".into(),
        ok: true,
        value: serde_json::json!({"done": true}),
    };
    b.send(ka.id(), Queue::Result, &result, "b:r1")
        .await
        .unwrap();
    let results: Got = Arc::default();
    let reader = tokio::spawn({
        let (a, results) = (a.clone(), results.clone());
        async move {
            let _ = a
                .consume(Queue::Result, |o| {
                    let results = results.clone();
                    async move {
                        results.lock().unwrap().push((o.from, o.wire));
                        Ok(())
                    }
                })
                .await;
        }
    });
    assert_eq!(
        wait_for(&results, 1).await,
        vec![(kb.id().to_owned(), result)]
    );
    assert_eq!(b.backlog(Queue::In).await.unwrap(), (0, 0));
    // Heartbeats go through too.
    let beats = tokio::spawn(b.clone().heartbeats(|| Wire::Heartbeat {
        name: "b".into(),
        workspace: "/b".into(),
        agents: vec![],
        pending: 0,
    }));
    let hears = tokio::spawn(a.clone().heartbeats(|| Wire::Heartbeat {
        name: "a".into(),
        workspace: "/a".into(),
        agents: vec![],
        pending: 0,
    }));
    let mut up = false;
    for _ in 0..100 {
        if a.peers()
            .iter()
            .any(|p| p.node == kb.id() && p.status == "up")
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "a hears b's heartbeat");

    // c logs in as itself: it may look up its own consumer, not pull from b's.
    worker.abort();
    tokio::time::sleep(Duration::from_millis(200)).await;
    a.send(kb.id(), Queue::In, &msg("a:2", "for b only"), "a:2")
        .await
        .unwrap();
    let c = async_nats::ConnectOptions::with_user_and_password("c".into(), "pw-c".into())
        .custom_inbox_prefix(inbox_prefix(kc.id()))
        .connect(server.url())
        .await
        .unwrap();
    let own = tokio::time::timeout(
        Duration::from_secs(3),
        c.request(
            format!("$JS.API.CONSUMER.INFO.VOX_MESH.in-{}", kc.id()),
            "".into(),
        ),
    )
    .await;
    assert!(
        matches!(own, Ok(Ok(_))),
        "c's own consumer answers: {own:?}"
    );
    for subject in [
        format!("$JS.API.CONSUMER.MSG.NEXT.VOX_MESH.in-{}", kb.id()),
        format!("$JS.API.CONSUMER.INFO.VOX_MESH.in-{}", kb.id()),
        format!(
            "$JS.API.CONSUMER.CREATE.VOX_MESH.in-{}.vox.mesh.{}.in",
            kc.id(),
            kb.id()
        ),
        "$JS.API.STREAM.MSG.GET.VOX_MESH".to_string(),
    ] {
        let r = tokio::time::timeout(
            Duration::from_secs(2),
            c.request(subject.clone(), "1".into()),
        )
        .await;
        assert!(!matches!(r, Ok(Ok(_))), "c is answered on {subject}: {r:?}");
    }
    // b's message is still there for b.
    let (pending, unacked) = b.backlog(Queue::In).await.unwrap();
    assert_eq!(pending + unacked, 1);
    reader.abort();
    beats.abort();
    hears.abort();
}
