//! The authorization decision against the spec: listing and calling agree (property tests), profile
//! composition and canonical ids, and each denial code in its fixed order.

use proptest::prelude::*;
use vox_mcp_registry::*;

fn profile_ids() -> Vec<&'static str> {
    std::iter::once(DEV)
        .chain(PROFILES.iter().map(|p| p.id))
        .collect()
}

fn any_caller() -> impl Strategy<Value = Caller> {
    (any::<bool>(), any::<bool>()).prop_map(|(loopback, read)| Caller {
        loopback,
        role: if read { Role::Read } else { Role::Write },
    })
}

fn any_profile_list() -> impl Strategy<Value = Vec<&'static str>> {
    prop::collection::vec(prop::sample::select(profile_ids()), 1..5)
}

proptest! {
    #[test]
    fn listing_and_calling_always_agree(
        ids in any_profile_list(),
        caller in any_caller(),
        booted in any::<u32>(),
        extra in "[a-z_]{1,20}",
    ) {
        let profile = ProfileSet::compose(&ids).unwrap();
        let listed: Vec<&str> = visible_tools(&profile, caller, booted).map(|t| t.name).collect();
        for t in &TOOL_REGISTRY {
            let allowed = authorize_tool(&profile, t.name, caller, booted).is_ok();
            prop_assert_eq!(allowed, listed.contains(&t.name), "tool {}", t.name);
        }
        let unknown = format!("zz_{extra}");
        prop_assert!(authorize_tool(&profile, &unknown, caller, booted).is_err());
    }

    #[test]
    fn canonical_form_is_idempotent_and_order_free(ids in any_profile_list(), seed in any::<u64>()) {
        let a = ProfileSet::compose(&ids).unwrap();
        let mut shuffled = ids.clone();
        // A deterministic permutation driven by the seed.
        let n = shuffled.len();
        for i in 0..n {
            let j = ((seed >> (i % 60)) as usize + i) % n;
            shuffled.swap(i, j);
        }
        let b = ProfileSet::compose(&shuffled).unwrap();
        prop_assert_eq!(a.canonical(), b.canonical());
        prop_assert_eq!(&a, &b);
        let again = ProfileSet::parse(a.canonical()).unwrap();
        prop_assert_eq!(again.canonical(), a.canonical());
        prop_assert_eq!(&again, &a);
        if ids.contains(&DEV) {
            prop_assert_eq!(a.canonical(), DEV);
        }
    }

    #[test]
    fn composition_is_the_union(ids in any_profile_list()) {
        let composed = ProfileSet::compose(&ids).unwrap();
        for id in &ids {
            let one = ProfileSet::compose(&[id]).unwrap();
            for t in one.tools().iter() {
                prop_assert!(composed.tools().contains(t.index));
            }
            prop_assert_eq!(one.closure_mask() & !composed.closure_mask(), 0);
            prop_assert!(one.max_exposure() <= composed.max_exposure());
        }
    }
}

const ALL: SubsystemMask = u32::MAX;

fn denial(profile: &str, tool: &str, caller: Caller, booted: SubsystemMask) -> Denial {
    authorize_tool(&ProfileSet::parse(profile).unwrap(), tool, caller, booted).unwrap_err()
}

#[test]
fn canonical_form_of_models_knowledge_is_sorted() {
    assert_eq!(
        ProfileSet::parse("models,knowledge").unwrap().canonical(),
        "knowledge,models"
    );
    assert_eq!(
        ProfileSet::parse(" knowledge , knowledge ")
            .unwrap()
            .canonical(),
        "knowledge"
    );
    assert_eq!(
        ProfileSet::parse("knowledge,dev").unwrap().canonical(),
        "dev"
    );
}

#[test]
fn unknown_profile_is_rejected_with_the_known_list() {
    let err = ProfileSet::parse("knowledge,nope").unwrap_err();
    assert_eq!(err, ProfileError::Unknown { id: "nope".into() });
    assert!(err.to_string().contains("repo-read"));
    assert_eq!(ProfileSet::parse(" , ").unwrap_err(), ProfileError::Empty);
}

#[test]
fn tool_outside_the_profile_is_tool_not_in_profile() {
    let d = denial("knowledge", "vox_repo_log", Caller::LOCAL, ALL);
    assert_eq!(d.code, DenialCode::ToolNotInProfile);
    assert_eq!(d.code.http_status(), 404);
}

