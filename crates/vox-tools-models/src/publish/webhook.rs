//! Webhooks and their status URLs, the only requests `vox_news_publish` and
//! `vox_external_job_status` make, so any agent with these public tools can make them: each goes
//! to an address checked first and nowhere else.
//!
//! - The URL's host is resolved here (an IP literal is taken as is), and every address it
//!   resolves to must be public, or in a network `.vox/publish.toml`'s `allow_private` lists:
//!   loopback, private, shared, link-local, unique-local, multicast, documentation and reserved
//!   ranges (and IPv4 addresses of those in IPv6 form: mapped, compatible, NAT64, 6to4) are
//!   refused before anything is sent.
//! - The client connects only to the addresses checked (its resolver answers the checked host
//!   with them and refuses every other name), so a DNS answer that changes between the check and
//!   the connection (rebinding) reaches nothing; no proxy from the environment is used.
//! - No redirect is followed: a 3xx answer is a failed attempt naming its `Location`.
//! - Resolving takes at most [`CONNECT_TIMEOUT`], a request at most [`HTTP_TIMEOUT`] (connection
//!   and whole answer), and at most [`MAX_ANSWER`] bytes of an answer are read.

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use vox_core::ToolError;

/// How long a request to a webhook or a status URL may take, from connecting to its answer's
/// end (resolving its host first takes at most [`CONNECT_TIMEOUT`]).
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long resolving a host and connecting to it may take, each.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Most bytes of an answer read: a longer answer is a failed attempt.
pub const MAX_ANSWER: usize = 64 * 1024;

/// A network of `allow_private`: `10.0.0.0/8`, `fd00::/8`, or one address (`127.0.0.1`, `::1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, canonical(ip)) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                prefix_eq(u32::from(n).into(), u32::from(a).into(), 32, self.prefix)
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                prefix_eq(u128::from(n), u128::from(a), 128, self.prefix)
            }
            _ => false,
        }
    }
}

/// Whether the first `prefix` of `bits` bits of `a` and `b` are equal.
fn prefix_eq(a: u128, b: u128, bits: u8, prefix: u8) -> bool {
    prefix == 0 || (a ^ b) >> (bits - prefix) == 0
}

impl FromStr for Net {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not an address or a network (`10.0.0.0/8`, `::1/128`)");
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let written = addr.trim().parse::<IpAddr>().map_err(|_| bad())?;
        let max = if written.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(bad)?,
            None => max,
        };
        let addr = canonical(written);
        if addr == written {
            return Ok(Net { addr, prefix });
        }
        // An IPv4-mapped network (`::ffff:10.0.0.0/104`) is the IPv4 network it maps.
        let prefix = prefix.checked_sub(96).ok_or_else(bad)?;
        Ok(Net { addr, prefix })
    }
}

impl<'de> Deserialize<'de> for Net {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is; any other as is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// The kind of non-public range `ip` is in, or `None` for a public address.
pub fn special(ip: IpAddr) -> Option<&'static str> {
    match canonical(ip) {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, ..) => "\"this network\" (0.0.0.0/8)",
        (10, ..) => "private (10.0.0.0/8)",
        (100, 64..=127, _) => "shared address space (100.64.0.0/10)",
        (127, ..) => "loopback (127.0.0.0/8)",
        (169, 254, _) => "link-local (169.254.0.0/16)",
        (172, 16..=31, _) => "private (172.16.0.0/12)",
        (192, 0, 0) => "IETF protocol assignments (192.0.0.0/24)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (192, 168, _) => "private (192.168.0.0/16)",
        (198, 18..=19, _) => "benchmarking (198.18.0.0/15)",
        (224..=239, ..) => "multicast (224.0.0.0/4)",
        (240..=255, ..) => "reserved (240.0.0.0/4)",
        _ => return None,
    })
}

fn special_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let v4_at = |i: usize| Ipv4Addr::from(((s[i] as u32) << 16) | s[i + 1] as u32);
    if ip.is_unspecified() {
        return Some("unspecified (::)");
    }
    if ip.is_loopback() {
        return Some("loopback (::1)");
    }
    Some(match s {
        [0, 0, 0, 0, 0, 0, _, _] => "IPv4-compatible (::/96)",
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => {
            return special_v4(v4_at(6)).map(|_| "NAT64 of a non-public IPv4 address");
        }
        [0x64, 0xff9b, 1, ..] => "local-use NAT64 (64:ff9b:1::/48)",
        [0x100, 0, 0, 0, ..] => "discard-only (100::/64)",
        [0x2001, 0, ..] => "Teredo (2001::/32)",
        [0x2001, 0xdb8, ..] => "documentation (2001:db8::/32)",
        [0x2002, ..] => return special_v4(v4_at(1)).map(|_| "6to4 of a non-public IPv4 address"),
        [x, ..] if x & 0xfe00 == 0xfc00 => "unique local (fc00::/7)",
        [x, ..] if x & 0xffc0 == 0xfe80 => "link-local (fe80::/10)",
        [x, ..] if x & 0xffc0 == 0xfec0 => "site-local (fec0::/10)",
        [x, ..] if x & 0xff00 == 0xff00 => "multicast (ff00::/8)",
        _ => return None,
    })
}

