//! The `SKILL.md` format: front matter (YAML between `---` fences, per agentskills.io, or the Vox
//! TOML variant between `+++` fences) and a Markdown body.
//!
//! Front matter keys: `name` (`[a-z0-9-]`, ≤ 64 characters, no leading, trailing or doubled
//! hyphen, equal to the directory name), `description` (1–1,024 characters), and optionally
//! `license`, `compatibility` (≤ 500 characters), `allowed-tools` and `metadata` (string keys;
//! values are strings, except that `vox-tools` and `tags` may also be lists). Any other key is an
//! error: a typo must not silently drop a permission.

use serde::Deserialize;
use std::collections::BTreeMap;

/// Largest `SKILL.md` accepted, in bytes.
pub const MAX_SKILL_MD_BYTES: usize = 256 * 1024;
/// Largest front matter block accepted, in bytes.
pub const MAX_FRONT_MATTER_BYTES: usize = 32 * 1024;
/// Longest skill name.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest `compatibility` note.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;
/// Most tools a skill may list.
pub const MAX_TOOLS: usize = 256;

/// Which front matter syntax a skill uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FrontMatterFormat {
    /// YAML between `---` fences (agentskills.io).
    Yaml,
    /// TOML between `+++` fences (the Vox variant).
    Toml,
}

/// A parsed, valid `SKILL.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// The skill id: `[a-z0-9-]`, at most 64 characters, equal to its directory name.
    pub name: String,
    /// What the skill is for and when to use it (1 to 1,024 characters); indexed for search.
    pub description: String,
    /// The license the skill is shared under, as written.
    pub license: Option<String>,
    /// Free-text note on the environments the skill needs (at most 500 characters).
    pub compatibility: Option<String>,
    /// The tools the skill may use: `metadata.vox-tools`, else `allowed-tools`. Exact names or
    /// trailing-`*` prefixes. Empty means unrestricted.
    pub tools: Vec<String>,
    /// `metadata.tags`, for search.
    pub tags: Vec<String>,
    /// The other metadata entries, as strings.
    pub metadata: BTreeMap<String, String>,
    /// The Markdown instructions after the front matter.
    pub body: String,
    /// The front matter syntax the file used.
    pub format: FrontMatterFormat,
}

/// One thing wrong with a `SKILL.md`: the 1-based line when it is known, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Problem {
    /// The 1-based line in `SKILL.md`, when the problem has one.
    pub line: Option<usize>,
    /// What is wrong, for people.
    pub message: String,
}

impl Problem {
    fn at(line: Option<usize>, message: impl Into<String>) -> Self {
        Problem {
            line,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "line {l}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// A scalar metadata value as text; `None` for a list.
fn value_text(v: &MetaValue) -> Option<String> {
    match v {
        MetaValue::Str(s) => Some(s.clone()),
        MetaValue::Bool(b) => Some(b.to_string()),
        MetaValue::Int(i) => Some(i.to_string()),
        MetaValue::Float(f) => Some(f.to_string()),
        MetaValue::List(_) => None,
    }
}

/// A list of names: one string (split on spaces and commas) or a list of strings.
#[derive(Deserialize)]
#[serde(untagged)]
enum NameList {
    One(String),
    Many(Vec<String>),
}

impl NameList {
    fn into_vec(self) -> Vec<String> {
        let split = |s: &str| {
            s.split(|c: char| c.is_whitespace() || c == ',')
                .filter(|w| !w.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        match self {
            NameList::One(s) => split(&s),
            NameList::Many(v) => v.iter().flat_map(|s| split(s)).collect(),
        }
    }
}

/// A metadata value: scalars become strings; lists are only meaningful for `vox-tools` and
/// `tags`.
#[derive(Deserialize)]
#[serde(untagged)]
enum MetaValue {
    Str(String),
    Bool(bool),
    Int(i64),
    Float(f64),
    List(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    license: Option<String>,
    compatibility: Option<String>,
    #[serde(rename = "allowed-tools")]
    allowed_tools: Option<NameList>,
    metadata: Option<BTreeMap<String, MetaValue>>,
}

/// Splits `text` into (format, front matter, line of the front matter's first line, body).
fn split_front_matter(text: &str) -> Result<(FrontMatterFormat, &str, usize, &str), Problem> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first_line_end = text.find('\n').unwrap_or(text.len());
    let fence = text[..first_line_end].trim_end_matches('\r').trim_end();
    let format = match fence {
        "---" => FrontMatterFormat::Yaml,
        "+++" => FrontMatterFormat::Toml,
        _ => {
            return Err(Problem::at(
                Some(1),
                "SKILL.md must start with front matter: a `---` line (YAML) or a `+++` line (TOML)",
            ));
        }
    };
    let rest = &text[(first_line_end + 1).min(text.len())..];
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == fence {
            let front = &rest[..offset];
            let body = &rest[offset + line.len()..];
            return Ok((format, front, 2, body));
        }
        offset += line.len();
    }
    Err(Problem::at(
        Some(1),
        format!("the front matter opened on line 1 is never closed by a `{fence}` line"),
    ))
}

/// Checks the agentskills.io name rule.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("`name` must not be empty".into());
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!(
            "`name` is {} characters; the limit is {MAX_NAME_CHARS}",
            name.chars().count()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "`name` {name:?} has {c:?}; only lowercase letters, digits and `-` are allowed"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err(format!("`name` {name:?} must not start or end with `-`"));
    }
    if name.contains("--") {
        return Err(format!("`name` {name:?} must not contain `--`"));
    }
    Ok(())
}

fn check_tool_pattern(t: &str) -> Result<(), String> {
    let stem = t.strip_suffix('*').unwrap_or(t);
    let ok = !stem.is_empty()
        && stem.len() <= 128
        && stem
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "tool {t:?} is not a tool name (1-128 of `[A-Za-z0-9_.-]`, optionally ending in `*`)"
        ))
    }
}

