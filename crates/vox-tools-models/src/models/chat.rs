//! Chat through the facade (`vox_chat_message`, with the tools the session may call offered to
//! the model, and `vox_chat_history`), and [`ask_json`], one JSON answer for other families.

use super::{HISTORY_MESSAGES, MAX_MESSAGE, active_model, llm, registry};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Instant;
use vox_core::family::{async_typed, typed};
use vox_core::{CallCtx, Ctx, HandlerEntry, ToolError};
use vox_llm::{ChatRequest, Completion, Facade, Message, ProcessEnv};
use vox_store::{ChatMessage, Spend};
use vox_tools_common::store::{db, store};
use vox_tools_knowledge::Attention;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ChatArgs {
    /// What to say (at most 64 KiB).
    message: String,
    /// The chat session (default `default`); its history goes with the message.
    session: Option<String>,
    /// A model id; the active model when left out.
    model_id: Option<String>,
    /// A system prompt for this message.
    system: Option<String>,
    /// At most this many output tokens.
    max_tokens: Option<u32>,
    /// Offer the model the tools this session may call; its calls run as this caller's (the
    /// session's active skill, profile and approvals decide them), at most 8 rounds.
    tools: Option<bool>,
    /// Make this skill the session's active skill first (as vox_skill_use does): its tool list
    /// then bounds both the tools offered and the calls the model makes.
    active_skill: Option<String>,
}

/// A tool call the model made during a chat, and how it ended.
#[derive(Serialize, JsonSchema)]
struct ToolUse {
    name: String,
    ok: bool,
    /// The error code when it did not succeed (e.g. `skill_tool_not_allowed`).
    code: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct ChatAnswer {
    session: String,
    model_id: String,
    text: String,
    /// The provider's reason the answer ended.
    finish: String,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: f64,
    /// HTTP attempts it took (retries after 429 or 5xx).
    attempts: u32,
    /// The answer's id in the history.
    message_id: i64,
    /// The tool calls the model made, in order.
    tool_calls: Vec<ToolUse>,
}

/// The chat tools' prefix: a chat's model is never offered them.
const CHAT_TOOLS: &str = "vox_chat_";
/// Rounds of tool calls a chat message may take.
const MAX_TOOL_ROUNDS: usize = 8;
/// Tools offered to a model at most.
const MAX_OFFERED_TOOLS: usize = 128;
/// Largest tool result given back to the model.
const MAX_TOOL_RESULT: usize = 64 * 1024;

/// What a chat's model may call: the orchestrator, and the scope the model acts under (its
/// caller's, less a person's tools: [`vox_core::CallScope::for_model`]).
struct ModelTools<'a> {
    orch: &'a vox_core::Orchestrator,
    scope: Arc<vox_core::CallScope>,
}

/// The tools the model is offered: what its scope lists, less the chat tools (no recursion, and
/// the history is already the model's context), and within the session's active skill.
fn offered_tools(ctx: &Ctx, call: &CallCtx, tools: &ModelTools) -> Vec<vox_llm::ToolSpec> {
    let skills = ctx.get::<Arc<vox_tools_workspace::Skills>>();
    tools
        .orch
        .list(&tools.scope)
        .into_iter()
        .filter_map(|d| {
            let name = d["name"].as_str()?.to_string();
            if name.starts_with(CHAT_TOOLS) {
                return None;
            }
            if let Some(s) = skills
                && s.check(call.session(), &name, &serde_json::Value::Null)
                    .is_err()
            {
                return None;
            }
            Some(vox_llm::ToolSpec {
                description: d["description"].as_str().unwrap_or("").to_string(),
                parameters: d["inputSchema"].clone(),
                name,
            })
        })
        .take(MAX_OFFERED_TOOLS)
        .collect()
}

