//! The Responses API's server-sent events for a planned answer.

use crate::script::{Out, Plan};
use serde_json::{Value, json};

/// One piece of the answer stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    /// `event: <name>\ndata: <json>\n\n`
    Event(String),
    /// Sleep this many milliseconds before the next chunk.
    Delay(u64),
    /// Stop here and keep the connection open.
    Hang,
}

fn event(name: &str, mut data: Value) -> Chunk {
    data["type"] = json!(name);
    Chunk::Event(format!("event: {name}\ndata: {data}\n\n"))
}

/// The whole stream for `plan`, answering request number `seq`.
pub fn chunks(plan: &Plan, seq: u64, model: &str) -> Vec<Chunk> {
    let resp_id = format!("resp_{seq}");
    let mut out = vec![event(
        "response.created",
        json!({"response": {"id": resp_id, "object": "response", "status": "in_progress",
                            "model": model, "output": []}}),
    )];
    let mut done_items = vec![];
    for o in &plan.outputs {
        let index = done_items.len();
        match o {
            Out::Delay(ms) => out.push(Chunk::Delay(*ms)),
            Out::Hang => {
                out.push(Chunk::Hang);
                return out;
            }
            Out::Message(text) => {
                let id = format!("msg_{seq}_{index}");
                out.push(event(
                    "response.output_item.added",
                    json!({"output_index": index, "item": {"type": "message", "id": id,
                           "role": "assistant", "status": "in_progress", "content": []}}),
                ));
                out.push(event(
                    "response.content_part.added",
                    json!({"item_id": id, "output_index": index, "content_index": 0,
                           "part": {"type": "output_text", "text": "", "annotations": []}}),
                ));
                out.push(event(
                    "response.output_text.delta",
                    json!({"item_id": id, "output_index": index, "content_index": 0,
                           "delta": text}),
                ));
                out.push(event(
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0,
                           "text": text}),
                ));
                let item = json!({"type": "message", "id": id, "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]});
                out.push(event(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item}),
                ));
                done_items.push(item);
            }
            Out::Call {
                name,
                namespace,
                arguments,
            } => {
                let id = format!("fc_{seq}_{index}");
                let call_id = format!("call_{seq}_{index}");
                let mut item = json!({"type": "function_call", "id": id, "call_id": call_id,
                                      "name": name, "arguments": "", "status": "in_progress"});
                if let Some(ns) = namespace {
                    item["namespace"] = json!(ns);
                }
                out.push(event(
                    "response.output_item.added",
                    json!({"output_index": index, "item": item.clone()}),
                ));
                out.push(event(
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": index, "delta": arguments}),
                ));
                out.push(event(
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": index, "arguments": arguments}),
                ));
                item["arguments"] = json!(arguments);
                item["status"] = json!("completed");
                out.push(event(
                    "response.output_item.done",
                    json!({"output_index": index, "item": item.clone()}),
                ));
                done_items.push(item);
            }
        }
    }
    out.push(event(
        "response.completed",
        json!({"response": {"id": resp_id, "object": "response", "status": "completed",
                            "model": model, "output": done_items,
                            "usage": plan.usage.to_json()}}),
    ));
    out
}

