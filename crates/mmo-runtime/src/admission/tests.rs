use super::*;
use std::collections::BTreeSet;

const SQUAD_PROFILE: &str = include_str!("../../tests/fixtures/build-squad/profile.json");
const SQUAD_CEILINGS: &str = include_str!("../../tests/fixtures/build-squad/ceilings.json");
const SQUAD_CATALOG: &str = include_str!("../../tests/fixtures/build-squad/catalog.json");
const AUDIT_PROFILE: &str = include_str!("../../tests/fixtures/hybrid-audit/profile.json");
const AUDIT_CEILINGS: &str = include_str!("../../tests/fixtures/hybrid-audit/ceilings.json");
const AUDIT_CATALOG: &str = include_str!("../../tests/fixtures/hybrid-audit/catalog.json");
const PAIR_CEILINGS: &str = include_str!("../../tests/fixtures/review-pair/ceilings.json");
const PAIR_CATALOG: &str = include_str!("../../tests/fixtures/review-pair/catalog.json");

struct Fx {
    profile: Profile,
    ceilings: Ceilings,
    caps: Capacities,
    elsewhere: BTreeMap<String, u32>,
}

impl Fx {
    fn squad() -> Fx {
        Fx {
            profile: serde_json::from_str(SQUAD_PROFILE).unwrap(),
            ceilings: Ceilings::from_json(SQUAD_CEILINGS).unwrap(),
            caps: Capacities::from_catalog_json(SQUAD_CATALOG).unwrap(),
            elsewhere: BTreeMap::new(),
        }
    }
    fn audit() -> Fx {
        Fx {
            profile: serde_json::from_str(AUDIT_PROFILE).unwrap(),
            ceilings: Ceilings::from_json(AUDIT_CEILINGS).unwrap(),
            caps: Capacities::from_catalog_json(AUDIT_CATALOG).unwrap(),
            elsewhere: BTreeMap::new(),
        }
    }
    fn admit(
        &self,
        active: &[ActiveRun],
        caller: &str,
        req: &SpawnRequest,
    ) -> Result<Admitted, AdmissionError> {
        let policy = Policy {
            profile: &self.profile,
            ceilings: &self.ceilings,
            capacities: &self.caps,
            elsewhere: &self.elsewhere,
        };
        admit(&policy, active, caller, req)
    }
    fn root(&self) -> ActiveRun {
        ActiveRun::root(&self.profile, "run-root")
    }
    /// Admit and add to `active` under the given run ref.
    fn spawn(&self, active: &mut Vec<ActiveRun>, caller: &str, run: &str, req: &SpawnRequest) {
        let a = self
            .admit(active, caller, req)
            .unwrap_or_else(|e| panic!("{e}"));
        active.push(a.into_active_run(run));
    }
}

fn implement(scope: &[&str]) -> SpawnRequest {
    SpawnRequest {
        role: "implementer".into(),
        task: Some("Add a --version flag to the command line.".into()),
        task_kind: Some("implementation".into()),
        write_scope: Some(scope.iter().map(|s| s.to_string()).collect()),
        literal_task: None,
    }
}

fn research() -> SpawnRequest {
    SpawnRequest {
        role: "researcher".into(),
        task: Some("Find the build tool's documentation.".into()),
        task_kind: Some("research".into()),
        write_scope: None,
        literal_task: None,
    }
}

fn literal(op: &str) -> LiteralTask {
    LiteralTask {
        operation: op.into(),
        path: "src/lib.rs".into(),
        start_line: None,
        end_line: None,
        query: Some("fn main".into()),
    }
}

fn locate() -> SpawnRequest {
    SpawnRequest {
        role: "locator".into(),
        literal_task: Some(literal("locate")),
        ..SpawnRequest::default()
    }
}

fn code(r: Result<Admitted, AdmissionError>) -> &'static str {
    match r {
        Ok(a) => panic!("admitted: {a:?}"),
        Err(e) => {
            // Every message names its code and is not empty beyond it.
            let m = e.to_string();
            assert!(m.starts_with(&format!("[{}] ", e.code())), "{m}");
            assert_eq!(e.limit(), e.code());
            e.code()
        }
    }
}

// One scenario per code; `every_code_is_exercised` runs them all.

