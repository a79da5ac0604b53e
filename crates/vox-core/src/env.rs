//! Every `VOX_*` environment variable in one table ([`VARS`]): its name, what it takes, its
//! default and what it does; and the strict readers the code reads them with. A value that
//! does not parse is an error naming the variable and the value, never a silent default.
//!
//! `vox` checks the whole environment at start ([`check`]) so a typo stops it before it
//! serves; `docs/configuration.md` is this table rendered ([`reference`]), and tests keep the
//! two equal and every `"VOX_…"` name the sources read in the table.

use std::fmt::Write as _;

/// What a variable takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `1` or `0`.
    Flag,
    /// A whole number from `min` to `max`.
    Number {
        /// The smallest value accepted.
        min: u64,
        /// The largest value accepted.
        max: u64,
    },
    /// One of these words.
    Choice(&'static [&'static str]),
    /// Free text (a name, a path, a URL, a list), checked where it is used.
    Text,
    /// A credential: checked where it is used, never printed.
    Secret,
}

/// One variable.
#[derive(Debug)]
pub struct Var {
    /// Its name.
    pub name: &'static str,
    /// What it takes.
    pub kind: Kind,
    /// Its value when unset, as the reference says it.
    pub default: &'static str,
    /// The part of vox it configures (a heading of the reference).
    pub area: &'static str,
    /// What it does.
    pub doc: &'static str,
}

const fn var(
    name: &'static str,
    kind: Kind,
    default: &'static str,
    area: &'static str,
    doc: &'static str,
) -> Var {
    Var {
        name,
        kind,
        default,
        area,
        doc,
    }
}

const fn num(min: u64, max: u64) -> Kind {
    Kind::Number { min, max }
}

use Kind::{Flag, Secret, Text};

const WS: &str = "Workspace and daemon";
const LOG: &str = "Logs";
const MCP: &str = "MCP clients (`vox mcp`)";
const HTTP: &str = "HTTP gateway (`vox serve`)";
const OAUTH: &str = "OAuth 2.1 (`vox serve`)";
const TOOLS: &str = "Tools";
const LLM: &str = "Models";
const MESH: &str = "Mesh and replicas";

