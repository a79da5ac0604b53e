//! Installed skills as the orchestrator serves them: the catalog (hydrated at boot, rebuilt on
//! install and uninstall), the active skill of each calling session with its tool allowlist,
//! the instructional macro tools (under `dev`), and the `skill://` resources.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use vox_core::ToolError;
use vox_mcp_registry::{Denial, DenialCode};
use vox_skills::{Catalog, Roots, Skill, SkillError};

/// Most sessions that may have an active skill at once; a further activation is refused.
pub const MAX_ACTIVE_SESSIONS: usize = 10_000;
/// Most sessions of one agent (one token, one peer) with an active skill: one caller cannot
/// fill the table for everyone.
pub const MAX_ACTIVE_PER_AGENT: usize = 256;
/// A session whose skill was not used for this long may be dropped to make room. Connection
/// sessions end with their connection; this bounds the ones that never end (REST).
pub const ACTIVE_IDLE: std::time::Duration = std::time::Duration::from_secs(3600);
/// The index resource.
pub const INDEX_URI: &str = "skill://index.json";

/// Tools a session may always call while a skill is active: without them it could not inspect,
/// switch or leave the skill, or refresh the workspace. Names are enough because workspace tools
/// may not use the `vox_` prefix (the loader reserves it), so every `vox_*` name is the static
/// catalog's or a skill macro tool.
pub fn is_infrastructure(tool: &str) -> bool {
    tool.starts_with("vox_skill_")
        || tool.starts_with("vox_chat_")
        || tool == "vox_workspace_mcp_refresh"
}

/// A skill error as a tool error (its kind keeps its code).
pub fn skill_err(e: SkillError) -> ToolError {
    match e {
        SkillError::Invalid(m) => ToolError::invalid_arguments(m),
        SkillError::NotFound(m) => ToolError::not_found(m),
        SkillError::Conflict(m) => ToolError::conflict(m),
        SkillError::Io(m) => ToolError::internal(m),
    }
}

/// The skills of one workspace.
pub struct Skills {
    roots: Roots,
    workspace_root: PathBuf,
    catalog: RwLock<Arc<Catalog>>,
    /// Serialises install and uninstall (each ends with a rehydrate).
    writes: Mutex<()>,
    /// Session → the skill active in it, as it was when activated (uninstalling a skill must not
    /// widen what an active session may call).
    active: Mutex<HashMap<String, Active>>,
    /// `active.len()`, readable without the lock: the common case (no skill active anywhere)
    /// costs one atomic load per call.
    active_count: AtomicUsize,
    /// Sessions that ended, most recent last (bounded): a call of an ended session whose
    /// blocking part was still running (a cancelled `vox_skill_use` on a closed WebSocket) must
    /// not activate a skill for it after its end forgot it.
    ended: Mutex<Ended>,
    /// Sessions whose skill could not be activated again on this daemon (it restarted under
    /// them, and the skill is gone or invalid now), with why: they are refused every tool
    /// but `vox_skill_use` until they choose again (fail closed).
    lost: Mutex<HashMap<String, String>>,
    /// `lost.len()`, readable without the lock.
    lost_count: AtomicUsize,
}

/// How many ended session keys are remembered. Keys are never reused (each connection makes
/// its own), so forgetting the oldest only matters for a call still running that many ends on.
const ENDED_KEPT: usize = 4096;

#[derive(Default)]
struct Ended {
    keys: std::collections::HashSet<String>,
    order: std::collections::VecDeque<String>,
}

/// One session's active skill.
struct Active {
    skill: Arc<Skill>,
    agent: String,
    last_used: std::time::Instant,
}

/// The MCP name of a skill's macro tool.
pub fn macro_tool_name(id: &str) -> String {
    format!("vox_skill_{}", id.replace('-', "_"))
}