fn unknown_role() -> &'static str {
    let fx = Fx::squad();
    let mut r = research();
    r.role = "ghost".into();
    code(fx.admit(&[fx.root()], "run-root", &r))
}

fn root() -> &'static str {
    let fx = Fx::squad();
    let mut r = research();
    r.role = "lead".into();
    code(fx.admit(&[fx.root()], "run-root", &r))
}

fn caller_inactive() -> &'static str {
    let fx = Fx::squad();
    code(fx.admit(&[fx.root()], "run-gone", &research()))
}

fn backend() -> &'static str {
    let fx = Fx::audit();
    let r = SpawnRequest {
        role: "scout".into(),
        task: Some("Map the attack surface of the server.".into()),
        task_kind: Some("analysis".into()),
        ..SpawnRequest::default()
    };
    code(fx.admit(&[fx.root()], "run-root", &r))
}

fn can_spawn() -> &'static str {
    let fx = Fx::squad();
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-r", &research());
    // The researcher spawns nothing.
    code(fx.admit(&active, "run-r", &locate()))
}

fn depth() -> &'static str {
    let mut fx = Fx::squad();
    fx.profile
        .agents
        .get_mut("researcher")
        .unwrap()
        .can_spawn
        .push("locator".into());
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-r", &research());
    let e = fx.admit(&active, "run-r", &locate()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "[admission_depth] spawning `locator` would run at depth 2; the effective max_depth is 1"
    );
    code(Err(e))
}

fn ancestor_role() -> &'static str {
    let mut fx = Fx::squad();
    fx.ceilings.max_depth.effective = 3;
    fx.profile
        .agents
        .get_mut("researcher")
        .unwrap()
        .can_spawn
        .push("researcher".into());
    fx.profile.agents.get_mut("researcher").unwrap().max_active = 2;
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-r", &research());
    code(fx.admit(&active, "run-r", &research()))
}

fn task_kind() -> &'static str {
    let fx = Fx::squad();
    let mut r = research();
    r.task_kind = Some("implementation".into());
    code(fx.admit(&[fx.root()], "run-root", &r))
}

fn task_required() -> &'static str {
    let fx = Fx::squad();
    let mut r = research();
    r.task = None;
    code(fx.admit(&[fx.root()], "run-root", &r))
}

fn task_length() -> &'static str {
    let fx = Fx::squad();
    let mut r = research();
    // 11 characters of 2 bytes each: counted in chars, not bytes.
    r.task = Some("é".repeat(11));
    let e = fx.admit(&[fx.root()], "run-root", &r).unwrap_err();
    assert!(e.to_string().contains("11 characters"), "{e}");
    r.task = Some("é".repeat(12));
    fx.admit(&[fx.root()], "run-root", &r).unwrap();
    code(Err(e))
}

fn low_trust_prose() -> &'static str {
    let fx = Fx::squad();
    let mut r = locate();
    r.task = Some("Please find the main function for me.".into());
    code(fx.admit(&[fx.root()], "run-root", &r))
}

fn literal_task_required() -> &'static str {
    let fx = Fx::squad();
    let mut r = locate();
    r.literal_task = None;
    code(fx.admit(&[fx.root()], "run-root", &r))
}

fn literal_task_low_trust_only() -> &'static str {
    let fx = Fx::squad();
    let mut r = research();
    r.literal_task = Some(literal("locate"));
    code(fx.admit(&[fx.root()], "run-root", &r))
}

fn write_scope_required() -> &'static str {
    let fx = Fx::squad();
    let mut r = implement(&[]);
    assert_eq!(
        code(fx.admit(&[fx.root()], "run-root", &r)),
        "admission_write_scope_required"
    );
    r.write_scope = None;
    code(fx.admit(&[fx.root()], "run-root", &r))
}

fn write_scope_read_only() -> &'static str {
    let fx = Fx::squad();
    let mut r = research();
    r.write_scope = Some(vec!["docs".into()]);
    code(fx.admit(&[fx.root()], "run-root", &r))
}

fn write_scope_invalid() -> &'static str {
    let fx = Fx::squad();
    code(fx.admit(&[fx.root()], "run-root", &implement(&["src/../etc"])))
}

