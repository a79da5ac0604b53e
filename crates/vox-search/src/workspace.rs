//! [`WorkspaceIndex`]: full-text and declaration search over a workspace directory.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime};

use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkBuilder;
use serde::Serialize;
use tantivy::query::{
    BooleanQuery, ConstScoreQuery, Occur, Query, QueryParser, TermQuery, TermSetQuery,
};
use tantivy::schema::{Field, IndexRecordOption, STORED, STRING, Schema, TEXT, Value};
use tantivy::{Index, IndexWriter, TantivyDocument, Term, doc};

use crate::declarations::{self, Declaration, KINDS};
use crate::util::{
    cap_query, clamp_limit, lenient_query, query_words, split_identifier, stable_top_docs,
};
use crate::writer::LazyWriter;
use crate::{Result, SearchError};

/// Files larger than this are not indexed.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// A file with a NUL byte in its first this-many bytes is treated as binary.
pub const BINARY_SNIFF_BYTES: usize = 8 * 1024;
/// Walking stops after this many files (in file-name order, so the cut is reproducible).
pub const MAX_FILES: usize = 50_000;
/// Directories never walked, whatever the ignore files say.
pub const ALWAYS_SKIPPED_DIRS: &[&str] = &[".git", ".vox", "target", "node_modules"];
/// Matching lines reported per file.
const MAX_LINES_PER_FILE: usize = 5;
/// Longest reported line, in characters.
const MAX_LINE_CHARS: usize = 300;
/// File-name matches count for less than content matches.
const PATH_BOOST: f32 = 0.5;

/// What one [`WorkspaceIndex::refresh`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefreshStats {
    /// Text files in the index after the refresh.
    pub files: u64,
    /// Files (re)indexed by this refresh because they were new or their (mtime, size) changed.
    pub indexed: u64,
    /// Files dropped from the index because they disappeared (or became ignored, binary or too
    /// large).
    pub removed: u64,
    /// Files seen but not indexed: too large, binary, unreadable, or a non-UTF-8 path.
    pub skipped: u64,
    /// Wall-clock duration of the refresh, in milliseconds.
    pub millis: u64,
    /// True when the walk stopped at the file cap ([`MAX_FILES`]).
    pub truncated: bool,
}

/// One line of a file that contains a query word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct LineMatch {
    /// 1-based line number.
    pub line: u32,
    /// The line without its trailing whitespace, cut to about 300 characters.
    pub text: String,
}

/// One file matching a text search.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FileHit {
    /// Path relative to the workspace root, `/`-separated.
    pub path: String,
    /// BM25 score (higher is better); only comparable within one search.
    pub score: f32,
    /// Up to five lines containing a query word (case-insensitive), in file order.
    pub lines: Vec<LineMatch>,
}

/// One declaration matching a declaration search.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DeclarationHit {
    /// The declared name.
    pub name: String,
    /// Normalised kind (`function`, `struct`, `class`, `tool`...).
    pub kind: String,
    /// Path relative to the workspace root, `/`-separated.
    pub path: String,
    /// 1-based line of the declaration.
    pub line: u32,
    /// The trimmed declaration line.
    pub signature: String,
    /// Rank score: in `[2, 3)` for an exact name match, `[1, 2)` for a name prefix, `[0, 1)` for
    /// matching name words; within a band, BM25 over the name words.
    pub score: f32,
}

#[derive(Clone, Copy)]
struct Fields {
    /// Relative path; identifies a file and every declaration in it (one delete removes all).
    path: Field,
    /// `file` or `decl`.
    doc_kind: Field,
    path_text: Field,
    body: Field,
    name: Field,
    name_words: Field,
    decl_kind: Field,
    line: Field,
    signature: Field,
}

const DOC_FILE: &str = "file";
const DOC_DECL: &str = "decl";

#[derive(Clone, Copy, PartialEq, Eq)]
struct FileRecord {
    mtime: Option<SystemTime>,
    size: u64,
    /// False for a binary or unreadable file we remember so we do not re-read it until it changes.
    indexed: bool,
}

/// The index proper, built on the first refresh.
struct State {
    store: LazyWriter,
    fields: Fields,
    text_parser: QueryParser,
    files: HashMap<String, FileRecord>,
    /// Declarations per file, for the exact-name and prefix tiers.
    decls: BTreeMap<String, Vec<Declaration>>,
}

