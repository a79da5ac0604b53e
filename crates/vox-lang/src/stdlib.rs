//! Vox's standard-library namespaces (`std.fs`, `fs`, `path`, `json`, `process`, `db`, …), as
//! the tool interpreter sees them: the members it runs, and for the others why it does not.
//!
//! A call such as `std.path.join(a, b)` or `path.join(a, b)` (the bare form real Vox also has)
//! is a namespace call when its root names no local, parameter or top-level item. Members that
//! are pure or read the workspace run as built-ins. A function that uses any other member is
//! not executable: it is skipped with `vox/interp/not-executable` naming the member and its
//! effect, and calling it fails at run time.

use crate::hir::Builtin;

/// Names that start a namespace path.
pub const ROOTS: &[&str] = &[
    "std", "fs", "path", "json", "process", "env", "secrets", "regex", "time", "crypto", "io",
    "csv", "toml", "yaml", "log", "http", "db", "mobile", "HTTP", "Claude", "Speech", "OpenClaw",
    "Browser", "content",
];

/// What a namespace member is to the interpreter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member {
    /// Runs as this built-in.
    Runs(Builtin),
    /// Has an effect workspace tools may not have (the text says which).
    Effect(&'static str),
    /// Not something the interpreter provides.
    Unknown,
}

/// Other spellings of members that run, and the built-in each is ([`Builtin::ALL`] names the
/// namespace members by their own path, such as `path.join`).
const ALIASES: &[(&str, &str)] = &[
    ("json.stringify", "json_encode"),
    ("json.encode", "json_encode"),
    ("now_ms", "time.now_ms"),
    ("uuid", "uuid"),
    ("crypto.uuid", "uuid"),
    ("hash_secure", "crypto.hash_secure"),
    ("hash_fast", "crypto.hash_fast"),
    ("log.debug", "print"),
    ("log.info", "print"),
    ("log.warn", "print"),
    ("log.error", "print"),
    ("fs.read_file", "fs.read"),
    ("fs.read_text", "fs.read"),
    ("fs.read_to_string", "fs.read"),
];

/// The member at `path` (`std.fs.read`, `path.join`, `db.Post.insert`, …).
pub fn member(path: &str) -> Member {
    let p = path.strip_prefix("std.").unwrap_or(path);
    // A bare built-in (`len`) is no namespace member unless an alias says so (`std.uuid`).
    let (name, aliased) = match ALIASES.iter().find(|(a, _)| *a == p) {
        Some((_, b)) => (*b, true),
        None => (p, false),
    };
    if (aliased || name.contains('.'))
        && let Some((b, ..)) = Builtin::by_name(name)
    {
        return Member::Runs(b);
    }
    let ns = p.split('.').next().unwrap_or(p);
    Member::Effect(match ns {
        "process" => "runs processes",
        "http" | "HTTP" => "uses the network",
        "db" => "uses a database",
        "env" => "reads the process environment",
        "secrets" => "reads secrets",
        "fs" if FS_WRITES.contains(&p) => "writes files",
        "io" if p == "io.save" => "writes files",
        "mobile" | "Speech" | "Browser" | "Claude" | "OpenClaw" => {
            "uses a device or an outside service"
        }
        _ => return Member::Unknown,
    })
}

/// `fs` members that change files.
const FS_WRITES: &[&str] = &[
    "fs.write",
    "fs.write_file",
    "fs.write_to_file",
    "fs.mkdir",
    "fs.remove",
    "fs.remove_dir_all",
    "fs.copy",
];

// ---- the members that run ------------------------------------------------------------------

use crate::import::{FsLoader, LoadError};

/// Most entries `fs.list_dir` returns and `fs.glob` visits.
pub const MAX_FS_ENTRIES: usize = 10_000;
/// Deepest directory `fs.glob` descends to.
const MAX_GLOB_DEPTH: usize = 32;

fn load_error(e: LoadError) -> String {
    match e {
        LoadError::NotFound { .. } => "not found".into(),
        LoadError::Refused(why) => why,
    }
}

/// `path.join(a, b)`: `b` alone when it is absolute, as real Vox (`Path::join`).
pub fn path_join(a: &str, b: &str) -> String {
    if b.starts_with('/') || a.is_empty() {
        b.to_string()
    } else if a.ends_with('/') {
        format!("{a}{b}")
    } else {
        format!("{a}/{b}")
    }
}

