//! The search_index subsystem's tools: `vox_kb_*`, `vox_search_*`, `vox_knowledge_query`, and
//! the index behind `vox_memory_search`.
//!
//! The store is the source of truth; the tantivy indexes live in RAM and are built from it on
//! first use, then kept current by every write (which also goes through the built index, so a
//! write racing the first build cannot be missed).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Component, Path};
use std::sync::{Arc, Mutex};
use vox_core::CallCtx;
use vox_core::HandlerEntry;
use vox_core::family::{blocking, typed};
use vox_core::{Ctx, ToolError};
use vox_search::{DeclarationHit, DocIndex, FileHit, SearchError, WorkspaceIndex};
use vox_store::KbSummary;
use vox_tools_common::bounded;
use vox_tools_common::store::{db, knowledge as repos};

/// The search_index subsystem's state.
pub struct Search {
    workspace: WorkspaceIndex,
    kb: Mutex<Option<Built>>,
    memory: Mutex<Option<Built>>,
}

/// An index and the store generation it was built at (`None`: this daemon is the store's
/// only writer, and keeps the index current itself).
type Built = (Option<String>, Arc<DocIndex>);

impl Search {
    /// Nothing is indexed until the first query.
    pub fn new(root: &Path) -> Self {
        Search {
            workspace: WorkspaceIndex::new(root.to_path_buf()),
            kb: Mutex::new(None),
            memory: Mutex::new(None),
        }
    }
}

/// The category a client branches on, with the index's own code as the detail.
fn search_err(e: SearchError) -> ToolError {
    let error = if matches!(e, SearchError::Cancelled) {
        ToolError::cancelled("the search index build was cancelled")
    } else if e.is_invalid_input() {
        ToolError::invalid_arguments(e.to_string())
    } else {
        ToolError::internal(e.to_string())
    };
    error.with_detail(e.code(), None)
}

/// Reports a workspace index build as the call's progress, and stops it when the call is
/// cancelled.
struct CallObserver<'a>(&'a CallCtx);

impl vox_search::Observer for CallObserver<'_> {
    fn progress(&self, done: u64, total: u64) {
        self.0.progress(
            done as f64,
            Some(total as f64),
            Some(format!("indexed {done} of {total} changed workspace files")),
        );
    }
    fn cancelled(&self) -> bool {
        self.0.cancel.is_cancelled()
    }
}

fn search(ctx: &Ctx) -> Result<&Search, ToolError> {
    ctx.require::<Search>("the search_index subsystem")
}

fn boot(ctx: &mut Ctx) -> Result<vox_core::StepDone, String> {
    let search = Search::new(&ctx.workspace.root);
    ctx.insert(search);
    Ok(vox_core::StepDone::Ready(
        "indexes build on first query".into(),
    ))
}

/// The index in `slot`, built from `docs` on first use, and again whenever the store's
/// `generation` moved since (another replica wrote to a shared store).
fn lazy_index(
    slot: &Mutex<Option<Built>>,
    generation: Option<String>,
    docs: impl FnOnce() -> Result<Vec<(String, String, String)>, ToolError>,
) -> Result<Arc<DocIndex>, ToolError> {
    let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((built_at, ix)) = guard.as_ref()
        && *built_at == generation
    {
        return Ok(ix.clone());
    }
    let ix = DocIndex::new().map_err(search_err)?;
    ix.upsert_many(docs()?).map_err(search_err)?;
    let ix = Arc::new(ix);
    *guard = Some((generation, ix.clone()));
    Ok(ix)
}

fn kb_index(ctx: &Ctx) -> Result<Arc<DocIndex>, ToolError> {
    let store = repos(ctx)?;
    let generation = store.kb_generation().map_err(db)?;
    lazy_index(&search(ctx)?.kb, generation, || {
        Ok(store
            .kb_all()
            .map_err(db)?
            .into_iter()
            .map(|d| (d.id.to_string(), d.title, d.content))
            .collect())
    })
}