fn max_active() -> &'static str {
    let fx = Fx::squad();
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-i1", &implement(&["src/a"]));
    fx.spawn(&mut active, "run-root", "run-i2", &implement(&["src/b"]));
    let e = fx
        .admit(&active, "run-root", &implement(&["src/c"]))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "[admission_max_active] role `implementer` has max_active = 2 and 2 are active"
    );
    assert!(e.retryable());
    code(Err(e))
}

#[test]
fn max_active_counts_the_roles_runs_in_other_sessions_of_the_profile() {
    let mut fx = Fx::squad();
    fx.elsewhere.insert("implementer".into(), 1);
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-i1", &implement(&["src/a"]));
    let e = fx
        .admit(&active, "run-root", &implement(&["src/b"]))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "[admission_max_active] role `implementer` has max_active = 2 across the sessions of its profile and 2 are active (1 in other sessions)"
    );
    // Other roles are not affected by another session's implementers.
    fx.admit(&active, "run-root", &research()).unwrap();
}

fn max_children() -> &'static str {
    let mut fx = Fx::squad();
    fx.profile.agents.get_mut("lead").unwrap().max_children = 1;
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-r", &research());
    code(fx.admit(&active, "run-root", &locate()))
}

fn max_active_agents() -> &'static str {
    let mut fx = Fx::squad();
    fx.ceilings.max_active_agents.effective = 2;
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-r", &research());
    let e = fx.admit(&active, "run-root", &locate()).unwrap_err();
    assert!(e.to_string().contains("max_active_agents = 2"), "{e}");
    assert!(e.to_string().contains("2 are active"), "{e}");
    code(Err(e))
}

fn max_active_writers() -> &'static str {
    let mut fx = Fx::squad();
    fx.ceilings.max_active_writers.effective = 1;
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-i1", &implement(&["src/a"]));
    code(fx.admit(&active, "run-root", &implement(&["src/b"])))
}

fn resource_group() -> &'static str {
    let mut fx = Fx::squad();
    // Two locator slots on the single-slot literal lane: the second does not fit.
    fx.profile.agents.get_mut("locator").unwrap().max_active = 2;
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-l1", &locate());
    let e = fx.admit(&active, "run-root", &locate()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "[admission_resource_group] role `locator` needs 1 unit(s) of resource group `opencode_go_literal`, which has capacity = 1 and 1 held"
    );
    code(Err(e))
}

fn write_conflict() -> &'static str {
    let fx = Fx::squad();
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-i1", &implement(&["src/cli"]));
    code(fx.admit(&active, "run-root", &implement(&["src/cli/args.rs"])))
}

const SCENARIOS: &[fn() -> &'static str] = &[
    unknown_role,
    root,
    caller_inactive,
    backend,
    can_spawn,
    depth,
    ancestor_role,
    task_kind,
    task_required,
    task_length,
    low_trust_prose,
    literal_task_required,
    literal_task_low_trust_only,
    write_scope_required,
    write_scope_read_only,
    write_scope_invalid,
    max_active,
    max_children,
    max_active_agents,
    max_active_writers,
    resource_group,
    write_conflict,
];

#[test]
fn every_code_is_exercised() {
    let produced: BTreeSet<&str> = SCENARIOS.iter().map(|f| f()).collect();
    let declared: BTreeSet<&str> = CODES.iter().copied().collect();
    assert_eq!(produced, declared);
    assert_eq!(CODES.len(), declared.len(), "duplicate code");
}

#[test]
fn snapshot_files_parse() {
    for (c, cat) in [
        (SQUAD_CEILINGS, SQUAD_CATALOG),
        (AUDIT_CEILINGS, AUDIT_CATALOG),
        (PAIR_CEILINGS, PAIR_CATALOG),
    ] {
        Ceilings::from_json(c).unwrap();
        Capacities::from_catalog_json(cat).unwrap();
    }
    let fx = Fx::squad();
    assert_eq!(fx.ceilings.max_active_agents.effective, 5);
    assert_eq!(fx.caps.capacity("opencode_go_literal"), Some(1));
    let mut extra: serde_json::Value = serde_json::from_str(SQUAD_CEILINGS).unwrap();
    extra["surprise"] = 1.into();
    assert!(Ceilings::from_json(&extra.to_string()).is_err());
}

