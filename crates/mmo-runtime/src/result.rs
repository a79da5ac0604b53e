//! Results and contracts: extracting the JSON value from an agent's final message, checking it
//! (schema, mechanical evidence correlation, literal correlation), the one shape-only repair
//! turn, paging a stored result for `agent_result`, and the job/result lifecycle.

use crate::literal::{LiteralOperation, correlate_literal};
pub use crate::problem::Problem;
use mmo_contract::Contract;
use mmo_contract::correlate::{CommandEvent, Evidence, correlate};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::Path;
use std::str::FromStr;

// ---------------------------------------------------------------------------------------------
// Extraction

/// Largest final message JSON is extracted from, in bytes.
pub const MAX_RESULT_BYTES: usize = 2 * 1024 * 1024;

/// Every extraction error code, each produced by a test.
pub const EXTRACT_CODES: &[&str] = &[
    "result_empty",
    "result_too_large",
    "result_not_json",
    "result_json_block_count",
    "result_json_block_invalid",
    "result_fence_unclosed",
];

/// Why no JSON value could be taken from a final message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractError {
    pub code: &'static str,
    pub message: String,
}

impl fmt::Display for ExtractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)
    }
}

impl std::error::Error for ExtractError {}

impl From<ExtractError> for Problem {
    fn from(e: ExtractError) -> Problem {
        Problem::new(e.code, "", e.message)
    }
}

fn xerr(code: &'static str, message: impl Into<String>) -> ExtractError {
    ExtractError {
        code,
        message: message.into(),
    }
}

