//! One broken pack per rule: each case breaks exactly one thing and asserts the rule id, file and
//! key path of the diagnostic it must produce.

mod common;
use common::*;
use std::fs;
use std::path::Path;
use toml::Value;

fn expect(
    result: Result<mmo_profile::validate::Validated, mmo_profile::Rejected>,
    file: &str,
    path: &str,
    rule: &str,
) {
    let err = match result {
        Ok(_) => panic!("expected rule {rule} at {file}:{path}, but the pack validated"),
        Err(e) => e,
    };
    assert!(
        err.0
            .iter()
            .any(|d| d.rule == rule && d.file == file && d.path == path),
        "expected {file}: {path}: [{rule}], got:\n{err}"
    );
}

macro_rules! profile_rule {
    ($name:ident, $path:expr, $rule:expr, |$t:ident| $body:block) => {
        #[test]
        fn $name() {
            expect(check(|$t| $body, |_| {}), "profile.toml", $path, $rule);
        }
    };
}

#[test]
fn base_pack_is_valid() {
    let v = check(|_| {}, |_| {}).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.profile.agents.len(), 4);
    assert_eq!(v.ceilings.max_active_agents.derived, Some(4));
}

// --- strict TOML ---------------------------------------------------------------------------
profile_rule!(
    unknown_top_level_field_is_rejected,
    "colour",
    "toml_unknown_field",
    |t| {
        set(t, "colour", "blue");
    }
);
profile_rule!(
    unknown_agent_field_is_rejected_with_its_key_path,
    "agents.writer.modle",
    "toml_unknown_field",
    |t| {
        set(t, "agents.writer.modle", "x");
    }
);
profile_rule!(
    boolean_schema_version_is_not_an_integer,
    "schema_version",
    "toml_wrong_type",
    |t| {
        set(t, "schema_version", true);
    }
);
profile_rule!(
    string_one_is_not_an_integer,
    "agents.writer.max_active",
    "toml_wrong_type",
    |t| {
        set(t, "agents.writer.max_active", "1");
    }
);
profile_rule!(
    table_where_list_expected_is_rejected,
    "agents.writer.can_spawn",
    "toml_wrong_type",
    |t| {
        set(t, "agents.writer.can_spawn", toml::Table::new());
    }
);
profile_rule!(
    schema_version_other_than_8_is_rejected,
    "schema_version",
    "schema_version_unsupported",
    |t| {
        set(t, "schema_version", 7);
    }
);
profile_rule!(
    version_must_equal_package_version,
    "version",
    "profile_version_mismatch",
    |t| {
        set(t, "version", "8.0.1");
    }
);
profile_rule!(
    missing_required_field_is_named,
    "display_name",
    "toml_missing_key",
    |t| {
        remove(t, "display_name");
    }
);
profile_rule!(
    profile_id_must_be_lowercase,
    "id",
    "profile_id_format",
    |t| {
        set(t, "id", "Rules_Base");
    }
);
profile_rule!(maturity_is_an_enum, "maturity", "profile_maturity", |t| {
    set(t, "maturity", "beta");
});
profile_rule!(
    duplicate_list_item_is_rejected,
    "agents.lead.can_spawn[1]",
    "toml_duplicate_item",
    |t| {
        set(t, "agents.lead.can_spawn", strs(&["reviewer", "reviewer"]));
    }
);

// --- coordination ----------------------------------------------------------------------------
profile_rule!(
    historical_wait_policy_is_rejected,
    "coordination.wait_policy",
    "coordination_wait_policy",
    |t| {
        set(t, "coordination.wait_policy", "all_children");
    }
);
profile_rule!(
    orchestration_is_an_enum,
    "coordination.orchestration",
    "coordination_orchestration",
    |t| {
        set(t, "coordination.orchestration", "swarm");
    }
);
profile_rule!(
    contradiction_policy_is_an_enum,
    "coordination.contradiction_policy",
    "coordination_contradiction_policy",
    |t| {
        set(t, "coordination.contradiction_policy", "vote");
    }
);
profile_rule!(
    default_result_chars_cannot_exceed_max,
    "coordination.default_result_chars",
    "coordination_result_chars",
    |t| {
        set(t, "coordination.default_result_chars", 40000);
    }
);

// --- roots and graph -------------------------------------------------------------------------
profile_rule!(root_must_name_an_agent, "root", "root_unknown", |t| {
    set(t, "root", "boss");
});
profile_rule!(
    root_agent_must_have_kind_root,
    "agents.writer.kind",
    "root_kind",
    |t| {
        set(t, "root", "writer");
    }
);
profile_rule!(
    only_one_agent_may_be_root,
    "agents.reviewer.kind",
    "root_count",
    |t| {
        set(t, "agents.reviewer.kind", "root");
    }
);
profile_rule!(
    spawn_target_must_exist,
    "agents.lead.can_spawn[0]",
    "spawn_unknown_target",
    |t| {
        set(
            t,
            "agents.lead.can_spawn",
            strs(&["ghost", "reviewer", "writer", "locator"]),
        );
    }
);
profile_rule!(
    root_cannot_be_spawned,
    "agents.writer.can_spawn[0]",
    "spawn_root",
    |t| {
        set(t, "agents.writer.can_spawn", strs(&["lead"]));
    }
);
profile_rule!(
    control_target_must_exist,
    "agents.lead.controls.ghost",
    "control_unknown_target",
    |t| {
        set(t, "agents.lead.controls.ghost.actions", strs(&["inspect"]));
    }
);
profile_rule!(
    control_action_outside_allowlist_is_rejected,
    "agents.lead.controls.reviewer.actions[1]",
    "control_action_unknown",
    |t| {
        set(
            t,
            "agents.lead.controls.reviewer.actions",
            strs(&["inspect", "delete"]),
        );
    }
);
profile_rule!(
    control_table_holds_only_actions,
    "agents.lead.controls.reviewer.revision",
    "toml_unknown_field",
    |t| {
        set(t, "agents.lead.controls.reviewer.revision", 3);
    }
);
profile_rule!(
    plan_reasoning_is_root_only,
    "agents.writer.plan_reasoning",
    "plan_reasoning_root_only",
    |t| {
        set(t, "agents.writer.plan_reasoning", "high");
    }
);

// --- ranges and lifecycle --------------------------------------------------------------------
profile_rule!(
    goal_budget_below_10000_is_rejected,
    "agents.lead.goal_token_budget",
    "agent_goal_budget_range",
    |t| {
        set(t, "agents.lead.goal_token_budget", 9999);
    }
);
profile_rule!(
    goal_budget_above_100m_is_rejected,
    "agents.lead.max_goal_token_budget",
    "agent_goal_budget_range",
    |t| {
        set(t, "agents.lead.max_goal_token_budget", 100_000_001);
    }
);
profile_rule!(
    max_goal_budget_must_cover_initial,
    "agents.lead.max_goal_token_budget",
    "goal_budget_ceiling",
    |t| {
        set(t, "agents.lead.max_goal_token_budget", 500000);
    }
);
profile_rule!(
    goal_mode_requires_a_budget,
    "agents.lead.goal_token_budget",
    "goal_budget_required",
    |t| {
        remove(t, "agents.lead.goal_token_budget");
    }
);
profile_rule!(
    budget_on_turn_mode_is_rejected,
    "agents.writer.goal_token_budget",
    "goal_budget_turn_mode",
    |t| {
        set(t, "agents.writer.goal_token_budget", 20000);
    }
);
profile_rule!(
    stall_warning_below_60_is_rejected,
    "agents.writer.stall_warning_seconds",
    "agent_stall_range",
    |t| {
        set(t, "agents.writer.stall_warning_seconds", 59);
    }
);
profile_rule!(
    stall_warning_above_a_day_is_rejected,
    "agents.writer.stall_warning_seconds",
    "agent_stall_range",
    |t| {
        set(t, "agents.writer.stall_warning_seconds", 86401);
    }
);
profile_rule!(
    grace_outside_30_to_3600_is_rejected,
    "agents.writer.finalization_grace_seconds",
    "agent_grace_range",
    |t| {
        set(t, "agents.writer.finalization_grace_seconds", 29);
    }
);
profile_rule!(
    min_task_chars_cannot_exceed_max,
    "agents.writer.min_task_chars",
    "agent_task_chars",
    |t| {
        set(t, "agents.writer.min_task_chars", 500);
        set(t, "agents.writer.max_task_chars", 100);
    }
);
profile_rule!(
    unknown_task_kind_is_rejected,
    "agents.writer.allowed_task_kinds[0]",
    "agent_task_kind",
    |t| {
        set(
            t,
            "agents.writer.allowed_task_kinds",
            strs(&["refactoring"]),
        );
    }
);
profile_rule!(
    goal_mode_is_not_for_native_capable_participants,
    "agents.writer.execution_mode",
    "goal_mode_native",
    |t| {
        set(t, "coordination.orchestration", "hybrid");
        set(t, "agents.writer.backends", strs(&["mcp", "native"]));
        set(t, "agents.writer.execution_mode", "goal");
        set(t, "agents.writer.goal_token_budget", 20000);
        set(t, "agents.writer.max_goal_token_budget", 20000);
    }
);
profile_rule!(
    initial_reasoning_must_be_allowed,
    "agents.writer.allowed_reasoning_efforts",
    "reasoning_not_allowed",
    |t| {
        set(
            t,
            "agents.writer.allowed_reasoning_efforts",
            strs(&["none"]),
        );
    }
);

