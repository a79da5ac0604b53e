//! The model registry: the manifest vox ships (`contracts/models/models.v1.toml`), a user's
//! overlay file, and one endpoint from the environment (`VOX_LLM_*`). Parsing is strict: an
//! unknown key, a wrong type, a model naming no provider or an out-of-range number is an error
//! naming the file and the entry.

use crate::LlmError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The manifest this build ships.
pub const BUILTIN: &str = include_str!("../../../contracts/models/models.v1.toml");

/// Largest manifest or overlay file read.
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// Input modalities a model may list.
pub const MODALITIES: &[&str] = &["text", "image", "audio", "pdf"];

/// The wire API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// OpenAI-compatible Chat Completions (`POST {base}/chat/completions`).
    Chat,
    /// OpenAI's Responses API (`POST {base}/responses`).
    Responses,
    /// Anthropic Messages (`POST {base}/messages`).
    Anthropic,
}

impl Api {
    /// The manifest spelling: `chat`, `responses` or `anthropic`.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Responses => "responses",
            Api::Anthropic => "anthropic",
        }
    }

    /// The API a manifest spelling names; `None` for an unknown one.
    pub fn parse(s: &str) -> Option<Api> {
        match s {
            "chat" => Some(Api::Chat),
            "responses" => Some(Api::Responses),
            "anthropic" => Some(Api::Anthropic),
            _ => None,
        }
    }
}

/// A provider: where its API is and which environment variable holds its key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provider {
    /// The provider id: its key under `[providers]` (e.g. `openai`).
    #[serde(skip_deserializing)]
    pub id: String,
    /// Which wire API it speaks.
    pub api: Api,
    /// The API's base URL, http(s), e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The name of the environment variable holding the key (never the key itself); none for a
    /// local server that takes no key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
}

/// One model of a provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// The model id: its key under `[models]` (e.g. `openai/gpt-5`).
    #[serde(skip_deserializing)]
    pub id: String,
    /// The id of the provider that serves it.
    pub provider: String,
    /// The model's name at its provider (what requests send as `model`).
    pub name: String,
    /// Most tokens of context (input plus output) the model takes.
    pub context_window: u32,
    /// Most tokens the model may produce in one answer (default 4096).
    #[serde(default = "default_max_output")]
    pub max_output_tokens: u32,
    /// Input kinds the model accepts (`text`, `image`, `audio`, `pdf`; default text only).
    #[serde(default = "text_only")]
    pub input_modalities: Vec<String>,
    /// Whether the model can call tools.
    #[serde(default)]
    pub tool_calling: bool,
    /// Whether the model can answer in a given JSON Schema.
    #[serde(default)]
    pub structured_output: bool,
    /// USD per million input tokens.
    #[serde(default)]
    pub price_input_per_mtok: f64,
    /// USD per million output tokens.
    #[serde(default)]
    pub price_output_per_mtok: f64,
    /// Task categories the model is known to be good at.
    #[serde(default)]
    pub strengths: Vec<String>,
}

fn default_max_output() -> u32 {
    4096
}

fn text_only() -> Vec<String> {
    vec!["text".into()]
}

impl ModelSpec {
    /// What `input` and `output` tokens cost, in USD.
    pub fn cost_usd(&self, input: u64, output: u64) -> f64 {
        (input as f64 * self.price_input_per_mtok + output as f64 * self.price_output_per_mtok)
            / 1_000_000.0
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    #[serde(default)]
    providers: BTreeMap<String, Provider>,
    #[serde(default)]
    models: BTreeMap<String, ModelSpec>,
}

/// The registry: every provider and model, where each came from, and the model the environment
/// configured (the default until a user picks an active model).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Registry {
    /// Every provider by id: the shipped manifest's, then the overlay's, then the environment's.
    pub providers: BTreeMap<String, Provider>,
    /// Every model by id, from the same sources.
    pub models: BTreeMap<String, ModelSpec>,
    /// The files read, in order (the shipped manifest first).
    pub sources: Vec<String>,
    /// `env/<VOX_LLM_MODEL>` when the environment configures an endpoint.
    pub env_model: Option<String>,
}

