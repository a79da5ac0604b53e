//! The generation-8 route/model catalog: a built-in catalog shipped with the binary, overlaid by
//! a pack's `catalog.toml` fragment.

use crate::diag::{Diags, Rejected};
use crate::model::{INPUT_MODALITIES, OUTPUT_MODALITIES, REASONING, SCHEMA_VERSION};
use crate::strict::{Tbl, parse_table};
use crate::toolmcp::is_env_name;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The catalog compiled into the binary.
pub const BUILTIN_CATALOG: &str = include_str!("builtin_catalog.toml");
/// File name used in diagnostics about the built-in catalog.
pub const BUILTIN_FILE: &str = "<builtin>/catalog.toml";

/// Drivers the runtime can execute. `catalog_only` routes are listed for discovery but cannot run.
pub const DRIVERS: &[&str] = &[
    "codex_builtin",
    "openai_responses",
    "openai_chat",
    "anthropic_messages",
    "catalog_only",
];
/// Wire transports a route may carry.
pub const TRANSPORTS: &[&str] = &["responses", "chat_completions", "messages"];

/// A route: one way of reaching a provider.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Route {
    pub namespace: String,
    pub driver: String,
    pub transports: Vec<String>,
    pub input_modalities: Vec<String>,
    pub output_modalities: Vec<String>,
    pub preserves_tool_images: bool,
    pub preserves_documents: bool,
    pub backends: Vec<String>,
    pub resource_group: String,
    /// Codex built-in provider id, for routes Codex serves itself.
    pub provider: Option<String>,
    /// Switchyard/gateway endpoint for every other route.
    pub base_url: Option<String>,
    /// Name (never value) of the environment variable holding the credential.
    pub credential_env: Option<String>,
}

impl Route {
    /// Whether the runtime can drive this route (as opposed to a catalog-only listing).
    pub fn executable(&self) -> bool {
        self.driver != "catalog_only"
    }
}

/// A model reachable through one route, keyed `<route>__<model>`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Model {
    /// The provider's own model name.
    pub name: String,
    pub agent_compatible: bool,
    pub tool_calling: bool,
    pub reasoning: Vec<String>,
    pub input_modalities: Vec<String>,
    pub output_modalities: Vec<String>,
    pub structured_output: bool,
    pub resource_group: Option<String>,
}

/// A weighted capacity pool shared by the roles bound to it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ResourceGroup {
    pub capacity: u32,
    pub description: String,
}

/// A whole catalog (or a fragment before merging).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Catalog {
    pub resource_groups: BTreeMap<String, ResourceGroup>,
    pub routes: BTreeMap<String, Route>,
    pub models: BTreeMap<String, Model>,
}

/// Split a model key into its route and model parts.
pub fn split_key(key: &str) -> Option<(&str, &str)> {
    let (r, m) = key.split_once("__")?;
    if r.is_empty() || m.is_empty() || m.contains("__") {
        return None;
    }
    Some((r, m))
}

fn is_catalog_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
        && !s.contains("__")
}

impl Catalog {
    /// The built-in catalog. It is checked by a test, so a failure here is a build defect.
    pub fn builtin() -> Catalog {
        let mut d = Diags::default();
        let c = parse_fragment(BUILTIN_FILE, BUILTIN_CATALOG, &mut d).unwrap_or_default();
        let merged = Catalog::default().overlay(c, BUILTIN_FILE, &mut d);
        debug_assert!(d.is_empty(), "built-in catalog invalid: {d:?}");
        merged
    }

    /// Overlay a fragment: entries replace same-keyed entries whole, then references are checked.
    pub fn overlay(mut self, frag: Catalog, file: &str, d: &mut Diags) -> Catalog {
        self.resource_groups.extend(frag.resource_groups.clone());
        self.routes.extend(frag.routes.clone());
        self.models.extend(frag.models.clone());
        // Only what the fragment introduced is reported against it; the base was checked already.
        for (id, r) in &frag.routes {
            if !self.resource_groups.contains_key(&r.resource_group) {
                d.push(
                    file,
                    format!("routes.{id}.resource_group"),
                    "catalog_unknown_resource_group",
                    format!(
                        "resource group `{}` is not in the catalog",
                        r.resource_group
                    ),
                );
            }
        }
        for (key, m) in &frag.models {
            if let Some((route, _)) = split_key(key)
                && !self.routes.contains_key(route)
            {
                d.push(
                    file,
                    format!("models.{key}"),
                    "catalog_unknown_route",
                    format!("route `{route}` is not in the catalog"),
                );
            }
            if let Some(g) = &m.resource_group
                && !self.resource_groups.contains_key(g)
            {
                d.push(
                    file,
                    format!("models.{key}.resource_group"),
                    "catalog_unknown_resource_group",
                    format!("resource group `{g}` is not in the catalog"),
                );
            }
        }
        self
    }

