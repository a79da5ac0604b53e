//! Whole-pack validation: cross-field rules, catalog checks, Tool MCP grants, contracts, smoke
//! files and the compiler's ceilings. Every problem is collected; nothing stops at the first.

use crate::catalog::{self, Catalog, split_key};
use crate::ceilings::{self, Ceilings};
use crate::consent::Consent;
use crate::diag::{Diags, Rejected};
use crate::model::*;
use crate::pack::Pack;
use crate::parse::{CODEX_BUILTIN_AGENTS, is_native_name, parse_profile, parse_smoke};
use crate::toolmcp::{Registry, ToolServer};
use std::collections::{BTreeMap, BTreeSet};

const P: &str = "profile.toml";

/// Runtime-owned Agent-MCP tools a smoke task may require as `mmo_mesh.<tool>`.
pub const MESH_TOOLS: &[&str] = &[
    "agents_spawn",
    "agents_wait",
    "agent_result",
    "agent_result_accept",
    "agent_result_reject",
    "agent_patch_integrate",
    "agent_trace",
    "agent_trace_record",
    "agent_control",
    "agent_inspect",
];

/// A pack that passed every rule, with everything the compiler needs resolved.
#[derive(Debug, Clone)]
pub struct Validated {
    pub profile: Profile,
    pub smoke: Option<Smoke>,
    pub catalog: Catalog,
    /// Registry entries the pack grants, by server id.
    pub tool_servers: BTreeMap<String, ToolServer>,
    /// Parsed contracts by pack path.
    pub contracts: BTreeMap<String, serde_json::Value>,
    pub ceilings: Ceilings,
    /// The `--bind` overrides applied, by role.
    pub binds: BTreeMap<String, String>,
}

/// Validate a loaded pack against the built-in catalog, its overlay, the registry, where the
/// operator lets credentials go, and binds.
pub fn validate(
    pack: &Pack,
    registry: &Registry,
    consent: &Consent,
    binds: &[(String, String)],
) -> Result<Validated, Rejected> {
    let mut d = Diags::default();
    let Some(text) = pack.text("profile.toml") else {
        return Err(Rejected::one(
            P,
            "",
            "pack_missing_file",
            "every pack needs profile.toml",
        ));
    };
    let Some(mut profile) = parse_profile(text, &mut d) else {
        return Err(Rejected(d.into_sorted()));
    };

    // Named or implicit catalog/smoke members.
    let catalog_file = profile.catalog.clone().or_else(|| {
        pack.files
            .contains_key("catalog.toml")
            .then(|| "catalog.toml".into())
    });
    let smoke_file = profile.smoke.clone().or_else(|| {
        pack.files
            .contains_key("smoke.toml")
            .then(|| "smoke.toml".into())
    });
    for (key, f) in [("catalog", &catalog_file), ("smoke", &smoke_file)] {
        if let Some(f) = f
            && !pack.files.contains_key(f)
        {
            d.push(
                P,
                key,
                "pack_missing_file",
                format!("`{f}` is named but not in the pack"),
            );
        }
    }
    let fragment = catalog_file
        .as_deref()
        .and_then(|f| pack.text(f).map(|t| (f, t)));
    let catalog = match catalog::resolve(fragment) {
        Ok(c) => {
            let file = catalog_file.as_deref().unwrap_or(catalog::BUILTIN_FILE);
            consent.check(&c, file, &mut d);
            c
        }
        Err(Rejected(items)) => {
            for i in items {
                d.push(i.file, i.path, i.rule, i.message);
            }
            Catalog::builtin()
        }
    };

    let mut bound = BTreeMap::new();
    for (role, key) in binds {
        match profile.agents.get_mut(role) {
            Some(a) => {
                if bound.contains_key(role) {
                    // Two binds for one role would make the result depend on argument order.
                    d.push(
                        "--bind",
                        role,
                        "bind_duplicate_role",
                        format!("`{role}` is bound more than once"),
                    );
                }
                a.model = key.clone();
                // The group resolves from the new model unless the pack names one explicitly.
                bound.insert(role.clone(), key.clone());
            }
            None => d.push(
                "--bind",
                role,
                "bind_unknown_role",
                format!("no role `{role}` to bind to `{key}`"),
            ),
        }
    }

    check_roots(&profile, &mut d);
    check_graph(&profile, &mut d);
    for (name, a) in &profile.agents {
        check_agent(&profile, name, a, &mut d);
        check_files(pack, name, a, &mut d);
    }
    for (name, a) in profile.agents.iter_mut() {
        check_binding(&catalog, name, a, bound.contains_key(name), &mut d);
    }
    let tool_servers = check_grants(&profile, registry, &mut d);
    let contracts = check_contracts(pack, &mut d);
    let smoke = smoke_file
        .as_deref()
        .and_then(|f| pack.text(f))
        .and_then(|t| {
            let s = parse_smoke(t, &mut d)?;
            check_smoke(&profile, &s, &tool_servers, &mut d);
            Some(s)
        });

    let ceilings = ceilings::derive(&profile, &|g| {
        catalog.resource_groups.get(g).map(|r| r.capacity)
    });
    // A role whose binding failed has no resource group, so the derivation would undercount and
    // report ceilings that are only a symptom of the binding error already reported.
    if profile.agents.values().all(|a| a.resource_group.is_some()) {
        check_ceilings(&profile, &ceilings, &catalog, &mut d);
    }
    profile.coordination.native_max_concurrent_threads =
        Some(ceilings.native_max_concurrent_threads);
    let mut generated = BTreeSet::new();
    for (name, a) in profile.agents.iter_mut() {
        if a.native_capable() && a.native_name.is_none() {
            a.native_name = Some(format!("mmo-{}-{}", profile.id, name.replace('_', "-")));
            generated.insert(name.clone());
        }
    }
    check_native_names(&profile, &generated, &mut d);
    check_projections(&profile, &catalog, &contracts, &mut d);

    for f in ["profile.toml", "smoke.toml", "catalog.toml"] {
        if let Some(t) = pack.text(f) {
            d.attach_lines(f, t);
        }
    }
    if d.is_empty() {
        Ok(Validated {
            profile,
            smoke,
            catalog,
            tool_servers,
            contracts,
            ceilings,
            binds: bound,
        })
    } else {
        Err(Rejected(d.into_sorted()))
    }
}