impl Skills {
    /// Loads every skill of the search roots; problems are logged and kept for `vox_skill_list`.
    pub fn hydrate(workspace_root: &Path) -> Self {
        let roots = Roots::from_env(workspace_root);
        let catalog = Catalog::hydrate(&roots);
        log_problems(&catalog);
        Skills {
            roots,
            workspace_root: workspace_root.to_path_buf(),
            catalog: RwLock::new(Arc::new(catalog)),
            writes: Mutex::new(()),
            active: Mutex::new(HashMap::new()),
            active_count: AtomicUsize::new(0),
            ended: Mutex::new(Ended::default()),
            lost: Mutex::new(HashMap::new()),
            lost_count: AtomicUsize::new(0),
        }
    }

    /// The current catalog.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn rehydrate(&self) -> Arc<Catalog> {
        let fresh = Arc::new(Catalog::hydrate(&self.roots));
        log_problems(&fresh);
        *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = fresh.clone();
        fresh
    }

    /// Resolves an install path: relative paths are taken from the workspace root, and the
    /// directory must lie inside the workspace or a skill search root.
    fn resolve_source(&self, path: &str) -> Result<PathBuf, ToolError> {
        let p = Path::new(path);
        let joined = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.workspace_root.join(p)
        };
        let real = joined.canonicalize().map_err(|e| {
            ToolError::invalid_arguments(format!("skill path {path:?} cannot be read: {e}"))
        })?;
        let mut allowed = vec![self.workspace_root.clone()];
        allowed.extend(self.roots.home.clone());
        allowed.extend(self.roots.extra.iter().cloned());
        let inside = allowed
            .iter()
            .filter_map(|a| a.canonicalize().ok())
            .any(|a| real.starts_with(a));
        if !inside {
            return Err(ToolError::invalid_arguments(format!(
                "skill path {path:?} resolves to {}, outside the workspace and the skill roots; copy the skill into the workspace first",
                real.display()
            )));
        }
        Ok(real)
    }

    /// Validates and installs the skill at `path`; returns it.
    pub fn install(&self, path: &str, replace: bool) -> Result<Arc<Skill>, ToolError> {
        let src = self.resolve_source(path)?;
        let _w = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let skill = vox_skills::store::install(&self.roots, &src, replace).map_err(skill_err)?;
        let catalog = self.rehydrate();
        catalog
            .get(&skill.id)
            .cloned()
            .map_err(|_| ToolError::internal(format!("skill {} vanished after install", skill.id)))
    }

    /// Removes an installed skill from the workspace store.
    pub fn uninstall(&self, id: &str) -> Result<(), ToolError> {
        let _w = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        vox_skills::store::uninstall(&self.roots, &self.catalog(), id).map_err(skill_err)?;
        self.rehydrate();
        Ok(())
    }

    /// Activates `id` for `session` of `agent` (or deactivates with `None`); returns the active
    /// skill.
    pub fn activate(
        &self,
        session: &str,
        agent: &str,
        id: Option<&str>,
    ) -> Result<Option<Arc<Skill>>, ToolError> {
        self.forget_lost(session);
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        let result = match id {
            None => {
                active.remove(session);
                None
            }
            Some(id) => {
                // Checked under the `active` lock, which `end_session` takes after marking the
                // session ended: either it sees this activation and removes it, or this sees it.
                if self
                    .ended
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .keys
                    .contains(session)
                {
                    return Err(ToolError::cancelled(format!(
                        "session `{session}` has ended; no skill can be activated for it"
                    )));
                }
                let skill = self.catalog().get(id).map_err(skill_err)?.clone();
                if !active.contains_key(session) {
                    make_room(&mut active, agent)?;
                }
                active.insert(
                    session.to_owned(),
                    Active {
                        skill: skill.clone(),
                        agent: agent.to_owned(),
                        last_used: std::time::Instant::now(),
                    },
                );
                Some(skill)
            }
        };
        self.active_count.store(active.len(), Ordering::Release);
        Ok(result)
    }

    /// Activates `id` again for `session` on a daemon that restarted under it; when it cannot
    /// be, the session is refused every tool but `vox_skill_use` until it chooses again.
    pub fn restore(&self, session: &str, agent: &str, id: &str) {
        if let Err(e) = self.activate(session, agent, Some(id)) {
            let why = format!(
                "the workspace daemon restarted and skill {id}, active for this session, could not be activated again ({e}); call vox_skill_use to choose again"
            );
            let mut lost = self.lost.lock().unwrap_or_else(|p| p.into_inner());
            lost.insert(session.to_owned(), why);
            self.lost_count.store(lost.len(), Ordering::Release);
        }
    }

    fn forget_lost(&self, session: &str) {
        if self.lost_count.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut lost = self.lost.lock().unwrap_or_else(|p| p.into_inner());
        lost.remove(session);
        self.lost_count.store(lost.len(), Ordering::Release);
    }

    /// The skill active for `session`, if any (and marks the session as used).
    pub fn active(&self, session: &str) -> Option<Arc<Skill>> {
        if self.active_count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        let a = active.get_mut(session)?;
        a.last_used = std::time::Instant::now();
        Some(a.skill.clone())
    }

    /// Forgets a session that ended (its connection closed).
    pub fn end_session(&self, session: &str) {
        {
            let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
            if ended.keys.insert(session.to_owned()) {
                ended.order.push_back(session.to_owned());
                if ended.order.len() > ENDED_KEPT
                    && let Some(old) = ended.order.pop_front()
                {
                    ended.keys.remove(&old);
                }
            }
        }
        self.forget_lost(session);
        if self.active_count.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        active.remove(session);
        self.active_count.store(active.len(), Ordering::Release);
    }

    /// The allowlist check of the active skill: `Ok` when no skill is active, its list is
    /// empty, it lists `tool`, or `tool` is an infrastructure tool. While a restricted skill is
    /// active, `vox_skill_run` runs only that skill's commands (running another skill's would
    /// step outside the list).
    pub fn check(&self, session: &str, tool: &str, args: &Value) -> Result<(), Denial> {
        if self.lost_count.load(Ordering::Acquire) > 0 && tool != "vox_skill_use" {
            let lost = self.lost.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(why) = lost.get(session) {
                return Err(Denial::new(DenialCode::SkillToolNotAllowed, why.clone()));
            }
        }
        let Some(skill) = self.active(session) else {
            return Ok(());
        };
        if skill.manifest.tools.is_empty() {
            return Ok(());
        }
        if tool == "vox_skill_run" && args.get("id").and_then(Value::as_str) != Some(&skill.id) {
            let mut d = Denial::new(
                DenialCode::SkillToolNotAllowed,
                format!(
                    "while skill {} is active for this session, vox_skill_run runs only its commands; call vox_skill_use with id null to leave it",
                    skill.id
                ),
            );
            d.skill = Some(skill.id.clone());
            return Err(d);
        }
        if is_infrastructure(tool) || skill.manifest.allows(tool) {
            return Ok(());
        }
        let mut d = Denial::new(
            DenialCode::SkillToolNotAllowed,
            format!(
                "tool {tool} is not in the tool list of skill {}, which is active for this session (allowed: {}); call vox_skill_use with id null to leave the skill",
                skill.id,
                skill.manifest.tools.join(", ")
            ),
        );
        d.skill = Some(skill.id.clone());
        Err(d)
    }

    /// Macro tool descriptors (dev only), in id order; a name taken by the static catalog is
    /// not served.
    pub fn macro_descriptors(&self) -> Vec<Value> {
        self.catalog()
            .skills
            .values()
            .filter_map(|s| {
                let name = macro_tool_name(&s.id);
                if vox_mcp_registry::tool_by_name(&name).is_some() {
                    return None;
                }
                let mut d = json!({
                    "name": name,
                    "title": format!("Skill: {}", s.id),
                    "description": format!("Instructions of skill {}: {}", s.id, s.manifest.description),
                    "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
                    "annotations": {"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
                    "_meta": {"vox_source": "skill", "vox_skill": s.id},
                });
                if let Some(o) = macro_output_schema() {
                    d["outputSchema"] = o.clone();
                }
                Some(d)
            })
            .collect()
    }

    /// Whether a skill has this macro name (what [`Self::call_macro`] would serve).
    pub fn has_macro(&self, name: &str) -> bool {
        name.strip_prefix("vox_skill_")
            .is_some_and(|rest| self.catalog().skills.contains_key(&rest.replace('_', "-")))
    }

    /// Calls a macro tool: the skill's instructions. `None` if no skill has this macro name.
    pub fn call_macro(&self, name: &str, args: &Value) -> Option<Result<Value, ToolError>> {
        let rest = name.strip_prefix("vox_skill_")?;
        let catalog = self.catalog();
        let skill = catalog.skills.get(&rest.replace('_', "-"))?;
        if args.as_object().is_some_and(|o| !o.is_empty()) {
            return Some(Err(ToolError::invalid_arguments(format!(
                "{name} takes no arguments"
            ))));
        }
        Some(
            serde_json::to_value(instructions(skill))
                .map_err(|e| ToolError::internal(e.to_string())),
        )
    }

    /// `skill://` resource descriptors: the index, then each skill's `SKILL.md`.
    pub fn resources(&self) -> Vec<Value> {
        let mut v = vec![json!({
            "uri": INDEX_URI, "name": "skills index", "mimeType": "application/json",
            "description": "Every installed skill: id, name, description, tools.",
            "_meta": {"vox_source": "skill"},
        })];
        v.extend(self.catalog().skills.values().map(|s| {
            json!({
                "uri": format!("skill://{}/SKILL.md", s.id), "name": s.id,
                "description": s.manifest.description, "mimeType": "text/markdown",
                "_meta": {"vox_source": "skill"},
            })
        }));
        v
    }

    /// Reads a `skill://` resource; `None` if the URI is not one.
    pub fn read(&self, uri: &str) -> Option<Result<vox_core::ResourceBody, ToolError>> {
        let catalog = self.catalog();
        if uri == INDEX_URI {
            let index: Vec<Value> = catalog
                .skills
                .values()
                .map(|s| json!({"id": s.id, "name": s.manifest.name, "description": s.manifest.description, "tools": s.manifest.tools}))
                .collect();
            return Some(Ok(vox_core::ResourceBody::typed_text(
                json!({"skills": index}).to_string(),
                "application/json",
            )));
        }
        let id = uri.strip_prefix("skill://")?.strip_suffix("/SKILL.md")?;
        Some(
            catalog
                .skills
                .get(id)
                .map(|s| vox_core::ResourceBody::typed_text(s.source.clone(), "text/markdown"))
                .ok_or_else(|| ToolError::not_found(format!("no resource {uri}"))),
        )
    }
}

