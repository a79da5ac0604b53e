//! What clients see of the upstream servers, and how their calls get there: the `_meta` and
//! names vox serves them under (tools `<server>__<tool>`, resources `upstream://<server>/<its
//! URI>`, prompts `<server>__<prompt>`), and `Upstreams` as the core's `UpstreamTools`.

use crate::server::Events;
use crate::surface::{Server, Upstreams, lock};
use serde_json::{Value, json};
use std::sync::{Arc, Weak};
use vox_core::{CallCtx, ToolError, ToolOutcome, UpstreamTool};
use vox_mcp_registry::{SEPARATOR, UpstreamClass};

/// Where a server's resources live in vox's namespace: `upstream://<server>/<its own URI>`.
const RESOURCE_SCHEME: &str = "upstream://";

fn resource_uri(server: &str, uri: &str) -> String {
    format!("{RESOURCE_SCHEME}{server}/{uri}")
}

/// `(server, its own URI)` of a namespaced resource URI.
fn split_resource_uri(uri: &str) -> Option<(&str, &str)> {
    uri.strip_prefix(RESOURCE_SCHEME)?.split_once('/')
}

/// `_meta` saying a descriptor is from upstream server `server`.
fn from_upstream(mut d: Value, server: &str) -> Value {
    let mut meta = d
        .get("_meta")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    meta.insert("vox_source".into(), json!("upstream"));
    meta.insert("vox_server".into(), json!(server));
    d["_meta"] = Value::Object(meta);
    d
}

/// A tool's descriptor as vox serves it: its name prefixed, its description, schemas and
/// annotations as the server said, `_meta` saying where it is from and how vox classifies it.
pub(crate) fn served_descriptor(
    tool: &Value,
    server: &str,
    served_as: &str,
    class: UpstreamClass,
) -> Value {
    let mut d = tool.clone();
    d["name"] = json!(served_as);
    let mut d = from_upstream(d, server);
    let mut meta = d["_meta"].as_object().cloned().unwrap_or_default();
    meta.insert(
        "vox_class".into(),
        json!({
            "exposure": class.exposure.as_str(),
            "side_effect_class": class.side_effect_class.as_str(),
            "read_role_eligible": class.read_role_eligible,
        }),
    );
    d["_meta"] = Value::Object(meta);
    d
}

/// A connection's events for its server.
pub(crate) struct Changed {
    pub(crate) upstreams: Weak<Upstreams>,
    pub(crate) server: Weak<Server>,
}

impl Events for Changed {
    fn lists_changed(&self) {
        if let (Some(u), Some(s)) = (self.upstreams.upgrade(), self.server.upgrade()) {
            tokio::spawn(async move { u.relist(&s).await });
        }
    }
}

impl vox_core::UpstreamTools for Upstreams {
    fn resources(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for s in self.servers().iter() {
            let id = &s.config.id;
            for r in lock(&s.resources).iter() {
                let Some(uri) = r["uri"].as_str() else {
                    continue;
                };
                let mut d = r.clone();
                d["uri"] = json!(resource_uri(id, uri));
                out.push((id.clone(), from_upstream(d, id)));
            }
        }
        out
    }

    fn prompts(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for s in self.servers().iter() {
            let id = &s.config.id;
            for p in lock(&s.prompts).iter() {
                let Some(name) = p["name"].as_str() else {
                    continue;
                };
                let mut d = p.clone();
                d["name"] = json!(format!("{id}{SEPARATOR}{name}"));
                out.push((id.clone(), from_upstream(d, id)));
            }
        }
        out
    }

    fn server_of(&self, uri_or_name: &str) -> Option<String> {
        let server = match split_resource_uri(uri_or_name) {
            Some((server, _)) => server,
            None => uri_or_name.split_once(SEPARATOR)?.0,
        };
        self.server(server).map(|_| server.to_owned())
    }

    fn read<'a>(&'a self, uri: &'a str) -> vox_core::UpstreamFuture<'a, vox_core::ResourceBody> {
        Box::pin(async move {
            let missing = || ToolError::not_found(format!("no resource {uri}"));
            let (server, own) = split_resource_uri(uri).ok_or_else(missing)?;
            let server = self.server(server).ok_or_else(missing)?;
            let conn = self.connection(&server).await?;
            conn.read(own, server.config.call_timeout).await
        })
    }

    fn get_prompt<'a>(&'a self, name: &'a str, args: Value) -> vox_core::UpstreamFuture<'a, Value> {
        Box::pin(async move {
            let missing = || ToolError::not_found(format!("no prompt {name}"));
            let (server, own) = name.split_once(SEPARATOR).ok_or_else(missing)?;
            let server = self.server(server).ok_or_else(missing)?;
            let conn = self.connection(&server).await?;
            conn.prompt(own, args, server.config.call_timeout).await
        })
    }

    fn tools(&self) -> Arc<[UpstreamTool]> {
        self.start_on_first_use();
        self.served().tools.clone()
    }

    fn class_of(&self, name: &str) -> Option<UpstreamClass> {
        self.served().by_name.get(name).map(|(_, _, c)| *c)
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        args: Value,
        call: &'a CallCtx,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ToolOutcome> + Send + 'a>> {
        Box::pin(async move {
            let Some((server, own, _)) = self.served().by_name.get(name).cloned() else {
                return ToolOutcome::Failed(ToolError::not_found(format!(
                    "upstream tool {name} is not served now"
                )));
            };
            server.first_call();
            let conn = match self.connection(&server).await {
                Ok(c) => c,
                Err(e) => return ToolOutcome::Failed(e),
            };
            let outcome = conn
                .call(&own, args, call, server.config.call_timeout)
                .await;
            if conn.is_closed()
                && let Some(me) = self.me.upgrade()
            {
                // Gone mid-call: start it again now, so the next call finds it.
                tokio::spawn(async move {
                    let _ = me.connection(&server).await;
                });
            }
            outcome
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_descriptors_say_where_they_are_from() {
        let d = served_descriptor(
            &json!({"name": "now", "inputSchema": {"type": "object"}, "_meta": {"theirs": 1}}),
            "time",
            "time__now",
            UpstreamClass::default(),
        );
        assert_eq!(d["name"], "time__now");
        assert_eq!(d["_meta"]["vox_source"], "upstream");
        assert_eq!(d["_meta"]["vox_server"], "time");
        assert_eq!(d["_meta"]["theirs"], 1);
        assert_eq!(d["_meta"]["vox_class"]["exposure"], "operator");
    }

    #[test]
    fn resource_uris_are_namespaced_reversibly() {
        let uri = resource_uri("every", "demo://resource/static/a.md");
        assert_eq!(uri, "upstream://every/demo://resource/static/a.md");
        assert_eq!(
            split_resource_uri(&uri),
            Some(("every", "demo://resource/static/a.md"))
        );
        assert_eq!(split_resource_uri("file:///x"), None);
    }
}
