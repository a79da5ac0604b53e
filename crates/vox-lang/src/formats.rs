//! Text formats of Vox's standard library (`csv.*`, `toml.*`, `yaml.*`, `crypto.hash_*`), as
//! pure functions between text and JSON values; the interpreter converts those to and from Vox
//! values and charges their memory. Every parse is bounded: the text is at most what the
//! caller's memory budget allowed, and nesting deeper than [`MAX_DEPTH`] is refused before it
//! is built.

use serde_json::{Map, Value as J};

/// Deepest nesting a parsed document may have (the interpreter's values allow 128).
pub const MAX_DEPTH: usize = 100;

// ---- CSV (RFC 4180) ------------------------------------------------------------------------

/// The rows of a CSV text, each a list of cells: fields separated by `,`, records by LF or
/// CRLF; a field in double quotes may hold commas, line breaks and `""` (a quote). A final
/// line break ends the last record rather than starting an empty one.
pub fn csv_rows(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut line = 1usize;
    // Whether the current record has any character yet (an empty line is no record).
    let mut started = false;
    while let Some(c) = chars.next() {
        match c {
            '"' if field.is_empty() => {
                started = true;
                let opened = line;
                loop {
                    match chars.next() {
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            field.push('"');
                        }
                        Some('"') => break,
                        Some(ch) => {
                            if ch == '\n' {
                                line += 1;
                            }
                            field.push(ch);
                        }
                        None => {
                            return Err(format!(
                                "the quoted field opened on line {opened} is never closed"
                            ));
                        }
                    }
                }
                match chars.peek() {
                    None | Some(',' | '\n' | '\r') => {}
                    Some(other) => {
                        return Err(format!(
                            "line {line}: `{other}` after a closing quote (a field is quoted whole)"
                        ));
                    }
                }
            }
            ',' => {
                started = true;
                row.push(std::mem::take(&mut field));
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                line += 1;
                if started {
                    row.push(std::mem::take(&mut field));
                    rows.push(std::mem::take(&mut row));
                }
                started = false;
            }
            c => {
                started = true;
                field.push(c);
            }
        }
    }
    if started {
        row.push(field);
        rows.push(row);
    }
    Ok(rows)
}

/// The records of a CSV text whose first row names the columns: one object per later row,
/// keyed by column name (`column_<i>` for a cell beyond the header; a short row has fewer keys).
pub fn csv_records(text: &str) -> Result<Vec<Map<String, J>>, String> {
    let mut rows = csv_rows(text)?.into_iter();
    let header = rows.next().unwrap_or_default();
    Ok(rows
        .map(|row| {
            row.into_iter()
                .enumerate()
                .map(|(i, cell)| {
                    let key = header
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| format!("column_{i}"));
                    (key, J::String(cell))
                })
                .collect()
        })
        .collect())
}

/// The rows `csv.render` takes: a list of lists whose cells are text, numbers or bools.
pub fn csv_table(v: &J) -> Result<Vec<Vec<String>>, String> {
    let J::Array(rows) = v else {
        return Err(format!(
            "csv.render takes a list of rows, not {}",
            json_kind(v)
        ));
    };
    rows.iter()
        .enumerate()
        .map(|(r, row)| {
            let J::Array(cells) = row else {
                return Err(format!(
                    "row {r} is {}, not a list of cells",
                    json_kind(row)
                ));
            };
            cells
                .iter()
                .enumerate()
                .map(|(c, cell)| match cell {
                    J::String(s) => Ok(s.clone()),
                    J::Number(n) => Ok(n.to_string()),
                    J::Bool(b) => Ok(b.to_string()),
                    other => Err(format!(
                        "row {r}, cell {c} is {}: a cell is text, a number or a bool",
                        json_kind(other)
                    )),
                })
                .collect()
        })
        .collect()
}

/// CSV text for these rows; a cell is quoted when it holds a comma, a quote or a line break.
pub fn csv_render(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if cell.contains([',', '"', '\n', '\r']) {
                out.push('"');
                out.push_str(&cell.replace('"', "\"\""));
                out.push('"');
            } else {
                out.push_str(cell);
            }
        }
        out.push('\n');
    }
    out
}

// ---- TOML and YAML -------------------------------------------------------------------------