/// The front-matter key naming a skill's prompt arguments: `metadata.vox-arguments`, names
/// separated by commas, `?` after an optional one (`"target, depth?"`).
pub const ARGUMENTS_KEY: &str = "vox-arguments";
/// Most arguments a skill's prompt takes.
const MAX_PROMPT_ARGUMENTS: usize = 32;

/// A skill's prompt arguments (name, required), from `metadata.vox-arguments`; malformed
/// names are left out (they cannot be `{{placeholders}}` either).
fn prompt_arguments(s: &Skill) -> Vec<(String, bool)> {
    let Some(list) = s.manifest.metadata.get(ARGUMENTS_KEY) else {
        return vec![];
    };
    list.split(',')
        .filter_map(|a| {
            let a = a.trim();
            let (name, required) = match a.strip_suffix('?') {
                Some(n) => (n.trim(), false),
                None => (a, true),
            };
            let ok = !name.is_empty()
                && name.len() <= 64
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            ok.then(|| (name.to_owned(), required))
        })
        .take(MAX_PROMPT_ARGUMENTS)
        .collect()
}

impl Skills {
    /// Every skill as a prompt (`prompts/list`): named by its id, with its declared arguments.
    pub fn prompts(&self) -> Vec<Value> {
        self.catalog()
            .skills
            .values()
            .map(|s| {
                let arguments: Vec<Value> = prompt_arguments(s)
                    .into_iter()
                    .map(|(name, required)| json!({"name": name, "required": required}))
                    .collect();
                json!({"name": s.id, "title": format!("Skill: {}", s.id),
                       "description": s.manifest.description, "arguments": arguments,
                       "_meta": {"vox_source": "skill"}})
            })
            .collect()
    }

