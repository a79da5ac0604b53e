//! `elicit(message, schema)` and `sample(messages[, max_tokens])`: a tool asks the caller's
//! client, through [`ToolEvents::ask`](crate::ToolEvents::ask), for the user's answer
//! (`elicitation/create`) or the client's model's (`sampling/createMessage`). The call waits
//! for the answer within its wall-time budget and stops waiting when it is cancelled.

use crate::diag::Span;
use crate::interp::{Interp, R, rt};
use crate::value::Value;
use serde_json::{Value as J, json};

/// Why a client request got no answer (what a [`ToolEvents`](crate::ToolEvents) reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskFailure {
    /// This call's transport or client cannot be asked; the text says why.
    Unsupported(String),
    /// The client answered with an error or went away.
    Failed(String),
    /// No answer within the time the call had left.
    TimedOut,
    /// The call was cancelled while waiting.
    Cancelled,
}

/// Which request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskKind {
    /// `elicitation/create`.
    Elicit,
    /// `sampling/createMessage`.
    Sample,
}

/// Most tokens `sample` asks for when the tool does not say.
pub const DEFAULT_MAX_TOKENS: i64 = 1000;

fn to_json(interp: &mut Interp<'_>, v: &Value, span: Span) -> R<J> {
    interp.charge_display(v, span)?;
    crate::json::value_to_json(interp.p, v).map_err(|e| rt(e, span))
}

/// `elicit(message, schema)`: `{action: "accept" | "decline" | "cancel", content}` (`content`
/// is the user's answer when accepted, else `None`). `schema` is the form's JSON schema, an
/// object schema of primitive properties (`{properties: {name: {"type": "string"}}}`; `type`
/// may be left out).
pub(crate) fn elicit(interp: &mut Interp<'_>, args: &[Value], span: Span) -> R {
    let Value::Str(message) = &args[0] else {
        return Err(rt(
            format!(
                "elicit's message must be a str, found `{}`",
                args[0].type_name()
            ),
            span,
        ));
    };
    let mut schema = to_json(interp, &args[1], span)?;
    let Some(obj) = schema.as_object_mut() else {
        return Err(rt(
            "elicit's schema must be a map: an object schema such as {properties: {name: {type: \"string\"}}}",
            span,
        ));
    };
    obj.entry("type").or_insert(json!("object"));
    if !obj.get("properties").is_some_and(J::is_object) {
        return Err(rt(
            "elicit's schema needs `properties`, a map from each field to its schema",
            span,
        ));
    }
    let params = json!({"message": message.as_str(), "requestedSchema": schema});
    let answer = interp.ask(AskKind::Elicit, params, span)?;
    let action = match answer.get("action").and_then(J::as_str) {
        Some(a @ ("accept" | "decline" | "cancel")) => a.to_owned(),
        _ => {
            return Err(rt(
                "the client answered the elicitation without an action (accept, decline or cancel)",
                span,
            ));
        }
    };
    let content = match answer.get("content") {
        Some(c) if action == "accept" => c.clone(),
        _ => J::Null,
    };
    let out = crate::json::json_to_value(&json!({"action": action, "content": content}));
    interp.fresh(out, span)
}

/// `sample(messages[, max_tokens])`: the text the client's model answers. `messages` is a str
/// (one user message) or a list of `{role, content}` maps whose content is a str or a content
/// block (`content.text(…)`, `content.image(…)`).
pub(crate) fn sample(interp: &mut Interp<'_>, args: &[Value], span: Span) -> R {
    let messages = match &args[0] {
        Value::Str(s) => json!([{"role": "user", "content": {"type": "text", "text": s.as_str()}}]),
        other => {
            let j = to_json(interp, other, span)?;
            let J::Array(items) = j else {
                return Err(rt(
                    format!(
                        "sample's messages must be a str or a list of {{role, content}} maps, found `{}`",
                        other.type_name()
                    ),
                    span,
                ));
            };
            let mut out = Vec::with_capacity(items.len());
            for (i, m) in items.into_iter().enumerate() {
                out.push(
                    message(m).map_err(|why| rt(format!("sample's messages[{i}] {why}"), span))?,
                );
            }
            J::Array(out)
        }
    };
    let max_tokens = match args.get(1) {
        None => DEFAULT_MAX_TOKENS,
        Some(Value::Int(n)) if *n > 0 => *n,
        Some(other) => {
            return Err(rt(
                format!(
                    "sample's max_tokens must be a positive int, found {}",
                    interp.display(other)
                ),
                span,
            ));
        }
    };
    let params = json!({"messages": messages, "maxTokens": max_tokens});
    let answer = interp.ask(AskKind::Sample, params, span)?;
    let text = answer_text(&answer["content"]).ok_or_else(|| {
        rt(
            format!(
                "the client's model answered without text: {}",
                answer["content"]
                    .to_string()
                    .chars()
                    .take(200)
                    .collect::<String>()
            ),
            span,
        )
    })?;
    interp.string(text, span)
}

/// One sampling message from `{role, content}`.
fn message(m: J) -> Result<J, String> {
    let J::Object(mut o) = m else {
        return Err("must be a {role, content} map".into());
    };
    if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "role" | "content")) {
        return Err(format!(
            "has an unknown key `{k}` (a message has role and content)"
        ));
    }
    match o.get("role").and_then(J::as_str) {
        Some("user" | "assistant") => {}
        _ => return Err("needs role \"user\" or \"assistant\"".into()),
    }
    let content = match o.remove("content") {
        Some(J::String(s)) => json!({"type": "text", "text": s}),
        Some(block @ J::Object(_)) if block.get("type").is_some_and(J::is_string) => block,
        _ => return Err("needs content: a str or a content block".into()),
    };
    o.insert("content".into(), content);
    Ok(J::Object(o))
}

/// The text of a sampling answer's content: one text block, or the text blocks of a list.
fn answer_text(content: &J) -> Option<String> {
    match content {
        J::Object(b) if b.get("type").and_then(J::as_str) == Some("text") => {
            b.get("text").and_then(J::as_str).map(str::to_owned)
        }
        J::Array(blocks) => {
            let texts: Vec<String> = blocks.iter().filter_map(answer_text).collect();
            (!texts.is_empty()).then(|| texts.join(""))
        }
        _ => None,
    }
}
