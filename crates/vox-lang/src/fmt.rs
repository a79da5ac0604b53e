//! `vox fmt`: the canonical layout of a `.vox` file.
//!
//! The formatter works on tokens, not on the syntax tree, so comments, blank lines and line
//! breaks (which end statements) stay where the author put them. What it changes:
//! indentation (four spaces per open bracket, one level per line however many brackets the
//! line opens, one more for a line that continues the previous one), spacing between tokens
//! on a line, trailing whitespace, runs of blank lines (at most one), and the end of the file
//! (exactly one newline). Declarations the interpreter skips (`component`, JSX, …) and imports
//! in no form that loads a file (which accept any tokens) are copied as they are. A file with lexical or syntax errors is not formatted.
//!
//! Every result is checked: it must lex to the same tokens as the input, or the input is
//! returned unchanged with an error, so formatting can never change what a file means.

use crate::ast::Item;
use crate::diag::{Severity, SourceFile};
use crate::lexer::{Tok, Token, lex};

/// Why a file was not formatted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FmtError {
    /// The file has lexical or syntax errors (the first is quoted as `file:line:col: message`).
    #[error("not formatted: fix its syntax first ({0})")]
    Syntax(String),
    /// The result would not lex to the same tokens (a formatter bug; the file is left alone).
    #[error("not formatted: the formatter would change the file's tokens (please report this)")]
    Unsafe,
}

/// The formatted text of `src` (named `name` in errors).
pub fn format(name: &str, src: &str) -> Result<String, FmtError> {
    let parsed = crate::parser::parse(src);
    if let Some(d) = parsed
        .diags
        .iter()
        .find(|d| d.severity() == Severity::Error)
    {
        let file = SourceFile::new(name, src);
        let (line, col) = file.line_col(d.span.start);
        return Err(FmtError::Syntax(format!(
            "{name}:{line}:{col}: {}",
            d.message
        )));
    }
    let verbatim: Vec<(u32, u32)> = parsed
        .file
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Opaque(o) => Some((o.span.start, o.span.end)),
            // An import in none of the forms that load a file accepts any tokens to the end of
            // its line; respacing them could join two into one (`! =` into `!=`).
            Item::Import(d) if d.module.is_empty() => Some((d.span.start, d.span.end)),
            _ => None,
        })
        .collect();
    let (toks, _) = lex(src);
    let out = Printer::new(src, &toks, &verbatim).run();
    if !same_tokens(src, &toks, &out) {
        return Err(FmtError::Unsafe);
    }
    Ok(out)
}

/// Whether `out` lexes to the tokens of `src` (already lexed as `toks`), counting a run of line
/// ends as one and ignoring line ends at the start and end (blank lines carry no meaning).
fn same_tokens(src: &str, toks: &[Token], out: &str) -> bool {
    fn tokens<'a>(src: &'a str, toks: &[Token]) -> Vec<(Tok, &'a str)> {
        let mut out: Vec<(Tok, &str)> = Vec::with_capacity(toks.len());
        for &t in toks {
            let at_line_end = out.last().is_none_or(|&(k, _)| k == Tok::Newline);
            if t.kind == Tok::Newline && at_line_end {
                continue;
            }
            if t.kind == Tok::Eof && out.last().is_some_and(|&(k, _)| k == Tok::Newline) {
                out.pop();
            }
            out.push((t.kind, &src[t.span.start as usize..t.span.end as usize]));
        }
        out
    }
    tokens(src, toks) == tokens(out, &lex(out).0)
}

const INDENT: &str = "    ";

struct Printer<'a> {
    src: &'a str,
    toks: &'a [Token],
    verbatim: &'a [(u32, u32)],
    out: String,
    /// The line being built (without indentation).
    line: String,
    /// Last code token on the line being built.
    prev: Option<Tok>,
    /// Whether `prev` is a `-` that subtracts (rather than negates).
    prev_binary_minus: bool,
    /// Last code token of the previous line with code.
    prev_line_last: Option<Tok>,
    /// Per open bracket: the indentation level of the line that opened it, and how its
    /// inside is spaced.
    open: Vec<(usize, Inside)>,
    /// Indentation level of the line being built.
    level: usize,
    blank_lines: usize,
}

