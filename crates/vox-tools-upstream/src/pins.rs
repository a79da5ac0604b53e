//! Pinning: a tool's definition hashed, recorded in the journey store the first time it is
//! seen, and served only while it is the approved one; the served tools rebuilt from every
//! server's pins.

use crate::federation::served_descriptor;
use crate::surface::{Served, Server, ToolState, Upstreams, Withheld, lock};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;
use vox_core::UpstreamTool;
use vox_mcp_registry::SEPARATOR;

/// The pinned form of a tool's definition: `sha256:<hex>` of its canonical JSON (name, title,
/// description, schemas, annotations; keys sorted).
pub fn definition(tool: &Value) -> (Value, String) {
    let mut def = serde_json::Map::new();
    for key in [
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
    ] {
        if let Some(v) = tool.get(key).filter(|v| !v.is_null()) {
            def.insert(key.to_owned(), v.clone());
        }
    }
    let def = Value::Object(def);
    // serde_json's map is ordered by key: the text is canonical.
    let hash = Sha256::digest(def.to_string().as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    (def, format!("sha256:{hex}"))
}

/// How long after a server's first listing ever its new tools are still pinned as first seen.
const FIRST_SEEN_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

/// An MCP tool name: 1 to 128 of `[A-Za-z0-9_.-]`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl Upstreams {
    /// Records `server`'s listing against the pins and serves what is approved.
    pub(crate) fn take_listing(&self, server: &Arc<Server>, tools: &[Value]) {
        let id = &server.config.id;
        // The first time a server is listed anywhere (no pin of it in the store), what it lists
        // until its first call (at most a minute) is pinned as first seen: servers register
        // tools right after `initialize` (capability-dependent ones) and say so with
        // `list_changed`. After that, a tool it adds waits for a person.
        let now = std::time::Instant::now();
        let first = {
            let mut until = lock(&server.first_seen_until);
            if until.is_none()
                && let Some(store) = &self.store
            {
                let fresh = store.upstream_pins(Some(id)).is_ok_and(|p| p.is_empty());
                *until = Some(if fresh { now + FIRST_SEEN_WINDOW } else { now });
            }
            until.is_some_and(|t| now < t)
        };
        let mut states = Vec::with_capacity(tools.len());
        for t in tools {
            let Some(own) = t["name"].as_str() else {
                continue;
            };
            let served_as = format!("{id}{SEPARATOR}{own}");
            let (def, hash) = definition(t);
            let withheld = if !valid_name(&served_as) {
                Some(Withheld::BadName)
            } else {
                match &self.store {
                    None => Some(Withheld::NoStore),
                    Some(store) => {
                        let trust = first || server.config.trust_new_tools;
                        match store.upstream_pin_seen(id, own, &hash, &def, trust) {
                            Ok(p) if p.approved.as_deref() == Some(hash.as_str()) => None,
                            Ok(p) if p.approved.is_none() => Some(Withheld::New),
                            Ok(_) => Some(Withheld::Changed),
                            Err(e) => {
                                tracing::warn!(target: "vox.upstream", server = %id, "pin of {own}: {e}");
                                Some(Withheld::NoStore)
                            }
                        }
                    }
                }
            };
            if let Some(w) = &withheld {
                tracing::warn!(target: "vox.upstream", server = %id, tool = %own, reason = ?w, "tool withheld until a person approves it (vox upstream approve {id} {own})");
            }
            states.push(ToolState {
                tool: own.to_owned(),
                served_as,
                withheld,
                hash,
            });
        }
        lock(&server.state).tools = states;
        self.rebuild(Some((server, tools)));
    }

    /// Serves the approved tools of every current server again (after a listing, an approval,
    /// a reload), and tells clients when what is served changed. `listing` is a server's
    /// fresh descriptors; the others keep those served before.
    pub(crate) fn rebuild(&self, listing: Option<(&Arc<Server>, &[Value])>) {
        let servers = self.servers();
        let mut guard = lock(&self.served);
        let mut by_name = HashMap::new();
        let mut tools: Vec<UpstreamTool> = Vec::new();
        for server in servers.iter() {
            let st = lock(&server.state);
            let descriptors = listing
                .filter(|(s, _)| Arc::ptr_eq(s, server))
                .map(|(_, d)| d);
            for t in st.tools.iter().filter(|t| t.withheld.is_none()) {
                let class = server.config.class_of(&t.tool);
                // The descriptor as listed now, else the one served before.
                let descriptor = match descriptors
                    .and_then(|d| d.iter().find(|v| v["name"] == t.tool.as_str()))
                {
                    Some(v) => served_descriptor(v, &server.config.id, &t.served_as, class),
                    None => match guard.tools.iter().find(|u| u.name == t.served_as) {
                        Some(u) => u.descriptor.clone(),
                        None => continue,
                    },
                };
                by_name.insert(t.served_as.clone(), (server.clone(), t.tool.clone(), class));
                tools.push(UpstreamTool {
                    name: t.served_as.clone(),
                    descriptor,
                    class,
                });
            }
        }
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let changed = tools.len() != guard.tools.len()
            || tools
                .iter()
                .zip(guard.tools.iter())
                .any(|(a, b)| a.descriptor != b.descriptor || a.class != b.class);
        *guard = Arc::new(Served {
            tools: tools.into(),
            by_name,
        });
        drop(guard);
        if changed {
            let _ = self
                .notifier
                .send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_hashes_the_same_whatever_its_key_order() {
        let a = json!({"name": "t", "description": "d", "inputSchema": {"type": "object", "properties": {"x": {}, "a": {}}}, "_meta": {"x": 1}});
        let b = json!({"inputSchema": {"properties": {"a": {}, "x": {}}, "type": "object"}, "description": "d", "name": "t"});
        assert_eq!(definition(&a).1, definition(&b).1);
        let c = json!({"name": "t", "description": "changed", "inputSchema": {"type": "object"}});
        assert_ne!(definition(&a).1, definition(&c).1);
        assert!(definition(&a).1.starts_with("sha256:"));
    }

    #[test]
    fn tool_names_are_bounded_mcp_names() {
        assert!(valid_name("every__get-sum"));
        assert!(!valid_name("every__has space"));
        assert!(!valid_name(&"x".repeat(129)));
    }
}
