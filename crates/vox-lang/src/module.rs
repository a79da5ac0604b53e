//! The compiled-module API: analyze or compile a source once, then call its functions with
//! JSON arguments under a budget, from any thread.

use crate::diag::{self, Code, Diagnostic, DiagnosticJson, Severity, SourceFile, Span};
use crate::hir::{FnRole, FnSig, Program};
use crate::import::{LoadError, ModuleLoader};
use crate::interp::{Budget, BudgetKind, Flow, Interp, LogSink, RunError};
use crate::value::Value;
use crate::{json, lower, parser};
use serde::Serialize;
use serde_json::{Value as J, json};
use std::time::Instant;

/// Largest source accepted; bigger inputs get one diagnostic and are not parsed.
pub const MAX_SOURCE_BYTES: usize = 16 << 20;

/// Decodes bytes as UTF-8; each invalid sequence becomes a diagnostic (at most 20 are reported)
/// and is replaced by U+FFFD so the rest of the file can still be checked.
pub fn decode_source(bytes: &[u8]) -> (String, Vec<Diagnostic>) {
    // Valid UTF-8 (the usual case) is checked and copied in bulk.
    if let Ok(text) = std::str::from_utf8(bytes) {
        return (text.to_owned(), Vec::new());
    }
    let mut text = String::with_capacity(bytes.len());
    let mut diags = Vec::new();
    for chunk in bytes.utf8_chunks() {
        text.push_str(chunk.valid());
        let invalid = chunk.invalid();
        if !invalid.is_empty() {
            let at = text.len();
            text.push('\u{FFFD}');
            if diags.len() < 20 {
                let shown: Vec<String> = invalid.iter().map(|b| format!("{b:#04x}")).collect();
                diags.push(
                    Diagnostic::new(
                        Code::InvalidUtf8,
                        Span::new(at, at + '\u{FFFD}'.len_utf8()),
                        format!("invalid UTF-8 (bytes {})", shown.join(" ")),
                    )
                    .with_help("Vox source files must be UTF-8"),
                );
            }
        }
    }
    (text, diags)
}

/// A checked file: its diagnostics and, when it has no errors, the program.
#[derive(Debug)]
pub struct Analysis {
    /// The decoded source with a line index.
    pub source: SourceFile,
    /// All diagnostics, in source order.
    pub diagnostics: Vec<Diagnostic>,
    program: Program,
    ast: crate::ast::File,
    imported: Vec<ImportedFile>,
    imports: Vec<ImportInfo>,
    /// Whether `program` runs: every error is confined to a declaration that was left out.
    runnable: bool,
}

/// A file loaded through an import, with where its spans start in the program.
#[derive(Clone, Debug)]
pub struct ImportedFile {
    /// Its source.
    pub source: SourceFile,
    /// Added to its byte offsets in the program's spans.
    pub base: u32,
}

/// One `import` of the root file, and what it loaded.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ImportInfo {
    /// The module path (`a.b`), empty for forms that name none.
    pub module: String,
    /// The file it loaded, when it loaded one.
    pub file: Option<String>,
    /// The names it brings in.
    pub names: Vec<String>,
}

/// Lexes, parses, lowers and checks a file on its own: its imports are not loaded (calling an
/// imported name fails at run time). Never panics, whatever the bytes.
pub fn analyze(name: &str, bytes: &[u8]) -> Analysis {
    analyze_with(name, bytes, &crate::import::NoImports)
}

/// Like [`analyze`], and loads the `.vox` files the file imports (and those they import)
/// through `loader`, checking each: an error in an imported file is one error at the import.
/// Never panics, whatever the bytes.
pub fn analyze_with(name: &str, bytes: &[u8], loader: &dyn ModuleLoader) -> Analysis {
    if bytes.len() > MAX_SOURCE_BYTES {
        let source = SourceFile::new(name, String::new());
        return Analysis {
            source,
            diagnostics: vec![Diagnostic::new(
                Code::SourceTooLarge,
                Span::default(),
                format!(
                    "source is {} bytes; the limit is {MAX_SOURCE_BYTES}",
                    bytes.len()
                ),
            )],
            program: Program::default(),
            ast: crate::ast::File::default(),
            imported: Vec::new(),
            imports: Vec::new(),
            runnable: false,
        };
    }
    let mut unit = Unit::default();
    unit.add(loader.key(name), name, bytes);
    unit.visit(0, loader);
    let files = unit_files(&unit);
    let mut lowered = lower::lower_unit(&files, &unit.order);
    drop(files);
    let mut reported: Vec<Vec<Diagnostic>> = std::mem::take(&mut lowered.diags);
    let runnable = unit.demote_broken(&mut lowered, &mut reported);
    // Each file's own findings, then what its imports say; dependencies come first in `order`,
    // so whether a dependency has errors is known when its importer is reached.
    let mut has_errors = vec![false; unit.files.len()];
    for &i in &unit.order {
        let mut diags = std::mem::take(&mut unit.files[i].diags);
        diags.append(&mut reported[i]);
        unit.import_diags(i, &has_errors, &mut diags);
        diags.sort_by_key(|d| (d.span.start, d.span.end));
        has_errors[i] = diags.iter().any(|d| d.severity() == Severity::Error);
        unit.files[i].diags = diags;
    }
    let imports = unit.import_infos();
    let mut files = unit.files.into_iter();
    let root = files.next().expect("the root is file 0");
    Analysis {
        source: root.source,
        diagnostics: root.diags,
        program: lowered.program,
        ast: root.ast,
        imported: files
            .map(|f| ImportedFile {
                source: f.source,
                base: f.base,
            })
            .collect(),
        imports,
        runnable,
    }
}

