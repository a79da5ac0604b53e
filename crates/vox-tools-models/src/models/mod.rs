//! The models family: the `model_registry`, `routing_preferences` and `llm_facade` boot steps,
//! the model tools (list, suggest, set and get the active model, the manifest, credentials,
//! benchmarks) and chat through the facade, with each answer's tokens and cost kept in the
//! chat history and its tokens in the attention ledger.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use vox_core::family::typed;
use vox_core::{Ctx, Family, HandlerEntry, StepDone, ToolError};
use vox_llm::suggest::{CATEGORIES, Excluded, Scored};
use vox_llm::{Facade, FacadeOptions, LlmError, ProcessEnv, Registry};
use vox_mcp_registry::BootStep;
use vox_store::Benchmark;
use vox_tools_common::store::{db, store};

mod chat;

pub use chat::ask_json;

/// The preference scope of the active model.
const ACTIVE: &str = "active";
/// Longest chat message, in bytes.
const MAX_MESSAGE: usize = 64 * 1024;
/// Messages of history sent with a new one, at most.
const HISTORY_MESSAGES: usize = 50;

fn registry(ctx: &Ctx) -> Result<&Registry, ToolError> {
    Ok(ctx.require::<Arc<Registry>>("the model registry")?.as_ref())
}

pub(crate) fn llm(e: LlmError) -> ToolError {
    let code = e.code();
    let text = format!("[{code}] {e}");
    let error = match e {
        LlmError::Cancelled => ToolError::cancelled(text),
        LlmError::UnknownModel { .. } => ToolError::not_found(text),
        LlmError::Credentials { .. } => ToolError::unavailable(text),
        LlmError::Registry { .. } => ToolError::invalid_arguments(text),
        _ => ToolError::failed(text),
    };
    error.with_detail(code, None)
}

/// The active model's id, if there is one.
pub(crate) fn active_model(ctx: &Ctx) -> Result<Option<String>, ToolError> {
    Ok(active(ctx)?.0)
}

