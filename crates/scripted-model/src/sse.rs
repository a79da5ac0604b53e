//! The Responses API's server-sent events for a planned answer.

use crate::script::{Out, Plan};
use serde_json::{Value, json};

/// One piece of the answer stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    /// `event: <name>\ndata: <json>\n\n`
    Event(String),
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
