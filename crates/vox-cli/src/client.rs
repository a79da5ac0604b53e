//! `vox client config`: the configuration an MCP client needs to serve vox over stdio, and the
//! merge that writes it into the client's own file without disturbing anything else there.

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// An MCP client whose configuration format vox knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Code: the project's `.mcp.json` (`mcpServers`).
    ClaudeCode,
    /// Codex: `~/.codex/config.toml` (`[mcp_servers.<name>]`; `CODEX_HOME` moves `~/.codex`).
    Codex,
    /// Cursor: the project's `.cursor/mcp.json` (`mcpServers`).
    Cursor,
    /// VS Code: the project's `.vscode/mcp.json` (`servers`, `type = "stdio"`).
    Vscode,
}

/// The server entry: how the client starts `vox mcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// The key under the client's server table: `vox`, or `vox-<profile>` so that servers of
    /// two profiles can sit side by side.
    pub name: String,
    /// The absolute path of the `vox` binary.
    pub command: String,
    /// The arguments after the binary: `mcp`, then `--profile` when one is pinned, then
    /// `--workspace`.
    pub args: Vec<String>,
}

impl Server {
    /// `vox mcp [--profile <canonical>] --workspace <workspace>` run by `exe`.
    pub fn new(exe: &Path, profile: Option<&str>, workspace: &Path) -> Server {
        let mut args = vec!["mcp".to_owned()];
        let mut name = "vox".to_owned();
        if let Some(p) = profile {
            args.extend(["--profile".to_owned(), p.to_owned()]);
            // Server names are kept to [a-z0-9-]: Codex refuses other characters in a table
            // key it reads, and `knowledge,attention` would not be a bare key anyway.
            let slug: String = p
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_lowercase()
                    } else {
                        '-'
                    }
                })
                .collect();
            name = format!("vox-{slug}");
        }
        args.extend(["--workspace".to_owned(), workspace.display().to_string()]);
        Server {
            name,
            command: exe.display().to_string(),
            args,
        }
    }
}