/// `path.basename(p)`: the last component, or `""`.
pub fn basename(p: &str) -> &str {
    let t = p.trim_end_matches('/');
    match t.rsplit_once('/') {
        Some((_, b)) => b,
        None if t == ".." => "",
        None => t,
    }
}

/// `path.dirname(p)`: all but the last component, or `"."`.
pub fn dirname(p: &str) -> &str {
    let t = p.trim_end_matches('/');
    match t.rsplit_once('/') {
        Some(("", _)) => "/",
        Some((d, _)) => d,
        None => ".",
    }
}

/// `path.extension(p)`: the extension without its dot, or `""` (none for `.bashrc`).
pub fn extension(p: &str) -> &str {
    let b = basename(p);
    match b.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext,
        _ => "",
    }
}

fn no_workspace(what: &str) -> String {
    format!("`{what}` reads the workspace, and this call has no workspace to read")
}

/// `fs.read(p)`: the text of a workspace file, with the loader's rules (inside the root after
/// links, a regular file, at most its size limit, UTF-8).
pub fn fs_read(ws: Option<&FsLoader>, p: &str) -> Result<String, String> {
    let ws = ws.ok_or_else(|| no_workspace("fs.read"))?;
    let bytes = ws.read_file(p).map_err(load_error)?;
    String::from_utf8(bytes).map_err(|_| format!("`{p}` is not UTF-8 text"))
}

/// `fs.exists`, `fs.is_file`, `fs.is_dir`: false for anything outside the workspace.
pub fn fs_test(ws: Option<&FsLoader>, p: &str, what: &str) -> Result<bool, String> {
    let ws = ws.ok_or_else(|| no_workspace(what))?;
    Ok(match ws.confined(p) {
        Ok(real) => match what {
            "fs.is_file" => real.is_file(),
            "fs.is_dir" => real.is_dir(),
            _ => true,
        },
        Err(_) => false,
    })
}

/// `fs.list_dir(p)`: the entry names of a workspace directory, sorted.
pub fn fs_list_dir(ws: Option<&FsLoader>, p: &str) -> Result<Vec<String>, String> {
    let ws = ws.ok_or_else(|| no_workspace("fs.list_dir"))?;
    let real = ws.confined(p).map_err(load_error)?;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&real).map_err(|e| format!("cannot list `{p}`: {e}"))? {
        let entry = entry.map_err(|e| format!("cannot list `{p}`: {e}"))?;
        if out.len() == MAX_FS_ENTRIES {
            return Err(format!("`{p}` has more than {MAX_FS_ENTRIES} entries"));
        }
        out.push(entry.file_name().to_string_lossy().into_owned());
    }
    out.sort();
    Ok(out)
}

