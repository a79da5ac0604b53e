//! The research family: a question, evidence gathered from the workspace (text search), the
//! knowledge base and the memories, a model asked for claims that cite that evidence, and only
//! the claims whose every citation resolves kept (a file's line range with the hash of its
//! content, a kb document, a memory), persisted with their checked citations. A run can be
//! evaluated again later (are the cited lines still what they were?) and turned into a draft.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use vox_core::family::{async_typed, typed};
use vox_core::{CallCtx, Ctx, Family, HandlerEntry, StepDone, ToolError};
use vox_llm::{ProcessEnv, Registry};
use vox_mcp_registry::BootStep;
use vox_store::{Draft, NewClaim, ResearchClaim, ResearchRun};
use vox_tools_common::store::{db, store};

/// Longest question, in bytes.
const MAX_QUESTION: usize = 4096;
/// Most claims kept from one answer, citations per claim, characters per claim.
const MAX_CLAIMS: usize = 50;
const MAX_CITATIONS: usize = 10;
const MAX_CLAIM_CHARS: usize = 4000;
/// Most lines one file citation may span.
const MAX_CITED_LINES: u32 = 200;
/// Largest file a citation is checked in.
const MAX_CITED_FILE: u64 = 1024 * 1024;

const SYSTEM: &str = "You answer a research question from the evidence given, and only from it. Reply with one JSON object and nothing else: {\"claims\": [{\"text\": \"one factual claim\", \"citations\": [...]}]}. Every claim cites the evidence that supports it: {\"file\": \"<path>\", \"lines\": [first, last]} for lines of a workspace file, {\"kb\": <document id>} for a knowledge-base document, {\"memory\": \"<key>\"} for a memory. Cite only evidence you were shown; a claim whose citation cannot be checked is dropped.";

fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The evidence a run shows the model, as text, and how many pieces.
fn gather(ctx: &Ctx, call: &CallCtx, question: &str) -> Result<(String, usize), ToolError> {
    let mut text = String::new();
    let mut n = 0;
    for f in vox_tools_knowledge::search::workspace_text(ctx, call, question, 8)? {
        text.push_str(&format!("[file {}]\n", f.path));
        for l in &f.lines {
            text.push_str(&format!("{}: {}\n", l.line, l.text));
        }
        n += 1;
    }
    for (id, title, snippet) in vox_tools_knowledge::search::kb_snippets(ctx, question, 5)? {
        text.push_str(&format!("[kb {id}] {title}\n{snippet}\n"));
        n += 1;
    }
    for (key, value) in vox_tools_knowledge::search::memory_snippets(ctx, question, 5)? {
        text.push_str(&format!("[memory {key}]\n{value}\n"));
        n += 1;
    }
    Ok((text, n))
}

/// One citation, checked: its resolved record, or why it does not resolve.
fn check_citation(ctx: &Ctx, c: &Value) -> Result<Value, String> {
    let s = store(ctx).map_err(|e| e.to_string())?;
    if let Some(path) = c.get("file").and_then(Value::as_str) {
        let lines = c.get("lines").and_then(Value::as_array);
        let (start, end) = match lines.map(|l| {
            (
                l.first().and_then(Value::as_u64),
                l.get(1).and_then(Value::as_u64),
            )
        }) {
            Some((Some(a), Some(b))) => (a as u32, b as u32),
            _ => {
                return Err(format!(
                    "file citation {path}: `lines` is not [first, last]"
                ));
            }
        };
        let content = cited_lines(&ctx.workspace.root, path, start, end)?;
        return Ok(
            json!({"kind": "file", "path": path, "start_line": start, "end_line": end, "sha256": sha256(&content)}),
        );
    }
    if let Some(id) = c.get("kb").and_then(Value::as_i64) {
        return match s.kb_get(id).map_err(|e| e.to_string())? {
            Some(d) => Ok(json!({"kind": "kb", "id": id, "sha256": d.sha256})),
            None => Err(format!("kb document {id} does not exist")),
        };
    }
    if let Some(key) = c.get("memory").and_then(Value::as_str) {
        return match s.memory_get(key).map_err(|e| e.to_string())? {
            Some(m) => Ok(json!({"kind": "memory", "key": key, "sha256": sha256(&m.value)})),
            None => Err(format!("memory `{key}` does not exist")),
        };
    }
    Err(format!("`{c}` is not a file, kb or memory citation"))
}

