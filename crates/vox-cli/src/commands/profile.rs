//! `vox profile …`: the capability profiles this build knows, read from the registry (no daemon).

use anyhow::Result;
use serde_json::{Value, json};
use std::process::ExitCode;
use vox_cli::args::ProfileCommand;
use vox_mcp_registry::{PROFILES, ProfileSet, subsystem_names};

/// Runs `vox profile list` or `vox profile show`.
pub fn run(cmd: ProfileCommand) -> Result<ExitCode> {
    match cmd {
        ProfileCommand::List { output } => list(output.json),
        ProfileCommand::Show { ids, output } => show(&ids, output.json),
    }
}

/// `dev` first (it is synthesized, not in the manifest), then every manifest profile.
fn list(json: bool) -> Result<ExitCode> {
    let mut rows = vec![
        json!({"id": "dev", "description": "Every tool (synthesized; the default)", "tools": ProfileSet::dev().tools().iter().count(), "max_exposure": "internal"}),
    ];
    for p in &PROFILES {
        let set = ProfileSet::parse(p.id).expect("manifest profiles compose");
        rows.push(json!({"id": p.id, "description": p.description, "tools": set.tools().iter().count(), "max_exposure": p.max_exposure.as_str()}));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        for r in rows {
            println!(
                "{:<18} {:>3} tools  {:<9} {}",
                r["id"].as_str().unwrap_or(""),
                r["tools"],
                r["max_exposure"].as_str().unwrap_or(""),
                r["description"].as_str().unwrap_or("")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The composed profile; exit code 2 when an id is unknown, as for `--profile` elsewhere.
fn show(ids: &str, json: bool) -> Result<ExitCode> {
    let p = match ProfileSet::parse(ids) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: profile_unknown: {e} (from the argument of `vox profile show`)");
            return Ok(ExitCode::from(2));
        }
    };
    let v = profile_json(&p);
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("profile:           {}", p.canonical());
        println!("max exposure:      {}", p.max_exposure().as_str());
        println!(
            "requires:          {}",
            subsystem_names(p.requires_mask()).join(", ")
        );
        println!(
            "subsystem closure: {}",
            subsystem_names(p.closure_mask()).join(", ")
        );
        println!("tools ({}):", p.tools().iter().count());
        for t in p.tools().iter() {
            println!(
                "  {:<26} {:<10} {:<9} {}",
                t.name,
                t.lane,
                t.exposure.as_str(),
                t.side_effect_class.as_str()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn profile_json(p: &ProfileSet) -> Value {
    json!({
        "profile": p.canonical(),
        "ids": p.ids(),
        "max_exposure": p.max_exposure().as_str(),
        "requires": subsystem_names(p.requires_mask()),
        "subsystem_closure": subsystem_names(p.closure_mask()),
        "tools": p.tools().iter().map(|t| json!({
            "name": t.name, "lane": t.lane, "exposure": t.exposure.as_str(),
            "side_effect_class": t.side_effect_class.as_str(), "requires": t.requires,
        })).collect::<Vec<_>>(),
    })
}
