//! Gateway settings from the environment, checked at startup: unknown names and unsafe
//! combinations stop `vox serve` instead of being ignored.

use axum::http::uri::Authority;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::num::NonZeroU32;
use vox_mcp_registry::{ProfileSet, ToolSet, tool_by_name};

/// A setting that stops the gateway from starting.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A variable's value does not parse or is out of range.
    #[error("{var}: {message}")]
    Invalid {
        /// The environment variable, e.g. `VOX_MCP_HTTP_PORT`.
        var: &'static str,
        /// What is wrong with its value.
        message: String,
    },
    /// Neither token is set and unauthenticated access was not asked for.
    #[error(
        "gateway auth required: set VOX_MCP_HTTP_BEARER_TOKEN (write) and/or VOX_MCP_HTTP_READ_BEARER_TOKEN (read), VOX_MCP_HTTP_OAUTH_ISSUER (OAuth 2.1 access tokens), or VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED=1 when bound to loopback"
    )]
    NoAuth,
    /// Unauthenticated access was asked for on a bind address other than 127.0.0.1 or ::1.
    #[error(
        "VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED=1 is accepted only when the gateway binds 127.0.0.1 or ::1 (the loopback addresses whose peers count as loopback), not VOX_MCP_HTTP_HOST={0}"
    )]
    UnauthenticatedOffLoopback(IpAddr),
    /// The read token equals the write token.
    #[error(
        "VOX_MCP_HTTP_READ_BEARER_TOKEN equals VOX_MCP_HTTP_BEARER_TOKEN: the read token would act as the write token; give the read role a token of its own"
    )]
    SameTokens,
    /// An allowlist names tools that are in no registry.
    #[error("{var} names unknown tool(s): {names}")]
    UnknownTools {
        /// The allowlist variable, e.g. `VOX_MCP_HTTP_ALLOWED_TOOLS`.
        var: &'static str,
        /// The unknown names, comma-separated.
        names: String,
    },
    /// Workspace tools were asked for under a named profile (whose canonical ids it carries).
    #[error(
        "VOX_MCP_HTTP_WORKSPACE_TOOLS=1 serves a workspace's .vox tools and resources only under the dev profile; this daemon serves `{0}` (a named profile is a fixed slice of the catalog)"
    )]
    WorkspaceToolsNeedDev(String),
}

/// The gateway's settings.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// `VOX_MCP_HTTP_HOST`: the address to bind (default 127.0.0.1).
    pub host: IpAddr,
    /// `VOX_MCP_HTTP_PORT`: the TCP port to bind (default 3921).
    pub port: u16,
    /// `VOX_MCP_HTTP_BEARER_TOKEN`: the write-role token (at least 16 characters, trimmed).
    pub write_token: Option<String>,
    /// `VOX_MCP_HTTP_READ_BEARER_TOKEN`: the read-role token (at least 16 characters, trimmed).
    pub read_token: Option<String>,
    /// `VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED=1`: loopback peers without a token get the write role
    /// (loopback binds only).
    pub allow_unauthenticated: bool,
    /// `VOX_MCP_HTTP_WORKSPACE_TOOLS=1`: `/mcp` also serves the workspace's `.vox` tools and
    /// resources to write-role callers (dev only; off by default).
    pub workspace_tools: bool,
    /// `VOX_MCP_HTTP_ALLOWED_TOOLS`: the tools HTTP serves, intersected with the profile; unset,
    /// the profile's default surface.
    pub allowed_tools: Option<Vec<String>>,
    /// `VOX_MCP_HTTP_READ_ROLE_ALLOWED_TOOLS`: narrows further what the read token may call.
    pub read_role_allowed_tools: Option<Vec<String>>,
    /// `VOX_MCP_HTTP_RATE_PER_SEC`: requests per second allowed per caller (default 50,000).
    pub rate_per_sec: NonZeroU32,
    /// `VOX_MCP_HTTP_RATE_BURST`: requests a caller may make at once above the rate (default
    /// 50,000).
    pub rate_burst: NonZeroU32,
    /// `VOX_MCP_HTTP_MAX_CONNECTIONS`: connections served at once (default 512); one more is
    /// answered 503 at once.
    pub max_connections: usize,
    /// `VOX_MCP_HTTP_HEADER_TIMEOUT_MS`: how long a request's headers may take to arrive, and a
    /// keep-alive connection may idle (default 10,000).
    pub header_timeout: std::time::Duration,
    /// `VOX_MCP_HTTP_AUTH_FAILURES_PER_MIN`: failed authentications a peer address may make in
    /// a minute (default 30); past them, every request from it is answered 429 until the minute
    /// ends, whatever token it carries.
    pub auth_failures_per_min: NonZeroU32,
    /// `VOX_MCP_HTTP_ALLOWED_HOSTS`: extra `Host` values accepted (`host` or `host:port`), beside
    /// loopback names and the bound address.
    pub extra_hosts: Vec<String>,
    /// `VOX_MCP_HTTP_ALLOWED_ORIGINS`: extra browser `Origin` values accepted, compared exactly.
    pub extra_origins: Vec<String>,
    /// `VOX_MCP_HTTP_OAUTH_*`: OAuth 2.1 access tokens accepted beside the static tokens.
    pub oauth: Option<crate::oauth::OAuthSettings>,
    /// `extra_hosts` parsed (checked at startup), and the OAuth resource's host.
    extra_authorities: Vec<HostPort>,
}

