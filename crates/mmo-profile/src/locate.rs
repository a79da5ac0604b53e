//! Line numbers for key paths: diagnostics are produced against key paths, and this resolves a
//! path back to where its deepest existing key is written, using toml's spanned parse.

use toml::de::{DeTable, DeValue};

enum Seg {
    Key(String),
    Index(usize),
}

/// Split `agents.lead.can_spawn[1]` or `agents."odd key".x` into segments.
fn split(path: &str) -> Option<Vec<Seg>> {
    let mut out = Vec::new();
    let mut chars = path.chars().peekable();
    while chars.peek().is_some() {
        match chars.peek() {
            Some('"') => {
                chars.next();
                let mut k = String::new();
                loop {
                    match chars.next()? {
                        '\\' => k.push(chars.next()?),
                        '"' => break,
                        c => k.push(c),
                    }
                }
                out.push(Seg::Key(k));
            }
            Some('[') => {
                chars.next();
                let n: String = chars.by_ref().take_while(|c| *c != ']').collect();
                out.push(Seg::Index(n.parse().ok()?));
            }
            Some('.') => {
                chars.next();
            }
            _ => {
                let mut k = String::new();
                while let Some(&c) = chars.peek() {
                    if c == '.' || c == '[' {
                        break;
                    }
                    k.push(c);
                    chars.next();
                }
                out.push(Seg::Key(k));
            }
        }
    }
    Some(out)
}

/// 1-based line of the deepest key of `path` present in `text`, if any.
pub fn line_of(text: &str, path: &str) -> Option<usize> {
    if path.is_empty() {
        return None;
    }
    let root = DeTable::parse(text).ok()?;
    let mut best = None;
    let mut table: Option<&DeTable> = Some(root.get_ref());
    let mut value: Option<&DeValue> = None;
    for seg in split(path)? {
        match seg {
            Seg::Key(k) => {
                let t = match (table, value) {
                    (Some(t), None) => t,
                    (_, Some(DeValue::Table(t))) => t,
                    _ => break,
                };
                let Some((key, v)) = t.iter().find(|(key, _)| key.get_ref().as_ref() == k) else {
                    break;
                };
                best = Some(key.span().start);
                table = None;
                value = Some(v.get_ref());
            }
            Seg::Index(i) => {
                let Some(DeValue::Array(a)) = value else {
                    break;
                };
                let Some(item) = a.get(i) else { break };
                best = Some(item.span().start);
                value = Some(item.get_ref());
            }
        }
    }
    best.map(|off| text[..off.min(text.len())].matches('\n').count() + 1)
}

#[cfg(test)]
mod tests {
    use super::line_of;

    #[test]
    fn key_paths_resolve_to_their_lines() {
        let t = "a = 1\n[agents.lead]\nmodel = \"x\"\ncan_spawn = [\n  \"r\",\n  \"s\",\n]\n[agents.\"odd key\"]\nz = 1\n";
        assert_eq!(line_of(t, "a"), Some(1));
        assert_eq!(line_of(t, "agents.lead.model"), Some(3));
        assert_eq!(line_of(t, "agents.lead.can_spawn[1]"), Some(6));
        assert_eq!(line_of(t, "agents.\"odd key\".z"), Some(9));
        // A missing key points at its deepest existing ancestor.
        assert_eq!(line_of(t, "agents.lead.missing"), Some(2));
        assert_eq!(line_of(t, ""), None);
    }
}
