//! `profile.toml` and `smoke.toml` → resolved model, with per-field types, enums, ranges and
//! defaults. Rules that relate several fields live in `validate`.

use crate::diag::Diags;
use crate::model::*;
use crate::pack::normalize_ref;
use crate::strict::{Tbl, parse_table};
use std::collections::BTreeMap;

/// Whether `s` is a stable lowercase profile id.
pub fn is_profile_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && !s.ends_with('-')
}

/// Codex's built-in agent roles: a custom agent of the same name would replace one.
pub const CODEX_BUILTIN_AGENTS: &[&str] = &["default", "explorer", "worker", "awaiter", "monitor"];

/// Whether `s` is a safe `native_name`: `[a-z0-9][a-z0-9_-]*`, at most 64 bytes. It becomes the
/// file stem of `agents/<native_name>.toml` in the root's Codex home, so it can hold no `/`,
/// no `.` (so neither `..` nor a second suffix), no upper case (case-insensitive file systems)
/// and nothing a shell or TOML key would need to quote.
pub fn is_native_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// Whether `s` is a role id (`snake_case`), usable as a TOML bare key and a file name.
pub fn is_role_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
}

fn check_schema_version(t: &Tbl, d: &mut Diags) {
    if !t.has("schema_version") {
        t.missing(d, "schema_version");
        return;
    }
    if let Some(v) = t.int(d, "schema_version")
        && v != SCHEMA_VERSION
    {
        t.err(
            d,
            "schema_version",
            "schema_version_unsupported",
            format!("only MMO schema {SCHEMA_VERSION} is valid; found {v} (earlier packs are not migrated)"),
        );
    }
}

fn pack_ref(t: &Tbl, d: &mut Diags, k: &str, dir: &str, suffix: &str) -> Option<String> {
    let raw = t.str(d, k)?;
    match normalize_ref(&raw) {
        Err(why) => {
            t.err(d, k, "pack_path_escape", format!("`{raw}`: {why}"));
            None
        }
        Ok(p) => {
            let ok = match p.split_once('/') {
                Some((top, rest)) => top == dir && !rest.contains('/') && rest.ends_with(suffix),
                None => false,
            };
            if !ok {
                t.err(
                    d,
                    k,
                    "pack_ref_location",
                    format!("`{raw}` must name a {dir}/*{suffix} member"),
                );
                None
            } else {
                Some(p)
            }
        }
    }
}

fn top_ref(t: &Tbl, d: &mut Diags, k: &str, expected: &str) -> Option<String> {
    let raw = t.str(d, k)?;
    match normalize_ref(&raw) {
        Err(why) => {
            t.err(d, k, "pack_path_escape", format!("`{raw}`: {why}"));
            None
        }
        Ok(p) if p == expected => Some(p),
        Ok(_) => {
            // The layout admits only these top-level members, so any other name is unreachable.
            t.err(
                d,
                k,
                "pack_ref_location",
                format!("`{raw}` must be `{expected}` (the only member the layout admits for it)"),
            );
            None
        }
    }
}

/// Parse `profile.toml`. Returns `None` only when the file is not a TOML table at all.
pub fn parse_profile(text: &str, d: &mut Diags) -> Option<Profile> {
    const F: &str = "profile.toml";
    let table = parse_table(F, text, d)?;
    let t = Tbl::new(F, "", &table);
    check_schema_version(&t, d);
    let id = t.req_str(d, "id").unwrap_or_default();
    if t.has("id") && !id.is_empty() && !is_profile_id(&id) {
        t.err(
            d,
            "id",
            "profile_id_format",
            format!("`{id}` is not a stable lowercase id ([a-z][a-z0-9-]*, at most 64)"),
        );
    }
    let version = t.req_str(d, "version").unwrap_or_default();
    if t.has("version") && !version.is_empty() && version != PACKAGE_VERSION {
        t.err(
            d,
            "version",
            "profile_version_mismatch",
            format!("`{version}` must equal the package version {PACKAGE_VERSION}"),
        );
    }
    let display_name = t.req_str(d, "display_name").unwrap_or_default();
    let description = t.req_str(d, "description").unwrap_or_default();
    let tags = t.str_list(d, "tags").unwrap_or_default();
    let maturity = if t.has("maturity") {
        t.enum_str(d, "maturity", &["featured", "lab"], "profile_maturity")
            .unwrap_or_else(|| "lab".into())
    } else {
        t.missing(d, "maturity");
        "lab".into()
    };
    let root = t.req_str(d, "root").unwrap_or_default();
    let catalog = top_ref(&t, d, "catalog", "catalog.toml");
    let smoke = top_ref(&t, d, "smoke", "smoke.toml");

    let coordination = match t.table(d, "coordination") {
        Some(c) => parse_coordination(&c, d),
        None => {
            let empty = toml::Table::new();
            parse_coordination(&Tbl::new(F, "coordination", &empty), d)
        }
    };

    let mut agents = BTreeMap::new();
    match t.table(d, "agents") {
        Some(a) => {
            for (name, at) in a.entries(d) {
                if !is_role_id(&name) {
                    d.push(
                        F,
                        at.path(),
                        "agent_id_format",
                        format!("role id `{name}` must be snake_case ([a-z][a-z0-9_]*)"),
                    );
                }
                let agent = parse_agent(&at, &coordination, d);
                agents.insert(name, agent);
            }
            a.finish(d);
        }
        None => t.missing(d, "agents"),
    }
    t.finish(d);
    Some(Profile {
        schema_version: SCHEMA_VERSION,
        id,
        version,
        display_name,
        description,
        tags,
        maturity,
        root,
        catalog,
        smoke,
        coordination,
        agents,
    })
}