#[test]
fn admitted_run_carries_depth_lineage_writer_and_resources() {
    let fx = Fx::squad();
    let a = fx
        .admit(
            &[fx.root()],
            "run-root",
            &implement(&["src/b/", "src/a", "src/a/x.rs"]),
        )
        .unwrap();
    assert_eq!(a.depth, 1);
    assert_eq!(a.lineage, ["lead", "implementer"]);
    assert!(a.is_writer);
    assert_eq!(a.resource_group.as_deref(), Some("opencode_go"));
    assert_eq!(a.resource_units, 1);
    assert_eq!(a.write_scope, ["src/a", "src/b"]);
    assert_eq!(a.task_kind, "implementation");
    assert!(!a.literal);
    let l = fx.admit(&[fx.root()], "run-root", &locate()).unwrap();
    assert!(l.literal && !l.is_writer);
    assert_eq!(l.task_kind, "locate");
}

#[test]
fn terminal_runs_release_their_slots() {
    let fx = Fx::squad();
    let mut active = vec![fx.root()];
    // Five sequential locator jobs on a max_active = 1, capacity-1 lane: each ends before the next.
    for i in 0..5 {
        fx.spawn(&mut active, "run-root", &format!("run-l{i}"), &locate());
        assert_eq!(
            code(fx.admit(&active, "run-root", &locate())),
            "admission_max_active"
        );
        active.retain(|r| r.role != "locator");
    }
    // Writers too: the conflicting scope is admitted once the earlier writer is gone.
    fx.spawn(&mut active, "run-root", "run-i1", &implement(&["src"]));
    assert_eq!(
        code(fx.admit(&active, "run-root", &implement(&["src/x"]))),
        "admission_write_conflict"
    );
    active.retain(|r| r.run != "run-i1");
    fx.admit(&active, "run-root", &implement(&["src/x"]))
        .unwrap();
}

#[test]
fn the_root_holds_its_resource_units() {
    let mut fx = Fx::squad();
    // Bind the researcher to the root's group with capacity = root units + 0.
    fx.profile
        .agents
        .get_mut("researcher")
        .unwrap()
        .resource_group = Some("chatgpt_subscription".into());
    fx.caps.groups.insert("chatgpt_subscription".into(), 1);
    assert_eq!(
        code(fx.admit(&[fx.root()], "run-root", &research())),
        "admission_resource_group"
    );
    fx.caps.groups.insert("chatgpt_subscription".into(), 2);
    fx.admit(&[fx.root()], "run-root", &research()).unwrap();
    // A group the catalog does not define admits nothing.
    fx.caps.groups.remove("chatgpt_subscription");
    let e = fx.admit(&[fx.root()], "run-root", &research()).unwrap_err();
    assert!(e.to_string().contains("does not define"), "{e}");
}

#[test]
fn max_active_agents_counts_the_root() {
    let mut fx = Fx::squad();
    fx.ceilings.max_active_agents.effective = 1;
    assert_eq!(
        code(fx.admit(&[fx.root()], "run-root", &research())),
        "admission_max_active_agents"
    );
}

#[test]
fn nested_spawn_in_a_hybrid_profile() {
    let fx = Fx::audit();
    // A native scout (depth 1) spawns the MCP extractor at depth 2 = max_depth.
    let scout = ActiveRun {
        run: "run-scout".into(),
        role: "scout".into(),
        parent: Some("run-root".into()),
        depth: 1,
        lineage: vec!["auditor_lead".into(), "scout".into()],
        is_writer: false,
        resource_group: Some("chatgpt_subscription".into()),
        resource_units: 1,
        write_scope: vec![],
    };
    let req = SpawnRequest {
        role: "extractor".into(),
        literal_task: Some(LiteralTask {
            operation: "extract".into(),
            path: "Cargo.toml".into(),
            start_line: Some(1),
            end_line: Some(20),
            query: None,
        }),
        ..SpawnRequest::default()
    };
    let a = fx
        .admit(&[fx.root(), scout.clone()], "run-scout", &req)
        .unwrap();
    assert_eq!(a.depth, 2);
    assert_eq!(a.lineage, ["auditor_lead", "scout", "extractor"]);
    assert_eq!(a.resource_group.as_deref(), Some("local_gpu"));
    // `locate` is a literal kind but not one the extractor allows.
    let mut bad = req.clone();
    bad.literal_task.as_mut().unwrap().operation = "locate".into();
    assert_eq!(
        code(fx.admit(&[fx.root(), scout.clone()], "run-scout", &bad)),
        "admission_task_kind"
    );
    // A low-trust role never takes a task_kind, even a matching one.
    let mut kind = req;
    kind.task_kind = Some("extract".into());
    assert_eq!(
        code(fx.admit(&[fx.root(), scout], "run-scout", &kind)),
        "admission_low_trust_prose"
    );
}

