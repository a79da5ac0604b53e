//! `vox serve` as an OAuth 2.1 resource server (MCP authorization, RFC 9728 metadata, RFC 8707
//! audiences), on when `VOX_MCP_HTTP_OAUTH_ISSUER` names the authorization server; static
//! tokens keep working beside it.
//!
//! An access token is a JWT checked against the issuer's keys ([`keys`]): the algorithm in the
//! allowlist (never `none` or a shared secret), the key the token names, `iss` the issuer,
//! `aud` this resource, `exp`/`nbf` within a bounded leeway, all of them present and of the
//! right type. With introspection credentials, a token that is not a JWT is asked about
//! instead ([`introspect`]). Its scopes give the role (`vox:write`, `vox:read`) and may narrow
//! the profile (`vox:profile:<id>`); its subject is the caller's name in the audit trail.

mod introspect;
mod keys;
#[cfg(test)]
mod tests;

use crate::config::ConfigError;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::str::FromStr;
use std::time::Duration;
use vox_mcp_registry::{ProfileSet, Role};

/// Longest access token read.
const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// Longest subject or client id taken as a caller's name.
const MAX_SUBJECT: usize = 200;
/// The prefix of scopes that narrow a token's profile (`vox:profile:knowledge`).
pub const PROFILE_SCOPE_PREFIX: &str = "vox:profile:";
/// How soon after a refresh the keys may be fetched again for an unknown key id.
const MIN_KEY_REFRESH: Duration = Duration::from_secs(10);

/// A secret that `Debug` does not print.
#[derive(Clone)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// `VOX_MCP_HTTP_OAUTH_*`: the resource server's settings.
#[derive(Debug, Clone)]
pub struct OAuthSettings {
    /// `VOX_MCP_HTTP_OAUTH_ISSUER`: the authorization server's issuer identifier (https, or
    /// http on a loopback host).
    pub issuer: String,
    /// `VOX_MCP_HTTP_OAUTH_RESOURCE`: this server's canonical URI, the audience tokens must
    /// name; default `http://<bound address>/mcp` (required on a wildcard bind).
    pub resource: Option<String>,
    /// `VOX_MCP_HTTP_OAUTH_READ_SCOPE` (default `vox:read`): the scope of the read role.
    pub read_scope: String,
    /// `VOX_MCP_HTTP_OAUTH_WRITE_SCOPE` (default `vox:write`): the scope of the write role.
    pub write_scope: String,
    /// `VOX_MCP_HTTP_OAUTH_ALGORITHMS`: the signature algorithms accepted (default every
    /// asymmetric one: RS*, PS*, ES256, ES384, EdDSA).
    pub algorithms: Vec<Algorithm>,
    /// `VOX_MCP_HTTP_OAUTH_LEEWAY_SECS` (default 60, at most 300): clock skew allowed on
    /// `exp` and `nbf`.
    pub leeway_secs: u64,
    /// `VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_ID` and `…_CLIENT_SECRET`: vox's credentials
    /// at the issuer's introspection endpoint, for opaque tokens.
    pub introspection: Option<(String, Secret)>,
}

const DEFAULT_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

fn invalid(var: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        var,
        message: message.into(),
    }
}

