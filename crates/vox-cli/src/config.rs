//! Profile selection: `--profile` > `VOX_PROFILE` > `~/.vox/config.toml` > `dev`, and the user
//! config file that `vox bundle apply` writes.

use serde::Deserialize;
use std::path::{Path, PathBuf};
use vox_mcp_registry::{ProfileError, ProfileSet};

/// Where a profile choice came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The `--profile` flag.
    Flag,
    /// The `VOX_PROFILE` environment variable.
    Env,
    /// `VOX_PROFILE` in the user config file at this path.
    Config(PathBuf),
    /// None of them: the `dev` profile.
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
    Unknown {
        /// Where the unknown profile was given.
        source: Source,
        /// Which id is unknown (or that the list is empty).
        error: ProfileError,
    },
    /// The config file exists but cannot be used; `line` is 1-based.
    Config {
        /// The config file.
        path: PathBuf,
        /// The line at fault, when the parser knows it.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
}

impl std::error::Error for SelectError {}

impl std::fmt::Display for SelectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SelectError::Unknown { source, error } => {
                write!(f, "profile_unknown: {error} (from {source})")
            }
            SelectError::Config {
                path,
                line: Some(line),
                message,
            } => write!(f, "{}:{line}: {message}", path.display()),
            SelectError::Config {
                path,
                line: None,
                message,
            } => write!(f, "{}: {message}", path.display()),
        }
    }
}

/// The user config file. Every key is known and typed: a misspelt key is an error, never a
/// silent default.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// The default capability profile (below `--profile` and `VOX_PROFILE`).
    #[serde(rename = "VOX_PROFILE", default)]
    pub profile: Option<String>,
}

/// The keys of [`UserConfig`], for error messages.
pub const KNOWN_KEYS: &[&str] = &["VOX_PROFILE"];

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

/// The config file's text; a missing file is `None`.
fn read_config_text(path: &Path) -> Result<Option<String>, SelectError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SelectError::Config {
            path: path.to_owned(),
            line: None,
            message: e.to_string(),
        }),
    }
}