    /// A skill's prompt: its instructions as one user message, each `{{argument}}` replaced by
    /// the value given (an optional one left out becomes empty); arguments the body does not
    /// place are listed after it. `None` when no skill has this id.
    pub fn get_prompt(&self, name: &str, args: &Value) -> Option<Result<Value, ToolError>> {
        let catalog = self.catalog();
        let skill = catalog.skills.get(name)?;
        Some(skill_prompt(skill, args))
    }
}

fn skill_prompt(skill: &Skill, args: &Value) -> Result<Value, ToolError> {
    let declared = prompt_arguments(skill);
    let given = match args {
        Value::Null => serde_json::Map::new(),
        Value::Object(o) => o.clone(),
        _ => {
            return Err(ToolError::invalid_arguments(
                "prompt arguments are an object of strings",
            ));
        }
    };
    if let Some(k) = given
        .keys()
        .find(|k| !declared.iter().any(|(n, _)| n == *k))
    {
        let known: Vec<&str> = declared.iter().map(|(n, _)| n.as_str()).collect();
        return Err(ToolError::invalid_arguments(format!(
            "skill {} takes no argument `{k}` (its arguments: {})",
            skill.id,
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )));
    }
    let mut text = skill.manifest.body.clone();
    let mut unplaced = Vec::new();
    for (name, required) in &declared {
        let value = match given.get(name) {
            Some(Value::String(v)) => v.clone(),
            Some(other) => {
                return Err(ToolError::invalid_arguments(format!(
                    "argument `{name}` must be a string, got {other}"
                )));
            }
            None if *required => {
                return Err(ToolError::invalid_arguments(format!(
                    "skill {} needs argument `{name}`",
                    skill.id
                )));
            }
            None => String::new(),
        };
        let placeholder = format!("{{{{{name}}}}}");
        if text.contains(&placeholder) {
            text = text.replace(&placeholder, &value);
        } else if !value.is_empty() {
            unplaced.push(format!("- {name}: {value}"));
        }
    }
    if !unplaced.is_empty() {
        text.push_str("\n\nArguments:\n");
        text.push_str(&unplaced.join("\n"));
    }
    Ok(json!({
        "description": skill.manifest.description,
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
    }))
}