/// Watches a long refresh: told how far it got, asked whether to stop. `()` watches nothing.
pub trait Observer: Sync {
    /// `done` of `total` changed files are indexed.
    fn progress(&self, _done: u64, _total: u64) {}
    /// Whether the refresh should stop now.
    fn cancelled(&self) -> bool {
        false
    }
}

impl Observer for () {}

/// Full-text search over a workspace's text files plus search over their code declarations.
///
/// Every search first refreshes the index incrementally (only files whose mtime or size changed
/// are re-read), so results always reflect the files on disk. Thread-safe: refreshes are
/// serialised internally.
pub struct WorkspaceIndex {
    root: PathBuf,
    /// [`MAX_FILES`] outside unit tests, which lower it to exercise the cap cheaply.
    max_files: usize,
    state: Mutex<Option<State>>,
}

impl WorkspaceIndex {
    /// Creates an index of `root`. Cheap: nothing is read or indexed until the first refresh.
    pub fn new(root: PathBuf) -> Self {
        WorkspaceIndex {
            root,
            max_files: MAX_FILES,
            state: Mutex::new(None),
        }
    }

    /// The workspace root this index covers.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Brings the index up to date with the files on disk: walks the workspace honouring
    /// `.gitignore`/`.ignore`, skipping hidden files and [`ALWAYS_SKIPPED_DIRS`], files over
    /// 1 MiB and binary files; re-indexes changed files and drops removed ones.
    pub fn refresh(&self) -> Result<RefreshStats> {
        self.refresh_with(&())
    }

    /// [`Self::refresh`], reporting to `observer` and stopping with [`SearchError::Cancelled`]
    /// when it asks (the index is then rebuilt on the next refresh).
    pub fn refresh_with(&self, observer: &dyn Observer) -> Result<RefreshStats> {
        let mut guard = self.lock();
        self.refresh_locked(&mut guard, observer)
    }

    /// Searches file contents (and, weighted lower, file paths). The query is parsed leniently
    /// (any text is accepted), cut to 1,000 characters, `limit` to 100. `path_glob` restricts
    /// the files: a glob without `/` matches the file name (`*.rs`), one with `/` the whole
    /// relative path (`src/**/*.rs`). Hits are ordered by score, then path.
    pub fn search_text(
        &self,
        query: &str,
        limit: usize,
        path_glob: Option<&str>,
    ) -> Result<Vec<FileHit>> {
        self.search_text_with(query, limit, path_glob, &())
    }

    /// [`Self::search_text`] whose refresh reports to `observer`.
    pub fn search_text_with(
        &self,
        query: &str,
        limit: usize,
        path_glob: Option<&str>,
        observer: &dyn Observer,
    ) -> Result<Vec<FileHit>> {
        let matcher = path_glob.map(PathGlob::new).transpose()?;
        let query = cap_query(query);
        let limit = clamp_limit(limit);
        let hits = {
            let mut guard = self.lock();
            let state = self.refreshed(&mut guard, observer)?;
            if query.is_empty() || limit == 0 {
                return Ok(Vec::new());
            }
            let f = state.fields;
            let searcher = state.store.reader().searcher();
            let parsed = lenient_query(&state.text_parser, &searcher, query);
            let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![
                (Occur::Must, parsed),
                (Occur::Must, filter(term_query(f.doc_kind, DOC_FILE))),
            ];
            if let Some(matcher) = &matcher {
                let mut paths: Vec<&String> = state
                    .files
                    .iter()
                    .filter(|(path, record)| record.indexed && matcher.is_match(path))
                    .map(|(path, _)| path)
                    .collect();
                if paths.is_empty() {
                    return Ok(Vec::new());
                }
                paths.sort();
                let terms = paths.into_iter().map(|p| Term::from_field_text(f.path, p));
                clauses.push((Occur::Must, filter(Box::new(TermSetQuery::new(terms)))));
            }
            let query = BooleanQuery::new(clauses);
            stable_top_docs(&searcher, &query, limit, |address| {
                let doc: TantivyDocument = searcher.doc(address)?;
                Ok(stored_str(&doc, f.path))
            })?
        };
        // Re-reading files for their lines happens outside the lock: it is the slow part.
        let words = query_words(query);
        Ok(hits
            .into_iter()
            .map(|(score, path, _)| {
                let lines = matching_lines(&self.root.join(&path), &words);
                FileHit { path, score, lines }
            })
            .collect())
    }

