//! Skills for vox: a skill is a directory with a `SKILL.md` (agentskills.io YAML front matter, or
//! the Vox TOML variant) and any files its instructions refer to.
//!
//! - [`manifest`]: parsing and validating `SKILL.md`.
//! - [`store`]: the search roots, the [`Catalog`] of loaded skills with its BM25 index, and the
//!   workspace store that install and uninstall change.

pub mod manifest;
pub mod store;

pub use manifest::{FrontMatterFormat, Manifest, Problem};
pub use store::{Catalog, LoadError, Origin, Roots, SearchHit, Shadowed, Skill, SkillError};
