//! URI templates of `@mcp.resource("notes://{id}")` (RFC 6570 level 1: `{name}` stands for one
//! non-empty run of characters other than `/`, `?` and `#`).

/// The variables of `template`, in order; an error for an unbalanced brace, an empty or
/// repeated name, or two variables with nothing between them (which no URI could split).
pub fn variables(template: &str) -> Result<Vec<&str>, String> {
    let mut vars = Vec::new();
    let mut rest = template;
    let mut literal_before = true;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err(format!("`}}` without `{{` in {template:?}"));
        }
        if open > 0 {
            literal_before = true;
        }
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| format!("`{{` without `}}` in {template:?}"))?;
        let name = &after[..close];
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!("{{{name}}} in {template:?} is not a variable name"));
        }
        if vars.contains(&name) {
            return Err(format!("{{{name}}} appears twice in {template:?}"));
        }
        if !literal_before {
            return Err(format!(
                "{{{name}}} follows another variable directly in {template:?}"
            ));
        }
        vars.push(name);
        literal_before = false;
        rest = &after[close + 1..];
    }
    Ok(vars)
}

/// Whether a URI is a template (has a variable).
pub fn is_template(uri: &str) -> bool {
    uri.contains('{')
}

/// The variables' values if `uri` matches `template` (checked with [`variables`]).
pub fn matches(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let (mut t, mut u) = (template, uri);
    loop {
        match t.find('{') {
            None => return (t == u).then_some(out),
            Some(open) => {
                u = u.strip_prefix(&t[..open])?;
                let close = t[open..].find('}')? + open;
                let name = &t[open + 1..close];
                t = &t[close + 1..];
                // The value runs to the next literal (or the end), never across `/`, `?`, `#`.
                let next = t.find('{').map_or(t, |n| &t[..n]);
                let end = if next.is_empty() {
                    u.len()
                } else {
                    u.find(next)?
                };
                let value = &u[..end];
                if value.is_empty() || value.contains(['/', '?', '#']) {
                    return None;
                }
                out.push((name.to_owned(), value.to_owned()));
                u = &u[end..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_their_variables_and_match_uris() {
        assert_eq!(variables("test://template/{id}/data").unwrap(), ["id"]);
        assert_eq!(variables("a://{x}-{y}").unwrap(), ["x", "y"]);
        assert!(variables("a://{x}{y}").is_err());
        assert!(variables("a://{x").is_err());
        assert!(variables("a://{}").is_err());
        assert!(variables("a://{x}/{x}").is_err());
        assert_eq!(
            matches("test://template/{id}/data", "test://template/123/data").unwrap(),
            [("id".to_owned(), "123".to_owned())]
        );
        assert!(matches("test://template/{id}/data", "test://template/1/2/data").is_none());
        assert!(matches("test://template/{id}/data", "test://template//data").is_none());
        assert_eq!(
            matches("a://{x}-{y}", "a://1-2").unwrap(),
            [("x".into(), "1".into()), ("y".into(), "2".into())]
        );
        assert_eq!(matches("notes://{id}", "notes://n1").unwrap()[0].1, "n1");
        assert!(matches("notes://{id}", "other://n1").is_none());
    }
}