fn memory_doc(key: &str, value: &str, tags: &[String]) -> (String, String, String) {
    (
        key.to_owned(),
        key.to_owned(),
        format!("{value}\n{}", tags.join(" ")),
    )
}

/// The memory index (built from the store on first use).
pub fn memory_index(ctx: &Ctx) -> Result<Arc<DocIndex>, ToolError> {
    let store = repos(ctx)?;
    let generation = store.memory_generation().map_err(db)?;
    lazy_index(&search(ctx)?.memory, generation, || {
        Ok(store
            .memory_all()
            .map_err(db)?
            .iter()
            .map(|m| memory_doc(&m.key, &m.value, &m.tags))
            .collect())
    })
}

/// Keeps the memory index current after a store write, if the index exists.
pub fn memory_indexed(
    ctx: &Ctx,
    key: &str,
    value: Option<(&str, &[String])>,
) -> Result<(), ToolError> {
    if ctx.get::<Search>().is_none() {
        return Ok(());
    }
    let ix = memory_index(ctx)?;
    match value {
        Some((v, tags)) => {
            let (id, title, body) = memory_doc(key, v, tags);
            ix.upsert(&id, &title, &body).map_err(search_err)
        }
        None => ix.delete(key).map_err(search_err),
    }
}

fn limit(v: Option<u32>, default: u32, max: u32) -> usize {
    v.unwrap_or(default).clamp(1, max) as usize
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct IngestArgs {
    /// Text to add as one document (give `text` or `path`, not both).
    text: Option<String>,
    /// A workspace-relative file or glob such as `docs/**/*.md` (respects .gitignore).
    path: Option<String>,
    /// Title for a text document (default: its first line).
    title: Option<String>,
    /// A stable source name for a text document; ingesting the same source again replaces it.
    source: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct QueryArgs {
    /// What to look for (words; quotes for phrases).
    query: String,
    /// Most results (default 10, at most 100).
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct KbListArgs {
    /// The `next_cursor` of a previous page.
    cursor: Option<i64>,
    /// Page size (default 50, at most 500).
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct KbDeleteArgs {
    /// The document id from `vox_kb_list` or `vox_kb_query`.
    id: i64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TextSearchArgs {
    /// Words to find in workspace files.
    query: String,
    /// Only files whose workspace-relative path matches this glob, e.g. `src/**/*.rs`.
    path_glob: Option<String>,
    /// Most files (default 20, at most 100).
    limit: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StructuralArgs {
    /// A declaration name or part of one, e.g. `parse_config` or `Config`.
    query: String,
    /// Only this kind: function, struct, enum, trait, type, class, interface, module, const...
    kind: Option<String>,
    /// Most declarations (default 20, at most 100).
    limit: Option<u32>,
}

const MAX_DOC: usize = 1024 * 1024;
const MAX_FILES: usize = 1000;

#[derive(Serialize, JsonSchema)]
struct Ingested {
    /// How many documents were given (changed or not).
    ingested: usize,
    documents: Vec<IngestedDoc>,
}

#[derive(Serialize, JsonSchema)]
struct IngestedDoc {
    id: i64,
    title: String,
    source: String,
    bytes: usize,
    /// False when the document was already stored with the same content.
    changed: bool,
}

#[derive(Serialize, JsonSchema)]
struct KbHits {
    results: Vec<KbHit>,
}

#[derive(Serialize, JsonSchema)]
struct KbHit {
    id: i64,
    title: String,
    source: String,
    score: f32,
    snippet: String,
}

#[derive(Serialize, JsonSchema)]
struct KbPage {
    documents: Vec<KbSummary>,
    /// Pass as `cursor` for the next page; null on the last one.
    next_cursor: Option<i64>,
}

#[derive(Serialize, JsonSchema)]
struct KbDeleted {
    deleted: bool,
    id: i64,
}

#[derive(Serialize, JsonSchema)]
struct TextHits {
    files: Vec<FileHit>,
}

#[derive(Serialize, JsonSchema)]
struct Declarations {
    declarations: Vec<DeclarationHit>,
}

/// `vox_memory_search`'s answer.
#[derive(Serialize, JsonSchema)]
pub struct MemoryHits {
    results: Vec<MemoryHit>,
}

#[derive(Serialize, JsonSchema)]
struct MemoryHit {
    key: String,
    value: String,
    tags: Vec<String>,
    score: f32,
    snippet: String,
}

#[derive(Serialize, JsonSchema)]
struct Knowledge {
    query: String,
    /// The most relevant answer; null when nothing matched.
    best: Option<Answer>,
    answers: Vec<Answer>,
}

/// One answer of `vox_knowledge_query`, from the knowledge base or the memories.
#[derive(Serialize, JsonSchema, Clone)]
#[serde(tag = "source", rename_all = "snake_case")]
enum Answer {
    Kb {
        /// The document id.
        id: i64,
        title: String,
        /// The document's source.
        origin: String,
        score: f32,
        snippet: String,
        /// The score relative to the best of its index (0 to 1).
        relevance: f32,
    },
    Memory {
        /// The memory's key.
        id: String,
        title: String,
        score: f32,
        snippet: String,
        value: String,
        /// The score relative to the best of its index (0 to 1).
        relevance: f32,
    },
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn ingest(ctx: &Ctx, call: &CallCtx, a: IngestArgs) -> Result<Ingested, ToolError> {
    let store = repos(ctx)?;
    let ix = kb_index(ctx)?;
    let mut docs = Vec::new();
    match (a.text, a.path) {
        (Some(text), None) => {
            bounded("text", &text, MAX_DOC)?;
            let hash = sha256_hex(&text);
            let source = a.source.unwrap_or_else(|| format!("text:{}", &hash[..16]));
            bounded("source", &source, 1024)?;
            let title = a.title.unwrap_or_else(|| {
                text.lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .chars()
                    .take(80)
                    .collect()
            });
            docs.push((title, source, text, hash));
        }
        (None, Some(pattern)) => {
            for (rel, text) in workspace_files(&ctx.workspace.root, &pattern)? {
                let hash = sha256_hex(&text);
                docs.push((rel.clone(), format!("file:{rel}"), text, hash));
            }
            if docs.is_empty() {
                return Err(ToolError::not_found(format!(
                    "no text file in the workspace matches `{pattern}`"
                )));
            }
        }
        _ => {
            return Err(ToolError::invalid_arguments(
                "give exactly one of `text` or `path`",
            ));
        }
    }
    let mut out = Vec::new();
    let total = docs.len();
    if total > 1 {
        call.log(
            vox_core::LogLevel::Info,
            "kb",
            format!("ingesting {total} documents"),
        );
    }
    for (done, (title, source, text, hash)) in docs.into_iter().enumerate() {
        // Each document is committed on its own: what was ingested before a cancel stays.
        if call.cancel.is_cancelled() {
            return Err(ToolError::cancelled(format!(
                "kb ingest cancelled after {done} of {total} documents"
            )));
        }
        if total > 1 {
            call.progress(done as f64, Some(total as f64), Some(source.clone()));
        }
        let (id, changed) = store.kb_upsert(&title, &source, &text, &hash).map_err(db)?;
        if changed {
            ix.upsert(&id.to_string(), &title, &text)
                .map_err(search_err)?;
        }
        out.push(IngestedDoc {
            id,
            title,
            source,
            bytes: text.len(),
            changed,
        });
    }
    if total > 1 {
        call.progress(total as f64, Some(total as f64), None);
    }
    Ok(Ingested {
        ingested: out.len(),
        documents: out,
    })
}

/// Text files under the workspace matching a relative path or glob, honouring .gitignore.
fn workspace_files(root: &Path, pattern: &str) -> Result<Vec<(String, String)>, ToolError> {
    bounded("path", pattern, 1024)?;
    let p = Path::new(pattern);
    if p.is_absolute() || p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(ToolError::invalid_arguments(format!(
            "`path` must stay inside the workspace: `{pattern}`"
        )));
    }
    let glob = globset::Glob::new(pattern)
        .map_err(|e| ToolError::invalid_arguments(format!("invalid glob `{pattern}`: {e}")))?
        .compile_matcher();
    let mut files = Vec::new();
    // .gitignore applies even when the workspace is not (yet) a git repository.
    let walker = ignore::WalkBuilder::new(root)
        .require_git(false)
        .filter_entry(|e| {
            !matches!(
                e.file_name().to_str(),
                Some(".git" | ".vox" | "target" | "node_modules")
            )
        })
        .build();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let rel = rel.to_string_lossy().replace('\\', "/");
        if !(glob.is_match(&rel) || rel == pattern) {
            continue;
        }
        if entry
            .metadata()
            .map(|m| m.len() as usize > MAX_DOC)
            .unwrap_or(true)
        {
            continue;
        }
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        if bytes.iter().take(8192).any(|&b| b == 0) {
            continue;
        }
        files.push((rel, String::from_utf8_lossy(&bytes).into_owned()));
        if files.len() > MAX_FILES {
            return Err(ToolError::invalid_arguments(format!(
                "`{pattern}` matches more than {MAX_FILES} files; narrow it"
            )));
        }
    }
    files.sort();
    Ok(files)
}

fn kb_query(ctx: &Ctx, a: QueryArgs) -> Result<KbHits, ToolError> {
    bounded("query", &a.query, 1000)?;
    let hits = kb_index(ctx)?
        .search(&a.query, limit(a.limit, 10, 100))
        .map_err(search_err)?;
    let store = repos(ctx)?;
    let mut results = Vec::new();
    for h in hits {
        let Ok(id) = h.id.parse::<i64>() else {
            continue;
        };
        if let Some(d) = store.kb_get(id).map_err(db)? {
            results.push(KbHit {
                id,
                title: d.title,
                source: d.source,
                score: h.score,
                snippet: h.snippet,
            });
        }
    }
    Ok(KbHits { results })
}

fn kb_list(ctx: &Ctx, a: KbListArgs) -> Result<KbPage, ToolError> {
    let n = limit(a.limit, 50, 500);
    let mut page = repos(ctx)?.kb_list(a.cursor, n + 1).map_err(db)?;
    let next = if page.len() > n {
        page.truncate(n);
        page.last().map(|d| d.id)
    } else {
        None
    };
    Ok(KbPage {
        documents: page,
        next_cursor: next,
    })
}

fn kb_delete(ctx: &Ctx, a: KbDeleteArgs) -> Result<KbDeleted, ToolError> {
    let ix = kb_index(ctx)?;
    if !repos(ctx)?.kb_delete(a.id).map_err(db)? {
        return Err(ToolError::not_found(format!(
            "no knowledge-base document with id {}",
            a.id
        )));
    }
    ix.delete(&a.id.to_string()).map_err(search_err)?;
    Ok(KbDeleted {
        deleted: true,
        id: a.id,
    })
}

fn text(ctx: &Ctx, call: &CallCtx, a: TextSearchArgs) -> Result<TextHits, ToolError> {
    bounded("query", &a.query, 1000)?;
    let hits = search(ctx)?
        .workspace
        .search_text_with(
            &a.query,
            limit(a.limit, 20, 100),
            a.path_glob.as_deref(),
            &CallObserver(call),
        )
        .map_err(search_err)?;
    Ok(TextHits { files: hits })
}

fn structural(ctx: &Ctx, call: &CallCtx, a: StructuralArgs) -> Result<Declarations, ToolError> {
    bounded("query", &a.query, 256)?;
    let hits = search(ctx)?
        .workspace
        .search_declarations_with(
            &a.query,
            a.kind.as_deref(),
            limit(a.limit, 20, 100),
            &CallObserver(call),
        )
        .map_err(search_err)?;
    Ok(Declarations { declarations: hits })
}

/// Workspace files matching `query` (text search), for research evidence.
pub fn workspace_text(
    ctx: &Ctx,
    call: &CallCtx,
    query: &str,
    n: usize,
) -> Result<Vec<FileHit>, ToolError> {
    search(ctx)?
        .workspace
        .search_text_with(query, n, None, &CallObserver(call))
        .map_err(search_err)
}

/// Knowledge-base documents matching `query`: id, title and snippet.
pub fn kb_snippets(
    ctx: &Ctx,
    query: &str,
    n: usize,
) -> Result<Vec<(i64, String, String)>, ToolError> {
    Ok(kb_query(
        ctx,
        QueryArgs {
            query: query.to_string(),
            limit: Some(n as u32),
        },
    )?
    .results
    .into_iter()
    .map(|h| (h.id, h.title, h.snippet))
    .collect())
}

/// Memories matching `query`: key and value.
pub fn memory_snippets(
    ctx: &Ctx,
    query: &str,
    n: usize,
) -> Result<Vec<(String, String)>, ToolError> {
    Ok(memory_search(ctx, query, n)?
        .results
        .into_iter()
        .map(|h| (h.key, h.value))
        .collect())
}

/// Memory search through the memory index.
pub fn memory_search(ctx: &Ctx, query: &str, n: usize) -> Result<MemoryHits, ToolError> {
    bounded("query", query, 1000)?;
    let hits = memory_index(ctx)?.search(query, n).map_err(search_err)?;
    let store = repos(ctx)?;
    let mut results = Vec::new();
    for h in hits {
        if let Some(m) = store.memory_get(&h.id).map_err(db)? {
            results.push(MemoryHit {
                key: m.key,
                value: m.value,
                tags: m.tags,
                score: h.score,
                snippet: h.snippet,
            });
        }
    }
    Ok(MemoryHits { results })
}

fn knowledge(ctx: &Ctx, a: QueryArgs) -> Result<Knowledge, ToolError> {
    bounded("query", &a.query, 1000)?;
    let n = limit(a.limit, 10, 100);
    let store = repos(ctx)?;
    // BM25 scores of two indexes are not on one scale: normalise each list by its best score,
    // then merge; ties keep a stable order (kb before memory, then id).
    let mut answers = Vec::new();
    let kb = kb_index(ctx)?.search(&a.query, n).map_err(search_err)?;
    let kb_top = kb.first().map_or(1.0, |h| h.score.max(f32::EPSILON));
    for h in kb {
        let Ok(id) = h.id.parse::<i64>() else {
            continue;
        };
        if let Some(d) = store.kb_get(id).map_err(db)? {
            let relevance = h.score / kb_top;
            answers.push((
                relevance,
                0,
                Answer::Kb {
                    id,
                    title: d.title,
                    origin: d.source,
                    score: h.score,
                    snippet: h.snippet,
                    relevance,
                },
            ));
        }
    }
    let mem = memory_index(ctx)?.search(&a.query, n).map_err(search_err)?;
    let mem_top = mem.first().map_or(1.0, |h| h.score.max(f32::EPSILON));
    for h in mem {
        if let Some(m) = store.memory_get(&h.id).map_err(db)? {
            let relevance = h.score / mem_top;
            answers.push((
                relevance,
                1,
                Answer::Memory {
                    title: m.key.clone(),
                    id: m.key,
                    score: h.score,
                    snippet: h.snippet,
                    value: m.value,
                    relevance,
                },
            ));
        }
    }
    answers.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    answers.truncate(n);
    let answers: Vec<Answer> = answers.into_iter().map(|(_, _, v)| v).collect();
    Ok(Knowledge {
        query: a.query,
        best: answers.first().cloned(),
        answers,
    })
}

/// The `search` family: its boot steps and tool handlers.
pub fn family() -> vox_core::Family {
    vox_core::Family {
        name: "search",
        steps: vec![(vox_mcp_registry::BootStep::SearchIndex, boot)],
        handlers: handlers(),
        ..vox_core::Family::default()
    }
}

fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    vec![
        ("vox_kb_ingest", blocking(ingest)),
        ("vox_kb_query", typed(kb_query)),
        ("vox_kb_list", typed(kb_list)),
        ("vox_kb_delete", typed(kb_delete)),
        ("vox_search_text", blocking(text)),
        ("vox_search_structural", blocking(structural)),
        ("vox_knowledge_query", typed(knowledge)),
    ]
}