/// Rounds of [`Unit::demote_broken`] before a unit whose errors keep spreading is given up.
const MAX_DEMOTION_ROUNDS: usize = 4;

/// The placeholder for a `fn`, `type` or `let` that holds one of the `errors` spans.
fn broken_placeholder(item: &crate::ast::Item, errors: &[Span]) -> Option<crate::ast::Item> {
    use crate::ast::Item;
    let (name, span, kind) = match item {
        Item::Fn(d) => (d.name, d.span, "fn"),
        Item::Type(d) => (d.name, d.span, "type"),
        Item::Const(d) => (d.name, d.span, "let"),
        Item::Import(_) | Item::Opaque(_) => return None,
    };
    errors
        .iter()
        .any(|e| e.start >= span.start && e.start < span.end.max(span.start + 1))
        .then(|| {
            Item::Opaque(crate::ast::OpaqueItem {
                kind: kind.to_string(),
                name: Some(name),
                span,
                broken: true,
            })
        })
}

fn error_spans<'d>(diags: impl Iterator<Item = &'d Diagnostic>) -> Vec<Span> {
    diags
        .filter(|d| d.severity() == Severity::Error)
        .map(|d| d.span)
        .collect()
}

/// A compilation's files, as lowering needs them.
fn unit_files(unit: &Unit) -> Vec<lower::UnitFile<'_>> {
    unit.files
        .iter()
        .map(|f| lower::UnitFile {
            ast: &f.ast,
            src: &f.source,
            base: f.base,
            imports: f
                .edges
                .iter()
                .map(|e| match e {
                    Edge::File(i) => Some(*i),
                    _ => None,
                })
                .collect(),
        })
        .collect()
}

/// A remembered module lookup.
enum Lookup {
    File(usize),
    Missing(Vec<String>),
    Refused(String),
}

/// What one `import` item led to.
enum Edge {
    /// A form that names no module.
    NoModule,
    /// No such file.
    NotFound(Vec<String>),
    /// The file could not be loaded.
    Refused(String),
    /// Part of an import cycle (the chain, for the message).
    Cycle(String),
    /// A unit file.
    File(usize),
}

struct UnitSource {
    key: Option<String>,
    source: SourceFile,
    ast: crate::ast::File,
    diags: Vec<Diagnostic>,
    base: u32,
    /// Per `import` item, in item order.
    edges: Vec<Edge>,
}

/// The files of one compilation: the root (file 0) and every file its imports reach.
#[derive(Default)]
struct Unit {
    files: Vec<UnitSource>,
    /// Post-order: each file after the files it imports.
    order: Vec<usize>,
    /// Depth-first path: (file, index of the import item being followed).
    stack: Vec<(usize, usize)>,
    /// What each (importing directory, module path) resolved to.
    lookups: std::collections::HashMap<(String, String), Lookup>,
    /// Imports found to be on a cycle while they were still being followed.
    cycle_marks: std::collections::HashMap<(usize, usize), String>,
    bytes: usize,
    next_base: u32,
}

impl Unit {
    fn add(&mut self, key: Option<String>, name: &str, bytes: &[u8]) -> usize {
        let (text, diags) = decode_source(bytes);
        let source = SourceFile::new(name, text);
        let parsed = parser::parse(&source.text);
        let mut all = diags;
        all.extend(parsed.diags);
        let base = self.next_base;
        self.next_base = base + source.text.len() as u32 + 1;
        self.bytes += bytes.len();
        self.files.push(UnitSource {
            key,
            source,
            ast: parsed.file,
            diags: all,
            base,
            edges: Vec::new(),
        });
        self.files.len() - 1
    }

    /// Loads what file `i` imports, depth first, and records the post-order.
    fn visit(&mut self, i: usize, loader: &dyn ModuleLoader) {
        let f = &self.files[i].ast;
        let decls: Vec<(Vec<String>, usize)> = self
            .decls(i)
            .enumerate()
            .map(|(k, d)| {
                let path = f.names[d.module].iter().map(|n| f.sym(n.sym).to_string());
                (path.collect(), k)
            })
            .collect();
        for (path, k) in decls {
            let edge = if path.is_empty() {
                Edge::NoModule
            } else {
                self.stack.push((i, k));
                let segs: Vec<&str> = path.iter().map(String::as_str).collect();
                let edge = self.follow(i, &segs, loader);
                self.stack.pop();
                match self.cycle_marks.remove(&(i, k)) {
                    Some(chain) => Edge::Cycle(chain),
                    None => edge,
                }
            };
            self.files[i].edges.push(edge);
        }
        self.order.push(i);
    }

