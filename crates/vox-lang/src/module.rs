//! The compiled-module API: analyze or compile a source once, then call its functions with
//! JSON arguments under a budget, from any thread.

use crate::diag::{self, Code, Diagnostic, DiagnosticJson, Severity, SourceFile, Span};
use crate::hir::{FnRole, FnSig, Program};
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
}

/// Lexes, parses, lowers and checks a file. Never panics, whatever the bytes.
pub fn analyze(name: &str, bytes: &[u8]) -> Analysis {
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
        };
    }
    let (text, mut diagnostics) = decode_source(bytes);
    let source = SourceFile::new(name, text);
    let parsed = parser::parse(&source.text);
    diagnostics.extend(parsed.diags);
    let lowered = lower::lower(&parsed.file, &source);
    diagnostics.extend(lowered.diags);
    diagnostics.sort_by_key(|d| (d.span.start, d.span.end));
    Analysis {
        source,
        diagnostics,
        program: lowered.program,
        ast: parsed.file,
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
        Ok(Module {
            source: self.source,
            diagnostics: self.diagnostics,
            program: self.program,
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
}

/// A successful call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallOutput {
    /// The result as JSON (`Ok(v)` unwrapped).
    pub value: J,
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
    #[error("runtime error at {line}:{column}: {message}")]
    Runtime {
        /// What happened.
        message: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// Lines printed before the error.
        logs: Vec<String>,
    },
    /// A budget ran out.
    #[error("{kind} at {line}:{column}")]
    Budget {
        /// Which.
        kind: BudgetKind,
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
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TestOutcome {
    /// Function name.
    pub name: String,
    /// Label from `@test "label"`.
    pub label: Option<String>,
    /// Whether it passed.
    pub passed: bool,
    /// Why it failed.
    pub message: Option<String>,
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
}

impl Module {
    /// Compiles source bytes; fails with the diagnostics when any is an error.
    pub fn compile(name: &str, bytes: &[u8]) -> Result<Module, CompileError> {
        analyze(name, bytes).into_module()
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

    /// All top-level functions in source order.
    pub fn functions(&self) -> &[FnSig] {
        &self.program.functions
    }

    /// A function by name.
    pub fn function(&self, name: &str) -> Option<&FnSig> {
        self.program.functions.iter().find(|f| f.name == name)
    }

    /// `@tool` / `@mcp.tool` functions.
    pub fn tools(&self) -> impl Iterator<Item = &FnSig> {
        self.program
            .functions
            .iter()
            .filter(|f| matches!(f.role, FnRole::Tool { .. }))
    }

    /// `@mcp.resource` functions.
    pub fn resources(&self) -> impl Iterator<Item = &FnSig> {
        self.program
            .functions
            .iter()
            .filter(|f| matches!(f.role, FnRole::Resource { .. }))
    }

    /// `@test` functions.
    pub fn tests(&self) -> impl Iterator<Item = &FnSig> {
        self.program
            .functions
            .iter()
            .filter(|f| matches!(f.role, FnRole::Test { .. }))
    }

    /// The JSON input schema of a function.
    pub fn input_schema(&self, name: &str) -> Option<J> {
        self.function(name).map(json::input_schema)
    }

    /// Calls a function with a JSON object of arguments (`null` means none).
    pub fn call_json(
        &self,
        name: &str,
        args: &J,
        opts: &CallOptions<'_>,
    ) -> Result<CallOutput, CallError> {
        let (id, sig) = self
            .program
            .functions
            .iter()
            .enumerate()
            .find(|(_, f)| f.name == name)
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
        let mut interp = Interp::new(&self.program, opts.budget, opts.log);
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
                let value = json::value_to_json(&self.program, &v).map_err(CallError::Output)?;
                Ok(CallOutput {
                    value,
                    logs,
                    steps: interp.steps,
                })
            }
            Err(Flow::Break | Flow::Continue | Flow::Return) => Ok(CallOutput {
                value: J::Null,
                logs,
                steps: interp.steps,
            }),
            Err(Flow::Error) => {
                let e = crate::interp::take_error();
                let (line, column) = self.source.line_col(e.span().start);
                Err(match e {
                    RunError::Runtime { message, .. } => CallError::Runtime {
                        message,
                        line,
                        column,
                        logs,
                    },
                    RunError::Budget { kind, .. } => CallError::Budget { kind, line, column },
                })
            }
        }
    }

    /// Reads a resource by URI: calls its function and returns the string.
    pub fn read_resource(&self, uri: &str, opts: &CallOptions<'_>) -> Result<String, CallError> {
        let f = self
            .resources()
            .find(|f| matches!(&f.role, FnRole::Resource { uri: u, .. } if u == uri))
            .ok_or_else(|| CallError::UnknownResource(uri.to_string()))?;
        let out = self.call_json(&f.name.clone(), &J::Null, opts)?;
        match out.value {
            J::String(s) => Ok(s),
            other => Err(CallError::Output(format!(
                "resource `{uri}` returned {other} instead of a string"
            ))),
        }
    }

    /// Runs every `@test` function, each under its own budget.
    pub fn run_tests(&self, opts: &CallOptions<'_>) -> Vec<TestOutcome> {
        self.tests()
            .map(|t| {
                let start = Instant::now();
                let r = self.call_json(&t.name, &J::Null, opts);
                let micros = start.elapsed().as_micros() as u64;
                let label = match &t.role {
                    FnRole::Test { label } => label.clone(),
                    _ => None,
                };
                let (passed, message, logs) = match r {
                    Ok(out) => (true, None, out.logs),
                    Err(CallError::Tool { message, logs })
                    | Err(CallError::Runtime { message, logs, .. }) => (false, Some(message), logs),
                    Err(e) => (false, Some(e.to_string()), Vec::new()),
                };
                TestOutcome {
                    name: t.name.clone(),
                    label,
                    passed,
                    message,
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
        program_json(&self.program, &self.source)
    }
}

/// HIR summary of a program as JSON.
pub fn program_json(p: &Program, source: &SourceFile) -> J {
    let functions: Vec<J> = p
        .functions
        .iter()
        .map(|f| {
            let mut v = serde_json::to_value(f).unwrap_or(J::Null);
            if let J::Object(o) = &mut v {
                o.insert("input_schema".into(), json::input_schema(f));
            }
            v
        })
        .collect();
    json!({
        "file": source.name,
        "functions": functions,
        "types": serde_json::to_value(&p.types).unwrap_or(J::Null),
        "constants": p.consts.iter().map(|c| json!({"name": c.name, "type": serde_json::to_value(&c.ty).unwrap_or(J::Null)})).collect::<Vec<_>>(),
        "opaque": serde_json::to_value(&p.opaque).unwrap_or(J::Null),
        "imports": p.imports,
    })
}

impl Analysis {
    /// Top-level functions (present even when the file has errors).
    pub fn functions(&self) -> &[FnSig] {
        &self.program.functions
    }

    /// HIR summary as JSON (available even when the file has errors).
    pub fn hir_json(&self) -> J {
        program_json(&self.program, &self.source)
    }
}
