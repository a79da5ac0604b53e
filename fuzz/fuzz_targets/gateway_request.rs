//! The gateway's request parsing (`vox_gateway`): the Host, absolute-target and Origin checks,
//! the bearer token, the REST session header, the `/v1/tools/call` body and `/v1/ws` messages.
//!
//! The input is lines (split at `\n`):
//! 0. the settings: the first byte picks the bound address, the rest is
//!    `VOX_MCP_HTTP_ALLOWED_HOSTS` and, after a `|`, `VOX_MCP_HTTP_ALLOWED_ORIGINS`;
//! 1. `Host` headers, separated by `\r` (none when the line is missing);
//! 2. the request target; 3. `Origin`; 4. `Authorization`; 5. `X-Vox-Session`;
//! 6. and on: a REST body, also sent as a WebSocket text message.
//!
//! What must hold, against checks written here independently from the documented rules:
//! - the settings load exactly when every allowed-hosts entry is a host name or address with
//!   an optional port (or a bare IPv6 address);
//! - a `Host` value is accepted exactly when it is `name[:port]` or `[v6][:port]` (nothing
//!   else: no userinfo, path or trailing characters) naming a loopback name, the bound address
//!   or a listed host (with its port, when the entry has one); whatever is accepted and is an
//!   IP address is 127.0.0.1, ::1, the bound address or a listed one;
//! - an `Origin` is accepted exactly when listed, or `http(s)://` and an accepted host;
//! - the request check refuses a missing or repeated Host first, then a Host or absolute target
//!   naming no allowed host, then an Origin that is not allowed, and accepts the rest;
//! - the bearer token is what follows `Bearer ` without surrounding whitespace;
//! - the REST session stays inside the caller's namespace: `rest:<agent>` or
//!   `rest:<agent>:<1-128 of [A-Za-z0-9_.:-]>`;
//! - a tool call body is taken exactly when it is a JSON object with a string `name` (the
//!   last one, as JSON objects keep), `args` as given or `null`;
//! - a WebSocket message is taken or answered with an `error` frame as documented, and an id
//!   that is taken comes back as sent (an integer exactly as written, a string of at most 256
//!   bytes); every answer survives being sent as text.
#![no_main]

use http::{HeaderMap, HeaderValue, Uri, header};
use libfuzzer_sys::fuzz_target;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use vox_gateway::{
    GatewayConfig, HostRefusal, WsRequest, bearer_token, check_host_and_origin, parse_call_body,
    parse_ws_request, rest_session,
};

const BINDS: [&str; 6] = ["127.0.0.1", "::1", "0.0.0.0", "10.1.2.3", "fd00::1", "::"];

/// `host[:port]` or `[v6][:port]`, read by hand: the host lower-cased (an IPv6 address in its
/// canonical form) and the port.
fn host_port(s: &str) -> Option<(String, Option<u16>)> {
    let (host, rest) = if let Some(inner) = s.strip_prefix('[') {
        let close = inner.find(']')?;
        let v6: Ipv6Addr = inner[..close].parse().ok()?;
        (v6.to_string(), &inner[close + 1..])
    } else {
        let end = s.find(':').unwrap_or(s.len());
        let name = &s[..end];
        let name_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.';
        if name.is_empty() || !name.bytes().all(name_byte) {
            return None;
        }
        (name.to_ascii_lowercase(), &s[end..])
    };
    let port = match rest {
        "" => None,
        _ => {
            let digits = rest.strip_prefix(':')?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(digits.parse::<u16>().ok()?)
        }
    };
    Some((host, port))
}

/// An allowed-hosts entry: a bare IPv6 address, or what a Host header may be.
fn entry(s: &str) -> Option<(String, Option<u16>)> {
    match s.parse::<Ipv6Addr>() {
        Ok(ip) => Some((ip.to_string(), None)),
        Err(_) => host_port(s),
    }
}

struct Model {
    bind: IpAddr,
    entries: Vec<(String, Option<u16>)>,
    origins: Vec<String>,
}

