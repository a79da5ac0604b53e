//! Coded diagnostics and their rustc-style rendering.
//!
//! Codes are stable strings (`vox/<area>/<what>`): tools and tests match on them, so a code is
//! never renamed, only added.

use serde::Serialize;
use std::fmt::Write as _;

/// A half-open byte range into the (UTF-8) source text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// A span from byte offsets.
    pub fn new(start: usize, end: usize) -> Self {
        // Sources are capped well below 4 GiB by `MAX_SOURCE_BYTES`, so the casts cannot wrap.
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// How bad a diagnostic is. `Error` makes `vox check` exit 1.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The file cannot be run as written.
    Error,
    /// Accepted, but should change.
    Warning,
    /// For information only.
    Info,
}

impl Severity {
    /// The lowercase word used in rendering and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

macro_rules! codes {
    ($($variant:ident => $text:literal, $sev:ident;)*) => {
        /// Every diagnostic code this crate emits.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Code { $(#[doc = $text] $variant,)* }

        impl Code {
            /// The stable code string.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $text,)* }
            }
            /// The severity this code is always reported with.
            pub fn severity(self) -> Severity {
                match self { $(Code::$variant => Severity::$sev,)* }
            }
            /// All codes, for documentation and the grammar tool.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];
        }
    };
}

codes! {
    InvalidUtf8 => "vox/lex/invalid-utf8", Error;
    UnexpectedChar => "vox/lex/unexpected-char", Error;
    UnterminatedString => "vox/lex/unterminated-string", Error;
    InvalidEscape => "vox/lex/invalid-escape", Error;
    NumberOutOfRange => "vox/lex/number-out-of-range", Error;
    SourceTooLarge => "vox/lex/source-too-large", Error;
    UnexpectedToken => "vox/syntax/unexpected-token", Error;
    NestingTooDeep => "vox/syntax/nesting-too-deep", Error;
    InvalidAssignTarget => "vox/syntax/invalid-assign-target", Error;
    ArrowReturnDeprecated => "vox/syntax/arrow-return-deprecated", Warning;
    RetDeprecated => "vox/syntax/ret-deprecated", Warning;
    ArrowMatchArm => "vox/syntax/arrow-match-arm", Error;
    ImportForm => "vox/syntax/import-form", Warning;
    McpToolDeprecated => "vox/decorator/mcp-tool-deprecated", Warning;
    UnknownDecorator => "vox/decorator/unknown", Warning;
    DecoratorArgs => "vox/decorator/invalid-arguments", Error;
    ConflictingDecorators => "vox/decorator/conflicting", Error;
    NotExecutable => "vox/interp/not-executable", Info;
    UnknownName => "vox/name/unknown", Error;
    UnknownType => "vox/name/unknown-type", Warning;
    ShadowsBuiltin => "vox/name/shadows-builtin", Warning;
    TypeArguments => "vox/type/arguments", Error;
    Duplicate => "vox/name/duplicate", Error;
    Arity => "vox/call/arity", Error;
    ResourceParams => "vox/resource/has-parameters", Error;
    ResourceReturn => "vox/resource/return-type", Error;
    TestParams => "vox/test/has-parameters", Error;
    ImmutableAssign => "vox/check/immutable-assign", Error;
    MisplacedControl => "vox/check/misplaced-control-flow", Error;
    ImportNotLoaded => "vox/import/not-loaded", Info;
    ImportUnknownName => "vox/import/unknown-name", Error;
    ImportCycle => "vox/import/cycle", Error;
    ImportUnreadable => "vox/import/unreadable", Error;
    ImportHasErrors => "vox/import/module-has-errors", Error;
}

/// One finding about a source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Stable code.
    pub code: Code,
    /// One-line description of what is wrong.
    pub message: String,
    /// Where.
    pub span: Span,
    /// How to fix it, when there is something to say.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic without help text.
    pub fn new(code: Code, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            message: message.into(),
            span,
            help: None,
        }
    }

    /// Adds help text.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// The severity, fixed by the code.
    pub fn severity(&self) -> Severity {
        self.code.severity()
    }
}