fn ap(name: &str, k: &str) -> String {
    format!("agents.{name}.{k}")
}

fn check_roots(p: &Profile, d: &mut Diags) {
    if p.root.is_empty() {
        return;
    }
    match p.agents.get(&p.root) {
        None => d.push(
            P,
            "root",
            "root_unknown",
            format!("root `{}` is not an agent", p.root),
        ),
        Some(a) if a.kind != "root" => d.push(
            P,
            ap(&p.root, "kind"),
            "root_kind",
            format!("the root `{}` must declare kind = \"root\"", p.root),
        ),
        _ => {}
    }
    for (name, a) in &p.agents {
        if a.kind == "root" && *name != p.root {
            d.push(
                P,
                ap(name, "kind"),
                "root_count",
                format!(
                    "exactly one root: `{name}` declares kind = \"root\" but root = \"{}\"",
                    p.root
                ),
            );
        }
    }
}

fn check_graph(p: &Profile, d: &mut Diags) {
    for (name, a) in &p.agents {
        for (i, c) in a.can_spawn.iter().enumerate() {
            let path = format!("{}[{i}]", ap(name, "can_spawn"));
            if !p.agents.contains_key(c) {
                d.push(
                    P,
                    path,
                    "spawn_unknown_target",
                    format!("`{c}` is not an agent"),
                );
            } else if *c == p.root {
                d.push(P, path, "spawn_root", "the root cannot be spawned");
            } else if c == name && p.coordination.reject_ancestor_role {
                d.push(
                    P,
                    path,
                    "spawn_self",
                    "a role cannot spawn itself while reject_ancestor_role = true",
                );
            }
        }
        for target in a.controls.keys() {
            let path = format!("agents.{name}.controls.{target}");
            if !p.agents.contains_key(target) {
                d.push(
                    P,
                    path,
                    "control_unknown_target",
                    format!("`{target}` is not an agent"),
                );
            } else if target == name {
                d.push(
                    P,
                    path,
                    "control_self",
                    "a role cannot hold control authority over itself",
                );
            }
        }
    }
}

