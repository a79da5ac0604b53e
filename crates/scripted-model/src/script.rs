//! The script: actors, their steps, routing a request to an actor, and argument templates.
//! Pure logic, no I/O.

use serde::Deserialize;
use serde_json::{Value, json};

/// A whole script: the actors, each with its own queue of answers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The actors, tried in order: a request goes to the first whose `match` it contains.
    pub actors: Vec<ActorSpec>,
    /// Usage reported by every `response.completed` unless a step says otherwise.
    #[serde(default)]
    pub usage: Option<Usage>,
}

/// One conversation the model takes part in (a root agent, a sub-agent, ...).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActorSpec {
    /// The actor's name, reported in the request log and in the "exhausted" answer.
    pub name: String,
    /// A substring of the request's instructions or of its non-assistant message text.
    #[serde(rename = "match")]
    pub pattern: String,
    /// Its answers, one per request routed to it, in order.
    pub steps: Vec<Step>,
}

/// One answer: a list of items, or one item alone.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Step {
    /// Several items answered together, in order.
    Items(Vec<Item>),
    /// A single item.
    One(Item),
}

impl Step {
    /// The step's items in order, whichever form it was written in.
    pub fn items(&self) -> &[Item] {
        match self {
            Step::Items(v) => v,
            Step::One(i) => std::slice::from_ref(i),
        }
    }
}

/// One element of a scripted answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Item {
    /// An assistant message.
    Say(String),
    /// A function call.
    Call(CallSpec),
    /// Waits this long at this point of the stream.
    DelayMs(u64),
    /// Never finishes the stream (what was sent before stays sent).
    Hang(bool),
    /// This answer's usage.
    Usage(Usage),
    /// Answer with this HTTP status and a JSON error body instead of a stream (a 429 or 5xx for
    /// a client's retries).
    Status(u16),
}

/// A function call the model makes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSpec {
    /// The function name as the model sees it in the request's `tools`.
    pub name: String,
    /// The `namespace` of the function call item, for a tool Codex lists inside a
    /// `{"type": "namespace"}` tool (see the README).
    #[serde(default)]
    pub namespace: Option<String>,
    /// JSON arguments; strings may hold `{{last_output<json-pointer>}}` templates.
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    json!({})
}

/// Token counts reported in the answer's `response.completed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Usage {
    /// Input (prompt) tokens.
    pub input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Output tokens spent on reasoning.
    pub reasoning_tokens: u64,
}

impl Default for Usage {
    fn default() -> Self {
        Usage {
            input_tokens: 100,
            output_tokens: 20,
            cached_tokens: 0,
            reasoning_tokens: 0,
        }
    }
}

impl Usage {
    /// The Responses API `usage` object (with `total_tokens`).
    pub fn to_json(self) -> Value {
        json!({
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": self.cached_tokens},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": self.input_tokens + self.output_tokens,
        })
    }
}

/// What to stream back, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// An assistant message with this text.
    Message(String),
    /// A function call item.
    Call {
        /// The function name.
        name: String,
        /// The function call item's `namespace`, when the script gave one.
        namespace: Option<String>,
        /// The JSON text of the arguments.
        arguments: String,
    },
    /// A pause of this many milliseconds.
    Delay(u64),
    /// Stop streaming and keep the connection open.
    Hang,
}

/// The answer chosen for one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The actor the request was routed to; `None` when none matched.
    pub actor: Option<String>,
    /// The 0-based step of the actor that was used.
    pub step: Option<usize>,
    /// The actor had no step left, or no actor matched.
    pub exhausted: bool,
    /// A template that could not be resolved (the answer is then a message saying so).
    pub error: Option<String>,
    /// What to stream, in order.
    pub outputs: Vec<Out>,
    /// The usage to report: the step's, else the script's, else the default.
    pub usage: Usage,
    /// An HTTP status to answer with instead of a stream.
    pub status: Option<u16>,
}

impl Plan {
    /// The plan's summary for the request log (actor, step, exhausted, error, status).
    pub fn log_json(&self) -> Value {
        json!({
            "actor": self.actor,
            "step": self.step,
            "exhausted": self.exhausted,
            "error": self.error,
            "status": self.status,
        })
    }
}

/// The start of the message answered when an actor has no step left (followed by its name).
pub const EXHAUSTED: &str = "scripted-model: script exhausted for";