    /// Searches declarations by name: exact (case-insensitive) matches first, then name
    /// prefixes, then declarations sharing words with the query (names are split on snake_case
    /// and camelCase boundaries: `parse_request` finds `parseHttpRequest`). `kind` filters by
    /// kind (`function`, `struct`, `class`, `tool`..., or a keyword like `fn`, `def`, `func`).
    /// Ties are ordered by path, then line.
    pub fn search_declarations(
        &self,
        query: &str,
        kind: Option<&str>,
        limit: usize,
    ) -> Result<Vec<DeclarationHit>> {
        self.search_declarations_with(query, kind, limit, &())
    }

    /// [`Self::search_declarations`] whose refresh reports to `observer`.
    pub fn search_declarations_with(
        &self,
        query: &str,
        kind: Option<&str>,
        limit: usize,
        observer: &dyn Observer,
    ) -> Result<Vec<DeclarationHit>> {
        let kind =
            match kind.map(str::trim).filter(|k| !k.is_empty()) {
                None => None,
                Some(raw) => Some(declarations::normalize_kind(raw).ok_or_else(|| {
                    SearchError::UnknownKind {
                        kind: raw.to_string(),
                        known: KINDS.join(", "),
                    }
                })?),
            };
        let query = cap_query(query);
        let limit = clamp_limit(limit);
        let mut guard = self.lock();
        let state = self.refreshed(&mut guard, observer)?;
        if query.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let f = state.fields;
        let lowered = query.to_lowercase();

        // Tiers 2 (exact) and 1 (prefix) come from the in-memory table.
        let mut ranked: HashMap<(String, u32), (u8, DeclarationHit)> = HashMap::new();
        for (path, decls) in &state.decls {
            for decl in decls {
                if kind.is_some_and(|k| k != decl.kind) {
                    continue;
                }
                let name = decl.name.to_lowercase();
                let tier = if name == lowered {
                    2
                } else if name.starts_with(&lowered) {
                    1
                } else {
                    continue;
                };
                ranked.insert((path.clone(), decl.line), (tier, hit(path, decl, 0.0)));
            }
        }

        // Tier 0, and the BM25 component of every tier, from the name-words index.
        let mut words = split_identifier(query);
        words.push(joined_words(query));
        words.sort();
        words.dedup();
        let word_query: Vec<(Occur, Box<dyn Query>)> = words
            .iter()
            .filter(|w| !w.is_empty())
            .map(|w| (Occur::Should, term_query(f.name_words, w)))
            .collect();
        if !word_query.is_empty() {
            let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![
                (Occur::Must, Box::new(BooleanQuery::new(word_query))),
                (Occur::Must, filter(term_query(f.doc_kind, DOC_DECL))),
            ];
            if let Some(kind) = kind {
                clauses.push((Occur::Must, filter(term_query(f.decl_kind, kind))));
            }
            let searcher = state.store.reader().searcher();
            let fetch = limit.saturating_add(ranked.len());
            let hits = stable_top_docs(&searcher, &BooleanQuery::new(clauses), fetch, |a| {
                let doc: TantivyDocument = searcher.doc(a)?;
                Ok((stored_str(&doc, f.path), stored_u32(&doc, f.line)))
            })?;
            for (bm25, key, address) in hits {
                let squashed = bm25.max(0.0) / (1.0 + bm25.max(0.0));
                if let Some((tier, hit)) = ranked.get_mut(&key) {
                    hit.score = f32::from(*tier) + squashed;
                    continue;
                }
                let doc: TantivyDocument = searcher.doc(address)?;
                ranked.insert(
                    key.clone(),
                    (
                        0,
                        DeclarationHit {
                            name: stored_str(&doc, f.name),
                            kind: stored_str(&doc, f.decl_kind),
                            path: key.0,
                            line: key.1,
                            signature: stored_str(&doc, f.signature),
                            score: squashed,
                        },
                    ),
                );
            }
        }
        let mut hits: Vec<DeclarationHit> = ranked
            .into_values()
            .map(|(tier, mut hit)| {
                // Exact/prefix hits the word index did not score still sit in their band.
                hit.score = hit.score.max(f32::from(tier));
                hit
            })
            .collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.path.cmp(&b.path))
                .then_with(|| a.line.cmp(&b.line))
        });
        hits.truncate(limit);
        Ok(hits)
    }

    fn lock(&self) -> MutexGuard<'_, Option<State>> {
        // A panic while refreshing cannot leave the index worse than stale; recover.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn refreshed<'a>(
        &self,
        guard: &'a mut Option<State>,
        observer: &dyn Observer,
    ) -> Result<&'a State> {
        self.refresh_locked(guard, observer)?;
        match guard {
            Some(state) => Ok(state),
            // refresh_locked leaves a state behind on success.
            None => Err(SearchError::Index(tantivy::TantivyError::InternalError(
                "workspace index missing after refresh".into(),
            ))),
        }
    }

    fn refresh_locked(
        &self,
        guard: &mut Option<State>,
        observer: &dyn Observer,
    ) -> Result<RefreshStats> {
        let state = match guard {
            Some(state) => state,
            None => guard.insert(State::new()?),
        };
        let outcome = state.refresh(&self.root, self.max_files, observer);
        // A cancelled refresh committed a consistent part; anything else may have left the
        // index and the file table disagreeing.
        if outcome
            .as_ref()
            .is_err_and(|e| !matches!(e, SearchError::Cancelled))
        {
            // The index was rolled back but may disagree with the file table; rebuild next time.
            *guard = None;
        }
        outcome
    }
}

