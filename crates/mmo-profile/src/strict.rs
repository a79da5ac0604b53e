//! Strict TOML reading: every key is consumed explicitly, unknown keys are reported with their
//! key path, and types are never coerced (a boolean is not an integer, `"1"` is not 1).
//!
//! This walks a parsed `toml::Table` by hand instead of using serde's `deny_unknown_fields`
//! because serde stops at the first error, while a pack must report all of its problems at once.

use crate::diag::{Diags, join_key};
use std::cell::RefCell;
use std::collections::BTreeSet;
use toml::{Table, Value};

/// Parse TOML text into a table, reporting a syntax error against the file.
pub fn parse_table(file: &str, text: &str, diags: &mut Diags) -> Option<Table> {
    match text.parse::<Table>() {
        Ok(t) => Some(t),
        Err(e) => {
            // toml's Display quotes the whole source line, which can be a megabyte; report the
            // position and the message instead.
            let at = e.span().map(|r| {
                let before = &text[..r.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
                format!("line {line}, column {col}: ")
            });
            let message = e.message().trim().replace('\n', " ");
            diags.push(
                file,
                "",
                "toml_syntax",
                format!("{}{message}", at.unwrap_or_default()),
            );
            None
        }
    }
}

/// The TOML type name used in messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Integer(_) => "integer",
        Value::Float(_) => "float",
        Value::Boolean(_) => "boolean",
        Value::Datetime(_) => "datetime",
        Value::Array(_) => "array",
        Value::Table(_) => "table",
    }
}

/// A table being read, remembering which keys were consumed.
pub struct Tbl<'t> {
    file: String,
    path: String,
    table: &'t Table,
    used: RefCell<BTreeSet<String>>,
}

impl<'t> Tbl<'t> {
    /// Start reading `table`, which lives at `path` in `file`.
    pub fn new(file: &str, path: &str, table: &'t Table) -> Self {
        Tbl {
            file: file.to_string(),
            path: path.to_string(),
            table,
            used: RefCell::new(BTreeSet::new()),
        }
    }

    /// Key path of a member.
    pub fn key(&self, k: &str) -> String {
        join_key(&self.path, k)
    }

    /// This table's own key path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether the key is present (marks it consumed).
    pub fn has(&self, k: &str) -> bool {
        self.used.borrow_mut().insert(k.to_string());
        self.table.contains_key(k)
    }