// --- backends and contracts ------------------------------------------------------------------
profile_rule!(
    native_backend_needs_native_orchestration,
    "agents.writer.backends",
    "backend_orchestration",
    |t| {
        set(t, "agents.writer.backends", strs(&["native"]));
    }
);
profile_rule!(
    strict_contract_is_not_for_native_only_roles,
    "agents.reviewer.contract_enforcement",
    "strict_contract_native_only",
    |t| {
        set(t, "coordination.orchestration", "hybrid");
        set(t, "agents.reviewer.backends", strs(&["native"]));
    }
);
profile_rule!(
    strict_enforcement_needs_a_contract,
    "agents.reviewer.output_contract",
    "strict_contract_missing",
    |t| {
        remove(t, "agents.reviewer.output_contract");
    }
);
profile_rule!(
    native_child_needs_an_mcp_path_in_hybrid,
    "agents.scout.can_spawn",
    "hybrid_native_child_mcp_path",
    |t| {
        set(t, "coordination.orchestration", "hybrid");
        set(
            t,
            "agents.lead.can_spawn",
            strs(&["reviewer", "writer", "locator", "scout"]),
        );
        set(
            t,
            "agents.scout.model",
            "codex_chatgpt_builtin__gpt_5_6_terra_mini",
        );
        set(t, "agents.scout.backends", strs(&["native"]));
        set(t, "agents.scout.can_spawn", strs(&["scout2"]));
        set(
            t,
            "agents.scout2.model",
            "codex_chatgpt_builtin__gpt_5_6_terra_mini",
        );
        set(t, "agents.scout2.backends", strs(&["native"]));
        set(t, "coordination.max_active_agents", 4);
    }
);
profile_rule!(
    featured_native_roles_are_read_only,
    "agents.scout.permissions",
    "featured_native_writable",
    |t| {
        set(t, "maturity", "featured");
        set(t, "coordination.orchestration", "hybrid");
        set(
            t,
            "agents.scout.model",
            "codex_chatgpt_builtin__gpt_5_6_terra_mini",
        );
        set(t, "agents.scout.backends", strs(&["native"]));
        set(t, "agents.scout.permissions", "workspace-write");
    }
);

// --- low trust: every requirement mechanically -----------------------------------------------
profile_rule!(
    low_trust_must_be_read_only,
    "agents.locator.permissions",
    "low_trust_permissions",
    |t| {
        set(t, "agents.locator.permissions", "workspace-write");
    }
);
profile_rule!(
    low_trust_cannot_spawn,
    "agents.locator.can_spawn",
    "low_trust_can_spawn",
    |t| {
        set(t, "agents.locator.can_spawn", strs(&["writer"]));
    }
);
profile_rule!(
    low_trust_cannot_control,
    "agents.locator.controls",
    "low_trust_controls",
    |t| {
        set(
            t,
            "agents.locator.controls.writer.actions",
            strs(&["inspect"]),
        );
    }
);
profile_rule!(
    low_trust_max_active_is_one,
    "agents.locator.max_active",
    "low_trust_max_active",
    |t| {
        set(t, "agents.locator.max_active", 2);
    }
);
profile_rule!(
    low_trust_verification_is_always,
    "agents.locator.verification",
    "low_trust_verification",
    |t| {
        set(t, "agents.locator.verification", "material_changes");
    }
);
profile_rule!(
    low_trust_enforcement_is_strict,
    "agents.locator.contract_enforcement",
    "low_trust_contract_enforcement",
    |t| {
        set(t, "agents.locator.contract_enforcement", "warn");
    }
);
profile_rule!(
    low_trust_needs_an_output_contract,
    "agents.locator.output_contract",
    "low_trust_output_contract",
    |t| {
        remove(t, "agents.locator.output_contract");
        set(t, "agents.locator.contract_enforcement", "strict");
    }
);
profile_rule!(
    low_trust_has_no_network,
    "agents.locator.network_access",
    "low_trust_network_access",
    |t| {
        set(t, "agents.locator.network_access", true);
    }
);
profile_rule!(
    low_trust_has_no_web_search,
    "agents.locator.web_search",
    "low_trust_web_search",
    |t| {
        set(t, "agents.locator.web_search", "live");
    }
);
profile_rule!(
    low_trust_takes_no_attachments,
    "agents.locator.attachments_allowed",
    "low_trust_attachments",
    |t| {
        set(t, "agents.locator.attachments_allowed", true);
    }
);
profile_rule!(
    low_trust_resource_units_is_one,
    "agents.locator.resource_units",
    "low_trust_resource_units",
    |t| {
        set(t, "agents.locator.resource_units", 2);
    }
);
profile_rule!(
    low_trust_brief_ceiling_is_2500,
    "agents.locator.max_task_chars",
    "low_trust_brief_ceiling",
    |t| {
        set(t, "agents.locator.max_task_chars", 2501);
    }
);
profile_rule!(
    low_trust_task_kinds_are_literal_only,
    "agents.locator.allowed_task_kinds",
    "low_trust_task_kinds",
    |t| {
        set(
            t,
            "agents.locator.allowed_task_kinds",
            strs(&["locate", "analysis"]),
        );
    }
);
profile_rule!(
    low_trust_needs_a_single_slot_group,
    "agents.locator.resource_group",
    "low_trust_resource_group",
    |t| {
        set(t, "agents.locator.resource_group", "opencode_go");
    }
);
profile_rule!(
    low_trust_backends_are_mcp_only,
    "agents.locator.backends",
    "low_trust_backends",
    |t| {
        set(t, "coordination.orchestration", "hybrid");
        set(t, "agents.locator.backends", strs(&["mcp", "native"]));
    }
);
profile_rule!(
    root_cannot_be_low_trust,
    "agents.lead.trust",
    "low_trust_root",
    |t| {
        set(t, "agents.lead.trust", "low");
    }
);

// --- catalog bindings ------------------------------------------------------------------------
profile_rule!(
    unqualified_model_id_is_rejected,
    "agents.writer.model",
    "model_key_format",
    |t| {
        set(t, "agents.writer.model", "deepseek-v4-pro");
    }
);
profile_rule!(
    unknown_model_key_is_rejected,
    "agents.writer.model",
    "model_unknown",
    |t| {
        set(
            t,
            "agents.writer.model",
            "opencode_go_openai_chat__deepseek_v9",
        );
    }
);
profile_rule!(
    unknown_route_is_rejected,
    "agents.writer.model",
    "model_route_unknown",
    |t| {
        set(t, "agents.writer.model", "openrouter_chat__deepseek_v4_pro");
    }
);
profile_rule!(
    model_must_be_agent_compatible,
    "agents.writer.model",
    "model_not_agent_compatible",
    |t| {
        set(
            t,
            "agents.writer.model",
            "opencode_go_openai_chat__kimi_k3_chat",
        );
        set(t, "agents.writer.reasoning", "none");
    }
);
profile_rule!(
    model_must_support_tool_calling,
    "agents.writer.model",
    "model_no_tool_calling",
    |t| {
        set(
            t,
            "agents.writer.model",
            "opencode_go_openai_chat__kimi_k3_chat",
        );
        set(t, "agents.writer.reasoning", "none");
    }
);
profile_rule!(
    reasoning_must_be_supported_by_model,
    "agents.writer.reasoning",
    "model_reasoning_unsupported",
    |t| {
        set(t, "agents.writer.reasoning", "xhigh");
    }
);
profile_rule!(
    required_input_modality_must_be_accepted,
    "agents.writer.requires_modalities",
    "model_input_modality",
    |t| {
        set(
            t,
            "agents.writer.requires_modalities",
            strs(&["text", "image"]),
        );
    }
);
profile_rule!(
    route_must_carry_required_modality,
    "agents.writer.requires_modalities",
    "route_input_modality",
    |t| {
        set(
            t,
            "agents.writer.requires_modalities",
            strs(&["text", "image"]),
        );
    }
);
profile_rule!(
    tool_images_need_a_preserving_route,
    "agents.writer.requires_tool_images",
    "route_tool_images",
    |t| {
        set(t, "agents.writer.requires_tool_images", true);
    }
);
profile_rule!(
    documents_need_a_document_route,
    "agents.writer.requires_documents",
    "route_documents",
    |t| {
        set(t, "agents.writer.requires_documents", true);
    }
);
profile_rule!(
    catalog_only_route_cannot_run_agents,
    "agents.writer.model",
    "route_not_executable",
    |t| {
        set(
            t,
            "agents.writer.model",
            "opencode_zen_listing__gemini_4_pro",
        );
    }
);
profile_rule!(
    backend_must_be_served_by_route,
    "agents.writer.backends",
    "route_backend_unsupported",
    |t| {
        set(t, "coordination.orchestration", "hybrid");
        set(t, "agents.writer.backends", strs(&["native"]));
    }
);
profile_rule!(
    resource_group_must_exist,
    "agents.writer.resource_group",
    "resource_group_unknown",
    |t| {
        set(t, "agents.writer.resource_group", "gpu_farm");
    }
);