/// The environment this registry reads (`VOX_LLM_*`, `VOX_MODELS_FILE`, `HOME`), passed in so
/// tests and the daemon decide where it comes from.
pub trait Env {
    /// The value of variable `name`, `None` when unset.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl<F: Fn(&str) -> Option<String>> Env for F {
    fn var(&self, name: &str) -> Option<String> {
        self(name)
    }
}

fn invalid(source: &str, message: impl Into<String>) -> LlmError {
    LlmError::Registry {
        origin: source.to_string(),
        message: message.into(),
    }
}

impl Registry {
    /// The shipped manifest, then the overlay (`VOX_MODELS_FILE`, else `models.toml` in
    /// `VOX_HOME` or `~/.vox` when it exists), then the environment's endpoint.
    pub fn load(env: &dyn Env) -> Result<Registry, LlmError> {
        let mut r = Registry::default();
        r.merge(BUILTIN, "models.v1.toml (shipped)")?;
        if let Some(path) = overlay_path(env) {
            let text = read_bounded(&path)?;
            r.merge(&text, &path.display().to_string())?;
        }
        r.add_env_endpoint(env)?;
        Ok(r)
    }

    /// Adds a manifest's entries (replacing entries of the same id whole) and checks the whole.
    pub fn merge(&mut self, text: &str, source: &str) -> Result<(), LlmError> {
        let m: Manifest = toml::from_str(text).map_err(|e| invalid(source, e.to_string()))?;
        for (id, mut p) in m.providers {
            p.id = id.clone();
            self.providers.insert(id, p);
        }
        for (id, mut spec) in m.models {
            spec.id = id.clone();
            self.models.insert(id, spec);
        }
        self.sources.push(source.to_string());
        self.check(source)
    }