/// Source text with a line index, for turning byte offsets into line/column.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Name shown in diagnostics (usually the path).
    pub name: String,
    /// The text (invalid UTF-8 already replaced, see [`crate::decode_source`]).
    pub text: String,
    line_starts: Vec<u32>,
}

impl SourceFile {
    /// Indexes `text`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        let mut line_starts = Vec::with_capacity(text.len() / 32 + 1);
        line_starts.push(0u32);
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i as u32 + 1),
        );
        SourceFile {
            name: name.into(),
            text,
            line_starts,
        }
    }

    /// 1-based line of a byte offset.
    pub fn line(&self, offset: u32) -> usize {
        let offset = offset.min(self.text.len() as u32);
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    /// 1-based line and 1-based column (in characters) of a byte offset.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        let offset = offset.min(self.text.len() as u32);
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.line_starts[line] as usize;
        let end = floor_char_boundary(&self.text, offset as usize);
        let col = self.text[start..end].chars().count() + 1;
        (line + 1, col)
    }

    /// The text of a 1-based line, without its newline.
    pub fn line_text(&self, line: usize) -> &str {
        let start = self.line_starts[line - 1] as usize;
        let end = self
            .line_starts
            .get(line)
            .map(|&e| e as usize)
            .unwrap_or(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Renders diagnostics the way rustc does: header, `-->` location, source line, carets, help.
pub fn render(file: &SourceFile, diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        render_one(file, d, &mut out);
    }
    out
}

fn render_one(file: &SourceFile, d: &Diagnostic, out: &mut String) {
    let (line, col) = file.line_col(d.span.start);
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    let _ = writeln!(
        out,
        "{}[{}]: {}",
        d.severity().as_str(),
        d.code.as_str(),
        d.message
    );
    let _ = writeln!(out, "{pad}--> {}:{line}:{col}", file.name);
    let _ = writeln!(out, "{pad} |");
    let text = file.line_text(line);
    // Tabs would misalign the carets, so they are shown as single spaces.
    let shown: String = text
        .chars()
        .map(|c| if c == '\t' { ' ' } else { c })
        .collect();
    let _ = writeln!(out, "{line} | {shown}");
    let (end_line, end_col) = file.line_col(d.span.end);
    let line_chars = text.chars().count();
    let width = if end_line == line {
        end_col.saturating_sub(col).max(1)
    } else {
        (line_chars + 1).saturating_sub(col).max(1)
    };
    let _ = writeln!(out, "{pad} | {}{}", " ".repeat(col - 1), "^".repeat(width));
    if let Some(help) = &d.help {
        let _ = writeln!(out, "{pad} = help: {help}");
    }
    out.push('\n');
}

/// A diagnostic flattened for JSON output (`vox check --json`, the `vox_check` tool).
#[derive(Clone, Debug, Serialize, PartialEq, Eq, schemars::JsonSchema)]
pub struct DiagnosticJson {
    /// Stable code.
    pub code: &'static str,
    /// `error`, `warning` or `info`.
    pub severity: Severity,
    /// Message.
    pub message: String,
    /// File name as given.
    pub file: String,
    /// 1-based line of the start.
    pub line: usize,
    /// 1-based column (characters) of the start.
    pub column: usize,
    /// 1-based line of the end.
    pub end_line: usize,
    /// 1-based column of the end (exclusive).
    pub end_column: usize,
    /// Help text, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

/// Flattens diagnostics for JSON.
pub fn to_json(file: &SourceFile, diags: &[Diagnostic]) -> Vec<DiagnosticJson> {
    diags
        .iter()
        .map(|d| {
            let (line, column) = file.line_col(d.span.start);
            let (end_line, end_column) = file.line_col(d.span.end);
            DiagnosticJson {
                code: d.code.as_str(),
                severity: d.severity(),
                message: d.message.clone(),
                file: file.name.clone(),
                line,
                column,
                end_line,
                end_column,
                help: d.help.clone(),
            }
        })
        .collect()
}