// --- Tool MCP grants -------------------------------------------------------------------------
profile_rule!(
    grant_must_name_a_registered_server,
    "agents.reviewer.tool_mcp_servers.browser",
    "tool_mcp_unknown_server",
    |t| {
        set(t, "agents.reviewer.tool_mcp_servers.browser.required", true);
    }
);
profile_rule!(
    grant_can_only_narrow_the_allowlist,
    "agents.reviewer.tool_mcp_servers.search.enabled_tools[1]",
    "tool_mcp_widen",
    |t| {
        set(
            t,
            "agents.reviewer.tool_mcp_servers.search.enabled_tools",
            strs(&["query", "delete_index"]),
        );
    }
);
profile_rule!(
    mmo_mesh_cannot_be_granted,
    "agents.reviewer.tool_mcp_servers.mmo_mesh",
    "tool_mcp_reserved",
    |t| {
        set(
            t,
            "agents.reviewer.tool_mcp_servers.mmo_mesh.required",
            true,
        );
    }
);
profile_rule!(
    grant_cannot_change_the_command,
    "agents.reviewer.tool_mcp_servers.search.command",
    "toml_unknown_field",
    |t| {
        set(t, "agents.reviewer.tool_mcp_servers.search.command", "evil");
    }
);

// --- compiler ceilings -----------------------------------------------------------------------
profile_rule!(
    max_active_agents_above_derived_ceiling_is_rejected,
    "coordination.max_active_agents",
    "ceiling_concurrency",
    |t| {
        set(t, "coordination.max_active_agents", 5);
    }
);
profile_rule!(
    max_active_writers_above_derived_ceiling_is_rejected,
    "coordination.max_active_writers",
    "ceiling_writers",
    |t| {
        set(t, "coordination.max_active_writers", 2);
    }
);
profile_rule!(
    max_depth_above_deepest_chain_is_rejected,
    "coordination.max_depth",
    "ceiling_depth",
    |t| {
        set(t, "coordination.max_depth", 2);
    }
);
profile_rule!(
    role_cannot_request_more_units_than_capacity,
    "agents.writer.resource_units",
    "resource_units_exceed_capacity",
    |t| {
        set(t, "agents.writer.resource_units", 5);
    }
);
profile_rule!(
    native_threads_cannot_exceed_agents_minus_root,
    "coordination.native_max_concurrent_threads",
    "ceiling_native_threads",
    |t| {
        set(t, "coordination.native_max_concurrent_threads", 4);
    }
);

// --- pack layout -----------------------------------------------------------------------------
fn layout(rel: &str, rule: &str, f: impl FnOnce(&Path)) {
    expect(check(|_| {}, f), rel, "", rule);
}

#[test]
fn symlink_member_is_rejected() {
    layout("README.md", "pack_symlink", |d| {
        std::os::unix::fs::symlink("/etc/passwd", d.join("README.md")).unwrap()
    });
}

#[test]
fn executable_member_is_rejected() {
    use std::os::unix::fs::PermissionsExt;
    layout("agents/lead.md", "pack_executable", |d| {
        fs::set_permissions(d.join("agents/lead.md"), fs::Permissions::from_mode(0o755)).unwrap()
    });
}

#[test]
fn script_member_is_rejected() {
    layout("install.sh", "pack_script", |d| {
        fs::write(d.join("install.sh"), "echo hi\n").unwrap()
    });
}

#[test]
fn shebang_file_is_a_script() {
    layout("README.md", "pack_script", |d| {
        fs::write(d.join("README.md"), "#!/bin/sh\necho\n").unwrap()
    });
}

#[test]
fn special_file_is_rejected() {
    layout("LICENSE", "pack_special_file", |d| {
        let ok = std::process::Command::new("mkfifo")
            .arg(d.join("LICENSE"))
            .status()
            .unwrap()
            .success();
        assert!(ok, "mkfifo failed");
    });
}

#[test]
fn unknown_top_level_member_is_rejected() {
    layout("notes.txt", "pack_unknown_member", |d| {
        fs::write(d.join("notes.txt"), "x").unwrap()
    });
}

#[test]
fn unsupported_suffix_in_agents_is_rejected() {
    layout("agents/lead.txt", "pack_unsupported_suffix", |d| {
        fs::write(d.join("agents/lead.txt"), "x").unwrap()
    });
}

#[test]
fn nested_directory_is_rejected() {
    layout("agents/more", "pack_nested_directory", |d| {
        fs::create_dir(d.join("agents/more")).unwrap()
    });
}

#[test]
fn missing_named_instructions_file_is_rejected() {
    expect(
        check(
            |_| {},
            |d| fs::remove_file(d.join("agents/lead.md")).unwrap(),
        ),
        "profile.toml",
        "agents.lead.instructions",
        "pack_missing_file",
    );
}

#[test]
fn missing_named_smoke_file_is_rejected() {
    expect(
        check(
            |t| set(t, "smoke", "smoke.toml"),
            |d| fs::remove_file(d.join("smoke.toml")).unwrap(),
        ),
        "profile.toml",
        "smoke",
        "pack_missing_file",
    );
}

profile_rule!(
    escaping_instructions_path_is_rejected,
    "agents.lead.instructions",
    "pack_path_escape",
    |t| {
        set(t, "agents.lead.instructions", "../../etc/passwd.md");
    }
);
profile_rule!(
    absolute_contract_path_is_rejected,
    "agents.reviewer.output_contract",
    "pack_path_escape",
    |t| {
        set(t, "agents.reviewer.output_contract", "/etc/review.json");
    }
);
profile_rule!(
    instructions_must_live_in_agents,
    "agents.lead.instructions",
    "pack_ref_location",
    |t| {
        set(t, "agents.lead.instructions", "README.md");
    }
);

// --- contracts -------------------------------------------------------------------------------
fn contract_rule(schema: &str, pointer: &str, rule: &str) {
    let s = schema.to_string();
    expect(
        check(
            |_| {},
            move |d| fs::write(d.join("contracts/review.json"), s).unwrap(),
        ),
        "contracts/review.json",
        pointer,
        rule,
    );
}

#[test]
fn unsupported_schema_keyword_fails_pack_validation() {
    contract_rule(
        r#"{"type":"object","patternProperties":{"x":{}}}"#,
        "/patternProperties",
        "contract_unsupported_keyword",
    );
}

#[test]
fn remote_ref_fails_pack_validation() {
    contract_rule(
        r#"{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}"#,
        "/properties/a/$ref",
        "contract_ref",
    );
}

#[test]
fn vocabulary_fails_pack_validation() {
    contract_rule(
        r#"{"$vocabulary":{"https://x":true},"type":"object"}"#,
        "/$vocabulary",
        "contract_vocabulary",
    );
}

#[test]
fn unsupported_format_fails_pack_validation() {
    contract_rule(
        r#"{"type":"string","format":"email"}"#,
        "/format",
        "contract_format_unsupported",
    );
}

#[test]
fn contract_must_be_json() {
    contract_rule("{ not json", "", "contract_json");
}

// --- smoke -----------------------------------------------------------------------------------
fn smoke_rule(smoke: &str, path: &str, rule: &str) {
    let s = smoke.to_string();
    expect(
        check(|_| {}, move |d| fs::write(d.join("smoke.toml"), s).unwrap()),
        "smoke.toml",
        path,
        rule,
    );
}

#[test]
fn low_trust_smoke_task_needs_literal_task() {
    smoke_rule(
        "schema_version = 8\n[[tasks]]\nagent = \"locator\"\nbackend = \"mcp\"\ntask_kind = \"locate\"\nwall_timeout_seconds = 60\ntask = \"find the main function please\"\n",
        "tasks[0].literal_task",
        "smoke_literal_task_required",
    );
}

