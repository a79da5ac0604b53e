//! The three APIs' request bodies and streamed answers: one [`ChatRequest`] becomes each
//! API's body, and each API's server-sent events fold into one [`Accumulator`].

use crate::{Api, ChatRequest, Message, ToolCall, Usage};
use serde_json::{Value, json};

/// Most text an answer may stream, in bytes.
pub const MAX_TEXT_BYTES: usize = 4 * 1024 * 1024;
/// Most tool calls in one answer.
pub const MAX_TOOL_CALLS: usize = 64;
/// Largest arguments of one tool call, in bytes.
pub const MAX_ARGUMENT_BYTES: usize = 1024 * 1024;
/// Anthropic requires `max_tokens`; this is sent when the request sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The path appended to a provider's base URL for `api`.
pub fn path(api: Api) -> &'static str {
    match api {
        Api::Chat => "/chat/completions",
        Api::Responses => "/responses",
        Api::Anthropic => "/messages",
    }
}

/// The request body of `api` for `req`, streaming.
pub fn body(api: Api, model: &str, req: &ChatRequest) -> Value {
    match api {
        Api::Chat => chat_body(model, req),
        Api::Responses => responses_body(model, req),
        Api::Anthropic => anthropic_body(model, req),
    }
}

fn chat_body(model: &str, req: &ChatRequest) -> Value {
    let mut messages = Vec::new();
    if let Some(s) = &req.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    for m in &req.messages {
        messages.push(match m {
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut v = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    v["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                        .collect();
                }
                v
            }
            Message::Tool { call_id, content } => {
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
        });
    }
    let mut b = json!({"model": model, "stream": true, "stream_options": {"include_usage": true}, "messages": messages});
    if !req.tools.is_empty() {
        b["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    if let Some(n) = req.max_tokens {
        b["max_tokens"] = json!(n);
    }
    if let Some(t) = req.temperature {
        b["temperature"] = json!(t);
    }
    b
}

fn responses_body(model: &str, req: &ChatRequest) -> Value {
    let mut input = Vec::new();
    for m in &req.messages {
        match m {
            Message::User { content } => input.push(
                json!({"role": "user", "content": [{"type": "input_text", "text": content}]}),
            ),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                if !content.is_empty() {
                    input.push(json!({"role": "assistant", "content": [{"type": "output_text", "text": content}]}));
                }
                for c in tool_calls {
                    input.push(json!({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}));
                }
            }
            Message::Tool { call_id, content } => input.push(
                json!({"type": "function_call_output", "call_id": call_id, "output": content}),
            ),
        }
    }
    let mut b = json!({"model": model, "stream": true, "store": false, "input": input});
    if let Some(s) = &req.system {
        b["instructions"] = json!(s);
    }
    if !req.tools.is_empty() {
        b["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect();
    }
    if let Some(n) = req.max_tokens {
        b["max_output_tokens"] = json!(n);
    }
    if let Some(t) = req.temperature {
        b["temperature"] = json!(t);
    }
    b
}

fn anthropic_body(model: &str, req: &ChatRequest) -> Value {
    // Anthropic alternates user and assistant turns: tool results are user content, and
    // consecutive messages of one role are one message of several blocks.
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for m in &req.messages {
        let (role, blocks) = match m {
            Message::User { content } => ("user", vec![json!({"type": "text", "text": content})]),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = Vec::new();
                if !content.is_empty() {
                    blocks.push(json!({"type": "text", "text": content}));
                }
                for c in tool_calls {
                    let input: Value = serde_json::from_str(&c.arguments).unwrap_or(json!({}));
                    blocks.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
                ("assistant", blocks)
            }
            Message::Tool { call_id, content } => (
                "user",
                vec![json!({"type": "tool_result", "tool_use_id": call_id, "content": content})],
            ),
        };
        match turns.last_mut() {
            Some((r, b)) if *r == role => b.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut b = json!({"model": model, "stream": true,
                       "max_tokens": req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
                       "messages": messages});
    if let Some(s) = &req.system {
        b["system"] = json!(s);
    }
    if !req.tools.is_empty() {
        b["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    if let Some(t) = req.temperature {
        b["temperature"] = json!(t);
    }
    b
}

/// An answer as its events arrive.
#[derive(Debug, Default)]
pub struct Accumulator {
    /// The text so far.
    pub text: String,
    /// The tool calls completed so far.
    pub calls: Vec<ToolCall>,
    /// The token counts, once the provider has sent them.
    pub usage: Usage,
    /// The provider's reason the answer ended, once it has said.
    pub finish: Option<String>,
    /// The API's own end of the answer was seen.
    pub done: bool,
}

impl Accumulator {
    /// Folds one event (`name` is the SSE event name, possibly empty; `data` its data) into the
    /// answer; returns the text it adds, if any. An error is the protocol's or the model's.
    pub fn on_event(&mut self, api: Api, name: &str, data: &str) -> Result<Option<String>, Fault> {
        if api == Api::Chat && data.trim() == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        if data.trim().is_empty() {
            return Ok(None);
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| Fault::Protocol(format!("an event that is not JSON ({e})")))?;
        let delta = match api {
            Api::Chat => self.chat(&v)?,
            Api::Responses => self.responses(&v)?,
            Api::Anthropic => self.anthropic(name, &v)?,
        };
        if let Some(d) = &delta {
            if self.text.len() + d.len() > MAX_TEXT_BYTES {
                return Err(Fault::Protocol(format!(
                    "the answer's text is over {MAX_TEXT_BYTES} bytes"
                )));
            }
            self.text.push_str(d);
        }
        Ok(delta)
    }

    /// The call at stream position `index` (opened on first sight).
    fn call_at(&mut self, index: usize) -> Result<&mut ToolCall, Fault> {
        if index >= MAX_TOOL_CALLS {
            return Err(Fault::Protocol(format!(
                "more than {MAX_TOOL_CALLS} tool calls in one answer"
            )));
        }
        while self.calls.len() <= index {
            self.calls.push(ToolCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
        }
        Ok(&mut self.calls[index])
    }

    fn append_arguments(&mut self, index: usize, more: &str) -> Result<(), Fault> {
        let call = self.call_at(index)?;
        if call.arguments.len() + more.len() > MAX_ARGUMENT_BYTES {
            return Err(Fault::Protocol(format!(
                "a tool call's arguments are over {MAX_ARGUMENT_BYTES} bytes"
            )));
        }
        call.arguments.push_str(more);
        Ok(())
    }

    fn chat(&mut self, v: &Value) -> Result<Option<String>, Fault> {
        if let Some(e) = v.get("error") {
            return Err(Fault::Model(error_message(e)));
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Usage {
                input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
                output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
            };
        }
        let Some(choice) = v.pointer("/choices/0") else {
            return Ok(None);
        };
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
        let delta = &choice["delta"];
        for c in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = c["index"].as_u64().unwrap_or(0) as usize;
            let call = self.call_at(index)?;
            if let Some(id) = c["id"].as_str() {
                call.id = id.to_string();
            }
            if let Some(n) = c.pointer("/function/name").and_then(Value::as_str) {
                call.name.push_str(n);
            }
            if let Some(a) = c.pointer("/function/arguments").and_then(Value::as_str) {
                self.append_arguments(index, a)?;
            }
        }
        Ok(delta["content"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string))
    }

    fn responses(&mut self, v: &Value) -> Result<Option<String>, Fault> {
        match v["type"].as_str().unwrap_or("") {
            "response.output_text.delta" => Ok(v["delta"].as_str().map(str::to_string)),
            "response.output_item.done"
                if v.pointer("/item/type") == Some(&json!("function_call")) =>
            {
                let item = &v["item"];
                let index = self.calls.len();
                let call = self.call_at(index)?;
                call.id = item["call_id"].as_str().unwrap_or("").to_string();
                call.name = item["name"].as_str().unwrap_or("").to_string();
                let args = item["arguments"].as_str().unwrap_or("").to_string();
                self.append_arguments(index, &args)?;
                Ok(None)
            }
            "response.completed" | "response.incomplete" => {
                let r = &v["response"];
                self.usage = Usage {
                    input_tokens: r
                        .pointer("/usage/input_tokens")
                        .and_then(Value::as_u64)
                        .unwrap_or(0),
                    output_tokens: r
                        .pointer("/usage/output_tokens")
                        .and_then(Value::as_u64)
                        .unwrap_or(0),
                };
                self.finish = Some(r["status"].as_str().unwrap_or("completed").to_string());
                self.done = true;
                Ok(None)
            }
            "response.failed" => Err(Fault::Model(error_message(
                v.pointer("/response/error").unwrap_or(&Value::Null),
            ))),
            "error" => Err(Fault::Model(error_message(v))),
            _ => Ok(None),
        }
    }

    fn anthropic(&mut self, name: &str, v: &Value) -> Result<Option<String>, Fault> {
        let kind = if name.is_empty() {
            v["type"].as_str().unwrap_or("")
        } else {
            name
        };
        match kind {
            "message_start" => {
                self.usage.input_tokens = v
                    .pointer("/message/usage/input_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                Ok(None)
            }
            "content_block_start" => {
                let block = &v["content_block"];
                if block["type"] == "tool_use" {
                    let index = v["index"].as_u64().unwrap_or(0) as usize;
                    let call = self.call_at(index)?;
                    call.id = block["id"].as_str().unwrap_or("").to_string();
                    call.name = block["name"].as_str().unwrap_or("").to_string();
                }
                Ok(None)
            }
            "content_block_delta" => {
                let d = &v["delta"];
                match d["type"].as_str() {
                    Some("text_delta") => Ok(d["text"].as_str().map(str::to_string)),
                    Some("input_json_delta") => {
                        let index = v["index"].as_u64().unwrap_or(0) as usize;
                        self.append_arguments(index, d["partial_json"].as_str().unwrap_or(""))?;
                        Ok(None)
                    }
                    _ => Ok(None),
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.finish = Some(r.to_string());
                }
                if let Some(n) = v.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.usage.output_tokens = n;
                }
                Ok(None)
            }
            "message_stop" => {
                self.done = true;
                Ok(None)
            }
            "error" => Err(Fault::Model(error_message(&v["error"]))),
            _ => Ok(None),
        }
    }

    /// The tool calls, in stream order, the empty slots (indexes a stream skipped) left out.
    pub fn tool_calls(&mut self) -> Vec<ToolCall> {
        std::mem::take(&mut self.calls)
            .into_iter()
            .filter(|c| !c.name.is_empty())
            .collect()
    }
}

/// What went wrong inside a stream.
#[derive(Debug)]
pub enum Fault {
    /// The stream broke the API's shape (an unknown event, a bad JSON, too many calls...).
    Protocol(String),
    /// The provider reported an error inside the stream.
    Model(String),
}

fn error_message(e: &Value) -> String {
    let msg = e
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| e.to_string());
    msg.chars().take(1000).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolSpec;

    fn req() -> ChatRequest {
        ChatRequest {
            system: Some("be brief".into()),
            messages: vec![
                Message::User {
                    content: "hi".into(),
                },
                Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "look".into(),
                        arguments: "{\"q\":1}".into(),
                    }],
                },
                Message::Tool {
                    call_id: "c1".into(),
                    content: "found".into(),
                },
                Message::Tool {
                    call_id: "c2".into(),
                    content: "also".into(),
                },
            ],
            tools: vec![ToolSpec {
                name: "look".into(),
                description: "looks".into(),
                parameters: json!({"type": "object"}),
            }],
            max_tokens: None,
            temperature: None,
        }
    }

    #[test]
    fn each_api_gets_its_own_body() {
        let c = body(Api::Chat, "m", &req());
        assert_eq!(c["messages"][0]["role"], "system");
        assert_eq!(
            c["messages"][2]["tool_calls"][0]["function"]["name"],
            "look"
        );
        assert_eq!(c["messages"][3]["tool_call_id"], "c1");
        assert_eq!(c["tools"][0]["function"]["name"], "look");
        let r = body(Api::Responses, "m", &req());
        assert_eq!(r["instructions"], "be brief");
        assert_eq!(r["input"][1]["type"], "function_call");
        assert_eq!(r["input"][2]["type"], "function_call_output");
        let a = body(Api::Anthropic, "m", &req());
        assert_eq!(a["max_tokens"], DEFAULT_MAX_TOKENS);
        assert_eq!(a["system"], "be brief");
        // The two tool results are one user turn; the call's input is parsed JSON.
        assert_eq!(a["messages"].as_array().unwrap().len(), 3);
        assert_eq!(a["messages"][1]["content"][0]["input"]["q"], 1);
        assert_eq!(a["messages"][2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(a["tools"][0]["input_schema"]["type"], "object");
    }

    #[test]
    fn a_chat_stream_folds_text_calls_and_usage() {
        let mut acc = Accumulator::default();
        let events = [
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}"#,
            "[DONE]",
        ];
        for e in events {
            acc.on_event(Api::Chat, "", e).unwrap();
        }
        assert!(acc.done);
        assert_eq!(acc.text, "Hello");
        assert_eq!(
            acc.usage,
            Usage {
                input_tokens: 7,
                output_tokens: 3
            }
        );
        let calls = acc.tool_calls();
        assert_eq!(calls[0].arguments, "{\"x\":1}");
        let mut bad = Accumulator::default();
        assert!(matches!(
            bad.on_event(Api::Chat, "", r#"{"error":{"message":"overloaded"}}"#),
            Err(Fault::Model(m)) if m == "overloaded"
        ));
        assert!(matches!(
            bad.on_event(Api::Chat, "", "{not json"),
            Err(Fault::Protocol(_))
        ));
        let too_many = format!(
            r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":{MAX_TOOL_CALLS},"id":"z","function":{{"name":"f"}}}}]}}}}]}}"#
        );
        assert!(matches!(
            bad.on_event(Api::Chat, "", &too_many),
            Err(Fault::Protocol(_))
        ));
    }

    #[test]
    fn anthropic_and_responses_streams_fold_the_same_way() {
        let mut a = Accumulator::default();
        for (name, data) in [
            (
                "message_start",
                r#"{"message":{"usage":{"input_tokens":5}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"index":0,"delta":{"type":"text_delta","text":"ok "}}"#,
            ),
            (
                "content_block_start",
                r#"{"index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#,
            ),
            (
                "message_delta",
                r#"{"delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
            ),
            ("message_stop", "{}"),
        ] {
            a.on_event(Api::Anthropic, name, data).unwrap();
        }
        assert!(a.done);
        assert_eq!(a.text, "ok ");
        assert_eq!(
            a.usage,
            Usage {
                input_tokens: 5,
                output_tokens: 9
            }
        );
        assert_eq!(a.tool_calls()[0].name, "f");
        let mut r = Accumulator::default();
        for data in [
            r#"{"type":"response.output_text.delta","delta":"hi"}"#,
            r#"{"type":"response.output_item.done","item":{"type":"function_call","call_id":"c","name":"g","arguments":"{}"}}"#,
            r#"{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":2,"output_tokens":1}}}"#,
        ] {
            r.on_event(Api::Responses, "", data).unwrap();
        }
        assert!(r.done);
        assert_eq!(r.tool_calls()[0].id, "c");
        assert!(matches!(
            Accumulator::default().on_event(Api::Responses, "", r#"{"type":"response.failed","response":{"error":{"message":"no"}}}"#),
            Err(Fault::Model(m)) if m == "no"
        ));
    }
}