/// Runs one tool call of the model under its scope, with the chat's cancellation and sinks;
/// the text given back to the model, and how it ended.
async fn run_tool(
    tools: &ModelTools<'_>,
    call: &CallCtx,
    tc: &vox_llm::ToolCall,
) -> (String, ToolUse) {
    let refused = |code: &str, message: String| {
        let text = serde_json::json!({"error": {"code": code, "message": message}});
        let used = ToolUse {
            name: tc.name.clone(),
            ok: false,
            code: Some(code.into()),
        };
        (text.to_string(), used)
    };
    if tc.name.starts_with(CHAT_TOOLS) {
        // Not offered, and not run by name either: a chat inside a chat would nest without end.
        return refused(
            "tool_not_in_profile",
            format!("{} is not for a chat's model", tc.name),
        );
    }
    let args: serde_json::Value = match serde_json::from_str(&tc.arguments) {
        Ok(v) => v,
        Err(e) => {
            return refused(
                "invalid_arguments",
                format!("the arguments are not JSON: {e}"),
            );
        }
    };
    let outcome = tools
        .orch
        .call(&tools.scope, &tc.name, args, call.as_run())
        .await;
    let v = serde_json::to_value(&outcome).unwrap_or_default();
    let ok = matches!(v["kind"].as_str(), Some("ok" | "content"));
    let (text, code) = if ok {
        let body = if v["kind"] == "ok" {
            &v["value"]
        } else {
            &v["blocks"]
        };
        (body.to_string(), None)
    } else {
        let code = v["code"].as_str().unwrap_or("failed").to_string();
        (
            serde_json::json!({"error": {"code": code, "message": v["message"]}}).to_string(),
            Some(code),
        )
    };
    let text = if text.len() > MAX_TOOL_RESULT {
        format!(
            "{}... (cut at {MAX_TOOL_RESULT} bytes)",
            &text[..text.floor_char_boundary(MAX_TOOL_RESULT)]
        )
    } else {
        text
    };
    (
        text,
        ToolUse {
            name: tc.name.clone(),
            ok,
            code,
        },
    )
}

fn session_name(s: Option<String>) -> Result<String, ToolError> {
    let s = s.unwrap_or_else(|| "default".into());
    vox_tools_common::bounded("session", &s, 128)?;
    Ok(s)
}

async fn chat(ctx: Arc<Ctx>, call: CallCtx, a: ChatArgs) -> Result<ChatAnswer, ToolError> {
    vox_tools_common::bounded("message", &a.message, MAX_MESSAGE)?;
    if let Some(s) = &a.system {
        vox_tools_common::bounded("system", s, MAX_MESSAGE)?;
    }
    let session = session_name(a.session)?;
    let facade = ctx.require::<Arc<Facade>>("the LLM facade")?.clone();
    let r = registry(&ctx)?;
    let model_id = named_or_active(&ctx, a.model_id)?;
    let spec = r.model(&model_id).map_err(llm)?.clone();
    let endpoint = r.endpoint(&model_id, &ProcessEnv).map_err(llm)?;
    if let Some(skill) = &a.active_skill {
        activate_skill(&ctx, &call, skill)?;
    }
    let orch = if a.tools == Some(true) {
        Some(ctx.orchestrator().ok_or_else(|| {
            ToolError::unavailable("tool calls in chat need the daemon's orchestrator")
        })?)
    } else {
        None
    };
    let s = store(&ctx)?;
    // The history first, then this message, as the model sees it.
    let history = s
        .chat_history(&session, None, HISTORY_MESSAGES)
        .map_err(db)?;
    let mut messages = fit_history(&history, spec.context_window as usize * 3);
    messages.push(Message::User {
        content: a.message.clone(),
    });
    s.chat_append(&session, "user", &a.message, None, None)
        .map_err(db)?;
    let tools = orch.as_deref().map(|orch| ModelTools {
        orch,
        scope: Arc::new(call.scope().for_model()),
    });
    let req = ChatRequest {
        system: a.system,
        messages,
        tools: tools
            .as_ref()
            .map(|t| offered_tools(&ctx, &call, t))
            .unwrap_or_default(),
        max_tokens: a.max_tokens,
        temperature: None,
    };
    let started = Instant::now();
    let Turns {
        done,
        usage,
        uses,
        attempts,
    } = converse(&facade, &endpoint, req, tools.as_ref(), &call).await?;
    let cost = spec.cost_usd(usage.input_tokens, usage.output_tokens);
    record_spend(&ctx, &call, &model_id, started, usage, cost);
    let stored = s
        .chat_append(
            &session,
            "assistant",
            &done.text,
            Some(&model_id),
            Some(Spend {
                input_tokens: usage.input_tokens as i64,
                output_tokens: usage.output_tokens as i64,
                cost_usd: cost,
            }),
        )
        .map_err(db)?;
    Ok(ChatAnswer {
        session,
        model_id,
        text: done.text,
        finish: done.finish,
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cost_usd: cost,
        attempts,
        message_id: stored.id,
        tool_calls: uses,
    })
}