/// A script and how far each actor has got.
pub struct Engine {
    script: Script,
    cursors: Vec<usize>,
}

impl Engine {
    /// An engine at the start of every actor's steps.
    pub fn new(script: Script) -> Self {
        let cursors = vec![0; script.actors.len()];
        Engine { script, cursors }
    }

    /// The first actor whose pattern occurs in the request's routing text.
    pub fn route(&self, body: &Value) -> Option<usize> {
        let text = routing_text(body);
        self.script
            .actors
            .iter()
            .position(|a| text.contains(&a.pattern))
    }

    /// Chooses the answer to `body` and advances that actor.
    pub fn plan(&mut self, body: &Value) -> Plan {
        let default_usage = self.script.usage.unwrap_or_default();
        let Some(a) = self.route(body) else {
            return exhausted(None, default_usage);
        };
        let actor = &self.script.actors[a];
        let step_no = self.cursors[a];
        let Some(step) = actor.steps.get(step_no) else {
            return exhausted(Some(actor.name.clone()), default_usage);
        };
        self.cursors[a] += 1;
        let mut usage = default_usage;
        let mut status = None;
        let mut outputs = vec![];
        let templates = Outputs::of(body);
        for item in step.items() {
            match item {
                Item::Say(t) => outputs.push(Out::Message(t.clone())),
                Item::Call(c) => match substitute(&c.arguments, &templates) {
                    Ok(args) => {
                        let (name, namespace) = match &c.namespace {
                            Some(ns) => (c.name.clone(), Some(ns.clone())),
                            None => split_namespace(body, &c.name),
                        };
                        outputs.push(Out::Call {
                            name,
                            namespace,
                            arguments: args.to_string(),
                        });
                    }
                    Err(e) => {
                        let e = format!("actor {} step {step_no}: {e}", actor.name);
                        return Plan {
                            actor: Some(actor.name.clone()),
                            step: Some(step_no),
                            exhausted: false,
                            outputs: vec![Out::Message(format!("scripted-model: {e}"))],
                            error: Some(e),
                            usage,
                            status: None,
                        };
                    }
                },
                Item::DelayMs(ms) => outputs.push(Out::Delay(*ms)),
                Item::Hang(true) => outputs.push(Out::Hang),
                Item::Hang(false) => {}
                Item::Usage(u) => usage = *u,
                Item::Status(code) => status = Some(*code),
            }
        }
        Plan {
            actor: Some(actor.name.clone()),
            step: Some(step_no),
            exhausted: false,
            error: None,
            outputs,
            usage,
            status,
        }
    }
}

/// `mcp__<server>__<tool>` names a tool that Codex lists inside the namespace tool
/// `{"type": "namespace", "name": "mcp__<server>", "tools": [{"name": "<tool>", ...}]}`; the
/// call must then carry `namespace` and the bare tool name. A name that is a top-level function
/// of the request (or matches no namespace) is kept as it is.
pub fn split_namespace(body: &Value, name: &str) -> (String, Option<String>) {
    let tools = body.get("tools").and_then(Value::as_array);
    let tools = tools.map(Vec::as_slice).unwrap_or_default();
    let top_level = tools.iter().any(|t| {
        t.get("type").and_then(Value::as_str) == Some("function")
            && t.get("name").and_then(Value::as_str) == Some(name)
    });
    if !top_level {
        for t in tools {
            if t.get("type").and_then(Value::as_str) != Some("namespace") {
                continue;
            }
            let Some(ns) = t.get("name").and_then(Value::as_str) else {
                continue;
            };
            let Some(rest) = name.strip_prefix(ns).and_then(|r| r.strip_prefix("__")) else {
                continue;
            };
            let inner = t.get("tools").and_then(Value::as_array);
            if inner.is_some_and(|v| {
                v.iter()
                    .any(|f| f.get("name").and_then(Value::as_str) == Some(rest))
            }) {
                return (rest.to_owned(), Some(ns.to_owned()));
            }
        }
    }
    (name.to_owned(), None)
}

fn exhausted(actor: Option<String>, usage: Usage) -> Plan {
    let who = actor
        .clone()
        .unwrap_or_else(|| "<no matching actor>".into());
    Plan {
        actor,
        step: None,
        exhausted: true,
        error: None,
        outputs: vec![Out::Message(format!("{EXHAUSTED} {who}"))],
        usage,
        status: None,
    }
}

