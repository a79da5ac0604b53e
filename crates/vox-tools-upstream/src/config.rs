//! `servers.toml`: the upstream MCP servers a user declares, in the workspace
//! (`.vox/servers.toml`) and for the user (`~/.vox/servers.toml`, or `$VOX_HOME/servers.toml`;
//! the workspace wins on an id).
//!
//! ```toml
//! [servers.time]                  # a stdio server
//! command = "uvx"
//! args = ["mcp-server-time"]
//! env = ["TZ"]                    # passed by name; values are never written here
//! [servers.time.tools.get_current_time]
//! exposure = "public"
//! side_effect = "read_only"
//! read_role = true
//! [servers.docs]                  # a Streamable HTTP server
//! url = "http://127.0.0.1:8931/mcp"
//! bearer_token_env = "DOCS_TOKEN"
//! ```
//!
//! Parsing is strict: an unknown key, a wrong type or a bad value is an error naming the file,
//! the line and the key.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use vox_mcp_registry::{Exposure, SideEffectClass, UpstreamClass};

/// Largest `servers.toml` read (bytes).
const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Most servers one file may declare.
const MAX_SERVERS: usize = 64;

/// When a stdio server is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Start {
    /// At the daemon's boot (its tools are listed from the start).
    #[default]
    Boot,
    /// At the first list or call that needs it.
    OnUse,
}

/// How vox reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        /// The program (looked up on `PATH`).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment variables passed through by name (the rest is cleared but `PATH`,
        /// `HOME`, `LANG`, `TMPDIR` and `USER`).
        env: Vec<String>,
        /// Its working directory (relative to the workspace; the workspace by default).
        cwd: PathBuf,
    },
    /// A Streamable HTTP endpoint.
    Http {
        /// The endpoint URL.
        url: String,
        /// Header name → the environment variable holding its value.
        headers_env: BTreeMap<String, String>,
        /// The environment variable holding a bearer token, sent as `Authorization`.
        bearer_token_env: Option<String>,
    },
}

/// One declared server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Its id: the prefix of its tools' names (`<id>__<tool>`).
    pub id: String,
    /// Where it was declared (for messages).
    pub file: PathBuf,
    /// How it is reached.
    pub transport: Transport,
    /// When it is started.
    pub start: Start,
    /// How long starting (spawn and `initialize`) may take.
    pub start_timeout: Duration,
    /// How long one call may take.
    pub call_timeout: Duration,
    /// Whether a tool it adds after its first listing is served without a person's approval.
    pub trust_new_tools: bool,
    /// Whether the audit trail keeps its calls' arguments (never their results).
    pub audit_arguments: bool,
    /// Classification per tool (its own name); a tool not named is [`UpstreamClass::default`].
    pub tools: BTreeMap<String, UpstreamClass>,
}

