//! vox's tool families, one module each: its state (put into the `Ctx` by its boot step),
//! its boot steps (registered against the contract's `BootStep`s), its handlers and, where it
//! needs them, hooks into the call path. Adding a family is its module, its catalog rows and
//! one line in [`families`].

mod agents;
pub mod approvals;
pub mod attention;
mod attention_state;
mod boot_report;
mod clarifications;
mod fleet;
mod lang;
mod locks;
mod memory;
mod mesh;
mod models;
mod orchestration;
mod placeholders;
mod plans;
#[cfg(feature = "news-publish")]
mod publish;
mod repo;
mod research;
pub mod search;
mod sessions;
mod skills;
mod skills_state;
pub mod store;
mod tasks;
mod workspace;
pub mod workspace_tools;

pub use agents::{TOKEN_PREFIX, agent_of_token};
pub use attention_state::{Attention, estimate_tokens};
pub use skills_state::Skills;

use vox_core::{Family, ToolError};

/// Every family of this build. The core checks that together they cover every catalog row and
/// every contract boot step exactly once.
pub fn families() -> Vec<Family> {
    vec![
        store::family(),
        search::family(),
        memory::family(),
        sessions::family(),
        attention::family(),
        boot_report::family(),
        repo::family(),
        lang::family(),
        workspace::family(),
        skills::family(),
        agents::family(),
        tasks::family(),
        locks::family(),
        plans::family(),
        clarifications::family(),
        approvals::family(),
        models::family(),
        research::family(),
        mesh::family(),
        placeholders::family(),
    ]
}

/// A relative path of plain names only (no root, no `.` or `..`): it stays under the directory
/// it is joined to, symlinks aside.
fn is_plain_relative(p: &std::path::Path) -> bool {
    !p.as_os_str().is_empty()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Checks a bounded, non-empty string argument.
fn bounded(name: &str, v: &str, max: usize) -> Result<(), ToolError> {
    if v.trim().is_empty() {
        return Err(ToolError::invalid_arguments(format!(
            "`{name}` must not be empty"
        )));
    }
    if v.len() > max {
        return Err(ToolError::invalid_arguments(format!(
            "`{name}` is {} bytes; the limit is {max}",
            v.len()
        )));
    }
    Ok(())
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