impl OAuthSettings {
    /// Reads `VOX_MCP_HTTP_OAUTH_*`; `None` when OAuth is off. `host` is the bind address.
    pub(crate) fn from_lookup(
        get: &impl Fn(&str) -> Option<String>,
        host: IpAddr,
    ) -> Result<Option<Self>, ConfigError> {
        let Some(issuer) = get("VOX_MCP_HTTP_OAUTH_ISSUER") else {
            for var in OAUTH_VARS {
                if get(var).is_some() {
                    return Err(invalid(
                        var,
                        "needs VOX_MCP_HTTP_OAUTH_ISSUER (OAuth is off)",
                    ));
                }
            }
            return Ok(None);
        };
        check_url(&issuer).map_err(|e| invalid("VOX_MCP_HTTP_OAUTH_ISSUER", e))?;
        let resource = get("VOX_MCP_HTTP_OAUTH_RESOURCE");
        match &resource {
            Some(r) => check_resource(r).map_err(|e| invalid("VOX_MCP_HTTP_OAUTH_RESOURCE", e))?,
            None if host.is_unspecified() => {
                return Err(invalid(
                    "VOX_MCP_HTTP_OAUTH_RESOURCE",
                    format!(
                        "required when binding {host}: name the URL clients use (the audience tokens carry), e.g. https://vox.example.com/mcp"
                    ),
                ));
            }
            None => {}
        }
        let scope = |var: &'static str, default: &str| -> Result<String, ConfigError> {
            let s = get(var).unwrap_or_else(|| default.to_owned());
            if s.is_empty()
                || !s
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
            {
                return Err(invalid(var, format!("`{s}` is not one scope token")));
            }
            Ok(s)
        };
        let read_scope = scope("VOX_MCP_HTTP_OAUTH_READ_SCOPE", "vox:read")?;
        let write_scope = scope("VOX_MCP_HTTP_OAUTH_WRITE_SCOPE", "vox:write")?;
        if read_scope == write_scope {
            return Err(invalid(
                "VOX_MCP_HTTP_OAUTH_READ_SCOPE",
                "equals the write scope: the read role needs a scope of its own",
            ));
        }
        let algorithms = match get("VOX_MCP_HTTP_OAUTH_ALGORITHMS") {
            None => DEFAULT_ALGORITHMS.to_vec(),
            Some(list) => {
                parse_algorithms(&list).map_err(|e| invalid("VOX_MCP_HTTP_OAUTH_ALGORITHMS", e))?
            }
        };
        let leeway_secs = match get("VOX_MCP_HTTP_OAUTH_LEEWAY_SECS") {
            None => 60,
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n <= 300 => n,
                _ => {
                    return Err(invalid(
                        "VOX_MCP_HTTP_OAUTH_LEEWAY_SECS",
                        format!("`{v}` is not a number of seconds from 0 to 300"),
                    ));
                }
            },
        };
        let introspection = match (
            get("VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_ID"),
            get("VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_SECRET"),
        ) {
            (None, None) => None,
            (Some(id), Some(secret)) if !id.is_empty() && !secret.is_empty() => {
                Some((id, Secret(secret)))
            }
            _ => {
                return Err(invalid(
                    "VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_ID",
                    "needs VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_SECRET beside it (both non-empty)",
                ));
            }
        };
        Ok(Some(OAuthSettings {
            issuer,
            resource,
            read_scope,
            write_scope,
            algorithms,
            leeway_secs,
            introspection,
        }))
    }
}

/// Every `VOX_MCP_HTTP_OAUTH_*` variable but the issuer.
pub(crate) const OAUTH_VARS: [&str; 7] = [
    "VOX_MCP_HTTP_OAUTH_RESOURCE",
    "VOX_MCP_HTTP_OAUTH_READ_SCOPE",
    "VOX_MCP_HTTP_OAUTH_WRITE_SCOPE",
    "VOX_MCP_HTTP_OAUTH_ALGORITHMS",
    "VOX_MCP_HTTP_OAUTH_LEEWAY_SECS",
    "VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_ID",
    "VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_SECRET",
];

fn parse_algorithms(list: &str) -> Result<Vec<Algorithm>, String> {
    let mut algs = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let alg =
            Algorithm::from_str(name).map_err(|_| format!("`{name}` is not a JWS algorithm"))?;
        if !DEFAULT_ALGORITHMS.contains(&alg) {
            return Err(format!(
                "`{name}` is a shared-secret algorithm: a resource server accepts only asymmetric ones"
            ));
        }
        algs.push(alg);
    }
    if algs.is_empty() {
        return Err("names no algorithm".to_owned());
    }
    Ok(algs)
}

fn loopback_host(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// An authorization server URL: absolute, https (http only on a loopback host), no
/// credentials, query or fragment.
pub(crate) fn check_url(u: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(u).map_err(|e| format!("`{u}` is not a URL: {e}"))?;
    match url.scheme() {
        "https" => {}
        "http" if loopback_host(&url) => {}
        _ => {
            return Err(format!(
                "`{u}` must be https (http only on a loopback host)"
            ));
        }
    }
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err(format!("`{u}` must not carry credentials or a fragment"));
    }
    if url.query().is_some() {
        return Err(format!("`{u}` must not carry a query"));
    }
    Ok(url)
}

/// A resource URI (RFC 8707 §2): as [`check_url`], and with a host.
fn check_resource(u: &str) -> Result<(), String> {
    let url = check_url(u)?;
    if url.host().is_none() {
        return Err(format!("`{u}` names no host"));
    }
    Ok(())
}

/// Seconds since the Unix epoch.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What a checked token says, whichever way it was checked.
#[derive(Debug, Clone)]
pub(crate) struct TokenClaims {
    pub(crate) subject: Option<String>,
    pub(crate) client_id: Option<String>,
    pub(crate) scopes: Vec<String>,
    pub(crate) exp: u64,
}

