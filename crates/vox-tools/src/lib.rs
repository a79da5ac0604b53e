//! vox's tool families, assembled. Each family is one module of a domain crate: its state (put
//! into the `Ctx` by its boot step), its boot steps (registered against the contract's
//! `BootStep`s), its handlers and, where it needs them, hooks into the call path. The domain
//! crates: `vox-tools-common` (the store, argument checks), `vox-tools-knowledge`,
//! `vox-tools-workspace`, `vox-tools-orchestration`, `vox-tools-models`, `vox-tools-mesh`.
//! Adding a family is its module, its catalog rows and one line in its crate's `families()`.

mod placeholders;

pub use vox_tools_common::store;
pub use vox_tools_knowledge::{Attention, attention, estimate_tokens, search};
pub use vox_tools_orchestration::{TOKEN_PREFIX, agent_of_token, approvals};
pub use vox_tools_workspace::{Skills, workspace_tools};

use vox_core::Family;

/// Every family of this build, in one fixed order (boot hooks and tool providers run in it:
/// workspace tools before skills). The core checks that together they cover every catalog row
/// and every contract boot step exactly once.
pub fn families() -> Vec<Family> {
    [
        vox_tools_common::families(),
        vox_tools_knowledge::families(),
        vox_tools_workspace::families(),
        vox_tools_orchestration::families(),
        vox_tools_models::families(),
        vox_tools_mesh::families(),
        vox_tools_upstream::families(),
        vox_tools_audit::families(),
        vec![placeholders::family()],
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_families_cover_every_catalog_row_and_boot_step_once() {
        if let Err(e) = vox_core::assemble(families()) {
            panic!("{e}");
        }
    }

    #[test]
    fn input_schemas_are_portable_and_every_tool_has_an_object_output_schema() {
        for f in families() {
            for (name, h) in f.handlers {
                let problems = vox_core::family::portability_problems(&h.schema);
                assert!(problems.is_empty(), "{name}: {problems:?} in {}", h.schema);
                let Some(out) = &h.output_schema else {
                    panic!("{name} has no output schema")
                };
                assert_eq!(out["type"], "object", "{name}: {out}");
                let problems: Vec<String> = vox_core::family::portability_problems(out)
                    .into_iter()
                    .filter(|p| p.contains("not an object schema"))
                    .collect();
                assert!(problems.is_empty(), "{name}: {problems:?} in {out}");
                assert!(
                    out.get("$schema").is_none() && out.get("$defs").is_none(),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn handler_schemas_are_plain_object_schemas() {
        for f in families() {
            for (name, h) in f.handlers {
                assert_eq!(h.schema["type"], "object", "{name}");
                assert!(h.schema.get("$schema").is_none(), "{name}");
            }
        }
    }
}
