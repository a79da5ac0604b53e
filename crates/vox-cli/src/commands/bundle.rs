//! `vox bundle …`: the plugin bundles of the catalog compiled into the binary, and applying
//! one's profile to the user config.

use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::process::ExitCode;
use vox_cli::args::BundleCommand;
use vox_cli::config;
use vox_mcp_registry::ProfileSet;

/// The catalog ships inside the binary, so `vox bundle` works without a checkout.
const BUNDLES: &str = include_str!("../../../../contracts/bundles/catalog.toml");

/// Runs `vox bundle list` or `vox bundle apply`; a catalog that does not parse is an error.
pub fn run(cmd: BundleCommand) -> Result<ExitCode> {
    let catalog = vox_contracts::parse_bundles(BUNDLES)
        .map_err(|e| anyhow::anyhow!("bundle catalog: {e}"))?;
    match cmd {
        BundleCommand::List { output } => {
            if output.json {
                let rows: Vec<Value> = catalog.bundles.iter().map(|(id, b)| json!({"id": id, "profile": b.profile, "description": b.description})).collect();
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for (id, b) in &catalog.bundles {
                    println!(
                        "{:<16} {:<30} {}",
                        id,
                        b.profile.as_deref().unwrap_or("(leaves profile alone)"),
                        b.description
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        BundleCommand::Apply { bundle } => {
            let Some(b) = catalog.bundles.get(&bundle) else {
                let known: Vec<&str> = catalog.bundles.keys().map(String::as_str).collect();
                bail!("unknown bundle `{bundle}` (known: {})", known.join(", "));
            };
            match &b.profile {
                Some(spec) => {
                    let p = ProfileSet::parse(spec)
                        .map_err(|e| anyhow::anyhow!("bundle {bundle}: {e}"))?;
                    let path = config::write_profile(p.canonical())?;
                    println!(
                        "{bundle}: VOX_PROFILE = \"{}\" written to {}",
                        p.canonical(),
                        path.display()
                    );
                }
                None => println!(
                    "{bundle}: declares no profile; {} left unchanged",
                    config::config_path().display()
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