/// The claims read from a JWT access token (RFC 9068); `exp` must be a number (a string
/// `exp` fails here instead of passing unchecked).
#[derive(Deserialize)]
struct JwtClaims {
    sub: Option<String>,
    client_id: Option<String>,
    scope: Option<String>,
    /// Some servers (Azure AD, Okta) write scopes as `scp`, a list or a string.
    scp: Option<ScopeList>,
    exp: u64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScopeList {
    Text(String),
    List(Vec<String>),
}

/// Who a token is and what it grants.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The token's `sub` (else its `client_id`): the caller's name.
    pub subject: String,
    /// The client the token was issued to, when it says.
    pub client_id: Option<String>,
    /// The role its scopes give.
    pub role: Role,
    /// The profile its `vox:profile:<id>` scopes narrow it to, if any.
    pub narrowing: Option<ProfileSet>,
}

/// Why a token is refused.
#[derive(Debug, Clone)]
pub enum Refusal {
    /// 401 `invalid_token`: malformed, expired, not for this resource, badly signed.
    Invalid(String),
    /// 403 `insufficient_scope`: a good token without a vox scope.
    InsufficientScope(String),
    /// 503: the authorization server cannot be reached to check it.
    Unavailable(String),
}

/// The resource server: settings, this resource's URI, and the issuer's keys.
pub struct OAuth {
    settings: OAuthSettings,
    resource: String,
    metadata_url: String,
    issuer: keys::Issuer,
    introspector: Option<introspect::Introspector>,
}

impl OAuth {
    /// The resource server for a gateway bound to `host:port`.
    pub(crate) fn new(settings: OAuthSettings, host: IpAddr, port: u16) -> Result<Self, String> {
        let resource = match &settings.resource {
            Some(r) => r.clone(),
            None => match host {
                IpAddr::V6(v6) => format!("http://[{v6}]:{port}/mcp"),
                IpAddr::V4(v4) => format!("http://{v4}:{port}/mcp"),
            },
        };
        let url = url::Url::parse(&resource).map_err(|e| format!("{resource}: {e}"))?;
        // RFC 9728 §3.1: the well-known segment goes between the host and the resource's path.
        let path = url.path().trim_end_matches('/');
        let metadata_url = format!(
            "{}/.well-known/oauth-protected-resource{path}",
            url.origin().ascii_serialization()
        );
        Ok(OAuth {
            issuer: keys::Issuer::new(settings.issuer.clone(), MIN_KEY_REFRESH)?,
            introspector: settings
                .introspection
                .as_ref()
                .map(|(id, secret)| introspect::Introspector::new(id.clone(), secret.0.clone())),
            settings,
            resource,
            metadata_url,
        })
    }

    /// This resource's URI: the audience its tokens name.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The issuer this resource trusts.
    pub fn issuer(&self) -> &str {
        &self.settings.issuer
    }

    /// Fetches the issuer's metadata and keys: the number of keys, or why it failed.
    pub async fn warm_up(&self) -> Result<usize, String> {
        self.issuer.refresh().await
    }

    /// Why tokens cannot be checked now, if they cannot (for `/health`).
    pub fn status(&self) -> Option<String> {
        self.issuer.status()
    }

    /// The protected resource metadata document (RFC 9728 §2).
    pub fn metadata(&self) -> Value {
        json!({
            "resource": self.resource,
            "authorization_servers": [self.settings.issuer],
            "scopes_supported": [self.settings.read_scope, self.settings.write_scope],
            "bearer_methods_supported": ["header"],
            "resource_name": "vox",
        })
    }

    /// A `WWW-Authenticate` value: where the metadata is, the scopes to ask for, and the
    /// error when a token was refused (RFC 6750 §3, RFC 9728 §5.1).
    pub fn challenge(&self, error: Option<(&str, &str)>) -> String {
        let mut value = format!(
            "Bearer resource_metadata=\"{}\", scope=\"{} {}\"",
            self.metadata_url, self.settings.read_scope, self.settings.write_scope
        );
        if let Some((code, description)) = error {
            let description: String = description
                .chars()
                .filter(|c| (' '..='~').contains(c) && *c != '"' && *c != '\\')
                .take(200)
                .collect();
            value.push_str(&format!(
                ", error=\"{code}\", error_description=\"{description}\""
            ));
        }
        value
    }