impl Model {
    fn host_allowed(&self, s: &str) -> bool {
        let Some((host, port)) = host_port(s) else {
            return false;
        };
        ["localhost", "127.0.0.1", "::1"].contains(&host.as_str())
            || (!self.bind.is_unspecified() && host == self.bind.to_string())
            || self
                .entries
                .iter()
                .any(|(h, p)| *h == host && p.is_none_or(|p| port == Some(p)))
    }

    fn origin_allowed(&self, o: &str) -> bool {
        if self.origins.iter().any(|x| x == o) {
            return true;
        }
        let Some(i) = o.find("://") else {
            return false;
        };
        let scheme = o[..i].to_ascii_lowercase();
        (scheme == "http" || scheme == "https") && self.host_allowed(&o[i + 3..])
    }

    /// The security property, stated on addresses: an accepted host that is an IP address is
    /// a loopback one the gateway trusts, the bound one or a listed one.
    fn address_is_trusted(&self, s: &str) -> bool {
        let host = match s.strip_prefix('[') {
            Some(inner) => &inner[..inner.find(']').unwrap_or(inner.len())],
            None => s.split(':').next().unwrap_or(s),
        };
        let Ok(ip) = host.parse::<IpAddr>() else {
            return true;
        };
        ip == IpAddr::V4(Ipv4Addr::LOCALHOST)
            || ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
            || (ip == self.bind && !ip.is_unspecified())
            || self
                .entries
                .iter()
                .any(|(h, _)| h.parse::<IpAddr>().is_ok_and(|e| e == ip))
    }
}

/// A header value's text as `HeaderValue::to_str` gives it: visible ASCII (and tab) only.
fn visible(v: &[u8]) -> Option<&str> {
    v.iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
        .then(|| std::str::from_utf8(v).ok())
        .flatten()
}

/// A JSON object's members in order, duplicates kept, values as written.
struct Members(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Members, A::Error> {
                let mut v = Vec::new();
                while let Some(e) = m.next_entry::<String, Box<RawValue>>()? {
                    v.push(e);
                }
                Ok(Members(v))
            }
        }
        d.deserialize_map(V)
    }
}

impl Members {
    /// A member's value as written: the last one of that name (as a JSON object keeps it).
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.get())
    }
}

/// How deeply arrays and objects nest in (possibly malformed) JSON text.
fn depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Whether bytes are JSON text, and JSON serde_json can hold: its numbers within f64's range
/// (`1e400` is JSON but no `Value`, so the gateway refuses it as not JSON).
fn json(bytes: &[u8]) -> bool {
    serde_json::from_slice::<Box<RawValue>>(bytes).is_ok()
        && serde_json::from_slice::<Value>(bytes).is_ok()
}

fn text(raw: &str) -> Value {
    serde_json::from_str(raw).expect("raw JSON parses")
}

fn check_hosts(config: &GatewayConfig, model: &Model, s: &str) {
    let allowed = config.host_allowed(s);
    assert_eq!(allowed, model.host_allowed(s), "Host {s:?}");
    if allowed {
        assert!(model.address_is_trusted(s), "Host {s:?} is not a trusted address");
    }
    assert_eq!(config.origin_allowed(s), model.origin_allowed(s), "Origin {s:?}");
    for scheme in ["http://", "HTTPS://"] {
        let o = format!("{scheme}{s}");
        assert_eq!(config.origin_allowed(&o), model.origin_allowed(&o), "Origin {o:?}");
    }
}

fn check_body(body: &[u8]) {
    let deep = depth(body) > 100;
    let got = parse_call_body(body);
    if deep {
        return;
    }
    let members = serde_json::from_slice::<Members>(body);
    match (got, json(body)) {
        (Err(m), false) => assert!(m.starts_with("body is not JSON"), "{m}"),
        (Ok(_), false) => panic!("malformed JSON taken as a call"),
        (got, true) => {
            let name = members.as_ref().ok().and_then(|m| {
                serde_json::from_str::<String>(m.get("name")?).ok()
            });
            match (got, name) {
                (Ok((n, args)), Some(name)) => {
                    assert_eq!(n, name);
                    let members = members.as_ref().expect("an object");
                    assert_eq!(args, members.get("args").map_or(Value::Null, text));
                }
                (Err(m), None) => assert_eq!(m, "body needs a string `name`"),
                (got, name) => panic!("body taken as {got:?}, expected name {name:?}"),
            }
        }
    }
}