fn parse_coordination(c: &Tbl, d: &mut Diags) -> Coordination {
    let s = |d: &mut Diags, k: &str, allowed: &[&str], rule: &'static str, def: &str| {
        c.enum_str(d, k, allowed, rule)
            .unwrap_or_else(|| def.to_string())
    };
    let mode = c.str(d, "mode").unwrap_or_else(|| "rooted_team".into());
    let orchestration = s(
        d,
        "orchestration",
        &["mcp", "native", "hybrid"],
        "coordination_orchestration",
        "mcp",
    );
    let max_active_agents_declared = c.has("max_active_agents");
    let max_active_agents = c.u32_in(d, "max_active_agents", 1, 64, "coordination_range", 5);
    let max_depth_declared = c.has("max_depth");
    let max_depth = c.u32_in(d, "max_depth", 0, 16, "coordination_range", 1);
    let max_children_per_agent =
        c.u32_in(d, "max_children_per_agent", 0, 64, "coordination_range", 4);
    let max_active_writers_declared = c.has("max_active_writers");
    let max_active_writers = c.u32_in(d, "max_active_writers", 0, 64, "coordination_range", 2);
    let reject_ancestor_role = c.bool(d, "reject_ancestor_role").unwrap_or(true);
    // Historical wait modes are rejected by name rather than silently mapped.
    let wait_policy = s(
        d,
        "wait_policy",
        &["dependency_only"],
        "coordination_wait_policy",
        "dependency_only",
    );
    let write_conflict_policy = s(
        d,
        "write_conflict_policy",
        &["reject"],
        "coordination_write_conflict_policy",
        "reject",
    );
    let contradiction_policy = s(
        d,
        "contradiction_policy",
        &["primary_evidence", "designated_judge", "root_adjudication"],
        "coordination_contradiction_policy",
        "primary_evidence",
    );
    let result_visibility = s(
        d,
        "result_visibility",
        &["ancestors", "session"],
        "coordination_result_visibility",
        "ancestors",
    );
    let max_result_chars = c.u32_in(
        d,
        "max_result_chars",
        1,
        1_000_000,
        "coordination_range",
        30_000,
    );
    let default_result_chars = c.u32_in(
        d,
        "default_result_chars",
        1,
        1_000_000,
        "coordination_range",
        12_000,
    );
    if default_result_chars > max_result_chars {
        c.err(
            d,
            "default_result_chars",
            "coordination_result_chars",
            format!("{default_result_chars} exceeds max_result_chars {max_result_chars}"),
        );
    }
    let native_max_concurrent_threads = c
        .int_in(
            d,
            "native_max_concurrent_threads",
            0,
            64,
            "coordination_range",
        )
        .map(|v| v as u32);
    let native_interrupt_message = c.bool(d, "native_interrupt_message").unwrap_or(true);
    let native_nested_delegation = c.bool(d, "native_nested_delegation").unwrap_or(false);
    c.finish(d);
    Coordination {
        mode,
        orchestration,
        max_active_agents,
        max_active_agents_declared,
        max_depth,
        max_depth_declared,
        max_children_per_agent,
        max_active_writers,
        max_active_writers_declared,
        reject_ancestor_role,
        wait_policy,
        write_conflict_policy,
        contradiction_policy,
        result_visibility,
        default_result_chars,
        max_result_chars,
        native_max_concurrent_threads,
        native_interrupt_message,
        native_nested_delegation,
    }
}