    fn follow(&mut self, from: usize, path: &[&str], loader: &dyn ModuleLoader) -> Edge {
        // Files in one directory resolve a module path alike, so each pair is looked up once
        // however many imports repeat it.
        let name = &self.files[from].source.name;
        let dir = name.rfind('/').map_or("", |i| &name[..i]);
        let memo_key = (dir.to_string(), path.join("."));
        let found = match self.lookups.get(&memo_key) {
            Some(Lookup::File(j)) => Some(*j),
            Some(Lookup::Missing(looked)) => return Edge::NotFound(looked.clone()),
            Some(Lookup::Refused(m)) => return Edge::Refused(m.clone()),
            None => None,
        };
        let loaded = match found {
            Some(_) => None,
            None => match loader.load(name, path) {
                Ok(l) => Some(l),
                Err(LoadError::NotFound { looked }) => {
                    self.lookups
                        .insert(memo_key, Lookup::Missing(looked.clone()));
                    return Edge::NotFound(looked);
                }
                Err(LoadError::Refused(m)) => {
                    self.lookups.insert(memo_key, Lookup::Refused(m.clone()));
                    return Edge::Refused(m);
                }
            },
        };
        let known = found.or_else(|| {
            let key = loaded.as_ref().map(|l| l.key.as_str());
            self.files.iter().position(|f| f.key.as_deref() == key)
        });
        if let Some(j) = known {
            self.lookups.insert(memo_key, Lookup::File(j));
            // A file on the current path: every import along the cycle is an error.
            if let Some(at) = self.stack.iter().position(|&(f, _)| f == j) {
                let mut chain: Vec<&str> = self.stack[at..]
                    .iter()
                    .map(|&(f, _)| self.files[f].source.name.as_str())
                    .collect();
                chain.push(&self.files[j].source.name);
                let chain = chain.join(" → ");
                // The other imports on the cycle are still being followed; their edges are
                // recorded when they return.
                for &frame in &self.stack[at..self.stack.len() - 1] {
                    self.cycle_marks
                        .entry(frame)
                        .or_insert_with(|| chain.clone());
                }
                return Edge::Cycle(chain);
            }
            return Edge::File(j);
        }
        // (A remembered lookup always names a known file, so `loaded` is here.)
        let Some(loaded) = loaded else {
            return Edge::NotFound(Vec::new());
        };
        if self.files.len() > crate::import::MAX_IMPORTED_FILES {
            return Edge::Refused(format!(
                "this compilation already loads {} files; the limit is {}",
                crate::import::MAX_IMPORTED_FILES,
                crate::import::MAX_IMPORTED_FILES
            ));
        }
        if loaded.bytes.len() > MAX_SOURCE_BYTES {
            return Edge::Refused(format!(
                "`{}` is {} bytes; the limit is {MAX_SOURCE_BYTES}",
                loaded.name,
                loaded.bytes.len()
            ));
        }
        if self.bytes + loaded.bytes.len() > crate::import::MAX_UNIT_BYTES {
            return Edge::Refused(format!(
                "`{}` would bring the files of this compilation over {} bytes",
                loaded.name,
                crate::import::MAX_UNIT_BYTES
            ));
        }
        let j = self.add(Some(loaded.key), &loaded.name, &loaded.bytes);
        self.lookups.insert(memo_key, Lookup::File(j));
        self.visit(j, loader);
        Edge::File(j)
    }

    /// Leaves out every declaration that has an error, so that the rest of each file runs: a
    /// broken `fn`, `type` or `let` becomes a placeholder whose name still resolves (using it
    /// fails at run time) and the unit is lowered again. `reported` holds each file's lowering
    /// diagnostics from the first lowering; an error that only appears once a declaration is
    /// left out is added to it. Returns whether the result is free of errors (a program
    /// safe to run), which fails only when errors keep spreading for
    /// [`MAX_DEMOTION_ROUNDS`] rounds.
    fn demote_broken(
        &mut self,
        lowered: &mut lower::LoweredUnit,
        reported: &mut [Vec<Diagnostic>],
    ) -> bool {
        // Per file, the lowering errors of the latest lowering (the first one's are `reported`).
        let mut lowering_errors: Vec<Vec<Span>> =
            reported.iter().map(|d| error_spans(d.iter())).collect();
        for round in 0..=MAX_DEMOTION_ROUNDS {
            let mut demoted = false;
            for (file, lowering) in self.files.iter_mut().zip(&lowering_errors) {
                let mut errors = error_spans(file.diags.iter());
                errors.extend_from_slice(lowering);
                if errors.is_empty() {
                    continue;
                }
                for item in &mut file.ast.items {
                    if let Some(placeholder) = broken_placeholder(item, &errors) {
                        *item = placeholder;
                        demoted = true;
                    }
                }
            }
            if !demoted {
                // What is left lies outside declarations: parse errors between them cost
                // nothing else, and an import's errors (a name its file lacks) leave that name
                // failing at run time.
                return self
                    .files
                    .iter()
                    .zip(&lowering_errors)
                    .all(|(file, errors)| {
                        errors.iter().all(|e| {
                            file.ast.items.iter().any(|it| {
                                matches!(it, crate::ast::Item::Import(d)
                                if e.start >= d.span.start && e.start < d.span.end)
                            })
                        })
                    });
            }
            if round == MAX_DEMOTION_ROUNDS {
                return false;
            }
            let files = unit_files(self);
            *lowered = lower::lower_unit(&files, &self.order);
            let fresh = std::mem::take(&mut lowered.diags);
            lowering_errors = fresh.iter().map(|d| error_spans(d.iter())).collect();
            for (seen, now) in reported.iter_mut().zip(fresh) {
                for d in now {
                    if d.severity() == Severity::Error
                        && !seen.iter().any(|s| s.span == d.span && s.code == d.code)
                    {
                        seen.push(d);
                    }
                }
            }
        }
        false
    }

    /// File `i`'s `import` declarations, in item order.
    fn decls(&self, i: usize) -> impl Iterator<Item = &crate::ast::ImportDecl> {
        self.files[i].ast.items.iter().filter_map(|it| match it {
            crate::ast::Item::Import(d) => Some(d),
            _ => None,
        })
    }

