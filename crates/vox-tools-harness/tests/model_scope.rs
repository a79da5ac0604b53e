//! What a tool that calls tools reaches: a chat's model acts under its caller's scope less a
//! person's tools (`CallScope::for_model`), on every path. For each path's scope, the tools the
//! model reaches by calling (every catalog tool and every listed one, tried) are exactly the
//! caller's listed public tools, and the model's own listing says the same.

use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use vox_core::{CallRun, CallScope, Cancel, ToolOutcome};
use vox_mcp_registry::{Caller, Exposure, Role, ToolSet, tool_by_name};
use vox_tools_harness::{Harness, ProfileSet};

/// A key no tool takes: a call that gets past the decision stops at argument checking and runs
/// nothing.
const PROBE: &str = "vox_scope_probe_unknown_key";

fn names(listed: &[serde_json::Value]) -> BTreeSet<String> {
    listed
        .iter()
        .filter_map(|d| d["name"].as_str().map(str::to_owned))
        .collect()
}

/// A person's tool: operator or internal exposure (workspace tools are not in the catalog, and
/// are the caller's own).
fn a_persons(name: &str) -> bool {
    tool_by_name(name).is_some_and(|t| t.exposure != Exposure::Public)
}

/// The tools a call under `scope` reaches (not denied), of `candidates`. A call that waits (an
/// agent's write waiting for a person) is cancelled after a moment: it was not denied.
async fn reached(
    h: &Harness,
    scope: &Arc<CallScope>,
    candidates: &BTreeSet<String>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for name in candidates {
        let cancel = Cancel::new();
        let timer = tokio::spawn({
            let c = cancel.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                c.cancel();
            }
        });
        let outcome = h
            .orch()
            .call(
                scope,
                name,
                json!({PROBE: true}),
                CallRun::cancelled_by(cancel),
            )
            .await;
        timer.abort();
        if !matches!(outcome, ToolOutcome::Denied(_)) {
            out.insert(name.clone());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_reaches_exactly_its_callers_public_tools_on_every_path() {
    let h = Harness::boot_in(|root| {
        std::fs::create_dir_all(root.join("tools")).unwrap();
        std::fs::write(
            root.join("tools/math.vox"),
            "@tool \"Add\"\nfn add(a: int, b: int) to int {\n    a + b\n}\n",
        )
        .unwrap();
    });
    h.ok(
        "vox_spawn_agent",
        json!({"agent_id": "m", "profile": "models"}),
    )
    .await;
    let dev = h.orch().profile().clone();
    let remote = |role| Caller {
        loopback: false,
        role,
    };
    let mut allow = ToolSet::default();
    for n in ["vox_chat_message", "vox_memory_recall", "vox_spawn_agent"] {
        allow.insert(tool_by_name(n).unwrap().index);
    }
    let paths: Vec<(&str, Arc<CallScope>)> = vec![
        ("the operator over stdio", h.operator("s")),
        ("agent m (models) over stdio", h.agent("m", "s")),
        (
            "a gateway's allowlist",
            Arc::new(
                CallScope::new(dev.restricted(&allow), remote(Role::Write), "token", "t")
                    .narrowed_by("this gateway's allowlist"),
            ),
        ),
        (
            "the gateway's read role",
            Arc::new(CallScope::new(dev.clone(), remote(Role::Read), "read", "r")),
        ),
        (
            "a mesh node granted models",
            Arc::new(CallScope::new(
                ProfileSet::parse("models").unwrap(),
                remote(Role::Write),
                "node:alpha",
                "mesh:alpha",
            )),
        ),
    ];
    let catalog: BTreeSet<String> = ToolSet::all_built()
        .iter()
        .map(|t| t.name.to_owned())
        .collect();
    for (path, scope) in paths {
        let listed = names(&h.orch().list(&scope));
        let expected: BTreeSet<String> = listed.iter().filter(|n| !a_persons(n)).cloned().collect();
        let model = Arc::new(scope.for_model());
        assert_eq!(
            names(&h.orch().list(&model)),
            expected,
            "{path}: the model lists its caller's public tools"
        );
        let candidates: BTreeSet<String> = catalog.union(&listed).cloned().collect();
        assert_eq!(
            reached(&h, &model, &candidates).await,
            expected,
            "{path}: the model reaches exactly what it lists"
        );
        assert!(!expected.is_empty(), "{path}: the model reaches something");
    }
}