#[test]
fn ancestor_role_check_can_be_disabled() {
    let mut fx = Fx::squad();
    fx.profile.coordination.reject_ancestor_role = false;
    fx.ceilings.max_depth.effective = 3;
    let r = fx.profile.agents.get_mut("researcher").unwrap();
    r.can_spawn.push("researcher".into());
    r.max_active = 2;
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-r", &research());
    let a = fx.admit(&active, "run-r", &research()).unwrap();
    assert_eq!(a.lineage, ["lead", "researcher", "researcher"]);
}

#[test]
fn unscoped_writer_claims_the_whole_tree() {
    let mut fx = Fx::squad();
    fx.profile
        .agents
        .get_mut("implementer")
        .unwrap()
        .write_scope_required = false;
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-i1", &implement(&[]));
    assert_eq!(
        code(fx.admit(&active, "run-root", &implement(&["docs"]))),
        "admission_write_conflict"
    );
}

#[test]
fn disjoint_writers_are_admitted() {
    let fx = Fx::squad();
    let mut active = vec![fx.root()];
    fx.spawn(&mut active, "run-root", "run-i1", &implement(&["src/cli"]));
    // `src/client` shares a string prefix with `src/cli`, not a component prefix.
    fx.admit(
        &active,
        "run-root",
        &implement(&["src/client", "README.md"]),
    )
    .unwrap();
}

#[test]
fn scope_paths_are_normalized_or_refused() {
    let ok = |s: &str| normalize_path(s).unwrap();
    assert_eq!(ok("src/"), "src");
    assert_eq!(ok("a/b.rs"), "a/b.rs");
    assert_eq!(ok("ünï/cødé"), "ünï/cødé");
    for bad in [
        "", "/etc", "./src", "src/.", "a/../b", "..", "a//b", "a\\b", "a\0b", "src/*.rs", "a?",
        "[ab]", "{a,b}", "a\nb", "//", "/",
    ] {
        assert!(normalize_path(bad).is_err(), "{bad:?} accepted");
    }
    assert!(normalize_path(&"a".repeat(1025)).is_err());
    let many: Vec<String> = (0..257).map(|i| format!("f{i}")).collect();
    assert!(normalize_scope(&many).is_err());
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        normalize_scope(&s(&["b", "a/x", "a", "b/", "c/d"])).unwrap(),
        ["a", "b", "c/d"]
    );
}

#[test]
fn scope_containment_and_overlap() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let scope = s(&["src/cli", "README.md"]);
    assert!(scope_contains(&scope, "src/cli"));
    assert!(scope_contains(&scope, "src/cli/args.rs"));
    assert!(scope_contains(&scope, "README.md"));
    assert!(!scope_contains(&scope, "src/client.rs"));
    assert!(!scope_contains(&scope, "src"));
    assert!(!scope_contains(&scope, "README.md.orig"));
    assert!(!scope_contains(&scope, "src/cli/../../etc/passwd"));
    assert!(!scope_contains(&scope, "/src/cli/x"));
    assert!(!scope_contains(&[], "src"));
    assert!(scopes_overlap(&s(&["src"]), &s(&["src/a/b"])));
    assert!(scopes_overlap(&s(&["src/a/b"]), &s(&["x", "src"])));
    assert!(scopes_overlap(&s(&["a"]), &s(&["a"])));
    assert!(!scopes_overlap(&s(&["src/a"]), &s(&["src/ab", "src/b"])));
    assert!(!scopes_overlap(&s(&[]), &s(&["a"])));
}