fn parse_agent(a: &Tbl, co: &Coordination, d: &mut Diags) -> Agent {
    let kind = a
        .enum_str(d, "kind", &["root", "participant"], "agent_kind")
        .unwrap_or_else(|| "participant".into());
    let description = a.str(d, "description").unwrap_or_default();
    let model = a.req_str(d, "model").unwrap_or_default();
    let reasoning = a
        .enum_str(d, "reasoning", REASONING, "agent_reasoning")
        .unwrap_or_else(|| "high".into());
    let plan_reasoning = a.enum_str(d, "plan_reasoning", REASONING, "agent_reasoning");
    let permissions = a
        .enum_str(
            d,
            "permissions",
            &["read-only", "workspace-write"],
            "agent_permissions",
        )
        .unwrap_or_else(|| "read-only".into());
    let can_spawn = a.str_list(d, "can_spawn").unwrap_or_default();
    let mut controls = BTreeMap::new();
    if let Some(ct) = a.table(d, "controls") {
        for (target, tt) in ct.entries(d) {
            let actions =
                match tt.enum_list(d, "actions", CONTROL_ACTIONS, "control_action_unknown") {
                    Some(list) if list.is_empty() => {
                        tt.err(
                            d,
                            "actions",
                            "control_actions_empty",
                            "a control table must grant at least one action",
                        );
                        list
                    }
                    Some(list) => list,
                    None => {
                        if !tt.has("actions") {
                            tt.missing(d, "actions");
                        }
                        Vec::new()
                    }
                };
            tt.finish(d);
            controls.insert(target, actions);
        }
        ct.finish(d);
    }
    let max_active = a.u32_in(d, "max_active", 1, 64, "agent_range", 1);
    let max_children = a
        .int_in(d, "max_children", 0, 64, "agent_range")
        .map(|v| v as u32)
        .unwrap_or(co.max_children_per_agent);
    let write_scope_required = a.bool(d, "write_scope_required").unwrap_or(true);
    let trust = a
        .enum_str(
            d,
            "trust",
            &["low", "normal", "high", "adversarial_reviewer"],
            "agent_trust",
        )
        .unwrap_or_else(|| "normal".into());
    let verification = a
        .enum_str(
            d,
            "verification",
            &[
                "always",
                "material_changes",
                "risk_based",
                "root_adjudication",
            ],
            "agent_verification",
        )
        .unwrap_or_else(|| "material_changes".into());
    let allowed_task_kinds = a
        .enum_list(d, "allowed_task_kinds", TASK_KINDS, "agent_task_kind")
        .unwrap_or_else(|| vec!["analysis".into(), "other".into()]);
    if allowed_task_kinds.is_empty() {
        a.err(
            d,
            "allowed_task_kinds",
            "agent_task_kind",
            "a role must admit at least one task kind",
        );
    }
    let min_task_chars = a.u32_in(d, "min_task_chars", 1, 100_000, "agent_task_chars", 12);
    let max_task_chars = a.u32_in(d, "max_task_chars", 1, 100_000, "agent_task_chars", 12_000);
    if min_task_chars > max_task_chars {
        a.err(
            d,
            "min_task_chars",
            "agent_task_chars",
            format!("min_task_chars {min_task_chars} exceeds max_task_chars {max_task_chars}"),
        );
    }
    let execution_mode = a
        .enum_str(
            d,
            "execution_mode",
            &["turn", "goal"],
            "agent_execution_mode",
        )
        .unwrap_or_else(|| "turn".into());
    let goal_token_budget = a
        .int_in(
            d,
            "goal_token_budget",
            10_000,
            100_000_000,
            "agent_goal_budget_range",
        )
        .map(|v| v as u64);
    let max_goal_token_budget = a
        .int_in(
            d,
            "max_goal_token_budget",
            10_000,
            100_000_000,
            "agent_goal_budget_range",
        )
        .map(|v| v as u64);
    let stall_warning_seconds = a.u32_in(
        d,
        "stall_warning_seconds",
        60,
        86_400,
        "agent_stall_range",
        1800,
    );
    let finalization_grace_seconds = a.u32_in(
        d,
        "finalization_grace_seconds",
        30,
        3_600,
        "agent_grace_range",
        900,
    );
    let allowed_reasoning_efforts = a
        .enum_list(d, "allowed_reasoning_efforts", REASONING, "agent_reasoning")
        .unwrap_or_else(|| vec![reasoning.clone()]);
    let requires_modalities = a
        .enum_list(d, "requires_modalities", INPUT_MODALITIES, "agent_modality")
        .unwrap_or_else(|| vec!["text".into()]);
    let requires_output_modalities = a
        .enum_list(
            d,
            "requires_output_modalities",
            OUTPUT_MODALITIES,
            "agent_modality",
        )
        .unwrap_or_else(|| vec!["text".into()]);
    let requires_tool_images = a.bool(d, "requires_tool_images").unwrap_or(false);
    let requires_documents = a.bool(d, "requires_documents").unwrap_or(false);
    let attachments_allowed = a.bool(d, "attachments_allowed").unwrap_or(false);
    let network_access = a.bool(d, "network_access").unwrap_or(false);
    let web_search = a
        .enum_str(
            d,
            "web_search",
            &["disabled", "cached", "indexed", "live"],
            "agent_web_search",
        )
        .unwrap_or_else(|| "disabled".into());
    let output_contract = pack_ref(a, d, "output_contract", "contracts", ".json");
    let contract_enforcement = a
        .enum_str(
            d,
            "contract_enforcement",
            &["warn", "strict"],
            "agent_contract_enforcement",
        )
        .unwrap_or_else(|| "warn".into());
    let resource_group = a.str(d, "resource_group");
    let resource_units = a.u32_in(d, "resource_units", 1, 1024, "agent_range", 1);
    let instructions = pack_ref(a, d, "instructions", "agents", ".md");
    let approval_policy = a
        .enum_str(
            d,
            "approval_policy",
            &["untrusted", "on-request", "never"],
            "agent_approval_policy",
        )
        .unwrap_or_else(|| "never".into());
    if approval_policy == "untrusted" {
        // The spec lists it, but Codex 0.169 refuses to start with it ("approval_policy =
        // \"untrusted\" is no longer supported"): a role that cannot start is no role.
        a.err(
            d,
            "approval_policy",
            "agent_approval_policy_unsupported",
            "approval_policy = \"untrusted\" is not supported by Codex 0.169 (its app-server refuses to start with it); use \"on-request\" or \"never\"",
        );
    }
    let backends_declared = a.has("backends");
    let mut backends = a
        .enum_list(d, "backends", &["mcp", "native"], "agent_backend")
        .unwrap_or_default();
    if backends_declared && backends.is_empty() && a.has("backends") {
        a.err(
            d,
            "backends",
            "agent_backend",
            "backends cannot be empty; leave it out for the profile-derived default",
        );
    }
    if !backends_declared && kind == "root" {
        // The root runs in its own app-server host; no worker backend applies to it.
        backends = Vec::new();
    } else if !backends_declared {
        backends = match co.orchestration.as_str() {
            "native" => vec!["native".into()],
            "hybrid" => vec!["mcp".into(), "native".into()],
            _ => vec!["mcp".into()],
        };
    }
    backends.sort();
    let native_name = a.str(d, "native_name");
    let mut tool_mcp_servers = BTreeMap::new();
    if let Some(gt) = a.table(d, "tool_mcp_servers") {
        for (server, g) in gt.entries(d) {
            let required = g.bool(d, "required").unwrap_or(false);
            let enabled_tools = g.str_list(d, "enabled_tools");
            g.finish(d);
            tool_mcp_servers.insert(
                server,
                Grant {
                    required,
                    enabled_tools,
                },
            );
        }
        gt.finish(d);
    }
    // Remember whether the pack declared these, which the low-trust and root rules need.
    let agent = Agent {
        kind,
        description,
        model,
        reasoning,
        plan_reasoning,
        permissions,
        can_spawn,
        controls,
        max_active,
        max_children,
        write_scope_required,
        trust,
        verification,
        allowed_task_kinds,
        min_task_chars,
        max_task_chars,
        execution_mode,
        goal_token_budget,
        max_goal_token_budget,
        stall_warning_seconds,
        finalization_grace_seconds,
        allowed_reasoning_efforts,
        requires_modalities,
        requires_output_modalities,
        requires_tool_images,
        requires_documents,
        attachments_allowed,
        network_access,
        web_search,
        output_contract,
        contract_enforcement,
        resource_group,
        resource_units,
        instructions,
        approval_policy,
        backends,
        native_name,
        tool_mcp_servers,
    };
    if agent.kind == "root" && backends_declared {
        a.err(
            d,
            "backends",
            "root_backends",
            "the root runs in its own app-server host; backends apply to participants only",
        );
    }
    a.finish(d);
    agent
}