#[test]
fn non_registry_tool_under_named_profile_is_tool_not_in_profile_and_unknown_under_dev() {
    assert_eq!(
        denial("knowledge", "my_workspace_tool", Caller::LOCAL, ALL).code,
        DenialCode::ToolNotInProfile
    );
    assert_eq!(
        denial("dev", "my_workspace_tool", Caller::LOCAL, ALL).code,
        DenialCode::UnknownTool
    );
}

#[test]
fn internal_tool_is_denied_off_loopback() {
    let remote_writer = Caller {
        loopback: false,
        role: Role::Write,
    };
    let d = denial("dev", "vox_boot_report", remote_writer, ALL);
    assert_eq!(d.code, DenialCode::ExposureDenied);
    assert_eq!(d.code.http_status(), 403);
    assert!(authorize_tool(&ProfileSet::dev(), "vox_boot_report", Caller::LOCAL, ALL).is_ok());
}

#[test]
fn read_token_cannot_call_operator_tool() {
    let reader = Caller {
        loopback: true,
        role: Role::Read,
    };
    assert_eq!(
        denial("attention", "vox_trust_override", reader, ALL).code,
        DenialCode::ExposureDenied
    );
}

#[test]
fn read_token_cannot_call_writing_or_structural_tools() {
    let reader = Caller {
        loopback: true,
        role: Role::Read,
    };
    let d = denial("knowledge", "vox_memory_store", reader, ALL);
    assert_eq!(d.code, DenialCode::InsufficientRole);
    assert_eq!(
        denial("knowledge", "vox_search_structural", reader, ALL).code,
        DenialCode::InsufficientRole
    );
    assert!(
        authorize_tool(
            &ProfileSet::parse("knowledge").unwrap(),
            "vox_kb_query",
            reader,
            ALL
        )
        .is_ok()
    );
}

#[test]
fn missing_subsystem_is_subsystem_not_booted_with_its_name() {
    let db = 1 << subsystem_index("db").unwrap();
    let d = denial("knowledge", "vox_kb_query", Caller::LOCAL, ALL & !db);
    assert_eq!(d.code, DenialCode::SubsystemNotBooted);
    assert_eq!(d.subsystem, Some("db"));
    assert_eq!(d.code.http_status(), 503);
    assert_eq!(
        d.to_json(),
        serde_json::json!({"error": {"code": "subsystem_not_booted", "subsystem": "db",
            "message": "tool vox_kb_query requires subsystem db, which is not running"}})
    );
}

#[test]
fn membership_is_decided_before_exposure() {
    // vox_boot_report is internal and not in knowledge: the profile decides first.
    let remote_reader = Caller {
        loopback: false,
        role: Role::Read,
    };
    assert_eq!(
        denial("knowledge", "vox_boot_report", remote_reader, 0).code,
        DenialCode::ToolNotInProfile
    );
    // An operator tool with the read role and nothing booted: exposure before boot state.
    assert_eq!(
        denial("attention", "vox_attention_reset", remote_reader, 0).code,
        DenialCode::ExposureDenied
    );
}

#[test]
fn knowledge_profile_is_exactly_its_slice() {
    let p = ProfileSet::parse("knowledge").unwrap();
    let names: Vec<&str> = p.tools().iter().map(|t| t.name).collect();
    assert!(names.iter().all(|n| {
        [
            "vox_memory_",
            "vox_session_",
            "vox_kb_",
            "vox_search_",
            "vox_knowledge_query",
        ]
        .iter()
        .any(|p| n.starts_with(p))
    }));
    assert_eq!(names.len(), 17);
    assert_eq!(p.max_exposure(), Exposure::Operator);
    let closure = subsystem_names(p.closure_mask());
    assert_eq!(closure, ["db", "search_index", "memory", "sessions"]);
}