/// Parses and validates a `SKILL.md` that lives in a directory called `dir_name`. Every problem
/// is reported, not just the first.
pub fn parse(text: &[u8], dir_name: &str) -> Result<Manifest, Vec<Problem>> {
    if text.len() > MAX_SKILL_MD_BYTES {
        return Err(vec![Problem::at(
            None,
            format!(
                "SKILL.md is {} bytes; the limit is {MAX_SKILL_MD_BYTES}",
                text.len()
            ),
        )]);
    }
    let text = std::str::from_utf8(text).map_err(|e| {
        let line = text[..e.valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        vec![Problem::at(
            Some(line),
            format!("SKILL.md is not UTF-8 (byte {})", e.valid_up_to()),
        )]
    })?;
    let (format, front, first_line, body) = split_front_matter(text).map_err(|p| vec![p])?;
    if front.len() > MAX_FRONT_MATTER_BYTES {
        return Err(vec![Problem::at(
            Some(1),
            format!(
                "the front matter is {} bytes; the limit is {MAX_FRONT_MATTER_BYTES}",
                front.len()
            ),
        )]);
    }
    let fm: FrontMatter = match format {
        FrontMatterFormat::Yaml => serde_norway::from_str(front).map_err(|e| {
            let line = e.location().map(|l| l.line() + first_line - 1);
            vec![Problem::at(line, format!("front matter (YAML): {e}"))]
        })?,
        FrontMatterFormat::Toml => toml::from_str(front).map_err(|e| {
            let line = e
                .span()
                .map(|s| front[..s.start.min(front.len())].matches('\n').count() + first_line);
            vec![Problem::at(
                line,
                format!("front matter (TOML): {}", e.message()),
            )]
        })?,
    };
    let mut problems = Vec::new();
    let name = fm.name.unwrap_or_default();
    if let Err(m) = check_name(&name) {
        problems.push(Problem::at(None, m));
    } else if name != dir_name {
        problems.push(Problem::at(
            None,
            format!("`name` {name:?} must equal the skill's directory name {dir_name:?}"),
        ));
    }
    let description = fm.description.unwrap_or_default().trim().to_owned();
    if description.is_empty() {
        problems.push(Problem::at(None, "`description` is required"));
    } else if description.chars().count() > MAX_DESCRIPTION_CHARS {
        problems.push(Problem::at(
            None,
            format!(
                "`description` is {} characters; the limit is {MAX_DESCRIPTION_CHARS}",
                description.chars().count()
            ),
        ));
    }
    if let Some(c) = &fm.compatibility
        && c.chars().count() > MAX_COMPATIBILITY_CHARS
    {
        problems.push(Problem::at(
            None,
            format!("`compatibility` is longer than {MAX_COMPATIBILITY_CHARS} characters"),
        ));
    }
    let mut metadata = BTreeMap::new();
    let mut vox_tools = None;
    let mut tags = Vec::new();
    for (key, value) in fm.metadata.unwrap_or_default() {
        let text = value_text(&value);
        let list = match value {
            MetaValue::Str(s) => Some(NameList::One(s)),
            MetaValue::List(v) => Some(NameList::Many(v)),
            _ => None,
        };
        match (key.as_str(), list, text) {
            ("vox-tools", Some(l), _) => vox_tools = Some(l.into_vec()),
            ("tags", Some(l), _) => tags = l.into_vec(),
            ("vox-tools" | "tags", None, _) => problems.push(Problem::at(
                None,
                format!("`metadata.{key}` must be a string or a list of strings"),
            )),
            (_, _, Some(text)) => {
                metadata.insert(key, text);
            }
            (_, _, None) => problems.push(Problem::at(
                None,
                format!("`metadata.{key}` must be a string (lists are allowed for `vox-tools` and `tags` only)"),
            )),
        }
    }
    // A tool list that is present but empty would silently lift every restriction.
    if vox_tools.as_ref().is_some_and(Vec::is_empty) {
        problems.push(Problem::at(
            None,
            "`metadata.vox-tools` is empty; list the tools, or leave it out for an unrestricted skill",
        ));
    }
    for t in vox_tools.iter().flatten() {
        if let Err(m) = check_tool_pattern(t) {
            problems.push(Problem::at(None, format!("`metadata.vox-tools`: {m}")));
        }
    }
    let allowed = fm.allowed_tools.map(NameList::into_vec);
    // agentskills.io tools are host-specific (`Bash(git:*)`, `Read`): any short token.
    for t in allowed.iter().flatten() {
        if t.chars().count() > 128 {
            problems.push(Problem::at(
                None,
                format!("`allowed-tools` entry {t:?} is longer than 128 characters"),
            ));
        }
    }
    let tools = vox_tools.or(allowed).unwrap_or_default();
    if tools.len() > MAX_TOOLS {
        problems.push(Problem::at(
            None,
            format!(
                "the skill lists {} tools; the limit is {MAX_TOOLS}",
                tools.len()
            ),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Manifest {
        name,
        description,
        license: fm.license,
        compatibility: fm.compatibility,
        tools,
        tags,
        metadata,
        body: body.trim_start_matches(['\r', '\n']).to_owned(),
        format,
    })
}

impl Manifest {
    /// Whether this skill's allowlist lets `tool` be called (an empty list allows everything).
    pub fn allows(&self, tool: &str) -> bool {
        self.tools.is_empty()
            || self.tools.iter().any(|t| match t.strip_suffix('*') {
                Some(prefix) => tool.starts_with(prefix),
                None => t == tool,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str, dir: &str) -> Manifest {
        parse(text.as_bytes(), dir).unwrap_or_else(|p| panic!("{p:?}"))
    }
    fn err(text: &str, dir: &str) -> String {
        parse(text.as_bytes(), dir)
            .expect_err("should fail")
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn yaml_front_matter_with_every_field() {
        let m = ok(
            "---\nname: pdf-tools\ndescription: Work with PDFs.\nlicense: MIT\ncompatibility: needs qpdf\nallowed-tools: Bash Read\nmetadata:\n  author: me\n  version: 1.2\n  vox-tools: vox_memory_store, vox_memory_*\n  tags: [pdf, documents]\n---\n\n# PDF\nSteps.\n",
            "pdf-tools",
        );
        assert_eq!(m.name, "pdf-tools");
        assert_eq!(m.tools, ["vox_memory_store", "vox_memory_*"]);
        assert_eq!(m.tags, ["pdf", "documents"]);
        assert_eq!(m.metadata["version"], "1.2");
        assert_eq!(m.body, "# PDF\nSteps.\n");
        assert_eq!(m.format, FrontMatterFormat::Yaml);
        assert!(m.allows("vox_memory_recall"));
        assert!(!m.allows("vox_kb_query"));
    }

    #[test]
    fn toml_variant() {
        let m = ok(
            "+++\nname = \"t\"\ndescription = \"d\"\nallowed-tools = [\"vox_check\"]\n[metadata]\ntags = \"a b\"\n+++\nbody\n",
            "t",
        );
        assert_eq!(m.tools, ["vox_check"]);
        assert_eq!(m.tags, ["a", "b"]);
        assert_eq!(m.format, FrontMatterFormat::Toml);
    }

    #[test]
    fn allowed_tools_is_used_when_vox_tools_is_absent_and_empty_is_unrestricted() {
        let m = ok(
            "---\nname: a\ndescription: d\nallowed-tools: x y\n---\n",
            "a",
        );
        assert_eq!(m.tools, ["x", "y"]);
        let m = ok("---\nname: a\ndescription: d\n---\n", "a");
        assert!(m.allows("anything"));
    }

    #[test]
    fn name_rules() {
        assert!(
            err("---\nname: Bad_Name\ndescription: d\n---\n", "Bad_Name")
                .contains("only lowercase")
        );
        assert!(err("---\nname: -a\ndescription: d\n---\n", "-a").contains("start or end"));
        assert!(err("---\nname: a--b\ndescription: d\n---\n", "a--b").contains("`--`"));
        let long = "a".repeat(65);
        assert!(
            err(&format!("---\nname: {long}\ndescription: d\n---\n"), &long)
                .contains("limit is 64")
        );
        assert!(err("---\nname: a\ndescription: d\n---\n", "b").contains("directory name"));
    }

    #[test]
    fn every_problem_is_reported() {
        let e = err("---\nname: A\ndescription: \"\"\n---\n", "A");
        assert!(e.contains("`name`"), "{e}");
        assert!(e.contains("`description` is required"), "{e}");
    }

    #[test]
    fn malformed_front_matter_names_the_line() {
        let e = err("---\nname: a\ndescription: [unclosed\n---\n", "a");
        assert!(e.starts_with("line "), "{e}");
        assert!(err("no fence\n", "a").contains("must start with front matter"));
        assert!(err("---\nname: a\n", "a").contains("never closed"));
        assert!(
            err("---\nname: a\ndescription: d\ncolour: red\n---\n", "a").contains("unknown field")
        );
        assert!(err("+++\nname = \n+++\n", "a").starts_with("line 2"));
    }

    #[test]
    fn size_and_encoding_limits() {
        let huge = format!(
            "---\nname: a\ndescription: d\n---\n{}",
            "x".repeat(MAX_SKILL_MD_BYTES)
        );
        assert!(err(&huge, "a").contains("limit is"));
        let bad = parse(b"---\nname: a\n\xff\n---\n", "a").unwrap_err();
        assert_eq!(bad[0].line, Some(3));
        let long_desc = format!("---\nname: a\ndescription: {}\n---\n", "d".repeat(1025));
        assert!(err(&long_desc, "a").contains("limit is 1024"));
        assert!(
            err(
                "---\nname: a\ndescription: d\nmetadata:\n  vox-tools: \"bad name!\"\n---\n",
                "a"
            )
            .contains("not a tool name")
        );
    }

    #[test]
    fn a_tool_list_that_is_empty_or_not_text_is_an_error_not_unrestricted() {
        let e = err(
            "---\nname: a\ndescription: d\nallowed-tools: x\nmetadata:\n  vox-tools: []\n---\n",
            "a",
        );
        assert!(e.contains("is empty"), "{e}");
        assert!(
            err(
                "---\nname: a\ndescription: d\nmetadata:\n  vox-tools: \"\"\n---\n",
                "a"
            )
            .contains("is empty")
        );
        assert!(
            err(
                "---\nname: a\ndescription: d\nmetadata:\n  vox-tools: true\n---\n",
                "a"
            )
            .contains("string or a list")
        );
        assert!(
            err(
                "---\nname: a\ndescription: d\nmetadata:\n  tags: 3\n---\n",
                "a"
            )
            .contains("string or a list")
        );
    }

    #[test]
    fn yaml_aliases_cannot_blow_up() {
        // A billion-laughs document must be refused, not expanded.
        let mut doc = String::from(
            "---\nname: a\ndescription: d\nmetadata:\n  a0: &a0 [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n",
        );
        for i in 1..9 {
            let prev = i - 1;
            doc.push_str(&format!("  a{i}: &a{i} [*a{prev},*a{prev},*a{prev},*a{prev},*a{prev},*a{prev},*a{prev},*a{prev},*a{prev}]\n"));
        }
        doc.push_str("---\n");
        assert!(parse(doc.as_bytes(), "a").is_err());
    }
}