    /// What file `i`'s imports have to say: not loaded (info), unreadable, on a cycle, or
    /// loading a file with errors.
    fn import_diags(&self, i: usize, has_errors: &[bool], out: &mut Vec<Diagnostic>) {
        let f = &self.files[i];
        let ast = &f.ast;
        for (d, edge) in self.decls(i).zip(&f.edges) {
            let module: Vec<&str> = ast.names[d.module].iter().map(|n| ast.sym(n.sym)).collect();
            let names: Vec<String> = ast.names[d.names]
                .iter()
                .map(|n| format!("`{}`", ast.sym(n.sym)))
                .collect();
            let uses = if names.is_empty() {
                "nothing is brought in".to_string()
            } else {
                format!("calling {} fails at run time", names.join(", "))
            };
            let diag = match edge {
                // The parser already said what is wrong with it.
                Edge::NoModule if d.malformed => continue,
                // `import fs`: a standard-library namespace, built in (`crate::stdlib`).
                Edge::NoModule
                    if d.module.is_empty()
                        && ast.names[d.names].len() == 1
                        && crate::stdlib::ROOTS.contains(&ast.sym(ast.names[d.names][0].sym)) =>
                {
                    continue;
                }
                Edge::NoModule => Diagnostic::new(
                    Code::ImportNotLoaded,
                    d.span,
                    "this import names no module, so no file is loaded",
                )
                .with_help(format!(
                    "{uses}; `import a.b.{{c, d}}` imports `c` and `d` from `a/b.vox`"
                )),
                Edge::NotFound(looked) if looked.is_empty() => Diagnostic::new(
                    Code::ImportNotLoaded,
                    d.span,
                    format!(
                        "`{}` is not loaded when checking source text",
                        module.join(".")
                    ),
                )
                .with_help(format!(
                    "{uses}; check the file on disk to load its imports"
                )),
                Edge::NotFound(looked) => Diagnostic::new(
                    Code::ImportNotLoaded,
                    d.span,
                    format!(
                        "`{}` is not a .vox file here, so it is not loaded",
                        module.join(".")
                    ),
                )
                .with_help(format!("{uses}; looked for {}", looked.join(" and "))),
                Edge::Refused(why) => Diagnostic::new(
                    Code::ImportUnreadable,
                    d.span,
                    format!("cannot load `{}`: {why}", module.join(".")),
                ),
                Edge::Cycle(chain) => {
                    Diagnostic::new(Code::ImportCycle, d.span, format!("import cycle: {chain}"))
                        .with_help("move what the files share into a file that imports neither")
                }
                Edge::File(j) if has_errors[*j] => {
                    let dep = &self.files[*j];
                    let errors: Vec<&Diagnostic> = dep
                        .diags
                        .iter()
                        .filter(|d| d.severity() == Severity::Error)
                        .collect();
                    let first = errors
                        .first()
                        .map(|e| {
                            let (line, col) = dep.source.line_col(e.span.start);
                            format!(
                                "; the first: {}:{line}:{col}: {}",
                                dep.source.name, e.message
                            )
                        })
                        .unwrap_or_default();
                    Diagnostic::new(
                        Code::ImportHasErrors,
                        d.span,
                        format!("`{}` has {} error(s){first}", dep.source.name, errors.len()),
                    )
                    .with_help(format!("run `vox check {}`", dep.source.name))
                }
                Edge::File(_) => continue,
            };
            out.push(diag);
        }
    }

    /// The root's imports, for the HIR summary.
    fn import_infos(&self) -> Vec<ImportInfo> {
        let ast = &self.files[0].ast;
        self.decls(0)
            .zip(&self.files[0].edges)
            .map(|(d, edge)| ImportInfo {
                module: ast.names[d.module]
                    .iter()
                    .map(|n| ast.sym(n.sym))
                    .collect::<Vec<_>>()
                    .join("."),
                file: match edge {
                    Edge::File(j) => Some(self.files[*j].source.name.clone()),
                    _ => None,
                },
                names: ast.names[d.names]
                    .iter()
                    .map(|n| ast.sym(n.sym).to_string())
                    .collect(),
            })
            .collect()
    }
}

impl Analysis {
    /// The syntax tree, for tools that work on syntax (a formatter, an outline).
    pub fn ast(&self) -> &crate::ast::File {
        &self.ast
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|d| d.severity() == Severity::Error)
    }

    /// rustc-style text of all diagnostics.
    pub fn render(&self) -> String {
        diag::render(&self.source, &self.diagnostics)
    }

    /// Diagnostics flattened for JSON.
    pub fn diagnostics_json(&self) -> Vec<DiagnosticJson> {
        diag::to_json(&self.source, &self.diagnostics)
    }

    /// The module, or the errors that prevent running it.
    pub fn into_module(self) -> Result<Module, CompileError> {
        if self.has_errors() {
            return Err(CompileError {
                file: self.source,
                diagnostics: self.diagnostics,
            });
        }
        self.into_partial_module()
    }

    /// The module made of the declarations that have no error: each declaration with an error
    /// is left out (using it fails at run time), so one mistake costs only the declaration it
    /// is in. Its [`Module::diagnostics`] keep every error. Fails only when the errors could
    /// not be confined to declarations.
    pub fn into_partial_module(self) -> Result<Module, CompileError> {
        if !self.runnable {
            return Err(CompileError {
                file: self.source,
                diagnostics: self.diagnostics,
            });
        }
        Ok(Module {
            source: self.source,
            diagnostics: self.diagnostics,
            program: self.program,
            imported: self.imported,
            imports: self.imports,
        })
    }
}

/// A file that cannot be run because it has errors.
#[derive(Debug, thiserror::Error)]
#[error("{} has {} error(s)", file.name, diagnostics.iter().filter(|d| d.severity() == Severity::Error).count())]
pub struct CompileError {
    /// The source.
    pub file: SourceFile,
    /// All its diagnostics (errors and others).
    pub diagnostics: Vec<Diagnostic>,
}