/// The answer to a refused message, and that it carries `id` (`null` for none).
fn assert_error(reply: &Value, id: &Value, starts: &str) {
    assert_eq!(reply["type"], "error", "{reply}");
    assert_eq!(reply["status"], 400, "{reply}");
    assert_eq!(reply["error"]["code"], "invalid_request", "{reply}");
    assert_eq!(&reply["id"], id, "{reply}");
    let message = reply["error"]["message"].as_str().expect("a message");
    assert!(message.starts_with(starts), "{message}");
    let sent: Value = serde_json::from_str(&reply.to_string()).expect("the answer is JSON");
    assert_eq!(&sent, reply);
}

fn check_ws(text_msg: &str) {
    let deep = depth(text_msg.as_bytes()) > 100;
    let got = parse_ws_request(text_msg);
    if deep {
        return;
    }
    if !json(text_msg.as_bytes()) {
        let reply = got.expect_err("malformed JSON taken");
        return assert_error(&reply, &Value::Null, "not JSON: ");
    }
    let members = serde_json::from_str::<Members>(text_msg).ok();
    let field = |name: &str| members.as_ref().and_then(|m| m.get(name));
    // The id as written, and whether it comes back as written.
    let id_raw = field("id");
    let id = id_raw.map_or(Value::Null, text);
    let id_ok = match id_raw.map(str::trim) {
        None | Some("null") => true,
        Some(raw) if raw.starts_with('"') => id.as_str().is_some_and(|s| s.len() <= 256),
        Some(raw) => {
            // An integer comes back exactly: digits only, within 64 bits; not `-0`, which
            // serde_json reads as the float -0.0 (and would echo as `-0.0`).
            let digits = raw.strip_prefix('-').unwrap_or(raw);
            raw != "-0"
                && !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && raw.parse::<i128>().is_ok_and(|n| {
                    i64::try_from(n).is_ok() || u64::try_from(n).is_ok()
                })
        }
    };
    if !id_ok {
        let reply = got.expect_err("an id that would not come back as sent");
        return assert_error(&reply, &Value::Null, "`id` must be");
    }
    let kind = field("type").and_then(|t| serde_json::from_str::<String>(t).ok());
    let name = field("name").and_then(|t| serde_json::from_str::<String>(t).ok());
    let args = field("args").map_or(Value::Null, text);
    match (kind.as_deref(), got) {
        (Some("list_tools"), Ok(WsRequest::ListTools { id: got_id })) => {
            assert_eq!(got_id, id);
        }
        (Some("call_tool"), Ok(WsRequest::CallTool { id: got_id, name: n, args: a })) => {
            assert_eq!(got_id, id);
            assert_eq!(Some(n), name);
            assert_eq!(a, args);
        }
        (Some("call_tool"), Err(reply)) if name.is_none() => {
            assert_error(&reply, &id, "call_tool needs a string `name`");
        }
        (k, Err(reply)) if k != Some("list_tools") && k != Some("call_tool") => {
            assert_error(&reply, &id, "type must be list_tools or call_tool");
        }
        (k, got) => panic!("type {k:?} gave {got:?}"),
    }
    if let Some(raw) = id_raw
        && id.is_number()
    {
        // An integer id is echoed as the number written.
        let written = raw.trim().parse::<i128>().expect("an integer");
        assert_eq!(id.to_string(), written.to_string());
    }
}