impl State {
    fn new() -> Result<Self> {
        let mut builder = Schema::builder();
        let fields = Fields {
            path: builder.add_text_field("path", STRING | STORED),
            doc_kind: builder.add_text_field("doc_kind", STRING),
            path_text: builder.add_text_field("path_text", TEXT),
            body: builder.add_text_field("body", TEXT),
            name: builder.add_text_field("name", STORED),
            name_words: builder.add_text_field("name_words", TEXT),
            decl_kind: builder.add_text_field("decl_kind", STRING | STORED),
            line: builder.add_u64_field("line", STORED),
            signature: builder.add_text_field("signature", STORED),
        };
        let index = Index::create_in_ram(builder.build());
        let mut text_parser = QueryParser::for_index(&index, vec![fields.body, fields.path_text]);
        text_parser.set_field_boost(fields.path_text, PATH_BOOST);
        Ok(State {
            store: LazyWriter::new(index)?,
            fields,
            text_parser,
            files: HashMap::new(),
            decls: BTreeMap::new(),
        })
    }

    fn refresh(
        &mut self,
        root: &Path,
        max_files: usize,
        observer: &dyn Observer,
    ) -> Result<RefreshStats> {
        let started = Instant::now();
        check_root(root)?;
        let mut stats = RefreshStats {
            files: 0,
            indexed: 0,
            removed: 0,
            skipped: 0,
            millis: 0,
            truncated: false,
        };

        // Pass 1: stat only, to learn what changed.
        let mut seen: HashSet<String> = HashSet::new();
        let mut changed: Vec<(String, FileRecord)> = Vec::new();
        let mut walked = 0usize;
        for entry in walker(root) {
            let Ok(entry) = entry else {
                stats.skipped += 1; // unreadable directory or malformed ignore file
                continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            if walked >= max_files {
                stats.truncated = true;
                break;
            }
            walked += 1;
            let (Some(rel), Ok(meta)) = (relative_path(root, entry.path()), entry.metadata())
            else {
                stats.skipped += 1;
                continue;
            };
            if meta.len() > MAX_FILE_BYTES {
                stats.skipped += 1;
                continue;
            }
            let record = FileRecord {
                mtime: meta.modified().ok(),
                size: meta.len(),
                indexed: false,
            };
            match self.files.get(&rel) {
                Some(old) if old.mtime == record.mtime && old.size == record.size => {
                    if !old.indexed {
                        stats.skipped += 1;
                    }
                }
                _ => changed.push((rel.clone(), record)),
            }
            seen.insert(rel);
        }
        let mut removed: Vec<String> = self
            .files
            .keys()
            .filter(|path| !seen.contains(*path))
            .cloned()
            .collect();
        removed.sort();

        // Pass 2: read and index the changed files, in one commit. A cancelled refresh commits
        // the files done so far (the rest are still "changed" next time), so repeated attempts
        // under a deadline make progress instead of starting over.
        let mut cancelled = false;
        if !changed.is_empty() || !removed.is_empty() {
            let f = self.fields;
            let updates = self.store.write(|writer| {
                for path in &removed {
                    writer.delete_term(Term::from_field_text(f.path, path));
                }
                let mut updates = Vec::with_capacity(changed.len());
                let total = changed.len() as u64;
                for (done, (rel, mut record)) in changed.into_iter().enumerate() {
                    // Every 64 files: a report per file would cost more than reading small ones.
                    if done % 64 == 0 {
                        if observer.cancelled() {
                            cancelled = true;
                            break;
                        }
                        observer.progress(done as u64, total);
                    }
                    writer.delete_term(Term::from_field_text(f.path, &rel));
                    let decls = match read_text(&root.join(&rel)) {
                        Some(text) => {
                            record.indexed = true;
                            Some(index_file(writer, f, &rel, &text)?)
                        }
                        None => None,
                    };
                    updates.push((rel, record, decls));
                }
                if !cancelled {
                    observer.progress(total, total);
                }
                Ok(updates)
            })?;
            for path in removed {
                if self.files.remove(&path).is_some_and(|r| r.indexed) {
                    stats.removed += 1;
                }
                self.decls.remove(&path);
            }
            for (rel, record, decls) in updates {
                let was_indexed = self.files.get(&rel).is_some_and(|r| r.indexed);
                match decls {
                    Some(decls) => {
                        stats.indexed += 1;
                        self.decls.insert(rel.clone(), decls);
                    }
                    None => {
                        stats.skipped += 1;
                        if was_indexed {
                            stats.removed += 1; // became binary or unreadable
                        }
                        self.decls.remove(&rel);
                    }
                }
                self.files.insert(rel, record);
            }
        }
        if cancelled {
            return Err(SearchError::Cancelled);
        }
        stats.files = self.files.values().filter(|r| r.indexed).count() as u64;
        stats.millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Ok(stats)
    }
}

fn check_root(root: &Path) -> Result<()> {
    let meta = fs::metadata(root).map_err(|source| SearchError::Root {
        path: root.to_path_buf(),
        source,
    })?;
    if meta.is_dir() {
        Ok(())
    } else {
        Err(SearchError::Root {
            path: root.to_path_buf(),
            source: std::io::Error::other("not a directory"),
        })
    }
}

fn walker(root: &Path) -> ignore::Walk {
    WalkBuilder::new(root)
        .hidden(true)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        // The user's global excludes would make results differ between machines.
        .git_global(false)
        // Honour .gitignore in a workspace that is not (yet) a git repository.
        .require_git(false)
        .follow_links(false)
        // Sorted so the file cap cuts the same files every time.
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            !(is_dir
                && entry
                    .file_name()
                    .to_str()
                    .is_some_and(|name| ALWAYS_SKIPPED_DIRS.contains(&name)))
        })
        .build()
}

