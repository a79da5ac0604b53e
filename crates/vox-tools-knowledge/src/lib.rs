//! vox's knowledge families, one module each: `search` (the search_index subsystem: kb,
//! workspace search, the memory index), `memory`, `sessions`, `attention` (the ledger as a
//! call observer, over `attention_state`) and `boot_report`.

pub mod attention;
pub mod attention_state;
mod boot_report;
mod memory;
pub mod search;
mod sessions;

pub use attention_state::{Attention, estimate_tokens};

use vox_core::Family;

/// This crate's families, in the order `vox_tools::families()` assembles them.
pub fn families() -> Vec<Family> {
    vec![
        search::family(),
        memory::family(),
        sessions::family(),
        attention::family(),
        boot_report::family(),
    ]
}