fn check_agent(p: &Profile, name: &str, a: &Agent, d: &mut Diags) {
    let co = &p.coordination;
    let is_root = a.kind == "root";
    if !is_root && a.plan_reasoning.is_some() {
        d.push(
            P,
            ap(name, "plan_reasoning"),
            "plan_reasoning_root_only",
            "plan_reasoning is the root's planning effort",
        );
    }
    if !a.allowed_reasoning_efforts.contains(&a.reasoning) {
        d.push(
            P,
            ap(name, "allowed_reasoning_efforts"),
            "reasoning_not_allowed",
            format!(
                "the initial reasoning `{}` must be in allowed_reasoning_efforts",
                a.reasoning
            ),
        );
    }
    // Backends against the profile's orchestration.
    if !is_root {
        for b in &a.backends {
            let ok = match co.orchestration.as_str() {
                "mcp" => b == "mcp",
                "native" => b == "native",
                _ => true,
            };
            if !ok {
                d.push(
                    P,
                    ap(name, "backends"),
                    "backend_orchestration",
                    format!(
                        "backend `{b}` is not available under orchestration = \"{}\"",
                        co.orchestration
                    ),
                );
            }
        }
        if a.native_capable() && co.orchestration == "hybrid" && !co.native_nested_delegation {
            for c in &a.can_spawn {
                if p.agents
                    .get(c)
                    .is_some_and(|t| !t.backends.iter().any(|b| b == "mcp"))
                {
                    d.push(P, ap(name, "can_spawn"), "hybrid_native_child_mcp_path", format!("`{c}` is reachable from a native participant but has no MCP path (native_nested_delegation = false)"));
                }
            }
        }
        if a.native_capable() && p.maturity == "featured" && a.permissions != "read-only" {
            d.push(
                P,
                ap(name, "permissions"),
                "featured_native_writable",
                "featured profiles keep native roles read-only",
            );
        }
    }
    // Goal lifecycle.
    if a.execution_mode == "goal" {
        if !is_root && !a.mcp_only() {
            d.push(P, ap(name, "execution_mode"), "goal_mode_native", "goal mode is for roots and MCP-only participants; native delegation exposes no owned goal lifecycle");
        }
        match (a.goal_token_budget, a.max_goal_token_budget) {
            (Some(g), Some(m)) if m < g => d.push(
                P,
                ap(name, "max_goal_token_budget"),
                "goal_budget_ceiling",
                format!("max_goal_token_budget {m} is below goal_token_budget {g}"),
            ),
            (Some(_), Some(_)) => {}
            (g, m) => {
                if g.is_none() {
                    d.push(
                        P,
                        ap(name, "goal_token_budget"),
                        "goal_budget_required",
                        "goal mode requires goal_token_budget (10,000–100,000,000)",
                    );
                }
                if m.is_none() {
                    d.push(
                        P,
                        ap(name, "max_goal_token_budget"),
                        "goal_budget_required",
                        "goal mode requires max_goal_token_budget",
                    );
                }
            }
        }
    } else {
        for (k, v) in [
            ("goal_token_budget", a.goal_token_budget),
            ("max_goal_token_budget", a.max_goal_token_budget),
        ] {
            if v.is_some() {
                d.push(
                    P,
                    ap(name, k),
                    "goal_budget_turn_mode",
                    "token budgets apply to execution_mode = \"goal\" only",
                );
            }
        }
    }
    // Contracts.
    if a.contract_enforcement == "strict" {
        if a.native_only() {
            d.push(
                P,
                ap(name, "contract_enforcement"),
                "strict_contract_native_only",
                "native-only roles cannot claim strict enforcement (not externally intercepted)",
            );
        }
        if a.output_contract.is_none() {
            d.push(
                P,
                ap(name, "output_contract"),
                "strict_contract_missing",
                "strict enforcement needs an output_contract to enforce",
            );
        }
    }
    if a.trust == "low" {
        check_low_trust(name, a, is_root, d);
    }
}