/// `root`-relative, `/`-separated; `None` for a path that is not valid UTF-8.
fn relative_path(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let mut parts = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?),
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The file's text, or `None` when it is unreadable, too large or binary. Invalid UTF-8 is
/// replaced rather than rejected so Latin-1 sources stay searchable.
fn read_text(path: &Path) -> Option<String> {
    let file = fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    // Read one byte past the cap to notice a file that grew since it was stat'ed.
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return None;
    }
    let sniff = bytes.get(..BINARY_SNIFF_BYTES).unwrap_or(&bytes);
    if sniff.contains(&0) {
        return None;
    }
    Some(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
    })
}

fn index_file(writer: &IndexWriter, f: Fields, rel: &str, text: &str) -> Result<Vec<Declaration>> {
    writer.add_document(doc!(
        f.path => rel,
        f.doc_kind => DOC_FILE,
        f.path_text => rel,
        f.body => text,
    ))?;
    let decls = declarations::extract(rel, text);
    for decl in &decls {
        writer.add_document(doc!(
            f.path => rel,
            f.doc_kind => DOC_DECL,
            f.name => decl.name.as_str(),
            f.name_words => name_words(&decl.name),
            f.decl_kind => decl.kind,
            f.line => u64::from(decl.line),
            f.signature => decl.signature.as_str(),
        ))?;
    }
    Ok(decls)
}

