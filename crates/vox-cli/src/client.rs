//! `vox client config`: the configuration an MCP client needs to reach vox (over stdio, or a
//! `vox serve` over HTTP), and the merge that writes it into the client's own file without
//! disturbing anything else there.

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

/// The server entry: how the client starts `vox mcp`, or where it reaches `vox serve`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// The key under the client's server table: `vox`, or `vox-<profile>` so that servers of
    /// two profiles can sit side by side (`vox-http` for an HTTP entry).
    pub name: String,
    /// The absolute path of the `vox` binary.
    pub command: String,
    /// The arguments after the binary: `mcp`, then `--profile` when one is pinned, then
    /// `--workspace`.
    pub args: Vec<String>,
    /// Variables set for `vox mcp` (`VOX_MCP_WORKSPACE_TOOLS=1` with `--workspace-tools`).
    pub env: Vec<(String, String)>,
    /// Instead of starting `vox mcp`: a `vox serve`'s `/mcp` URL and the variable holding its
    /// token (the client reads it from its environment; the token is never written).
    pub http: Option<Http>,
}

/// A Streamable HTTP entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http {
    /// `http://host:port/mcp`.
    pub url: String,
    /// The environment variable holding the bearer token, if the server needs one.
    pub token_env: Option<String>,
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
            env: Vec::new(),
            http: None,
        }
    }

    /// An entry for the `vox serve` at `url` (its `/mcp`), with the token in `token_env`.
    pub fn http(url: &str, token_env: Option<&str>) -> Server {
        Server {
            name: "vox-http".to_owned(),
            command: String::new(),
            args: Vec::new(),
            env: Vec::new(),
            http: Some(Http {
                url: url.to_owned(),
                token_env: token_env.map(str::to_owned),
            }),
        }
    }

    /// The same, with the workspace's `.vox` tools listed to the client.
    pub fn with_workspace_tools(mut self) -> Server {
        self.env
            .push(("VOX_MCP_WORKSPACE_TOOLS".to_owned(), "1".to_owned()));
        self
    }

    /// The workspace a stdio entry serves (`--workspace <dir>` in its arguments).
    fn workspace_of(args: &[&str]) -> Option<String> {
        args.windows(2)
            .find(|w| w[0] == "--workspace")
            .map(|w| w[1].to_owned())
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
        let text = |v: &str| Node::Scalar(v.to_owned().into());
        if let Some(h) = &s.http {
            let mut fields = Vec::new();
            if self != Client::Cursor {
                fields.push(("type".to_owned(), text("http")));
            }
            fields.push(("url".to_owned(), text(&h.url)));
            if let Some(var) = &h.token_env {
                // Each client's own way of reading a variable at start; the token stays there.
                let value = match self {
                    Client::ClaudeCode => format!("Bearer ${{{var}}}"),
                    _ => format!("Bearer ${{env:{var}}}"),
                };
                let headers = vec![("Authorization".to_owned(), text(&value))];
                fields.push(("headers".to_owned(), Node::Object(headers)));
            }
            return Node::Object(fields);
        }
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
        if !s.env.is_empty() {
            let env = s.env.iter().map(|(k, v)| (k.clone(), text(v))).collect();
            fields.push(("env".to_owned(), Node::Object(env)));
        }
        Node::Object(fields)
    }

    /// Other vox entries in `existing` (the client's file) for the same workspace as `s`: a
    /// workspace's daemon serves one profile, so a client starting two of them meets
    /// `profile_mismatch` on the second.
    pub fn rivals(self, existing: &str, s: &Server) -> Vec<String> {
        let Some(ours) =
            Server::workspace_of(&s.args.iter().map(String::as_str).collect::<Vec<_>>())
        else {
            return Vec::new();
        };
        let entries: Vec<(String, Vec<String>)> = match self.servers_key() {
            Some(key) => serde_json::from_str::<serde_json::Value>(existing)
                .ok()
                .and_then(|v| v.get(key).and_then(|t| t.as_object()).cloned())
                .map(|t| {
                    t.into_iter()
                        .map(|(name, e)| (name, string_list(&e["args"])))
                        .collect()
                })
                .unwrap_or_default(),
            None => existing
                .parse::<toml::Table>()
                .ok()
                .and_then(|t| t.get("mcp_servers").and_then(|v| v.as_table()).cloned())
                .map(|t| {
                    t.into_iter()
                        .map(|(name, e)| {
                            let args = e
                                .get("args")
                                .and_then(|a| a.as_array())
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|x| x.as_str().map(str::to_owned))
                                        .collect()
                                })
                                .unwrap_or_default();
                            (name, args)
                        })
                        .collect()
                })
                .unwrap_or_default(),
        };
        entries
            .into_iter()
            .filter(|(name, args)| {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                *name != s.name
                    && args.first() == Some(&"mcp")
                    && Server::workspace_of(&args).as_deref() == Some(ours.as_str())
            })
            .map(|(name, _)| name)
            .collect()
    }

    /// `existing` without the entries named `names`.
    pub fn remove(self, existing: &str, names: &[String]) -> Result<String, String> {
        match self.servers_key() {
            Some(key) => {
                let mut root: Node = serde_json::from_str(existing).map_err(|e| e.to_string())?;
                if let Node::Object(fields) = &mut root
                    && let Some((_, Node::Object(servers))) =
                        fields.iter_mut().find(|(k, _)| k == key)
                {
                    servers.retain(|(k, _)| !names.contains(k));
                }
                let mut text = serde_json::to_string_pretty(&root).map_err(|e| e.to_string())?;
                text.push('\n');
                Ok(text)
            }
            None => {
                let mut wanted: toml::Table = existing
                    .parse()
                    .map_err(|e| format!("not valid TOML: {e}"))?;
                if let Some(toml::Value::Table(servers)) = wanted.get_mut("mcp_servers") {
                    servers.retain(|k, _| !names.iter().any(|n| n == k));
                }
                let mut edited = existing.to_owned();
                for n in names {
                    edited = replace_section(&edited, n, "");
                }
                if edited.parse::<toml::Table>().ok().as_ref() == Some(&wanted) {
                    return Ok(edited);
                }
                toml::to_string(&wanted).map_err(|e| e.to_string())
            }
        }
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

    /// Replaces the client's file with `text` (atomically).
    pub fn replace_file(self, workspace: &Path, text: &str) -> Result<(), String> {
        let path = self.path(workspace);
        write_atomically(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
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

/// The strings of a JSON array (none for anything else).
fn string_list(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `[mcp_servers.<name>]` with `command`, `args` and an `env` sub-table, or `url` and
/// `bearer_token_env_var`.
fn codex_section(s: &Server) -> String {
    if let Some(h) = &s.http {
        let mut out = format!(
            "[mcp_servers.{}]\nurl = {}\n",
            s.name,
            toml::Value::String(h.url.clone())
        );
        if let Some(var) = &h.token_env {
            out.push_str(&format!(
                "bearer_token_env_var = {}\n",
                toml::Value::String(var.clone())
            ));
        }
        return out;
    }
    let args = toml::Value::Array(
        s.args
            .iter()
            .map(|a| toml::Value::String(a.clone()))
            .collect(),
    );
    let mut out = format!(
        "[mcp_servers.{}]\ncommand = {}\nargs = {args}\n",
        s.name,
        toml::Value::String(s.command.clone())
    );
    if !s.env.is_empty() {
        out.push_str(&format!("[mcp_servers.{}.env]\n", s.name));
        for (k, v) in &s.env {
            out.push_str(&format!("{k} = {}\n", toml::Value::String(v.clone())));
        }
    }
    out
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
    servers.insert(s.name.clone(), toml::Value::Table(codex_entry(s)));
    // Edit the text where a line edit can do it, so comments and layout survive; the result
    // must mean exactly the merged table, or the table is written out instead.
    let edited = replace_section(existing, &s.name, &codex_section(s));
    if edited.parse::<toml::Table>().ok().as_ref() == Some(&wanted) {
        return Ok(edited);
    }
    toml::to_string(&wanted).map_err(|e| e.to_string())
}

/// The table of [`codex_section`].
fn codex_entry(s: &Server) -> toml::Table {
    let mut entry = toml::Table::new();
    let string = |v: &str| toml::Value::String(v.to_owned());
    if let Some(h) = &s.http {
        entry.insert("url".into(), string(&h.url));
        if let Some(var) = &h.token_env {
            entry.insert("bearer_token_env_var".into(), string(var));
        }
        return entry;
    }
    entry.insert("command".into(), string(&s.command));
    let args = s.args.iter().map(|a| string(a)).collect();
    entry.insert("args".into(), toml::Value::Array(args));
    if !s.env.is_empty() {
        let env = s.env.iter().map(|(k, v)| (k.clone(), string(v))).collect();
        entry.insert("env".into(), toml::Value::Table(env));
    }
    entry
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

    #[test]
    fn http_entries_in_each_clients_form_with_the_token_by_variable_name() {
        let s = Server::http("http://127.0.0.1:3921/mcp", Some("VOX_TOKEN"));
        let v = |c: Client| -> Value { serde_json::from_str(&c.snippet(&s)).unwrap() };
        let claude = v(Client::ClaudeCode);
        assert_eq!(
            claude["mcpServers"]["vox-http"],
            json!({"type": "http", "url": "http://127.0.0.1:3921/mcp", "headers": {"Authorization": "Bearer ${VOX_TOKEN}"}})
        );
        let cursor = v(Client::Cursor);
        assert_eq!(
            cursor["mcpServers"]["vox-http"]["headers"]["Authorization"],
            "Bearer ${env:VOX_TOKEN}"
        );
        assert!(cursor["mcpServers"]["vox-http"].get("type").is_none());
        assert_eq!(v(Client::Vscode)["servers"]["vox-http"]["type"], "http");
        let codex: toml::Table = Client::Codex.snippet(&s).parse().unwrap();
        let entry = &codex["mcp_servers"]["vox-http"];
        assert_eq!(entry["url"].as_str(), Some("http://127.0.0.1:3921/mcp"));
        assert_eq!(entry["bearer_token_env_var"].as_str(), Some("VOX_TOKEN"));
    }

    #[test]
    fn workspace_tools_are_an_env_entry() {
        let s = server(None).with_workspace_tools();
        let v: Value = serde_json::from_str(&Client::Cursor.snippet(&s)).unwrap();
        assert_eq!(
            v["mcpServers"]["vox"]["env"],
            json!({"VOX_MCP_WORKSPACE_TOOLS": "1"})
        );
        let codex: toml::Table = Client::Codex.snippet(&s).parse().unwrap();
        assert_eq!(
            codex["mcp_servers"]["vox"]["env"]["VOX_MCP_WORKSPACE_TOOLS"].as_str(),
            Some("1")
        );
    }

    #[test]
    fn another_vox_entry_for_the_same_workspace_is_found_and_removed() {
        let knowledge = server(Some("knowledge"));
        let repo = server(Some("repo-read"));
        let elsewhere = Server::new(
            Path::new("/opt/vox/bin/vox"),
            Some("lang"),
            Path::new("/other"),
        );
        for c in [Client::ClaudeCode, Client::Codex] {
            let mut text = c.merge("", &knowledge).unwrap();
            text = c.merge(&text, &elsewhere).unwrap();
            assert_eq!(c.rivals(&text, &repo), ["vox-knowledge"], "{c:?}");
            assert!(c.rivals(&text, &knowledge).is_empty());
            let kept = c.remove(&text, &["vox-knowledge".to_owned()]).unwrap();
            assert!(
                !kept.contains("vox-knowledge") && kept.contains("vox-lang"),
                "{kept}"
            );
        }
    }
}
