//! Opaque access tokens, asked about at the authorization server's introspection endpoint
//! (RFC 7662) with vox's own client credentials. An answer is cached for at most
//! [`MAX_CACHE`] (never past the token's `exp`), so a revoked token stops working within that
//! time; the cache holds digests of tokens, never tokens.

use super::keys::Issuer;
use super::{Refusal, TokenClaims};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest an introspection answer is reused.
pub(crate) const MAX_CACHE: Duration = Duration::from_secs(30);
/// Most answers cached at once; past it the cache starts again empty.
const MAX_ENTRIES: usize = 4096;

/// An answer kept: until when, and what it said (claims, or why the token is refused).
type Verdict = (Instant, Result<TokenClaims, String>);

/// vox's client at the introspection endpoint, and what it learned.
pub(crate) struct Introspector {
    client_id: String,
    client_secret: String,
    cache: Mutex<HashMap<[u8; 32], Verdict>>,
}

impl Introspector {
    pub(crate) fn new(client_id: String, client_secret: String) -> Self {
        Introspector {
            client_id,
            client_secret,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The claims of an active token issued for `resource`, or why it is refused.
    pub(crate) async fn check(
        &self,
        issuer: &Issuer,
        token: &str,
        resource: &str,
    ) -> Result<TokenClaims, Refusal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(hit) = self.cached(&digest) {
            return hit.map_err(Refusal::Invalid);
        }
        let meta = issuer.meta().await.map_err(Refusal::Unavailable)?;
        let Some(endpoint) = &meta.introspection_endpoint else {
            return Err(Refusal::Invalid(
                "the token is not a JWT and the issuer has no introspection endpoint".into(),
            ));
        };
        let answer = issuer
            .http()
            .post_form(
                endpoint,
                (&self.client_id, &self.client_secret),
                &[("token", token), ("token_type_hint", "access_token")],
            )
            .await
            .map_err(|e| match e.status {
                // The server refused to say anything about this token (RFC 7662 §2.3 leaves
                // 400 for a malformed request): the token is what is wrong.
                Some(400) => Refusal::Invalid(format!(
                    "the issuer cannot introspect the token: {}",
                    e.message
                )),
                _ => Refusal::Unavailable(e.message),
            })?;
        let verdict = judge(&answer, resource);
        let keep = match &verdict {
            Ok(c) => MAX_CACHE.min(Duration::from_secs(c.exp.saturating_sub(super::now()))),
            Err(_) => MAX_CACHE,
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_ENTRIES {
            cache.clear();
        }
        cache.insert(digest, (Instant::now() + keep, verdict.clone()));
        verdict.map_err(Refusal::Invalid)
    }

    fn cached(&self, digest: &[u8; 32]) -> Option<Result<TokenClaims, String>> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(digest)
            .filter(|(until, _)| Instant::now() < *until)
            .map(|(_, v)| v.clone())
    }
}

/// An introspection answer judged: active, unexpired, for this resource (`aud` is required:
/// a token for another service must not work here).
fn judge(answer: &Value, resource: &str) -> Result<TokenClaims, String> {
    if answer["active"] != Value::Bool(true) {
        return Err("the token is not active (expired, revoked or unknown)".into());
    }
    let audience_ok = match &answer["aud"] {
        Value::String(a) => a == resource,
        Value::Array(list) => list.iter().any(|a| a.as_str() == Some(resource)),
        _ => false,
    };
    if !audience_ok {
        return Err(format!("the token is not for this resource ({resource})"));
    }
    let Some(exp) = answer["exp"].as_u64() else {
        return Err("the introspection answer has no numeric `exp`".into());
    };
    if exp <= super::now() {
        return Err("the token has expired".into());
    }
    let text = |k: &str| answer.get(k).and_then(Value::as_str).map(str::to_owned);
    Ok(TokenClaims {
        subject: text("sub"),
        client_id: text("client_id"),
        scopes: text("scope")
            .map(|s| s.split_ascii_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        exp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_active_unexpired_tokens_for_this_resource_pass() {
        let r = "http://127.0.0.1:1/mcp";
        let exp = super::super::now() + 60;
        let ok = json!({"active": true, "aud": r, "exp": exp, "sub": "ada", "scope": "vox:read x"});
        let c = judge(&ok, r).unwrap();
        assert_eq!((c.subject.as_deref(), c.scopes.len()), (Some("ada"), 2));
        assert!(judge(&json!({"active": false}), r).is_err());
        assert!(judge(&json!({"active": "true", "aud": r, "exp": exp}), r).is_err());
        assert!(
            judge(
                &json!({"active": true, "aud": "http://other/mcp", "exp": exp}),
                r
            )
            .is_err()
        );
        assert!(judge(&json!({"active": true, "exp": exp}), r).is_err());
        assert!(judge(&json!({"active": true, "aud": [r], "exp": 5}), r).is_err());
        assert!(judge(&json!({"active": true, "aud": [r], "exp": "never"}), r).is_err());
        assert!(judge(&json!({"active": true, "aud": [r, "x"], "exp": exp}), r).is_ok());
    }
}
