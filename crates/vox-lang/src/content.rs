//! MCP content blocks made by a tool (`content.text`, `content.image`, `content.audio`,
//! `content.resource`, `content.blob`, `content.link`). A tool that returns one block, or a
//! non-empty list of blocks, answers with those blocks as its MCP `content` instead of a
//! JSON value ([`crate::CallOutput::content`]).

use serde_json::{Value as J, json};
use std::fmt;

/// One content block, as MCP's JSON; built only by the functions below, so always well formed.
#[derive(Clone, Debug, PartialEq)]
pub struct Content(pub J);

impl fmt::Display for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.0["type"].as_str().unwrap_or("?");
        match kind {
            "text" => write!(f, "<text content>"),
            STRUCTURED => write!(f, "<structured content>"),
            "resource_link" => write!(
                f,
                "<resource link {}>",
                self.0["uri"].as_str().unwrap_or("")
            ),
            "resource" => write!(
                f,
                "<embedded resource {}>",
                self.0["resource"]["uri"].as_str().unwrap_or("")
            ),
            _ => write!(
                f,
                "<{kind} content {}>",
                self.0["mimeType"].as_str().unwrap_or("")
            ),
        }
    }
}

/// `type/subtype`, as MIME types are written.
fn mime(m: &str) -> Result<&str, String> {
    let ok = m.len() <= 255
        && m.split_once('/').is_some_and(|(t, s)| {
            !t.is_empty() && !s.is_empty() && m.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
        });
    if ok {
        Ok(m)
    } else {
        Err(format!(
            "{m:?} is not a MIME type (`type/subtype`, such as `image/png`)"
        ))
    }
}

/// Standard base64 with padding, as MCP carries binary data.
fn base64(data: &str, what: &str) -> Result<(), String> {
    let ok = data.len().is_multiple_of(4)
        && data
            .trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        && data.len() - data.trim_end_matches('=').len() <= 2;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} must be standard base64 (A–Z, a–z, 0–9, `+`, `/`, `=` padding)"
        ))
    }
}

fn uri(u: &str) -> Result<&str, String> {
    match u.split_once(':') {
        Some((scheme, _))
            if !scheme.is_empty()
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b)) =>
        {
            Ok(u)
        }
        _ => Err(format!(
            "{u:?} is not a URI (`scheme:…`, such as `file:///a.txt`)"
        )),
    }
}

/// The `type` of the block `content.data` makes: not an MCP content type; the transports
/// answer it as the call's `structuredContent` (MCP) beside the other blocks.
pub const STRUCTURED: &str = "structured";

/// `content.data(value)`: the call's structured result, given with its content blocks.
pub fn data(value: J) -> Content {
    Content(json!({"type": STRUCTURED, "structured": value}))
}

/// `content.text(text)`.
pub fn text(t: &str) -> Content {
    Content(json!({"type": "text", "text": t}))
}

/// `content.image(data, mime)` and `content.audio(data, mime)`: base64 data.
pub fn media(kind: &str, data: &str, mime_type: &str) -> Result<Content, String> {
    base64(data, &format!("content.{kind}'s data"))?;
    Ok(Content(
        json!({"type": kind, "data": data, "mimeType": mime(mime_type)?}),
    ))
}

/// `content.resource(uri, text[, mime])`: an embedded text resource (`text/plain` by default).
pub fn resource(u: &str, t: &str, mime_type: &str) -> Result<Content, String> {
    Ok(Content(json!({"type": "resource", "resource": {
        "uri": uri(u)?, "mimeType": mime(mime_type)?, "text": t}})))
}

/// `content.blob(uri, data, mime)`: an embedded binary resource (base64 data).
pub fn blob(u: &str, data: &str, mime_type: &str) -> Result<Content, String> {
    base64(data, "content.blob's data")?;
    Ok(Content(json!({"type": "resource", "resource": {
        "uri": uri(u)?, "mimeType": mime(mime_type)?, "blob": data}})))
}

/// `content.link(uri, name[, mime])`: a link to a resource the client may read.
pub fn link(u: &str, name: &str, mime_type: Option<&str>) -> Result<Content, String> {
    let mut v = json!({"type": "resource_link", "uri": uri(u)?, "name": name});
    if let Some(m) = mime_type {
        v["mimeType"] = json!(mime(m)?);
    }
    Ok(Content(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_checked_where_they_are_made() {
        assert!(media("image", "iVBORw0KGgo=", "image/png").is_ok());
        assert!(media("image", "not base64!", "image/png").is_err());
        assert!(media("image", "iVBORw0KGgo=", "png").is_err());
        assert!(resource("test://x", "t", "text/plain").is_ok());
        assert!(resource("no scheme", "t", "text/plain").is_err());
        assert!(blob("test://b", "AAE=", "application/octet-stream").is_ok());
        assert_eq!(
            link("file:///a", "a", None).unwrap().0,
            json!({"type": "resource_link", "uri": "file:///a", "name": "a"})
        );
    }
}