#[test]
fn smoke_required_tool_must_be_granted() {
    smoke_rule(
        "schema_version = 8\n[[tasks]]\nagent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"review\"\nwall_timeout_seconds = 60\nrequired_mcp_tools = [\"search.fetch\"]\ntask = \"Review the latest change.\"\n",
        "tasks[0].required_mcp_tools[0]",
        "smoke_tool_unavailable",
    );
}

#[test]
fn smoke_tool_name_must_be_server_dot_tool() {
    smoke_rule(
        "schema_version = 8\n[[tasks]]\nagent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"review\"\nwall_timeout_seconds = 60\nrequired_mcp_tools = [\"query\"]\ntask = \"Review the latest change.\"\n",
        "tasks[0].required_mcp_tools[0]",
        "smoke_tool_name",
    );
}

#[test]
fn smoke_wall_timeout_has_a_range() {
    smoke_rule(
        "schema_version = 8\n[[tasks]]\nagent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"review\"\nwall_timeout_seconds = 0\ntask = \"Review the latest change.\"\n",
        "tasks[0].wall_timeout_seconds",
        "smoke_wall_timeout",
    );
}

#[test]
fn smoke_schema_version_must_be_8() {
    smoke_rule(
        "schema_version = 7\ntasks = []\n",
        "schema_version",
        "schema_version_unsupported",
    );
}

#[test]
fn smoke_task_length_follows_role_bounds() {
    smoke_rule(
        "schema_version = 8\n[[tasks]]\nagent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"review\"\nwall_timeout_seconds = 60\ntask = \"short\"\n",
        "tasks[0].task",
        "smoke_task_chars",
    );
}

// --- catalog overlay -------------------------------------------------------------------------
#[test]
fn overlay_model_on_unknown_route_is_rejected() {
    let frag = "schema_version = 8\n[models.nowhere_chat__m]\nname = \"m\"\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\n";
    expect(
        check(|_| {}, |d| fs::write(d.join("catalog.toml"), frag).unwrap()),
        "catalog.toml",
        "models.nowhere_chat__m",
        "catalog_unknown_route",
    );
}

#[test]
fn overlay_model_key_must_be_route_qualified() {
    let frag = "schema_version = 8\n[models.plainmodel]\nname = \"m\"\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\n";
    expect(
        check(|_| {}, |d| fs::write(d.join("catalog.toml"), frag).unwrap()),
        "catalog.toml",
        "models.plainmodel",
        "catalog_model_key",
    );
}

#[test]
fn overlay_can_add_a_route_a_role_binds_to() {
    let frag = "schema_version = 8\n[resource_groups.local]\ncapacity = 2\n[routes.local_chat]\nnamespace = \"local\"\ndriver = \"openai_chat\"\ntransports = [\"responses\"]\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\nbackends = [\"mcp\"]\nresource_group = \"local\"\nbase_url = \"http://127.0.0.1:9/v1\"\n[models.local_chat__m]\nname = \"m\"\nagent_compatible = true\ntool_calling = true\nreasoning = [\"high\"]\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\n";
    let v = check(
        |t| set(t, "agents.writer.model", "local_chat__m"),
        |d| fs::write(d.join("catalog.toml"), frag).unwrap(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        v.profile.agents["writer"].resource_group.as_deref(),
        Some("local")
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let err = check(
        |t| {
            set(t, "schema_version", 7);
            set(t, "agents.writer.max_active", "1");
            set(t, "agents.locator.network_access", true);
        },
        |d| fs::write(d.join("notes.txt"), "x").unwrap(),
    );
    // Layout errors stop before TOML is read, so check the TOML ones on a clean layout.
    assert!(err.unwrap_err().has_rule("pack_unknown_member"));
    let err = check(
        |t| {
            set(t, "schema_version", 7);
            set(t, "agents.writer.max_active", "1");
            set(t, "agents.locator.network_access", true);
        },
        |_| {},
    )
    .unwrap_err();
    for rule in [
        "schema_version_unsupported",
        "toml_wrong_type",
        "low_trust_network_access",
    ] {
        assert!(err.has_rule(rule), "missing {rule} in\n{err}");
    }
}

#[test]
fn value_type_errors_never_panic_on_any_field() {
    // Every field of the base agent, given a value of the wrong type, is a diagnostic.
    let base = base_profile();
    let writer = base["agents"]["writer"].as_table().unwrap().clone();
    for key in writer.keys() {
        let wrong = match &writer[key] {
            Value::String(_) => Value::Integer(1),
            _ => Value::String("x".into()),
        };
        let k = key.clone();
        let err = check(
            move |t| set(t, &format!("agents.writer.{k}"), wrong),
            |_| {},
        )
        .unwrap_err();
        assert!(err.has_rule("toml_wrong_type"), "{key}: {err}");
    }
}

#[test]
fn toml_syntax_error_names_the_file_and_line() {
    let r = check(
        |_| {},
        |d| fs::write(d.join("profile.toml"), "schema_version = 8\nid = \"x\n").unwrap(),
    );
    let err = r.unwrap_err();
    let d = err
        .0
        .iter()
        .find(|d| d.rule == "toml_syntax")
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(d.file, "profile.toml");
    assert!(d.message.contains("line 2"), "{}", d.message);
}

#[test]
fn catalog_syntax_error_names_the_catalog_file() {
    expect(
        check(
            |_| {},
            |d| fs::write(d.join("catalog.toml"), "schema_version = \n").unwrap(),
        ),
        "catalog.toml",
        "",
        "toml_syntax",
    );
}

profile_rule!(
    catalog_reference_must_be_catalog_toml,
    "catalog",
    "pack_ref_location",
    |t| {
        set(t, "catalog", "agents/cat.toml");
    }
);

#[test]
fn every_single_byte_deletion_of_profile_toml_is_diagnosed_without_panicking() {
    // Exhaustive over positions rather than random: each truncated or spliced file must yield
    // either a valid pack or diagnostics that all name a file; a panic fails the test.
    let text = toml::to_string(&base_profile()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pack");
    write_pack(&dir, &base_profile());
    let registry = registry();
    let mut rejected = 0;
    for i in (0..text.len()).filter(|i| text.is_char_boundary(*i) && text.is_char_boundary(i + 1)) {
        let mut broken = text.clone();
        broken.remove(i);
        fs::write(dir.join("profile.toml"), &broken).unwrap();
        let pack = mmo_profile::pack::Pack::load(&dir).unwrap();
        if let Err(e) = mmo_profile::validate::validate(
            &pack,
            &registry,
            &mmo_profile::consent::Consent::default(),
            &[],
        ) {
            rejected += 1;
            assert!(
                e.0.iter().all(|d| !d.file.is_empty() && !d.rule.is_empty()),
                "{e}"
            );
        }
    }
    assert!(
        rejected > text.len() / 2,
        "most deletions break something ({rejected} of {})",
        text.len()
    );
}

// --- the remaining enums, ranges and graph rules ---------------------------------------------
profile_rule!(
    agent_kind_is_an_enum,
    "agents.writer.kind",
    "agent_kind",
    |t| {
        set(t, "agents.writer.kind", "leaf");
    }
);
profile_rule!(
    agent_permissions_is_an_enum,
    "agents.writer.permissions",
    "agent_permissions",
    |t| {
        set(t, "agents.writer.permissions", "full-access");
    }
);
profile_rule!(
    agent_trust_is_an_enum,
    "agents.writer.trust",
    "agent_trust",
    |t| {
        set(t, "agents.writer.trust", "paranoid");
    }
);
profile_rule!(
    agent_verification_is_an_enum,
    "agents.writer.verification",
    "agent_verification",
    |t| {
        set(t, "agents.writer.verification", "never");
    }
);
profile_rule!(
    agent_reasoning_is_an_enum,
    "agents.writer.reasoning",
    "agent_reasoning",
    |t| {
        set(t, "agents.writer.reasoning", "extreme");
    }
);
profile_rule!(
    agent_execution_mode_is_an_enum,
    "agents.writer.execution_mode",
    "agent_execution_mode",
    |t| {
        set(t, "agents.writer.execution_mode", "loop");
    }
);
profile_rule!(
    agent_web_search_is_an_enum,
    "agents.writer.web_search",
    "agent_web_search",
    |t| {
        set(t, "agents.writer.web_search", "google");
    }
);
profile_rule!(
    agent_approval_policy_is_an_enum,
    "agents.writer.approval_policy",
    "agent_approval_policy",
    |t| {
        set(t, "agents.writer.approval_policy", "always");
    }
);
profile_rule!(
    agent_approval_policy_untrusted_is_refused_as_codex_no_longer_runs_it,
    "agents.writer.approval_policy",
    "agent_approval_policy_unsupported",
    |t| {
        set(t, "agents.writer.approval_policy", "untrusted");
    }
);
profile_rule!(
    agent_contract_enforcement_is_an_enum,
    "agents.writer.contract_enforcement",
    "agent_contract_enforcement",
    |t| {
        set(t, "agents.writer.contract_enforcement", "hard");
    }
);
profile_rule!(
    agent_backend_is_an_enum,
    "agents.writer.backends[0]",
    "agent_backend",
    |t| {
        set(t, "agents.writer.backends", strs(&["grpc"]));
    }
);
profile_rule!(
    agent_modality_is_an_enum,
    "agents.writer.requires_modalities[1]",
    "agent_modality",
    |t| {
        set(
            t,
            "agents.writer.requires_modalities",
            strs(&["text", "smell"]),
        );
    }
);
profile_rule!(
    agent_max_active_has_a_range,
    "agents.writer.max_active",
    "agent_range",
    |t| {
        set(t, "agents.writer.max_active", 0);
    }
);
profile_rule!(
    coordination_max_active_agents_has_a_range,
    "coordination.max_active_agents",
    "coordination_range",
    |t| {
        set(t, "coordination.max_active_agents", 0);
    }
);
profile_rule!(
    result_visibility_is_an_enum,
    "coordination.result_visibility",
    "coordination_result_visibility",
    |t| {
        set(t, "coordination.result_visibility", "world");
    }
);
profile_rule!(
    write_conflict_policy_is_reject_only,
    "coordination.write_conflict_policy",
    "coordination_write_conflict_policy",
    |t| {
        set(t, "coordination.write_conflict_policy", "merge");
    }
);
profile_rule!(
    role_id_must_be_snake_case,
    "agents.Writer",
    "agent_id_format",
    |t| {
        let w = t["agents"]["writer"].clone();
        set(t, "agents.Writer", w);
        remove(t, "agents.writer");
        set(
            t,
            "agents.lead.can_spawn",
            strs(&["reviewer", "Writer", "locator"]),
        );
    }
);
profile_rule!(
    role_cannot_control_itself,
    "agents.lead.controls.lead",
    "control_self",
    |t| {
        set(t, "agents.lead.controls.lead.actions", strs(&["inspect"]));
    }
);
profile_rule!(
    control_needs_at_least_one_action,
    "agents.lead.controls.reviewer.actions",
    "control_actions_empty",
    |t| {
        set(t, "agents.lead.controls.reviewer.actions", strs(&[]));
    }
);
profile_rule!(
    role_cannot_spawn_itself_when_ancestors_are_rejected,
    "agents.writer.can_spawn[0]",
    "spawn_self",
    |t| {
        set(t, "agents.writer.can_spawn", strs(&["writer"]));
    }
);
profile_rule!(
    root_takes_no_backends,
    "agents.lead.backends",
    "root_backends",
    |t| {
        set(t, "agents.lead.backends", strs(&["mcp"]));
    }
);
profile_rule!(
    required_output_modality_must_be_produced,
    "agents.writer.requires_output_modalities",
    "model_output_modality",
    |t| {
        set(
            t,
            "agents.writer.requires_output_modalities",
            strs(&["text", "image"]),
        );
    }
);
profile_rule!(
    route_must_carry_required_output_modality,
    "agents.writer.requires_output_modalities",
    "route_output_modality",
    |t| {
        set(
            t,
            "agents.writer.requires_output_modalities",
            strs(&["text", "image"]),
        );
    }
);
profile_rule!(
    empty_tool_grant_is_rejected,
    "agents.reviewer.tool_mcp_servers.search.enabled_tools",
    "tool_mcp_empty_grant",
    |t| {
        set(
            t,
            "agents.reviewer.tool_mcp_servers.search.enabled_tools",
            strs(&[]),
        );
    }
);

#[test]
fn route_without_the_responses_transport_is_rejected() {
    let frag = "schema_version = 8\n[routes.opencode_go_openai_chat]\nnamespace = \"opencode_go\"\ndriver = \"openai_chat\"\ntransports = [\"chat_completions\"]\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\nbackends = [\"mcp\"]\nresource_group = \"opencode_go\"\nbase_url = \"http://127.0.0.1:9/v1\"\n";
    expect(
        check(|_| {}, |d| fs::write(d.join("catalog.toml"), frag).unwrap()),
        "profile.toml",
        "agents.writer.model",
        "route_transport_incomplete",
    );
}

#[test]
fn oversized_member_is_rejected() {
    layout("README.md", "pack_file_too_large", |d| {
        fs::write(d.join("README.md"), vec![b'x'; 1024 * 1024 + 1]).unwrap()
    });
}

#[test]
fn non_utf8_member_is_rejected() {
    layout("LICENSE", "pack_not_utf8", |d| {
        fs::write(d.join("LICENSE"), [0xff, 0xfe, 0x00]).unwrap()
    });
}

#[test]
fn handwritten_generated_files_are_rejected() {
    layout("agents/AGENTS.md", "pack_generated_file", |d| {
        fs::write(d.join("agents/AGENTS.md"), "x").unwrap()
    });
    layout("agents/SKILL.md", "pack_generated_file", |d| {
        fs::write(d.join("agents/SKILL.md"), "x").unwrap()
    });
}

#[test]
fn pack_must_be_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("profile.toml");
    fs::write(&file, "x").unwrap();
    let err = mmo_profile::pack::Pack::load(&file).unwrap_err();
    assert!(err.has_rule("pack_not_directory"), "{err}");
    let err = mmo_profile::pack::Pack::load(&tmp.path().join("absent")).unwrap_err();
    assert!(err.has_rule("pack_unreadable"), "{err}");
}

// --- smoke rules -----------------------------------------------------------------------------
const SMOKE_HEAD: &str = "schema_version = 8\n[[tasks]]\nwall_timeout_seconds = 60\n";

#[test]
fn smoke_agent_must_exist() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"ghost\"\nbackend = \"mcp\"\ntask = \"Review the latest change.\"\n"
        ),
        "tasks[0].agent",
        "smoke_unknown_agent",
    );
}