/// Reads and checks the config file; a missing file is the empty config.
pub fn read_config() -> Result<UserConfig, SelectError> {
    let path = config_path();
    match read_config_text(&path)? {
        Some(text) => parse_config(&path, &text),
        None => Ok(UserConfig::default()),
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Parses the config text of `path`: a syntax error, an unknown key or a value of the wrong
/// type is reported with the line and the key.
pub fn parse_config(path: &Path, text: &str) -> Result<UserConfig, SelectError> {
    let fail = |line: Option<usize>, message: String| SelectError::Config {
        path: path.to_owned(),
        line,
        message,
    };
    // The spanned tree says which key an error belongs to; the typed struct says what is allowed.
    let tree = toml::de::DeTable::parse(text).map_err(|e| {
        fail(
            e.span().map(|s| line_of(text, s.start)),
            format!("not valid TOML: {e}"),
        )
    })?;
    toml::from_str::<UserConfig>(text).map_err(|e| {
        let span = e.span();
        let key = span.as_ref().and_then(|s| {
            tree.get_ref().iter().find_map(|(k, v)| {
                let within = |r: std::ops::Range<usize>| r.start <= s.start && s.start < r.end;
                (within(k.span()) || within(v.span())).then(|| k.get_ref().to_string())
            })
        });
        let line = span.map(|s| line_of(text, s.start));
        let message = match key {
            Some(k) if e.message().starts_with("unknown field") => {
                format!("unknown key {k} (known: {})", KNOWN_KEYS.join(", "))
            }
            Some(k) => format!("{k}: {}", e.message()),
            None => e.message().to_owned(),
        };
        fail(line, message)
    })
}

/// Applies the precedence rule and composes the profile. The config file is checked even when a
/// flag or `VOX_PROFILE` decides, so a broken file never goes unnoticed.
pub fn select_profile(flag: Option<&str>) -> Result<(ProfileSet, Source), SelectError> {
    let config = read_config()?;
    let (spec, source) = if let Some(f) = flag {
        (f.to_owned(), Source::Flag)
    } else if let Ok(e) = std::env::var("VOX_PROFILE") {
        (e, Source::Env)
    } else if let Some(p) = config.profile {
        (p, Source::Config(config_path()))
    } else {
        ("dev".to_owned(), Source::Default)
    };
    let set = ProfileSet::parse(&spec).map_err(|error| SelectError::Unknown {
        source: source.clone(),
        error,
    })?;
    Ok((set, source))
}

/// `text` with `VOX_PROFILE` set to `canonical`, every other line (comments included) kept.
fn with_profile(text: &str, canonical: &str) -> String {
    let assignment = format!(
        "VOX_PROFILE = {}",
        toml::Value::String(canonical.to_owned())
    );
    let mut lines: Vec<String> = Vec::new();
    let mut replaced = false;
    for l in text.lines() {
        let is_key = l
            .trim_start()
            .strip_prefix("VOX_PROFILE")
            .is_some_and(|rest| rest.trim_start().starts_with('='));
        if is_key && !replaced {
            lines.push(assignment.clone());
            replaced = true;
        } else {
            lines.push(l.to_owned());
        }
    }
    if !replaced {
        // Unknown keys are refused, so the file has no table a root key could fall into.
        lines.push(assignment);
    }
    lines.join("\n") + "\n"
}

/// Sets `VOX_PROFILE` in the config file, keeping every other line. A file that does not pass
/// [`parse_config`] is refused and left as it is.
pub fn write_profile(canonical: &str) -> Result<PathBuf, SelectError> {
    let path = config_path();
    let old = read_config_text(&path)?.unwrap_or_default();
    parse_config(&path, &old)?;
    let mut text = with_profile(&old, canonical);
    let wanted = UserConfig {
        profile: Some(canonical.to_owned()),
    };
    if parse_config(&path, &text).ok() != Some(wanted) {
        // A layout the line edit does not understand (a multi-line string, a quoted key):
        // write the config afresh from its one key.
        text = format!(
            "VOX_PROFILE = {}\n",
            toml::Value::String(canonical.to_owned())
        );
    }
    let err = |e: std::io::Error| SelectError::Config {
        path: path.clone(),
        line: None,
        message: e.to_string(),
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text).map_err(err)?;
    std::fs::rename(&tmp, &path).map_err(err)?;
    Ok(path)
}

/// Reads and installs the workspace's own profiles (`.vox/profiles/<id>.v1.yaml`, which may
/// include the tools of the upstream servers its `servers.toml` declares), so that a profile
/// id names them as it names a standard one. Any error is one the start must refuse on.
pub fn install_workspace_profiles(ws: &vox_core::Workspace) -> Result<usize, String> {
    if !ws.vox_dir.join("profiles").is_dir() {
        return Ok(0);
    }
    let servers: Vec<String> = vox_tools_upstream::config::load(
        &ws.vox_dir,
        vox_tools_upstream::config::user_vox_dir().as_deref(),
    )
    .map_err(|e| e.to_string())?
    .into_iter()
    .map(|s| s.id)
    .collect();
    let profiles = vox_mcp_registry::load_workspace_profiles(&ws.vox_dir, &servers)?;
    let n = profiles.len();
    vox_mcp_registry::install_workspace_profiles(profiles);
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<UserConfig, String> {
        parse_config(Path::new("/h/.vox/config.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line_and_the_known_keys() {
        assert_eq!(
            parse("VOX_PROFIL = \"knowledge\"\n").unwrap_err(),
            "/h/.vox/config.toml:1: unknown key VOX_PROFIL (known: VOX_PROFILE)"
        );
        assert_eq!(
            parse("# comment\n\nVOX_PROFILE = \"dev\"\n[extra]\nx = 1\n").unwrap_err(),
            "/h/.vox/config.toml:4: unknown key extra (known: VOX_PROFILE)"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_named_with_its_line_and_key() {
        let e = parse("\nVOX_PROFILE = 3\n").unwrap_err();
        assert!(
            e.starts_with("/h/.vox/config.toml:2: VOX_PROFILE: invalid type: integer `3`"),
            "{e}"
        );
    }

    #[test]
    fn a_syntax_error_gives_its_line() {
        let e = parse("a = 1\nVOX_PROFILE = [unclosed\n").unwrap_err();
        assert!(
            e.starts_with("/h/.vox/config.toml:2: not valid TOML"),
            "{e}"
        );
    }

    #[test]
    fn every_known_key_is_accepted() {
        for k in KNOWN_KEYS {
            parse(&format!("{k} = \"x\"\n")).unwrap();
        }
        assert_eq!(parse("").unwrap(), UserConfig::default());
    }

    #[test]
    fn setting_the_profile_keeps_comments_and_replaces_the_old_value() {
        let text = "# my default\nVOX_PROFILE = \"dev\" # was dev\n";
        assert_eq!(
            with_profile(text, "knowledge"),
            "# my default\nVOX_PROFILE = \"knowledge\"\n"
        );
        assert_eq!(
            with_profile("# only a comment", "lang,skills"),
            "# only a comment\nVOX_PROFILE = \"lang,skills\"\n"
        );
    }
}