/// `fs.glob(pattern)`: workspace paths (relative, `/`-separated, sorted) matching `pattern`,
/// where `*` and `?` match within one path segment and a `**` segment matches any number of
/// segments. Links are not followed.
pub fn fs_glob(ws: Option<&FsLoader>, pattern: &str) -> Result<Vec<String>, String> {
    let ws = ws.ok_or_else(|| no_workspace("fs.glob"))?;
    if pattern.starts_with('/') || pattern.split('/').any(|s| s == "..") {
        return Err(format!(
            "`{pattern}` must be relative to the workspace, without `..`"
        ));
    }
    let root = ws.confined(".").map_err(load_error)?;
    let pat: Vec<&str> = pattern
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    let mut out = Vec::new();
    let mut visited = 0usize;
    let mut stack = vec![(root.clone(), String::new(), 0usize)];
    while let Some((dir, rel, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            visited += 1;
            if visited > MAX_FS_ENTRIES {
                return Err(format!(
                    "`{pattern}` visits more than {MAX_FS_ENTRIES} workspace entries"
                ));
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let segs: Vec<&str> = path.split('/').collect();
            if match_segments(&pat, &segs) {
                out.push(path.clone());
            }
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && depth < MAX_GLOB_DEPTH {
                stack.push((entry.path(), path, depth + 1));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Whether path segments match pattern segments (`**` is any number of segments).
fn match_segments(pat: &[&str], path: &[&str]) -> bool {
    match pat.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|k| match_segments(rest, &path[k..])),
        Some((p, rest)) => path.split_first().is_some_and(|(s, tail)| {
            wildcard(p.as_bytes(), s.as_bytes()) && match_segments(rest, tail)
        }),
    }
}

/// `*` and `?` within one segment, in linear time (the last `*` is the only backtrack point).
fn wildcard(p: &[u8], s: &[u8]) -> bool {
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < s.len() {
        if i < p.len() && (p[i] == b'?' || p[i] == s[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == b'*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(st) = star {
            i = st + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_like_real_vox() {
        assert_eq!(path_join("a", "b.vox"), "a/b.vox");
        assert_eq!(path_join("a/", "b"), "a/b");
        assert_eq!(path_join("a", "/etc"), "/etc");
        assert_eq!(basename("a/b.tar.gz"), "b.tar.gz");
        assert_eq!(dirname("a/b/c"), "a/b");
        assert_eq!(dirname("c"), ".");
        assert_eq!(extension("a/b.tar.gz"), "gz");
        assert_eq!(extension(".bashrc"), "");
    }

    #[test]
    fn globs_match_segments() {
        let m = |p: &str, s: &str| {
            let p: Vec<&str> = p.split('/').collect();
            let s: Vec<&str> = s.split('/').collect();
            match_segments(&p, &s)
        };
        assert!(m("**/*.vox", "a/b/c.vox"));
        assert!(m("**/*.vox", "c.vox"));
        assert!(m("tools/*.vox", "tools/x.vox"));
        assert!(!m("tools/*.vox", "tools/lib/x.vox"));
        assert!(m("t?ols/**", "tools/lib/x.vox"));
        assert!(!m("*.md", "a.vox"));
    }

    #[test]
    fn members_are_classified() {
        assert_eq!(member("std.path.join"), Member::Runs(Builtin::PathJoin));
        assert_eq!(member("path.join"), Member::Runs(Builtin::PathJoin));
        assert_eq!(member("std.process.run"), Member::Effect("runs processes"));
        assert_eq!(member("db.Post.insert"), Member::Effect("uses a database"));
        assert_eq!(member("fs.write"), Member::Effect("writes files"));
        assert_eq!(member("std.string.split"), Member::Unknown);
        assert_eq!(member("std.uuid"), Member::Runs(Builtin::Uuid));
        assert_eq!(member("log.info"), Member::Runs(Builtin::Print));
        assert_eq!(member("fs.read_file"), Member::Runs(Builtin::FsRead));
        assert_eq!(member("std.len"), Member::Unknown);
    }
}

// ---- regex ------------------------------------------------------------------------------

/// Longest pattern `regex.compile` accepts, and the compiled program's size limit: patterns
/// come from tool code and arguments, and the regex engine matches in linear time once built.
pub const MAX_PATTERN_BYTES: usize = 4096;
const MAX_REGEX_PROGRAM: usize = 1 << 20;

/// A compiled pattern (`regex.compile`), or one match of it: its groups, group 0 the whole.
#[derive(Debug)]
pub enum RegexValue {
    /// From `regex.compile(pattern)`.
    Pattern(regex::Regex),
    /// From `re.find(s)` / `re.find_all(s)`.
    Match(Vec<Option<String>>),
}

impl PartialEq for RegexValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (RegexValue::Pattern(a), RegexValue::Pattern(b)) => a.as_str() == b.as_str(),
            (RegexValue::Match(a), RegexValue::Match(b)) => a == b,
            _ => false,
        }
    }
}

impl std::fmt::Display for RegexValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegexValue::Pattern(r) => write!(f, "Regex({:?})", r.as_str()),
            RegexValue::Match(g) => write!(
                f,
                "Match({:?})",
                g.first().cloned().flatten().unwrap_or_default()
            ),
        }
    }
}

impl RegexValue {
    /// A pattern is its text; a match is the list of its groups (`null` for one that did not
    /// take part).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            RegexValue::Pattern(r) => serde_json::Value::String(r.as_str().to_string()),
            RegexValue::Match(g) => serde_json::json!(g),
        }
    }
}

/// `regex.compile(pattern)`: Rust `regex` syntax, bounded in size.
pub fn regex_compile(pattern: &str) -> Result<regex::Regex, String> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!(
            "the pattern is {} bytes; the limit is {MAX_PATTERN_BYTES}",
            pattern.len()
        ));
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX_PROGRAM)
        .dfa_size_limit(MAX_REGEX_PROGRAM)
        .nest_limit(64)
        .build()
        .map_err(|e| format!("invalid pattern: {e}"))
}

/// The groups of one match.
pub fn groups(c: &regex::Captures<'_>) -> Vec<Option<String>> {
    c.iter()
        .map(|g| g.map(|m| m.as_str().to_string()))
        .collect()
}
