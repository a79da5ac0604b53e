//! The resource server against an authorization server on a real loopback socket: discovery,
//! JWKS (rotated by the test), introspection; and tokens minted with the test keys in
//! `tests/fixtures/oauth/`, each wrong in one way.

use super::*;
use axum::extract::State;
use axum::routing::{get, post};
use jsonwebtoken::{EncodingKey, Header};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const RSA_A: &[u8] = include_bytes!("../../tests/fixtures/oauth/rsa_a.der");
const RSA_B: &[u8] = include_bytes!("../../tests/fixtures/oauth/rsa_b.der");
const EC_C: &[u8] = include_bytes!("../../tests/fixtures/oauth/ec_c.der");
const RSA_A_PUB_PEM: &[u8] = include_bytes!("../../tests/fixtures/oauth/rsa_a.pub.pem");
const RESOURCE: &str = "http://127.0.0.1:1/mcp";

fn jwk(name: &str) -> Value {
    let text = match name {
        "a" => include_str!("../../tests/fixtures/oauth/rsa_a.jwk.json"),
        "b" => include_str!("../../tests/fixtures/oauth/rsa_b.jwk.json"),
        _ => include_str!("../../tests/fixtures/oauth/ec_c.jwk.json"),
    };
    serde_json::from_str(text).unwrap()
}

/// The authorization server's state the test changes.
#[derive(Default)]
struct As {
    base: String,
    jwks: Value,
    jwks_fetches: usize,
}

type Shared = Arc<Mutex<As>>;

async fn discovery(State(s): State<Shared>) -> axum::Json<Value> {
    let base = s.lock().unwrap().base.clone();
    axum::Json(json!({
        "issuer": base,
        "jwks_uri": format!("{base}/jwks"),
        "introspection_endpoint": format!("{base}/introspect"),
    }))
}

async fn jwks(State(s): State<Shared>) -> axum::Json<Value> {
    let mut s = s.lock().unwrap();
    s.jwks_fetches += 1;
    axum::Json(s.jwks.clone())
}

/// Introspection answering for `opaque-good` only, to the client `vox-rs:secret`.
async fn introspect(headers: axum::http::HeaderMap, body: String) -> axum::Json<Value> {
    // base64("vox-rs:secret")
    let authorized = headers
        .get("authorization")
        .is_some_and(|v| v == "Basic dm94LXJzOnNlY3JldA==");
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let good = authorized && form.get("token").map(String::as_str) == Some("opaque-good");
    axum::Json(if good {
        json!({"active": true, "aud": RESOURCE, "exp": now() + 300, "sub": "svc", "client_id": "vox-opaque", "scope": "vox:read"})
    } else {
        json!({"active": false})
    })
}