/// `instructions` and the text of every input message that is not the assistant's (so a
/// script's own replies, and tool outputs, do not steer routing).
pub fn routing_text(body: &Value) -> String {
    let mut out = String::new();
    if let Some(s) = body.get("instructions").and_then(Value::as_str) {
        out.push_str(s);
        out.push('\n');
    }
    // Anthropic Messages: `system` as a string or text blocks.
    match body.get("system") {
        Some(Value::String(s)) => {
            out.push_str(s);
            out.push('\n');
        }
        Some(Value::Array(blocks)) => {
            for b in blocks {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    out.push_str(t);
                    out.push('\n');
                }
            }
        }
        _ => {}
    }
    // Chat Completions and Anthropic Messages: `messages`, the Responses API: `input`.
    match body.get("input").or_else(|| body.get("messages")) {
        Some(Value::String(s)) => out.push_str(s),
        Some(Value::Array(items)) => {
            for item in items {
                let is_message = item.get("type").and_then(Value::as_str) == Some("message")
                    || (item.get("type").is_none() && item.get("role").is_some());
                let role = item.get("role").and_then(Value::as_str);
                if !is_message || matches!(role, Some("assistant" | "tool")) {
                    continue;
                }
                match item.get("content") {
                    Some(Value::String(s)) => {
                        out.push_str(s);
                        out.push('\n');
                    }
                    Some(Value::Array(parts)) => {
                        for p in parts {
                            if let Some(t) = p.get("text").and_then(Value::as_str) {
                                out.push_str(t);
                                out.push('\n');
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
    out
}

/// The most recent tool output in the request's input, unwrapped into the JSON views a
/// template's pointer is tried against, innermost first. Codex 0.169.0 gives an MCP tool's
/// text result as content parts, `[{"type": "input_text", "text": "Wall time: ...\nOutput:"},
/// {"type": "input_text", "text": "<the tool's text content>"}]`, and a result with
/// `structuredContent` as one string `"Wall time: ...\nOutput:\n<structured content JSON>"`:
/// each part's text that holds JSON (after such a header) is a view, the last part first; a
/// serialized MCP `CallToolResult` is unwrapped to its `structuredContent` and the JSON in its
/// text content; then the joined text; then the raw `output`.
pub fn last_tool_output(body: &Value) -> Option<Vec<Value>> {
    let items = body.get("input")?.as_array()?;
    let item = items.iter().rev().find(|i| is_tool_output(i))?;
    output_views(item)
}

/// The views of every tool output of the conversation, oldest first (`{{first_output...}}`).
pub fn all_tool_outputs(body: &Value) -> Vec<Vec<Value>> {
    let Some(items) = body.get("input").and_then(Value::as_array) else {
        return vec![];
    };
    items
        .iter()
        .filter(|i| is_tool_output(i))
        .filter_map(output_views)
        .collect()
}

fn is_tool_output(i: &Value) -> bool {
    matches!(
        i.get("type").and_then(Value::as_str),
        Some("function_call_output" | "custom_tool_call_output" | "mcp_tool_call_output")
    )
}

fn output_views(item: &Value) -> Option<Vec<Value>> {
    let output = item.get("output")?;
    let mut views = vec![];
    let text = match output {
        Value::String(s) => {
            push_json_views(s, &mut views);
            Some(s.clone())
        }
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            for t in texts.iter().rev() {
                push_json_views(t, &mut views);
            }
            Some(texts.join(""))
        }
        _ => None,
    };
    if let Some(t) = text {
        views.push(Value::String(t));
    }
    views.push(output.clone());
    Some(views)
}

/// `text` parsed as JSON, after (for a serialized MCP `CallToolResult`) its structured
/// content and the JSON its text content holds.
fn push_json_views(text: &str, views: &mut Vec<Value>) {
    // An MCP result with structured content comes as one string: a wall-time header, then
    // `Output:` and the structured content as JSON.
    let body = match text.split_once("Output:") {
        Some((head, rest)) if head.starts_with("Wall time:") => rest,
        _ => text,
    };
    let Ok(parsed) = serde_json::from_str::<Value>(body.trim()) else {
        return;
    };
    if let Some(sc) = parsed.get("structuredContent").filter(|v| !v.is_null()) {
        views.push(sc.clone());
    }
    if let Some(parts) = parsed.get("content").and_then(Value::as_array) {
        let inner: String = parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect();
        if let Ok(v) = serde_json::from_str::<Value>(inner.trim()) {
            views.push(v);
        }
    }
    views.push(parsed);
}

const LAST: &str = "{{last_output";
const FIRST: &str = "{{first_output";
const CLOSE: &str = "}}";

/// The tool outputs a template may read: the request's last, and every one of the
/// conversation (`first_output` reads the oldest that has a value at its pointer: Codex may
/// put outputs of its own, e.g. a goal's, before the script's).
#[derive(Default)]
pub struct Outputs {
    /// The JSON views of the request's most recent tool output, if it has one
    /// ([`last_tool_output`]).
    pub last: Option<Vec<Value>>,
    /// The views of every tool output of the conversation, oldest first.
    pub all: Vec<Vec<Value>>,
}

impl Outputs {
    /// The tool outputs of a request body.
    pub fn of(body: &Value) -> Outputs {
        Outputs {
            last: last_tool_output(body),
            all: all_tool_outputs(body),
        }
    }
}

/// Replaces `{{last_output<pointer>}}` and `{{first_output<pointer>}}` in every string of
/// `args`, object keys included. A string that is exactly one template becomes the value itself
/// (any JSON type; a key becomes its text); a template inside a longer string is replaced by
/// the value's text (a string as is, anything else as JSON). A pointer segment `*` stands for
/// the first member of an object (e.g. `/jobs/*/state` when the key is a generated id).
pub fn substitute(args: &Value, outputs: &Outputs) -> Result<Value, String> {
    Ok(match args {
        Value::String(s) => substitute_str(s, outputs)?,
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|v| substitute(v, outputs))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    let key = match substitute_str(k, outputs)? {
                        Value::String(t) => t,
                        other => other.to_string(),
                    };
                    Ok((key, substitute(v, outputs)?))
                })
                .collect::<Result<_, String>>()?,
        ),
        v => v.clone(),
    })
}

/// `pointer` with `*` segments, each taking an object's first member.
fn lookup<'v>(v: &'v Value, pointer: &str) -> Option<&'v Value> {
    if !pointer.contains("/*") {
        return v.pointer(pointer);
    }
    let mut cur = v;
    for seg in pointer.split('/').skip(1) {
        cur = if seg == "*" {
            cur.as_object()?.values().next()?
        } else {
            let seg = seg.replace("~1", "/").replace("~0", "~");
            match cur {
                Value::Object(o) => o.get(&seg)?,
                Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
                _ => return None,
            }
        };
    }
    Some(cur)
}

