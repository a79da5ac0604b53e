//! The compiler: a validated pack → the exact bytes of a content-addressed snapshot.
//!
//! Identity is the SHA-256 of the snapshot's MANIFEST, which lists every other file's SHA-256 and
//! path in byte order. Nothing machine-specific (paths, times, user names, credential values)
//! is ever written, so the same inputs give the same address anywhere.

use crate::catalog::split_key;
use crate::diag::Rejected;
use crate::model::{Agent, PACKAGE_VERSION, Profile, SCHEMA_VERSION};
use crate::pack::{Pack, hex};
use crate::validate::Validated;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use toml::{Table, Value};

/// Ceiling on one generated AGENTS.md.
pub const AGENTS_MD_LIMIT: usize = 32 * 1024;
/// Where the orchestration skill lives, profile-wide and inside each capable Codex home.
pub const SKILL_PATH: &str = "mmo-profile-orchestration/SKILL.md";

/// The generated snapshot, in memory.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Lowercase hex SHA-256 of `MANIFEST`.
    pub address: String,
    /// Every file by relative path, `MANIFEST` included.
    pub files: BTreeMap<String, Vec<u8>>,
}

/// What `compile --json` reports.
#[derive(Debug, Clone, Serialize)]
pub struct CompileReport {
    pub address: String,
    pub profile_id: String,
    pub package_version: &'static str,
    pub schema_version: i64,
    pub binds: BTreeMap<String, String>,
    pub ceilings: crate::ceilings::Ceilings,
    pub roles: BTreeMap<String, RoleReport>,
    pub files: BTreeMap<String, String>,
}

/// Per-role summary in the report.
#[derive(Debug, Clone, Serialize)]
pub struct RoleReport {
    pub model: String,
    pub resource_group: Option<String>,
    pub backends: Vec<String>,
    pub orchestration_skill: bool,
    pub output_schema_projected: bool,
}

fn json(v: &impl Serialize) -> Vec<u8> {
    let value = serde_json::to_value(v).map(sort_json).unwrap_or_default();
    let mut s = serde_json::to_string_pretty(&value).unwrap_or_default();
    s.push('\n');
    s.into_bytes()
}

// Snapshot bytes must not depend on whether some other crate in the build turns on
// serde_json's or toml's `preserve_order` (features unify across a workspace): inserting keys
// in sorted order gives sorted output under both map implementations.
fn sort_json(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut entries: Vec<_> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sort_json(v)))
                    .collect(),
            )
        }
        serde_json::Value::Array(a) => {
            serde_json::Value::Array(a.into_iter().map(sort_json).collect())
        }
        other => other,
    }
}

fn sort_toml(t: Table) -> Table {
    let mut entries: Vec<_> = t.into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                Value::Table(inner) => Value::Table(sort_toml(inner)),
                Value::Array(items) => Value::Array(
                    items
                        .into_iter()
                        .map(|i| match i {
                            Value::Table(inner) => Value::Table(sort_toml(inner)),
                            other => other,
                        })
                        .collect(),
                ),
                other => other,
            };
            (k, v)
        })
        .collect()
}

fn capable(a: &Agent) -> bool {
    !a.can_spawn.is_empty() || !a.controls.is_empty()
}

