//! `vox ci …`: the CI gates. Each prints what it checked, names every problem, and exits 1 when
//! there is one.

use anyhow::{Context, Result};
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use vox_cli::args::CiCommand;
use vox_mcp_registry::{PROFILES, ProfileSet, TOOL_REGISTRY};

/// Runs the gate the subcommand names.
pub fn run(command: CiCommand) -> Result<ExitCode> {
    match command {
        CiCommand::OperationsVerify { output } => operations_verify(output.json),
        CiCommand::McpVoxSurfaceParity {
            root,
            fixtures,
            output,
        } => surface_parity(&root, &fixtures, output.json),
        CiCommand::AgentskillsCompliance { dir, output } => {
            agentskills_compliance(&dir, output.json)
        }
    }
}

/// Prints a gate's report (JSON, or a summary line and one line per problem) and turns it into
/// the exit code.
fn finish(gate: &str, summary: String, problems: Vec<String>, json_out: bool) -> Result<ExitCode> {
    if json_out {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"gate": gate, "summary": summary, "problems": problems})
            )?
        );
    } else if problems.is_empty() {
        println!("{gate}: {summary}");
    } else {
        for p in &problems {
            println!("problem: {p}");
        }
        println!("{gate}: FAILED with {} problem(s)", problems.len());
    }
    Ok(exit_code(&problems))
}