    fn check(&self, source: &str) -> Result<(), LlmError> {
        for (id, p) in &self.providers {
            if !(p.base_url.starts_with("http://") || p.base_url.starts_with("https://")) {
                return Err(invalid(
                    source,
                    format!(
                        "providers.{id}.base_url `{}` is not an http(s) URL",
                        p.base_url
                    ),
                ));
            }
            if let Some(var) = &p.api_key_env
                && !valid_env_name(var)
            {
                return Err(invalid(
                    source,
                    format!(
                        "providers.{id}.api_key_env `{var}` is not an environment variable name"
                    ),
                ));
            }
        }
        for (id, m) in &self.models {
            let at = |field: &str| format!("models.\"{id}\".{field}");
            if !self.providers.contains_key(&m.provider) {
                return Err(invalid(
                    source,
                    format!(
                        "{}: `{}` is not a provider (known: {})",
                        at("provider"),
                        m.provider,
                        self.providers
                            .keys()
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
            if m.name.trim().is_empty() {
                return Err(invalid(source, format!("{} is empty", at("name"))));
            }
            if m.context_window == 0 || m.max_output_tokens == 0 {
                return Err(invalid(
                    source,
                    format!(
                        "{} and max_output_tokens must be positive",
                        at("context_window")
                    ),
                ));
            }
            for (f, v) in [
                ("price_input_per_mtok", m.price_input_per_mtok),
                ("price_output_per_mtok", m.price_output_per_mtok),
            ] {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(invalid(
                        source,
                        format!("{} must be a price of 0 or more, not {v}", at(f)),
                    ));
                }
            }
            if let Some(bad) = m
                .input_modalities
                .iter()
                .find(|x| !MODALITIES.contains(&x.as_str()))
            {
                return Err(invalid(
                    source,
                    format!(
                        "{}: `{bad}` is not one of {}",
                        at("input_modalities"),
                        MODALITIES.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `VOX_LLM_API`, `VOX_LLM_BASE_URL`, `VOX_LLM_MODEL` (and optionally `VOX_LLM_API_KEY_ENV`,
    /// the name of the variable holding the key) make provider `env` and model
    /// `env/<VOX_LLM_MODEL>`. Some but not all of the three is an error naming what is missing.
    fn add_env_endpoint(&mut self, env: &dyn Env) -> Result<(), LlmError> {
        let api = env.var("VOX_LLM_API");
        let base = env.var("VOX_LLM_BASE_URL");
        let model = env.var("VOX_LLM_MODEL");
        if api.is_none() && base.is_none() && model.is_none() {
            return Ok(());
        }
        let missing: Vec<&str> = [
            ("VOX_LLM_API", &api),
            ("VOX_LLM_BASE_URL", &base),
            ("VOX_LLM_MODEL", &model),
        ]
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| *n)
        .collect();
        if !missing.is_empty() {
            return Err(invalid(
                "the environment",
                format!(
                    "an endpoint from the environment needs VOX_LLM_API, VOX_LLM_BASE_URL and VOX_LLM_MODEL; {} is not set",
                    missing.join(" and ")
                ),
            ));
        }
        let (api, base, model) = (
            api.unwrap_or_default(),
            base.unwrap_or_default(),
            model.unwrap_or_default(),
        );
        let api = Api::parse(&api).ok_or_else(|| {
            invalid(
                "the environment",
                format!("VOX_LLM_API is `{api}`; it is one of chat, responses, anthropic"),
            )
        })?;
        let text = toml_manifest_for_env(api, &base, &model, env.var("VOX_LLM_API_KEY_ENV"));
        self.merge(&text, "the environment (VOX_LLM_*)")?;
        self.env_model = Some(format!("env/{model}"));
        Ok(())
    }

    /// A model by id.
    pub fn model(&self, id: &str) -> Result<&ModelSpec, LlmError> {
        self.models.get(id).ok_or_else(|| LlmError::UnknownModel {
            id: id.to_string(),
            known: self.models.len(),
        })
    }

    /// Whether a model's provider has what it needs to be called: its key variable is set (or it
    /// needs none). Only names are looked at; a key's value never leaves the environment.
    pub fn has_credentials(&self, model: &ModelSpec, env: &dyn Env) -> bool {
        self.providers
            .get(&model.provider)
            .is_some_and(|p| p.api_key_env.as_ref().is_none_or(|v| env.var(v).is_some()))
    }

    /// How to call a model: its provider's API and URL, its name there, and the key (read from
    /// the provider's variable now; a missing one is an error naming the variable).
    pub fn endpoint(&self, id: &str, env: &dyn Env) -> Result<crate::Endpoint, LlmError> {
        let m = self.model(id)?;
        let p = &self.providers[&m.provider];
        let api_key = match &p.api_key_env {
            None => None,
            Some(var) => Some(env.var(var).ok_or_else(|| LlmError::Credentials {
                provider: p.id.clone(),
                variable: var.clone(),
            })?),
        };
        Ok(crate::Endpoint {
            api: p.api,
            base_url: p.base_url.trim_end_matches('/').to_string(),
            model: m.name.clone(),
            api_key,
        })
    }
}

/// The environment endpoint as a manifest, so it goes through the same checks.
fn toml_manifest_for_env(api: Api, base: &str, model: &str, key_env: Option<String>) -> String {
    let q = |s: &str| toml_quote(s);
    let mut t = format!(
        "[providers.env]\napi = {}\nbase_url = {}\n",
        q(api.as_str()),
        q(base)
    );
    if let Some(k) = key_env {
        t.push_str(&format!("api_key_env = {}\n", q(&k)));
    }
    t.push_str(&format!(
        "\n[models.{}]\nprovider = \"env\"\nname = {}\ncontext_window = 128000\nmax_output_tokens = 8192\ntool_calling = true\nstructured_output = {}\n",
        q(&format!("env/{model}")),
        q(model),
        api != Api::Chat
    ));
    t
}

fn toml_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn valid_env_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// The overlay file: `VOX_MODELS_FILE` (which must exist), else `models.toml` in the user's
/// vox directory (`VOX_HOME`, else `~/.vox`) if it exists.
fn overlay_path(env: &dyn Env) -> Option<PathBuf> {
    if let Some(p) = env.var("VOX_MODELS_FILE") {
        return Some(PathBuf::from(p));
    }
    let dir = match env.var("VOX_HOME") {
        Some(h) => PathBuf::from(h),
        None => Path::new(&env.var("HOME")?).join(".vox"),
    };
    let p = dir.join("models.toml");
    p.is_file().then_some(p)
}

fn read_bounded(path: &Path) -> Result<String, LlmError> {
    let source = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| invalid(&source, e.to_string()))?;
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(invalid(
            &source,
            format!(
                "{} bytes; a models file is at most {MAX_MANIFEST_BYTES}",
                meta.len()
            ),
        ));
    }
    std::fs::read_to_string(path).map_err(|e| invalid(&source, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| m.get(k).cloned()
    }

    #[test]
    fn the_shipped_manifest_loads_and_every_model_names_a_provider() {
        let r = Registry::load(&env(&[])).unwrap();
        assert!(r.models.len() >= 5);
        assert!(r.env_model.is_none());
        let m = r.model("anthropic/claude-sonnet-4-5").unwrap();
        assert_eq!(r.providers[&m.provider].api, Api::Anthropic);
        assert!((m.cost_usd(1_000_000, 0) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn an_overlay_replaces_and_adds_and_bad_entries_name_the_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("models.toml");
        std::fs::write(
            &f,
            "[providers.local]\napi = \"chat\"\nbase_url = \"http://127.0.0.1:9/v1\"\n\n[models.\"local/m\"]\nprovider = \"local\"\nname = \"m\"\ncontext_window = 1000\n",
        )
        .unwrap();
        let path = f.to_str().unwrap().to_string();
        let r = Registry::load(&env(&[("VOX_MODELS_FILE", &path)])).unwrap();
        assert_eq!(r.model("local/m").unwrap().max_output_tokens, 4096);
        assert_eq!(r.sources.len(), 2);

        for (text, wanted) in [
            (
                "[models.\"x/y\"]\nprovider = \"nope\"\nname = \"y\"\ncontext_window = 1\n",
                "`nope` is not a provider",
            ),
            (
                "[models.\"x/y\"]\nprovider = \"ollama\"\nname = \"y\"\ncontext_window = 1\nspeed = 3\n",
                "unknown field `speed`",
            ),
            (
                "[providers.p]\napi = \"grpc\"\nbase_url = \"http://x\"\n",
                "grpc",
            ),
            (
                "[providers.p]\napi = \"chat\"\nbase_url = \"ftp://x\"\n",
                "is not an http(s) URL",
            ),
            (
                "[models.\"o/y\"]\nprovider = \"ollama\"\nname = \"y\"\ncontext_window = 1\nprice_input_per_mtok = -1.0\n",
                "price_input_per_mtok must be a price",
            ),
            (
                "[models.\"o/y\"]\nprovider = \"ollama\"\nname = \"y\"\ncontext_window = 1\ninput_modalities = [\"smell\"]\n",
                "`smell` is not one of",
            ),
            (
                "[providers.p]\napi = \"chat\"\nbase_url = \"http://x\"\napi_key_env = \"sk-123 secret\"\n",
                "is not an environment variable name",
            ),
        ] {
            std::fs::write(&f, text).unwrap();
            let e = Registry::load(&env(&[("VOX_MODELS_FILE", &path)])).unwrap_err();
            let s = e.to_string();
            assert!(s.contains(&path) && s.contains(wanted), "{text}: {s}");
            assert_eq!(e.code(), "model_registry_invalid");
        }
    }

    #[test]
    fn one_endpoint_from_the_environment_is_a_provider_and_partial_settings_say_what_is_missing() {
        let r = Registry::load(&env(&[
            ("VOX_LLM_API", "anthropic"),
            ("VOX_LLM_BASE_URL", "http://127.0.0.1:4000/v1/"),
            ("VOX_LLM_MODEL", "claude-x"),
            ("VOX_LLM_API_KEY_ENV", "MY_KEY"),
        ]))
        .unwrap();
        assert_eq!(r.env_model.as_deref(), Some("env/claude-x"));
        let e = r.endpoint("env/claude-x", &env(&[])).unwrap_err();
        assert_eq!(e.code(), "llm_credentials");
        assert!(e.to_string().contains("MY_KEY"));
        let ep = r
            .endpoint("env/claude-x", &env(&[("MY_KEY", "k")]))
            .unwrap();
        assert_eq!(ep.base_url, "http://127.0.0.1:4000/v1");
        assert_eq!(ep.api, Api::Anthropic);
        assert_eq!(ep.model, "claude-x");

        let e = Registry::load(&env(&[("VOX_LLM_API", "chat")])).unwrap_err();
        assert!(
            e.to_string()
                .contains("VOX_LLM_BASE_URL and VOX_LLM_MODEL is not set"),
            "{e}"
        );
        let e = Registry::load(&env(&[
            ("VOX_LLM_API", "soap"),
            ("VOX_LLM_BASE_URL", "http://x"),
            ("VOX_LLM_MODEL", "m"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("one of chat, responses, anthropic"));
    }
}
