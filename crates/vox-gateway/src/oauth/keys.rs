//! The authorization server as this resource server sees it: its metadata (RFC 8414, or
//! OpenID discovery) and its signing keys (JWKS), fetched over bounded HTTP and cached.
//!
//! Keys are refreshed when the cached set is older than [`KEYS_TTL`], or at once when a token
//! names a key id the set does not have (the server rotated its keys), but never more often
//! than the issuer's `min_refresh`: a stream of tokens with made-up key ids cannot make vox
//! hammer the authorization server. When a refresh fails the last set keeps serving.

use jsonwebtoken::jwk::{Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How long a fetched key set is used before it is fetched again.
pub(crate) const KEYS_TTL: Duration = Duration::from_secs(600);
/// Largest metadata, JWKS or introspection answer read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Most keys taken from one JWKS.
const MAX_KEYS: usize = 64;
/// How long one request to the authorization server may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Bounded JSON over HTTP to the authorization server: no redirects followed, a timeout, and
/// a cap on the answer's size.
pub(crate) struct Http {
    client: reqwest::Client,
}

impl Http {
    pub(crate) fn new() -> Result<Self, String> {
        // reqwest is built without a default TLS provider (as rmcp's client is); ring is the
        // one the workspace compiles. Installing twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("vox/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        Ok(Http { client })
    }

    /// GETs `url` and parses a JSON object.
    pub(crate) async fn get_json(&self, url: &str) -> Result<Value, String> {
        let resp = self
            .client
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("{url}: {}", with_causes(&e)))?;
        read_json(url, resp).await.map_err(|f| f.message)
    }

    /// POSTs a form to `url` with HTTP Basic client authentication (RFC 6749 §2.3.1) and
    /// parses a JSON object.
    pub(crate) async fn post_form(
        &self,
        url: &str,
        client: (&str, &str),
        form: &[(&str, &str)],
    ) -> Result<Value, FetchError> {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        // RFC 6749 §2.3.1: the id and secret are form-encoded before they are joined.
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let resp = self
            .client
            .post(url)
            .basic_auth(enc(client.0), Some(enc(client.1)))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| FetchError {
                status: None,
                message: format!("{url}: {}", with_causes(&e)),
            })?;
        read_json(url, resp).await
    }
}

/// An error and its causes ("error sending request: connection refused"), since reqwest's own
/// message leaves out why.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// A request to the authorization server that failed: its HTTP status when it answered.
#[derive(Debug)]
pub(crate) struct FetchError {
    pub(crate) status: Option<u16>,
    pub(crate) message: String,
}