/// Parse `smoke.toml`.
pub fn parse_smoke(text: &str, d: &mut Diags) -> Option<Smoke> {
    const F: &str = "smoke.toml";
    let table = parse_table(F, text, d)?;
    let t = Tbl::new(F, "", &table);
    check_schema_version(&t, d);
    let mut tasks = Vec::new();
    for tt in t.table_array(d, "tasks").unwrap_or_default() {
        let agent = tt.req_str(d, "agent").unwrap_or_default();
        let backend = tt
            .enum_str(d, "backend", &["root", "mcp", "native"], "smoke_backend")
            .unwrap_or_else(|| "mcp".into());
        if !tt.has("backend") {
            tt.missing(d, "backend");
        }
        let task_kind = tt.enum_str(d, "task_kind", TASK_KINDS, "agent_task_kind");
        let mode = tt
            .enum_str(d, "mode", &["read-only", "workspace-write"], "smoke_mode")
            .unwrap_or_else(|| "read-only".into());
        let wall_timeout_seconds =
            match tt.int_in(d, "wall_timeout_seconds", 10, 86_400, "smoke_wall_timeout") {
                Some(v) => v as u32,
                None => {
                    if !tt.has("wall_timeout_seconds") {
                        tt.missing(d, "wall_timeout_seconds");
                    }
                    0
                }
            };
        let required_mcp_tools = tt.str_list(d, "required_mcp_tools").unwrap_or_default();
        let task = tt.str(d, "task");
        let literal_task = tt.table(d, "literal_task").map(|lt| {
            let operation = lt
                .enum_str(
                    d,
                    "operation",
                    LOW_TRUST_TASK_KINDS,
                    "smoke_literal_operation",
                )
                .unwrap_or_default();
            if !lt.has("operation") {
                lt.missing(d, "operation");
            }
            let path = match lt.req_str(d, "path") {
                Some(p) => match normalize_ref(&p) {
                    Ok(n) => n,
                    Err(why) => {
                        lt.err(d, "path", "smoke_literal_path", format!("`{p}`: {why}"));
                        p
                    }
                },
                None => String::new(),
            };
            let start_line = lt
                .int_in(
                    d,
                    "start_line",
                    1,
                    i64::from(u32::MAX),
                    "smoke_literal_range",
                )
                .map(|v| v as u32);
            let end_line = lt
                .int_in(d, "end_line", 1, i64::from(u32::MAX), "smoke_literal_range")
                .map(|v| v as u32);
            if let (Some(s), Some(e)) = (start_line, end_line)
                && s > e
            {
                lt.err(
                    d,
                    "end_line",
                    "smoke_literal_range",
                    format!("end_line {e} precedes start_line {s}"),
                );
            }
            let query = lt.str(d, "query");
            lt.finish(d);
            LiteralTask {
                operation,
                path,
                start_line,
                end_line,
                query,
            }
        });
        let write_scope = tt.str_list(d, "write_scope").unwrap_or_default();
        for (i, p) in write_scope.iter().enumerate() {
            if let Err(why) = normalize_ref(p) {
                d.push(
                    F,
                    format!("{}[{i}]", tt.key("write_scope")),
                    "smoke_write_scope",
                    format!("`{p}`: {why}"),
                );
            }
        }
        let attachments = tt.str_list(d, "attachments").unwrap_or_default();
        let wait_seconds = tt
            .int_in(d, "wait_seconds", 0, 86_400, "smoke_wait_seconds")
            .map(|v| v as u32);
        tt.finish(d);
        tasks.push(SmokeTask {
            agent,
            backend,
            task_kind,
            mode,
            wall_timeout_seconds,
            required_mcp_tools,
            task,
            literal_task,
            write_scope,
            attachments,
            wait_seconds,
        });
    }
    if !t.has("tasks") {
        t.missing(d, "tasks");
    }
    t.finish(d);
    Some(Smoke {
        schema_version: SCHEMA_VERSION,
        tasks,
    })
}