fn check_low_trust(name: &str, a: &Agent, is_root: bool, d: &mut Diags) {
    let mut need = |ok: bool, key: &str, rule: &'static str, msg: &str| {
        if !ok {
            d.push(
                P,
                ap(name, key),
                rule,
                format!("trust = \"low\" requires {msg}"),
            );
        }
    };
    need(
        !is_root,
        "trust",
        "low_trust_root",
        "a participant, never the root",
    );
    need(
        a.permissions == "read-only",
        "permissions",
        "low_trust_permissions",
        "permissions = \"read-only\"",
    );
    need(
        a.mcp_only(),
        "backends",
        "low_trust_backends",
        "backends = [\"mcp\"]",
    );
    need(
        a.can_spawn.is_empty(),
        "can_spawn",
        "low_trust_can_spawn",
        "can_spawn = []",
    );
    need(
        a.controls.is_empty(),
        "controls",
        "low_trust_controls",
        "controls = {} (no control authority)",
    );
    need(
        a.max_active == 1,
        "max_active",
        "low_trust_max_active",
        "max_active = 1",
    );
    need(
        a.verification == "always",
        "verification",
        "low_trust_verification",
        "verification = \"always\"",
    );
    need(
        a.contract_enforcement == "strict",
        "contract_enforcement",
        "low_trust_contract_enforcement",
        "contract_enforcement = \"strict\"",
    );
    need(
        a.output_contract.is_some(),
        "output_contract",
        "low_trust_output_contract",
        "a strict output contract",
    );
    need(
        !a.network_access,
        "network_access",
        "low_trust_network_access",
        "network_access = false",
    );
    need(
        a.web_search == "disabled",
        "web_search",
        "low_trust_web_search",
        "web_search = \"disabled\"",
    );
    need(
        !a.attachments_allowed,
        "attachments_allowed",
        "low_trust_attachments",
        "attachments_allowed = false",
    );
    need(
        a.resource_units == 1,
        "resource_units",
        "low_trust_resource_units",
        "resource_units = 1",
    );
    need(
        a.max_task_chars <= 2500,
        "max_task_chars",
        "low_trust_brief_ceiling",
        "a brief ceiling of at most 2,500 characters (max_task_chars)",
    );
    need(
        a.allowed_task_kinds
            .iter()
            .all(|k| LOW_TRUST_TASK_KINDS.contains(&k.as_str())),
        "allowed_task_kinds",
        "low_trust_task_kinds",
        "task kinds drawn only from locate, references, extract, summarize_supplied",
    );
    // The runtime reads or hashes a literal task's input itself, and a low-trust role has no
    // network and no web search: a Tool MCP server would give it the outside reach both deny.
    for server in a.tool_mcp_servers.keys() {
        d.push(
            P,
            format!("agents.{name}.tool_mcp_servers.{server}"),
            "low_trust_tool_mcp",
            "trust = \"low\" allows no Tool MCP grant (the runtime reads the literal input; network_access = false and web_search = \"disabled\" leave no outside reach)",
        );
    }
}

/// `native_name` names `agents/<native_name>.toml` in the root's Codex home: it must be a safe
/// file stem, must not replace a Codex built-in agent, and must be unique (two roles with one
/// name would write one file, silently losing a custom agent). A name on a role without a native
/// backend would be silently ignored, so it is an error too. `generated` holds the roles whose
/// name is the generated default.
fn check_native_names(p: &Profile, generated: &BTreeSet<String>, d: &mut Diags) {
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (role, a) in &p.agents {
        let Some(n) = &a.native_name else {
            continue;
        };
        let path = ap(role, "native_name");
        if !a.native_capable() {
            d.push(
                P,
                path,
                "native_name_not_native",
                format!(
                    "native_name names a Codex custom agent, but `{role}` has no native backend"
                ),
            );
            continue;
        }
        if !is_native_name(n) {
            let msg = if generated.contains(role) {
                format!(
                    "the generated default `{n}` is longer than 64 bytes; declare a shorter native_name"
                )
            } else {
                format!(
                    "`{n}` is not a safe file stem ([a-z0-9][a-z0-9_-]*, at most 64 bytes); it names agents/<native_name>.toml in the root's Codex home"
                )
            };
            d.push(P, path, "native_name_format", msg);
            continue;
        }
        if CODEX_BUILTIN_AGENTS.contains(&n.as_str()) {
            d.push(
                P,
                path,
                "native_name_reserved",
                format!("`{n}` is a Codex built-in agent, which a custom agent of that name would replace"),
            );
            continue;
        }
        by_name.entry(n).or_default().push(role);
    }
    for (n, roles) in by_name.iter().filter(|(_, r)| r.len() > 1) {
        for role in roles {
            let others: Vec<String> = roles
                .iter()
                .filter(|r| *r != role)
                .map(|r| format!("`{r}`"))
                .collect();
            d.push(
                P,
                ap(role, "native_name"),
                "native_name_duplicate",
                format!(
                    "`{n}` is also the native_name of {}; each names one custom-agent file, so one role's agent would be lost",
                    others.join(", ")
                ),
            );
        }
    }
}

