//! `codex-mmo`: install, validate and compile generation-8 profile packs into snapshots.

use clap::{Parser, Subcommand};
use mmo_profile::catalog::{self, Catalog};
use mmo_profile::store::{Dirs, Store};
use mmo_profile::{Rejected, diag::Diagnostic};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

mod runtime_cmd;
mod smoke;

#[derive(Parser)]
#[command(
    name = "codex-mmo",
    version,
    about = "Profile packs for teams of coding agents (MMO generation 8)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Top,
}

#[derive(Subcommand)]
enum Top {
    /// Install, validate, compile and select profile packs.
    #[command(subcommand)]
    Profile(ProfileCmd),
    /// Inspect the generation-8 route/model catalog.
    #[command(subcommand)]
    Catalog(CatalogCmd),
    /// Check output contracts and validate results against them.
    #[command(subcommand)]
    Contract(ContractCmd),
    #[command(flatten)]
    Runtime(runtime_cmd::RuntimeCmd),
}

#[derive(Subcommand)]
enum ContractCmd {
    /// Check that a contract uses only the supported JSON Schema subset.
    Check {
        contract: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Validate a JSON result against a contract.
    Validate {
        contract: PathBuf,
        instance: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Print the strict outputSchema projection Codex receives for a contract.
    Project { contract: PathBuf },
}

#[derive(Subcommand)]
enum ProfileCmd {
    /// Install a pack directory (identical content is a no-op).
    Install {
        dir: PathBuf,
        /// Swap in different content for an installed id.
        #[arg(long)]
        replace: bool,
        #[arg(long)]
        json: bool,
    },
    /// Validate an installed id or a pack directory; lists every problem.
    Validate {
        target: String,
        #[arg(long)]
        json: bool,
    },
    /// Compile into a content-addressed snapshot and print its address.
    Compile {
        target: String,
        /// Rebind a role to another exact catalog key: `role=route__model`.
        #[arg(long = "bind", value_name = "ROLE=KEY", value_parser = parse_bind)]
        binds: Vec<(String, String)>,
        #[arg(long)]
        json: bool,
    },
    /// Make an installed profile the active one (compiles it).
    Use {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// List installed profiles.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show an installed profile, resolved.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Remove an installed profile.
    Uninstall {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum CatalogCmd {
    /// List model keys (built-in, or overlaid by a pack's catalog.toml).
    List {
        /// An installed id or pack directory whose catalog.toml overlays the built-in catalog.
        #[arg(long)]
        profile: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show one model key with its route and resource group.
    Show {
        key: String,
        #[arg(long)]
        profile: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn parse_bind(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((r, k)) if !r.is_empty() && !k.is_empty() => Ok((r.to_string(), k.to_string())),
        _ => Err(format!("`{s}` is not ROLE=KEY")),
    }
}

/// A command's result: JSON for `--json`, text otherwise. Warnings (refused records the
/// command went past) go to stderr in text mode; `--json` carries them as `warnings`.
struct Out {
    json: Value,
    text: String,
    warnings: Vec<Diagnostic>,
}

impl Out {
    fn new(text: String, json: Value) -> Out {
        Out {
            json,
            text,
            warnings: Vec::new(),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let cli = match cli.cmd {
        Top::Runtime(cmd) => return runtime_cmd::main(cmd),
        cmd => Cli { cmd },
    };
    let want_json = match &cli.cmd {
        Top::Profile(
            ProfileCmd::Install { json, .. }
            | ProfileCmd::Validate { json, .. }
            | ProfileCmd::Compile { json, .. }
            | ProfileCmd::Use { json, .. }
            | ProfileCmd::List { json }
            | ProfileCmd::Show { json, .. }
            | ProfileCmd::Uninstall { json, .. },
        ) => *json,
        Top::Catalog(CatalogCmd::List { json, .. } | CatalogCmd::Show { json, .. }) => *json,
        Top::Contract(ContractCmd::Check { json, .. } | ContractCmd::Validate { json, .. }) => {
            *json
        }
        // The projection is JSON already.
        Top::Contract(ContractCmd::Project { .. }) => false,
        Top::Runtime(_) => unreachable!("runtime commands returned above"),
    };
    match run(cli) {
        Ok(out) => {
            if want_json {
                emit(&serde_json::to_string_pretty(&out.json).unwrap_or_default());
            } else {
                let mut text = String::new();
                for w in &out.warnings {
                    text.push_str(&format!("warning: {w}\n"));
                }
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
                emit(out.text.trim_end());
            }
            ExitCode::SUCCESS
        }
        Err(Rejected(problems)) => {
            if want_json {
                let v = json!({ "ok": false, "problems": problems });
                emit(&serde_json::to_string_pretty(&v).unwrap_or_default());
            } else {
                let mut text = format!("error: {} problem(s)\n", problems.len());
                for p in &problems {
                    text.push_str(&format!("  {p}\n"));
                }
                // A closed stderr must not turn a rejection into a panic.
                let _ = std::io::stderr().lock().write_all(text.as_bytes());
            }
            ExitCode::from(1)
        }
    }
}

/// Print to stdout; a closed pipe (`codex-mmo catalog list | head`) ends output quietly
/// instead of panicking like `println!` would.
fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|_| out.flush());
}

fn store() -> Result<Store, Rejected> {
    Ok(Store::new(Dirs::from_env()?))
}

fn catalog_for(store: &Store, profile: Option<&str>) -> Result<Catalog, Rejected> {
    let Some(target) = profile else {
        return Ok(Catalog::builtin());
    };
    let pack = store.load_target(target)?;
    let fragment = pack.text("catalog.toml").map(|t| ("catalog.toml", t));
    catalog::resolve(fragment)
}

fn problems_json(p: &[Diagnostic]) -> Value {
    serde_json::to_value(p).unwrap_or(Value::Null)
}

fn run(cli: Cli) -> Result<Out, Rejected> {
    let st = store()?;
    match cli.cmd {
        Top::Profile(cmd) => match cmd {
            ProfileCmd::Install { dir, replace, .. } => {
                let o = st.install(&dir, replace)?;
                let mut text = format!("{} {} ({})", o.action, o.profile_id, o.content_sha256);
                if let (Some(snap), Some(false)) = (&o.active_snapshot, o.active_snapshot_current) {
                    text.push_str(&format!(
                        "\nnote: the active snapshot is still {snap}, compiled from the content this install replaced; run `codex-mmo profile use {}` to select the new content",
                        o.profile_id
                    ));
                }
                let mut j = json!({ "ok": true, "profile_id": o.profile_id, "content_sha256": o.content_sha256, "action": o.action, "warnings": o.warnings });
                if let Value::Object(m) = &mut j
                    && let Some(snap) = &o.active_snapshot
                {
                    m.insert("active_snapshot".into(), json!(snap));
                    m.insert(
                        "active_snapshot_current".into(),
                        json!(o.active_snapshot_current),
                    );
                }
                Ok(Out {
                    text,
                    json: j,
                    warnings: o.warnings,
                })
            }
            ProfileCmd::Validate { target, .. } => {
                let pack = st.load_target(&target)?;
                let v = st.validate(&pack, &[])?;
                Ok(Out::new(
                    format!(
                        "{} is valid ({} roles)",
                        v.profile.id,
                        v.profile.agents.len()
                    ),
                    json!({ "ok": true, "profile_id": v.profile.id, "roles": v.profile.agents.keys().collect::<Vec<_>>(), "problems": problems_json(&[]) }),
                ))
            }
            ProfileCmd::Compile { target, binds, .. } => {
                let r = st.compile(&target, &binds)?;
                let path = st.dirs.snapshot_dir(&r.address);
                let mut j = serde_json::to_value(&r).unwrap_or(Value::Null);
                if let Value::Object(m) = &mut j {
                    m.insert("ok".into(), Value::Bool(true));
                    m.insert(
                        "snapshot_dir".into(),
                        Value::String(path.display().to_string()),
                    );
                }
                Ok(Out::new(r.address.clone(), j))
            }
            ProfileCmd::Use { id, .. } => {
                let a = st.use_profile(&id)?;
                Ok(Out::new(
                    format!("using {} ({})", a.profile_id, a.snapshot),
                    json!({ "ok": true, "profile_id": a.profile_id, "snapshot": a.snapshot }),
                ))
            }
            ProfileCmd::List { .. } => {
                let listing = st.list()?;
                let list = listing.profiles;
                let active = listing.active.map(|a| a.profile_id);
                let mut text = String::new();
                for r in &list {
                    let mark = if active.as_deref() == Some(r.profile_id.as_str()) {
                        "*"
                    } else {
                        " "
                    };
                    text.push_str(&format!("{mark} {}  {}\n", r.profile_id, r.content_sha256));
                }
                if list.is_empty() {
                    text.push_str("no profiles installed\n");
                }
                Ok(Out {
                    text,
                    json: json!({ "ok": true, "active": active, "profiles": list, "warnings": listing.warnings }),
                    warnings: listing.warnings,
                })
            }
            ProfileCmd::Show { id, .. } => {
                let Some((record, dir)) = st.record(&id)? else {
                    return Err(Rejected::one(
                        "<store>",
                        id.clone(),
                        "profile_not_installed",
                        format!("no installed profile `{id}`"),
                    ));
                };
                let pack = mmo_profile::pack::Pack::load(&dir)?;
                let v = st.validate(&pack, &[])?;
                let mut text = format!(
                    "{} — {}\n{}\nversion {}  maturity {}  root {}\n",
                    v.profile.id,
                    v.profile.display_name,
                    v.profile.description,
                    v.profile.version,
                    v.profile.maturity,
                    v.profile.root
                );
                for (name, a) in &v.profile.agents {
                    text.push_str(&format!(
                        "  {name:<24} {:<12} {} ({})\n",
                        a.kind,
                        a.model,
                        a.backends.join("+")
                    ));
                }
                Ok(Out::new(
                    text,
                    json!({ "ok": true, "record": record, "profile": v.profile, "ceilings": v.ceilings }),
                ))
            }
            ProfileCmd::Uninstall { id, .. } => {
                let r = st.uninstall(&id)?;
                Ok(Out {
                    text: format!("uninstalled {}", r.profile_id),
                    json: json!({ "ok": true, "profile_id": r.profile_id, "warnings": r.warnings }),
                    warnings: r.warnings,
                })
            }
        },
        Top::Contract(cmd) => run_contract(cmd),
        Top::Runtime(_) => unreachable!("runtime commands returned in main"),
        Top::Catalog(cmd) => match cmd {
            CatalogCmd::List { profile, .. } => {
                let c = catalog_for(&st, profile.as_deref())?;
                let mut text = String::new();
                for (k, m) in &c.models {
                    let route = catalog::split_key(k).and_then(|(r, _)| c.routes.get(r));
                    let exec = route.is_some_and(|r| r.executable());
                    text.push_str(&format!(
                        "{k:<56} {}{}\n",
                        m.name,
                        if exec { "" } else { "  (catalog-only)" }
                    ));
                }
                Ok(Out::new(text, json!({ "ok": true, "catalog": c })))
            }
            CatalogCmd::Show { key, profile, .. } => {
                let c = catalog_for(&st, profile.as_deref())?;
                let Some(m) = c.models.get(&key) else {
                    return Err(Rejected::one(
                        "<catalog>",
                        key.clone(),
                        "model_unknown",
                        format!("`{key}` is not a catalog key (exact keys only, no aliases)"),
                    ));
                };
                let route_id = catalog::split_key(&key).map(|(r, _)| r).unwrap_or_default();
                let route = c.routes.get(route_id);
                let group = c.default_group(&key);
                let j = json!({ "ok": true, "key": key, "model": m, "route_id": route_id, "route": route, "resource_group": group.as_ref().and_then(|g| c.resource_groups.get(g)).map(|g| json!({"id": group, "capacity": g.capacity})) });
                let text = serde_json::to_string_pretty(&j).unwrap_or_default();
                Ok(Out::new(text, j))
            }
        },
    }
}

fn read_json_file(path: &std::path::Path) -> Result<Value, Rejected> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| Rejected::one(file.clone(), "", "contract_unreadable", e.to_string()))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Rejected::one(file, "", "contract_json", format!("not JSON: {e}")))
}

fn load_contract(path: &std::path::Path) -> Result<mmo_contract::Contract, Rejected> {
    let schema = read_json_file(path)?;
    mmo_contract::Contract::new(schema).map_err(|problems| {
        let mut d = mmo_profile::diag::Diags::default();
        for p in problems {
            d.push(path.display().to_string(), p.pointer, p.rule, p.message);
        }
        Rejected(d.into_sorted())
    })
}

fn run_contract(cmd: ContractCmd) -> Result<Out, Rejected> {
    match cmd {
        ContractCmd::Check { contract, .. } => {
            load_contract(&contract)?;
            Ok(Out::new(
                format!("{} uses only the supported subset", contract.display()),
                json!({ "ok": true }),
            ))
        }
        ContractCmd::Validate {
            contract, instance, ..
        } => {
            let c = load_contract(&contract)?;
            let v = read_json_file(&instance)?;
            let errors = c.validate(&v);
            if errors.is_empty() {
                return Ok(Out::new(
                    format!("{} satisfies {}", instance.display(), contract.display()),
                    json!({ "ok": true }),
                ));
            }
            let mut d = mmo_profile::diag::Diags::default();
            for e in errors {
                d.push(
                    instance.display().to_string(),
                    e.instance_pointer,
                    e.rule,
                    format!("{} (schema {})", e.message, e.schema_pointer),
                );
            }
            Err(Rejected(d.into_sorted()))
        }
        ContractCmd::Project { contract } => {
            let c = load_contract(&contract)?;
            let projected = mmo_contract::project_output_schema(c.schema());
            let text = serde_json::to_string_pretty(&projected).unwrap_or_default();
            Ok(Out::new(text, projected))
        }
    }
}