    /// The resource group a model binding uses when the role names none.
    pub fn default_group(&self, key: &str) -> Option<String> {
        let m = self.models.get(key)?;
        if let Some(g) = &m.resource_group {
            return Some(g.clone());
        }
        let (route, _) = split_key(key)?;
        self.routes.get(route).map(|r| r.resource_group.clone())
    }

    /// The sub-catalog a snapshot carries: only the bound models, their routes and groups.
    pub fn slice<'a>(
        &self,
        keys: impl IntoIterator<Item = &'a str>,
        groups: impl IntoIterator<Item = &'a str>,
    ) -> Catalog {
        let mut out = Catalog::default();
        for k in keys {
            if let (Some(m), Some((r, _))) = (self.models.get(k), split_key(k)) {
                out.models.insert(k.to_string(), m.clone());
                if let Some(route) = self.routes.get(r) {
                    out.routes.insert(r.to_string(), route.clone());
                }
            }
        }
        for g in groups {
            if let Some(rg) = self.resource_groups.get(g) {
                out.resource_groups.insert(g.to_string(), rg.clone());
            }
        }
        out
    }
}

/// Parse a catalog file (the built-in one or a pack fragment) without cross-references.
pub fn parse_fragment(file: &str, text: &str, d: &mut Diags) -> Option<Catalog> {
    let table = parse_table(file, text, d)?;
    let t = Tbl::new(file, "", &table);
    if !t.has("schema_version") {
        t.missing(d, "schema_version");
    } else if let Some(v) = t.int(d, "schema_version")
        && v != SCHEMA_VERSION
    {
        t.err(
            d,
            "schema_version",
            "schema_version_unsupported",
            format!("only generation-{SCHEMA_VERSION} catalogs are read; found {v}"),
        );
    }
    let mut c = Catalog::default();
    if let Some(gs) = t.table(d, "resource_groups") {
        for (id, g) in gs.entries(d) {
            if !is_catalog_id(&id) {
                d.push(
                    file,
                    g.path(),
                    "catalog_id_format",
                    format!("`{id}` must be snake_case without `__`"),
                );
            }
            let capacity = match g.int_in(d, "capacity", 1, 1024, "catalog_range") {
                Some(v) => v as u32,
                None => {
                    if !g.has("capacity") {
                        g.missing(d, "capacity");
                    }
                    1
                }
            };
            let description = g.str(d, "description").unwrap_or_default();
            g.finish(d);
            c.resource_groups.insert(
                id,
                ResourceGroup {
                    capacity,
                    description,
                },
            );
        }
        gs.finish(d);
    }
    if let Some(rs) = t.table(d, "routes") {
        for (id, r) in rs.entries(d) {
            if !is_catalog_id(&id) {
                d.push(
                    file,
                    r.path(),
                    "catalog_id_format",
                    format!("route id `{id}` must be snake_case without `__`"),
                );
            }
            let namespace = r.req_str(d, "namespace").unwrap_or_default();
            if !namespace.is_empty() && id != namespace && !id.starts_with(&format!("{namespace}_"))
            {
                r.err(
                    d,
                    "namespace",
                    "catalog_route_namespace",
                    format!("route `{id}` does not belong to namespace `{namespace}`"),
                );
            }
            let driver = req_enum(&r, d, "driver", DRIVERS, "catalog_driver");
            let transports = req_enum_list(&r, d, "transports", TRANSPORTS, "catalog_transport");
            let input_modalities = req_enum_list(
                &r,
                d,
                "input_modalities",
                INPUT_MODALITIES,
                "catalog_modality",
            );
            let output_modalities = req_enum_list(
                &r,
                d,
                "output_modalities",
                OUTPUT_MODALITIES,
                "catalog_modality",
            );
            let preserves_tool_images = r.bool(d, "preserves_tool_images").unwrap_or(false);
            let preserves_documents = r.bool(d, "preserves_documents").unwrap_or(false);
            let backends = req_enum_list(&r, d, "backends", &["mcp", "native"], "catalog_backend");
            let resource_group = r.req_str(d, "resource_group").unwrap_or_default();
            let provider = r.str(d, "provider");
            let base_url = r.str(d, "base_url");
            let credential_env = r.str(d, "credential_env");
            if driver == "codex_builtin" && provider.is_none() {
                r.err(
                    d,
                    "provider",
                    "catalog_route_endpoint",
                    "a codex_builtin route names the Codex provider id it uses",
                );
            }
            if driver != "codex_builtin" && driver != "catalog_only" && base_url.is_none() {
                r.err(
                    d,
                    "base_url",
                    "catalog_route_endpoint",
                    "an executable non-builtin route needs its gateway base_url",
                );
            }
            if let Some(e) = &credential_env
                && !is_env_name(e)
            {
                r.err(
                    d,
                    "credential_env",
                    "catalog_credential_env",
                    "credential_env names an environment variable (A-Z, 0-9, _), never a value",
                );
            }
            r.finish(d);
            c.routes.insert(
                id,
                Route {
                    namespace,
                    driver,
                    transports,
                    input_modalities,
                    output_modalities,
                    preserves_tool_images,
                    preserves_documents,
                    backends,
                    resource_group,
                    provider,
                    base_url,
                    credential_env,
                },
            );
        }
        rs.finish(d);
    }
    if let Some(ms) = t.table(d, "models") {
        for (key, m) in ms.entries(d) {
            if split_key(&key).is_none_or(|(r, mm)| !is_catalog_id(r) || !is_catalog_id(mm)) {
                d.push(
                    file,
                    m.path(),
                    "catalog_model_key",
                    format!("model key `{key}` must be exactly `<route>__<model>`"),
                );
            }
            let name = m.req_str(d, "name").unwrap_or_default();
            let agent_compatible = m.bool(d, "agent_compatible").unwrap_or(false);
            let tool_calling = m.bool(d, "tool_calling").unwrap_or(false);
            let reasoning = m
                .enum_list(d, "reasoning", REASONING, "catalog_reasoning")
                .unwrap_or_default();
            let input_modalities = req_enum_list(
                &m,
                d,
                "input_modalities",
                INPUT_MODALITIES,
                "catalog_modality",
            );
            let output_modalities = req_enum_list(
                &m,
                d,
                "output_modalities",
                OUTPUT_MODALITIES,
                "catalog_modality",
            );
            let structured_output = m.bool(d, "structured_output").unwrap_or(false);
            let resource_group = m.str(d, "resource_group");
            m.finish(d);
            c.models.insert(
                key,
                Model {
                    name,
                    agent_compatible,
                    tool_calling,
                    reasoning,
                    input_modalities,
                    output_modalities,
                    structured_output,
                    resource_group,
                },
            );
        }
        ms.finish(d);
    }
    t.finish(d);
    Some(c)
}

