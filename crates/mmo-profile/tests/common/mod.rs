//! Shared helpers: a valid base pack on disk that each test breaks in one place.
#![allow(dead_code)]

use mmo_profile::Rejected;
use mmo_profile::pack::Pack;
use mmo_profile::toolmcp::Registry;
use mmo_profile::validate::{Validated, validate};
use std::fs;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

pub fn base_profile() -> Table {
    fs::read_to_string(fixtures().join("base/profile.toml"))
        .unwrap()
        .parse()
        .unwrap()
}

pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Write the base pack with `profile` as its profile.toml into a fresh directory.
pub fn write_pack(dir: &Path, profile: &Table) {
    copy_dir(&fixtures().join("base"), dir);
    fs::write(dir.join("profile.toml"), toml::to_string(profile).unwrap()).unwrap();
}

pub fn registry() -> Registry {
    Registry::load(&fixtures().join("registry")).unwrap()
}

/// Set a dotted key path, creating tables on the way.
pub fn set(t: &mut Table, path: &str, v: impl Into<Value>) {
    let parts: Vec<&str> = path.split('.').collect();
    let mut cur = t;
    for p in &parts[..parts.len() - 1] {
        cur = cur
            .entry(p.to_string())
            .or_insert_with(|| Value::Table(Table::new()))
            .as_table_mut()
            .unwrap();
    }
    cur.insert(parts[parts.len() - 1].to_string(), v.into());
}

/// Remove a dotted key path.
pub fn remove(t: &mut Table, path: &str) {
    let parts: Vec<&str> = path.split('.').collect();
    let mut cur = t;
    for p in &parts[..parts.len() - 1] {
        cur = cur.get_mut(*p).unwrap().as_table_mut().unwrap();
    }
    cur.remove(parts[parts.len() - 1]);
}

pub fn strs(xs: &[&str]) -> Value {
    Value::Array(xs.iter().map(|s| Value::String(s.to_string())).collect())
}

/// Build the base pack, let `mutate_profile` and `mutate_files` break it, and validate.
pub fn check(
    mutate_profile: impl FnOnce(&mut Table),
    mutate_files: impl FnOnce(&Path),
) -> Result<Validated, Rejected> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pack");
    let mut t = base_profile();
    mutate_profile(&mut t);
    write_pack(&dir, &t);
    mutate_files(&dir);
    let pack = Pack::load(&dir)?;
    validate(
        &pack,
        &registry(),
        &mmo_profile::consent::Consent::default(),
        &[],
    )
}

/// A valid pack with `roles` roles (one root and `roles - 1` leaves spread over three routes),
/// used by the compile benchmark and its test.
pub fn write_wide_pack(dir: &Path, roles: usize) {
    let models = [
        "opencode_go_openai_chat__deepseek_v4_pro",
        "opencode_zen_anthropic_messages__claude_sonnet_5",
        "codex_chatgpt_builtin__gpt_5_6_terra_mini",
    ];
    let mut t = String::from(
        "schema_version = 8\nid = \"wide\"\nversion = \"8.0.0\"\ndisplay_name = \"Wide\"\ndescription = \"Benchmark pack\"\nmaturity = \"lab\"\nroot = \"lead\"\n\n[coordination]\nmax_children_per_agent = 8\n\n[agents.lead]\nkind = \"root\"\nmodel = \"codex_chatgpt_builtin__gpt_5_6_terra\"\ninstructions = \"agents/lead.md\"\n",
    );
    let names: Vec<String> = (1..roles).map(|i| format!("worker_{i:02}")).collect();
    t.push_str(&format!(
        "can_spawn = [{}]\n",
        names
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    for (i, n) in names.iter().enumerate() {
        t.push_str(&format!(
            "\n[agents.lead.controls.{n}]\nactions = [\"inspect\", \"stop\"]\n\n[agents.{n}]\ndescription = \"Worker {i}\"\nmodel = \"{}\"\nallowed_task_kinds = [\"analysis\", \"review\"]\ncontract_enforcement = \"strict\"\noutput_contract = \"contracts/result.json\"\ninstructions = \"agents/worker.md\"\n",
            models[i % models.len()]
        ));
    }
    fs::create_dir_all(dir.join("agents")).unwrap();
    fs::create_dir_all(dir.join("contracts")).unwrap();
    fs::write(dir.join("profile.toml"), t).unwrap();
    fs::write(
        dir.join("agents/lead.md"),
        "Coordinate the workers.\n".repeat(40),
    )
    .unwrap();
    fs::write(
        dir.join("agents/worker.md"),
        "Do the scoped work and report evidence.\n".repeat(40),
    )
    .unwrap();
    fs::write(
        dir.join("contracts/result.json"),
        r#"{"type":"object","additionalProperties":false,"required":["status","evidence"],"properties":{"status":{"enum":["done","blocked"]},"evidence":{"type":"array","items":{"type":"object","required":["command","exit_code"],"properties":{"command":{"type":"string"},"exit_code":{"type":"integer"}}}},"at":{"type":"string","format":"date-time"}}}"#,
    )
    .unwrap();
}