/// `CODEX_HOME`, else `~/.codex`.
pub fn codex_home() -> PathBuf {
    if let Some(h) = std::env::var_os("CODEX_HOME") {
        return h.into();
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join(".codex")
}

impl Client {
    /// The file the client reads its servers from.
    pub fn path(self, workspace: &Path) -> PathBuf {
        match self {
            Client::ClaudeCode => workspace.join(".mcp.json"),
            Client::Codex => codex_home().join("config.toml"),
            Client::Cursor => workspace.join(".cursor").join("mcp.json"),
            Client::Vscode => workspace.join(".vscode").join("mcp.json"),
        }
    }

    /// The JSON key holding the servers (`None` for Codex's TOML).
    fn servers_key(self) -> Option<&'static str> {
        match self {
            Client::ClaudeCode | Client::Cursor => Some("mcpServers"),
            Client::Vscode => Some("servers"),
            Client::Codex => None,
        }
    }

    fn json_entry(self, s: &Server) -> Node {
        let mut fields = Vec::new();
        if self == Client::Vscode {
            fields.push(("type".to_owned(), Node::Scalar("stdio".into())));
        }
        fields.push(("command".to_owned(), Node::Scalar(s.command.clone().into())));
        fields.push((
            "args".to_owned(),
            Node::Array(
                s.args
                    .iter()
                    .map(|a| Node::Scalar(a.clone().into()))
                    .collect(),
            ),
        ));
        Node::Object(fields)
    }

    /// The configuration a new file would hold: exactly the vox server.
    pub fn snippet(self, s: &Server) -> String {
        self.merge("", s)
            .expect("merging into an empty file always succeeds")
    }

    /// `existing` (the file's text; empty when there is none) with the vox server set: every
    /// other server and key is kept, an entry of the same name is replaced.
    pub fn merge(self, existing: &str, s: &Server) -> Result<String, String> {
        match self.servers_key() {
            Some(key) => merge_json(existing, key, &s.name, self.json_entry(s)),
            None => merge_codex(existing, s),
        }
    }

    /// Merges the server into the client's file (created if missing) and returns its path.
    pub fn write(self, workspace: &Path, s: &Server) -> Result<PathBuf, String> {
        let path = self.path(workspace);
        let existing = match std::fs::read_to_string(&path) {
            Ok(t) => Some(t),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let text = self
            .merge(existing.as_deref().unwrap_or(""), s)
            .map_err(|e| format!("{}: {e}; the file was left unchanged", path.display()))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        write_atomically(&path, &text)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    }
}

/// Writes a sibling and renames it over `path`, keeping the old file's permissions (a Codex
/// config may be private).
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.vox-{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn merge_json(existing: &str, key: &str, name: &str, entry: Node) -> Result<String, String> {
    let mut root = if existing.trim().is_empty() {
        Node::Object(vec![])
    } else {
        serde_json::from_str::<Node>(existing).map_err(|e| {
            format!("not valid JSON ({e}); comments and trailing commas are not supported here, so add the server by hand")
        })?
    };
    let Node::Object(fields) = &mut root else {
        return Err("the top level is not a JSON object".into());
    };
    if !fields.iter().any(|(k, _)| k == key) {
        fields.push((key.to_owned(), Node::Object(vec![])));
    }
    let servers = fields
        .iter_mut()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .expect("inserted above");
    let Node::Object(servers) = servers else {
        return Err(format!("`{key}` is not a JSON object"));
    };
    match servers.iter().position(|(k, _)| k == name) {
        Some(i) => {
            servers[i].1 = entry;
            let mut n = 0;
            servers.retain(|(k, _)| {
                n += usize::from(k == name);
                k != name || n == 1
            });
        }
        None => servers.push((name.to_owned(), entry)),
    }
    let mut text = serde_json::to_string_pretty(&root).map_err(|e| e.to_string())?;
    text.push('\n');
    Ok(text)
}

/// `[mcp_servers.<name>]` with `command` and `args`, in that order.
fn codex_section(s: &Server) -> String {
    let args = toml::Value::Array(
        s.args
            .iter()
            .map(|a| toml::Value::String(a.clone()))
            .collect(),
    );
    format!(
        "[mcp_servers.{}]\ncommand = {}\nargs = {args}\n",
        s.name,
        toml::Value::String(s.command.clone())
    )
}

fn merge_codex(existing: &str, s: &Server) -> Result<String, String> {
    let mut wanted: toml::Table = if existing.trim().is_empty() {
        toml::Table::new()
    } else {
        existing
            .parse()
            .map_err(|e| format!("not valid TOML: {e}"))?
    };
    let servers = wanted
        .entry("mcp_servers")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let toml::Value::Table(servers) = servers else {
        return Err("`mcp_servers` is not a table".into());
    };
    let mut entry = toml::Table::new();
    entry.insert("command".into(), toml::Value::String(s.command.clone()));
    entry.insert(
        "args".into(),
        toml::Value::Array(
            s.args
                .iter()
                .map(|a| toml::Value::String(a.clone()))
                .collect(),
        ),
    );
    servers.insert(s.name.clone(), toml::Value::Table(entry));
    // Edit the text where a line edit can do it, so comments and layout survive; the result
    // must mean exactly the merged table, or the table is written out instead.
    let edited = replace_section(existing, &s.name, &codex_section(s));
    if edited.parse::<toml::Table>().ok().as_ref() == Some(&wanted) {
        return Ok(edited);
    }
    toml::to_string(&wanted).map_err(|e| e.to_string())
}

/// `text` with the `[mcp_servers.<name>]` table (and its sub-tables) replaced by `section`, or
/// `section` appended when there is none.
fn replace_section(text: &str, name: &str, section: &str) -> String {
    let header = format!("[mcp_servers.{name}]");
    let sub = format!("[mcp_servers.{name}.");
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines.iter().position(|l| l.trim() == header) else {
        let mut out = text.to_owned();
        if !out.is_empty() {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push('\n');
        }
        out.push_str(section);
        return out;
    };
    let mut end = start + 1;
    while end < lines.len() {
        let l = lines[end].trim_start();
        if l.starts_with('[') && !l.starts_with(&sub) {
            break;
        }
        end += 1;
    }
    // Comments and blank lines just above the next table belong to it.
    while end > start + 1 {
        let l = lines[end - 1].trim_start();
        if l.is_empty() || l.starts_with('#') {
            end -= 1;
        } else {
            break;
        }
    }
    let mut out: Vec<&str> = lines[..start].to_vec();
    out.extend(section.lines());
    out.extend(&lines[end..]);
    out.join("\n") + "\n"
}

/// A JSON value whose objects keep their key order: serde_json's map sorts keys unless its
/// `preserve_order` feature is on, which this workspace does not use, and a user's file should
/// come back in the order it was written.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
    Scalar(serde_json::Value),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Scalar(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
                Ok(Node::Scalar(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
                Ok(Node::Scalar(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
                Ok(Node::Scalar(v.into()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Scalar(v.into()))
            }
            fn visit_string<E>(self, v: String) -> Result<Node, E> {
                Ok(Node::Scalar(v.into()))
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Scalar(serde_json::Value::Null))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(x) = a.next_element()? {
                    items.push(x);
                }
                Ok(Node::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = a.next_entry::<String, Node>()? {
                    fields.push(entry);
                }
                Ok(Node::Object(fields))
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Object(fields) => {
                let mut m = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
            Node::Array(items) => {
                let mut q = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    q.serialize_element(v)?;
                }
                q.end()
            }
            Node::Scalar(v) => v.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn server(profile: Option<&str>) -> Server {
        Server::new(Path::new("/opt/vox/bin/vox"), profile, Path::new("/w"))
    }

    #[test]
    fn the_server_is_named_after_its_profile_in_bare_key_characters() {
        assert_eq!(server(None).name, "vox");
        let s = server(Some("attention,knowledge"));
        assert_eq!(s.name, "vox-attention-knowledge");
        assert_eq!(
            s.args,
            [
                "mcp",
                "--profile",
                "attention,knowledge",
                "--workspace",
                "/w"
            ]
        );
    }

    #[test]
    fn json_merge_keeps_key_order_other_servers_and_replaces_only_vox() {
        let existing = r#"{"zeta": 1, "mcpServers": {"other": {"command": "x"}, "vox": {"command": "old"}}, "alpha": [true, null, 1.5]}"#;
        let out = Client::ClaudeCode.merge(existing, &server(None)).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["mcpServers"]["other"], json!({"command": "x"}));
        assert_eq!(v["mcpServers"]["vox"]["command"], "/opt/vox/bin/vox");
        assert_eq!(v["alpha"], json!([true, null, 1.5]));
        let order: Vec<usize> = ["\"zeta\"", "\"mcpServers\"", "\"alpha\""]
            .iter()
            .map(|k| out.find(k).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{out}");
    }

    #[test]
    fn json_with_comments_or_a_wrong_shape_is_refused() {
        let e = Client::Vscode
            .merge("{ // mine\n}", &server(None))
            .unwrap_err();
        assert!(e.contains("not valid JSON"), "{e}");
        let e = Client::Cursor
            .merge(r#"{"mcpServers": []}"#, &server(None))
            .unwrap_err();
        assert!(e.contains("`mcpServers` is not a JSON object"), "{e}");
    }

    #[test]
    fn codex_merge_keeps_comments_and_other_tables_and_replaces_the_vox_table() {
        let existing = "# my codex\nmodel = \"o3\"\n\n[mcp_servers.vox]\ncommand = \"old\"\n\n[mcp_servers.vox.env]\nA = \"1\"\n\n# the docs server\n[mcp_servers.docs]\ncommand = \"docs\"\n";
        let out = Client::Codex.merge(existing, &server(None)).unwrap();
        assert!(out.starts_with("# my codex\nmodel = \"o3\"\n"), "{out}");
        assert!(
            out.contains("# the docs server\n[mcp_servers.docs]"),
            "{out}"
        );
        let t: toml::Table = out.parse().unwrap();
        let vox = t["mcp_servers"]["vox"].as_table().unwrap();
        assert_eq!(vox["command"].as_str(), Some("/opt/vox/bin/vox"));
        assert!(vox.get("env").is_none(), "the old entry is replaced whole");
        assert_eq!(t["mcp_servers"]["docs"]["command"].as_str(), Some("docs"));
        // A layout the line edit cannot handle still merges, through the table.
        let inline = "mcp_servers = { docs = { command = \"docs\" } }\n";
        let out = Client::Codex
            .merge(inline, &server(Some("knowledge")))
            .unwrap();
        let t: toml::Table = out.parse().unwrap();
        assert_eq!(t["mcp_servers"]["docs"]["command"].as_str(), Some("docs"));
        assert!(t["mcp_servers"].get("vox-knowledge").is_some(), "{out}");
    }
}