/// Take the result value from an agent's final message: either the whole message (surrounding
/// whitespace aside) is one JSON value, or it contains exactly one fenced code block whose info
/// string is `json` (case-insensitive; fences are lines starting with three backticks, possibly
/// indented). Other fenced blocks are skipped; two `json` blocks are ambiguous and refused.
pub fn extract_json(text: &str) -> Result<Value, ExtractError> {
    if text.len() > MAX_RESULT_BYTES {
        return Err(xerr(
            "result_too_large",
            format!(
                "the final message has {} bytes; at most {MAX_RESULT_BYTES} are read",
                text.len()
            ),
        ));
    }
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(xerr("result_empty", "the final message is empty"));
    }
    let whole = serde_json::from_str::<Value>(trimmed);
    if let Ok(v) = whole {
        return Ok(v);
    }
    let mut blocks: Vec<(usize, String)> = Vec::new();
    // (opening line, fence length, is json, body)
    let mut open: Option<(usize, usize, bool, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let ticks = t.bytes().take_while(|b| *b == b'`').count();
        match &mut open {
            None => {
                if ticks >= 3 {
                    let info = t[ticks..].trim();
                    let lang = info.split_whitespace().next().unwrap_or("");
                    open = Some((
                        i + 1,
                        ticks,
                        lang.eq_ignore_ascii_case("json"),
                        String::new(),
                    ));
                }
            }
            Some((start, len, is_json, body)) => {
                // A closing fence is at least as long as its opener and has no info string.
                if ticks >= *len && t[ticks..].trim().is_empty() {
                    if *is_json {
                        blocks.push((*start, std::mem::take(body)));
                    }
                    open = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    if let Some((start, _, true, _)) = open {
        return Err(xerr(
            "result_fence_unclosed",
            format!("the ```json block opened on line {start} is never closed"),
        ));
    }
    match blocks.len() {
        0 => Err(xerr(
            "result_not_json",
            format!(
                "the final message is neither one JSON value ({}) nor contains a ```json block",
                whole.err().map_or_else(String::new, |e| e.to_string())
            ),
        )),
        1 => {
            let (start, body) = &blocks[0];
            serde_json::from_str(body).map_err(|e| {
                xerr(
                    "result_json_block_invalid",
                    format!("the ```json block opened on line {start} is not valid JSON: {e}"),
                )
            })
        }
        n => Err(xerr(
            "result_json_block_count",
            format!(
                "the final message holds {n} ```json blocks (lines {}); exactly one is read",
                blocks
                    .iter()
                    .map(|(l, _)| l.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Checking

/// Whether a result is the job's final answer or partial evidence (from a suspended, paused,
/// stopped, failed or cancelled job). Partial evidence never satisfies a strict contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Finality {
    Final,
    Partial,
}

/// What a result is checked against, all captured by the runtime itself.
#[derive(Debug, Clone, Copy)]
pub struct ResultEvidence<'a> {
    /// Commands with exit codes parsed from the worker's event stream.
    pub commands: &'a [CommandEvent],
    /// The delegated tree `relative_path` values (and a literal input) resolve in.
    pub tree: &'a Path,
    /// The runtime-generated literal operation of a low-trust job.
    pub literal: Option<&'a LiteralOperation>,
    pub finality: Finality,
}

/// Code of the problem a partial result always carries.
pub const PARTIAL_CODE: &str = "result_partial";

/// Check a result: schema validation, then `mmo_contract::correlate` (commands and file hashes),
/// then literal correlation when the job has a literal operation. Every problem is reported (an
/// empty list means the value satisfies the contract); a partial result additionally carries
/// [`PARTIAL_CODE`], so it never satisfies a strict contract.
pub fn check(contract: &Contract, value: &Value, evidence: &ResultEvidence<'_>) -> Vec<Problem> {
    let mut out = Vec::new();
    if evidence.finality == Finality::Partial {
        out.push(Problem::new(
            PARTIAL_CODE,
            "",
            "partial evidence is non-final and never satisfies a strict output contract",
        ));
    }
    for e in contract.validate(value) {
        out.push(Problem {
            code: e.rule,
            pointer: e.instance_pointer,
            schema_pointer: Some(e.schema_pointer),
            message: e.message,
        });
    }
    let ev = Evidence {
        commands: evidence.commands,
        tree: evidence.tree,
    };
    for e in correlate(value, ev) {
        out.push(Problem::new(e.rule, e.pointer, e.message));
    }
    if let Some(op) = evidence.literal {
        out.extend(correlate_literal(value, op, evidence.tree));
    }
    out
}

/// Whether a checked result satisfies a strict contract: final and without problems.
pub fn satisfies_strict(finality: Finality, problems: &[Problem]) -> bool {
    finality == Finality::Final && problems.is_empty()
}

/// Most problems listed in a repair prompt.
pub const REPAIR_MAX_PROBLEMS: usize = 40;
/// Longest contract inlined in a repair prompt, in characters (longer ones are referred to).
pub const REPAIR_MAX_CONTRACT_CHARS: usize = 8000;

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n).collect();
        t.push('…');
        t
    }
}

/// The text of the one repair turn the same thread receives when its first result is malformed.
/// It is shape-only and discourages tools, and says that a repair may not manufacture evidence.
pub fn repair_prompt(contract: &Contract, problems: &[Problem]) -> String {
    let mut p = String::from(
        "Your final message did not satisfy the output contract. This is the only repair turn; there will be no other.\n\n\
         Fix the shape only. Do not call tools, run commands, read files, or delegate: answer from what you already observed in this thread.\n\
         A repair may not manufacture missing evidence. Never invent or adjust commands, exit codes, file paths, hashes, line numbers, excerpts or quotes. \
         Where a problem below says evidence does not correlate, remove that claim (or report it as not established where the contract allows) instead of inventing a replacement.\n\n\
         Return only the corrected JSON value (or exactly one ```json block) and nothing else.\n\nProblems:\n",
    );
    for pr in problems.iter().take(REPAIR_MAX_PROBLEMS) {
        let at = if pr.pointer.is_empty() {
            "(root)"
        } else {
            &pr.pointer
        };
        p.push_str(&format!(
            "- {at}: [{}] {}\n",
            pr.code,
            clip(&pr.message, 300)
        ));
    }
    if problems.len() > REPAIR_MAX_PROBLEMS {
        p.push_str(&format!(
            "- … and {} more\n",
            problems.len() - REPAIR_MAX_PROBLEMS
        ));
    }
    let schema = contract.schema().to_string();
    if schema.chars().count() <= REPAIR_MAX_CONTRACT_CHARS {
        p.push_str("\nThe output contract (JSON Schema):\n");
        p.push_str(&schema);
        p.push('\n');
    } else {
        p.push_str("\nThe output contract is the one given with your task.\n");
    }
    p
}

// ---------------------------------------------------------------------------------------------
// Paging

/// One page of a stored result for `agent_result`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Page {
    /// The complete strict JSON value, when it fits the requested page (then `text` is absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Contiguous text of the stored result otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The cursor of this page's start.
    pub cursor: String,
    /// The stored result's length in characters.
    pub total_chars: u64,
    /// The cursor of the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// Every paging error code, each produced by a test.
pub const PAGE_CODES: &[&str] = &[
    "page_cursor_malformed",
    "page_cursor_foreign",
    "page_cursor_out_of_range",
    "page_max_chars",
];

/// A refused page request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageError {
    pub code: &'static str,
    pub message: String,
}

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)
    }
}