/// Build the snapshot of a validated pack.
pub fn compile(pack: &Pack, v: &Validated) -> Result<(Snapshot, CompileReport), Rejected> {
    let p = &v.profile;
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        "snapshot.json".into(),
        json(&serde_json::json!({
            "package_version": PACKAGE_VERSION,
            "schema_version": SCHEMA_VERSION,
            "profile_id": p.id,
            "binds": v.binds,
        })),
    );
    files.insert("profile.json".into(), json(p));
    let keys: Vec<&str> = p.agents.values().map(|a| a.model.as_str()).collect();
    let groups: Vec<&str> = p
        .agents
        .values()
        .filter_map(|a| a.resource_group.as_deref())
        .collect();
    files.insert("catalog.json".into(), json(&v.catalog.slice(keys, groups)));
    files.insert("ceilings.json".into(), json(&v.ceilings));
    files.insert("tool-mcp.json".into(), json(&v.tool_servers));
    if let Some(s) = &v.smoke {
        files.insert("smoke.json".into(), json(s));
    }
    for (path, bytes) in &pack.files {
        if path.starts_with("agents/") || path.starts_with("contracts/") {
            files.insert(path.clone(), bytes.clone());
        }
    }
    let any_capable = p.agents.values().any(capable);
    let skill = any_capable.then(|| skill_md(p));
    if let Some(s) = &skill {
        files.insert(SKILL_PATH.into(), s.clone().into_bytes());
    }
    let mut roles = BTreeMap::new();
    let mut too_large = Vec::new();
    for (name, a) in &p.agents {
        let agents_md = agents_md(p, name, a, pack);
        if agents_md.len() > AGENTS_MD_LIMIT {
            too_large.push((name.clone(), agents_md.len()));
        }
        files.insert(format!("roles/{name}/AGENTS.md"), agents_md.into_bytes());
        let home = format!("roles/{name}/codex-home");
        files.insert(
            format!("{home}/config.toml"),
            codex_config(p, name, a, v, any_capable).into_bytes(),
        );
        files.insert(
            format!("{home}/AGENTS.md"),
            files[&format!("roles/{name}/AGENTS.md")].clone(),
        );
        if capable(a)
            && let Some(s) = &skill
        {
            files.insert(
                format!("{home}/skills/{SKILL_PATH}"),
                s.clone().into_bytes(),
            );
        }
        let mut projected = false;
        if crate::validate::projects_output_schema(a, &v.catalog)
            && let Some(c) = a.output_contract.as_ref().and_then(|c| v.contracts.get(c))
        {
            files.insert(
                format!("roles/{name}/output-schema.json"),
                json(&mmo_contract::project_output_schema(c)),
            );
            projected = true;
        }
        roles.insert(
            name.clone(),
            RoleReport {
                model: a.model.clone(),
                resource_group: a.resource_group.clone(),
                backends: a.backends.clone(),
                orchestration_skill: capable(a) && skill.is_some(),
                output_schema_projected: projected,
            },
        );
    }
    // Native-capable roles become Codex custom agents inside the root's home, because native
    // subagents run in the root's app-server host.
    let root_home = format!("roles/{}/codex-home", p.root);
    for (name, a) in p
        .agents
        .iter()
        .filter(|(_, a)| a.kind != "root" && a.native_capable())
    {
        let Some(native) = &a.native_name else {
            continue;
        };
        let instructions =
            String::from_utf8_lossy(&files[&format!("roles/{name}/AGENTS.md")]).into_owned();
        files.insert(
            format!("{root_home}/agents/{native}.toml"),
            native_agent(p, name, native, a, v, &instructions).into_bytes(),
        );
    }
    if !too_large.is_empty() {
        let mut d = crate::diag::Diags::default();
        for (name, n) in too_large {
            d.push(
                "profile.toml",
                format!("agents.{name}.instructions"),
                "agents_md_too_large",
                format!("generated AGENTS.md is {n} bytes; the limit is {AGENTS_MD_LIMIT}"),
            );
        }
        return Err(Rejected(d.into_sorted()));
    }
    let mut manifest = String::new();
    let mut digests = BTreeMap::new();
    for (path, bytes) in &files {
        let h = hex(&Sha256::digest(bytes));
        manifest.push_str(&format!("{h}  {path}\n"));
        digests.insert(path.clone(), h);
    }
    let address = hex(&Sha256::digest(manifest.as_bytes()));
    files.insert("MANIFEST".into(), manifest.into_bytes());
    let report = CompileReport {
        address: address.clone(),
        profile_id: p.id.clone(),
        package_version: PACKAGE_VERSION,
        schema_version: SCHEMA_VERSION,
        binds: v.binds.clone(),
        ceilings: v.ceilings.clone(),
        roles,
        files: digests,
    };
    Ok((Snapshot { address, files }, report))
}