fn exit_code(problems: &[String]) -> ExitCode {
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The static wiring gate: every built catalog tool has a handler with a plain, portable object
/// input schema and an object output schema, every handler has a catalog row, and every profile
/// composes from catalog tools whose subsystems its closure covers.
pub fn operations_verify(json_out: bool) -> Result<ExitCode> {
    let mut problems: Vec<String> = Vec::new();
    match vox_core::assemble(vox_tools::families()) {
        Err(e) => problems.push(e),
        Ok(vox_core::Assembled {
            handlers: table, ..
        }) => {
            for t in TOOL_REGISTRY.iter().filter(|t| t.built) {
                let Some(h) = &table[t.index] else { continue };
                if h.schema.get("type").and_then(Value::as_str) != Some("object")
                    || !h.schema["properties"].is_object()
                {
                    problems.push(format!(
                        "{}: input schema is not an object schema with properties",
                        t.name
                    ));
                }
                for p in vox_core::family::portability_problems(&h.schema) {
                    problems.push(format!("{}: input schema is not portable: {p}", t.name));
                }
                if h.output_schema
                    .as_ref()
                    .and_then(|o| o.get("type"))
                    .and_then(Value::as_str)
                    != Some("object")
                {
                    problems.push(format!("{}: no object output schema", t.name));
                }
            }
        }
    }
    let mut profiles = vec!["dev"];
    profiles.extend(PROFILES.iter().map(|p| p.id));
    for id in &profiles {
        match ProfileSet::parse(id) {
            Err(e) => problems.push(format!("profile {id}: {e}")),
            Ok(p) => {
                for t in p.tools().iter() {
                    if t.requires_mask & !p.closure_mask() != 0 {
                        problems.push(format!(
                            "profile {id}: {} requires subsystems outside the closure",
                            t.name
                        ));
                    }
                }
            }
        }
    }
    if json_out {
        // The historical report shape (counts at the top level), which callers parse.
        let report = json!({
            "tools": TOOL_REGISTRY.len(),
            "built": TOOL_REGISTRY.iter().filter(|t| t.built).count(),
            "profiles": profiles.len(),
            "problems": problems,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(exit_code(&problems));
    }
    let summary = format!(
        "{} tools, {} profiles: catalog, handlers, schemas and profiles agree",
        TOOL_REGISTRY.len(),
        profiles.len()
    );
    finish("operations-verify", summary, problems, false)
}

/// `contracts/mcp/workspace-tool-fixtures.v1.json`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fixtures {
    version: u32,
    /// The example workspace, relative to the project root.
    workspace: PathBuf,
    tools: Vec<ToolFixture>,
    resources: Vec<ResourceFixture>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFixture {
    name: String,
    #[serde(default)]
    args: Value,
    /// The tool's result (the value itself, before any transport wraps it).
    expect: Option<Value>,
    /// Or the error code it must fail with.
    expect_error: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceFixture {
    uri: String,
    expect: String,
}

/// Surface parity: serves the example workspace through the orchestrator (dev profile, the
/// same call path as every transport), checks that the federated tools and resources are exactly
/// those the fixtures name, that the workspace loads without diagnostics, and that every fixture
/// round-trips.
pub fn surface_parity(root: &Path, fixtures: &Path, json_out: bool) -> Result<ExitCode> {
    let fixtures_path = root.join(fixtures);
    let text = std::fs::read_to_string(&fixtures_path)
        .with_context(|| format!("cannot read {}", fixtures_path.display()))?;
    let fx: Fixtures = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid fixtures file", fixtures_path.display()))?;
    anyhow::ensure!(
        fx.version == 1,
        "{}: unsupported version {}",
        fixtures_path.display(),
        fx.version
    );
    // Serve a copy: the orchestrator creates `.vox/` in its workspace, which must not land in
    // the project tree.
    let scratch = tempfile::Builder::new()
        .prefix("vox-parity")
        .tempdir()
        .context("cannot create a scratch directory")?;
    let copy = scratch.path().join("workspace");
    vox_skills::store::copy_tree(&root.join(&fx.workspace), &copy)
        .with_context(|| format!("cannot copy {}", fx.workspace.display()))?;
    let (summary, problems) = run_parity(&copy, &fx)?;
    finish("mcp-vox-surface-parity", summary, problems, json_out)
}

fn run_parity(workspace: &Path, fx: &Fixtures) -> Result<(String, Vec<String>)> {
    use vox_core::{CallRun, CallScope, Orchestrator, ToolOutcome, Workspace, WorkspaceTools};
    let ws = Workspace::at(workspace)?;
    let orch = Orchestrator::boot(ws, ProfileSet::dev(), vox_tools::families())
        .map_err(anyhow::Error::msg)?;
    let wt = orch
        .ctx()
        .get::<std::sync::Arc<vox_tools::workspace_tools::WorkspaceTools>>()
        .context("the dev profile serves no workspace tools")?;
    let mut problems = Vec::new();
    let report = wt.refresh(&|_, _| {}).report;
    for e in &report.errors {
        problems.push(format!("{} does not compile: {}", e.file, e.diagnostic));
    }
    for s in &report.shadowed {
        problems.push(format!(
            "{}: tool {} is shadowed by the static catalog",
            s.file, s.name
        ));
    }
    for d in report
        .duplicate_tools
        .iter()
        .chain(&report.duplicate_resources)
    {
        problems.push(format!("{}: {} is declared twice", d.file, d.name));
    }
    let surface = wt.surface();
    let served: std::collections::BTreeSet<&str> =
        surface.tools.keys().map(String::as_str).collect();
    let fixtured: std::collections::BTreeSet<&str> =
        fx.tools.iter().map(|t| t.name.as_str()).collect();
    for missing in served.difference(&fixtured) {
        problems.push(format!("workspace tool {missing} has no fixture"));
    }
    for extra in fixtured.difference(&served) {
        problems.push(format!(
            "fixture names tool {extra}, which the workspace does not serve"
        ));
    }
    let served: std::collections::BTreeSet<&str> =
        surface.resources.keys().map(String::as_str).collect();
    let fixtured: std::collections::BTreeSet<&str> =
        fx.resources.iter().map(|r| r.uri.as_str()).collect();
    for missing in served.difference(&fixtured) {
        problems.push(format!("workspace resource {missing} has no fixture"));
    }
    for extra in fixtured.difference(&served) {
        problems.push(format!(
            "fixture names resource {extra}, which the workspace does not serve"
        ));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let scope = std::sync::Arc::new(
        CallScope::new(
            orch.profile().clone(),
            vox_mcp_registry::Caller::LOCAL,
            "ci",
            "ci",
        )
        .with_workspace_tools(WorkspaceTools::Listed),
    );
    for (i, t) in fx.tools.iter().enumerate() {
        let outcome = rt.block_on(orch.call(&scope, &t.name, t.args.clone(), CallRun::default()));
        let what = format!("tools[{i}] {}({})", t.name, t.args);
        match (&t.expect, &t.expect_error, &outcome) {
            (Some(want), None, ToolOutcome::Ok(got)) if same_json(want, got) => {}
            (None, Some(code), out) if out.is_error() && out.label() == code => {}
            (Some(_), Some(_), _) | (None, None, _) => problems.push(format!(
                "{what}: give exactly one of expect and expect_error"
            )),
            (Some(want), None, out) => problems.push(format!(
                "{what}: expected {want}, got {} {}",
                out.label(),
                out.to_json()
            )),
            (None, Some(code), out) => problems.push(format!(
                "{what}: expected error {code}, got {} {}",
                out.label(),
                out.to_json()
            )),
        }
    }
    for r in &fx.resources {
        match orch.read_resource(&scope, &r.uri) {
            Ok(body) if body.text.as_deref() == Some(r.expect.as_str()) => {}
            Ok(body) => problems.push(format!(
                "resource {}: expected {:?}, got {body:?}",
                r.uri, r.expect
            )),
            Err(e) => problems.push(format!("resource {}: {e}", r.uri)),
        }
    }
    let summary = format!(
        "{} tools and {} resources of {} round-trip ({} tool fixtures)",
        surface.tools.len(),
        surface.resources.len(),
        fx.workspace.display(),
        fx.tools.len()
    );
    Ok((summary, problems))
}

/// JSON equality where numbers compare by value (`3` equals `3.0`).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// AgentSkills compliance: every skill directory under `dir` has a valid `SKILL.md` in the
/// agentskills.io format proper (YAML front matter: bundled skills must work in other agents
/// too; installs also accept the Vox TOML variant), non-empty instructions, and a tool list
/// whose `vox_*` names (and prefixes) exist in the static catalog.
pub fn agentskills_compliance(dir: &Path, json_out: bool) -> Result<ExitCode> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the skills directory {}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    let mut problems = Vec::new();
    if dirs.is_empty() {
        problems.push(format!("{} holds no skills", dir.display()));
    }
    for d in &dirs {
        let skill = match vox_skills::store::load_dir(d, vox_skills::Origin::Workspace) {
            Ok(s) => s,
            Err(e) => {
                problems.extend(e.problems.iter().map(|p| format!("{}: {p}", e.path)));
                continue;
            }
        };
        let file = d.join("SKILL.md");
        if skill.manifest.format != vox_skills::FrontMatterFormat::Yaml {
            problems.push(format!(
                "{}: bundled skills use YAML front matter (`---`), the agentskills.io format",
                file.display()
            ));
        }
        if skill.manifest.body.trim().is_empty() {
            problems.push(format!(
                "{}: the instructions (the body after the front matter) are empty",
                file.display()
            ));
        }
        for t in &skill.manifest.tools {
            let known = match t.strip_suffix('*') {
                Some(prefix) => TOOL_REGISTRY.iter().any(|e| e.name.starts_with(prefix)),
                None => vox_mcp_registry::tool_by_name(t).is_some(),
            };
            if t.starts_with("vox_") && !known {
                problems.push(format!(
                    "{}: tool {t} is not in the static catalog",
                    file.display()
                ));
            }
        }
        // The same tree limits install applies (no symlinks, file count, size, depth).
        if let Err(e) = vox_skills::store::tree_files(d) {
            problems.push(format!("{}: {e}", d.display()));
        }
    }
    let summary = format!("{} skills in {} checked", dirs.len(), dir.display());
    finish("agentskills-compliance", summary, problems, json_out)
}