impl std::error::Error for PageError {}

fn perr(code: &'static str, message: impl Into<String>) -> PageError {
    PageError {
        code,
        message: message.into(),
    }
}

/// A cursor names a character offset and is bound to the text it was issued for (the first 16
/// hex digits of its SHA-256), so it cannot address another result nor a place outside the text.
fn text_tag(text: &str) -> String {
    Sha256::digest(text.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn cursor_for(offset: u64, tag: &str) -> String {
    format!("r1.{offset}.{tag}")
}

fn parse_cursor(cursor: &str, tag: &str, total: u64) -> Result<u64, PageError> {
    let malformed = || {
        perr(
            "page_cursor_malformed",
            "the cursor is not one this server issued; pass next_cursor exactly as returned",
        )
    };
    let mut parts = cursor.split('.');
    let (Some("r1"), Some(off), Some(t), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed());
    };
    let offset: u64 = off.parse().map_err(|_| malformed())?;
    if offset.to_string() != off || t.len() != 16 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(malformed());
    }
    if t != tag {
        return Err(perr(
            "page_cursor_foreign",
            "the cursor belongs to another result",
        ));
    }
    // Offset 0 is always valid (an empty text has one empty page); any other must be inside.
    if offset != 0 && offset >= total {
        return Err(perr(
            "page_cursor_out_of_range",
            format!("the cursor points at character {offset} of a {total}-character result"),
        ));
    }
    Ok(offset)
}

/// Page a stored result. `max_chars` defaults to `default_chars` and is clamped to
/// `hard_max_chars` (both in characters; a page never splits a UTF-8 character). The first
/// page of a `strict_json` result that fits returns it as `value`; otherwise (and for every
/// later page) `text` holds contiguous characters and `next_cursor` names the rest.
pub fn page(
    text: &str,
    strict_json: bool,
    cursor: Option<&str>,
    max_chars: Option<u32>,
    default_chars: u32,
    hard_max_chars: u32,
) -> Result<Page, PageError> {
    let want = max_chars.unwrap_or(default_chars).min(hard_max_chars);
    if want == 0 {
        return Err(perr(
            "page_max_chars",
            format!(
                "max_chars must be at least 1 (requested {}, hard maximum {hard_max_chars})",
                max_chars.unwrap_or(default_chars)
            ),
        ));
    }
    let total = text.chars().count() as u64;
    let tag = text_tag(text);
    let offset = match cursor {
        None => 0,
        Some(c) => parse_cursor(c, &tag, total)?,
    };
    let this = cursor_for(offset, &tag);
    if offset == 0
        && strict_json
        && total <= u64::from(want)
        && let Ok(v) = serde_json::from_str::<Value>(text)
    {
        return Ok(Page {
            value: Some(v),
            text: None,
            cursor: this,
            total_chars: total,
            next_cursor: None,
        });
    }
    let mut chars = text.char_indices().skip(offset as usize);
    let start = chars.next().map_or(text.len(), |(i, _)| i);
    let end_char = (offset + u64::from(want)).min(total);
    let end = text
        .char_indices()
        .nth(end_char as usize)
        .map_or(text.len(), |(i, _)| i);
    Ok(Page {
        value: None,
        text: Some(text[start..end].to_string()),
        cursor: this,
        total_chars: total,
        next_cursor: (end_char < total).then(|| cursor_for(end_char, &tag)),
    })
}

// ---------------------------------------------------------------------------------------------
// Lifecycle

/// A state machine whose states persist as snake_case TEXT.
pub trait StateMachine: Copy {
    fn can_transition(self, to: Self) -> bool;
}

/// Whether `from → to` is a legal transition (never `from → from`).
pub fn can_transition<S: StateMachine>(from: S, to: S) -> bool {
    from.can_transition(to)
}