/// Every variable vox reads.
#[rustfmt::skip]
pub const VARS: &[Var] = &[
    var("VOX_WORKSPACE", Text, "the current directory", WS, "The workspace directory (`--workspace` wins)."),
    var("VOX_HOME", Text, "`~/.vox`", WS, "Per-user state: `config.toml`, `servers.toml`, installed skills."),
    var("VOX_PROFILE", Text, "`dev`", WS, "The capability profile (`--profile` wins; `config.toml` below it)."),
    var("VOX_DB_PATH", Text, "`<workspace>/.vox/journey.db`", WS, "The SQLite journey store's file."),
    var("VOX_DB_URL", Secret, "unset (SQLite)", WS, "A PostgreSQL URL: the journey store there instead (replicas share it)."),
    var("VOX_DAEMON_EXE", Text, "`vox-orchestrator-d` beside `vox`", WS, "The daemon binary `vox mcp` and `vox daemon start` spawn."),
    var("VOX_DAEMON_IDLE_SECS", num(0, 31_536_000), "300", WS, "A spawned daemon exits after this long without clients (0: never)."),
    var("VOX_TOOL_TIMEOUT_MS", num(1, 86_400_000), "30000", WS, "How long one tool call may run before it is stopped."),
    var("VOX_LOG", Text, "`warn` (`info` for daemons and `vox serve`)", LOG, "The log filter (`tracing` env-filter syntax, e.g. `info,vox_gateway=debug`)."),
    var("VOX_LOG_FORMAT", Kind::Choice(&["text", "json"]), "`text`", LOG, "`json`: one JSON object per log line (for log shippers)."),
    var("VOX_LOG_MAX_BYTES", num(65_536, 1 << 40), "10485760", LOG, "`daemon.log` is rotated when it grows past this size."),
    var("VOX_LOG_FILES", num(1, 100), "5", LOG, "Rotated logs kept (`daemon.log.1` … `daemon.log.N`)."),
    var("VOX_MCP_WORKSPACE_TOOLS", Flag, "0", MCP, "1: this client is also served the workspace's `.vox` tools (dev profile)."),
    var("VOX_MCP_TIERS", Kind::Choice(&["catalog", "workspace", "all"]), "unset", MCP, "Deprecated spelling of `VOX_MCP_WORKSPACE_TOOLS=1` (`workspace` or `all`)."),
    var("VOX_MCP_HANDOFF", Flag, "1", MCP, "0: `vox mcp` relays the session itself instead of handing stdio to the daemon."),
    var("VOX_AGENT_TOKEN", Secret, "unset", MCP, "The credential `vox_spawn_agent` issued: every call of this client is that agent's."),
    var("VOX_MCP_HTTP_HOST", Text, "127.0.0.1", HTTP, "The address to bind (`--host` wins)."),
    var("VOX_MCP_HTTP_PORT", num(0, 65_535), "3921", HTTP, "The port to bind (`--port` wins; 0: any free port)."),
    var("VOX_MCP_HTTP_BEARER_TOKEN", Secret, "unset", HTTP, "The write role's static token (16 characters or more)."),
    var("VOX_MCP_HTTP_READ_BEARER_TOKEN", Secret, "unset", HTTP, "The read role's static token (16 characters or more, not the write token)."),
    var("VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED", Flag, "0", HTTP, "1: loopback peers without a token get the write role (127.0.0.1 or ::1 binds only)."),
    var("VOX_MCP_HTTP_WORKSPACE_TOOLS", Flag, "0", HTTP, "1: `/mcp` also serves the workspace's `.vox` tools to the write role (dev only)."),
    var("VOX_MCP_HTTP_ALLOWED_TOOLS", Text, "the profile's surface", HTTP, "Comma-separated catalog tools HTTP serves, intersected with the profile."),
    var("VOX_MCP_HTTP_READ_ROLE_ALLOWED_TOOLS", Text, "unset", HTTP, "Comma-separated tools the read role may call, within read-role tools."),
    var("VOX_MCP_HTTP_RATE_PER_SEC", num(1, u32::MAX as u64), "50000", HTTP, "Requests per second per caller."),
    var("VOX_MCP_HTTP_RATE_BURST", num(1, u32::MAX as u64), "50000", HTTP, "Requests a caller may make at once above the rate."),
    var("VOX_MCP_HTTP_MAX_CONNECTIONS", num(1, u32::MAX as u64), "512", HTTP, "Connections served at once; one more is answered 503."),
    var("VOX_MCP_HTTP_HEADER_TIMEOUT_MS", num(1, u32::MAX as u64), "10000", HTTP, "How long request headers may take, and a keep-alive connection may idle."),
    var("VOX_MCP_HTTP_AUTH_FAILURES_PER_MIN", num(1, u32::MAX as u64), "30", HTTP, "Failed authentications per peer address per minute before it is refused (429)."),
    var("VOX_MCP_HTTP_ALLOWED_HOSTS", Text, "loopback names and the bound address", HTTP, "Comma-separated extra `Host` values (`host` or `host:port`)."),
    var("VOX_MCP_HTTP_ALLOWED_ORIGINS", Text, "unset", HTTP, "Comma-separated extra browser `Origin` values, compared exactly."),
    var("VOX_MCP_HTTP_OAUTH_ISSUER", Text, "unset (OAuth off)", OAUTH, "The authorization server's issuer URL (https; http on loopback): turns OAuth on."),
    var("VOX_MCP_HTTP_OAUTH_RESOURCE", Text, "`http://<bound address>/mcp`", OAUTH, "This server's URL as clients use it: the audience tokens must carry (required on 0.0.0.0)."),
    var("VOX_MCP_HTTP_OAUTH_READ_SCOPE", Text, "`vox:read`", OAUTH, "The scope that gives the read role."),
    var("VOX_MCP_HTTP_OAUTH_WRITE_SCOPE", Text, "`vox:write`", OAUTH, "The scope that gives the write role."),
    var("VOX_MCP_HTTP_OAUTH_ALGORITHMS", Text, "RS256..512, PS256..512, ES256, ES384, EdDSA", OAUTH, "Comma-separated JWS algorithms accepted (asymmetric only)."),
    var("VOX_MCP_HTTP_OAUTH_LEEWAY_SECS", num(0, 300), "60", OAUTH, "Clock skew allowed on `exp` and `nbf`."),
    var("VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_ID", Text, "unset", OAUTH, "vox's client id at the issuer's introspection endpoint (opaque tokens)."),
    var("VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_SECRET", Secret, "unset", OAUTH, "Its secret."),
    var("VOX_APPROVAL_TIMEOUT_SECS", num(1, 604_800), "900", TOOLS, "How long an agent's call waits for a person's approval."),
    var("VOX_ATTENTION_BUDGET_TOKENS", num(1, u32::MAX as u64), "200000", TOOLS, "The attention ledger's token budget per agent."),
    var("VOX_WORKSPACE_WATCH", Flag, "1", TOOLS, "0: `.vox` files are not watched (reload with `vox_workspace_reload`)."),
    var("VOX_SKILL_PATH", Text, "unset", TOOLS, "Extra skill directories, `:`-separated."),
    var("VOX_MCP_AGENT_FLEET", Flag, "1", TOOLS, "0: the agent fleet subsystem is off."),
    var("VOX_FLEET_VOX_BIN", Text, "this `vox`", TOOLS, "The `vox` binary the fleet's Codex workers are given."),
    var("VOX_FLEET_CODEX_CONFIG", Text, "`$CODEX_HOME/config.toml`", TOOLS, "The Codex configuration the fleet's workers start from."),
    var("VOX_LLM_API", Kind::Choice(&["chat", "responses", "anthropic"]), "unset", LLM, "With `VOX_LLM_BASE_URL` and `VOX_LLM_MODEL`: one model from the environment."),
    var("VOX_LLM_BASE_URL", Text, "unset", LLM, "That model's endpoint."),
    var("VOX_LLM_MODEL", Text, "unset", LLM, "That model's name."),
    var("VOX_LLM_API_KEY_ENV", Text, "unset", LLM, "The variable holding that model's API key."),
    var("VOX_LLM_TIMEOUT_SECS", num(1, 3600), "120", LLM, "How long a model may stay silent mid-answer."),
    var("VOX_LLM_RETRIES", num(0, 10), "3", LLM, "Retries of a failed model request."),
    var("VOX_MODELS_FILE", Text, "`<workspace>/.vox/models.toml`", LLM, "The model registry file."),
    var("VOX_MESH_NATS_URL", Text, "unset (no mesh)", MESH, "The NATS server this node joins the mesh through."),
    var("VOX_MESH_NATS_CREDS", Text, "unset", MESH, "A NATS `.creds` file (one credential kind only)."),
    var("VOX_MESH_NATS_NKEY", Text, "unset", MESH, "A NATS NKey seed file."),
    var("VOX_MESH_NATS_USER", Text, "unset", MESH, "A NATS user (with `VOX_MESH_NATS_PASSWORD`)."),
    var("VOX_MESH_NATS_PASSWORD", Secret, "unset", MESH, "Its password."),
    var("VOX_MESH_NATS_TOKEN", Secret, "unset", MESH, "A NATS token."),
    var("VOX_NATS_SERVER", Text, "`/usr/sbin/nats-server`, else `nats-server` on PATH", MESH, "The `nats-server` binary `vox mesh` runs."),
];