/// `model_id`, else the active model; unavailable when there is neither.
fn named_or_active(ctx: &Ctx, model_id: Option<String>) -> Result<String, ToolError> {
    match model_id {
        Some(m) => Ok(m),
        None => active_model(ctx)?.ok_or_else(|| {
            ToolError::unavailable(
                "no model named and none active: pass `model_id`, call vox_set_active_model, or set VOX_LLM_API, VOX_LLM_BASE_URL and VOX_LLM_MODEL",
            )
        }),
    }
}

/// Makes `skill` the session's active skill (as vox_skill_use does) and tells the transport.
fn activate_skill(ctx: &Ctx, call: &CallCtx, skill: &str) -> Result<(), ToolError> {
    vox_tools_common::bounded("active_skill", skill, 64)?;
    ctx.require::<Arc<vox_tools_workspace::Skills>>("skills (the skills profile)")?
        .activate(call.session(), call.principal(), Some(skill))?;
    call.session_changed(vox_core::SessionEffect {
        active_skill: Some(skill.to_owned()),
    });
    Ok(())
}

/// What the model's turns of one chat message came to: its last answer, the tokens and HTTP
/// attempts of every turn, and the tool calls it made.
struct Turns {
    done: Completion,
    usage: vox_llm::Usage,
    uses: Vec<ToolUse>,
    attempts: u32,
}

/// Asks the model, and while it calls tools (when `tools` are offered) runs each call under
/// the model's scope and asks again, at most [`MAX_TOOL_ROUNDS`] rounds; the answer streams to the
/// caller as progress.
async fn converse(
    facade: &Facade,
    endpoint: &vox_llm::Endpoint,
    mut req: ChatRequest,
    tools: Option<&ModelTools<'_>>,
    call: &CallCtx,
) -> Result<Turns, ToolError> {
    let mut streamed = 0usize;
    let mut usage = vox_llm::Usage::default();
    let mut uses = Vec::new();
    let mut attempts = 0;
    let done = loop {
        let done = facade
            .complete(
                endpoint,
                &req,
                |delta| {
                    streamed += delta.len();
                    call.progress(streamed as f64, None, Some(delta.to_string()));
                },
                call.cancel.cancelled(),
            )
            .await
            .map_err(llm)?;
        usage.input_tokens += done.usage.input_tokens;
        usage.output_tokens += done.usage.output_tokens;
        attempts += done.attempts;
        let Some(t) = tools.filter(|_| !done.tool_calls.is_empty()) else {
            break done;
        };
        let round = req
            .messages
            .iter()
            .filter(
                |m| matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()),
            )
            .count();
        if round >= MAX_TOOL_ROUNDS {
            return Err(ToolError::failed(format!(
                "the model was still calling tools after {MAX_TOOL_ROUNDS} rounds"
            )));
        }
        req.messages.push(Message::Assistant {
            content: done.text.clone(),
            tool_calls: done.tool_calls.clone(),
        });
        for tc in &done.tool_calls {
            let (text, used) = run_tool(t, call, tc).await;
            uses.push(used);
            req.messages.push(Message::Tool {
                call_id: tc.id.clone(),
                content: text,
            });
        }
    };
    Ok(Turns {
        done,
        usage,
        uses,
        attempts,
    })
}