/// Lines `start..=end` of a workspace file, joined with `\n`; the path must stay inside the
/// workspace and the range inside the file.
fn cited_lines(root: &Path, path: &str, start: u32, end: u32) -> Result<String, String> {
    let rel = Path::new(path);
    if !vox_tools_common::is_plain_relative(rel) {
        return Err(format!(
            "file citation `{path}` is not a plain workspace-relative path"
        ));
    }
    let full = root.join(rel);
    let real = full
        .canonicalize()
        .map_err(|_| format!("file `{path}` does not exist"))?;
    let root_real = root.canonicalize().map_err(|e| e.to_string())?;
    if !real.starts_with(&root_real) || !real.is_file() {
        return Err(format!("`{path}` is not a file of the workspace"));
    }
    if std::fs::metadata(&real).map(|m| m.len()).unwrap_or(0) > MAX_CITED_FILE {
        return Err(format!("`{path}` is over {MAX_CITED_FILE} bytes"));
    }
    let text = std::fs::read_to_string(&real).map_err(|e| format!("`{path}`: {e}"))?;
    let count = text.lines().count() as u32;
    if start == 0 || end < start || end > count || end - start >= MAX_CITED_LINES {
        return Err(format!(
            "`{path}` lines {start}-{end} do not exist (it has {count} lines; a citation spans at most {MAX_CITED_LINES})"
        ));
    }
    Ok(text
        .lines()
        .skip(start as usize - 1)
        .take((end - start + 1) as usize)
        .collect::<Vec<_>>()
        .join("\n"))
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RunArgs {
    /// The question (at most 4 KiB).
    question: String,
    /// A model id; the active model when left out.
    model_id: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct RunReport {
    run: ResearchRun,
    /// The claims kept: every citation resolved.
    kept: Vec<ResearchClaim>,
    /// The claims dropped, each with why.
    dropped: Vec<ResearchClaim>,
}

async fn run(ctx: Arc<Ctx>, call: CallCtx, a: RunArgs) -> Result<RunReport, ToolError> {
    vox_tools_common::bounded("question", &a.question, MAX_QUESTION)?;
    let model_id = match a.model_id {
        Some(m) => m,
        None => crate::models::active_model(&ctx)?.ok_or_else(|| {
            ToolError::unavailable(
                "no model named and none active: pass `model_id`, or call vox_set_active_model",
            )
        })?,
    };
    // A model that cannot be called now is refused before anything is recorded.
    ctx.require::<Arc<Registry>>("the model registry")?
        .endpoint(&model_id, &ProcessEnv)
        .map_err(crate::models::llm)?;
    let started = store(&ctx)?
        .research_start(&a.question, &model_id)
        .map_err(db)?;
    execute(&ctx, &call, started.id, &a.question, &model_id).await?;
    report(&ctx, started.id)
}

/// Runs research run `id` (recorded `running`) to its end: evidence, the model's claims, their
/// citations checked, everything stored in one transaction. A failure marks the run failed.
async fn execute(
    ctx: &Arc<Ctx>,
    call: &CallCtx,
    id: i64,
    question: &str,
    model_id: &str,
) -> Result<(), ToolError> {
    let outcome = answer(ctx, call, id, question, model_id).await;
    if let Err(e) = &outcome
        && let Ok(s) = store(ctx)
    {
        let _ = s.research_fail(id, &e.to_string());
    }
    outcome
}

async fn answer(
    ctx: &Arc<Ctx>,
    call: &CallCtx,
    id: i64,
    question: &str,
    model_id: &str,
) -> Result<(), ToolError> {
    call.progress(0.0, Some(3.0), Some("gathering evidence".into()));
    let (evidence, pieces) = {
        let (ctx2, call2, q) = (ctx.clone(), call.clone(), question.to_string());
        tokio::task::spawn_blocking(move || gather(&ctx2, &call2, &q))
            .await
            .map_err(|e| ToolError::internal(e.to_string()))??
    };
    call.progress(
        1.0,
        Some(3.0),
        Some(format!("asking {model_id} ({pieces} pieces of evidence)")),
    );
    let (_, parsed, usage) = crate::models::ask_json(
        ctx,
        call,
        Some(model_id),
        SYSTEM,
        format!("<evidence>\n{evidence}</evidence>\n<question>{question}</question>"),
    )
    .await
    .map_err(|e| match e.kind() {
        vox_core::ErrorKind::Failed => e.context(format_args!("research run {id}")),
        _ => e,
    })?;
    call.progress(2.0, Some(3.0), Some("checking citations".into()));
    let claims: Vec<Value> = parsed["claims"].as_array().cloned().unwrap_or_default();
    persist(
        ctx,
        id,
        pieces,
        (usage.input_tokens as i64, usage.output_tokens as i64),
        &claims,
    )?;
    call.progress(3.0, Some(3.0), Some("done".into()));
    Ok(())
}

/// Checks each claim's citations and stores the claims, kept or dropped, finishing run `id`.
fn persist(
    ctx: &Ctx,
    id: i64,
    pieces: usize,
    tokens: (i64, i64),
    claims: &[Value],
) -> Result<(), ToolError> {
    let mut checked: Vec<(String, Value, bool, Option<String>)> = Vec::new();
    for c in claims.iter().take(MAX_CLAIMS) {
        let text: String = c["text"]
            .as_str()
            .unwrap_or("")
            .chars()
            .take(MAX_CLAIM_CHARS)
            .collect();
        let cites = c["citations"].as_array().cloned().unwrap_or_default();
        let verdict = if text.trim().is_empty() {
            Err("the claim has no text".to_string())
        } else if cites.is_empty() {
            Err("the claim cites nothing".to_string())
        } else if cites.len() > MAX_CITATIONS {
            Err(format!("more than {MAX_CITATIONS} citations"))
        } else {
            cites
                .iter()
                .map(|x| check_citation(ctx, x))
                .collect::<Result<Vec<_>, _>>()
        };
        match verdict {
            Ok(resolved) => checked.push((text, Value::Array(resolved), true, None)),
            Err(why) => checked.push((text, Value::Array(cites), false, Some(why))),
        }
    }
    let new: Vec<NewClaim<'_>> = checked
        .iter()
        .map(|(text, cites, kept, reason)| NewClaim {
            text,
            citations: cites,
            kept: *kept,
            reason: reason.as_deref(),
        })
        .collect();
    store(ctx)?
        .research_finish(id, pieces as i64, tokens, &new)
        .map_err(db)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PersistArgs {
    /// The question the claims answer.
    question: String,
    /// Who made the claims (a model id, an agent); `external` when left out.
    source: Option<String>,
    /// At most 50 claims: `{"text", "citations": [{"file", "lines": [first, last]} | {"kb": id}
    /// | {"memory": key}]}`.
    claims: Vec<Value>,
}

/// `vox_research_persist_claims` (and the daemon's `research.persist_claims`): claims made
/// elsewhere (by an agent, another run) are checked and stored as a run of their own, kept only
/// when every citation resolves.
fn persist_claims(ctx: &Ctx, a: PersistArgs) -> Result<RunReport, ToolError> {
    vox_tools_common::bounded("question", &a.question, MAX_QUESTION)?;
    let source = a.source.unwrap_or_else(|| "external".into());
    vox_tools_common::bounded("source", &source, 256)?;
    if a.claims.len() > MAX_CLAIMS {
        return Err(ToolError::invalid_arguments(format!(
            "`claims`: {} claims; at most {MAX_CLAIMS}",
            a.claims.len()
        )));
    }
    let started = store(ctx)?
        .research_start(&a.question, &source)
        .map_err(db)?;
    if let Err(e) = persist(ctx, started.id, 0, (0, 0), &a.claims) {
        let _ = store(ctx)?.research_fail(started.id, &e.to_string());
        return Err(e);
    }
    report(ctx, started.id)
}

fn report(ctx: &Ctx, id: i64) -> Result<RunReport, ToolError> {
    let s = store(ctx)?;
    let run = s
        .research_run(id)
        .map_err(db)?
        .ok_or_else(|| ToolError::not_found(format!("no research run {id}")))?;
    let (kept, dropped) = s
        .research_claims(id)
        .map_err(db)?
        .into_iter()
        .partition(|c| c.kept);
    Ok(RunReport { run, kept, dropped })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IdArgs {
    /// The research run.
    run_id: i64,
}

fn status(ctx: &Ctx, a: IdArgs) -> Result<RunReport, ToolError> {
    report(ctx, a.run_id)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// Only runs in this state: running, done or failed.
    state: Option<String>,
    /// Most runs (default 20, at most 200).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct Runs {
    runs: Vec<ResearchRun>,
}

fn list(ctx: &Ctx, a: ListArgs) -> Result<Runs, ToolError> {
    if let Some(st) = &a.state
        && !matches!(st.as_str(), "running" | "done" | "failed")
    {
        return Err(ToolError::invalid_arguments(format!(
            "`state`: `{st}` is not running, done or failed"
        )));
    }
    let runs = store(ctx)?
        .research_runs(
            a.state.as_deref(),
            a.limit.unwrap_or(20).clamp(1, 200) as usize,
        )
        .map_err(db)?;
    Ok(Runs { runs })
}

#[derive(Serialize, JsonSchema)]
struct Evaluated {
    run_id: i64,
    /// Kept claims whose every citation still resolves to the same content.
    holding: usize,
    /// Kept claims with a citation that changed or is gone.
    stale: usize,
    claims: Vec<ClaimCheck>,
}

#[derive(Serialize, JsonSchema)]
struct ClaimCheck {
    claim_id: i64,
    text: String,
    holds: bool,
    /// What changed, per citation that no longer holds.
    changes: Vec<String>,
}

fn evaluate(ctx: &Ctx, a: IdArgs) -> Result<Evaluated, ToolError> {
    let r = report(ctx, a.run_id)?;
    let mut claims = Vec::new();
    for c in r.kept {
        let mut changes = Vec::new();
        for cite in c.citations.as_array().into_iter().flatten() {
            let again = match cite["kind"].as_str() {
                Some("file") => check_citation(
                    ctx,
                    &json!({"file": cite["path"], "lines": [cite["start_line"], cite["end_line"]]}),
                ),
                Some("kb") => check_citation(ctx, &json!({"kb": cite["id"]})),
                Some("memory") => check_citation(ctx, &json!({"memory": cite["key"]})),
                _ => Err("an unreadable citation".into()),
            };
            match again {
                Ok(now) if now["sha256"] == cite["sha256"] => {}
                Ok(_) => changes.push(format!("{} changed since the run", describe(cite))),
                Err(why) => changes.push(why),
            }
        }
        claims.push(ClaimCheck {
            claim_id: c.id,
            text: c.text,
            holds: changes.is_empty(),
            changes,
        });
    }
    let holding = claims.iter().filter(|c| c.holds).count();
    Ok(Evaluated {
        run_id: a.run_id,
        stale: claims.len() - holding,
        holding,
        claims,
    })
}

fn describe(cite: &Value) -> String {
    match cite["kind"].as_str() {
        Some("file") => format!(
            "{} lines {}-{}",
            cite["path"].as_str().unwrap_or("?"),
            cite["start_line"],
            cite["end_line"]
        ),
        Some("kb") => format!("kb document {}", cite["id"]),
        Some("memory") => format!("memory `{}`", cite["key"].as_str().unwrap_or("?")),
        _ => cite.to_string(),
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DraftArgs {
    run_id: i64,
    /// The draft's title (default: the run's question).
    title: Option<String>,
}

fn draft(ctx: &Ctx, a: DraftArgs) -> Result<Draft, ToolError> {
    let r = report(ctx, a.run_id)?;
    if r.run.state != "done" {
        return Err(ToolError::conflict(format!(
            "research run {} is `{}`; a draft is written from a finished run",
            a.run_id, r.run.state
        )));
    }
    if r.kept.is_empty() {
        return Err(ToolError::conflict(format!(
            "research run {} kept no claim: there is nothing to draft",
            a.run_id
        )));
    }
    let title = a.title.unwrap_or_else(|| r.run.question.clone());
    vox_tools_common::bounded("title", &title, 512)?;
    let mut body = format!("# {title}\n\n");
    for (i, c) in r.kept.iter().enumerate() {
        let refs: Vec<String> = c
            .citations
            .as_array()
            .into_iter()
            .flatten()
            .map(describe)
            .collect();
        body.push_str(&format!("{}. {} [{}]\n", i + 1, c.text, refs.join("; ")));
    }
    body.push_str(&format!(
        "\nResearch run {} ({}), {} claim(s) kept, {} dropped.\n",
        r.run.id,
        r.run.model_id,
        r.kept.len(),
        r.dropped.len()
    ));
    store(ctx)?
        .research_draft(a.run_id, &title, &body)
        .map_err(db)
}

fn boot(ctx: &mut Ctx) -> Result<StepDone, String> {
    let Some(s) = ctx.get::<Arc<vox_store::Store>>() else {
        return Ok(StepDone::Ready(
            "no store: research runs are not kept".into(),
        ));
    };
    let unfinished = s
        .research_runs(Some("running"), MAX_RESUMED)
        .map_err(|e| e.to_string())?;
    Ok(StepDone::Ready(format!(
        "{} unfinished run(s) of an earlier daemon to resume",
        unfinished.len()
    )))
}

/// Runs resumed at most after a restart.
const MAX_RESUMED: usize = 100;

/// After a restart, runs an earlier daemon left `running` are run again from their question
/// (the model's answer was never stored), in the background.
fn resume(ctx: Arc<Ctx>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let Some(s) = ctx.get::<Arc<vox_store::Store>>().cloned() else {
        return;
    };
    for r in s
        .research_runs(Some("running"), MAX_RESUMED)
        .unwrap_or_default()
    {
        let ctx = ctx.clone();
        rt.spawn(async move {
            let scope = vox_core::CallScope::new(
                ctx.profile.clone(),
                vox_mcp_registry::Caller::LOCAL,
                "research",
                "research",
            );
            let call = CallCtx::new(Arc::new(scope));
            if let Err(e) = execute(&ctx, &call, r.id, &r.question, &r.model_id).await {
                tracing::warn!(run = r.id, "resuming research run: {e}");
            }
        });
    }
}

pub fn family() -> Family {
    Family {
        name: "research",
        steps: vec![(BootStep::SocratesResearchPoller, boot)],
        handlers: handlers(),
        on_started: Some(resume),
        ..Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_research_run", async_typed(run)),
        ("vox_research_persist_claims", typed(persist_claims)),
        ("vox_research_status", typed(status)),
        ("vox_research_list", typed(list)),
        ("vox_research_evaluate", typed(evaluate)),
        ("vox_news_draft", typed(draft)),
    ]
    .into_iter()
    .chain(publish_handlers())
    .collect()
}

#[cfg(feature = "news-publish")]
fn publish_handlers() -> Vec<(&'static str, HandlerEntry)> {
    crate::publish::handlers()
}

#[cfg(not(feature = "news-publish"))]
fn publish_handlers() -> Vec<(&'static str, HandlerEntry)> {
    Vec::new()
}
