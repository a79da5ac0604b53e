//! Compiler output: generated files (insta), the determinism golden, binds and ceilings.

mod common;
use common::*;
use mmo_profile::compile::{Snapshot, compile};
use mmo_profile::consent::Consent;
use mmo_profile::pack::Pack;
use mmo_profile::validate::validate;
use std::path::{Path, PathBuf};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../profiles")
        .join(name)
}

fn example_registry() -> mmo_profile::toolmcp::Registry {
    mmo_profile::toolmcp::Registry::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../codex-mmo/operator/tool-mcp.d"),
    )
    .unwrap()
}

fn build(dir: &Path, binds: &[(String, String)]) -> Snapshot {
    let pack = Pack::load(dir).unwrap_or_else(|e| panic!("{e}"));
    let v = validate(&pack, &example_registry(), &Consent::default(), binds)
        .unwrap_or_else(|e| panic!("{e}"));
    compile(&pack, &v).unwrap_or_else(|e| panic!("{e}")).0
}

/// `dir` validated with the test registry and no credential consent.
fn validated(dir: &Path) -> mmo_profile::validate::Validated {
    validate(
        &Pack::load(dir).unwrap(),
        &registry(),
        &Consent::default(),
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn text(s: &Snapshot, path: &str) -> String {
    String::from_utf8(
        s.files
            .get(path)
            .unwrap_or_else(|| panic!("{path} missing; have {:?}", s.files.keys()))
            .clone(),
    )
    .unwrap()
}

/// The address of the shipped review-pair example. It changes only when the example, the
/// built-in catalog or the generators change; update it deliberately, never to make CI pass.
const REVIEW_PAIR_ADDRESS: &str =
    "e5069d6241400c12965bafd6c74007fadcfbb79eaf5e53b28cf820509c4d8b84";

#[test]
fn review_pair_snapshot_address_is_golden() {
    assert_eq!(
        build(&example("review-pair"), &[]).address,
        REVIEW_PAIR_ADDRESS
    );
}

#[test]
fn same_content_in_different_directories_gives_the_same_address() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    copy_dir(&example("build-squad"), &a.path().join("x"));
    copy_dir(&example("build-squad"), &b.path().join("some/other/place"));
    let sa = build(&a.path().join("x"), &[]);
    let sb = build(&b.path().join("some/other/place"), &[]);
    assert_eq!(sa.address, sb.address);
    assert_eq!(sa.files, sb.files, "byte-identical run to run");
}

#[test]
fn address_is_the_sha256_of_the_manifest() {
    use sha2::Digest;
    let s = build(&example("review-pair"), &[]);
    let manifest = &s.files["MANIFEST"];
    assert_eq!(
        mmo_profile::pack::hex(&sha2::Sha256::digest(manifest)),
        s.address
    );
    // Every other file is listed with its own digest.
    assert_eq!(
        String::from_utf8_lossy(manifest).lines().count(),
        s.files.len() - 1
    );
}

#[test]
fn review_pair_generated_files() {
    let s = build(&example("review-pair"), &[]);
    insta::assert_snapshot!(
        "review_pair_lead_agents_md",
        text(&s, "roles/lead/AGENTS.md")
    );
    insta::assert_snapshot!(
        "review_pair_reviewer_agents_md",
        text(&s, "roles/reviewer/AGENTS.md")
    );
    insta::assert_snapshot!(
        "review_pair_skill_md",
        text(&s, "mmo-profile-orchestration/SKILL.md")
    );
    insta::assert_snapshot!(
        "review_pair_lead_config",
        text(&s, "roles/lead/codex-home/config.toml")
    );
    insta::assert_snapshot!(
        "review_pair_reviewer_config",
        text(&s, "roles/reviewer/codex-home/config.toml")
    );
    insta::assert_snapshot!(
        "review_pair_reviewer_output_schema",
        text(&s, "roles/reviewer/output-schema.json")
    );
    insta::assert_snapshot!("review_pair_ceilings", text(&s, "ceilings.json"));
    insta::assert_snapshot!("review_pair_manifest", text(&s, "MANIFEST"));
}

#[test]
fn build_squad_tool_mcp_grant_narrows_in_generated_config() {
    let s = build(&example("build-squad"), &[]);
    insta::assert_snapshot!(
        "build_squad_researcher_config",
        text(&s, "roles/researcher/codex-home/config.toml")
    );
    let lead = text(&s, "roles/lead/codex-home/config.toml");
    assert!(
        !lead.contains("mcp_servers"),
        "only granted roles get Tool MCP servers"
    );
}

#[test]
fn skill_is_materialized_only_in_capable_homes_and_disabled_in_leaves() {
    let s = build(&example("build-squad"), &[]);
    assert!(
        s.files
            .contains_key("roles/lead/codex-home/skills/mmo-profile-orchestration/SKILL.md")
    );
    assert!(
        !s.files
            .contains_key("roles/implementer/codex-home/skills/mmo-profile-orchestration/SKILL.md")
    );
    assert!(text(&s, "roles/implementer/codex-home/config.toml").contains("enabled = false"));
    assert!(text(&s, "roles/lead/codex-home/config.toml").contains("enabled = true"));
}

#[test]
fn no_skill_when_no_role_can_spawn_or_control() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let mut t = base_profile();
    set(&mut t, "agents.lead.can_spawn", strs(&[]));
    remove(&mut t, "agents.lead.controls");
    set(&mut t, "coordination.max_active_agents", 1);
    set(&mut t, "coordination.max_active_writers", 0);
    set(&mut t, "coordination.max_depth", 0);
    write_pack(&dir, &t);
    let pack = Pack::load(&dir).unwrap();
    let v =
        validate(&pack, &registry(), &Consent::default(), &[]).unwrap_or_else(|e| panic!("{e}"));
    let (s, _) = compile(&pack, &v).unwrap();
    assert!(!s.files.keys().any(|k| k.contains("SKILL.md")));
    assert!(!text(&s, "roles/lead/codex-home/config.toml").contains("skills"));
}