    /// Whether a bearer value has a JWT's shape: three base64url parts, the signature possibly
    /// empty (an unsecured `alg: none` JWT is a JWT, refused as one).
    fn is_jwt(token: &str) -> bool {
        let parts: Vec<&str> = token.split('.').collect();
        parts.len() == 3
            && parts.iter().enumerate().all(|(i, p)| {
                (i == 2 || !p.is_empty())
                    && p.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
    }

    /// Checks an access token and reads its grant.
    pub async fn verify(&self, token: &str) -> Result<Grant, Refusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::Invalid(format!(
                "the token is over {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let claims = if Self::is_jwt(token) {
            self.check_jwt(token).await?
        } else if let Some(introspector) = &self.introspector {
            introspector
                .check(&self.issuer, token, &self.resource)
                .await?
        } else {
            return Err(Refusal::Invalid("the token is not a JWT".into()));
        };
        self.grant(claims)
    }

    async fn check_jwt(&self, token: &str) -> Result<TokenClaims, Refusal> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| Refusal::Invalid(format!("malformed JWT header: {e}")))?;
        if !self.settings.algorithms.contains(&header.alg) {
            return Err(Refusal::Invalid(format!(
                "algorithm {:?} is not accepted",
                header.alg
            )));
        }
        let key = match self.issuer.key(header.kid.as_deref(), header.alg).await {
            Ok(k) => k,
            Err(keys::KeyError::Unknown(why)) => return Err(Refusal::Invalid(why)),
            Err(keys::KeyError::Unreachable(why)) => return Err(Refusal::Unavailable(why)),
        };
        if key.alg.is_some_and(|a| a != header.alg) || key.key.family() != header.alg.family() {
            return Err(Refusal::Invalid(format!(
                "the key the token names does not sign with {:?}",
                header.alg
            )));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = self.settings.leeway_secs;
        let data = jsonwebtoken::decode::<JwtClaims>(token, &key.key, &validation)
            .map_err(|e| Refusal::Invalid(describe(&e)))?;
        let c = data.claims;
        let mut scopes: Vec<String> = c
            .scope
            .iter()
            .flat_map(|s| s.split_ascii_whitespace().map(str::to_owned))
            .collect();
        match c.scp {
            Some(ScopeList::Text(s)) => {
                scopes.extend(s.split_ascii_whitespace().map(str::to_owned));
            }
            Some(ScopeList::List(l)) => scopes.extend(l),
            None => {}
        }
        Ok(TokenClaims {
            subject: c.sub,
            client_id: c.client_id,
            scopes,
            exp: c.exp,
        })
    }

    /// The role and narrowing a checked token's scopes give, and its caller's name.
    fn grant(&self, c: TokenClaims) -> Result<Grant, Refusal> {
        let has = |s: &str| c.scopes.iter().any(|x| x == s);
        let role = if has(&self.settings.write_scope) {
            Role::Write
        } else if has(&self.settings.read_scope) {
            Role::Read
        } else {
            return Err(Refusal::InsufficientScope(format!(
                "the token grants neither {} nor {}",
                self.settings.read_scope, self.settings.write_scope
            )));
        };
        let ids: Vec<&str> = c
            .scopes
            .iter()
            .filter_map(|s| s.strip_prefix(PROFILE_SCOPE_PREFIX))
            .collect();
        let narrowing = if ids.is_empty() {
            None
        } else {
            Some(ProfileSet::compose(&ids).map_err(|e| {
                Refusal::InsufficientScope(format!("the token's profile scope: {e}"))
            })?)
        };
        let name_ok = |s: &String| {
            !s.is_empty() && s.len() <= MAX_SUBJECT && s.chars().all(|ch| !ch.is_control())
        };
        let subject = c
            .subject
            .filter(name_ok)
            .or_else(|| c.client_id.clone().filter(name_ok))
            .ok_or_else(|| {
                Refusal::Invalid(format!(
                    "the token names no subject (`sub` or `client_id`, 1 to {MAX_SUBJECT} characters)"
                ))
            })?;
        Ok(Grant {
            subject,
            client_id: c.client_id.filter(name_ok),
            role,
            narrowing,
        })
    }
}

/// A token error as the `error_description` says it.
fn describe(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::ExpiredSignature => "the token has expired".into(),
        K::ImmatureSignature => "the token is not valid yet (nbf)".into(),
        K::InvalidIssuer => "the token was issued by another issuer".into(),
        K::InvalidAudience => "the token is not for this resource (aud)".into(),
        K::InvalidSignature => "the token's signature does not verify".into(),
        K::MissingRequiredClaim(c) => format!("the token has no `{c}` claim"),
        K::InvalidClaimFormat(c) => format!("the token's `{c}` claim is malformed"),
        K::Json(_) => "the token's claims are malformed (a claim of the wrong type?)".into(),
        other => format!("the token does not verify: {other:?}"),
    }
}
