//! vox's workspace families, one module each: `repo` (read-only git views), `lang` (the
//! compiler subsystem's tools), `workspace` (the compiler step; `.vox` tools as a
//! `DynamicTools` provider, in `workspace_tools`, and the watcher) and `skills` (over
//! `skills_state`: the catalog, `skill://` resources, macro tools, the active skill as a
//! session guard).

mod lang;
mod repo;
mod skills;
mod skills_state;
mod workspace;
pub mod workspace_tools;

pub use skills_state::Skills;

use vox_core::Family;

/// This crate's families, in the order `vox_tools::families()` assembles them.
pub fn families() -> Vec<Family> {
    vec![
        repo::family(),
        lang::family(),
        workspace::family(),
        skills::family(),
    ]
}
