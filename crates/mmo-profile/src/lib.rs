//! codex-mmo generation-8 profile packs: loading, the schema, the route/model catalog, Tool MCP
//! grants, the compiler's ceilings, content-addressed snapshots, and the install store.

pub mod catalog;
pub mod ceilings;
pub mod consent;
pub mod diag;
pub mod locate;
pub mod model;
pub mod pack;
pub mod parse;
pub mod snapshot;
pub mod strict;
pub mod toolmcp;
pub mod validate;

pub use diag::{Diagnostic, Rejected};
pub use model::{PACKAGE_VERSION, SCHEMA_VERSION};
pub mod compile;
pub mod store;