/// Records the chat's tokens and cost in the attention ledger, as `llm:<model>`.
fn record_spend(
    ctx: &Ctx,
    call: &CallCtx,
    model_id: &str,
    started: Instant,
    usage: vox_llm::Usage,
    cost: f64,
) {
    if let Some(att) = ctx.get::<Arc<Attention>>() {
        att.record(vox_store::AttentionEvent {
            ts: vox_store::now_ms(),
            agent: call.principal().to_string(),
            tool: format!("llm:{model_id}").chars().take(128).collect(),
            outcome: "ok".into(),
            latency_us: started.elapsed().as_micros() as i64,
            tokens: (usage.input_tokens + usage.output_tokens) as i64,
            cost_micro_usd: (cost * 1e6).round() as i64,
        });
    }
}

/// Asks a model (`model_id`, else the active one) for one JSON object: `system` says what it
/// holds, `user` is the request. The object (the whole answer, or from its first `{` to its
/// last `}`) and the tokens the call used; the call is cancelled with the tool call.
pub async fn ask_json(
    ctx: &Ctx,
    call: &CallCtx,
    model_id: Option<&str>,
    system: &str,
    user: String,
) -> Result<(String, serde_json::Value, vox_llm::Usage), ToolError> {
    let model_id = named_or_active(ctx, model_id.map(str::to_string))?;
    let facade = ctx.require::<Arc<Facade>>("the LLM facade")?.clone();
    let endpoint = registry(ctx)?
        .endpoint(&model_id, &ProcessEnv)
        .map_err(llm)?;
    let req = ChatRequest {
        system: Some(system.to_string()),
        messages: vec![Message::User { content: user }],
        ..Default::default()
    };
    let done = facade
        .complete(&endpoint, &req, |_| {}, call.cancel.cancelled())
        .await
        .map_err(llm)?;
    let v = json_object(&done.text)
        .map_err(|e| ToolError::failed(format!("[llm_answer_not_json] {model_id}: {e}")))?;
    Ok((model_id, v, done.usage))
}

/// The JSON object in a model's answer: the whole text, or from its first `{` to its last `}`.
fn json_object(text: &str) -> Result<serde_json::Value, String> {
    let t = text.trim();
    if let Ok(v @ serde_json::Value::Object(_)) = serde_json::from_str(t) {
        return Ok(v);
    }
    match (t.find('{'), t.rfind('}')) {
        (Some(a), Some(b)) if a < b => serde_json::from_str(&t[a..=b])
            .map_err(|e| format!("the answer holds no JSON object ({e})")),
        _ => Err("the answer holds no JSON object".into()),
    }
}

/// The newest messages of a history that fit in `budget` bytes, oldest first.
fn fit_history(history: &[ChatMessage], budget: usize) -> Vec<Message> {
    let mut used = 0usize;
    let mut kept: Vec<Message> = Vec::new();
    for m in history.iter().rev() {
        used += m.content.len();
        if used > budget {
            break;
        }
        kept.push(if m.role == "assistant" {
            Message::Assistant {
                content: m.content.clone(),
                tool_calls: Vec::new(),
            }
        } else {
            Message::User {
                content: m.content.clone(),
            }
        });
    }
    kept.reverse();
    kept
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HistoryArgs {
    /// The chat session (default `default`).
    session: Option<String>,
    /// The `next_cursor` of a previous page (older messages).
    cursor: Option<i64>,
    /// Page size (default 50, at most 500).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct History {
    session: String,
    /// Oldest first.
    messages: Vec<ChatMessage>,
    /// Pass as `cursor` for the older page; null at the start of the session.
    next_cursor: Option<i64>,
}

fn history(ctx: &Ctx, a: HistoryArgs) -> Result<History, ToolError> {
    let session = session_name(a.session)?;
    let limit = a.limit.unwrap_or(50).clamp(1, 500) as usize;
    let mut messages = store(ctx)?
        .chat_history(&session, a.cursor, limit + 1)
        .map_err(db)?;
    let next_cursor = if messages.len() > limit {
        messages.remove(0);
        messages.first().map(|m| m.id)
    } else {
        None
    };
    Ok(History {
        session,
        messages,
        next_cursor,
    })
}

/// The chat tools, for the models family.
pub(super) fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_chat_message", async_typed(chat)),
        ("vox_chat_history", typed(history)),
    ]
}