impl ServerConfig {
    /// Whether it is reached over HTTP.
    pub fn is_http(&self) -> bool {
        matches!(self.transport, Transport::Http { .. })
    }
    /// The class of tool `tool` (its own name).
    pub fn class_of(&self, tool: &str) -> UpstreamClass {
        self.tools.get(tool).copied().unwrap_or_default()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    #[serde(default)]
    servers: BTreeMap<String, toml::Spanned<ServerToml>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerToml {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers_env: BTreeMap<String, String>,
    bearer_token_env: Option<String>,
    #[serde(default)]
    start: Start,
    start_timeout_secs: Option<u64>,
    call_timeout_secs: Option<u64>,
    #[serde(default)]
    trust_new_tools: bool,
    #[serde(default)]
    audit_arguments: bool,
    #[serde(default)]
    tools: BTreeMap<String, ToolToml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolToml {
    exposure: Option<Exposure>,
    side_effect: Option<SideEffectClass>,
    read_role: Option<bool>,
}

/// A `servers.toml` that cannot be used: `file:line:col: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The user's vox directory, where their `servers.toml` is: `VOX_HOME`, else `~/.vox`.
pub fn user_vox_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("VOX_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".vox"))
}

/// The servers of the workspace's and the user's files (`home` is `~/.vox`), the workspace's
/// winning on an id; a file that does not exist declares none.
pub fn load(vox_dir: &Path, home: Option<&Path>) -> Result<Vec<ServerConfig>, ConfigError> {
    let workspace_root = vox_dir.parent().unwrap_or(vox_dir);
    let mut by_id: BTreeMap<String, ServerConfig> = BTreeMap::new();
    if let Some(home) = home {
        for s in read_file(&home.join("servers.toml"), workspace_root)? {
            by_id.insert(s.id.clone(), s);
        }
    }
    for s in read_file(&vox_dir.join("servers.toml"), workspace_root)? {
        by_id.insert(s.id.clone(), s);
    }
    Ok(by_id.into_values().collect())
}

fn read_file(path: &Path, workspace_root: &Path) -> Result<Vec<ServerConfig>, ConfigError> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ConfigError(format!("{shown}: {e}"))),
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(ConfigError(format!(
            "{shown}: {} bytes, above the {MAX_FILE_BYTES} byte limit",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError(format!("{shown}: {e}")))?;
    parse(path, &text, workspace_root)
}

/// Parses one file's text (`path` names it in errors).
pub fn parse(
    path: &Path,
    text: &str,
    workspace_root: &Path,
) -> Result<Vec<ServerConfig>, ConfigError> {
    let at = |span: Option<std::ops::Range<usize>>, message: &str| {
        let (line, col) = span.map_or((1, 1), |s| line_col(text, s.start));
        ConfigError(format!("{}:{line}:{col}: {message}", path.display()))
    };
    let file: FileToml = toml::from_str(text).map_err(|e| at(e.span(), e.message()))?;
    if file.servers.len() > MAX_SERVERS {
        return Err(at(None, &format!("more than {MAX_SERVERS} servers")));
    }
    let mut out = Vec::with_capacity(file.servers.len());
    for (id, spanned) in file.servers {
        let span = spanned.span();
        let s = spanned.into_inner();
        let server = build(path, &id, s, workspace_root)
            .map_err(|m| at(Some(span.clone()), &format!("servers.{id}: {m}")))?;
        out.push(server);
    }
    Ok(out)
}

fn build(path: &Path, id: &str, s: ServerToml, root: &Path) -> Result<ServerConfig, String> {
    check_id(id)?;
    let transport = match (s.command, s.url) {
        (Some(_), Some(_)) => {
            return Err("has both `command` and `url`; a server is one or the other".into());
        }
        (None, None) => {
            return Err(
                "needs `command` (a stdio server) or `url` (a Streamable HTTP server)".into(),
            );
        }
        (Some(command), None) => {
            if !s.headers_env.is_empty() || s.bearer_token_env.is_some() {
                return Err("`headers_env` and `bearer_token_env` are for `url` servers".into());
            }
            if command.trim().is_empty() {
                return Err("`command` is empty".into());
            }
            for name in &s.env {
                check_env_name("env", name)?;
            }
            let cwd = match s.cwd {
                Some(c) if Path::new(&c).is_absolute() => PathBuf::from(c),
                Some(c) => root.join(c),
                None => root.to_owned(),
            };
            Transport::Stdio {
                command,
                args: s.args,
                env: s.env,
                cwd,
            }
        }
        (None, Some(url)) => {
            if !s.args.is_empty() || !s.env.is_empty() || s.cwd.is_some() {
                return Err("`args`, `env` and `cwd` are for `command` servers".into());
            }
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("`url` {url:?} is not an http:// or https:// URL"));
            }
            for (header, var) in &s.headers_env {
                if header.is_empty()
                    || !header
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                {
                    return Err(format!("headers_env: {header:?} is not a header name"));
                }
                check_env_name(&format!("headers_env.{header}"), var)?;
            }
            if let Some(var) = &s.bearer_token_env {
                check_env_name("bearer_token_env", var)?;
            }
            Transport::Http {
                url,
                headers_env: s.headers_env,
                bearer_token_env: s.bearer_token_env,
            }
        }
    };
    let secs = |key: &str, v: Option<u64>, default: u64| -> Result<Duration, String> {
        match v.unwrap_or(default) {
            0 => Err(format!("`{key}` must be at least 1")),
            n if n > 3600 => Err(format!("`{key}` = {n} is above 3600")),
            n => Ok(Duration::from_secs(n)),
        }
    };
    let mut tools = BTreeMap::new();
    for (name, t) in s.tools {
        let default = UpstreamClass::default();
        tools.insert(
            name,
            UpstreamClass {
                exposure: t.exposure.unwrap_or(default.exposure),
                side_effect_class: t.side_effect.unwrap_or(default.side_effect_class),
                read_role_eligible: t.read_role.unwrap_or(default.read_role_eligible),
            },
        );
    }
    Ok(ServerConfig {
        id: id.to_owned(),
        file: path.to_owned(),
        transport,
        start: s.start,
        start_timeout: secs("start_timeout_secs", s.start_timeout_secs, 30)?,
        call_timeout: secs("call_timeout_secs", s.call_timeout_secs, 60)?,
        trust_new_tools: s.trust_new_tools,
        audit_arguments: s.audit_arguments,
        tools,
    })
}

/// A server id is the first part of its tools' names: lower-case letters, digits, `-` and `_`,
/// no `__` (which separates it from the tool), not `vox` (the catalog's prefix).
fn check_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 32
        && id.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !id.contains("__")
        && !id.ends_with('_');
    if !ok {
        return Err(format!(
            "the id {id:?} must start with a lower-case letter and hold only lower-case letters, digits, `-` and `_` (no `__`, no trailing `_`, at most 32)"
        ));
    }
    if id == "vox" || id.starts_with("vox_") {
        return Err(format!(
            "the id {id:?} is reserved (vox's own tools start with `vox_`)"
        ));
    }
    Ok(())
}