/// A message's text as the pieces a streaming model sends: word by word, each with the space
/// after it, so a client sees many deltas.
fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c == ' ' {
            out.push(&text[start..=i]);
            start = i + 1;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

fn data_only(data: Value) -> Chunk {
    Chunk::Event(format!("data: {data}\n\n"))
}

/// The whole stream for `plan` in OpenAI's Chat Completions form (`stream: true`): one
/// `chat.completion.chunk` per text piece or tool call, a last chunk with its `finish_reason`,
/// a usage chunk (as with `stream_options.include_usage`), then `data: [DONE]`.
pub fn chat_chunks(plan: &Plan, seq: u64, model: &str) -> Vec<Chunk> {
    let id = format!("chatcmpl_{seq}");
    let chunk = |delta: Value, finish: Value| {
        data_only(
            json!({"id": id, "object": "chat.completion.chunk", "model": model,
                         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let mut calls = 0;
    for o in &plan.outputs {
        match o {
            Out::Delay(ms) => out.push(Chunk::Delay(*ms)),
            Out::Hang => {
                out.push(Chunk::Hang);
                return out;
            }
            Out::Message(text) => {
                for p in pieces(text) {
                    out.push(chunk(json!({"content": p}), Value::Null));
                }
            }
            Out::Call {
                name, arguments, ..
            } => {
                out.push(chunk(
                    json!({"tool_calls": [{"index": calls, "id": format!("call_{seq}_{calls}"), "type": "function",
                                           "function": {"name": name, "arguments": arguments}}]}),
                    Value::Null,
                ));
                calls += 1;
            }
        }
    }
    let finish = if calls > 0 { "tool_calls" } else { "stop" };
    out.push(chunk(json!({}), json!(finish)));
    let u = plan.usage;
    out.push(data_only(
        json!({"id": id, "object": "chat.completion.chunk", "model": model, "choices": [],
        "usage": {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens,
                  "total_tokens": u.input_tokens + u.output_tokens,
                  "prompt_tokens_details": {"cached_tokens": u.cached_tokens}}}),
    ));
    out.push(Chunk::Event("data: [DONE]\n\n".into()));
    out
}

/// The whole stream for `plan` in Anthropic's Messages form: `message_start`, a text or
/// `tool_use` content block per output (text in word-sized `text_delta`s, a call's input as one
/// `input_json_delta`), `message_delta` with the stop reason and output tokens, `message_stop`.
pub fn anthropic_chunks(plan: &Plan, seq: u64, model: &str) -> Vec<Chunk> {
    let u = plan.usage;
    let mut out = vec![event(
        "message_start",
        json!({"message": {"id": format!("msg_{seq}"), "type": "message", "role": "assistant",
                           "model": model, "content": [], "stop_reason": null,
                           "usage": {"input_tokens": u.input_tokens, "output_tokens": 1,
                                     "cache_read_input_tokens": u.cached_tokens}}}),
    )];
    let mut index = 0;
    let mut tool = false;
    for o in &plan.outputs {
        match o {
            Out::Delay(ms) => out.push(Chunk::Delay(*ms)),
            Out::Hang => {
                out.push(Chunk::Hang);
                return out;
            }
            Out::Message(text) => {
                out.push(event(
                    "content_block_start",
                    json!({"index": index, "content_block": {"type": "text", "text": ""}}),
                ));
                for p in pieces(text) {
                    out.push(event(
                        "content_block_delta",
                        json!({"index": index, "delta": {"type": "text_delta", "text": p}}),
                    ));
                }
                out.push(event("content_block_stop", json!({"index": index})));
                index += 1;
            }
            Out::Call {
                name, arguments, ..
            } => {
                tool = true;
                out.push(event(
                    "content_block_start",
                    json!({"index": index, "content_block": {"type": "tool_use",
                           "id": format!("toolu_{seq}_{index}"), "name": name, "input": {}}}),
                ));
                out.push(event(
                    "content_block_delta",
                    json!({"index": index, "delta": {"type": "input_json_delta", "partial_json": arguments}}),
                ));
                out.push(event("content_block_stop", json!({"index": index})));
                index += 1;
            }
        }
    }
    out.push(event(
        "message_delta",
        json!({"delta": {"stop_reason": if tool { "tool_use" } else { "end_turn" }},
               "usage": {"output_tokens": u.output_tokens}}),
    ));
    out.push(event("message_stop", json!({})));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::Usage;

    fn data(c: &Chunk) -> Value {
        let Chunk::Event(s) = c else { panic!("{c:?}") };
        serde_json::from_str(s.lines().nth(1).unwrap().strip_prefix("data: ").unwrap()).unwrap()
    }

    #[test]
    fn a_message_and_a_call_end_with_usage() {
        let plan = Plan {
            actor: Some("a".into()),
            step: Some(0),
            exhausted: false,
            error: None,
            outputs: vec![
                Out::Message("hi".into()),
                Out::Call {
                    name: "f".into(),
                    namespace: None,
                    arguments: "{\"x\":1}".into(),
                },
            ],
            usage: Usage::default(),
            status: None,
        };
        let c = chunks(&plan, 4, "m");
        let types: Vec<String> = c
            .iter()
            .map(|c| data(c)["type"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(types.first().unwrap(), "response.created");
        assert!(types.contains(&"response.output_text.delta".to_owned()));
        let last = data(c.last().unwrap());
        assert_eq!(last["type"], "response.completed");
        assert_eq!(last["response"]["usage"]["total_tokens"], 120);
        assert_eq!(last["response"]["output"][1]["call_id"], "call_4_1");
        assert_eq!(last["response"]["output"][1]["arguments"], "{\"x\":1}");

        let hang = Plan {
            outputs: vec![Out::Message("x".into()), Out::Hang],
            ..plan
        };
        let c = chunks(&hang, 5, "m");
        assert_eq!(c.last(), Some(&Chunk::Hang));
        assert!(
            !c.iter()
                .any(|c| matches!(c, Chunk::Event(s) if s.contains("response.completed")))
        );
    }
}
