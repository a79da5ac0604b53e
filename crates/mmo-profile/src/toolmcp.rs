//! The operator-owned Tool MCP registry: `$XDG_CONFIG_HOME/codex-mmo/tool-mcp.d/*.toml`,
//! one server per file named `<id>.toml`. Packs may only grant (and narrow) what is here.

use crate::diag::{Diags, Rejected};
use crate::model::MESH_SERVER;
use crate::parse::is_role_id;
use crate::strict::{Tbl, parse_table};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// One operator-registered Tool MCP server.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolServer {
    pub id: String,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub url: Option<String>,
    /// The operator's finite allowlist; grants narrow it.
    pub allowed_tools: Vec<String>,
    /// Names of environment variables forwarded to a stdio server (values never read).
    pub env_vars: Vec<String>,
    /// Name of the environment variable holding an HTTP bearer token (value never read).
    pub bearer_token_env_var: Option<String>,
    pub startup_timeout_seconds: u32,
    pub tool_timeout_seconds: u32,
}

/// All registered servers by id.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Registry {
    pub servers: BTreeMap<String, ToolServer>,
}

/// Whether `s` is an environment variable name (A-Z, 0-9, `_`): a name, never a value.
pub(crate) fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

impl Registry {
    /// Load every `*.toml` in `dir`; a missing directory is an empty registry.
    pub fn load(dir: &Path) -> Result<Registry, Rejected> {
        let mut reg = Registry::default();
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(reg),
            Err(e) => {
                return Err(Rejected::one(
                    dir.display().to_string(),
                    "",
                    "tool_mcp_unreadable",
                    e.to_string(),
                ));
            }
        };
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        let mut d = Diags::default();
        for p in paths {
            if p.extension().and_then(|e| e.to_str()) != Some("toml") {
                continue;
            }
            let file = p.display().to_string();
            let stem = p
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            let text = match std::fs::read_to_string(&p) {
                Ok(t) => t,
                Err(e) => {
                    d.push(&file, "", "tool_mcp_unreadable", e.to_string());
                    continue;
                }
            };
            if let Some(s) = parse_server(&file, &stem, &text, &mut d) {
                reg.servers.insert(s.id.clone(), s);
            }
            d.attach_lines(&file, &text);
        }
        if d.is_empty() {
            Ok(reg)
        } else {
            Err(Rejected(d.into_sorted()))
        }
    }
}

/// Parse one registry file.
pub fn parse_server(file: &str, stem: &str, text: &str, d: &mut Diags) -> Option<ToolServer> {
    let table = parse_table(file, text, d)?;
    let t = Tbl::new(file, "", &table);
    let before = d.len();
    let id = t.req_str(d, "id").unwrap_or_default();
    if !id.is_empty() {
        if id == MESH_SERVER {
            t.err(
                d,
                "id",
                "tool_mcp_reserved",
                format!("`{MESH_SERVER}` is reserved for the runtime"),
            );
        } else if !is_role_id(&id) {
            t.err(
                d,
                "id",
                "tool_mcp_id_format",
                format!("`{id}` must be snake_case"),
            );
        } else if id != stem {
            t.err(
                d,
                "id",
                "tool_mcp_file_name",
                format!("server `{id}` must live in `{id}.toml`"),
            );
        }
    }
    let command = t.str(d, "command");
    let args = t.str_list(d, "args").unwrap_or_default();
    let url = t.str(d, "url");
    match (&command, &url) {
        (Some(_), Some(_)) => t.err(
            d,
            "url",
            "tool_mcp_transport",
            "a server has a command or a url, not both",
        ),
        (None, None) => t.err(
            d,
            "command",
            "tool_mcp_transport",
            "a server needs a command (stdio) or a url (streamable HTTP)",
        ),
        _ => {}
    }
    if url.is_some() && !args.is_empty() {
        t.err(
            d,
            "args",
            "tool_mcp_transport",
            "args apply to stdio servers only",
        );
    }
    let allowed_tools = t.str_list(d, "allowed_tools").unwrap_or_default();
    if allowed_tools.is_empty() {
        t.err(
            d,
            "allowed_tools",
            "tool_mcp_allowlist",
            "the operator allowlist must name at least one tool",
        );
    }
    let env_vars = t.str_list(d, "env_vars").unwrap_or_default();
    for (i, e) in env_vars.iter().enumerate() {
        if !is_env_name(e) {
            d.push(
                file,
                format!("env_vars[{i}]"),
                "tool_mcp_env_name",
                format!("`{e}` is not an environment variable name"),
            );
        }
    }
    let bearer_token_env_var = t.str(d, "bearer_token_env_var");
    if let Some(b) = &bearer_token_env_var
        && !is_env_name(b)
    {
        t.err(
            d,
            "bearer_token_env_var",
            "tool_mcp_env_name",
            format!("`{b}` is not an environment variable name"),
        );
    }
    let startup_timeout_seconds =
        t.u32_in(d, "startup_timeout_seconds", 1, 600, "tool_mcp_range", 30);
    let tool_timeout_seconds = t.u32_in(d, "tool_timeout_seconds", 1, 3600, "tool_mcp_range", 120);
    t.finish(d);
    (d.len() == before).then_some(ToolServer {
        id,
        command,
        args,
        url,
        allowed_tools,
        env_vars,
        bearer_token_env_var,
        startup_timeout_seconds,
        tool_timeout_seconds,
    })
}