/// A variable's value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}: `{value}` is not {expected}")]
pub struct EnvError {
    /// The variable.
    pub var: &'static str,
    /// Its value (`<secret>` for a credential).
    pub value: String,
    /// What it should be.
    pub expected: String,
}

impl EnvError {
    /// The stable code of this error.
    pub fn code(&self) -> &'static str {
        "invalid_environment"
    }
}

/// The table entry of `name`.
pub fn lookup(name: &str) -> Option<&'static Var> {
    VARS.iter().find(|v| v.name == name)
}

fn raw(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Checks one value against its variable's kind.
pub fn parse(var: &'static Var, value: &str) -> Result<(), EnvError> {
    let fail = |expected: String| EnvError {
        var: var.name,
        value: if var.kind == Kind::Secret {
            "<secret>".into()
        } else {
            value.chars().take(80).collect()
        },
        expected,
    };
    match var.kind {
        Kind::Flag if matches!(value, "0" | "1") => Ok(()),
        Kind::Flag => Err(fail("1 or 0".into())),
        Kind::Number { min, max } => match value.trim().parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(()),
            _ => Err(fail(format!("a whole number from {min} to {max}"))),
        },
        Kind::Choice(words) if words.contains(&value) => Ok(()),
        Kind::Choice(words) => Err(fail(format!("one of {}", words.join(", ")))),
        Kind::Text | Kind::Secret => Ok(()),
    }
}

