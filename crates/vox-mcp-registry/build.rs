//! Compiles contracts/ (catalog, subsystems, profiles) into static tables. Any contract error
//! fails the build with a message naming the file and the entry.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let contracts = manifest.join("../../contracts");
    for rel in [
        "operations/catalog.v1.yaml",
        "subsystems.v1.yaml",
        "profiles",
    ] {
        println!("cargo:rerun-if-changed={}", contracts.join(rel).display());
    }
    if let Ok(dir) = std::fs::read_dir(contracts.join("profiles")) {
        for e in dir.flatten() {
            println!("cargo:rerun-if-changed={}", e.path().display());
        }
    }
    let feature_enabled = |f: &str| {
        let var = format!("CARGO_FEATURE_{}", f.to_uppercase().replace('-', "_"));
        std::env::var_os(var).is_some()
    };
    let reg = match vox_contracts::load_and_compile(&contracts, &feature_enabled) {
        Ok(reg) => reg,
        Err(e) => {
            eprintln!("error: contracts: {e}");
            std::process::exit(1);
        }
    };
    for w in &reg.warnings {
        println!("cargo:warning=contracts: {w}");
    }

    let mut out = String::new();
    let words = reg.tools.len().div_ceil(64).max(1);
    writeln!(out, "/// Number of `u64` words in a [`ToolSet`].").unwrap();
    writeln!(out, "pub const TOOL_WORDS: usize = {words};").unwrap();
    writeln!(
        out,
        "/// Every catalog tool, sorted by name; `index` is the position."
    )
    .unwrap();
    writeln!(
        out,
        "pub static TOOL_REGISTRY: [ToolEntry; {}] = [",
        reg.tools.len()
    )
    .unwrap();
    for (i, t) in reg.tools.iter().enumerate() {
        let r = &t.row;
        writeln!(
            out,
            "  ToolEntry {{ index: {i}, name: {:?}, title: {:?}, description: {:?}, lane: {:?}, requires: &{:?}, requires_mask: {}, exposure: Exposure::{:?}, side_effect_class: SideEffectClass::{:?}, http_read_role_eligible: {}, read_role_always_denied: {}, feature: {:?}, built: {} }},",
            r.name, r.title, r.description, r.lane, r.requires, t.requires_mask, r.exposure,
            r.side_effect_class, r.http_read_role_eligible,
            vox_contracts::read_role_always_denied(&r.name), r.feature, t.built
        )
        .unwrap();
    }
    writeln!(out, "];").unwrap();

    // A generated `match` compiles to a switch on length and a few compares: faster than a
    // binary search over names that all share the `vox_` prefix.
    writeln!(out, "/// The index of a catalog tool by exact name.").unwrap();
    writeln!(
        out,
        "#[inline]\npub fn tool_index(name: &str) -> Option<usize> {{\n  match name {{"
    )
    .unwrap();
    for (i, t) in reg.tools.iter().enumerate() {
        writeln!(out, "    {:?} => Some({i}),", t.row.name).unwrap();
    }
    writeln!(out, "    _ => None,\n  }}\n}}").unwrap();

    writeln!(
        out,
        "/// Every subsystem in contract order; a subsystem's bit is its position."
    )
    .unwrap();
    writeln!(
        out,
        "pub static SUBSYSTEMS: [SubsystemEntry; {}] = [",
        reg.subsystems.len()
    )
    .unwrap();
    let bit = |id: &str| reg.subsystems.iter().position(|s| s.id == id).unwrap();
    for s in &reg.subsystems {
        let deps: u32 = s.depends_on.iter().map(|d| 1u32 << bit(d)).sum();
        writeln!(
            out,
            "  SubsystemEntry {{ id: {:?}, description: {:?}, depends_mask: {deps}, boot_steps: &{:?} }},",
            s.id, s.description, s.boot_steps
        )
        .unwrap();
    }
    writeln!(out, "];").unwrap();

    writeln!(
        out,
        "/// Boot steps in the fixed order, with their subsystem's index."
    )
    .unwrap();
    writeln!(
        out,
        "pub static BOOT_STEPS: [BootStepEntry; {}] = [",
        reg.boot_steps.len()
    )
    .unwrap();
    for (name, owner) in &reg.boot_steps {
        writeln!(
            out,
            "  BootStepEntry {{ name: {name:?}, subsystem: {owner} }},"
        )
        .unwrap();
    }
    writeln!(out, "];").unwrap();

    writeln!(
        out,
        "/// Every manifest profile, sorted by id (`dev` is synthesized)."
    )
    .unwrap();
    writeln!(
        out,
        "pub static PROFILES: [ProfileEntry; {}] = [",
        reg.profiles.len()
    )
    .unwrap();
    for p in &reg.profiles {
        let mut set = vec![0u64; words];
        for &i in &p.tools {
            set[i / 64] |= 1 << (i % 64);
        }
        let rel = p.path.strip_prefix(&contracts).unwrap_or(&p.path);
        writeln!(
            out,
            "  ProfileEntry {{ id: {:?}, description: {:?}, manifest: {:?}, tools: ToolSet({set:?}), requires_mask: {}, closure_mask: {}, max_exposure: Exposure::{:?}, axis_surfaces: &{:?} }},",
            p.id, p.description, format!("contracts/{}", rel.display()), p.requires_mask, p.closure_mask, p.max_exposure, p.axis_surfaces
        )
        .unwrap();
    }
    writeln!(out, "];").unwrap();

    // Typed names for subsystems and boot steps: a family registering a step that the
    // contract does not have fails to compile.
    let camel = |id: &str| -> String {
        id.split('_')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect()
    };
    // Each variant is documented by its contract entry: a subsystem by its description, a boot
    // step by the subsystem it belongs to.
    let subsystems: Vec<(String, String)> = reg
        .subsystems
        .iter()
        .map(|s| {
            (
                camel(&s.id),
                format!("`{}`: {}", s.id, s.description.replace('\n', " ")),
            )
        })
        .collect();
    let steps: Vec<(String, String)> = reg
        .boot_steps
        .iter()
        .map(|(n, sub)| {
            let owner = &reg.subsystems[*sub].id;
            (
                camel(n),
                format!("`{n}`, a boot step of the `{owner}` subsystem."),
            )
        })
        .collect();
    write_index_enum(
        &mut out,
        "SubsystemId",
        "A subsystem of `contracts/subsystems.v1.yaml`; its discriminant is its index in [`SUBSYSTEMS`].",
        &subsystems,
    );
    write_index_enum(
        &mut out,
        "BootStep",
        "A boot step of `contracts/subsystems.v1.yaml`; its discriminant is its index in [`BOOT_STEPS`].",
        &steps,
    );

    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("registry_gen.rs");
    std::fs::write(dest, out).unwrap();
}

/// `pub enum <name> { V0 = 0, ... }` with `ALL`, the variants (name, doc) in order.
fn write_index_enum(out: &mut String, name: &str, doc: &str, variants: &[(String, String)]) {
    writeln!(
        out,
        "/// {doc}\n#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\npub enum {name} {{"
    )
    .unwrap();
    for (i, (v, doc)) in variants.iter().enumerate() {
        writeln!(out, "  /// {doc}\n  {v} = {i},").unwrap();
    }
    let all: Vec<String> = variants
        .iter()
        .map(|(v, _)| format!("{name}::{v}"))
        .collect();
    writeln!(
        out,
        "}}\nimpl {name} {{\n  /// Every variant, in contract order.\n  pub const ALL: [{name}; {}] = [{}];\n}}",
        variants.len(),
        all.join(", ")
    )
    .unwrap();
}