impl<'a> Printer<'a> {
    fn new(src: &'a str, toks: &'a [Token], verbatim: &'a [(u32, u32)]) -> Self {
        Printer {
            src,
            toks,
            verbatim,
            out: String::with_capacity(src.len() + src.len() / 8),
            line: String::new(),
            prev: None,
            prev_binary_minus: false,
            prev_line_last: None,
            open: Vec::new(),
            level: 0,
            blank_lines: 0,
        }
    }

    fn text(&self, t: &Token) -> &'a str {
        &self.src[t.span.start as usize..t.span.end as usize]
    }

    fn run(mut self) -> String {
        let mut end_of_prev = 0usize;
        let mut i = 0;
        while i < self.toks.len() {
            let t = self.toks[i];
            // A comment lies in the gap before a token (newlines are tokens, so a gap is
            // within one line).
            let gap = &self.src[end_of_prev..t.span.start as usize];
            let gap = gap.trim_start();
            if gap.starts_with("//") || gap.starts_with('#') {
                let comment = gap.trim_end();
                if self.line.is_empty() {
                    self.level = self.content_level();
                } else {
                    self.line.push(' ');
                }
                self.line.push_str(comment);
            }
            end_of_prev = t.span.end as usize;
            match t.kind {
                Tok::Newline => self.end_line(),
                Tok::Eof => {
                    self.end_line();
                    break;
                }
                _ => {
                    let k = self.verbatim.partition_point(|&(s, _)| s <= t.span.start);
                    if let Some(&(start, end)) = k
                        .checked_sub(1)
                        .map(|k| &self.verbatim[k])
                        .filter(|&&(_, e)| t.span.start < e)
                    {
                        // A skipped declaration, copied as written.
                        if self.line.is_empty() {
                            self.level = self.content_level();
                        } else if t.span.start > 0
                            && self.src.as_bytes()[t.span.start as usize - 1].is_ascii_whitespace()
                        {
                            // After code on the same line (`e table …`): keep them apart, or
                            // the two would lex as one token.
                            self.line.push(' ');
                        }
                        // From its first token to its end, or to the end of a token that runs
                        // past it (an unterminated string in JSX text), so nothing is cut.
                        let mut copy_end = end.max(t.span.end);
                        while i + 1 < self.toks.len()
                            && self.toks[i + 1].span.start < end
                            && self.toks[i + 1].kind != Tok::Eof
                        {
                            i += 1;
                            copy_end = copy_end.max(self.toks[i].span.end);
                        }
                        let from = start.max(t.span.start) as usize;
                        self.line.push_str(&self.src[from..copy_end as usize]);
                        self.prev = Some(Tok::RBrace);
                        end_of_prev = copy_end as usize;
                        i += 1;
                        continue;
                    }
                    self.token(i);
                }
            }
            i += 1;
        }
        // A raw string left open at the end of the file (in skipped JSX text) runs to the end:
        // a newline added after it would become part of it.
        let last = self.toks.iter().rev().find(|t| t.kind != Tok::Eof);
        if last.is_some_and(|t| matches!(t.kind, Tok::RawStr(false) | Tok::Unterminated)) {
            self.out.pop();
            return self.out;
        }
        // Exactly one newline at the end; nothing but a newline for an empty file.
        let trimmed = self.out.trim_end_matches('\n').len();
        self.out.truncate(trimmed);
        self.out.push('\n');
        if self.out == "\n" {
            self.out.clear();
        }
        self.out
    }

    /// Indentation for a line starting inside the innermost open bracket.
    fn content_level(&self) -> usize {
        self.open.last().map_or(0, |&(l, _)| l + 1)
    }

    fn token(&mut self, i: usize) {
        let t = &self.toks[i];
        let text = self.text(t);
        match self.prev {
            None => {
                self.level = if is_close(t.kind) {
                    self.open.last().map_or(0, |&(l, _)| l)
                } else {
                    let continues = matches!(t.kind, Tok::Dot | Tok::Pipe | Tok::Bar)
                        || self.prev_line_last.is_some_and(ends_incomplete);
                    self.content_level() + usize::from(continues)
                };
            }
            Some(prev) => {
                let original_space = t.span.start as usize > 0
                    && self.src.as_bytes()[t.span.start as usize - 1].is_ascii_whitespace();
                let inside = match (prev, t.kind) {
                    (Tok::LBrace, _) | (_, Tok::RBrace) => self.open.last().map(|&(_, i)| i),
                    _ => None,
                };
                let space = match inside {
                    Some(Inside::Spaced) => true,
                    Some(Inside::Tight) => false,
                    _ => space_between(prev, self.prev_binary_minus, t.kind, original_space),
                };
                if space {
                    self.line.push(' ');
                }
            }
        }
        self.prev_binary_minus = t.kind == Tok::Minus && self.prev.is_some_and(ends_operand);
        self.line.push_str(text);
        match t.kind {
            Tok::LParen | Tok::LBracket => self.open.push((self.level, Inside::AsWritten)),
            Tok::LBrace => {
                let inside = if self.prev == Some(Tok::Dot) {
                    // `import a.{b, c}`
                    Inside::Tight
                } else if self.is_block_brace(i) {
                    Inside::Spaced
                } else {
                    Inside::AsWritten
                };
                self.open.push((self.level, inside));
            }
            Tok::RParen | Tok::RBracket | Tok::RBrace => {
                self.open.pop();
            }
            _ => {}
        }
        self.prev = Some(t.kind);
    }

    /// Whether the `{` at `i` opens a block rather than a record (`{a: 1}`, `{"k": v}`) or
    /// empty braces: blocks get a space inside each brace when written on one line.
    fn is_block_brace(&self, i: usize) -> bool {
        let kind = |k: usize| self.toks.get(i + k).map_or(Tok::Eof, |t| t.kind);
        let key = matches!(kind(1), Tok::Ident | Tok::TypeIdent | Tok::Str | Tok::SStr);
        !(matches!(kind(1), Tok::RBrace | Tok::Newline | Tok::Eof) || key && kind(2) == Tok::Colon)
    }

    fn end_line(&mut self) {
        // Not trimmed: spaces are only ever put before a token, so whitespace at the end is
        // part of a token (an unterminated string in skipped JSX text ends with it).
        let line = self.line.as_str();
        if line.is_empty() {
            self.blank_lines += 1;
        } else {
            if self.blank_lines > 0 && !self.out.is_empty() && !self.after_open_brace() {
                self.out.push('\n');
            }
            self.blank_lines = 0;
            for _ in 0..self.level {
                self.out.push_str(INDENT);
            }
            self.out.push_str(line);
            self.out.push('\n');
            if self.prev.is_some() {
                self.prev_line_last = self.prev;
            }
        }
        self.line.clear();
        self.prev = None;
    }

    /// Whether the last line written ends with `{` (no blank line right after it).
    fn after_open_brace(&self) -> bool {
        self.out.trim_end_matches('\n').ends_with('{')
    }
}