/// Whether the compiler projects `a`'s output contract into a strict `outputSchema`: a strict
/// role with an MCP backend whose model declares structured output.
pub fn projects_output_schema(a: &Agent, catalog: &Catalog) -> bool {
    a.contract_enforcement == "strict"
        && a.output_contract.is_some()
        && a.backends.iter().any(|b| b == "mcp")
        && catalog
            .models
            .get(&a.model)
            .is_some_and(|m| m.structured_output)
}

/// A projected contract whose projection would contradict it fails here, not at run time.
fn check_projections(
    p: &Profile,
    catalog: &Catalog,
    contracts: &BTreeMap<String, serde_json::Value>,
    d: &mut Diags,
) {
    let mut projected: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (role, a) in &p.agents {
        if projects_output_schema(a, catalog)
            && let Some(c) = &a.output_contract
        {
            projected.entry(c).or_default().push(role);
        }
    }
    for (file, roles) in projected {
        let Some(schema) = contracts.get(file) else {
            continue;
        };
        let roles: Vec<String> = roles.iter().map(|r| format!("`{r}`")).collect();
        for pr in mmo_contract::projection_problems(schema) {
            d.push(
                file,
                pr.pointer,
                pr.rule,
                format!("{} (projected for {})", pr.message, roles.join(", ")),
            );
        }
    }
}

fn check_files(pack: &Pack, name: &str, a: &Agent, d: &mut Diags) {
    for (k, f) in [
        ("instructions", &a.instructions),
        ("output_contract", &a.output_contract),
    ] {
        if let Some(f) = f
            && !pack.files.contains_key(f)
        {
            d.push(
                P,
                ap(name, k),
                "pack_missing_file",
                format!("`{f}` is named but not in the pack"),
            );
        }
    }
}

fn check_binding(c: &Catalog, name: &str, a: &mut Agent, rebound: bool, d: &mut Diags) {
    let key_path = ap(name, "model");
    let via = if rebound { " (bound by --bind)" } else { "" };
    let mut err = |k: &str, rule: &'static str, msg: String| {
        d.push(
            P,
            if k == "model" {
                key_path.clone()
            } else {
                ap(name, k)
            },
            rule,
            format!("{msg}{via}"),
        )
    };
    if a.model.is_empty() {
        return;
    }
    let Some((route_id, _)) = split_key(&a.model) else {
        err(
            "model",
            "model_key_format",
            format!(
                "`{}` is not a route-qualified `<route>__<model>` key; unqualified ids and aliases are not accepted",
                a.model
            ),
        );
        return;
    };
    let Some(route) = c.routes.get(route_id) else {
        err(
            "model",
            "model_route_unknown",
            format!("route `{route_id}` of `{}` is not in the catalog", a.model),
        );
        return;
    };
    let Some(m) = c.models.get(&a.model) else {
        err(
            "model",
            "model_unknown",
            format!(
                "`{}` is not a catalog key (exact keys only, no aliases)",
                a.model
            ),
        );
        return;
    };
    if !m.agent_compatible {
        err(
            "model",
            "model_not_agent_compatible",
            format!("`{}` is not agent_compatible", a.model),
        );
    }
    if !m.tool_calling {
        err(
            "model",
            "model_no_tool_calling",
            format!("`{}` does not support tool calling", a.model),
        );
    }
    let supports = |r: &str| r == "none" || m.reasoning.iter().any(|x| x == r);
    if !supports(&a.reasoning) {
        err(
            "reasoning",
            "model_reasoning_unsupported",
            format!("`{}` does not support reasoning `{}`", a.model, a.reasoning),
        );
    }
    if let Some(pr) = &a.plan_reasoning
        && !supports(pr)
    {
        err(
            "plan_reasoning",
            "model_reasoning_unsupported",
            format!("`{}` does not support reasoning `{pr}`", a.model),
        );
    }
    for r in &a.allowed_reasoning_efforts {
        if !supports(r) && *r != a.reasoning {
            err(
                "allowed_reasoning_efforts",
                "model_reasoning_unsupported",
                format!("`{}` does not support reasoning `{r}`", a.model),
            );
        }
    }
    for x in &a.requires_modalities {
        if !m.input_modalities.contains(x) {
            err(
                "requires_modalities",
                "model_input_modality",
                format!("model `{}` does not accept `{x}` input", a.model),
            );
        }
        if !route.input_modalities.contains(x) {
            err(
                "requires_modalities",
                "route_input_modality",
                format!("route `{route_id}` does not carry `{x}` input"),
            );
        }
    }
    for x in &a.requires_output_modalities {
        if !m.output_modalities.contains(x) {
            err(
                "requires_output_modalities",
                "model_output_modality",
                format!("model `{}` does not produce `{x}` output", a.model),
            );
        }
        if !route.output_modalities.contains(x) {
            err(
                "requires_output_modalities",
                "route_output_modality",
                format!("route `{route_id}` does not carry `{x}` output"),
            );
        }
    }
    // Codex app-server speaks the Responses API to every provider, so a route must carry it.
    if !route.transports.iter().any(|t| t == "responses") {
        err(
            "model",
            "route_transport_incomplete",
            format!("route `{route_id}` does not carry the responses transport Codex uses"),
        );
    }
    if a.requires_tool_images && !route.preserves_tool_images {
        err(
            "requires_tool_images",
            "route_tool_images",
            format!("route `{route_id}` does not preserve image-bearing tool results"),
        );
    }
    if a.requires_documents
        && !(route.preserves_documents && m.input_modalities.iter().any(|x| x == "document"))
    {
        err(
            "requires_documents",
            "route_documents",
            format!("`{}` via `{route_id}` has no document transport", a.model),
        );
    }
    if !route.executable() {
        err(
            "model",
            "route_not_executable",
            format!("route `{route_id}` has the catalog-only driver; it cannot run agents"),
        );
    }
    if a.kind != "root" {
        for b in &a.backends {
            if !route.backends.contains(b) {
                err(
                    "backends",
                    "route_backend_unsupported",
                    format!("route `{route_id}` cannot serve the `{b}` backend"),
                );
            }
        }
    }
    match &a.resource_group {
        Some(g) if !c.resource_groups.contains_key(g) => err(
            "resource_group",
            "resource_group_unknown",
            format!("resource group `{g}` is not in the catalog"),
        ),
        Some(_) => {}
        None => a.resource_group = c.default_group(&a.model),
    }
}