fn resolve(open: &str, pointer: &str, outputs: &Outputs) -> Result<Value, String> {
    if !(pointer.is_empty() || pointer.starts_with('/')) {
        return Err(format!("{open}{pointer}{CLOSE}: not a JSON pointer"));
    }
    let candidates: Vec<&Vec<Value>> = if open == FIRST {
        outputs.all.iter().collect()
    } else {
        outputs.last.iter().collect()
    };
    if candidates.is_empty() {
        return Err(format!(
            "{open}{pointer}{CLOSE}: the request holds no tool output"
        ));
    }
    candidates
        .iter()
        .find_map(|views| views.iter().find_map(|v| lookup(v, pointer).cloned()))
        .ok_or_else(|| {
            format!(
                "{open}{pointer}{CLOSE}: nothing at that pointer in {}",
                candidates
                    .last()
                    .and_then(|v| v.last())
                    .map(Value::to_string)
                    .unwrap_or_default()
            )
        })
}

/// The first template opening in `s`: its position and which one.
fn next_open(s: &str) -> Option<(usize, &'static str)> {
    [LAST, FIRST]
        .into_iter()
        .filter_map(|o| s.find(o).map(|i| (i, o)))
        .min_by_key(|(i, _)| *i)
}

fn substitute_str(s: &str, outputs: &Outputs) -> Result<Value, String> {
    for open in [LAST, FIRST] {
        if let Some(p) = s.strip_prefix(open).and_then(|r| r.strip_suffix(CLOSE))
            && !p.contains(CLOSE)
        {
            return resolve(open, p, outputs);
        }
    }
    if next_open(s).is_none() {
        return Ok(Value::String(s.to_owned()));
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some((i, open)) = next_open(rest) {
        out.push_str(&rest[..i]);
        let after = &rest[i + open.len()..];
        let Some(j) = after.find(CLOSE) else {
            return Err(format!("unterminated template in {s:?}"));
        };
        match resolve(open, &after[..j], outputs)? {
            Value::String(v) => out.push_str(&v),
            v => out.push_str(&v.to_string()),
        }
        rest = &after[j + CLOSE.len()..];
    }
    out.push_str(rest);
    Ok(Value::String(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(v: Value) -> Engine {
        Engine::new(serde_json::from_value(v).unwrap())
    }

    fn user(text: &str) -> Value {
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    }

    #[test]
    fn requests_route_to_the_first_matching_actor_and_consume_its_steps() {
        let mut e = script(json!({"actors": [
            {"name": "worker", "match": "WORKER-ROLE", "steps": [[{"say": "w1"}]]},
            {"name": "root", "match": "ROOT-ROLE", "steps": [[{"say": "r1"}], {"say": "r2"}]},
        ]}));
        let root = json!({"instructions": "You are ROOT-ROLE.", "input": [user("go")]});
        let worker =
            json!({"instructions": "base", "input": [user("you are WORKER-ROLE, also ROOT-ROLE")]});
        let p = e.plan(&root);
        assert_eq!(
            (p.actor.as_deref(), p.step, &p.outputs[..]),
            (Some("root"), Some(0), &[Out::Message("r1".into())][..])
        );
        assert_eq!(e.plan(&worker).outputs, vec![Out::Message("w1".into())]);
        assert_eq!(e.plan(&root).outputs, vec![Out::Message("r2".into())]);
        // Assistant text and tool outputs do not route.
        let echo = json!({"input": [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "WORKER-ROLE"}]},
            {"type": "function_call_output", "call_id": "c", "output": "WORKER-ROLE"}]});
        assert_eq!(e.route(&echo), None);
    }

    #[test]
    fn an_mcp_tool_name_is_split_into_its_namespace() {
        let body = json!({"tools": [
            {"type": "function", "name": "exec_command"},
            {"type": "namespace", "name": "mcp__mmo_mesh", "tools": [
                {"type": "function", "name": "agents_spawn"}]}]});
        assert_eq!(
            split_namespace(&body, "mcp__mmo_mesh__agents_spawn"),
            ("agents_spawn".into(), Some("mcp__mmo_mesh".into()))
        );
        assert_eq!(
            split_namespace(&body, "exec_command"),
            ("exec_command".into(), None)
        );
        assert_eq!(
            split_namespace(&body, "mcp__mmo_mesh__nope"),
            ("mcp__mmo_mesh__nope".into(), None)
        );
        let mut e = script(json!({"actors": [{"name": "a", "match": "", "steps": [
            {"call": {"name": "mcp__mmo_mesh__agents_spawn"}},
            {"call": {"name": "t", "namespace": "ns"}}]}]}));
        assert!(matches!(&e.plan(&body).outputs[0],
            Out::Call { name, namespace: Some(ns), arguments } if name == "agents_spawn" && ns == "mcp__mmo_mesh" && arguments == "{}"));
        assert!(matches!(&e.plan(&body).outputs[0],
            Out::Call { name, namespace: Some(ns), .. } if name == "t" && ns == "ns"));
    }

    #[test]
    fn exhaustion_and_no_match_answer_with_the_marker() {
        let mut e =
            script(json!({"actors": [{"name": "root", "match": "R", "steps": [{"say": "once"}]}]}));
        let req = json!({"input": "R"});
        assert!(!e.plan(&req).exhausted);
        let p = e.plan(&req);
        assert!(p.exhausted);
        assert_eq!(p.outputs, vec![Out::Message(format!("{EXHAUSTED} root"))]);
        let p = e.plan(&json!({"input": "nobody"}));
        assert!(p.exhausted && p.actor.is_none());
        assert!(matches!(&p.outputs[0], Out::Message(m) if m.starts_with(EXHAUSTED)));
    }

    #[test]
    fn steps_carry_calls_delays_hangs_and_usage() {
        let mut e = script(
            json!({"usage": {"input_tokens": 7}, "actors": [{"name": "a", "match": "", "steps": [
                [{"delay_ms": 5}, {"say": "x"}, {"call": {"name": "mcp__s__t", "arguments": {"k": 1}}}],
                [{"hang": true}, {"usage": {"output_tokens": 3}}],
            ]}]}),
        );
        let p = e.plan(&json!({}));
        assert_eq!(p.usage.input_tokens, 7);
        assert_eq!(
            p.outputs,
            vec![
                Out::Delay(5),
                Out::Message("x".into()),
                Out::Call {
                    name: "mcp__s__t".into(),
                    namespace: None,
                    arguments: r#"{"k":1}"#.into()
                }
            ]
        );
        let p = e.plan(&json!({}));
        assert_eq!(p.outputs, vec![Out::Hang]);
        assert_eq!((p.usage.input_tokens, p.usage.output_tokens), (100, 3));
        assert!(
            serde_json::from_value::<Script>(
                json!({"actors": [{"name": "a", "match": "", "steps": [{"sing": 1}]}]})
            )
            .is_err()
        );
    }

    #[test]
    fn templates_read_the_last_tool_output_through_its_wrappings() {
        let body = |output: Value| {
            json!({"input": [
                {"type": "function_call_output", "call_id": "old", "output": "{\"job_id\": \"old\"}"},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": output},
            ]})
        };
        let args = json!({"job": "{{last_output/job_id}}", "n": "{{last_output/n}}",
                          "msg": "job {{last_output/job_id}} of {{last_output/n}}", "keep": [1, "plain"]});
        let want = json!({"job": "j-9", "n": 3, "msg": "job j-9 of 3", "keep": [1, "plain"]});
        for output in [
            json!("{\"job_id\": \"j-9\", \"n\": 3}"),
            json!([{"type": "input_text", "text": "{\"job_id\": \"j-9\", \"n\": 3}"}]),
            // What Codex 0.169.0 sends for an MCP tool's structured content.
            json!("Wall time: 0.0148 seconds\nOutput:\n{\"job_id\":\"j-9\",\"n\":3}"),
            // What Codex 0.169.0 sends for an MCP tool's text content.
            json!([{"type": "input_text", "text": "Wall time: 0.0110 seconds\nOutput:"},
                   {"type": "input_text", "text": "{\"job_id\": \"j-9\", \"n\": 3}"}]),
            json!(json!({"content": [{"type": "text", "text": "{\"job_id\": \"j-9\", \"n\": 3}"}]}).to_string()),
            json!(json!({"content": [{"type": "text", "text": "done"}], "structuredContent": {"job_id": "j-9", "n": 3}}).to_string()),
        ] {
            let outs = Outputs::of(&body(output.clone()));
            assert_eq!(substitute(&args, &outs).unwrap(), want, "{output}");
        }
        let outs = Outputs::of(&body(json!("plain text")));
        assert_eq!(
            substitute(&json!("{{last_output}}"), &outs).unwrap(),
            json!("plain text")
        );
        assert!(substitute(&json!("{{last_output/missing}}"), &outs).is_err());
        assert!(substitute(&json!("{{last_output/x}}"), &Outputs::default()).is_err());
        assert!(substitute(&json!("{{last_output/x"), &outs).is_err());
        // The conversation's first output, keys, and `*` for a generated key.
        let outs = Outputs::of(&body(json!(
            "{\"jobs\": {\"job_1\": {\"state\": \"running\", \"progress_revision\": 4}}}"
        )));
        let args = json!({"after": {"{{first_output/job_id}}": "{{last_output/jobs/*/progress_revision}}"}, "s": "{{last_output/jobs/*/state}}"});
        assert_eq!(
            substitute(&args, &outs).unwrap(),
            json!({"after": {"old": 4}, "s": "running"})
        );

        let mut e = script(json!({"actors": [{"name": "a", "match": "", "steps": [
            {"call": {"name": "f", "arguments": {"j": "{{last_output/nope}}"}}}]}]}));
        let p = e.plan(&body(json!("{}")));
        assert!(p.error.is_some() && !p.exhausted);
        assert!(matches!(&p.outputs[..], [Out::Message(m)] if m.contains("nope")));
    }
}