fn list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl GatewayConfig {
    /// Reads `VOX_MCP_HTTP_*` through `get` (the process environment in production).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let host = match get("VOX_MCP_HTTP_HOST") {
            Some(h) => h.parse().map_err(|e| ConfigError::Invalid {
                var: "VOX_MCP_HTTP_HOST",
                message: format!("`{h}` is not an IP address: {e}"),
            })?,
            None => IpAddr::from([127, 0, 0, 1]),
        };
        let port = match get("VOX_MCP_HTTP_PORT") {
            Some(p) => p.parse().map_err(|e| ConfigError::Invalid {
                var: "VOX_MCP_HTTP_PORT",
                message: format!("`{p}`: {e}"),
            })?,
            None => 3921,
        };
        let token = |var: &'static str| -> Result<Option<String>, ConfigError> {
            match get(var) {
                Some(t) if t.trim().len() < 16 => Err(ConfigError::Invalid {
                    var,
                    message: "a token needs at least 16 characters".into(),
                }),
                Some(t) => Ok(Some(t.trim().to_owned())),
                None => Ok(None),
            }
        };
        let write_token = token("VOX_MCP_HTTP_BEARER_TOKEN")?;
        let read_token = token("VOX_MCP_HTTP_READ_BEARER_TOKEN")?;
        let flag = |var: &'static str| match get(var).as_deref() {
            None | Some("0" | "") => Ok(false),
            Some("1") => Ok(true),
            Some(other) => Err(ConfigError::Invalid {
                var,
                message: format!("expected 1 or 0, got `{other}`"),
            }),
        };
        let allow_unauthenticated = flag("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED")?;
        let workspace_tools = flag("VOX_MCP_HTTP_WORKSPACE_TOOLS")?;
        // Only these two addresses count as loopback for trust decisions
        // (`trusted_loopback`): on another 127/8 bind, peers would be remote by the gateway's
        // own rule and yet get the write role without a token.
        if allow_unauthenticated
            && host != IpAddr::V4(Ipv4Addr::LOCALHOST)
            && host != IpAddr::V6(Ipv6Addr::LOCALHOST)
        {
            return Err(ConfigError::UnauthenticatedOffLoopback(host));
        }
        if write_token.is_some() && write_token == read_token {
            return Err(ConfigError::SameTokens);
        }
        let oauth = crate::oauth::OAuthSettings::from_lookup(&get, host)?;
        if write_token.is_none()
            && read_token.is_none()
            && !allow_unauthenticated
            && oauth.is_none()
        {
            return Err(ConfigError::NoAuth);
        }
        let rate = |var: &'static str, default: u32| -> Result<NonZeroU32, ConfigError> {
            let v = get(var)
                .map(|v| v.parse::<u32>())
                .transpose()
                .map_err(|e| ConfigError::Invalid {
                    var,
                    message: e.to_string(),
                })?;
            NonZeroU32::new(v.unwrap_or(default)).ok_or(ConfigError::Invalid {
                var,
                message: "must be at least 1".into(),
            })
        };
        let extra_hosts = get("VOX_MCP_HTTP_ALLOWED_HOSTS")
            .map(|v| list(&v))
            .unwrap_or_default();
        let mut extra_authorities: Vec<HostPort> = extra_hosts
            .iter()
            .map(|h| {
                HostPort::parse_allowed(h).ok_or_else(|| ConfigError::Invalid {
                    var: "VOX_MCP_HTTP_ALLOWED_HOSTS",
                    message: format!("`{h}` is not a host name or address with an optional port"),
                })
            })
            .collect::<Result<_, _>>()?;
        // The resource's own host is the name clients reach this gateway by (behind a proxy
        // that keeps `Host`), so it is an allowed host.
        if let Some(resource) = oauth.as_ref().and_then(|o| o.resource.as_deref())
            && let Ok(url) = url::Url::parse(resource)
            && let Some(host) = url.host_str()
        {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            if let Some(mut hp) = HostPort::parse_allowed(host) {
                hp.port = url.port();
                extra_authorities.push(hp);
            }
        }
        Ok(GatewayConfig {
            host,
            port,
            write_token,
            read_token,
            allow_unauthenticated,
            workspace_tools,
            allowed_tools: get("VOX_MCP_HTTP_ALLOWED_TOOLS").map(|v| list(&v)),
            read_role_allowed_tools: get("VOX_MCP_HTTP_READ_ROLE_ALLOWED_TOOLS").map(|v| list(&v)),
            rate_per_sec: rate("VOX_MCP_HTTP_RATE_PER_SEC", 50_000)?,
            rate_burst: rate("VOX_MCP_HTTP_RATE_BURST", 50_000)?,
            max_connections: rate("VOX_MCP_HTTP_MAX_CONNECTIONS", 512)?.get() as usize,
            header_timeout: std::time::Duration::from_millis(
                rate("VOX_MCP_HTTP_HEADER_TIMEOUT_MS", 10_000)?.get().into(),
            ),
            auth_failures_per_min: rate("VOX_MCP_HTTP_AUTH_FAILURES_PER_MIN", 30)?,
            extra_hosts,
            extra_origins: get("VOX_MCP_HTTP_ALLOWED_ORIGINS")
                .map(|v| list(&v))
                .unwrap_or_default(),
            oauth,
            extra_authorities,
        })
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    fn tool_set(var: &'static str, names: &[String]) -> Result<ToolSet, ConfigError> {
        let unknown: Vec<&str> = names
            .iter()
            .filter(|n| tool_by_name(n).is_none())
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(ConfigError::UnknownTools {
                var,
                names: unknown.join(", "),
            });
        }
        let mut set = ToolSet::default();
        for n in names {
            if let Some(t) = tool_by_name(n) {
                set.insert(t.index);
            }
        }
        Ok(set)
    }

    /// The HTTP surface: `VOX_MCP_HTTP_ALLOWED_TOOLS ∩ profile`. Unset, `dev` serves its
    /// documented default (every public tool: operator and internal tools need an explicit
    /// allowlist over HTTP) and a named profile serves its own tools.
    pub fn surface(&self, profile: &ProfileSet) -> Result<ProfileSet, ConfigError> {
        if self.workspace_tools && !profile.is_dev() {
            return Err(ConfigError::WorkspaceToolsNeedDev(
                profile.canonical().to_owned(),
            ));
        }
        let mut surface = match &self.allowed_tools {
            Some(names) => {
                let set = Self::tool_set("VOX_MCP_HTTP_ALLOWED_TOOLS", names)?;
                for n in names {
                    if tool_by_name(n).is_some_and(|t| !profile.tools().contains(t.index)) {
                        tracing::warn!(
                            "VOX_MCP_HTTP_ALLOWED_TOOLS: {n} is outside profile {}; dropped",
                            profile.canonical()
                        );
                    }
                }
                profile.restricted(&set)
            }
            None if profile.is_dev() => profile.public_only(),
            None => profile.clone(),
        };
        if let Some(names) = &self.read_role_allowed_tools {
            surface = surface.with_read_role_tools(Self::tool_set(
                "VOX_MCP_HTTP_READ_ROLE_ALLOWED_TOOLS",
                names,
            )?);
        }
        Ok(surface)
    }

    /// Hosts a `Host` header may name: loopback names, the bound address, and
    /// `VOX_MCP_HTTP_ALLOWED_HOSTS`.
    pub fn allowed_hosts(&self) -> Vec<String> {
        ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .map(str::to_owned)
            .chain((!self.host.is_unspecified()).then(|| self.host.to_string()))
            .chain(self.extra_hosts.iter().cloned())
            .collect()
    }

    /// Whether a `Host` header value (`host[:port]`, parsed strictly: no userinfo, path or
    /// trailing characters) names an allowed host exactly (case-insensitive). An entry of
    /// `VOX_MCP_HTTP_ALLOWED_HOSTS` with a port allows that port only.
    pub fn host_allowed(&self, host: &str) -> bool {
        HostPort::parse(host).is_some_and(|h| self.allows(&h))
    }

    fn allows(&self, h: &HostPort) -> bool {
        let builtin = ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .any(|name| h.host == name);
        builtin
            || (!self.host.is_unspecified() && h.host == canonical_ip(self.host))
            || self
                .extra_authorities
                .iter()
                .any(|a| a.host == h.host && a.port.is_none_or(|p| h.port == Some(p)))
    }

    /// Whether an `Origin` header is an allowed browser origin: a listed origin (exactly), or
    /// `http(s)://host[:port]` (nothing else: no userinfo, path, query or fragment) on an
    /// allowed host.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        if self.extra_origins.iter().any(|o| o == origin) {
            return true;
        }
        let Some((scheme, authority)) = origin.split_once("://") else {
            return false;
        };
        (scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https"))
            && self.host_allowed(authority)
    }
}

