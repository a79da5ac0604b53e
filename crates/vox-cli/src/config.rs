//! Profile selection: `--profile` > `VOX_PROFILE` > `~/.vox/config.toml` > `dev`, and the user
//! config file that `vox bundle apply` writes.

use std::path::PathBuf;
use vox_mcp_registry::{ProfileError, ProfileSet};

/// Where a profile choice came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag,
    Env,
    Config(PathBuf),
    Default,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag => write!(f, "--profile"),
            Source::Env => write!(f, "VOX_PROFILE"),
            Source::Config(p) => write!(f, "{}", p.display()),
            Source::Default => write!(f, "default"),
        }
    }
}

/// A profile-selection failure.
#[derive(Debug)]
pub enum SelectError {
    /// `profile_unknown` (HTTP 400 on the gateway).
    Unknown { source: Source, error: ProfileError },
    /// The config file exists but cannot be used.
    Config { path: PathBuf, message: String },
}

impl std::error::Error for SelectError {}

impl std::fmt::Display for SelectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SelectError::Unknown { source, error } => {
                write!(f, "profile_unknown: {error} (from {source})")
            }
            SelectError::Config { path, message } => write!(f, "{}: {message}", path.display()),
        }
    }
}

/// `~/.vox` (or `VOX_HOME`).
pub fn vox_home() -> PathBuf {
    if let Some(h) = std::env::var_os("VOX_HOME") {
        return h.into();
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join(".vox")
}

/// `~/.vox/config.toml`.
pub fn config_path() -> PathBuf {
    vox_home().join("config.toml")
}

/// Reads the config file as a TOML table; a missing file is an empty table.
pub fn read_config() -> Result<toml::Table, SelectError> {
    let path = config_path();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(toml::Table::new()),
        Err(e) => {
            return Err(SelectError::Config {
                path,
                message: e.to_string(),
            });
        }
    };
    text.parse::<toml::Table>()
        .map_err(|e| SelectError::Config {
            path,
            message: format!("not valid TOML: {e}"),
        })
}

/// Applies the precedence rule and composes the profile.
pub fn select_profile(flag: Option<&str>) -> Result<(ProfileSet, Source), SelectError> {
    let (spec, source) = if let Some(f) = flag {
        (f.to_owned(), Source::Flag)
    } else if let Ok(e) = std::env::var("VOX_PROFILE") {
        (e, Source::Env)
    } else {
        let table = read_config()?;
        match table.get("VOX_PROFILE") {
            Some(toml::Value::String(s)) => (s.clone(), Source::Config(config_path())),
            Some(other) => {
                return Err(SelectError::Config {
                    path: config_path(),
                    message: format!("VOX_PROFILE must be a string, found {}", other.type_str()),
                });
            }
            None => ("dev".to_owned(), Source::Default),
        }
    };
    let set = ProfileSet::parse(&spec).map_err(|error| SelectError::Unknown {
        source: source.clone(),
        error,
    })?;
    Ok((set, source))
}

/// Sets `VOX_PROFILE` in the config file, keeping every other key.
pub fn write_profile(canonical: &str) -> Result<PathBuf, SelectError> {
    let mut table = read_config()?;
    table.insert(
        "VOX_PROFILE".into(),
        toml::Value::String(canonical.to_owned()),
    );
    let path = config_path();
    let err = |e: std::io::Error| SelectError::Config {
        path: path.clone(),
        message: e.to_string(),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, toml::to_string(&table).unwrap_or_default()).map_err(err)?;
    std::fs::rename(&tmp, &path).map_err(err)?;
    Ok(path)
}