#[test]
fn smoke_backend_must_be_one_the_role_has() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"reviewer\"\nbackend = \"native\"\ntask_kind = \"review\"\ntask = \"Review the latest change.\"\n"
        ),
        "tasks[0].backend",
        "smoke_backend",
    );
}

#[test]
fn smoke_write_mode_needs_a_writable_role() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"reviewer\"\nbackend = \"mcp\"\nmode = \"workspace-write\"\ntask_kind = \"review\"\ntask = \"Review the latest change.\"\n"
        ),
        "tasks[0].mode",
        "smoke_mode",
    );
}

#[test]
fn smoke_task_kind_must_be_admitted_by_the_role() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"implementation\"\ntask = \"Review the latest change.\"\n"
        ),
        "tasks[0].task_kind",
        "smoke_task_kind",
    );
}

#[test]
fn smoke_low_trust_task_cannot_carry_prose() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"locator\"\nbackend = \"mcp\"\ntask = \"find main\"\nliteral_task = {{ operation = \"locate\", path = \"src/lib.rs\" }}\n"
        ),
        "tasks[0].task",
        "smoke_low_trust_prose",
    );
}

#[test]
fn smoke_literal_task_is_for_low_trust_roles_only() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"review\"\ntask = \"Review the latest change.\"\nliteral_task = {{ operation = \"locate\", path = \"a\" }}\n"
        ),
        "tasks[0].literal_task",
        "smoke_literal_task_low_trust_only",
    );
}

#[test]
fn smoke_literal_operation_is_a_literal_kind() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"locator\"\nbackend = \"mcp\"\nliteral_task = {{ operation = \"debug\", path = \"a\" }}\n"
        ),
        "tasks[0].literal_task.operation",
        "smoke_literal_operation",
    );
}

#[test]
fn smoke_literal_path_stays_in_the_tree() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"locator\"\nbackend = \"mcp\"\nliteral_task = {{ operation = \"locate\", path = \"../etc/passwd\" }}\n"
        ),
        "tasks[0].literal_task.path",
        "smoke_literal_path",
    );
}

#[test]
fn smoke_literal_range_is_ordered() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"locator\"\nbackend = \"mcp\"\nliteral_task = {{ operation = \"locate\", path = \"a\", start_line = 9, end_line = 2 }}\n"
        ),
        "tasks[0].literal_task.end_line",
        "smoke_literal_range",
    );
}

#[test]
fn smoke_write_scope_stays_in_the_tree() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"review\"\ntask = \"Review the latest change.\"\nwrite_scope = [\"/abs\"]\n"
        ),
        "tasks[0].write_scope[0]",
        "smoke_write_scope",
    );
}

#[test]
fn smoke_attachments_need_a_role_that_allows_them() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"review\"\ntask = \"Review the latest change.\"\nattachments = [\"a.png\"]\n"
        ),
        "tasks[0].attachments",
        "smoke_attachments",
    );
}