/// The active model and where the choice came from: the one chosen (`vox_set_active_model`),
/// else the environment's endpoint, else none.
fn active(ctx: &Ctx) -> Result<(Option<String>, &'static str), ToolError> {
    let r = registry(ctx)?;
    if let Ok(s) = store(ctx)
        && let Some((id, _)) = s.model_preference(ACTIVE).map_err(db)?
        && r.models.contains_key(&id)
    {
        return Ok((Some(id), "chosen"));
    }
    Ok(match &r.env_model {
        Some(id) => (Some(id.clone()), "environment"),
        None => (None, "none"),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// Only this provider's models.
    provider: Option<String>,
    /// Only models with these: `tool_calling`, `structured_output`, or an input modality
    /// (`image`, `audio`, `pdf`).
    #[serde(default)]
    needs: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
struct ModelView {
    id: String,
    provider: String,
    /// `chat`, `responses` or `anthropic`.
    api: String,
    name: String,
    context_window: u32,
    max_output_tokens: u32,
    input_modalities: Vec<String>,
    tool_calling: bool,
    structured_output: bool,
    price_input_per_mtok: f64,
    price_output_per_mtok: f64,
    strengths: Vec<String>,
    has_credentials: bool,
    active: bool,
}

#[derive(Serialize, JsonSchema)]
struct ModelList {
    models: Vec<ModelView>,
    active_model: Option<String>,
}

fn view(r: &Registry, m: &vox_llm::ModelSpec, active: Option<&str>) -> ModelView {
    ModelView {
        id: m.id.clone(),
        provider: m.provider.clone(),
        api: r.providers[&m.provider].api.as_str().into(),
        name: m.name.clone(),
        context_window: m.context_window,
        max_output_tokens: m.max_output_tokens,
        input_modalities: m.input_modalities.clone(),
        tool_calling: m.tool_calling,
        structured_output: m.structured_output,
        price_input_per_mtok: m.price_input_per_mtok,
        price_output_per_mtok: m.price_output_per_mtok,
        strengths: m.strengths.clone(),
        has_credentials: r.has_credentials(m, &ProcessEnv),
        active: active == Some(m.id.as_str()),
    }
}

fn list(ctx: &Ctx, a: ListArgs) -> Result<ModelList, ToolError> {
    let r = registry(ctx)?;
    if let Some(p) = &a.provider
        && !r.providers.contains_key(p)
    {
        return Err(ToolError::invalid_arguments(format!(
            "`provider`: `{p}` is not a provider (known: {})",
            r.providers.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    for n in &a.needs {
        if !matches!(n.as_str(), "tool_calling" | "structured_output")
            && !vox_llm::registry::MODALITIES.contains(&n.as_str())
        {
            return Err(ToolError::invalid_arguments(format!(
                "`needs`: `{n}` is not tool_calling, structured_output or a modality ({})",
                vox_llm::registry::MODALITIES.join(", ")
            )));
        }
    }
    let (act, _) = active(ctx)?;
    let models = r
        .models
        .values()
        .filter(|m| a.provider.as_ref().is_none_or(|p| &m.provider == p))
        .filter(|m| {
            a.needs.iter().all(|n| match n.as_str() {
                "tool_calling" => m.tool_calling,
                "structured_output" => m.structured_output,
                x => m.input_modalities.iter().any(|i| i == x),
            })
        })
        .map(|m| view(r, m, act.as_deref()))
        .collect();
    Ok(ModelList {
        models,
        active_model: act,
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SuggestArgs {
    /// One of codegen, review, testing, planning, chat, research, summarize, vision.
    task_category: String,
}

#[derive(Serialize, JsonSchema)]
struct ScoredView {
    model_id: String,
    /// 0 to 1.
    score: f64,
    /// Each part's weighted contribution.
    parts: BTreeMap<String, f64>,
    has_credentials: bool,
    why: String,
}

#[derive(Serialize, JsonSchema)]
struct ExcludedView {
    model_id: String,
    why: String,
}

#[derive(Serialize, JsonSchema)]
struct Suggested {
    task_category: String,
    /// The best model that can be called now (its provider's credentials are set), if any.
    model_id: Option<String>,
    /// Best first, at most 10; models without credentials after those with.
    ranked: Vec<ScoredView>,
    excluded: Vec<ExcludedView>,
}

fn suggest(ctx: &Ctx, a: SuggestArgs) -> Result<Suggested, ToolError> {
    if !CATEGORIES.contains(&a.task_category.as_str()) {
        return Err(ToolError::invalid_arguments(format!(
            "`task_category`: `{}` is not one of {}",
            a.task_category,
            CATEGORIES.join(", ")
        )));
    }
    let r = registry(ctx)?;
    let means = store(ctx)?.benchmark_means(&a.task_category).map_err(db)?;
    let s = vox_llm::suggest::rank(&a.task_category, r.models.values(), &means, &|m| {
        r.has_credentials(m, &ProcessEnv)
    });
    let best = s
        .ranked
        .iter()
        .find(|x| x.has_credentials)
        .map(|x| x.model_id.clone());
    Ok(Suggested {
        task_category: s.category,
        model_id: best,
        ranked: s
            .ranked
            .into_iter()
            .take(10)
            .map(
                |Scored {
                     model_id,
                     score,
                     parts,
                     has_credentials,
                     why,
                 }| ScoredView {
                    model_id,
                    score,
                    parts: parts.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                    has_credentials,
                    why,
                },
            )
            .collect(),
        excluded: s
            .excluded
            .into_iter()
            .map(|Excluded { model_id, why }| ExcludedView { model_id, why })
            .collect(),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetModelArgs {
    /// The agent (from vox_spawn_agent).
    agent_id: String,
    /// A model id from vox_list_models.
    model_id: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetActiveArgs {
    /// A model id from vox_list_models.
    model_id: String,
}

#[derive(Serialize, JsonSchema)]
struct Chosen {
    /// `active`, or `agent:<id>`.
    scope: String,
    model_id: String,
    updated_at: i64,
}

fn set_model(ctx: &Ctx, a: SetModelArgs) -> Result<Chosen, ToolError> {
    registry(ctx)?.model(&a.model_id).map_err(llm)?;
    let s = store(ctx)?;
    s.agent_get(&a.agent_id).map_err(db)?;
    let scope = format!("agent:{}", a.agent_id);
    let updated_at = s.set_model_preference(&scope, &a.model_id).map_err(db)?;
    Ok(Chosen {
        scope,
        model_id: a.model_id,
        updated_at,
    })
}

fn set_active(ctx: &Ctx, a: SetActiveArgs) -> Result<Chosen, ToolError> {
    registry(ctx)?.model(&a.model_id).map_err(llm)?;
    let updated_at = store(ctx)?
        .set_model_preference(ACTIVE, &a.model_id)
        .map_err(db)?;
    Ok(Chosen {
        scope: ACTIVE.into(),
        model_id: a.model_id,
        updated_at,
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Serialize, JsonSchema)]
struct Active {
    model_id: Option<String>,
    /// `chosen` (vox_set_active_model), `environment` (VOX_LLM_MODEL) or `none`.
    source: String,
    /// Each agent's chosen model, by agent id.
    agents: BTreeMap<String, String>,
}

fn get_active(ctx: &Ctx, _a: NoArgs) -> Result<Active, ToolError> {
    let (model_id, source) = active(ctx)?;
    let agents = store(ctx)?
        .model_preferences()
        .map_err(db)?
        .into_iter()
        .filter_map(|(k, v)| k.strip_prefix("agent:").map(|a| (a.to_string(), v)))
        .collect();
    Ok(Active {
        model_id,
        source: source.into(),
        agents,
    })
}

#[derive(Serialize, JsonSchema)]
struct ProviderView {
    id: String,
    api: String,
    base_url: String,
    /// The environment variable that holds its key (never the key).
    api_key_env: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Manifest {
    providers: Vec<ProviderView>,
    models: Vec<ModelView>,
    /// The files and settings the registry was read from, in order.
    sources: Vec<String>,
}

fn providers(r: &Registry) -> Vec<ProviderView> {
    r.providers
        .values()
        .map(|p| ProviderView {
            id: p.id.clone(),
            api: p.api.as_str().into(),
            base_url: p.base_url.clone(),
            api_key_env: p.api_key_env.clone(),
        })
        .collect()
}

fn manifest(ctx: &Ctx, _a: NoArgs) -> Result<Manifest, ToolError> {
    let r = registry(ctx)?;
    let (act, _) = active(ctx)?;
    Ok(Manifest {
        providers: providers(r),
        models: r
            .models
            .values()
            .map(|m| view(r, m, act.as_deref()))
            .collect(),
        sources: r.sources.clone(),
    })
}

#[derive(Serialize, JsonSchema)]
struct CredentialView {
    provider: String,
    /// The variable looked at; none for a provider that needs no key.
    api_key_env: Option<String>,
    /// Whether it is set (a provider without a key variable always is).
    set: bool,
}

#[derive(Serialize, JsonSchema)]
struct Credentials {
    providers: Vec<CredentialView>,
}

fn credentials(ctx: &Ctx, _a: NoArgs) -> Result<Credentials, ToolError> {
    let r = registry(ctx)?;
    Ok(Credentials {
        providers: r
            .providers
            .values()
            .map(|p| CredentialView {
                provider: p.id.clone(),
                set: p
                    .api_key_env
                    .as_ref()
                    .is_none_or(|v| vox_llm::Env::var(&ProcessEnv, v).is_some()),
                api_key_env: p.api_key_env.clone(),
            })
            .collect(),
    })
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RecordArgs {
    model_id: String,
    /// One of codegen, review, testing, planning, chat, research, summarize, vision.
    category: String,
    /// The result, from 0 (worst) to 1 (best).
    score: f64,
    /// What was measured (e.g. `pass@1`).
    metric: Option<String>,
    notes: Option<String>,
}

fn record(ctx: &Ctx, a: RecordArgs) -> Result<Benchmark, ToolError> {
    registry(ctx)?.model(&a.model_id).map_err(llm)?;
    if !CATEGORIES.contains(&a.category.as_str()) {
        return Err(ToolError::invalid_arguments(format!(
            "`category`: `{}` is not one of {}",
            a.category,
            CATEGORIES.join(", ")
        )));
    }
    let metric = a.metric.unwrap_or_default();
    let notes = a.notes.unwrap_or_default();
    if metric.len() > 128 || notes.len() > 4096 {
        return Err(ToolError::invalid_arguments(
            "`metric` is at most 128 bytes and `notes` at most 4096",
        ));
    }
    store(ctx)?
        .benchmark_record(&a.model_id, &a.category, a.score, &metric, &notes)
        .map_err(db)
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BenchListArgs {
    model_id: Option<String>,
    category: Option<String>,
    /// Most results (default 50, at most 500).
    limit: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
struct Mean {
    model_id: String,
    category: String,
    mean: f64,
    runs: u32,
}

#[derive(Serialize, JsonSchema)]
struct BenchList {
    benchmarks: Vec<Benchmark>,
    /// Each model's mean per category (of every recorded run, not only this page).
    means: Vec<Mean>,
}

fn bench_list(ctx: &Ctx, a: BenchListArgs) -> Result<BenchList, ToolError> {
    let s = store(ctx)?;
    let limit = a.limit.unwrap_or(50).clamp(1, 500) as usize;
    let benchmarks = s
        .benchmarks(a.model_id.as_deref(), a.category.as_deref(), limit)
        .map_err(db)?;
    let mut means = Vec::new();
    for c in CATEGORIES
        .iter()
        .filter(|c| a.category.as_deref().is_none_or(|x| x == **c))
    {
        for (model_id, (mean, runs)) in s.benchmark_means(c).map_err(db)? {
            if a.model_id.as_ref().is_none_or(|m| *m == model_id) {
                means.push(Mean {
                    model_id,
                    category: c.to_string(),
                    mean,
                    runs,
                });
            }
        }
    }
    Ok(BenchList { benchmarks, means })
}

fn boot_registry(ctx: &mut Ctx) -> Result<StepDone, String> {
    let r = Registry::load(&ProcessEnv).map_err(|e| e.to_string())?;
    let detail = format!(
        "{} models of {} providers from {}",
        r.models.len(),
        r.providers.len(),
        r.sources.join(" + ")
    );
    ctx.insert(Arc::new(r));
    Ok(StepDone::Ready(detail))
}

fn boot_preferences(ctx: &mut Ctx) -> Result<StepDone, String> {
    let Some(r) = ctx.get::<Arc<Registry>>().cloned() else {
        return Ok(StepDone::Ready("no registry: nothing to prefer".into()));
    };
    let Some(s) = ctx.get::<Arc<vox_store::Store>>() else {
        return Ok(StepDone::Ready(
            "no store: preferences are not kept; the environment's model, if any, is active".into(),
        ));
    };
    let chosen = s.model_preference(ACTIVE).map_err(|e| e.to_string())?;
    Ok(StepDone::Ready(match (chosen, &r.env_model) {
        (Some((id, _)), _) if r.models.contains_key(&id) => format!("active model {id} (chosen)"),
        (Some((id, _)), env) => format!(
            "the chosen model {id} is not in the registry any more; active: {}",
            env.as_deref().unwrap_or("none")
        ),
        (None, Some(env)) => format!("active model {env} (from VOX_LLM_MODEL)"),
        (None, None) => "no active model yet (vox_set_active_model, or VOX_LLM_*)".into(),
    }))
}

fn boot_facade(ctx: &mut Ctx) -> Result<StepDone, String> {
    let opts = FacadeOptions::from_env(&ProcessEnv).map_err(|e| e.to_string())?;
    let f = Facade::new(opts).map_err(|e| e.to_string())?;
    ctx.insert(Arc::new(f));
    Ok(StepDone::Ready(format!(
        "chat, responses and anthropic APIs; {} s idle timeout, {} retries",
        opts.idle_timeout.as_secs(),
        opts.retries
    )))
}

/// The `models` family: its boot steps and tool handlers.
pub fn family() -> Family {
    Family {
        name: "models",
        steps: vec![
            (BootStep::ModelRegistry, boot_registry),
            (BootStep::RoutingPreferences, boot_preferences),
            (BootStep::LlmFacade, boot_facade),
        ],
        handlers: handlers(),
        ..Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_list_models", typed(list)),
        ("vox_suggest_model", typed(suggest)),
        ("vox_set_model", typed(set_model)),
        ("vox_set_active_model", typed(set_active)),
        ("vox_get_active_model", typed(get_active)),
        ("vox_capability_model_manifest", typed(manifest)),
        ("vox_credentials_status", typed(credentials)),
        ("vox_benchmark_record", typed(record)),
        ("vox_benchmark_list", typed(bench_list)),
    ]
    .into_iter()
    .chain(chat::handlers())
    .collect()
}