/// An address as a Host header names it once parsed: IPv6 without brackets, canonical.
fn canonical_ip(ip: IpAddr) -> String {
    ip.to_string()
}

/// A parsed `host[:port]`: the host lower-cased (an IPv6 address without its brackets, in
/// canonical form) and the port when one is given.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostPort {
    host: String,
    port: Option<u16>,
}

impl HostPort {
    /// Parses a `Host` header value (`host`, `host:port`, `[v6]`, `[v6]:port`) with
    /// `http::uri::Authority`, then refuses what an authority may hold but a Host header must
    /// not: userinfo (`a@b`), an empty or non-numeric port, and anything after the host and
    /// port (`[::1]evil.com`). A name is letters, digits, `-`, `_` and `.`.
    fn parse(s: &str) -> Option<Self> {
        if s.is_empty() || s.contains('@') {
            return None;
        }
        let a: Authority = s.parse().ok()?;
        if a.as_str() != s {
            return None;
        }
        let host = a.host();
        let port = match s.get(host.len()..)? {
            "" => None,
            rest => {
                let digits = rest.strip_prefix(':')?;
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                Some(digits.parse().ok()?)
            }
        };
        let host = match host.strip_prefix('[') {
            Some(v6) => v6.strip_suffix(']')?.parse::<Ipv6Addr>().ok()?.to_string(),
            None if !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) =>
            {
                host.to_ascii_lowercase()
            }
            None => return None,
        };
        Some(HostPort { host, port })
    }

    /// An allowed-hosts entry: what [`Self::parse`] takes, or a bare IPv6 address (`fd00::1`).
    fn parse_allowed(s: &str) -> Option<Self> {
        match s.parse::<Ipv6Addr>() {
            Ok(ip) => Some(HostPort {
                host: ip.to_string(),
                port: None,
            }),
            Err(_) => Self::parse(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use vox_mcp_registry::Exposure;

    fn cfg(vars: &[(&str, &str)]) -> Result<GatewayConfig, ConfigError> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        GatewayConfig::from_lookup(|k| m.get(k).cloned())
    }

    const TOKEN: &str = "0123456789abcdef-write";

    #[test]
    fn auth_is_required_and_unauthenticated_only_on_loopback() {
        assert!(matches!(cfg(&[]), Err(ConfigError::NoAuth)));
        assert!(cfg(&[("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED", "1")]).is_ok());
        assert!(matches!(
            cfg(&[
                ("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED", "1"),
                ("VOX_MCP_HTTP_HOST", "0.0.0.0")
            ]),
            Err(ConfigError::UnauthenticatedOffLoopback(_))
        ));
        assert!(cfg(&[("VOX_MCP_HTTP_BEARER_TOKEN", "short")]).is_err());
        let c = cfg(&[("VOX_MCP_HTTP_BEARER_TOKEN", TOKEN)]).unwrap();
        assert_eq!((c.host.to_string().as_str(), c.port), ("127.0.0.1", 3921));
    }

    #[test]
    fn unknown_allowlisted_tools_fail_and_outside_names_are_dropped() {
        let c = cfg(&[
            ("VOX_MCP_HTTP_BEARER_TOKEN", TOKEN),
            ("VOX_MCP_HTTP_ALLOWED_TOOLS", "vox_kb_query,vox_nope"),
        ])
        .unwrap();
        let err = c
            .surface(&ProfileSet::parse("knowledge").unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("vox_nope") && err.contains("VOX_MCP_HTTP_ALLOWED_TOOLS"),
            "{err}"
        );
        let c = cfg(&[
            ("VOX_MCP_HTTP_BEARER_TOKEN", TOKEN),
            ("VOX_MCP_HTTP_ALLOWED_TOOLS", "vox_kb_query,vox_repo_log"),
        ])
        .unwrap();
        let s = c.surface(&ProfileSet::parse("knowledge").unwrap()).unwrap();
        let names: Vec<&str> = s.tools().iter().map(|t| t.name).collect();
        assert_eq!(names, ["vox_kb_query"]);
    }

    #[test]
    fn dev_defaults_to_public_tools_and_named_profiles_to_their_own() {
        let c = cfg(&[("VOX_MCP_HTTP_BEARER_TOKEN", TOKEN)]).unwrap();
        let dev = c.surface(&ProfileSet::dev()).unwrap();
        assert!(dev.tools().iter().all(|t| t.exposure == Exposure::Public));
        assert!(!dev.tools().iter().any(|t| t.name == "vox_boot_report"));
        let att = c.surface(&ProfileSet::parse("attention").unwrap()).unwrap();
        assert_eq!(att.tools().iter().count(), 4);
    }

    #[test]
    fn hosts_and_origins() {
        let c = cfg(&[("VOX_MCP_HTTP_BEARER_TOKEN", TOKEN)]).unwrap();
        assert!(
            c.host_allowed("127.0.0.1:3921")
                && c.host_allowed("localhost")
                && c.host_allowed("[::1]:80")
        );
        assert!(!c.host_allowed("evil.example:3921"));
        assert!(c.origin_allowed("http://localhost:5173"));
        assert!(!c.origin_allowed("http://evil.example"));
        assert!(!c.origin_allowed("null"));
    }

    #[test]
    fn hosts_and_origins_are_parsed_and_compared_exactly() {
        let c = cfg(&[("VOX_MCP_HTTP_BEARER_TOKEN", TOKEN)]).unwrap();
        for bad in [
            "[::1].evil.com",
            "[::1]evil.com",
            "[::1]:80evil.com",
            "[::1",
            "::1",
            "[::1]:",
            "[::1]:99999",
            "localhost.",
            "localhost.evil.com",
            "127.0.0.1.evil.com",
            "localhost@evil.com",
            "a@localhost",
            "localhost/x",
            "localhost?x",
            "localhost#x",
            "localhost:80:80",
            "localhost:",
            "localhost:+80",
            "local host",
            "",
        ] {
            assert!(!c.host_allowed(bad), "{bad}");
        }
        for good in [
            "LocalHost",
            "localhost:3921",
            "127.0.0.1",
            "[::1]",
            "[::1]:80",
            "[0:0:0:0:0:0:0:1]",
        ] {
            assert!(c.host_allowed(good), "{good}");
        }
        for bad in [
            "http://[::1]@evil.com",
            "http://localhost@evil.com",
            "http://[::1].evil.com",
            "http://localhost:5173/",
            "http://localhost:5173/x",
            "http://localhost?x",
            "javascript://localhost",
            "http:/localhost",
            "localhost",
        ] {
            assert!(!c.origin_allowed(bad), "{bad}");
        }
        assert!(c.origin_allowed("HTTPS://[::1]:8443"));
        let c = cfg(&[
            ("VOX_MCP_HTTP_BEARER_TOKEN", TOKEN),
            ("VOX_MCP_HTTP_HOST", "0.0.0.0"),
            (
                "VOX_MCP_HTTP_ALLOWED_HOSTS",
                "vox.internal, fd00::1, box.lan:8080",
            ),
        ])
        .unwrap();
        assert!(c.host_allowed("VOX.internal:3921") && c.host_allowed("[fd00::1]:3921"));
        assert!(c.host_allowed("box.lan:8080") && !c.host_allowed("box.lan:8081"));
        assert!(!c.host_allowed("vox.internal.evil.com") && !c.host_allowed("0.0.0.0"));
        let err = cfg(&[
            ("VOX_MCP_HTTP_BEARER_TOKEN", TOKEN),
            ("VOX_MCP_HTTP_ALLOWED_HOSTS", "ok.lan,http://x/"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("VOX_MCP_HTTP_ALLOWED_HOSTS") && err.contains("http://x/"),
            "{err}"
        );
    }

    #[test]
    fn unauthenticated_only_on_127_0_0_1_or_ipv6_loopback_and_tokens_differ() {
        for host in ["127.0.0.1", "::1"] {
            assert!(
                cfg(&[
                    ("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED", "1"),
                    ("VOX_MCP_HTTP_HOST", host)
                ])
                .is_ok()
            );
        }
        for host in ["127.0.0.2", "::ffff:127.0.0.1", "::"] {
            let err = cfg(&[
                ("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED", "1"),
                ("VOX_MCP_HTTP_HOST", host),
            ])
            .unwrap_err()
            .to_string();
            assert!(
                err.contains("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED") && err.contains(host),
                "{err}"
            );
        }
        let same = format!("{TOKEN} ");
        assert!(matches!(
            cfg(&[
                ("VOX_MCP_HTTP_BEARER_TOKEN", TOKEN),
                ("VOX_MCP_HTTP_READ_BEARER_TOKEN", &same),
            ]),
            Err(ConfigError::SameTokens)
        ));
    }
}