fn check_grants(p: &Profile, reg: &Registry, d: &mut Diags) -> BTreeMap<String, ToolServer> {
    let mut used = BTreeMap::new();
    for (name, a) in &p.agents {
        for (server, g) in &a.tool_mcp_servers {
            let path = format!("agents.{name}.tool_mcp_servers.{server}");
            if server == MESH_SERVER {
                d.push(
                    P,
                    path,
                    "tool_mcp_reserved",
                    format!("`{MESH_SERVER}` is reserved for the runtime"),
                );
                continue;
            }
            let Some(s) = reg.servers.get(server) else {
                d.push(
                    P,
                    path,
                    "tool_mcp_unknown_server",
                    format!("`{server}` is not registered under tool-mcp.d/"),
                );
                continue;
            };
            if let Some(tools) = &g.enabled_tools {
                if tools.is_empty() {
                    d.push(
                        P,
                        format!("{path}.enabled_tools"),
                        "tool_mcp_empty_grant",
                        "a grant enables at least one tool; remove the grant instead",
                    );
                }
                for (i, t) in tools.iter().enumerate() {
                    if !s.allowed_tools.contains(t) {
                        d.push(P, format!("{path}.enabled_tools[{i}]"), "tool_mcp_widen", format!("`{t}` is not in the operator allowlist of `{server}`; grants only narrow"));
                    }
                }
            }
            used.insert(server.clone(), s.clone());
        }
    }
    used
}

fn check_contracts(pack: &Pack, d: &mut Diags) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    for (path, bytes) in pack
        .files
        .iter()
        .filter(|(p, _)| p.starts_with("contracts/"))
    {
        let v: serde_json::Value = match serde_json::from_slice(bytes) {
            Ok(v) => v,
            Err(e) => {
                d.push(path, "", "contract_json", format!("not JSON: {e}"));
                continue;
            }
        };
        let problems = mmo_contract::check_schema(&v);
        for pr in &problems {
            d.push(path, pr.pointer.clone(), pr.rule, pr.message.clone());
        }
        if problems.is_empty() {
            out.insert(path.clone(), v);
        }
    }
    out
}