impl CompileError {
    /// rustc-style text.
    pub fn render(&self) -> String {
        diag::render(&self.file, &self.diagnostics)
    }
}

/// Options for one call.
#[derive(Clone, Copy, Default)]
pub struct CallOptions<'a> {
    /// Limits.
    pub budget: Budget,
    /// Receives each `print`ed line as it happens (they are also returned in the output).
    pub log: Option<LogSink<'a>>,
    /// Receives `log(level, message)` and `progress(done, total, message)`.
    pub events: Option<&'a dyn crate::interp::ToolEvents>,
    /// When it turns true the call stops within 1,024 steps with [`BudgetKind::Cancelled`].
    pub cancel: Option<&'a std::sync::atomic::AtomicBool>,
    /// The workspace whose files `fs.read`, `fs.exists`, `fs.list_dir` and `fs.glob` see
    /// (with the loader's confinement); without one they fail at run time.
    pub workspace: Option<&'a crate::import::FsLoader>,
}

/// A resource's contents: `text`, or `blob` (base64), of `mime_type`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResourceRead {
    /// `text/plain` for a `str`, else the content block's.
    pub mime_type: String,
    /// The text, for a text resource.
    pub text: Option<String>,
    /// Base64 bytes, for a `content.blob`.
    pub blob: Option<String>,
}

/// A successful call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallOutput {
    /// The result as JSON (`Ok(v)` unwrapped); with `content`, the array of MCP content blocks.
    pub value: J,
    /// The tool returned content blocks (`content.*`: one, or a non-empty list of them): its
    /// MCP answer is those blocks, not a JSON value.
    pub content: bool,
    /// Lines printed with `print`.
    pub logs: Vec<String>,
    /// Steps used.
    pub steps: u64,
}

/// Why a call produced no result.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CallError {
    /// No function of that name.
    #[error("no function named `{0}`")]
    UnknownFunction(String),
    /// Bad arguments: missing, unknown, or of the wrong type.
    #[error("invalid input: {message}")]
    Input {
        /// The parameter concerned, when there is one.
        param: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// The function returned `Error(e)`.
    #[error("{message}")]
    Tool {
        /// `e`, formatted.
        message: String,
        /// Lines printed before the error.
        logs: Vec<String>,
    },
    /// A run-time error.
    #[error("runtime error at {file}:{line}:{column}: {message}")]
    Runtime {
        /// What happened.
        message: String,
        /// The file it happened in (an imported file's, when it happened there).
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Lines printed before the error.
        logs: Vec<String>,
    },
    /// A budget ran out.
    #[error("{kind} at {file}:{line}:{column}")]
    Budget {
        /// Which.
        kind: BudgetKind,
        /// The file that was running.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// The result has no JSON form (a function, a NaN).
    #[error("the result cannot be returned as JSON: {0}")]
    Output(String),
    /// The resource URI is not declared in this module.
    #[error("no resource with URI `{0}`")]
    UnknownResource(String),
}

impl CallError {
    /// Stable snake_case code for transports.
    pub fn code(&self) -> &'static str {
        match self {
            CallError::UnknownFunction(_) => "unknown_function",
            CallError::Input { .. } => "invalid_input",
            CallError::Tool { .. } => "tool_error",
            CallError::Runtime { .. } => "runtime_error",
            CallError::Budget { .. } => "budget_exceeded",
            CallError::Output(_) => "invalid_output",
            CallError::UnknownResource(_) => "unknown_resource",
        }
    }

    /// Whether the caller's arguments were at fault (as opposed to the tool).
    pub fn is_input_error(&self) -> bool {
        matches!(
            self,
            CallError::Input { .. } | CallError::UnknownFunction(_)
        )
    }
}

/// The result of one `@test` function.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TestOutcome {
    /// Function name.
    pub name: String,
    /// Label from `@test "label"`.
    pub label: Option<String>,
    /// Whether it passed.
    pub passed: bool,
    /// Why it failed, or why it was skipped.
    pub message: Option<String>,
    /// Not run: it uses something the interpreter does not run (`message` says what).
    pub skipped: bool,
    /// 1-based line of the test.
    pub line: usize,
    /// Lines printed.
    pub logs: Vec<String>,
    /// Run time in microseconds.
    pub micros: u64,
}

/// A compiled file: immutable, `Send + Sync`, shareable in an `Arc` across threads.
#[derive(Debug)]
pub struct Module {
    source: SourceFile,
    diagnostics: Vec<Diagnostic>,
    program: Program,
    imported: Vec<ImportedFile>,
    imports: Vec<ImportInfo>,
}

impl Module {
    /// Compiles source bytes on their own (imports are not loaded); fails with the
    /// diagnostics when any is an error.
    pub fn compile(name: &str, bytes: &[u8]) -> Result<Module, CompileError> {
        analyze(name, bytes).into_module()
    }

    /// Compiles source bytes and the `.vox` files they import, found through `loader`.
    pub fn compile_with(
        name: &str,
        bytes: &[u8],
        loader: &dyn ModuleLoader,
    ) -> Result<Module, CompileError> {
        analyze_with(name, bytes, loader).into_module()
    }

    /// Like [`Module::compile_with`], leaving out the declarations that have errors
    /// ([`Analysis::into_partial_module`]): what workspace federation serves.
    pub fn compile_partial_with(
        name: &str,
        bytes: &[u8],
        loader: &dyn ModuleLoader,
    ) -> Result<Module, CompileError> {
        analyze_with(name, bytes, loader).into_partial_module()
    }