fuzz_target!(|input: &[u8]| {
    let mut lines = input.split(|&b| b == b'\n');
    let settings = lines.next().unwrap_or_default();
    let (bind, lists) = match settings.split_first() {
        Some((b, rest)) => (BINDS[*b as usize % BINDS.len()], rest),
        None => (BINDS[0], &[][..]),
    };
    let Ok(lists) = std::str::from_utf8(lists) else {
        return;
    };
    let (hosts, origins) = lists.split_once('|').unwrap_or((lists, ""));
    let vars = [
        ("VOX_MCP_HTTP_HOST", bind),
        ("VOX_MCP_HTTP_BEARER_TOKEN", "0123456789abcdef-write"),
        ("VOX_MCP_HTTP_ALLOWED_HOSTS", hosts),
        ("VOX_MCP_HTTP_ALLOWED_ORIGINS", origins),
    ];
    let config = GatewayConfig::from_lookup(|k| {
        vars.iter()
            .find(|(name, v)| *name == k && !v.is_empty())
            .map(|(_, v)| (*v).to_owned())
    });
    let listed = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let entries: Option<Vec<_>> = listed(hosts).iter().map(|h| entry(h)).collect();
    let (config, entries) = match (config, entries) {
        (Ok(c), Some(e)) => (c, e),
        (Err(_), None) => return,
        (c, e) => panic!("settings {lists:?}: loaded {:?}, entries {e:?}", c.map(|_| ())),
    };
    let model = Model {
        bind: bind.parse().expect("an address"),
        entries,
        origins: listed(origins),
    };

    let host_line = lines.next();
    let target = lines.next();
    let origin = lines.next();
    let authorization = lines.next();
    let session = lines.next();
    let body = lines.collect::<Vec<_>>().join(&b'\n');

    let mut headers = HeaderMap::new();
    let mut host_values = Vec::new();
    for h in host_line.into_iter().flat_map(|l| l.split(|&b| b == b'\r')) {
        if let Ok(v) = HeaderValue::from_bytes(h) {
            headers.append(header::HOST, v);
            host_values.push(h);
            if let Some(s) = visible(h) {
                check_hosts(&config, &model, s);
            }
        }
    }
    let origin = origin.filter(|o| HeaderValue::from_bytes(o).is_ok());
    if let Some(o) = origin {
        headers.insert(header::ORIGIN, HeaderValue::from_bytes(o).expect("valid"));
        if let Some(s) = visible(o) {
            check_hosts(&config, &model, s);
        }
    }
    let uri = target
        .and_then(|t| Uri::try_from(t).ok())
        .unwrap_or_else(|| Uri::from_static("/"));
    if let Some(a) = uri.authority() {
        check_hosts(&config, &model, a.as_str());
    }
    let expected = if host_values.len() != 1 {
        Err(HostRefusal::HostRequired)
    } else if !model.host_allowed(visible(host_values[0]).unwrap_or(""))
        || uri.authority().is_some_and(|a| !model.host_allowed(a.as_str()))
    {
        Err(HostRefusal::HostNotAllowed)
    } else if origin.is_some_and(|o| !model.origin_allowed(visible(o).unwrap_or(""))) {
        Err(HostRefusal::OriginNotAllowed)
    } else {
        Ok(())
    };
    assert_eq!(check_host_and_origin(&config, &headers, &uri), expected);

    if let Some(a) = authorization {
        let token = bearer_token(a);
        let rest = a.strip_prefix(b"Bearer ").or_else(|| a.strip_prefix(b"bearer "));
        assert_eq!(token.is_some(), rest.is_some());
        if let (Some(t), Some(rest)) = (token, rest) {
            assert_eq!(t, rest.trim_ascii());
            assert!(t.first().is_none_or(|b| !b.is_ascii_whitespace()));
            assert!(t.last().is_none_or(|b| !b.is_ascii_whitespace()));
        }
    }

    let agent = "http:write";
    let mut session_headers = HeaderMap::new();
    let value = session.and_then(|s| HeaderValue::from_bytes(s).ok().map(|v| (s, v)));
    if let Some((_, v)) = &value {
        session_headers.insert("x-vox-session", v.clone());
    }
    let got = rest_session(agent, &session_headers);
    match value {
        None => assert_eq!(got.as_deref(), Ok("rest:http:write")),
        Some((raw, _)) => {
            let ok = (1..=128).contains(&raw.len())
                && raw
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b));
            if ok {
                let want = format!("rest:{agent}:{}", std::str::from_utf8(raw).expect("ASCII"));
                assert_eq!(got, Ok(want));
            } else {
                assert!(got.is_err(), "session header {raw:?} taken as {got:?}");
            }
        }
    }

    check_body(&body);
    if let Ok(t) = std::str::from_utf8(&body) {
        check_ws(t);
    }
});