/// Makes room for one more active session of `agent`: refused when the agent already has its
/// share; when the table is full, sessions idle for [`ACTIVE_IDLE`] are dropped first.
fn make_room(active: &mut HashMap<String, Active>, agent: &str) -> Result<(), ToolError> {
    if active.values().filter(|a| a.agent == agent).count() >= MAX_ACTIVE_PER_AGENT {
        return Err(ToolError::unavailable(format!(
            "{MAX_ACTIVE_PER_AGENT} sessions of this caller already have an active skill; leave one (vox_skill_use with id null) first"
        )));
    }
    if active.len() >= MAX_ACTIVE_SESSIONS {
        active.retain(|_, a| a.last_used.elapsed() < ACTIVE_IDLE);
    }
    if active.len() >= MAX_ACTIVE_SESSIONS {
        return Err(ToolError::unavailable(format!(
            "{MAX_ACTIVE_SESSIONS} sessions already have an active skill; try again later"
        )));
    }
    Ok(())
}

/// What activating or calling a skill returns: its instructions and limits.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Instructions {
    /// The skill id.
    pub skill: String,
    pub description: String,
    /// The tools the skill may use (exact names or trailing-`*` prefixes); empty means any.
    pub tools: Vec<String>,
    /// The Markdown instructions.
    pub instructions: String,
    /// The `skill://` URI of its SKILL.md.
    pub resource: String,
}