    /// The file's `import` declarations and what each loaded.
    pub fn imports(&self) -> &[ImportInfo] {
        &self.imports
    }

    /// The files loaded through imports (for a cache that must notice when one changes).
    pub fn imported_files(&self) -> &[ImportedFile] {
        &self.imported
    }

    /// The file and 1-based line and column of a program span.
    fn locate(&self, offset: u32) -> (&str, usize, usize) {
        let file = self
            .imported
            .iter()
            .rev()
            .find(|f| f.base > 0 && f.base <= offset)
            .map(|f| (&f.source, f.base))
            .unwrap_or((&self.source, 0));
        let (line, col) = file.0.line_col(offset - file.1);
        (file.0.name.as_str(), line, col)
    }

    /// The source.
    pub fn source(&self) -> &SourceFile {
        &self.source
    }

    /// Warnings and infos from compilation.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The lowered program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The file's own top-level functions in source order (not those of imported files).
    pub fn functions(&self) -> &[FnSig] {
        root_functions(&self.program)
    }

    /// A function by name.
    pub fn function(&self, name: &str) -> Option<&FnSig> {
        self.functions().iter().find(|f| f.name == name)
    }

    /// `@tool` / `@mcp.tool` functions.
    pub fn tools(&self) -> impl Iterator<Item = &FnSig> {
        self.functions()
            .iter()
            .filter(|f| matches!(f.role, FnRole::Tool { .. }))
    }

    /// `@mcp.resource` functions.
    pub fn resources(&self) -> impl Iterator<Item = &FnSig> {
        self.functions()
            .iter()
            .filter(|f| matches!(f.role, FnRole::Resource { .. }))
    }

    /// `@mcp.prompt` functions.
    pub fn prompts(&self) -> impl Iterator<Item = &FnSig> {
        self.functions()
            .iter()
            .filter(|f| matches!(f.role, FnRole::Prompt { .. }))
    }

    /// Gets `@mcp.prompt` `name` with its (string) arguments: its MCP messages. A `str` is one
    /// user message; a content block (`content.*`) or a list of them, one user message each; a
    /// list of strings, one each.
    pub fn get_prompt(
        &self,
        name: &str,
        args: &J,
        opts: &CallOptions<'_>,
    ) -> Result<Vec<J>, CallError> {
        if !self.prompts().any(|f| f.name == name) {
            return Err(CallError::UnknownFunction(name.to_string()));
        }
        let out = self.call_json(name, args, opts)?;
        let user = |content: J| serde_json::json!({"role": "user", "content": content});
        let text = |s: &str| serde_json::json!({"type": "text", "text": s});
        match out.value {
            J::String(s) => Ok(vec![user(text(&s))]),
            J::Array(items) if out.content => Ok(items.into_iter().map(user).collect()),
            J::Array(items) if !items.is_empty() && items.iter().all(J::is_string) => Ok(items
                .iter()
                .map(|s| user(text(s.as_str().unwrap_or_default())))
                .collect()),
            other => Err(CallError::Output(format!(
                "prompt `{name}` returned {other} instead of a string, content blocks or a list of strings"
            ))),
        }
    }

    /// Suggestions for argument `argument` starting from `value`: what this module's
    /// `@complete("argument")` function returns for it (none without one).
    pub fn complete(
        &self,
        function: &str,
        argument: &str,
        value: &str,
        opts: &CallOptions<'_>,
    ) -> Result<Vec<String>, CallError> {
        let Some(f) = self
            .functions()
            .iter()
            .find(|f| matches!(&f.role, FnRole::Complete { argument: a } if a == argument))
        else {
            return Ok(self.enum_completions(function, argument, value));
        };
        let args = match f.params.first() {
            Some(p) => serde_json::json!({ p.name.clone(): value }),
            None => J::Null,
        };
        let out = self.call_json(&f.name.clone(), &args, opts)?;
        match out.value {
            J::Array(items) if items.iter().all(J::is_string) => Ok(items
                .into_iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()),
            other => Err(CallError::Output(format!(
                "`{}` returned {other} instead of a list of strings",
                f.name
            ))),
        }
    }

    /// The variants starting with `value` when parameter `argument` of `function` is an enum
    /// (an ADT whose variants have no fields, or an `Option` of one).
    fn enum_completions(&self, function: &str, argument: &str, value: &str) -> Vec<String> {
        let ty = self
            .function(function)
            .and_then(|f| f.params.iter().find(|p| p.name == argument))
            .map(|p| match &p.ty {
                crate::hir::Ty::Option { of } => of.as_ref(),
                t => t,
            });
        let Some(crate::hir::Ty::User { index, .. }) = ty else {
            return Vec::new();
        };
        json::enum_names(&self.program.types[*index as usize].shape)
            .unwrap_or_default()
            .into_iter()
            .filter(|n| n.starts_with(value))
            .map(str::to_owned)
            .collect()
    }

    /// `@test` functions.
    pub fn tests(&self) -> impl Iterator<Item = &FnSig> {
        self.functions()
            .iter()
            .filter(|f| matches!(f.role, FnRole::Test { .. }))
    }

    /// The JSON input schema of a function.
    pub fn input_schema(&self, name: &str) -> Option<J> {
        self.function(name)
            .map(|f| json::input_schema(&self.program, f))
    }