/// Why a request was not made or did not succeed: refused by policy (nothing sent), or failed.
#[derive(Debug)]
pub enum Fault {
    Refused(String),
    Failed(String),
}

impl Fault {
    pub fn message(&self) -> &str {
        match self {
            Fault::Refused(m) | Fault::Failed(m) => m,
        }
    }
}

impl From<Fault> for ToolError {
    fn from(f: Fault) -> Self {
        match f {
            Fault::Refused(m) => ToolError::refused(m),
            Fault::Failed(m) => ToolError::failed(m),
        }
    }
}

/// An absolute `http(s)` URL, or why not.
pub fn http_url(url: &str) -> Result<Url, String> {
    let u = Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    if !matches!(u.scheme(), "http" | "https") || u.host().is_none() {
        return Err(format!("`{url}` is not an http(s) URL"));
    }
    Ok(u)
}

/// Whether `a` and `b` have the same origin: scheme, host and port (the scheme's default when
/// not written).
pub fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host() == b.host()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// A URL whose host was resolved and checked: the only addresses a request to it reaches.
pub struct Target {
    url: Url,
    /// The host as the client names it to its resolver (`None` for an IP literal).
    domain: Option<String>,
    addrs: Vec<SocketAddr>,
}

/// Resolves `url`'s host and keeps its addresses `allow` permits (every public one, and
/// non-public ones in a listed network); refused when none is left.
pub async fn resolve(url: &Url, allow: &[Net]) -> Result<Target, Fault> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| Fault::Failed(format!("{url}: no port")))?;
    let host = url
        .host_str()
        .ok_or_else(|| Fault::Failed(format!("`{url}` has no host")))?;
    let literal = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .parse::<IpAddr>();
    let (domain, found): (Option<String>, Vec<SocketAddr>) = match literal {
        Ok(ip) => (None, vec![SocketAddr::new(ip, port)]),
        Err(_) => {
            let d = host;
            let found = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::lookup_host((d, port)))
                .await
                .map_err(|_| Fault::Failed(format!("{url}: resolving {d} timed out")))?
                .map_err(|e| Fault::Failed(format!("{url}: resolving {d}: {e}")))?
                .collect::<Vec<_>>();
            (Some(d.to_owned()), found)
        }
    };
    let (addrs, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = found
        .into_iter()
        .partition(|a| special(a.ip()).is_none() || allow.iter().any(|n| n.contains(a.ip())));
    if addrs.is_empty() {
        let why = refused
            .iter()
            .map(|a| format!("{} ({})", a.ip(), special(a.ip()).unwrap_or("public")))
            .collect::<Vec<_>>();
        return Err(Fault::Refused(if why.is_empty() {
            format!("{url}: its host resolves to no address")
        } else {
            format!(
                "{url}: refused: its host is {}, not a public address; a network in \
                 `allow_private` of .vox/publish.toml may allow it",
                why.join(", ")
            )
        }));
    }
    Ok(Target {
        url: url.clone(),
        domain,
        addrs,
    })
}

/// A resolver that answers the checked host with its checked addresses and refuses any other
/// name.
struct Pinned {
    domain: Option<String>,
    addrs: Vec<SocketAddr>,
}

impl Resolve for Pinned {
    fn resolve(&self, name: Name) -> Resolving {
        let answer: Result<Addrs, Box<dyn std::error::Error + Send + Sync>> = match &self.domain {
            Some(d) if d.eq_ignore_ascii_case(name.as_str()) => {
                Ok(Box::new(self.addrs.clone().into_iter()))
            }
            _ => Err(format!("{} is not the checked host", name.as_str()).into()),
        };
        Box::pin(std::future::ready(answer))
    }
}