/// How the inside of a bracket is spaced on one line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inside {
    /// A block: `{ x + 1 }`.
    Spaced,
    /// An import list: `{b, c}`.
    Tight,
    /// Parentheses, brackets (never spaced by the rules), records and empty braces (as the
    /// author wrote them).
    AsWritten,
}

fn is_close(t: Tok) -> bool {
    matches!(t, Tok::RParen | Tok::RBracket | Tok::RBrace)
}

/// A line ending with one of these continues on the next.
fn ends_incomplete(t: Tok) -> bool {
    matches!(
        t,
        Tok::Eq | Tok::FatArrow | Tok::Pipe | Tok::And | Tok::Or | Tok::Plus | Tok::Star
    )
}

/// Tokens after which a value has ended (so a following `-` is binary).
fn ends_operand(t: Tok) -> bool {
    matches!(
        t,
        Tok::Ident
            | Tok::TypeIdent
            | Tok::Int
            | Tok::Float
            | Tok::Str
            | Tok::SStr
            | Tok::RawStr(_)
            | Tok::True
            | Tok::False
            | Tok::RParen
            | Tok::RBracket
            | Tok::RBrace
            | Tok::Question
    )
}

fn is_word(t: Tok) -> bool {
    ends_operand(t) && !matches!(t, Tok::RParen | Tok::RBracket | Tok::RBrace | Tok::Question)
        || matches!(
            t,
            Tok::Fn
                | Tok::Let
                | Tok::Mut
                | Tok::If
                | Tok::Else
                | Tok::While
                | Tok::Loop
                | Tok::For
                | Tok::In
                | Tok::Break
                | Tok::Continue
                | Tok::Return
                | Tok::Ret
                | Tok::Match
                | Tok::Type
                | Tok::To
                | Tok::And
                | Tok::Or
                | Tok::Not
                | Tok::Is
                | Tok::Isnt
                | Tok::Import
                | Tok::Pub
                | Tok::Async
        )
}