macro_rules! text_enum {
    ($(#[$m:meta])* $name:ident { $($v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($v),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            /// The persisted TEXT value (equal to the serde form).
            pub fn as_str(self) -> &'static str {
                match self { $($name::$v => $s),+ }
            }
        }

        impl FromStr for $name {
            type Err = LifecycleError;
            fn from_str(s: &str) -> Result<Self, LifecycleError> {
                match s {
                    $($s => Ok($name::$v),)+
                    _ => Err(LifecycleError {
                        code: "lifecycle_unknown_state",
                        message: format!("`{}` is not a {} value", s.escape_debug(), stringify!($name)),
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

text_enum!(
    /// An Agent-MCP job's state.
    JobState {
        Queued = "queued",
        Running = "running",
        Paused = "paused",
        Suspended = "suspended",
        Completed = "completed",
        Failed = "failed",
        Stopped = "stopped",
        Cancelled = "cancelled",
    }
);

text_enum!(
    /// A result's disposition: unread → read → accepted | rejected.
    Disposition {
        Unread = "unread",
        Read = "read",
        Accepted = "accepted",
        Rejected = "rejected",
    }
);

impl JobState {
    /// Completed, failed, stopped and cancelled never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Stopped | JobState::Cancelled
        )
    }

    /// Whether the job holds admission slots (queued and running); paused, suspended and
    /// terminal jobs release them and are left out of admission's `active`.
    pub fn holds_admission(self) -> bool {
        matches!(self, JobState::Queued | JobState::Running)
    }

    /// The finality of the job's result in this state; `None` while there is none yet.
    pub fn result_finality(self) -> Option<Finality> {
        match self {
            JobState::Queued | JobState::Running => None,
            JobState::Completed => Some(Finality::Final),
            _ => Some(Finality::Partial),
        }
    }
}

impl StateMachine for JobState {
    fn can_transition(self, to: JobState) -> bool {
        use JobState::*;
        match self {
            // A supervisor that dies while a host is starting leaves the job suspended too.
            Queued => matches!(to, Running | Suspended | Failed | Stopped | Cancelled),
            Running => matches!(
                to,
                Paused | Suspended | Completed | Failed | Stopped | Cancelled
            ),
            // Continue restores the same thread (after admission again); a failed restore fails.
            Paused | Suspended => matches!(to, Running | Failed | Stopped | Cancelled),
            Completed | Failed | Stopped | Cancelled => false,
        }
    }
}

impl StateMachine for Disposition {
    fn can_transition(self, to: Disposition) -> bool {
        use Disposition::*;
        // Rejection needs no reading; acceptance does. Accepted and rejected are final.
        matches!(
            (self, to),
            (Unread, Read) | (Unread, Rejected) | (Read, Accepted) | (Read, Rejected)
        )
    }
}

/// A refused lifecycle step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleError {
    pub code: &'static str,
    pub message: String,
}

impl fmt::Display for LifecycleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.code, self.message)
    }
}

impl std::error::Error for LifecycleError {}

/// Every lifecycle error code, each produced by a test.
pub const LIFECYCLE_CODES: &[&str] = &[
    "lifecycle_unknown_state",
    "lifecycle_job_transition",
    "lifecycle_disposition_transition",
    "lifecycle_accept_not_completed",
    "lifecycle_accept_partial",
];

/// Check a job state change.
pub fn job_transition(from: JobState, to: JobState) -> Result<(), LifecycleError> {
    if from.can_transition(to) {
        Ok(())
    } else {
        Err(LifecycleError {
            code: "lifecycle_job_transition",
            message: format!("a {from} job cannot become {to}"),
        })
    }
}

/// Check a disposition change of the result of a job in state `job` whose result has
/// `finality`: the transition must be legal, and only a final result of a completed job can be
/// accepted (stopped, failed and cancelled are terminal evidence states; partial evidence is
/// never a successful result).
pub fn disposition_transition(
    job: JobState,
    finality: Finality,
    from: Disposition,
    to: Disposition,
) -> Result<(), LifecycleError> {
    if !from.can_transition(to) {
        return Err(LifecycleError {
            code: "lifecycle_disposition_transition",
            message: format!("a {from} result cannot become {to}"),
        });
    }
    if to == Disposition::Accepted {
        if job != JobState::Completed {
            return Err(LifecycleError {
                code: "lifecycle_accept_not_completed",
                message: format!("the job is {job}; only a completed job's result can be accepted"),
            });
        }
        if finality != Finality::Final {
            return Err(LifecycleError {
                code: "lifecycle_accept_partial",
                message: "partial evidence is non-final and cannot be accepted".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