    fn raw(&self, k: &str) -> Option<&'t Value> {
        self.used.borrow_mut().insert(k.to_string());
        self.table.get(k)
    }

    fn wrong(&self, d: &mut Diags, k: &str, want: &str, got: &Value) {
        d.push(
            &self.file,
            self.key(k),
            "toml_wrong_type",
            format!("expected {want}, found {}", type_name(got)),
        );
    }

    /// Report a problem at a member key.
    pub fn err(&self, d: &mut Diags, k: &str, rule: &'static str, msg: impl Into<String>) {
        d.push(&self.file, self.key(k), rule, msg);
    }

    /// A required key was absent.
    pub fn missing(&self, d: &mut Diags, k: &str) {
        d.push(
            &self.file,
            self.key(k),
            "toml_missing_key",
            format!("required key `{k}` is missing"),
        );
    }

    /// Optional string.
    pub fn str(&self, d: &mut Diags, k: &str) -> Option<String> {
        match self.raw(k)? {
            Value::String(s) => Some(s.clone()),
            v => {
                self.wrong(d, k, "a string", v);
                None
            }
        }
    }

    /// Required string.
    pub fn req_str(&self, d: &mut Diags, k: &str) -> Option<String> {
        if !self.table.contains_key(k) {
            self.missing(d, k);
            self.used.borrow_mut().insert(k.to_string());
            return None;
        }
        self.str(d, k)
    }

    /// Optional integer (never a boolean, float or string).
    pub fn int(&self, d: &mut Diags, k: &str) -> Option<i64> {
        match self.raw(k)? {
            Value::Integer(i) => Some(*i),
            v => {
                self.wrong(d, k, "an integer", v);
                None
            }
        }
    }

    /// Optional integer within an inclusive range.
    pub fn int_in(
        &self,
        d: &mut Diags,
        k: &str,
        lo: i64,
        hi: i64,
        rule: &'static str,
    ) -> Option<i64> {
        let v = self.int(d, k)?;
        if v < lo || v > hi {
            self.err(d, k, rule, format!("{v} is outside {lo}..={hi}"));
            return None;
        }
        Some(v)
    }

    /// Integer within an inclusive `u32` range, or `default` when absent or rejected (the
    /// rejection is already recorded, so the default only lets checking continue).
    pub fn u32_in(
        &self,
        d: &mut Diags,
        k: &str,
        lo: u32,
        hi: u32,
        rule: &'static str,
        default: u32,
    ) -> u32 {
        self.int_in(d, k, i64::from(lo), i64::from(hi), rule)
            .map_or(default, |v| v as u32)
    }

    /// Optional boolean.
    pub fn bool(&self, d: &mut Diags, k: &str) -> Option<bool> {
        match self.raw(k)? {
            Value::Boolean(b) => Some(*b),
            v => {
                self.wrong(d, k, "a boolean", v);
                None
            }
        }
    }

    /// Optional array of strings; duplicates are rejected because every list here is a set.
    pub fn str_list(&self, d: &mut Diags, k: &str) -> Option<Vec<String>> {
        let v = self.raw(k)?;
        let Value::Array(items) = v else {
            self.wrong(d, k, "an array of strings", v);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) => {
                    if out.contains(s) {
                        d.push(
                            &self.file,
                            format!("{}[{i}]", self.key(k)),
                            "toml_duplicate_item",
                            format!("`{s}` is listed twice"),
                        );
                        ok = false;
                    } else {
                        out.push(s.clone());
                    }
                }
                other => {
                    d.push(
                        &self.file,
                        format!("{}[{i}]", self.key(k)),
                        "toml_wrong_type",
                        format!("expected a string, found {}", type_name(other)),
                    );
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    /// Optional string from a closed set.
    pub fn enum_str(
        &self,
        d: &mut Diags,
        k: &str,
        allowed: &[&str],
        rule: &'static str,
    ) -> Option<String> {
        let s = self.str(d, k)?;
        if allowed.contains(&s.as_str()) {
            Some(s)
        } else {
            self.err(
                d,
                k,
                rule,
                format!("`{s}` is not one of {}", allowed.join(", ")),
            );
            None
        }
    }

    /// Optional list whose items come from a closed set.
    pub fn enum_list(
        &self,
        d: &mut Diags,
        k: &str,
        allowed: &[&str],
        rule: &'static str,
    ) -> Option<Vec<String>> {
        let list = self.str_list(d, k)?;
        let mut ok = true;
        for (i, s) in list.iter().enumerate() {
            if !allowed.contains(&s.as_str()) {
                d.push(
                    &self.file,
                    format!("{}[{i}]", self.key(k)),
                    rule,
                    format!("`{s}` is not one of {}", allowed.join(", ")),
                );
                ok = false;
            }
        }
        ok.then_some(list)
    }

    /// Optional sub-table.
    pub fn table(&self, d: &mut Diags, k: &str) -> Option<Tbl<'t>> {
        match self.raw(k)? {
            Value::Table(t) => Some(Tbl::new(&self.file, &self.key(k), t)),
            v => {
                self.wrong(d, k, "a table", v);
                None
            }
        }
    }

    /// Optional array of tables.
    pub fn table_array(&self, d: &mut Diags, k: &str) -> Option<Vec<Tbl<'t>>> {
        let v = self.raw(k)?;
        let Value::Array(items) = v else {
            self.wrong(d, k, "an array of tables", v);
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::Table(t) => {
                    out.push(Tbl::new(&self.file, &format!("{}[{i}]", self.key(k)), t))
                }
                other => d.push(
                    &self.file,
                    format!("{}[{i}]", self.key(k)),
                    "toml_wrong_type",
                    format!("expected a table, found {}", type_name(other)),
                ),
            }
        }
        Some(out)
    }

    /// Members of this table as sub-tables keyed by name (for `[agents.<id>]`-style maps).
    pub fn entries(&self, d: &mut Diags) -> Vec<(String, Tbl<'t>)> {
        let mut out = Vec::new();
        for (k, v) in self.table {
            self.used.borrow_mut().insert(k.clone());
            match v {
                Value::Table(t) => out.push((k.clone(), Tbl::new(&self.file, &self.key(k), t))),
                other => self.wrong(d, k, "a table", other),
            }
        }
        out
    }

    /// Report every key nobody consumed: the strict `deny_unknown_fields` behaviour.
    pub fn finish(&self, d: &mut Diags) {
        let used = self.used.borrow();
        for k in self.table.keys() {
            if !used.contains(k) {
                d.push(
                    &self.file,
                    self.key(k),
                    "toml_unknown_field",
                    format!("unknown field `{k}`"),
                );
            }
        }
    }
}