#[test]
fn smoke_wait_seconds_has_a_range() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"review\"\ntask = \"Review the latest change.\"\nwait_seconds = -1\n"
        ),
        "tasks[0].wait_seconds",
        "smoke_wait_seconds",
    );
}

// --- operator registry -----------------------------------------------------------------------
fn registry_rule(name: &str, text: &str, path: &str, rule: &str) {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join(name), text).unwrap();
    let err = mmo_profile::toolmcp::Registry::load(tmp.path()).unwrap_err();
    let file = tmp.path().join(name).display().to_string();
    assert!(
        err.0
            .iter()
            .any(|d| d.rule == rule && d.path == path && d.file == file),
        "expected {path}: [{rule}], got\n{err}"
    );
}

#[test]
fn registry_server_needs_command_or_url() {
    registry_rule(
        "a.toml",
        "id = \"a\"\nallowed_tools = [\"x\"]\n",
        "command",
        "tool_mcp_transport",
    );
    registry_rule(
        "a.toml",
        "id = \"a\"\ncommand = \"c\"\nurl = \"http://h\"\nallowed_tools = [\"x\"]\n",
        "url",
        "tool_mcp_transport",
    );
}

#[test]
fn registry_allowlist_must_name_a_tool() {
    registry_rule(
        "a.toml",
        "id = \"a\"\ncommand = \"c\"\nallowed_tools = []\n",
        "allowed_tools",
        "tool_mcp_allowlist",
    );
}

#[test]
fn registry_file_is_named_after_its_server() {
    registry_rule(
        "b.toml",
        "id = \"a\"\ncommand = \"c\"\nallowed_tools = [\"x\"]\n",
        "id",
        "tool_mcp_file_name",
    );
    registry_rule(
        "A.toml",
        "id = \"A\"\ncommand = \"c\"\nallowed_tools = [\"x\"]\n",
        "id",
        "tool_mcp_id_format",
    );
}

#[test]
fn registry_names_env_vars_never_values() {
    registry_rule(
        "a.toml",
        "id = \"a\"\ncommand = \"c\"\nallowed_tools = [\"x\"]\nenv_vars = [\"sk-123\"]\n",
        "env_vars[0]",
        "tool_mcp_env_name",
    );
}

#[test]
fn registry_timeouts_have_ranges() {
    registry_rule(
        "a.toml",
        "id = \"a\"\ncommand = \"c\"\nallowed_tools = [\"x\"]\nstartup_timeout_seconds = 0\n",
        "startup_timeout_seconds",
        "tool_mcp_range",
    );
}

#[test]
fn syntax_error_on_a_huge_line_stays_short() {
    let huge = format!("x = {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let err = check(
        |_| {},
        move |d| fs::write(d.join("profile.toml"), huge).unwrap(),
    )
    .unwrap_err();
    let d = err
        .0
        .iter()
        .find(|d| d.rule == "toml_syntax")
        .unwrap_or_else(|| panic!("{err}"));
    assert!(d.message.len() < 300, "{} bytes", d.message.len());
    assert!(d.message.starts_with("line 1, column"), "{}", d.message);
}

// --- smoke: required_mcp_tools --------------------------------------------------------------
fn smoke_with_tools(agent: &str, backend: &str, kind: &str, tools: &[&str]) -> String {
    let list: Vec<String> = tools.iter().map(|t| format!("\"{t}\"")).collect();
    let kind = if kind.is_empty() {
        String::new()
    } else {
        format!("task_kind = \"{kind}\"\n")
    };
    format!(
        "{SMOKE_HEAD}agent = \"{agent}\"\nbackend = \"{backend}\"\n{kind}required_mcp_tools = [{}]\ntask = \"Review the latest change.\"\n",
        list.join(", ")
    )
}

fn check_smoke_text(
    mutate_profile: impl FnOnce(&mut toml::Table),
    smoke: String,
) -> Result<mmo_profile::validate::Validated, mmo_profile::Rejected> {
    check(mutate_profile, move |d| {
        fs::write(d.join("smoke.toml"), smoke).unwrap()
    })
}

#[test]
fn smoke_tool_needs_a_grant_for_its_server() {
    smoke_rule(
        &smoke_with_tools("writer", "mcp", "implementation", &["search.query"]),
        "tasks[0].required_mcp_tools[0]",
        "smoke_tool_unavailable",
    );
}

#[test]
fn smoke_tool_of_a_grant_without_enabled_tools_follows_the_operator_allowlist() {
    let open_grant = |t: &mut toml::Table| {
        remove(t, "agents.reviewer.tool_mcp_servers.search.enabled_tools");
    };
    check_smoke_text(
        open_grant,
        smoke_with_tools("reviewer", "mcp", "review", &["search.fetch"]),
    )
    .unwrap_or_else(|e| panic!("`fetch` is in the operator allowlist: {e}"));
    expect(
        check_smoke_text(
            open_grant,
            smoke_with_tools("reviewer", "mcp", "review", &["search.delete"]),
        ),
        "smoke.toml",
        "tasks[0].required_mcp_tools[0]",
        "smoke_tool_unavailable",
    );
}