    /// Calls a function with a JSON object of arguments (`null` means none).
    pub fn call_json(
        &self,
        name: &str,
        args: &J,
        opts: &CallOptions<'_>,
    ) -> Result<CallOutput, CallError> {
        let (id, sig) = self
            .functions()
            .iter()
            .enumerate()
            .find(|(_, f)| f.name == name)
            .map(|(i, f)| (i + self.program.root.functions as usize, f))
            .ok_or_else(|| CallError::UnknownFunction(name.to_string()))?;
        let empty = serde_json::Map::new();
        let obj = match args {
            J::Null => &empty,
            J::Object(m) => m,
            _ => {
                return Err(CallError::Input {
                    param: None,
                    message: "arguments must be a JSON object".to_string(),
                });
            }
        };
        if let Some(extra) = obj
            .keys()
            .find(|k| !sig.params.iter().any(|p| &p.name == *k))
        {
            return Err(CallError::Input {
                param: Some(extra.clone()),
                message: format!("unknown argument `{extra}`"),
            });
        }
        let mut values = Vec::with_capacity(sig.params.len());
        for p in &sig.params {
            match obj.get(&p.name) {
                // `null` for a parameter with a default is the same as leaving it out.
                Some(J::Null)
                    if p.has_default && !matches!(p.ty, crate::hir::Ty::Option { .. }) =>
                {
                    values.push(None);
                }
                Some(j) => {
                    let v = json::json_to_typed(&self.program, j, &p.ty, &p.name).map_err(
                        |message| CallError::Input {
                            param: Some(p.name.clone()),
                            message,
                        },
                    )?;
                    values.push(Some(v));
                }
                None if p.has_default => values.push(None),
                // A left-out `Option` parameter without a default is `None`.
                None if matches!(p.ty, crate::hir::Ty::Option { .. }) => {
                    values.push(Some(Value::None));
                }
                None => {
                    return Err(CallError::Input {
                        param: Some(p.name.clone()),
                        message: format!("missing required argument `{}`", p.name),
                    });
                }
            }
        }
        self.run(id as u32, values, opts)
    }

    fn run(
        &self,
        id: u32,
        args: Vec<Option<Value>>,
        opts: &CallOptions<'_>,
    ) -> Result<CallOutput, CallError> {
        let mut interp = Interp::new(
            &self.program,
            opts.budget,
            opts.log,
            opts.events,
            opts.cancel,
            opts.workspace,
        );
        let r = match interp.call_fn_optional(id, args) {
            Err(Flow::Return) => Ok(interp.ret_val.take().unwrap_or(Value::Unit)),
            other => other,
        };
        let logs = std::mem::take(&mut interp.logs);
        match r {
            Ok(v) => {
                if let Value::Adt(a) = &v
                    && a.ctor == crate::hir::Ctor::Error
                {
                    let message = match &a.fields[0] {
                        Value::Str(m) => m.to_string(),
                        other => interp.display(other),
                    };
                    return Err(CallError::Tool { message, logs });
                }
                // Values share structure, so a small program can return a result whose JSON is
                // far larger than anything it allocated; that is refused, not built.
                let cap = opts.budget.max_memory;
                if crate::interp::size_hint(&v, cap) > cap {
                    return Err(CallError::Output(format!(
                        "the result is larger than the {cap}-byte memory budget"
                    )));
                }
                let content = match &v {
                    Value::Content(_) => true,
                    Value::List(l) => {
                        !l.items.is_empty()
                            && l.items.iter().all(|x| matches!(x, Value::Content(_)))
                    }
                    _ => false,
                };
                let mut value =
                    json::value_to_json(&self.program, &v).map_err(CallError::Output)?;
                if content && !value.is_array() {
                    value = J::Array(vec![value]);
                }
                if content
                    && value
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|b| b["type"] == crate::content::STRUCTURED)
                        .count()
                        > 1
                {
                    return Err(CallError::Output(
                        "the result has more than one content.data block (a call has one structured result)".into(),
                    ));
                }
                Ok(CallOutput {
                    value,
                    content,
                    logs,
                    steps: interp.steps,
                })
            }
            Err(Flow::Break | Flow::Continue | Flow::Return) => Ok(CallOutput {
                value: J::Null,
                content: false,
                logs,
                steps: interp.steps,
            }),
            Err(Flow::Error) => {
                let e = crate::interp::take_error();
                let (file, line, column) = self.locate(e.span().start);
                let file = file.to_string();
                Err(match e {
                    RunError::Runtime { message, .. } => CallError::Runtime {
                        message,
                        file,
                        line,
                        column,
                        logs,
                    },
                    RunError::Budget { kind, .. } => CallError::Budget {
                        kind,
                        file,
                        line,
                        column,
                    },
                })
            }
        }
    }

    /// Reads a resource by URI: calls its function and returns the string.
    /// Reads `@mcp.resource` `uri`: a `str` is `text/plain` text; `content.resource(uri, text,
    /// mime)` is text of that type and `content.blob(uri, data, mime)` base64 bytes (either
    /// for this resource's URI).
    pub fn read_resource(
        &self,
        uri: &str,
        opts: &CallOptions<'_>,
    ) -> Result<ResourceRead, CallError> {
        // A plain resource of that URI, else the first template it matches (its variables
        // become the function's arguments).
        let exact = self
            .resources()
            .find(|f| matches!(&f.role, FnRole::Resource { uri: u, .. } if u == uri));
        let (f, args) = match exact {
            Some(f) => (f, J::Null),
            None => self
                .resources()
                .find_map(|f| match &f.role {
                    FnRole::Resource { uri: t, .. } if crate::template::is_template(t) => {
                        let vars = crate::template::matches(t, uri)?;
                        let args: serde_json::Map<String, J> =
                            vars.into_iter().map(|(k, v)| (k, J::String(v))).collect();
                        Some((f, J::Object(args)))
                    }
                    _ => None,
                })
                .ok_or_else(|| CallError::UnknownResource(uri.to_string()))?,
        };
        let out = self.call_json(&f.name.clone(), &args, opts)?;
        let block = match (out.content, &out.value) {
            (true, J::Array(b)) if b.len() == 1 => &b[0]["resource"],
            (false, J::String(s)) => {
                return Ok(ResourceRead {
                    mime_type: "text/plain".into(),
                    text: Some(s.clone()),
                    blob: None,
                });
            }
            (_, other) => {
                return Err(CallError::Output(format!(
                    "resource `{uri}` returned {other} instead of a string, a content.resource or a content.blob"
                )));
            }
        };
        if block["uri"].as_str() != Some(uri) {
            return Err(CallError::Output(format!(
                "resource `{uri}` returned content for {} (give its own URI)",
                block["uri"]
            )));
        }
        let s = |k: &str| block[k].as_str().map(str::to_owned);
        Ok(ResourceRead {
            mime_type: s("mimeType").unwrap_or_else(|| "text/plain".into()),
            text: s("text"),
            blob: s("blob"),
        })
    }

    /// Runs every `@test` function, each under its own budget.
    pub fn run_tests(&self, opts: &CallOptions<'_>) -> Vec<TestOutcome> {
        let cancelled = || {
            opts.cancel
                .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
        };
        // Once cancelled, the remaining tests are not run.
        self.tests()
            .take_while(|_| !cancelled())
            .map(|t| {
                if let Some(why) = &t.not_executable {
                    return TestOutcome {
                        name: t.name.clone(),
                        label: None,
                        passed: false,
                        message: Some(why.clone()),
                        skipped: true,
                        line: t.line,
                        logs: Vec::new(),
                        micros: 0,
                    };
                }
                let start = Instant::now();
                let r = self.call_json(&t.name, &J::Null, opts);
                let micros = start.elapsed().as_micros() as u64;
                let label = match &t.role {
                    FnRole::Test { label } => label.clone(),
                    _ => None,
                };
                let (passed, message, logs) = match r {
                    Ok(out) => (true, None, out.logs),
                    Err(
                        CallError::Tool { message, logs }
                        | CallError::Runtime { message, logs, .. },
                    ) => (false, Some(message), logs),
                    Err(e) => (false, Some(e.to_string()), Vec::new()),
                };
                TestOutcome {
                    name: t.name.clone(),
                    label,
                    passed,
                    message,
                    skipped: false,
                    line: t.line,
                    logs,
                    micros,
                }
            })
            .collect()
    }

    /// The module's signatures, types, constants and skipped items as JSON (for
    /// `vox_compiler_introspect`).
    pub fn hir_json(&self) -> J {
        self.hir_summary().to_json()
    }

    /// The module's signatures, types, constants and skipped items.
    pub fn hir_summary(&self) -> HirSummary {
        summary(&self.program, &self.source, &self.imports)
    }
}