fn req_enum(t: &Tbl, d: &mut Diags, k: &str, allowed: &[&str], rule: &'static str) -> String {
    if !t.has(k) {
        t.missing(d, k);
        return String::new();
    }
    t.enum_str(d, k, allowed, rule).unwrap_or_default()
}

fn req_enum_list(
    t: &Tbl,
    d: &mut Diags,
    k: &str,
    allowed: &[&str],
    rule: &'static str,
) -> Vec<String> {
    if !t.has(k) {
        t.missing(d, k);
        return Vec::new();
    }
    t.enum_list(d, k, allowed, rule).unwrap_or_default()
}

/// The built-in catalog overlaid by a pack fragment's text, if any.
pub fn resolve(fragment: Option<(&str, &str)>) -> Result<Catalog, Rejected> {
    let base = Catalog::builtin();
    let Some((file, text)) = fragment else {
        return Ok(base);
    };
    let mut d = Diags::default();
    let frag = parse_fragment(file, text, &mut d).unwrap_or_default();
    let merged = base.overlay(frag, file, &mut d);
    if d.is_empty() {
        Ok(merged)
    } else {
        Err(Rejected(d.into_sorted()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalog_is_valid_and_holds_the_spec_keys() {
        let mut d = Diags::default();
        let frag = parse_fragment(BUILTIN_FILE, BUILTIN_CATALOG, &mut d).unwrap();
        let c = Catalog::default().overlay(frag, BUILTIN_FILE, &mut d);
        assert!(d.is_empty(), "{:?}", d.into_sorted());
        for key in [
            "codex_chatgpt_builtin__gpt_5_6_terra",
            "opencode_zen_anthropic_messages__claude_sonnet_5",
            "opencode_go_openai_chat__deepseek_v4_pro",
        ] {
            assert!(c.models.contains_key(key), "{key}");
            assert!(c.default_group(key).is_some(), "{key} has a resource group");
        }
    }

    #[test]
    fn overlay_replaces_entries_whole_by_key() {
        let mut d = Diags::default();
        let frag = parse_fragment(
            "catalog.toml",
            "schema_version = 8\n[resource_groups.opencode_go]\ncapacity = 9\n",
            &mut d,
        )
        .unwrap();
        let c = Catalog::builtin().overlay(frag, "catalog.toml", &mut d);
        assert!(d.is_empty());
        assert_eq!(c.resource_groups["opencode_go"].capacity, 9);
        assert_eq!(
            c.resource_groups["opencode_go"].description, "",
            "no field-level merge"
        );
    }

    #[test]
    fn route_outside_its_namespace_is_rejected() {
        let mut d = Diags::default();
        let text = "schema_version = 8\n[routes.other_chat]\nnamespace = \"local\"\ndriver = \"catalog_only\"\ntransports = [\"responses\"]\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\nbackends = [\"mcp\"]\nresource_group = \"opencode_go\"\n";
        parse_fragment("catalog.toml", text, &mut d);
        let items = d.into_sorted();
        assert!(
            items
                .iter()
                .any(|x| x.rule == "catalog_route_namespace"
                    && x.path == "routes.other_chat.namespace"),
            "{items:?}"
        );
    }
}