fn check_env_name(key: &str, name: &str) -> Result<(), String> {
    let ok = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{key}: {name:?} is not an environment variable name (a value is never written here, only its variable's name)"
        ))
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Vec<ServerConfig>, ConfigError> {
        parse(Path::new("/ws/.vox/servers.toml"), text, Path::new("/ws"))
    }

    #[test]
    fn the_issues_shape_parses() {
        let s = parse_str(
            "[servers.time]\ncommand = \"uvx\"\nargs = [\"mcp-server-time\"]\n[servers.docs]\nurl = \"http://127.0.0.1:8931/mcp\"\n",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        let docs = &s[0];
        assert_eq!(docs.id, "docs");
        assert!(matches!(docs.transport, Transport::Http { .. }));
        let time = &s[1];
        assert_eq!(
            time.transport,
            Transport::Stdio {
                command: "uvx".into(),
                args: vec!["mcp-server-time".into()],
                env: vec![],
                cwd: "/ws".into()
            }
        );
        assert_eq!(time.start, Start::Boot);
        assert_eq!(time.class_of("anything"), UpstreamClass::default());
    }

    #[test]
    fn tools_are_classified_by_their_config() {
        let s = parse_str(
            "[servers.git]\ncommand = \"g\"\n[servers.git.tools.git_log]\nexposure = \"public\"\nside_effect = \"read_only\"\nread_role = true\n",
        )
        .unwrap();
        let c = s[0].class_of("git_log");
        assert_eq!(c.exposure, Exposure::Public);
        assert_eq!(c.side_effect_class, SideEffectClass::ReadOnly);
        assert!(c.read_role_eligible);
        assert_eq!(s[0].class_of("git_commit").exposure, Exposure::Operator);
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_key() {
        let cases = [
            (
                "[servers.a]\ncommand = \"x\"\ncomand = \"y\"\n",
                ":3:1:",
                "comand",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nurl = \"http://h/\"\n",
                ":1:",
                "both",
            ),
            ("[servers.a]\n", ":1:", "needs `command`"),
            ("[servers.A]\ncommand = \"x\"\n", ":1:", "\"A\""),
            ("[servers.t__x]\ncommand = \"x\"\n", ":1:", "no `__`"),
            ("[servers.vox]\ncommand = \"x\"\n", ":1:", "reserved"),
            (
                "[servers.a]\ncommand = \"x\"\nenv = [\"A=B\"]\n",
                ":1:",
                "not an environment variable name",
            ),
            ("[servers.a]\nurl = \"ftp://x\"\n", ":1:", "not an http"),
            (
                "[servers.a]\ncommand = \"x\"\ncall_timeout_secs = 0\n",
                ":1:",
                "at least 1",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\nexposure = \"everyone\"\n",
                ":4:",
                "everyone",
            ),
            (
                "[servers.a]\ncommand = \"x\"\nstart = \"later\"\n",
                ":3:",
                "later",
            ),
            ("[server.a]\ncommand = \"x\"\n", ":1:", "server"),
        ];
        for (text, at, word) in cases {
            let e = parse_str(text).unwrap_err().0;
            assert!(e.starts_with("/ws/.vox/servers.toml:"), "{e}");
            assert!(e.contains(at), "{text:?}: {e}");
            assert!(e.contains(word), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_workspace_wins_on_an_id() {
        let dir = tempfile::tempdir().unwrap();
        let (vox, home) = (dir.path().join("ws/.vox"), dir.path().join("home"));
        std::fs::create_dir_all(&vox).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join("servers.toml"),
            "[servers.a]\ncommand = \"home\"\n[servers.b]\ncommand = \"b\"\n",
        )
        .unwrap();
        std::fs::write(vox.join("servers.toml"), "[servers.a]\ncommand = \"ws\"\n").unwrap();
        let s = load(&vox, Some(&home)).unwrap();
        assert_eq!(s.len(), 2);
        assert!(matches!(&s[0].transport, Transport::Stdio { command, .. } if command == "ws"));
        assert!(load(&dir.path().join("none"), None).unwrap().is_empty());
    }
}