/// The words of a name plus the whole name run together, so `parse_http` is found by `parse`,
/// `http` and `parsehttp` (and, through the query side, by `parseHttp`).
fn name_words(name: &str) -> String {
    let mut words = split_identifier(name);
    words.push(joined_words(name));
    words.join(" ")
}

fn joined_words(name: &str) -> String {
    split_identifier(name).concat()
}

fn hit(path: &str, decl: &Declaration, score: f32) -> DeclarationHit {
    DeclarationHit {
        name: decl.name.clone(),
        kind: decl.kind.to_string(),
        path: path.to_string(),
        line: decl.line,
        signature: decl.signature.clone(),
        score,
    }
}

fn term_query(field: Field, text: &str) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(field, text),
        IndexRecordOption::WithFreqs,
    ))
}

/// A clause that restricts matches without changing scores.
fn filter(query: Box<dyn Query>) -> Box<dyn Query> {
    Box::new(ConstScoreQuery::new(query, 0.0))
}

fn stored_str(doc: &TantivyDocument, field: Field) -> String {
    doc.get_first(field)
        .and_then(|v| v.as_str())
        .unwrap_or_default()
        .to_string()
}

fn stored_u32(doc: &TantivyDocument, field: Field) -> u32 {
    doc.get_first(field)
        .and_then(|v| v.as_u64())
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0)
}

/// Up to [`MAX_LINES_PER_FILE`] lines of the file containing any of `words` (lowercase),
/// compared case-insensitively.
fn matching_lines(path: &Path, words: &[String]) -> Vec<LineMatch> {
    if words.is_empty() {
        return Vec::new();
    }
    let Some(text) = read_text(path) else {
        return Vec::new(); // removed or changed to binary since the search: no lines to show
    };
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let lowered = line.to_lowercase();
        if words.iter().any(|w| lowered.contains(w.as_str())) {
            lines.push(LineMatch {
                line: u32::try_from(index + 1).unwrap_or(u32::MAX),
                text: crate::util::truncate_chars(line.trim_end(), MAX_LINE_CHARS),
            });
            if lines.len() == MAX_LINES_PER_FILE {
                break;
            }
        }
    }
    lines
}

/// A `path_glob` filter: a glob without `/` matches file names, one with `/` whole paths.
struct PathGlob {
    matcher: GlobMatcher,
    file_name_only: bool,
}

impl PathGlob {
    fn new(glob: &str) -> Result<Self> {
        let matcher = GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|source| SearchError::InvalidGlob {
                glob: glob.to_string(),
                source,
            })?
            .compile_matcher();
        Ok(PathGlob {
            matcher,
            file_name_only: !glob.contains('/'),
        })
    }

    fn is_match(&self, path: &str) -> bool {
        if self.file_name_only {
            let name = path.rsplit('/').next().unwrap_or(path);
            self.matcher.is_match(name)
        } else {
            self.matcher.is_match(path)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_cap_keeps_the_first_files_in_name_order_and_reports_truncation() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["e", "a", "d", "b", "c"] {
            fs::write(dir.path().join(format!("{name}.txt")), "capped\n").unwrap();
        }
        let mut index = WorkspaceIndex::new(dir.path().to_path_buf());
        index.max_files = 3;
        let stats = index.refresh().unwrap();
        assert!(stats.truncated);
        assert_eq!(stats.files, 3);
        let hits = index.search_text("capped", 10, None).unwrap();
        let paths: Vec<&str> = hits.iter().map(|h| h.path.as_str()).collect();
        assert_eq!(paths, ["a.txt", "b.txt", "c.txt"]);
    }

    #[test]
    fn relative_paths_are_slash_separated_and_reject_the_root_itself() {
        let root = Path::new("/ws");
        assert_eq!(
            relative_path(root, Path::new("/ws/src/deep/a.rs")).as_deref(),
            Some("src/deep/a.rs")
        );
        assert_eq!(relative_path(root, root), None);
        assert_eq!(relative_path(root, Path::new("/elsewhere/a.rs")), None);
    }
}