impl Target {
    fn client(&self) -> Result<reqwest::Client, Fault> {
        // An IP literal is connected to as written, without the resolver: it is the one checked.
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(HTTP_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .dns_resolver(Arc::new(Pinned {
                domain: self.domain.clone(),
                addrs: self.addrs.clone(),
            }))
            .build()
            .map_err(|e| Fault::Failed(e.to_string()))
    }

    /// POSTs `body` as JSON (with `token` as its bearer token); the answer (see [`answer`]).
    pub async fn post(&self, token: Option<&str>, body: &Value) -> Result<Value, Fault> {
        let mut rq = self.client()?.post(self.url.clone()).json(body);
        if let Some(t) = token {
            rq = rq.bearer_auth(t);
        }
        self.answer(rq).await
    }

    /// GETs the URL; the answer (see [`answer`]).
    pub async fn get(&self) -> Result<Value, Fault> {
        let rq = self.client()?.get(self.url.clone());
        self.answer(rq).await
    }

    /// A 2xx answer's JSON (`{}` for another body); any other status, an answer over
    /// [`MAX_ANSWER`] bytes or over [`HTTP_TIMEOUT`] is a failure.
    async fn answer(&self, rq: reqwest::RequestBuilder) -> Result<Value, Fault> {
        let url = &self.url;
        let fail = |e: reqwest::Error| Fault::Failed(format!("{url}: {}", chain(&e)));
        let mut r = rq.send().await.map_err(fail)?;
        let status = r.status();
        if status.is_redirection() {
            let to = r
                .headers()
                .get(reqwest::header::LOCATION)
                .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned());
            return Err(Fault::Failed(format!(
                "{url} answered HTTP {} (a redirect{}); redirects are not followed",
                status.as_u16(),
                to.map(|l| format!(" to {l}")).unwrap_or_default()
            )));
        }
        let mut body = Vec::new();
        while let Some(chunk) = r.chunk().await.map_err(fail)? {
            if body.len() + chunk.len() > MAX_ANSWER {
                return Err(Fault::Failed(format!(
                    "{url} answered HTTP {} with more than {MAX_ANSWER} bytes (the most read)",
                    status.as_u16()
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            return Err(Fault::Failed(format!(
                "{url} answered HTTP {}: {text}",
                status.as_u16()
            )));
        }
        Ok(serde_json::from_str(&text).unwrap_or_else(|_| json!({})))
    }
}

/// An error and its causes, `: `-separated (reqwest's own message names only the request).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(&format!(": {c}"));
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn non_public_ranges_are_special_and_public_ones_are_not() {
        for s in [
            "127.0.0.1",
            "127.255.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.18.0.1",
            "::",
            "::1",
            "fe80::1",
            "febf::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2001:db8::1",
            "2001::1",
        ] {
            assert!(special(ip(s)).is_some(), "{s} is not public");
        }
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "192.169.0.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(special(ip(s)), None, "{s} is public");
        }
    }

    #[test]
    fn networks_parse_and_contain_their_addresses_in_either_form() {
        let n: Net = "127.0.0.0/8".parse().unwrap();
        assert!(n.contains(ip("127.0.0.1")) && n.contains(ip("::ffff:127.9.9.9")));
        assert!(!n.contains(ip("128.0.0.1")) && !n.contains(ip("::1")));
        let one: Net = "10.0.0.5".parse().unwrap();
        assert!(one.contains(ip("10.0.0.5")) && !one.contains(ip("10.0.0.6")));
        let v6: Net = "fd00::/8".parse().unwrap();
        assert!(v6.contains(ip("fd12::1")) && !v6.contains(ip("fe80::1")));
        let all: Net = "::/0".parse().unwrap();
        assert!(all.contains(ip("::1")) && !all.contains(ip("127.0.0.1")));
        assert_eq!(
            "::ffff:10.0.0.0/104".parse::<Net>().unwrap().to_string(),
            "10.0.0.0/8"
        );
        for bad in [
            "10.0.0.0/33",
            "::ffff:10.0.0.0/8",
            "::/129",
            "localhost",
            "10.0.0/8",
            "1.2.3.4/x",
            "",
        ] {
            assert!(bad.parse::<Net>().is_err(), "{bad}");
        }
    }

    #[test]
    fn origins_compare_scheme_host_and_port() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(same_origin(
            &u("http://h.example/a"),
            &u("http://h.example:80/status/1")
        ));
        assert!(!same_origin(
            &u("http://h.example/a"),
            &u("https://h.example/a")
        ));
        assert!(!same_origin(
            &u("http://h.example/a"),
            &u("http://h.example:81/a")
        ));
        assert!(!same_origin(
            &u("http://h.example/a"),
            &u("http://g.example/a")
        ));
    }
}
