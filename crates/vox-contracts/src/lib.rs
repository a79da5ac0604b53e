//! Types, loaders and validation for the `contracts/` directory: the tool catalog, the
//! subsystems with their boot order, the capability-profile manifests and the bundle catalog.
//!
//! The registry's build script calls [`compile`] and turns the result into static tables; CI
//! gates and tests call the same function, so there is one reading of the contracts.

mod compile;
mod model;

pub use compile::{
    CompiledProfile, CompiledRegistry, CompiledTool, Warning, compile, load_and_compile,
    read_role_always_denied,
};
pub use model::*;

use std::path::{Path, PathBuf};

/// An error reading or validating a contract, naming the file and the entry at fault.
#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    /// A contract file or directory could not be read.
    #[error("{path}: cannot read: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file is not valid YAML (or TOML) for its schema, unknown keys included.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column when it has them.
        message: String,
    },
    /// A file parses but breaks a rule across the contracts (an unknown tool, subsystem,
    /// dependency cycle, exposure above the profile's maximum, ...).
    #[error("{path}: {entry}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The entry at fault, e.g. a tool name or "requires".
        entry: String,
        /// What is wrong with it.
        message: String,
    },
}

fn read(path: &Path) -> Result<String, ContractError> {
    std::fs::read_to_string(path).map_err(|source| ContractError::Io {
        path: path.to_owned(),
        source,
    })
}

fn parse_yaml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ContractError> {
    serde_norway::from_str(&read(path)?).map_err(|e| ContractError::Parse {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// Reads `operations/catalog.v1.yaml`.
pub fn load_catalog(contracts: &Path) -> Result<Catalog, ContractError> {
    parse_yaml(&contracts.join("operations/catalog.v1.yaml"))
}

/// Reads `subsystems.v1.yaml`.
pub fn load_subsystems(contracts: &Path) -> Result<Subsystems, ContractError> {
    parse_yaml(&contracts.join("subsystems.v1.yaml"))
}

/// Reads every `profiles/<id>.v1.yaml`, sorted by file name, with the path of each.
pub fn load_profiles(contracts: &Path) -> Result<Vec<(PathBuf, ProfileManifest)>, ContractError> {
    let dir = contracts.join("profiles");
    let entries = std::fs::read_dir(&dir).map_err(|source| ContractError::Io {
        path: dir.clone(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".v1.yaml"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let m: ProfileManifest = parse_yaml(&p)?;
            Ok((p, m))
        })
        .collect()
}

/// Parses one profile manifest's text (strict: unknown keys are errors).
pub fn parse_profile_manifest(text: &str) -> Result<ProfileManifest, String> {
    serde_norway::from_str(text).map_err(|e| e.to_string())
}

/// Reads `bundles/catalog.toml`.
pub fn load_bundles(contracts: &Path) -> Result<BundleCatalog, ContractError> {
    let path = contracts.join("bundles/catalog.toml");
    parse_bundles(&read(&path)?).map_err(|message| ContractError::Parse { path, message })
}

/// Parses the bundle catalog text (strict: unknown keys are errors).
pub fn parse_bundles(text: &str) -> Result<BundleCatalog, String> {
    toml::from_str(text).map_err(|e| e.to_string())
}