#[test]
fn bind_changes_identity_and_reruns_checks() {
    let base = build(&example("review-pair"), &[]);
    let bound = build(
        &example("review-pair"),
        &[(
            "reviewer".into(),
            "opencode_go_openai_chat__deepseek_v4_pro".into(),
        )],
    );
    assert_ne!(base.address, bound.address);
    assert!(text(&bound, "roles/reviewer/codex-home/config.toml").contains("deepseek-v4-pro"));
    let pack = Pack::load(&example("review-pair")).unwrap();
    let err = validate(
        &pack,
        &example_registry(),
        &Consent::default(),
        &[(
            "reviewer".into(),
            "opencode_zen_listing__gemini_4_pro".into(),
        )],
    )
    .unwrap_err();
    assert!(err.has_rule("route_not_executable"), "{err}");
    assert!(err.to_string().contains("(bound by --bind)"));
    let err = validate(
        &pack,
        &example_registry(),
        &Consent::default(),
        &[("ghost".into(), "x__y".into())],
    )
    .unwrap_err();
    assert!(err.has_rule("bind_unknown_role"));
    let twice = [
        (
            "reviewer".into(),
            "opencode_go_openai_chat__deepseek_v4_pro".into(),
        ),
        (
            "reviewer".into(),
            "opencode_zen_anthropic_messages__claude_sonnet_5".into(),
        ),
    ];
    assert!(
        validate(&pack, &example_registry(), &Consent::default(), &twice)
            .unwrap_err()
            .has_rule("bind_duplicate_role")
    );
}

#[test]
fn defaulted_ceilings_are_clamped_not_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let mut t = base_profile();
    remove(&mut t, "coordination");
    write_pack(&dir, &t);
    let v = validated(&dir);
    let c = &v.ceilings.max_active_agents;
    assert_eq!(
        (c.declared, c.explicit, c.derived, c.effective),
        (5, false, Some(4), 4)
    );
    assert_eq!(v.ceilings.max_active_writers.effective, 1);
    assert_eq!(v.ceilings.native_max_concurrent_threads, 3);
}