/// Operators written with a space on each side.
fn is_spaced_operator(t: Tok) -> bool {
    matches!(
        t,
        Tok::Eq
            | Tok::PlusEq
            | Tok::MinusEq
            | Tok::StarEq
            | Tok::SlashEq
            | Tok::EqEq
            | Tok::NotEq
            | Tok::Lt
            | Tok::Gt
            | Tok::Le
            | Tok::Ge
            | Tok::Plus
            | Tok::Star
            | Tok::Slash
            | Tok::Percent
            | Tok::Pipe
            | Tok::FatArrow
            | Tok::Arrow
            | Tok::Bar
            | Tok::AmpAmp
            | Tok::BarBar
    )
}

/// Whether to put one space between `a` and `b` on a line; `original` says whether the author
/// did, for the cases with no single convention (inside `{ }`, after a keyword before `(`).
fn space_between(a: Tok, a_binary_minus: bool, b: Tok, original: bool) -> bool {
    if matches!(
        b,
        Tok::Comma
            | Tok::Semi
            | Tok::RParen
            | Tok::RBracket
            | Tok::Question
            | Tok::Dot
            | Tok::Colon
    ) {
        return false;
    }
    if matches!(
        a,
        Tok::LParen | Tok::LBracket | Tok::Dot | Tok::At | Tok::Bang
    ) {
        return false;
    }
    if a == Tok::Comma || a == Tok::Colon {
        return true;
    }
    if is_spaced_operator(a) || is_spaced_operator(b) {
        return true;
    }
    if b == Tok::Minus {
        return ends_operand(a) || original;
    }
    if a == Tok::Minus {
        return a_binary_minus;
    }
    if matches!(b, Tok::LParen | Tok::LBracket)
        && matches!(a, Tok::Ident | Tok::TypeIdent | Tok::RParen | Tok::RBracket)
    {
        return false;
    }
    if b == Tok::LBrace {
        return true;
    }
    if matches!(a, Tok::RParen | Tok::RBracket | Tok::RBrace) && is_word(b) {
        return true;
    }
    if is_word(a) && is_word(b) {
        return true;
    }
    original
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(s: &str) -> String {
        format("t.vox", s).unwrap()
    }

    #[test]
    fn indentation_spacing_and_blank_lines() {
        let src = "\n\nfn f(a:int,b :int)->int{\n\n  let x=a+b*2\n\n\n        if x>3{ return -x }\n  x\n}\n\n\n";
        assert_eq!(
            fmt(src),
            "fn f(a: int, b: int) -> int {\n    let x = a + b * 2\n\n    if x > 3 { return -x }\n    x\n}\n"
        );
    }

    #[test]
    fn comments_stay_where_they_are() {
        let src = "// top\nfn f() {   // trailing\n# hash comment\n  1 // one\n}\n";
        assert_eq!(
            fmt(src),
            "// top\nfn f() { // trailing\n    # hash comment\n    1 // one\n}\n"
        );
    }

    #[test]
    fn one_level_per_line_however_many_brackets_it_opens() {
        let src = "fn f() {\nfoo(bar({\n\"a\": 1,\n}))\n}\n";
        assert_eq!(
            fmt(src),
            "fn f() {\n    foo(bar({\n        \"a\": 1,\n    }))\n}\n"
        );
    }

    #[test]
    fn continuation_lines_are_indented_once_more() {
        let src = "type Shape =\n| Circle(r: float)\n| Rect(w: float, h: float)\nfn g(xs) {\nxs\n.map(fn(x) { x * 2 })\n|> len\n}\n";
        assert_eq!(
            fmt(src),
            "type Shape =\n    | Circle(r: float)\n    | Rect(w: float, h: float)\nfn g(xs) {\n    xs\n        .map(fn(x) { x * 2 })\n        |> len\n}\n"
        );
    }

    #[test]
    fn a_skipped_declaration_after_code_on_its_line_stays_apart_from_it() {
        // Found by the `frontend` fuzz target (`e- e table\x0b/e`): the copy was glued to the
        // code before it, `etable`, and the result refused as unsafe.
        assert_eq!(fmt("e table/e"), "e table/e\n");
        assert_eq!(fmt("e- e table\x0b/e"), "e- e table\x0b/e\n");
    }

    #[test]
    fn unary_and_binary_minus() {
        assert_eq!(fmt("fn f(a) { a-1 }\n"), "fn f(a) { a - 1 }\n");
        assert_eq!(
            fmt("fn f(a) { f(-a, [-1]) }\n"),
            "fn f(a) { f(-a, [-1]) }\n"
        );
    }

    #[test]
    fn decorators_records_and_raw_strings_keep_their_form() {
        let src = "@tool \"t: x\"\nfn t() {\n  let r = {\"a\": 1, b: [1,2]}\n  let s = r#\"line\n   kept  \"#\n  s\n}\n";
        assert_eq!(
            fmt(src),
            "@tool \"t: x\"\nfn t() {\n    let r = {\"a\": 1, b: [1, 2]}\n    let s = r#\"line\n   kept  \"#\n    s\n}\n"
        );
    }

    #[test]
    fn skipped_declarations_are_copied() {
        let src = "component App() {\n  <div   class='x'>  it's </div>\n}\nfn f( ) { 1 }\n";
        assert_eq!(
            fmt(src),
            "component App() {\n  <div   class='x'>  it's </div>\n}\nfn f() { 1 }\n"
        );
    }

    #[test]
    fn a_file_without_a_final_newline_gets_one() {
        assert_eq!(fmt("fn f() { 1 }"), "fn f() { 1 }\n");
        assert_eq!(fmt("\n\n"), "");
    }

    #[test]
    fn a_token_running_past_a_skipped_declaration_is_kept_whole() {
        // Found by the fuzzer: JSX text whose apostrophe starts a string that the skipped
        // declaration's span ends inside of.
        let src = "// x: User) {\n    <div class=\"card\">\n        <h0>Welcome {user.name}</h1>\n        <p>Don't Vpa\\\\\u{c}";
        let once = fmt(src);
        assert_eq!(fmt(&once), once);
    }

    #[test]
    fn a_raw_string_open_at_the_end_of_the_file_gets_no_newline() {
        // Found by the fuzzer: skipped JSX text ending in `r"…` with no closing quote.
        let src = "<\u{1}+\u{12}1th+r\"qeu";
        let once = fmt(src);
        assert_eq!(fmt(&once), once);
        let src = "<p>r\"a\n\n";
        assert_eq!(fmt(src), src);
    }

    #[test]
    fn an_import_of_any_other_form_is_copied() {
        // Found by the fuzzer: respacing `n! =` would have made `n!=`.
        let src = "import  x % V(n! => nl\nfn f() { 1 }\n";
        assert_eq!(fmt(src), src);
        assert_eq!(fmt("import a.b.{ c,d }\n"), "import a.b.{c, d}\n");
    }

    #[test]
    fn syntax_errors_are_not_formatted() {
        assert!(matches!(
            format("bad.vox", "fn f( {\n"),
            Err(FmtError::Syntax(m)) if m.starts_with("bad.vox:1:")
        ));
    }

    #[test]
    fn formatting_is_idempotent_on_the_fixtures() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ok");
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_none_or(|e| e != "vox") {
                continue;
            }
            let src = std::fs::read_to_string(&p).unwrap();
            let once = format("f.vox", &src).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert_eq!(format("f.vox", &once).unwrap(), once, "{}", p.display());
        }
    }
}