/// Whether a runtime-owned mesh tool is mechanically available to a role: spawning and the
/// result lifecycle (wait, read, accept/reject, integrate) are lineage authority and need spawn
/// targets; `agent_control` needs control targets; inspection and traces need either.
fn mesh_tool_available(a: &Agent, tool: &str) -> bool {
    let spawns = !a.can_spawn.is_empty();
    let controls = !a.controls.is_empty();
    match tool {
        "agents_spawn"
        | "agents_wait"
        | "agent_result"
        | "agent_result_accept"
        | "agent_result_reject"
        | "agent_patch_integrate" => spawns,
        "agent_control" => controls,
        "agent_inspect" | "agent_trace" | "agent_trace_record" => spawns || controls,
        _ => false,
    }
}

fn check_smoke(p: &Profile, s: &Smoke, servers: &BTreeMap<String, ToolServer>, d: &mut Diags) {
    const F: &str = "smoke.toml";
    for (i, t) in s.tasks.iter().enumerate() {
        let at = |k: &str| format!("tasks[{i}].{k}");
        let Some(a) = p.agents.get(&t.agent) else {
            d.push(
                F,
                at("agent"),
                "smoke_unknown_agent",
                format!("`{}` is not an agent", t.agent),
            );
            continue;
        };
        let is_root = a.kind == "root";
        match (is_root, t.backend.as_str()) {
            (true, "root") => {}
            (true, b) => d.push(
                F,
                at("backend"),
                "smoke_backend",
                format!("the root runs with backend = \"root\", not `{b}`"),
            ),
            (false, "root") => d.push(
                F,
                at("backend"),
                "smoke_backend",
                "backend = \"root\" is for the root agent",
            ),
            (false, b) if !a.backends.iter().any(|x| x == b) => d.push(
                F,
                at("backend"),
                "smoke_backend",
                format!("`{}` has no `{b}` backend", t.agent),
            ),
            _ => {}
        }
        if t.mode == "workspace-write" && a.permissions != "workspace-write" {
            d.push(
                F,
                at("mode"),
                "smoke_mode",
                format!("`{}` is read-only", t.agent),
            );
        }
        if t.mode == "workspace-write"
            && t.backend == "mcp"
            && a.requires_write_scope()
            && t.write_scope.is_empty()
        {
            d.push(
                F,
                at("write_scope"),
                "smoke_write_scope_required",
                format!(
                    "`{}` has write_scope_required = true: a workspace-write MCP task must declare its canonical write_scope",
                    t.agent
                ),
            );
        }
        if t.mode != "workspace-write" && !t.write_scope.is_empty() {
            d.push(
                F,
                at("write_scope"),
                "smoke_write_scope_read_only",
                "write_scope declares a canonical writer scope; a read-only task has none",
            );
        }
        if a.trust == "low" {
            if t.literal_task.is_none() {
                d.push(
                    F,
                    at("literal_task"),
                    "smoke_literal_task_required",
                    "a low-trust task must use literal_task = { ... }, never free-form prose",
                );
            }
            if t.task.is_some() {
                d.push(
                    F,
                    at("task"),
                    "smoke_low_trust_prose",
                    "a low-trust task cannot carry free-form task prose",
                );
            }
            if t.task_kind.is_some() {
                d.push(
                    F,
                    at("task_kind"),
                    "smoke_low_trust_prose",
                    "a low-trust task takes its kind from literal_task.operation",
                );
            }
            if let Some(lt) = &t.literal_task
                && !lt.operation.is_empty()
                && !a.allowed_task_kinds.contains(&lt.operation)
            {
                d.push(
                    F,
                    format!("tasks[{i}].literal_task.operation"),
                    "smoke_task_kind",
                    format!("`{}` does not admit `{}`", t.agent, lt.operation),
                );
            }
        } else {
            if t.literal_task.is_some() {
                d.push(
                    F,
                    at("literal_task"),
                    "smoke_literal_task_low_trust_only",
                    "literal_task is the low-trust form; use task/task_kind",
                );
            }
            match &t.task {
                None => d.push(
                    F,
                    at("task"),
                    "toml_missing_key",
                    "required key `task` is missing",
                ),
                Some(text) => {
                    let n = text.chars().count() as u32;
                    if n < a.min_task_chars || n > a.max_task_chars {
                        d.push(
                            F,
                            at("task"),
                            "smoke_task_chars",
                            format!(
                                "{n} characters is outside {}..={} for `{}`",
                                a.min_task_chars, a.max_task_chars, t.agent
                            ),
                        );
                    }
                }
            }
            match &t.task_kind {
                None if !is_root => d.push(
                    F,
                    at("task_kind"),
                    "toml_missing_key",
                    "required key `task_kind` is missing",
                ),
                Some(k) if !is_root && !a.allowed_task_kinds.contains(k) => d.push(
                    F,
                    at("task_kind"),
                    "smoke_task_kind",
                    format!("`{}` does not admit `{k}`", t.agent),
                ),
                _ => {}
            }
        }
        if !t.attachments.is_empty() && !a.attachments_allowed {
            d.push(
                F,
                at("attachments"),
                "smoke_attachments",
                format!("`{}` does not allow attachments", t.agent),
            );
        }
        for (j, tool) in t.required_mcp_tools.iter().enumerate() {
            let path = format!("tasks[{i}].required_mcp_tools[{j}]");
            let Some((server, name)) = tool
                .split_once('.')
                .filter(|(s, n)| !s.is_empty() && !n.is_empty())
            else {
                d.push(
                    F,
                    path,
                    "smoke_tool_name",
                    format!("`{tool}` must be `server.tool`"),
                );
                continue;
            };
            if server == MESH_SERVER {
                if !mesh_tool_available(a, name) {
                    d.push(
                        F,
                        path,
                        "smoke_tool_unavailable",
                        format!("`{tool}` is not a mesh tool available to `{}`", t.agent),
                    );
                }
                continue;
            }
            match a.tool_mcp_servers.get(server) {
                None => d.push(
                    F,
                    path,
                    "smoke_tool_unavailable",
                    format!("`{}` has no Tool MCP grant for `{server}`", t.agent),
                ),
                Some(g) => {
                    // A grant without `enabled_tools` enables what the operator allows; an
                    // unregistered server enables nothing (its grant is reported on its own).
                    let enabled = match &g.enabled_tools {
                        Some(tools) => tools.iter().any(|x| x == name),
                        None => servers
                            .get(server)
                            .is_some_and(|s| s.allowed_tools.iter().any(|x| x == name)),
                    };
                    if !enabled {
                        d.push(
                            F,
                            path,
                            "smoke_tool_unavailable",
                            format!(
                                "the `{server}` grant of `{}` does not enable `{name}`",
                                t.agent
                            ),
                        );
                    }
                }
            }
        }
    }
}