fn list(xs: &[String]) -> String {
    if xs.is_empty() {
        "none".into()
    } else {
        xs.iter()
            .map(|x| format!("`{x}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn agents_md(p: &Profile, name: &str, a: &Agent, pack: &Pack) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "<!-- Generated by codex-mmo {PACKAGE_VERSION} from profile `{}`. Do not edit. -->\n",
        p.id
    ));
    s.push_str(&format!("# Role `{name}` in {}\n\n", p.display_name));
    if !a.description.is_empty() {
        s.push_str(&format!("{}\n\n", a.description));
    }
    s.push_str("## Operating envelope\n\n");
    let role_kind = if a.kind == "root" {
        "the root of this team (depth zero)"
    } else {
        "a participant"
    };
    s.push_str(&format!("- You are {role_kind}.\n"));
    s.push_str(&format!(
        "- Permissions: `{}`; shell network access: {}; web search: `{}`.\n",
        a.permissions,
        if a.network_access {
            "allowed"
        } else {
            "denied"
        },
        a.web_search
    ));
    s.push_str(&format!(
        "- Trust: `{}`; verification: `{}`.\n",
        a.trust, a.verification
    ));
    s.push_str(&format!("- Execution: `{}`", a.execution_mode));
    if let (Some(g), Some(m)) = (a.goal_token_budget, a.max_goal_token_budget) {
        s.push_str(&format!(
            " with a {g}-token goal budget (extensible by a controller up to {m})"
        ));
    }
    s.push_str(".\n");
    if a.kind != "root" {
        s.push_str(&format!(
            "- Accepted task kinds: {}.\n",
            list(&a.allowed_task_kinds)
        ));
    }
    if let Some(c) = &a.output_contract {
        s.push_str(&format!(
            "- Your final answer is one JSON value satisfying `{c}` (enforcement: `{}`). Report only evidence you directly observed.\n",
            a.contract_enforcement
        ));
    }
    if a.trust == "low" {
        s.push_str("- You receive literal tasks only. Return literal evidence; do not design, debug, write, delegate, or adjudicate.\n");
    }
    if a.permissions == "workspace-write" && a.kind != "root" {
        s.push_str("- You write inside an isolated worktree; stay within the canonical scope your task declares.\n");
    }
    if !a.can_spawn.is_empty() {
        s.push_str("\n## Roles you may delegate to\n\n");
        for c in &a.can_spawn {
            let d = p
                .agents
                .get(c)
                .map(|t| t.description.as_str())
                .unwrap_or_default();
            s.push_str(&format!("- `{c}`: {d}\n"));
        }
        s.push_str("\nUse the `mmo-profile-orchestration` skill for the delegation lifecycle. Wait only on real dependencies (`dependency_only`).\n");
    }
    if !a.controls.is_empty() {
        s.push_str("\n## Control authority\n\n");
        for (t, acts) in &a.controls {
            s.push_str(&format!("- `{t}`: {}\n", list(acts)));
        }
    }
    if let Some(i) = &a.instructions
        && let Some(text) = pack.text(i)
    {
        s.push_str("\n## Instructions\n\n");
        s.push_str(text.trim_end());
        s.push('\n');
    }
    s
}

fn skill_md(p: &Profile) -> String {
    let mut s = String::new();
    s.push_str("---\nname: mmo-profile-orchestration\n");
    s.push_str(&format!(
        "description: Delegation and control lifecycle for the `{}` codex-mmo team.\n---\n\n",
        p.id
    ));
    s.push_str(&format!(
        "<!-- Generated by codex-mmo {PACKAGE_VERSION}. Do not edit. -->\n"
    ));
    s.push_str(&format!("# Orchestrating the `{}` team\n\n", p.id));
    s.push_str("All delegation goes through the `mmo_mesh` Agent-MCP tools. The lifecycle below is the only admitted one.\n\n");
    s.push_str("## Delegation graph\n\n| caller | may spawn | may control |\n|---|---|---|\n");
    for (name, a) in &p.agents {
        if capable(a) {
            let ctl: Vec<String> = a
                .controls
                .iter()
                .map(|(t, acts)| format!("`{t}` ({})", acts.join(", ")))
                .collect();
            s.push_str(&format!(
                "| `{name}` | {} | {} |\n",
                list(&a.can_spawn),
                if ctl.is_empty() {
                    "none".into()
                } else {
                    ctl.join("; ")
                }
            ));
        }
    }
    let co = &p.coordination;
    s.push_str(&format!(
        "\nAdmission: at most {} active agents including the root, {} concurrent MCP writers, depth {}, {} children per caller unless a role overrides it. A role already in the lineage {} recur.\n",
        co.max_active_agents,
        co.max_active_writers,
        co.max_depth,
        co.max_children_per_agent,
        if co.reject_ancestor_role { "may not" } else { "may" }
    ));
    s.push_str("\n## Lifecycle\n\n");
    for step in [
        "1. `agents_spawn` a permitted role with a task of an admitted kind. Low-trust roles take a typed `literal_task`, never prose.",
        "2. `agents_wait` with the exact observed `progress_revision` map as `after_revision`; it returns compact state, not results. Wait only on real dependencies.",
        "3. `agent_result` makes a result read. Follow `next_cursor` until it is null; never treat a page as the whole result.",
        "4. Decide with `agent_result_accept` or `agent_result_reject` and a reason. Rejection is final; reading never applies a patch.",
        "5. Accepted isolated-writer output may go to `agent_patch_integrate`, which verifies patch identity, canonical scope and lease.",
        "6. Controls (`agent_control`) carry the `control_revision` from inspection; a stale revision fails before delivery. On `delivery_unknown`, inspect before retrying.",
        "7. `stopped`, `failed` and `cancelled` are terminal evidence, never successful results. `suspended` carries partial, non-final evidence that an authorized controller may continue.",
    ] {
        s.push_str(step);
        s.push('\n');
    }
    s
}

fn arr(xs: &[String]) -> Value {
    Value::Array(xs.iter().map(|x| Value::String(x.clone())).collect())
}

fn codex_config(p: &Profile, name: &str, a: &Agent, v: &Validated, any_capable: bool) -> String {
    let mut t = Table::new();
    let model = v.catalog.models.get(&a.model);
    t.insert(
        "model".into(),
        Value::String(model.map(|m| m.name.clone()).unwrap_or_default()),
    );
    let (provider, entry) = provider_of(v, &a.model);
    t.insert("model_provider".into(), Value::String(provider.clone()));
    let mut providers = Table::new();
    if let Some(e) = entry {
        providers.insert(provider, Value::Table(e));
    }
    if a.kind == "root" {
        // Native subagents run in the root's app-server host, so the providers their custom
        // agent files select must be defined here.
        for x in p
            .agents
            .values()
            .filter(|x| x.kind != "root" && x.native_capable())
        {
            if let (id, Some(e)) = provider_of(v, &x.model) {
                providers.insert(id, Value::Table(e));
            }
        }
    }
    if !providers.is_empty() {
        t.insert("model_providers".into(), Value::Table(providers));
    }
    if a.reasoning != "none" {
        t.insert(
            "model_reasoning_effort".into(),
            Value::String(a.reasoning.clone()),
        );
    }
    if let Some(pr) = &a.plan_reasoning
        && pr != "none"
    {
        t.insert(
            "plan_mode_reasoning_effort".into(),
            Value::String(pr.clone()),
        );
    }
    t.insert(
        "approval_policy".into(),
        Value::String(a.approval_policy.clone()),
    );
    t.insert("sandbox_mode".into(), Value::String(a.permissions.clone()));
    t.insert("web_search".into(), Value::String(a.web_search.clone()));
    if a.permissions == "workspace-write" {
        let mut sw = Table::new();
        sw.insert("network_access".into(), Value::Boolean(a.network_access));
        t.insert("sandbox_workspace_write".into(), Value::Table(sw));
    }
    if !a.tool_mcp_servers.is_empty() {
        let mut servers = Table::new();
        for (id, g) in &a.tool_mcp_servers {
            let Some(s) = v.tool_servers.get(id) else {
                continue;
            };
            let mut e = Table::new();
            if let Some(c) = &s.command {
                e.insert("command".into(), Value::String(c.clone()));
                e.insert("args".into(), arr(&s.args));
            }
            if let Some(u) = &s.url {
                e.insert("url".into(), Value::String(u.clone()));
            }
            if !s.env_vars.is_empty() {
                e.insert("env_vars".into(), arr(&s.env_vars));
            }
            if let Some(b) = &s.bearer_token_env_var {
                e.insert("bearer_token_env_var".into(), Value::String(b.clone()));
            }
            e.insert(
                "enabled_tools".into(),
                arr(g.enabled_tools.as_ref().unwrap_or(&s.allowed_tools)),
            );
            e.insert("required".into(), Value::Boolean(g.required));
            e.insert(
                "startup_timeout_sec".into(),
                Value::Integer(i64::from(s.startup_timeout_seconds)),
            );
            e.insert(
                "tool_timeout_sec".into(),
                Value::Integer(i64::from(s.tool_timeout_seconds)),
            );
            // Under `approval_policy = "never"` Codex refuses every MCP tool call whose server
            // does not approve its tools by default (checked with 0.169.0): a granted tool
            // would be unusable. `never` means autonomous inside the compiled sandbox, so the
            // granted (already narrowed) tools are approved; other policies keep Codex's
            // default, where a call becomes controller-answerable pending input.
            if a.approval_policy == "never" {
                e.insert(
                    "default_tools_approval_mode".into(),
                    Value::String("approve".into()),
                );
            }
            servers.insert(id.clone(), Value::Table(e));
        }
        t.insert("mcp_servers".into(), Value::Table(servers));
    }
    if a.kind == "root"
        && p.agents
            .values()
            .any(|x| x.kind != "root" && x.native_capable())
    {
        let co = &p.coordination;
        let mut agents = Table::new();
        agents.insert(
            "max_concurrent_threads_per_session".into(),
            Value::Integer(i64::from(co.native_max_concurrent_threads.unwrap_or(0))),
        );
        agents.insert(
            "interrupt_message".into(),
            Value::Boolean(co.native_interrupt_message),
        );
        // Without nested delegation a native subagent cannot spawn again.
        let depth = if co.native_nested_delegation {
            co.max_depth.max(1)
        } else {
            1
        };
        agents.insert("max_depth".into(), Value::Integer(i64::from(depth)));
        t.insert("agents".into(), Value::Table(agents));
    }
    if any_capable {
        // Capable roles enable the materialized skill; leaves explicitly disable the inherited path.
        let mut entry = Table::new();
        entry.insert("path".into(), Value::String(format!("skills/{SKILL_PATH}")));
        entry.insert("enabled".into(), Value::Boolean(capable(a)));
        let mut skills = Table::new();
        skills.insert("config".into(), Value::Array(vec![Value::Table(entry)]));
        t.insert("skills".into(), Value::Table(skills));
    }
    let body = toml::to_string(&sort_toml(t)).unwrap_or_default();
    format!(
        "# Generated by codex-mmo {PACKAGE_VERSION} for role `{name}` of profile `{}`. Do not edit.\n# Credentials are named by environment variable only; no value is stored here.\n{body}",
        p.id
    )
}

/// The Codex provider id a model key's route selects, and the `model_providers` entry defining
/// it when the route is not one of Codex's own providers (a gateway route).
fn provider_of(v: &Validated, key: &str) -> (String, Option<Table>) {
    let route_id = split_key(key).map(|(r, _)| r).unwrap_or_default();
    let route = v.catalog.routes.get(route_id);
    let provider = route
        .and_then(|r| r.provider.clone())
        .unwrap_or_else(|| route_id.to_string());
    let entry = route.filter(|r| r.provider.is_none()).map(|r| {
        let mut mp = Table::new();
        mp.insert("name".into(), Value::String(route_id.to_string()));
        if let Some(u) = &r.base_url {
            mp.insert("base_url".into(), Value::String(u.clone()));
        }
        mp.insert("wire_api".into(), Value::String("responses".into()));
        if let Some(e) = &r.credential_env {
            mp.insert("env_key".into(), Value::String(e.clone()));
        }
        mp
    });
    (provider, entry)
}

fn native_agent(
    p: &Profile,
    name: &str,
    native: &str,
    a: &Agent,
    v: &Validated,
    instructions: &str,
) -> String {
    let mut t = Table::new();
    t.insert("name".into(), Value::String(native.to_string()));
    let description = if a.description.is_empty() {
        format!("Role `{name}` of profile `{}`", p.id)
    } else {
        a.description.clone()
    };
    t.insert("description".into(), Value::String(description));
    t.insert(
        "developer_instructions".into(),
        Value::String(instructions.to_string()),
    );
    if let Some(m) = v.catalog.models.get(&a.model) {
        t.insert("model".into(), Value::String(m.name.clone()));
    }
    // Codex keeps the caller's provider for a spawned agent unless its role file selects one,
    // so a native role on another route than the root's would reach the wrong provider.
    t.insert(
        "model_provider".into(),
        Value::String(provider_of(v, &a.model).0),
    );
    if a.reasoning != "none" {
        t.insert(
            "model_reasoning_effort".into(),
            Value::String(a.reasoning.clone()),
        );
    }
    t.insert("sandbox_mode".into(), Value::String(a.permissions.clone()));
    t.insert("web_search".into(), Value::String(a.web_search.clone()));
    let body = toml::to_string(&sort_toml(t)).unwrap_or_default();
    format!(
        "# Generated by codex-mmo {PACKAGE_VERSION}: native custom agent for role `{name}` of profile `{}`. Do not edit.\n{body}",
        p.id
    )
}