async fn read_json(url: &str, mut resp: reqwest::Response) -> Result<Value, FetchError> {
    let status = resp.status();
    let fail = |message: String| FetchError {
        status: Some(status.as_u16()),
        message,
    };
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| fail(format!("{url}: {e}")))?
    {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(fail(format!(
                "{url}: answer over {MAX_DOCUMENT_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        return Err(fail(format!("{url}: HTTP {status}")));
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(v) if v.is_object() => Ok(v),
        Ok(_) => Err(fail(format!("{url}: answer is not a JSON object"))),
        Err(e) => Err(fail(format!("{url}: answer is not JSON: {e}"))),
    }
}

/// What vox uses of the authorization server's metadata.
#[derive(Debug, Clone)]
pub(crate) struct ServerMeta {
    pub(crate) jwks_uri: String,
    pub(crate) introspection_endpoint: Option<String>,
}

/// A verification key and the one algorithm it may verify, when the JWKS says.
pub(crate) struct SigningKey {
    pub(crate) key: DecodingKey,
    pub(crate) alg: Option<Algorithm>,
}

struct KeySet {
    by_kid: HashMap<String, Arc<SigningKey>>,
    unnamed: Vec<Arc<SigningKey>>,
    fetched: Instant,
}

/// Why no key verifies a token.
#[derive(Debug)]
pub(crate) enum KeyError {
    /// The server's key set has no such key: the token was not signed by it.
    Unknown(String),
    /// No key set could be fetched yet.
    Unreachable(String),
}

/// One authorization server: its metadata and its cached key set.
pub(crate) struct Issuer {
    issuer: String,
    http: Http,
    min_refresh: Duration,
    meta: tokio::sync::OnceCell<ServerMeta>,
    keys: RwLock<Option<Arc<KeySet>>>,
    /// One refresh at a time; the others wait for its result.
    refresh: tokio::sync::Mutex<()>,
    /// When a refresh was last tried, and why it failed.
    last_attempt: Mutex<Option<(Instant, Option<String>)>>,
}

impl Issuer {
    pub(crate) fn new(issuer: String, min_refresh: Duration) -> Result<Self, String> {
        Ok(Issuer {
            issuer,
            http: Http::new()?,
            min_refresh,
            meta: tokio::sync::OnceCell::new(),
            keys: RwLock::new(None),
            refresh: tokio::sync::Mutex::new(()),
            last_attempt: Mutex::new(None),
        })
    }

    pub(crate) fn http(&self) -> &Http {
        &self.http
    }

    /// The server's metadata, discovered once.
    pub(crate) async fn meta(&self) -> Result<&ServerMeta, String> {
        self.meta.get_or_try_init(|| self.discover()).await
    }

    /// Why tokens cannot be checked now (no key set was ever fetched), if they cannot.
    pub(crate) fn status(&self) -> Option<String> {
        if self.current().is_some() {
            return None;
        }
        let attempt = self.last_attempt.lock().unwrap_or_else(|p| p.into_inner());
        Some(match &*attempt {
            Some((_, Some(why))) => why.clone(),
            _ => "the authorization server's keys are not fetched yet".to_owned(),
        })
    }

    /// Fetches the metadata and key set now (at start, so a wrong issuer is said at once).
    pub(crate) async fn refresh(&self) -> Result<usize, String> {
        let _one = self.refresh.lock().await;
        self.fetch_keys().await
    }

    /// The key that verifies a token with this `kid` (or, without one, the only key for
    /// `alg`'s family).
    pub(crate) async fn key(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<Arc<SigningKey>, KeyError> {
        let pick = |set: &KeySet| match kid {
            Some(kid) => set.by_kid.get(kid).cloned(),
            None => {
                let mut fits = set
                    .by_kid
                    .values()
                    .chain(&set.unnamed)
                    .filter(|k| k.alg.map_or(k.key.family() == alg.family(), |a| a == alg));
                match (fits.next(), fits.next()) {
                    (Some(k), None) => Some(k.clone()),
                    _ => None,
                }
            }
        };
        if let Some(set) = self.current()
            && set.fetched.elapsed() < KEYS_TTL
            && let Some(k) = pick(&set)
        {
            return Ok(k);
        }
        {
            let _one = self.refresh.lock().await;
            let due = {
                let attempt = self.last_attempt.lock().unwrap_or_else(|p| p.into_inner());
                attempt
                    .as_ref()
                    .is_none_or(|(at, _)| at.elapsed() >= self.min_refresh)
            };
            if due && let Err(e) = self.fetch_keys().await {
                tracing::warn!("OAuth: cannot refresh {}'s keys: {e}", self.issuer);
            }
        }
        let Some(set) = self.current() else {
            return Err(KeyError::Unreachable(self.status().unwrap_or_default()));
        };
        pick(&set).ok_or_else(|| {
            KeyError::Unknown(match kid {
                Some(kid) => format!("the issuer has no key `{kid}`"),
                None => "the token names no key (`kid`) and the issuer has several".to_owned(),
            })
        })
    }

    fn current(&self) -> Option<Arc<KeySet>> {
        self.keys.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Fetches the key set (the caller holds `refresh`), records the attempt.
    async fn fetch_keys(&self) -> Result<usize, String> {
        let result = async {
            let meta = self.meta().await?;
            let doc = self.http.get_json(&meta.jwks_uri).await?;
            parse_jwks(&doc)
        }
        .await;
        let failure = result.as_ref().err().cloned();
        *self.last_attempt.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((Instant::now(), failure));
        let set = result?;
        let n = set.by_kid.len() + set.unnamed.len();
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(set));
        Ok(n)
    }

    /// RFC 8414 metadata, else OpenID discovery; the document must name this issuer exactly
    /// (a mix-up defence: RFC 8414 §3.3).
    async fn discover(&self) -> Result<ServerMeta, String> {
        let mut errors = Vec::new();
        for url in discovery_urls(&self.issuer) {
            let doc = match self.http.get_json(&url).await {
                Ok(doc) => doc,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            if doc["issuer"].as_str() != Some(self.issuer.as_str()) {
                return Err(format!(
                    "{url} names issuer {} instead of {}",
                    doc["issuer"], self.issuer
                ));
            }
            let endpoint = |field: &str| -> Result<Option<String>, String> {
                match doc.get(field) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(u)) => super::check_url(u)
                        .map(|_| Some(u.clone()))
                        .map_err(|e| format!("{url}: {field}: {e}")),
                    Some(_) => Err(format!("{url}: {field} is not a string")),
                }
            };
            let jwks_uri = endpoint("jwks_uri")?.ok_or_else(|| format!("{url}: no jwks_uri"))?;
            return Ok(ServerMeta {
                jwks_uri,
                introspection_endpoint: endpoint("introspection_endpoint")?,
            });
        }
        Err(format!(
            "no authorization server metadata for {}: {}",
            self.issuer,
            errors.join("; ")
        ))
    }
}

/// Where an issuer's metadata may be (RFC 8414 §3.1, then OpenID Connect Discovery 1.0 §4,
/// with its path-inserted form for an issuer with a path).
fn discovery_urls(issuer: &str) -> Vec<String> {
    let Ok(url) = url::Url::parse(issuer) else {
        return Vec::new();
    };
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let mut urls = vec![format!(
        "{origin}/.well-known/oauth-authorization-server{path}"
    )];
    if !path.is_empty() {
        urls.push(format!("{origin}/.well-known/openid-configuration{path}"));
    }
    urls.push(format!("{origin}{path}/.well-known/openid-configuration"));
    urls
}

/// The signing keys of a JWKS document: keys for encryption, of unknown types or with
/// malformed parameters are left out (one odd key does not take the others with it).
fn parse_jwks(doc: &Value) -> Result<KeySet, String> {
    let Some(keys) = doc["keys"].as_array() else {
        return Err("the JWKS has no `keys` array".to_owned());
    };
    let mut set = KeySet {
        by_kid: HashMap::new(),
        unnamed: Vec::new(),
        fetched: Instant::now(),
    };
    for raw in keys.iter().take(MAX_KEYS) {
        let Ok(jwk) = serde_json::from_value::<Jwk>(raw.clone()) else {
            continue;
        };
        if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
            continue;
        }
        let alg = match jwk.common.key_algorithm {
            None => None,
            Some(KeyAlgorithm::UNKNOWN_ALGORITHM) => continue,
            Some(a) => match Algorithm::try_from(a) {
                Ok(a) => Some(a),
                Err(_) => continue,
            },
        };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        // A shared-secret key in a public key set would let anyone who read it sign.
        if key.family() == jsonwebtoken::AlgorithmFamily::Hmac {
            continue;
        }
        let key = Arc::new(SigningKey { key, alg });
        match jwk.common.key_id {
            Some(kid) => {
                set.by_kid.insert(kid, key);
            }
            None => set.unnamed.push(key),
        }
    }
    if set.by_kid.is_empty() && set.unnamed.is_empty() {
        return Err("the JWKS has no usable signing key".to_owned());
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn discovery_urls_follow_rfc_8414_then_openid() {
        assert_eq!(
            discovery_urls("http://127.0.0.1:9/"),
            [
                "http://127.0.0.1:9/.well-known/oauth-authorization-server",
                "http://127.0.0.1:9/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            discovery_urls("https://auth.example/realms/x"),
            [
                "https://auth.example/.well-known/oauth-authorization-server/realms/x",
                "https://auth.example/.well-known/openid-configuration/realms/x",
                "https://auth.example/realms/x/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn a_jwks_keeps_only_usable_signing_keys() {
        let a: Value =
            serde_json::from_str(include_str!("../../tests/fixtures/oauth/rsa_a.jwk.json"))
                .unwrap();
        let mut enc = a.clone();
        enc["use"] = json!("enc");
        enc["kid"] = json!("enc");
        let doc = json!({"keys": [
            a,
            enc,
            {"kty": "oct", "kid": "h", "k": "c2VjcmV0"},
            {"kty": "RSA", "kid": "broken", "n": "!!", "e": "AQAB"},
            {"kty": "weird", "kid": "w"},
        ]});
        let set = parse_jwks(&doc).unwrap();
        assert_eq!(set.by_kid.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(set.by_kid["a"].alg, Some(Algorithm::RS256));
        assert!(parse_jwks(&json!({"keys": []})).is_err());
        assert!(parse_jwks(&json!({"nokeys": 1})).is_err());
    }
}