fn entry(name: &'static str) -> &'static Var {
    // The names are literals of this workspace; the sources test keeps each in the table.
    lookup(name).unwrap_or(&Var {
        name: "VOX_UNLISTED",
        kind: Kind::Text,
        default: "",
        area: "",
        doc: "",
    })
}

/// A flag: `Ok(None)` when unset or empty.
pub fn flag(name: &'static str) -> Result<Option<bool>, EnvError> {
    match raw(name) {
        None => Ok(None),
        Some(v) => parse(entry(name), &v).map(|()| Some(v == "1")),
    }
}

/// A whole number within its variable's range: `Ok(None)` when unset or empty.
pub fn number(name: &'static str) -> Result<Option<u64>, EnvError> {
    match raw(name) {
        None => Ok(None),
        Some(v) => parse(entry(name), &v).map(|()| v.trim().parse().ok()),
    }
}

/// A choice or a text: `Ok(None)` when unset or empty.
pub fn text(name: &'static str) -> Result<Option<String>, EnvError> {
    match raw(name) {
        None => Ok(None),
        Some(v) => parse(entry(name), &v).map(|()| Some(v)),
    }
}

/// Every bad value among `get`'s variables (the process environment in production).
pub fn check(get: impl Fn(&str) -> Option<String>) -> Vec<EnvError> {
    VARS.iter()
        .filter_map(|v| {
            let value = get(v.name).filter(|s| !s.is_empty())?;
            parse(v, &value).err()
        })
        .collect()
}

/// `VOX_*` names in `names` that vox does not read (a typo, or a variable of another
/// version), each with the nearest name it does read when one is close.
pub fn unknown(names: impl IntoIterator<Item = String>) -> Vec<(String, Option<&'static str>)> {
    names
        .into_iter()
        .filter(|n| n.starts_with("VOX_") && !n.starts_with("VOX_TEST_") && lookup(n).is_none())
        .map(|n| {
            let near = VARS
                .iter()
                .map(|v| (distance(&n, v.name), v.name))
                // Close relative to the name's length: VOX_ZZZ is near nothing.
                .filter(|(d, _)| *d <= 3 && d * 4 <= n.len())
                .min()
                .map(|(_, name)| name);
            (n, near)
        })
        .collect()
}

/// Levenshtein distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The reference, `docs/configuration.md`.
pub fn reference() -> String {
    let mut out = String::from(
        "# Configuration\n\n\
         Every environment variable vox reads. A value that does not parse stops `vox` at start \
         with an error naming the variable and the value; `vox doctor` also names `VOX_*` \
         variables vox does not read (a typo). Flags take `1` or `0`; an empty value counts as \
         unset.\n\n\
         This page is generated from `crates/vox-core/src/env.rs` (a test fails when they \
         differ: `VOX_UPDATE_DOCS=1 cargo test -p vox-core --lib env` rewrites it).\n",
    );
    let mut area = "";
    for v in VARS {
        if v.area != area {
            area = v.area;
            let _ = write!(
                out,
                "\n## {area}\n\n| Variable | Takes | Default | What it does |\n|---|---|---|---|\n"
            );
        }
        let takes = match v.kind {
            Kind::Flag => "`1` / `0`".to_owned(),
            Kind::Number { min, max } => format!("{min} to {max}"),
            Kind::Choice(words) => words
                .iter()
                .map(|w| format!("`{w}`"))
                .collect::<Vec<_>>()
                .join(", "),
            Kind::Text => "text".to_owned(),
            Kind::Secret => "secret".to_owned(),
        };
        let _ = writeln!(
            out,
            "| `{}` | {takes} | {} | {} |",
            v.name, v.default, v.doc
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    #[test]
    fn bad_values_name_the_variable_and_the_value() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let errors = check(env(&[
            ("VOX_TOOL_TIMEOUT_MS", "abc"),
            ("VOX_APPROVAL_TIMEOUT_SECS", "x"),
            ("VOX_WORKSPACE_WATCH", "maybe"),
            ("VOX_LOG_FORMAT", "xml"),
            ("VOX_MCP_HTTP_BEARER_TOKEN", "whatever-it-is"),
            ("VOX_DAEMON_IDLE_SECS", "0"),
            ("VOX_PROFILE", "anything"),
        ]));
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "VOX_TOOL_TIMEOUT_MS: `abc` is not a whole number from 1 to 86400000",
                "VOX_LOG_FORMAT: `xml` is not one of text, json",
                "VOX_APPROVAL_TIMEOUT_SECS: `x` is not a whole number from 1 to 604800",
                "VOX_WORKSPACE_WATCH: `maybe` is not 1 or 0",
            ]
        );
        assert!(
            check(env(&[("VOX_TOOL_TIMEOUT_MS", "0")]))[0]
                .to_string()
                .contains("`0`")
        );
        assert!(check(env(&[("VOX_WORKSPACE_WATCH", "")])).is_empty());
    }

    #[test]
    fn unknown_names_are_found_with_the_nearest_known_one() {
        let found = unknown(
            [
                "VOX_TOOL_TIMEOUT",
                "VOX_PROFILE",
                "VOX_TEST_PG_URL",
                "HOME",
                "VOX_ZZZ",
            ]
            .map(str::to_owned),
        );
        let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["VOX_TOOL_TIMEOUT", "VOX_ZZZ"]);
        assert_eq!(found[0].1, Some("VOX_TOOL_TIMEOUT_MS"));
        assert_eq!(found[1].1, None);
        assert_eq!(unknown(["VOX_PROFLE".to_owned()])[0].1, Some("VOX_PROFILE"));
    }

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }

    /// Every `"VOX_…"` literal in a crate's `src/` (tests and test-only names aside) is a
    /// variable of the table, so a variable read in code and missing from the reference fails.
    #[test]
    fn every_variable_the_sources_name_is_in_the_table() {
        let mut files = Vec::new();
        for krate in std::fs::read_dir(repo().join("crates")).unwrap().flatten() {
            let src = krate.path().join("src");
            if src.is_dir() {
                rust_files(&src, &mut files);
            }
        }
        let mut missing = BTreeSet::new();
        for f in files {
            // This file names prefixes and a placeholder, not variables.
            if f.ends_with("vox-core/src/env.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            // Test modules may name made-up variables.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for piece in code.split("\"VOX_").skip(1) {
                let name: String = piece
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                let name = format!("VOX_{name}");
                if piece[name.len() - 4..].starts_with('"')
                    && !name.starts_with("VOX_TEST_")
                    && name != "VOX_MESH"
                    && lookup(&name).is_none()
                {
                    missing.insert(format!("{name} ({})", f.display()));
                }
            }
        }
        assert!(missing.is_empty(), "not in env::VARS: {missing:?}");
    }

    #[test]
    fn the_reference_is_the_table_rendered() {
        let path = repo().join("docs/configuration.md");
        let want = reference();
        if std::env::var_os("VOX_UPDATE_DOCS").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/configuration.md differs from env::VARS; run VOX_UPDATE_DOCS=1 cargo test -p vox-core --lib env"
        );
    }

    #[test]
    fn names_are_unique_and_defaults_of_numbers_are_in_range() {
        let mut seen = BTreeSet::new();
        for v in VARS {
            assert!(seen.insert(v.name), "{} twice", v.name);
            if let Kind::Number { .. } = v.kind
                && let Ok(n) = v.default.parse::<u64>()
            {
                assert!(parse(v, &n.to_string()).is_ok(), "{}", v.name);
            }
        }
    }
}