#[test]
fn heavier_slots_fit_fewer_at_once() {
    // Two writer slots at 3 units each in a capacity-4 group: only one fits at a time.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let mut t = base_profile();
    set(&mut t, "agents.writer.max_active", 2);
    set(&mut t, "agents.writer.resource_units", 3);
    write_pack(&dir, &t);
    let v = validated(&dir);
    let g = &v.ceilings.resource_groups["opencode_go"];
    assert_eq!(
        (g.capacity, g.slot_units.clone(), g.fitting_slots),
        (4, vec![3, 3], 1)
    );
}

#[test]
fn rejection_message_lists_every_problem_with_file_path_and_rule() {
    let err = check(
        |t| {
            set(t, "version", "7.9.0");
            set(t, "agents.writer.model", "gpt-5");
            set(t, "agents.locator.web_search", "live");
            set(t, "coordination.wait_policy", "all");
        },
        |_| {},
    )
    .unwrap_err();
    insta::assert_snapshot!("rejection_message", err.to_string());
}

#[test]
fn oversized_instructions_exceed_the_agents_md_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    write_pack(&dir, &base_profile());
    std::fs::write(dir.join("agents/lead.md"), "x".repeat(40 * 1024)).unwrap();
    let pack = Pack::load(&dir).unwrap();
    let v = validate(&pack, &registry(), &Consent::default(), &[]).unwrap();
    let err = compile(&pack, &v).unwrap_err();
    assert!(err.has_rule("agents_md_too_large"), "{err}");
}

#[test]
fn twenty_role_pack_validates_and_compiles() {
    let tmp = tempfile::tempdir().unwrap();
    write_wide_pack(tmp.path(), 20);
    let pack = Pack::load(tmp.path()).unwrap();
    let v =
        validate(&pack, &registry(), &Consent::default(), &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.profile.agents.len(), 20);
    // chatgpt 6 - root 1 = 5 mini slots of 6; zen 4 of 6; go 4 of 7: 13 workers + root.
    assert_eq!(v.ceilings.max_active_agents.derived, Some(14));
    let (s, _) = compile(&pack, &v).unwrap();
    assert_eq!(
        s.files
            .keys()
            .filter(|k| k.ends_with("/output-schema.json"))
            .count(),
        19
    );
}

#[test]
fn native_roles_become_custom_agents_in_the_root_home() {
    let s = build(&example("hybrid-audit"), &[]);
    insta::assert_snapshot!(
        "hybrid_audit_scout_native_agent",
        text(&s, "roles/auditor_lead/codex-home/agents/audit-scout.toml")
    );
    let root = text(&s, "roles/auditor_lead/codex-home/config.toml");
    assert!(
        root.contains("[agents]\ninterrupt_message = true\nmax_concurrent_threads_per_session = 3\nmax_depth = 1\n"),
        "{root}"
    );
    assert!(
        !s.files
            .keys()
            .any(|k| k.contains("agents/") && k.contains("auditor.toml")),
        "MCP-only roles are not native agents"
    );
}

#[test]
fn dense_cyclic_spawn_graph_derives_a_depth_bound() {
    // Every participant may spawn every other: a naive longest-path search is factorial here.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let mut t = base_profile();
    let names: Vec<String> = (0..30).map(|i| format!("w{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    for n in &names {
        set(
            &mut t,
            &format!("agents.{n}.model"),
            "opencode_go_openai_chat__deepseek_v4_pro",
        );
        set(
            &mut t,
            &format!("agents.{n}.can_spawn"),
            strs(&refs.iter().copied().filter(|x| x != n).collect::<Vec<_>>()),
        );
    }
    let mut root_children = vec!["reviewer", "writer", "locator"];
    root_children.extend(refs.iter().copied());
    set(&mut t, "agents.lead.can_spawn", strs(&root_children));
    remove(&mut t, "coordination");
    write_pack(&dir, &t);
    // No timing assertion: the factorial search this guards against never finishes at all.
    let v = validated(&dir);
    // Upper bound on a cyclic graph: each of the 33 participants at most once in a lineage.
    assert_eq!(v.ceilings.max_depth.derived, Some(33));
}

#[test]
fn acyclic_spawn_chain_depth_is_exact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let mut t = base_profile();
    set(&mut t, "agents.writer.can_spawn", strs(&["reviewer"]));
    set(&mut t, "agents.reviewer.can_spawn", strs(&["locator"]));
    set(&mut t, "coordination.max_depth", 3);
    write_pack(&dir, &t);
    let v = validated(&dir);
    assert_eq!(v.ceilings.max_depth.derived, Some(3));
}