/// Starts the authorization server with key `a` published; answers its state and issuer.
async fn authorization_server() -> (Shared, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state: Shared = Arc::new(Mutex::new(As {
        base: base.clone(),
        jwks: json!({"keys": [jwk("a"), jwk("c")]}),
        jwks_fetches: 0,
    }));
    let app = axum::Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/jwks", get(jwks))
        .route("/introspect", post(introspect))
        .with_state(state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (state, base)
}

fn settings(issuer: &str) -> OAuthSettings {
    let vars: HashMap<&str, String> = [
        ("VOX_MCP_HTTP_OAUTH_ISSUER", issuer.to_owned()),
        ("VOX_MCP_HTTP_OAUTH_RESOURCE", RESOURCE.to_owned()),
        (
            "VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_ID",
            "vox-rs".into(),
        ),
        (
            "VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_SECRET",
            "secret".into(),
        ),
    ]
    .into();
    OAuthSettings::from_lookup(&|k| vars.get(k).cloned(), [127, 0, 0, 1].into())
        .unwrap()
        .unwrap()
}

/// The resource server, with key refreshes allowed at once (rotation is tested here).
fn resource_server(issuer: &str) -> OAuth {
    let mut o = OAuth::new(settings(issuer), [127, 0, 0, 1].into(), 1).unwrap();
    o.issuer = keys::Issuer::new(issuer.to_owned(), Duration::ZERO).unwrap();
    o
}

fn claims(issuer: &str) -> Value {
    json!({"iss": issuer, "aud": RESOURCE, "sub": "ada", "client_id": "cli", "scope": "openid vox:write", "exp": now() + 300, "iat": now()})
}

fn sign(kid: &str, claims: &Value) -> String {
    let (alg, key) = match kid {
        "a" => (Algorithm::RS256, EncodingKey::from_rsa_der(RSA_A)),
        "b" => (Algorithm::RS256, EncodingKey::from_rsa_der(RSA_B)),
        _ => (Algorithm::ES256, EncodingKey::from_ec_der(EC_C)),
    };
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

fn b64(v: &Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

fn refused(r: Result<Grant, Refusal>) -> String {
    match r {
        Err(Refusal::Invalid(why)) => why,
        other => panic!("expected invalid_token, got {other:?}"),
    }
}

#[tokio::test]
async fn good_tokens_grant_roles_by_scope_and_narrow_by_profile() {
    let (_, issuer) = authorization_server().await;
    let o = resource_server(&issuer);
    assert_eq!(o.warm_up().await.unwrap(), 2);
    assert!(o.status().is_none());
    let g = o.verify(&sign("a", &claims(&issuer))).await.unwrap();
    assert_eq!((g.subject.as_str(), g.role), ("ada", Role::Write));
    assert_eq!(g.client_id.as_deref(), Some("cli"));
    assert!(g.narrowing.is_none());
    let mut c = claims(&issuer);
    c["scope"] = json!("vox:read vox:profile:knowledge");
    c["aud"] = json!(["other", RESOURCE]);
    let g = o.verify(&sign("c", &c)).await.unwrap();
    assert_eq!(g.role, Role::Read);
    assert_eq!(g.narrowing.unwrap().canonical(), "knowledge");
    c["scope"] = json!("openid");
    c["scp"] = json!(["vox:write"]);
    assert_eq!(o.verify(&sign("a", &c)).await.unwrap().role, Role::Write);
    c.as_object_mut().unwrap().remove("scp");
    assert!(matches!(
        o.verify(&sign("a", &c)).await,
        Err(Refusal::InsufficientScope(_))
    ));
    c["scope"] = json!("vox:write vox:profile:nope");
    assert!(matches!(
        o.verify(&sign("a", &c)).await,
        Err(Refusal::InsufficientScope(why)) if why.contains("nope")
    ));
    c["scope"] = json!("vox:write");
    c.as_object_mut().unwrap().remove("sub");
    assert_eq!(o.verify(&sign("a", &c)).await.unwrap().subject, "cli");
}

#[tokio::test]
async fn every_bad_token_is_refused_as_invalid() {
    let (_, issuer) = authorization_server().await;
    let o = resource_server(&issuer);
    let with = |k: &str, v: Value| {
        let mut c = claims(&issuer);
        c[k] = v;
        c
    };
    let without = |k: &str| {
        let mut c = claims(&issuer);
        c.as_object_mut().unwrap().remove(k);
        c
    };
    let cases = [
        ("expired", sign("a", &with("exp", json!(now() - 3600)))),
        (
            "not yet valid",
            sign("a", &with("nbf", json!(now() + 3600))),
        ),
        (
            "wrong audience",
            sign("a", &with("aud", json!("http://127.0.0.1:2/mcp"))),
        ),
        (
            "wrong issuer",
            sign("a", &with("iss", json!("http://evil.example"))),
        ),
        (
            "exp as a string",
            sign("a", &with("exp", json!("99999999999"))),
        ),
        (
            "nbf as a string",
            sign("a", &with("nbf", json!("99999999999"))),
        ),
        ("no exp", sign("a", &without("exp"))),
        ("no aud", sign("a", &without("aud"))),
        ("no iss", sign("a", &without("iss"))),
        ("unknown kid", sign("b", &claims(&issuer))),
    ];
    for (what, token) in cases {
        let why = refused(o.verify(&token).await);
        assert!(!why.is_empty(), "{what}");
    }
    let good = sign("a", &claims(&issuer));
    let parts: Vec<&str> = good.split('.').collect();
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        b64(&with("sub", json!("root"))),
        parts[2]
    );
    assert!(refused(o.verify(&tampered).await).contains("signature"));
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none"})),
        b64(&claims(&issuer))
    );
    refused(o.verify(&none).await);
    let none_sig = format!(
        "{}.{}.AA",
        b64(&json!({"alg": "none", "kid": "a"})),
        b64(&claims(&issuer))
    );
    refused(o.verify(&none_sig).await);
    // Algorithm confusion: HS256 keyed with the RSA public key.
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("a".into());
    let hs = jsonwebtoken::encode(
        &header,
        &claims(&issuer),
        &EncodingKey::from_secret(RSA_A_PUB_PEM).unwrap(),
    )
    .unwrap();
    assert!(refused(o.verify(&hs).await).contains("not accepted"));
    // RS256 claimed for the EC key.
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("c".into());
    let wrong_family =
        jsonwebtoken::encode(&header, &claims(&issuer), &EncodingKey::from_rsa_der(RSA_A)).unwrap();
    refused(o.verify(&wrong_family).await);
    for junk in ["garbage", "a.b.c", "", &"x".repeat(20_000)] {
        refused(o.verify(junk).await);
    }
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_and_a_made_up_kid_does_not_loop() {
    let (state, issuer) = authorization_server().await;
    let o = resource_server(&issuer);
    o.verify(&sign("a", &claims(&issuer))).await.unwrap();
    assert_eq!(state.lock().unwrap().jwks_fetches, 1);
    refused(o.verify(&sign("b", &claims(&issuer))).await);
    assert_eq!(state.lock().unwrap().jwks_fetches, 2);
    state.lock().unwrap().jwks = json!({"keys": [jwk("b")]});
    let g = o.verify(&sign("b", &claims(&issuer))).await.unwrap();
    assert_eq!(g.subject, "ada");
    assert_eq!(state.lock().unwrap().jwks_fetches, 3);
    // Cached: no fetch for a known key.
    o.verify(&sign("b", &claims(&issuer))).await.unwrap();
    assert_eq!(state.lock().unwrap().jwks_fetches, 3);
    // With the production minimum interval, made-up key ids cost no fetch each.
    let mut o = resource_server(&issuer);
    o.issuer = keys::Issuer::new(issuer.clone(), MIN_KEY_REFRESH).unwrap();
    o.warm_up().await.unwrap();
    let before = state.lock().unwrap().jwks_fetches;
    for _ in 0..5 {
        refused(o.verify(&sign("a", &claims(&issuer))).await);
    }
    assert_eq!(state.lock().unwrap().jwks_fetches, before);
}

#[tokio::test]
async fn opaque_tokens_are_introspected_and_an_unreachable_issuer_is_unavailable() {
    let (_, issuer) = authorization_server().await;
    let o = resource_server(&issuer);
    let g = o.verify("opaque-good").await.unwrap();
    assert_eq!((g.subject.as_str(), g.role), ("svc", Role::Read));
    assert!(refused(o.verify("opaque-bad").await).contains("not active"));
    // Port 9 (discard) on loopback: nothing listens.
    let gone = resource_server("http://127.0.0.1:9");
    assert!(gone.warm_up().await.is_err());
    assert!(gone.status().is_some());
    assert!(matches!(
        gone.verify(&sign("a", &claims("http://127.0.0.1:9"))).await,
        Err(Refusal::Unavailable(_))
    ));
}

#[test]
fn metadata_and_challenges_name_this_resource() {
    let o = OAuth::new(settings("https://auth.example"), [127, 0, 0, 1].into(), 1).unwrap();
    let m = o.metadata();
    assert_eq!(m["resource"], RESOURCE);
    assert_eq!(m["authorization_servers"], json!(["https://auth.example"]));
    assert_eq!(m["scopes_supported"], json!(["vox:read", "vox:write"]));
    assert_eq!(
        o.challenge(None),
        "Bearer resource_metadata=\"http://127.0.0.1:1/.well-known/oauth-protected-resource/mcp\", scope=\"vox:read vox:write\""
    );
    assert!(
        o.challenge(Some(("invalid_token", "bad \"quote\"\n")))
            .ends_with(", error=\"invalid_token\", error_description=\"bad quote\"")
    );
}

#[test]
fn settings_are_strict_and_name_the_variable() {
    let parse = |vars: &[(&str, &str)], host: [u8; 4]| {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        OAuthSettings::from_lookup(&|k| m.get(k).cloned(), host.into())
    };
    let iss = ("VOX_MCP_HTTP_OAUTH_ISSUER", "https://auth.example");
    let local = [127, 0, 0, 1];
    assert!(parse(&[], local).unwrap().is_none());
    assert!(parse(&[iss], local).unwrap().is_some());
    for (vars, var) in [
        (
            vec![("VOX_MCP_HTTP_OAUTH_RESOURCE", "https://x/mcp")],
            "VOX_MCP_HTTP_OAUTH_RESOURCE",
        ),
        (
            vec![("VOX_MCP_HTTP_OAUTH_ISSUER", "http://auth.example")],
            "VOX_MCP_HTTP_OAUTH_ISSUER",
        ),
        (
            vec![("VOX_MCP_HTTP_OAUTH_ISSUER", "nope")],
            "VOX_MCP_HTTP_OAUTH_ISSUER",
        ),
        (
            vec![iss, ("VOX_MCP_HTTP_OAUTH_ALGORITHMS", "HS256")],
            "VOX_MCP_HTTP_OAUTH_ALGORITHMS",
        ),
        (
            vec![iss, ("VOX_MCP_HTTP_OAUTH_ALGORITHMS", "none")],
            "VOX_MCP_HTTP_OAUTH_ALGORITHMS",
        ),
        (
            vec![iss, ("VOX_MCP_HTTP_OAUTH_LEEWAY_SECS", "9999")],
            "VOX_MCP_HTTP_OAUTH_LEEWAY_SECS",
        ),
        (
            vec![iss, ("VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_ID", "x")],
            "VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_ID",
        ),
        (
            vec![iss, ("VOX_MCP_HTTP_OAUTH_READ_SCOPE", "vox:write")],
            "VOX_MCP_HTTP_OAUTH_READ_SCOPE",
        ),
        (
            vec![iss, ("VOX_MCP_HTTP_OAUTH_WRITE_SCOPE", "a b")],
            "VOX_MCP_HTTP_OAUTH_WRITE_SCOPE",
        ),
        (
            vec![iss, ("VOX_MCP_HTTP_OAUTH_RESOURCE", "https://x/mcp#f")],
            "VOX_MCP_HTTP_OAUTH_RESOURCE",
        ),
    ] {
        let err = parse(&vars, local).unwrap_err().to_string();
        assert!(err.starts_with(var), "{vars:?}: {err}");
    }
    // A wildcard bind cannot guess the URL clients use.
    let err = parse(&[iss], [0, 0, 0, 0]).unwrap_err().to_string();
    assert!(err.contains("VOX_MCP_HTTP_OAUTH_RESOURCE"), "{err}");
    assert!(
        parse(
            &[
                iss,
                ("VOX_MCP_HTTP_OAUTH_RESOURCE", "https://vox.example/mcp")
            ],
            [0, 0, 0, 0]
        )
        .is_ok()
    );
    let s = parse(
        &[
            iss,
            ("VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_ID", "x"),
            ("VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_SECRET", "hunter2"),
        ],
        local,
    )
    .unwrap()
    .unwrap();
    assert!(!format!("{s:?}").contains("hunter2"));
}
