//! # vox-lang: the language workspace tools are written in
//!
//! Lexer (`logos`), hand-written recursive-descent/Pratt parser with error recovery, AST → HIR
//! lowering with coded diagnostics, a budgeted tree-walking interpreter, and Value ↔ JSON with
//! input schemas, as fixed by `spec/vox-language-subset.md`.
//!
//! ## Checking a file
//! ```
//! let a = vox_lang::analyze("greet.vox", b"@tool \"greet: say hi\"\nfn greet(name: str) to str { \"Hello {name}\" }\n");
//! assert!(!a.has_errors());
//! println!("{}", a.render()); // rustc-style text; `a.diagnostics_json()` for JSON
//! ```
//!
//! ## Compiling once, calling many times
//! [`Module::compile`] turns source bytes into an immutable [`Module`] (`Send + Sync`, share it
//! in an `Arc`). [`Module::tools`], [`Module::resources`] and [`Module::tests`] list the
//! decorated functions ([`hir::FnSig`]: parameters with types and defaults, return type, role
//! with description / URI / label); [`Module::input_schema`] gives a function's JSON Schema.
//! [`Module::call_json`] binds a JSON object to the parameters (defaults fill gaps; a missing,
//! unknown or ill-typed argument is [`CallError::Input`] naming the parameter), runs the call
//! under a [`Budget`] (steps, call depth and native stack, wall clock, allocation) and returns
//! JSON, or [`CallError::Tool`] when the function returned `Error(e)`.
//! ```
//! use vox_lang::{CallOptions, Module};
//! let m = Module::compile("t.vox", b"@tool\nfn add(a: int, b: int = 1) to int { a + b }\n").unwrap();
//! let out = m.call_json("add", &serde_json::json!({"a": 41}), &CallOptions::default()).unwrap();
//! assert_eq!(out.value, serde_json::json!(42));
//! ```
//! Each call gets its own interpreter state; `print` goes to [`CallOutput::logs`] (and to an
//! optional sink), never to stdout.
//!
//! ## CLI and MCP tools
//! [`cli`] holds `check`, `run` and `test` as plain functions writing to given streams and
//! returning an exit code; [`tools`] holds the bodies of the `vox_check`,
//! `vox_validate_source`, `vox_test`, `vox_grammar` and `vox_compiler_introspect` tools.
#![warn(missing_docs)]

pub mod ask;
pub mod ast;
mod builtins;
pub mod cli;
pub mod content;
pub mod decimal;
pub mod diag;
pub mod fmt;
pub mod formats;
pub mod hir;
pub mod import;
mod interp;
pub mod json;
pub mod lexer;
mod lower;
mod module;
pub mod parser;
pub mod stdlib;
pub mod template;
pub mod tools;
pub mod value;

pub use ask::{AskFailure, AskKind};
pub use builtins::{rfc3339, uuid_v4};
pub use diag::{Code, Diagnostic, DiagnosticJson, Severity, SourceFile, Span};
pub use import::{FsLoader, MemoryLoader, ModuleLoader, NoImports};
pub use interp::{Budget, BudgetKind, LOG_LEVELS, LogSink, RunError, ToolEvents};
pub use module::{
    Analysis, CallError, CallOptions, CallOutput, CompileError, HirSummary, ImportInfo,
    ImportedFile, MAX_SOURCE_BYTES, Module, ResourceRead, TestOutcome, analyze, analyze_with,
    decode_source,
};