#[test]
fn an_http_allowlist_restricts_membership_and_read_narrowing_is_insufficient_role() {
    let knowledge = ProfileSet::parse("knowledge").unwrap();
    let mut allow = ToolSet::default();
    allow.insert(tool_by_name("vox_kb_query").unwrap().index);
    allow.insert(tool_by_name("vox_memory_recall").unwrap().index);
    let http = knowledge.restricted(&allow);
    assert_eq!(http.canonical(), "knowledge");
    assert_eq!(http.tools().iter().count(), 2);
    let d = authorize_tool(&http, "vox_memory_search", Caller::LOCAL, ALL).unwrap_err();
    assert_eq!(d.code, DenialCode::ToolNotInProfile);
    let mut read_only = ToolSet::default();
    read_only.insert(tool_by_name("vox_kb_query").unwrap().index);
    let http = http.with_read_role_tools(read_only);
    let reader = Caller {
        loopback: true,
        role: Role::Read,
    };
    assert!(authorize_tool(&http, "vox_kb_query", reader, ALL).is_ok());
    assert_eq!(
        authorize_tool(&http, "vox_memory_recall", reader, ALL)
            .unwrap_err()
            .code,
        DenialCode::InsufficientRole
    );
    // The writer is not narrowed by the read-role list.
    assert!(authorize_tool(&http, "vox_memory_recall", Caller::LOCAL, ALL).is_ok());
    let listed: Vec<&str> = visible_tools(&http, reader, ALL).map(|t| t.name).collect();
    assert_eq!(listed, ["vox_kb_query"]);
}

#[test]
fn generated_subsystem_and_boot_step_ids_follow_the_contract() {
    use vox_mcp_registry::{BOOT_STEPS, BootStep, SUBSYSTEMS, SubsystemId};
    assert_eq!(SubsystemId::ALL.len(), SUBSYSTEMS.len());
    for (i, id) in SubsystemId::ALL.into_iter().enumerate() {
        assert_eq!(id as usize, i);
        assert_eq!(id.as_str(), SUBSYSTEMS[i].id);
        assert_eq!(id.bit(), 1 << i);
    }
    assert_eq!(BootStep::ALL.len(), BOOT_STEPS.len());
    for (i, step) in BootStep::ALL.into_iter().enumerate() {
        assert_eq!(step.name(), BOOT_STEPS[i].name);
        assert!(
            SUBSYSTEMS[step.subsystem() as usize]
                .boot_steps
                .contains(&step.name())
        );
    }
    assert_eq!(BootStep::Db.subsystem(), SubsystemId::Db);
    assert_eq!(
        BootStep::RoutingPreferences.subsystem(),
        SubsystemId::ModelRegistry
    );
}

fn any_class() -> impl Strategy<Value = UpstreamClass> {
    (0..3u8, any::<bool>(), any::<bool>()).prop_map(|(e, ro, read)| UpstreamClass {
        exposure: [Exposure::Public, Exposure::Operator, Exposure::Internal][e as usize],
        side_effect_class: if ro {
            SideEffectClass::ReadOnly
        } else {
            SideEffectClass::Destructive
        },
        read_role_eligible: read,
    })
}

proptest! {
    /// Narrowing a surface (a model's, an agent's, a mesh node's, an HTTP allowlist's) never
    /// lets an upstream tool through that the wider surface refuses, and what a public-only
    /// surface allows is public.
    #[test]
    fn upstream_tools_are_only_ever_narrowed(
        ids in any_profile_list(),
        caller in any_caller(),
        class in any_class(),
        booted in any::<u32>(),
        server in "[a-c]",
        tool in "[a-c]{1,3}",
    ) {
        let name = format!("{server}__{tool}");
        let profile = ProfileSet::compose(&ids).unwrap();
        let wide = authorize_upstream(&profile, &name, class, caller, booted).is_ok();
        let public = authorize_upstream(&profile.public_only(), &name, class, caller, booted).is_ok();
        prop_assert!(!public || (wide && class.exposure == Exposure::Public));
        let dev = ProfileSet::dev();
        let both = authorize_upstream(&dev.intersect(&profile), &name, class, caller, booted).is_ok();
        prop_assert!(!both || wide);
        let allowlisted = authorize_upstream(&dev.restricted(dev.tools()), &name, class, caller, booted);
        prop_assert!(allowlisted.is_err());
        // The read role never reaches a tool that is not public and read-role eligible.
        if caller.role == Role::Read && wide {
            prop_assert!(class.exposure == Exposure::Public && class.read_role_eligible);
        }
        // Standard profiles serve no upstream tool.
        if !profile.is_dev() {
            prop_assert!(!wide);
        }
    }
}
