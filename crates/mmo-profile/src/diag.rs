//! Diagnostics: every rejection names a file, a key path (or JSON pointer) and a stable rule id.

use serde::Serialize;
use std::fmt;

/// One problem found in a pack, a catalog, a registry file or the store.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Diagnostic {
    /// Path of the file relative to the pack (or absolute for operator files).
    pub file: String,
    /// 1-based line of the key (or of its deepest existing ancestor), when it can be located.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// TOML key path (`agents.lead.model`) or JSON pointer (`/properties/x`); empty for the file itself.
    pub path: String,
    /// Stable snake_case rule id; tests and tools match on it, so never rename one.
    pub rule: &'static str,
    /// Human explanation.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: ", self.file)?,
            None => write!(f, "{}: ", self.file)?,
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "[{}] {}", self.rule, self.message)
    }
}

/// An accumulator, so a pack reports all of its problems at once rather than the first.
#[derive(Debug, Default, Clone)]
pub struct Diags {
    items: Vec<Diagnostic>,
}

impl Diags {
    /// Record one problem.
    pub fn push(
        &mut self,
        file: impl Into<String>,
        path: impl Into<String>,
        rule: &'static str,
        message: impl Into<String>,
    ) {
        self.items.push(Diagnostic {
            file: file.into(),
            line: None,
            path: path.into(),
            rule,
            message: message.into(),
        });
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of problems recorded so far.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Sorted, deduplicated problems, so output is stable run to run.
    pub fn into_sorted(mut self) -> Vec<Diagnostic> {
        self.items.sort();
        self.items.dedup();
        self.items
    }

    /// Fill in line numbers for problems in `file`, whose text is `text`.
    pub fn attach_lines(&mut self, file: &str, text: &str) {
        for d in self
            .items
            .iter_mut()
            .filter(|d| d.file == file && d.line.is_none())
        {
            d.line = crate::locate::line_of(text, &d.path);
        }
    }
}

/// A failed operation carrying every problem found.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", render(.0))]
pub struct Rejected(pub Vec<Diagnostic>);

impl Rejected {
    /// Whether any diagnostic carries this rule id.
    pub fn has_rule(&self, rule: &str) -> bool {
        self.0.iter().any(|d| d.rule == rule)
    }

    /// A rejection with a single problem.
    pub fn one(
        file: impl Into<String>,
        path: impl Into<String>,
        rule: &'static str,
        message: impl Into<String>,
    ) -> Self {
        let mut d = Diags::default();
        d.push(file, path, rule, message);
        Rejected(d.into_sorted())
    }
}

fn render(items: &[Diagnostic]) -> String {
    let mut s = format!("{} problem(s):", items.len());
    for d in items {
        s.push_str("\n  ");
        s.push_str(&d.to_string());
    }
    s
}

/// Join a key path segment onto a TOML key path, quoting keys that are not bare.
pub fn join_key(base: &str, key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let seg = if bare {
        key.to_string()
    } else {
        format!("{key:?}")
    };
    if base.is_empty() {
        seg
    } else {
        format!("{base}.{seg}")
    }
}