#[test]
fn cycle_without_ancestor_rejection_is_unbounded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let mut t = base_profile();
    set(&mut t, "coordination.reject_ancestor_role", false);
    set(&mut t, "coordination.max_depth", 16);
    set(&mut t, "agents.writer.can_spawn", strs(&["writer"]));
    write_pack(&dir, &t);
    let v = validated(&dir);
    assert_eq!(v.ceilings.max_depth.derived, None);
    assert_eq!(v.ceilings.max_depth.effective, 16);
}

#[test]
fn native_role_on_another_route_carries_that_routes_model_provider() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("hybrid");
    copy_dir(&example("hybrid-audit"), &dir);
    let mut catalog = std::fs::read_to_string(dir.join("catalog.toml")).unwrap();
    catalog.push_str(
        "\n[routes.lab_gateway_chat]\nnamespace = \"lab\"\ndriver = \"openai_chat\"\ntransports = [\"responses\", \"chat_completions\"]\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\nbackends = [\"mcp\", \"native\"]\nresource_group = \"opencode_go\"\nbase_url = \"http://127.0.0.1:4318/switchyard/lab_gateway_chat/v1\"\ncredential_env = \"LAB_GATEWAY_API_KEY\"\n\n[models.lab_gateway_chat__coder]\nname = \"lab-coder\"\nagent_compatible = true\ntool_calling = true\nreasoning = [\"medium\", \"high\"]\ninput_modalities = [\"text\"]\noutput_modalities = [\"text\"]\n",
    );
    std::fs::write(dir.join("catalog.toml"), catalog).unwrap();
    let binds = [("scout".to_string(), "lab_gateway_chat__coder".to_string())];
    let pack = Pack::load(&dir).unwrap();
    // The pack's route sends a credential no built-in route sends: only with the operator's
    // consent (their credentials.toml) does it compile.
    let err = validate(&pack, &example_registry(), &Consent::default(), &binds).unwrap_err();
    assert!(err.has_rule("catalog_credential_destination"), "{err}");
    assert!(
        err.to_string().contains("LAB_GATEWAY_API_KEY")
            && err.to_string().contains("http://127.0.0.1:4318"),
        "{err}"
    );
    let consent = Consent::default().allow("LAB_GATEWAY_API_KEY", "http://127.0.0.1:4318");
    let v =
        validate(&pack, &example_registry(), &consent, &binds).unwrap_or_else(|e| panic!("{e}"));
    let s = compile(&pack, &v).unwrap_or_else(|e| panic!("{e}")).0;
    let native: toml::Table = text(&s, "roles/auditor_lead/codex-home/agents/audit-scout.toml")
        .parse()
        .unwrap();
    assert_eq!(native["model"].as_str(), Some("lab-coder"));
    assert_eq!(
        native["model_provider"].as_str(),
        Some("lab_gateway_chat"),
        "without it Codex keeps the root's provider for the native agent"
    );
    // The provider is defined where the native agent runs: the root's home.
    let root: toml::Table = text(&s, "roles/auditor_lead/codex-home/config.toml")
        .parse()
        .unwrap();
    assert_eq!(root["model_provider"].as_str(), Some("openai"));
    let p = &root["model_providers"]["lab_gateway_chat"];
    assert_eq!(
        p["base_url"].as_str(),
        Some("http://127.0.0.1:4318/switchyard/lab_gateway_chat/v1")
    );
    assert_eq!(p["wire_api"].as_str(), Some("responses"));
    assert_eq!(p["env_key"].as_str(), Some("LAB_GATEWAY_API_KEY"));
    // On the root's own route the native agent names the same provider explicitly.
    let s = build(&example("hybrid-audit"), &[]);
    let native: toml::Table = text(&s, "roles/auditor_lead/codex-home/agents/audit-scout.toml")
        .parse()
        .unwrap();
    assert_eq!(native["model_provider"].as_str(), Some("openai"));
}