/// How deeply brackets and braces nest in `text`, outside quoted strings and comments (a bound
/// checked before a parser that recurses sees the text).
fn bracket_depth(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut escaped = false;
    for c in text.chars() {
        if comment {
            comment = c != '\n';
            continue;
        }
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' && q == '"' {
                escaped = true;
            } else if c == q || c == '\n' {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '#' => comment = true,
            '[' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

fn check_depth(text: &str, what: &str) -> Result<(), String> {
    if bracket_depth(text) > MAX_DEPTH {
        return Err(format!("{what} nests deeper than {MAX_DEPTH} levels"));
    }
    Ok(())
}

fn json_depth(v: &J) -> usize {
    match v {
        J::Array(a) => 1 + a.iter().map(json_depth).max().unwrap_or(0),
        J::Object(o) => 1 + o.values().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A TOML document as JSON: tables are objects, date-times their RFC 3339 text.
pub fn toml_parse(text: &str) -> Result<J, String> {
    check_depth(text, "the TOML document")?;
    let doc: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().to_string())?;
    Ok(from_toml(toml::Value::Table(doc)))
}

fn from_toml(v: toml::Value) -> J {
    match v {
        toml::Value::String(s) => J::String(s),
        toml::Value::Integer(i) => J::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
        toml::Value::Boolean(b) => J::Bool(b),
        toml::Value::Datetime(d) => J::String(d.to_string()),
        toml::Value::Array(a) => J::Array(a.into_iter().map(from_toml).collect()),
        toml::Value::Table(t) => J::Object(t.into_iter().map(|(k, v)| (k, from_toml(v))).collect()),
    }
}

/// TOML text for a JSON object (a TOML document is a table; TOML has no null).
pub fn toml_render(v: &J) -> Result<String, String> {
    if json_depth(v) > MAX_DEPTH {
        return Err(format!("the value nests deeper than {MAX_DEPTH} levels"));
    }
    let toml::Value::Table(t) = to_toml(v, "")? else {
        return Err(format!(
            "a TOML document is a table (a map or record), not {}",
            json_kind(v)
        ));
    };
    toml::to_string(&t).map_err(|e| e.to_string())
}

fn to_toml(v: &J, at: &str) -> Result<toml::Value, String> {
    Ok(match v {
        J::Null => {
            let at = if at.is_empty() { "the value" } else { at };
            return Err(format!("TOML has no null ({at} is None)"));
        }
        J::Bool(b) => toml::Value::Boolean(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) => toml::Value::Integer(i),
            None => toml::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => toml::Value::String(s.clone()),
        J::Array(a) => toml::Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| to_toml(x, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        J::Object(o) => toml::Value::Table(
            o.iter()
                .map(|(k, x)| {
                    let path = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    Ok((k.clone(), to_toml(x, &path)?))
                })
                .collect::<Result<_, String>>()?,
        ),
    })
}

fn json_kind(v: &J) -> &'static str {
    match v {
        J::Null => "None",
        J::Bool(_) => "a bool",
        J::Number(_) => "a number",
        J::String(_) => "a str",
        J::Array(_) => "a list",
        J::Object(_) => "a map",
    }
}

/// A YAML document as JSON (one document; mapping keys must be strings).
pub fn yaml_parse(text: &str) -> Result<J, String> {
    check_depth(text, "the YAML document")?;
    // Indentation nests too: bounded by the same limit, counted in two-space steps.
    let indent = text
        .lines()
        .map(|l| l.len() - l.trim_start_matches([' ', '-']).len())
        .max()
        .unwrap_or(0);
    if indent / 2 > MAX_DEPTH {
        return Err(format!(
            "the YAML document nests deeper than {MAX_DEPTH} levels"
        ));
    }
    let v: J = serde_norway::from_str(text).map_err(|e| e.to_string())?;
    if json_depth(&v) > MAX_DEPTH {
        return Err(format!(
            "the YAML document nests deeper than {MAX_DEPTH} levels"
        ));
    }
    Ok(v)
}

/// YAML text for a JSON value.
pub fn yaml_render(v: &J) -> Result<String, String> {
    if json_depth(v) > MAX_DEPTH {
        return Err(format!("the value nests deeper than {MAX_DEPTH} levels"));
    }
    serde_norway::to_string(v).map_err(|e| e.to_string())
}

// ---- hashes --------------------------------------------------------------------------------

/// `crypto.hash_secure(s)`: SHA-256 of the UTF-8 text, lowercase hex.
pub fn hash_secure(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `crypto.hash_fast(s)`: 64-bit FNV-1a of the UTF-8 text, 16 lowercase hex digits; the same
/// on every run and machine, not cryptographic.
pub fn hash_fast(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn csv_reads_quotes_line_breaks_and_crlf() {
        let rows = csv_rows("a,b\r\n\"x, y\",\"say \"\"hi\"\"\"\n\"two\nlines\",\n\n").unwrap();
        assert_eq!(
            rows,
            vec![
                vec!["a", "b"],
                vec!["x, y", "say \"hi\""],
                vec!["two\nlines", ""]
            ]
        );
        assert_eq!(csv_rows("").unwrap(), Vec::<Vec<String>>::new());
        assert_eq!(csv_rows("last").unwrap(), vec![vec!["last"]]);
        let e = csv_rows("a\n\"open,\nb").unwrap_err();
        assert!(e.contains("opened on line 2 is never closed"), "{e}");
        let e = csv_rows("\"a\"b").unwrap_err();
        assert!(e.contains("after a closing quote"), "{e}");
    }

    #[test]
    fn csv_renders_what_it_reads() {
        let rows = vec![
            vec!["name".to_string(), "note".to_string()],
            vec![
                "Ada".to_string(),
                "says \"hi\", twice\nand more".to_string(),
            ],
        ];
        let text = csv_render(&rows);
        assert_eq!(
            text,
            "name,note\nAda,\"says \"\"hi\"\", twice\nand more\"\n"
        );
        assert_eq!(csv_rows(&text).unwrap(), rows);
    }

    #[test]
    fn csv_records_key_cells_by_the_header() {
        let r = csv_records("id,name\n1,Ada\n2,Bob,extra\n3\n").unwrap();
        assert_eq!(
            J::Array(r.into_iter().map(J::Object).collect()),
            json!([
                {"id": "1", "name": "Ada"},
                {"id": "2", "name": "Bob", "column_2": "extra"},
                {"id": "3"}
            ])
        );
    }

    #[test]
    fn toml_round_trips_and_names_what_it_cannot_write() {
        let v = toml_parse("title = \"x\"\n[owner]\nborn = 1979-05-27T07:32:00Z\nn = [1, 2.5]\n")
            .unwrap();
        assert_eq!(
            v,
            json!({"title": "x", "owner": {"born": "1979-05-27T07:32:00Z", "n": [1, 2.5]}})
        );
        let text = toml_render(&json!({"a": {"b": [1, 2]}, "c": "d"})).unwrap();
        assert_eq!(
            toml_parse(&text).unwrap(),
            json!({"a": {"b": [1, 2]}, "c": "d"})
        );
        let e = toml_render(&json!({"a": {"b": null}})).unwrap_err();
        assert!(e.contains("a.b is None"), "{e}");
        let e = toml_render(&json!([1])).unwrap_err();
        assert!(e.contains("is a table"), "{e}");
        let e = toml_parse("a = ").unwrap_err();
        assert!(!e.is_empty());
    }

    #[test]
    fn yaml_round_trips() {
        let v = yaml_parse("name: vox\nlist:\n  - 1\n  - two\nnested: {a: true}\n").unwrap();
        assert_eq!(
            v,
            json!({"name": "vox", "list": [1, "two"], "nested": {"a": true}})
        );
        assert_eq!(yaml_parse(&yaml_render(&v).unwrap()).unwrap(), v);
        assert!(yaml_parse("a: [1, 2").is_err());
    }

    #[test]
    fn deep_documents_are_refused_before_they_are_built() {
        let deep = format!("a = {}{}", "[".repeat(5000), "]".repeat(5000));
        assert!(toml_parse(&deep).unwrap_err().contains("deeper than"));
        let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
        assert!(yaml_parse(&deep).unwrap_err().contains("deeper than"));
        let deep: String = (0..300)
            .map(|i| format!("{}k:\n", "  ".repeat(i)))
            .collect();
        assert!(yaml_parse(&deep).unwrap_err().contains("deeper than"));
        // Brackets inside strings and comments do not count.
        let quoted = format!("a = \"{}\" # {}\n", "[".repeat(500), "{".repeat(500));
        assert_eq!(
            toml_parse(&quoted).unwrap()["a"].as_str().unwrap().len(),
            500
        );
    }

    #[test]
    fn hashes_are_the_known_digests() {
        assert_eq!(
            hash_secure("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hash_fast(""), "cbf29ce484222325");
        assert_eq!(hash_fast("a"), "af63dc4c8601ec8c");
    }
}