fn check_ceilings(p: &Profile, c: &Ceilings, cat: &Catalog, d: &mut Diags) {
    const C: &str = "coordination";
    if c.max_active_agents.exceeded() {
        d.push(P, format!("{C}.max_active_agents"), "ceiling_concurrency", format!("{} exceeds the derived concurrency ceiling {} (root plus the reachable slots that fit their resource groups)", c.max_active_agents.declared, c.max_active_agents.derived.unwrap_or(0)));
    }
    if c.max_active_writers.exceeded() {
        d.push(
            P,
            format!("{C}.max_active_writers"),
            "ceiling_writers",
            format!(
                "{} exceeds the derived writer ceiling {}",
                c.max_active_writers.declared,
                c.max_active_writers.derived.unwrap_or(0)
            ),
        );
    }
    if c.max_depth.exceeded() {
        d.push(
            P,
            format!("{C}.max_depth"),
            "ceiling_depth",
            format!(
                "{} exceeds the deepest spawn chain {}",
                c.max_depth.declared,
                c.max_depth.derived.unwrap_or(0)
            ),
        );
    }
    if let Some(n) = p.coordination.native_max_concurrent_threads
        && n > c.max_active_agents.effective.saturating_sub(1)
    {
        d.push(
            P,
            format!("{C}.native_max_concurrent_threads"),
            "ceiling_native_threads",
            format!(
                "{n} exceeds max_active_agents minus the root slot ({})",
                c.max_active_agents.effective.saturating_sub(1)
            ),
        );
    }
    for (name, a) in &p.agents {
        if let Some(g) = &a.resource_group
            && let Some(rg) = cat.resource_groups.get(g)
        {
            if a.resource_units > rg.capacity {
                d.push(
                    P,
                    ap(name, "resource_units"),
                    "resource_units_exceed_capacity",
                    format!(
                        "{} units exceed the capacity {} of `{g}`",
                        a.resource_units, rg.capacity
                    ),
                );
            }
            if a.trust == "low" && rg.capacity != 1 {
                d.push(P, ap(name, "resource_group"), "low_trust_resource_group", format!("trust = \"low\" requires a single-slot resource group; `{g}` has capacity {}", rg.capacity));
            }
        }
    }
}
