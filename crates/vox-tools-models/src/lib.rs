//! vox's model families: `models` (the `model_registry`, `routing_preferences` and
//! `llm_facade` steps, the model tools, chat through the facade) and `research` (evidence, a
//! model's claims, citations checked before a claim is kept), with `publish` (feature
//! `news-publish`: a person's approval of a draft, publishing it to a destination).

pub mod models;
#[cfg(feature = "news-publish")]
mod publish;
mod research;

use vox_core::Family;

/// This crate's families, in the order `vox_tools::families()` assembles them.
pub fn families() -> Vec<Family> {
    vec![models::family(), research::family()]
}