fn root_functions(p: &Program) -> &[FnSig] {
    &p.functions[p.root.functions as usize..]
}

/// A file's HIR as `vox_compiler_introspect` shows it. Signatures, types and constants hold
/// (recursive) HIR types, so they are given as their JSON forms.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct HirSummary {
    /// The file name.
    pub file: String,
    /// Top-level functions: name, role, params, ret, decorators, line and input_schema.
    pub functions: Vec<J>,
    /// Declared types: name and shape.
    pub types: Vec<J>,
    /// Constants: name and type.
    pub constants: Vec<J>,
    /// Items the file declares that the language skips (kind, name, line).
    pub opaque: Vec<J>,
    /// The file's imports.
    pub imports: Vec<ImportInfo>,
}

impl HirSummary {
    /// As JSON.
    pub fn to_json(&self) -> J {
        serde_json::to_value(self).unwrap_or(J::Null)
    }
}

fn to_json_each<T: Serialize>(items: &[T]) -> Vec<J> {
    items
        .iter()
        .map(|x| serde_json::to_value(x).unwrap_or(J::Null))
        .collect()
}

fn summary(p: &Program, source: &SourceFile, imports: &[ImportInfo]) -> HirSummary {
    let functions: Vec<J> = root_functions(p)
        .iter()
        .map(|f| {
            let mut v = serde_json::to_value(f).unwrap_or(J::Null);
            if let J::Object(o) = &mut v {
                o.insert("input_schema".into(), json::input_schema(p, f));
            }
            v
        })
        .collect();
    HirSummary {
        file: source.name.clone(),
        functions,
        types: to_json_each(&p.types[p.root.types as usize..]),
        constants: p.consts[p.root.consts as usize..]
            .iter()
            .map(
                |c| json!({"name": c.name, "type": serde_json::to_value(&c.ty).unwrap_or(J::Null)}),
            )
            .collect(),
        opaque: to_json_each(&p.opaque[p.root.opaque as usize..]),
        imports: imports.to_vec(),
    }
}

impl Analysis {
    /// The file's own top-level functions (present even when the file has errors).
    pub fn functions(&self) -> &[FnSig] {
        root_functions(&self.program)
    }

    /// HIR summary as JSON (available even when the file has errors).
    pub fn hir_json(&self) -> J {
        self.hir_summary().to_json()
    }

    /// HIR summary (available even when the file has errors).
    pub fn hir_summary(&self) -> HirSummary {
        summary(&self.program, &self.source, &self.imports)
    }
}