#[test]
fn every_mesh_tool_is_available_to_a_root_that_spawns_and_controls() {
    let tools: Vec<String> = mmo_profile::validate::MESH_TOOLS
        .iter()
        .map(|t| format!("mmo_mesh.{t}"))
        .collect();
    let names: Vec<&str> = tools.iter().map(String::as_str).collect();
    check_smoke_text(|_| {}, smoke_with_tools("lead", "root", "", &names))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn mesh_tools_are_unavailable_to_a_leaf_role() {
    smoke_rule(
        &smoke_with_tools("reviewer", "mcp", "review", &["mmo_mesh.agent_inspect"]),
        "tasks[0].required_mcp_tools[0]",
        "smoke_tool_unavailable",
    );
}

#[test]
fn spawning_mesh_tools_need_spawn_targets_and_control_needs_control_targets() {
    let controls_only = |t: &mut toml::Table| {
        set(
            t,
            "agents.reviewer.controls.writer.actions",
            strs(&["inspect"]),
        );
    };
    check_smoke_text(
        controls_only,
        smoke_with_tools(
            "reviewer",
            "mcp",
            "review",
            &["mmo_mesh.agent_inspect", "mmo_mesh.agent_control"],
        ),
    )
    .unwrap_or_else(|e| panic!("a controller inspects and controls: {e}"));
    expect(
        check_smoke_text(
            controls_only,
            smoke_with_tools("reviewer", "mcp", "review", &["mmo_mesh.agents_spawn"]),
        ),
        "smoke.toml",
        "tasks[0].required_mcp_tools[0]",
        "smoke_tool_unavailable",
    );
    let spawns_only = |t: &mut toml::Table| {
        remove(t, "agents.lead.controls");
    };
    expect(
        check_smoke_text(
            spawns_only,
            smoke_with_tools("lead", "root", "", &["mmo_mesh.agent_control"]),
        ),
        "smoke.toml",
        "tasks[0].required_mcp_tools[0]",
        "smoke_tool_unavailable",
    );
}

#[test]
fn unknown_mesh_tool_is_unavailable() {
    smoke_rule(
        &smoke_with_tools("lead", "root", "", &["mmo_mesh.agents_delete"]),
        "tasks[0].required_mcp_tools[0]",
        "smoke_tool_unavailable",
    );
}

#[test]
fn smoke_wall_timeout_is_required() {
    smoke_rule(
        "schema_version = 8\n[[tasks]]\nagent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"review\"\ntask = \"Review the latest change.\"\n",
        "tasks[0].wall_timeout_seconds",
        "toml_missing_key",
    );
}

#[test]
fn smoke_wall_timeout_upper_bound_is_a_day() {
    smoke_rule(
        "schema_version = 8\n[[tasks]]\nagent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"review\"\nwall_timeout_seconds = 86401\ntask = \"Review the latest change.\"\n",
        "tasks[0].wall_timeout_seconds",
        "smoke_wall_timeout",
    );
}

// --- catalog overlay: one broken entry per rule ---------------------------------------------
const ROUTE_OK: &str = "namespace = \"local\"\ndriver = \"openai_chat\"\ntransports = [\"responses\"]\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\nbackends = [\"mcp\"]\nresource_group = \"local\"\nbase_url = \"http://127.0.0.1:9/v1\"\n";
const MODEL_OK: &str = "name = \"m\"\nagent_compatible = true\ntool_calling = true\nreasoning = [\"high\"]\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\n";

/// A catalog overlay with one local group, one route (`route`, TOML body) and one model.
fn overlay(group: &str, route: &str, model: &str) -> String {
    format!(
        "schema_version = 8\n[resource_groups.local]\n{group}\n[routes.local_chat]\n{route}\n[models.local_chat__m]\n{model}"
    )
}

fn catalog_rule(frag: String, path: &str, rule: &str) {
    expect(
        check(
            |_| {},
            move |d| fs::write(d.join("catalog.toml"), frag).unwrap(),
        ),
        "catalog.toml",
        path,
        rule,
    );
}

/// `ROUTE_OK` with `key` replaced by (or extended with) `line`.
fn route_with(key: &str, line: &str) -> String {
    let mut lines: Vec<&str> = ROUTE_OK
        .lines()
        .filter(|l| !l.starts_with(&format!("{key} =")))
        .collect();
    lines.push(line);
    lines.join("\n")
}

#[test]
fn catalog_overlay_base_is_valid() {
    let frag = overlay("capacity = 2", ROUTE_OK, MODEL_OK);
    check(
        |_| {},
        move |d| fs::write(d.join("catalog.toml"), frag).unwrap(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn catalog_resource_group_id_is_snake_case() {
    catalog_rule(
        "schema_version = 8\n[resource_groups.Local]\ncapacity = 1\n".into(),
        "resource_groups.Local",
        "catalog_id_format",
    );
}

#[test]
fn catalog_resource_group_capacity_has_a_range() {
    catalog_rule(
        overlay("capacity = 0", ROUTE_OK, MODEL_OK),
        "resource_groups.local.capacity",
        "catalog_range",
    );
}

#[test]
fn catalog_route_driver_is_an_enum() {
    catalog_rule(
        overlay(
            "capacity = 1",
            &route_with("driver", "driver = \"grpc\""),
            MODEL_OK,
        ),
        "routes.local_chat.driver",
        "catalog_driver",
    );
}

#[test]
fn catalog_route_transport_is_an_enum() {
    catalog_rule(
        overlay(
            "capacity = 1",
            &route_with(
                "transports",
                "transports = [\"responses\", \"carrier_pigeon\"]",
            ),
            MODEL_OK,
        ),
        "routes.local_chat.transports[1]",
        "catalog_transport",
    );
}

#[test]
fn catalog_route_modality_is_an_enum() {
    catalog_rule(
        overlay(
            "capacity = 1",
            &route_with("input_modalities", "input_modalities = [\"smell\"]"),
            MODEL_OK,
        ),
        "routes.local_chat.input_modalities[0]",
        "catalog_modality",
    );
}

#[test]
fn catalog_model_modality_is_an_enum() {
    catalog_rule(
        overlay(
            "capacity = 1",
            ROUTE_OK,
            &MODEL_OK.replace(
                "output_modalities = [\"text\"]",
                "output_modalities = [\"hologram\"]",
            ),
        ),
        "models.local_chat__m.output_modalities[0]",
        "catalog_modality",
    );
}

#[test]
fn catalog_route_backend_is_mcp_or_native() {
    catalog_rule(
        overlay(
            "capacity = 1",
            &route_with("backends", "backends = [\"ssh\"]"),
            MODEL_OK,
        ),
        "routes.local_chat.backends[0]",
        "catalog_backend",
    );
}

#[test]
fn catalog_gateway_route_needs_a_base_url() {
    let route: String = ROUTE_OK
        .lines()
        .filter(|l| !l.starts_with("base_url"))
        .collect::<Vec<_>>()
        .join("\n");
    catalog_rule(
        overlay("capacity = 1", &route, MODEL_OK),
        "routes.local_chat.base_url",
        "catalog_route_endpoint",
    );
}

#[test]
fn catalog_builtin_route_needs_a_codex_provider() {
    catalog_rule(
        overlay(
            "capacity = 1",
            &route_with("driver", "driver = \"codex_builtin\""),
            MODEL_OK,
        ),
        "routes.local_chat.provider",
        "catalog_route_endpoint",
    );
}

#[test]
fn a_pack_route_cannot_send_an_operator_credential_anywhere_new() {
    // The pack routes the operator's OPENAI_API_KEY to a collector: refused, naming the route.
    let frag = overlay(
        "capacity = 1",
        &route_with(
            "base_url",
            "base_url = \"https://collector.example/v1\"\ncredential_env = \"OPENAI_API_KEY\"",
        ),
        MODEL_OK,
    );
    expect(
        check(
            |_| {},
            |d| fs::write(d.join("catalog.toml"), &frag).unwrap(),
        ),
        "catalog.toml",
        "routes.local_chat.base_url",
        "catalog_credential_destination",
    );
    // A built-in route's own variable to that route's own origin needs no consent.
    let frag = overlay(
        "capacity = 1",
        &route_with(
            "base_url",
            "base_url = \"http://127.0.0.1:4318/other/v1\"\ncredential_env = \"OPENCODE_GO_API_KEY\"",
        ),
        MODEL_OK,
    );
    check(
        |_| {},
        |d| fs::write(d.join("catalog.toml"), &frag).unwrap(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn catalog_credential_env_names_a_variable_never_a_value() {
    catalog_rule(
        overlay(
            "capacity = 1",
            &route_with("credential_env", "credential_env = \"sk-live-123\""),
            MODEL_OK,
        ),
        "routes.local_chat.credential_env",
        "catalog_credential_env",
    );
}

#[test]
fn catalog_model_reasoning_is_an_enum() {
    catalog_rule(
        overlay(
            "capacity = 1",
            ROUTE_OK,
            &MODEL_OK.replace("reasoning = [\"high\"]", "reasoning = [\"ludicrous\"]"),
        ),
        "models.local_chat__m.reasoning[0]",
        "catalog_reasoning",
    );
}

#[test]
fn catalog_route_resource_group_must_exist() {
    catalog_rule(
        overlay(
            "capacity = 1",
            &route_with("resource_group", "resource_group = \"nowhere\""),
            MODEL_OK,
        ),
        "routes.local_chat.resource_group",
        "catalog_unknown_resource_group",
    );
}

#[test]
fn catalog_model_resource_group_must_exist() {
    catalog_rule(
        overlay(
            "capacity = 1",
            ROUTE_OK,
            &format!("{MODEL_OK}resource_group = \"nowhere\"\n"),
        ),
        "models.local_chat__m.resource_group",
        "catalog_unknown_resource_group",
    );
}

#[test]
fn registry_file_that_is_not_utf8_is_unreadable() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a.toml");
    fs::write(&file, [0xff, 0xfe, b'\n']).unwrap();
    let err = mmo_profile::toolmcp::Registry::load(tmp.path()).unwrap_err();
    assert!(
        err.0
            .iter()
            .any(|d| d.rule == "tool_mcp_unreadable" && d.file == file.display().to_string()),
        "{err}"
    );
}

#[test]
fn registry_path_that_is_a_file_is_unreadable() {
    let tmp = tempfile::tempdir().unwrap();
    let not_a_dir = tmp.path().join("tool-mcp.d");
    fs::write(&not_a_dir, "").unwrap();
    let err = mmo_profile::toolmcp::Registry::load(&not_a_dir).unwrap_err();
    assert!(err.has_rule("tool_mcp_unreadable"), "{err}");
}

// --- issue 13: defects found from outside --------------------------------------------------
/// Make the base pack hybrid with a native read-only participant `role`.
fn native_role(t: &mut toml::Table, role: &str) {
    set(t, "coordination.orchestration", "hybrid");
    // Under hybrid the writer would default to both backends; its route serves MCP only.
    set(t, "agents.writer.backends", strs(&["mcp"]));
    set(
        t,
        &format!("agents.{role}.model"),
        "codex_chatgpt_builtin__gpt_5_6_terra_mini",
    );
    set(t, &format!("agents.{role}.description"), "Native scout");
    set(t, &format!("agents.{role}.backends"), strs(&["native"]));
}

#[test]
fn native_name_must_be_a_safe_file_stem() {
    for bad in [
        "../../x",
        "x/y",
        "..",
        ".hidden",
        "-x",
        "Upper",
        "with space",
        "x.toml",
        "",
        &"a".repeat(65),
    ] {
        let bad = bad.to_string();
        expect(
            check(
                |t| {
                    native_role(t, "scout");
                    set(t, "agents.scout.native_name", bad.as_str());
                },
                |_| {},
            ),
            "profile.toml",
            "agents.scout.native_name",
            "native_name_format",
        );
    }
    for good in ["scout", "audit-scout", "s_1", "9lives", &"a".repeat(64)] {
        let good = good.to_string();
        check(
            |t| {
                native_role(t, "scout");
                set(t, "agents.scout.native_name", good.as_str());
            },
            |_| {},
        )
        .unwrap_or_else(|e| panic!("`{good}` is a safe native_name: {e}"));
    }
}

#[test]
fn generated_native_name_must_also_be_a_safe_file_stem() {
    // `mmo-<profile>-<role>` from a 60-character profile id is longer than 64.
    let id = format!("p{}", "x".repeat(59));
    expect(
        check(
            |t| {
                set(t, "id", id.as_str());
                native_role(t, "scout");
            },
            |_| {},
        ),
        "profile.toml",
        "agents.scout.native_name",
        "native_name_format",
    );
}

#[test]
fn native_name_cannot_shadow_a_codex_builtin_agent() {
    expect(
        check(
            |t| {
                native_role(t, "scout");
                set(t, "agents.scout.native_name", "default");
            },
            |_| {},
        ),
        "profile.toml",
        "agents.scout.native_name",
        "native_name_reserved",
    );
}

#[test]
fn native_names_are_unique_across_roles_and_both_roles_are_named() {
    let err = check(
        |t| {
            native_role(t, "scout");
            native_role(t, "scout2");
            set(t, "agents.scout.native_name", "twin");
            set(t, "agents.scout2.native_name", "twin");
        },
        |_| {},
    )
    .expect_err("two roles with one native_name must not validate");
    for (role, other) in [("scout", "scout2"), ("scout2", "scout")] {
        let d = err
            .0
            .iter()
            .find(|d| {
                d.rule == "native_name_duplicate" && d.path == format!("agents.{role}.native_name")
            })
            .unwrap_or_else(|| panic!("no native_name_duplicate at {role}: {err}"));
        assert!(d.message.contains(&format!("`{other}`")), "{}", d.message);
    }
    // A declared name may not take another role's generated default either.
    expect(
        check(
            |t| {
                native_role(t, "scout");
                native_role(t, "scout2");
                set(t, "agents.scout.native_name", "mmo-rules-base-scout2");
            },
            |_| {},
        ),
        "profile.toml",
        "agents.scout2.native_name",
        "native_name_duplicate",
    );
}

profile_rule!(
    native_name_on_a_role_without_a_native_backend_is_rejected,
    "agents.reviewer.native_name",
    "native_name_not_native",
    |t| {
        set(t, "agents.reviewer.native_name", "reviewer");
    }
);

#[test]
fn pack_member_names_must_be_portable_file_names() {
    for bad in ["a b.md", "a\nb.md", "-x.md", "ä.md"] {
        let bad = bad.to_string();
        let rel = format!("agents/{bad}");
        expect(
            check(
                |_| {},
                move |d| fs::write(d.join("agents").join(&bad), "text\n").unwrap(),
            ),
            &rel,
            "",
            "pack_member_name",
        );
    }
}

profile_rule!(
    unknown_coordination_field_is_rejected,
    "coordination.max_agents",
    "toml_unknown_field",
    |t| {
        set(t, "coordination.max_agents", 3);
    }
);

#[test]
fn every_profile_table_rejects_unknown_keys_with_file_line_and_key_path() {
    for table in [
        "",
        "coordination",
        "agents.writer",
        "agents.lead.controls.reviewer",
        "agents.reviewer.tool_mcp_servers.search",
    ] {
        let key = if table.is_empty() {
            "bogus".to_string()
        } else {
            format!("{table}.bogus")
        };
        let k = key.clone();
        let err = check(move |t| set(t, &k, 1), |_| {})
            .err()
            .unwrap_or_else(|| panic!("`{key}` was accepted"));
        let d = err
            .0
            .iter()
            .find(|d| d.rule == "toml_unknown_field" && d.path == key)
            .unwrap_or_else(|| panic!("no toml_unknown_field at `{key}`: {err}"));
        assert_eq!(d.file, "profile.toml");
        assert!(d.line.is_some(), "`{key}` has no line: {d:?}");
    }
}

const WRITER_TASK: &str = "agent = \"writer\"\nbackend = \"mcp\"\nmode = \"workspace-write\"\ntask_kind = \"implementation\"\ntask = \"Add a --version flag to the CLI.\"\n";

#[test]
fn writer_smoke_task_needs_a_write_scope_when_the_role_requires_one() {
    smoke_rule(
        &format!("{SMOKE_HEAD}{WRITER_TASK}"),
        "tasks[0].write_scope",
        "smoke_write_scope_required",
    );
    check_smoke_text(
        |_| {},
        format!("{SMOKE_HEAD}{WRITER_TASK}write_scope = [\"src/cli.rs\"]\n"),
    )
    .unwrap_or_else(|e| panic!("a declared scope satisfies write_scope_required: {e}"));
    check_smoke_text(
        |t| set(t, "agents.writer.write_scope_required", false),
        format!("{SMOKE_HEAD}{WRITER_TASK}"),
    )
    .unwrap_or_else(|e| panic!("write_scope_required = false needs no scope: {e}"));
}

#[test]
fn write_scope_on_a_read_only_smoke_task_is_rejected() {
    smoke_rule(
        &format!(
            "{SMOKE_HEAD}agent = \"reviewer\"\nbackend = \"mcp\"\ntask_kind = \"review\"\nwrite_scope = [\"src/\"]\ntask = \"Review the latest change.\"\n"
        ),
        "tasks[0].write_scope",
        "smoke_write_scope_read_only",
    );
}

#[test]
fn requires_write_scope_is_for_mcp_writer_participants_only() {
    let v = check(|_| {}, |_| {}).unwrap();
    let a = &v.profile.agents;
    assert!(a["writer"].requires_write_scope(), "an MCP writer");
    assert!(
        !a["lead"].requires_write_scope(),
        "the root is no MCP writer"
    );
    assert!(!a["reviewer"].requires_write_scope(), "read-only");
    let v = check(
        |t| set(t, "agents.writer.write_scope_required", false),
        |_| {},
    )
    .unwrap();
    assert!(!v.profile.agents["writer"].requires_write_scope());
}

profile_rule!(
    low_trust_role_cannot_hold_a_tool_mcp_grant,
    "agents.locator.tool_mcp_servers.search",
    "low_trust_tool_mcp",
    |t| {
        set(
            t,
            "agents.locator.tool_mcp_servers.search.enabled_tools",
            strs(&["query"]),
        );
    }
);

#[test]
fn required_name_missing_from_closed_properties_is_unsatisfiable() {
    contract_rule(
        r#"{"type":"object","additionalProperties":false,"required":["verdict","ghost"],"properties":{"verdict":{"enum":["approve"]}}}"#,
        "/required/1",
        "contract_required_unsatisfiable",
    );
}

#[test]
fn all_of_required_name_missing_from_merged_properties_is_an_error() {
    contract_rule(
        r#"{"type":"object","additionalProperties":false,"required":["verdict"],"properties":{"verdict":{"enum":["approve"]}},"allOf":[{"required":["ghost"]}]}"#,
        "/allOf/0/required/0",
        "contract_required_unsatisfiable",
    );
    // Open object: satisfiable, but the strict projection cannot advertise `ghost`.
    contract_rule(
        r#"{"type":"object","required":["verdict"],"properties":{"verdict":{"enum":["approve"]}},"allOf":[{"required":["ghost"]}]}"#,
        "/allOf/0/required/0",
        "contract_projection_required",
    );
}

#[test]
fn projected_required_name_without_a_property_schema_is_an_error() {
    contract_rule(
        r#"{"type":"object","required":["verdict","extra"],"properties":{"verdict":{"enum":["approve"]}}}"#,
        "/required/1",
        "contract_projection_required",
    );
}

#[test]
fn projection_that_admits_only_the_empty_object_is_an_error() {
    contract_rule(
        r#"{"type":"object","additionalProperties":false,"properties":{"verdict":{"enum":["approve"]}}}"#,
        "",
        "contract_projection_empty",
    );
}

#[test]
fn all_of_required_names_with_schemas_are_projected() {
    let v = check(
        |_| {},
        |d| {
            fs::write(
                d.join("contracts/review.json"),
                r#"{"type":"object","additionalProperties":false,"properties":{"verdict":{"enum":["approve"]}},"allOf":[{"required":["verdict"]}]}"#,
            )
            .unwrap()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let projected = mmo_contract::project_output_schema(&v.contracts["contracts/review.json"]);
    assert_eq!(projected["required"], serde_json::json!(["verdict"]));
}

#[test]
fn projection_rules_apply_only_to_projected_contracts() {
    // A warn-mode contract is never projected, so an open required name is fine there.
    check(
        |t| {
            set(t, "agents.reviewer.contract_enforcement", "warn");
            set(t, "agents.locator.output_contract", "contracts/locate.json");
        },
        |d| {
            fs::copy(
                d.join("contracts/review.json"),
                d.join("contracts/locate.json"),
            )
            .unwrap();
            fs::write(
                d.join("contracts/review.json"),
                r#"{"type":"object","required":["verdict","extra"],"properties":{"verdict":{"enum":["approve"]}}}"#,
            )
            .unwrap()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
}