/// A skill's [`Instructions`].
pub fn instructions(s: &Skill) -> Instructions {
    Instructions {
        skill: s.id.clone(),
        description: s.manifest.description.clone(),
        tools: s.manifest.tools.clone(),
        instructions: s.manifest.body.clone(),
        resource: format!("skill://{}/SKILL.md", s.id),
    }
}

/// The output schema of a macro tool, generated once.
fn macro_output_schema() -> &'static Option<Value> {
    static SCHEMA: std::sync::OnceLock<Option<Value>> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(vox_core::family::output_schema_of::<Instructions>)
}

fn log_problems(c: &Catalog) {
    for e in &c.errors {
        tracing::warn!("skill not loaded: {e}");
    }
    for s in &c.shadowed {
        tracing::warn!(
            "skill {} at {} is shadowed by a root of higher precedence",
            s.id,
            s.path
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Skills of a workspace with one skill, `limited`, restricted to `vox_memory_*`.
    fn limited_skill() -> (tempfile::TempDir, Skills) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".vox/skills/limited");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            "---\nname: limited\ndescription: d\nmetadata:\n  vox-tools: vox_memory_*\n---\nbody\n",
        )
        .unwrap();
        let sk = Skills::hydrate(tmp.path());
        (tmp, sk)
    }

    #[test]
    fn a_session_that_ended_cannot_activate_a_skill_afterwards() {
        let (_tmp, sk) = limited_skill();
        // A cancelled vox_skill_use whose blocking part outlives its WebSocket: the session's
        // end comes first, the activation after.
        sk.end_session("ws:a:1");
        let e = sk.activate("ws:a:1", "a", Some("limited")).unwrap_err();
        assert_eq!(e.code(), "cancelled");
        assert!(sk.active("ws:a:1").is_none());
        // Other sessions are unaffected, and the memory of ended sessions is bounded.
        sk.activate("ws:a:2", "a", Some("limited")).unwrap();
        for i in 0..ENDED_KEPT + 10 {
            sk.end_session(&format!("gone:{i}"));
        }
        let ended = sk.ended.lock().unwrap();
        assert_eq!(ended.keys.len(), ENDED_KEPT);
        assert_eq!(ended.order.len(), ENDED_KEPT);
    }

    #[test]
    fn one_caller_cannot_fill_the_active_table_and_leaving_frees_its_slot() {
        let (_tmp, sk) = limited_skill();
        for i in 0..MAX_ACTIVE_PER_AGENT {
            sk.activate(&format!("s{i}"), "greedy", Some("limited"))
                .unwrap();
        }
        let e = sk
            .activate("one-more", "greedy", Some("limited"))
            .unwrap_err();
        assert_eq!(e.code(), "unavailable");
        // Another caller still has room, and re-activating an existing session is not new.
        sk.activate("other", "polite", Some("limited")).unwrap();
        sk.activate("s0", "greedy", Some("limited")).unwrap();
        // Leaving (or the session ending) frees the slot.
        sk.activate("s0", "greedy", None).unwrap();
        sk.activate("one-more", "greedy", Some("limited")).unwrap();
        sk.end_session("s1");
        assert!(sk.active("s1").is_none());
        sk.activate("and-another", "greedy", Some("limited"))
            .unwrap();
        // The allowlist applies to the sessions that have the skill, and only to them.
        assert!(sk.check("one-more", "vox_kb_query", &Value::Null).is_err());
        assert!(
            sk.check("one-more", "vox_memory_list", &Value::Null)
                .is_ok()
        );
        assert!(sk.check("s1", "vox_kb_query", &Value::Null).is_ok());
    }
}
