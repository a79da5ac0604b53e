//! Hand-written recursive-descent parser with Pratt expression parsing and error recovery.
//!
//! Recovery is per statement and per item: a mistake is reported once, the parser skips to the
//! end of the statement (or to the next item), and goes on, so one run reports all of a file's
//! errors. Recursion depth and tree height are bounded, so no input overflows the stack.

use crate::ast::*;
use crate::diag::{Code, Diagnostic, Span};
use crate::lexer::{self, RawPart, Tok, Token};

/// Deepest recursion the parser allows (nested brackets, blocks, prefix operators).
pub const MAX_DEPTH: u32 = 64;
/// Highest expression tree the parser builds (long operator or call chains count too).
pub const MAX_HEIGHT: u32 = 160;

/// Top-level words that start a declaration outside the subset (spec section 5).
pub const OPAQUE_KEYWORDS: &[&str] = &[
    "component",
    "routes",
    "actor",
    "workflow",
    "activity",
    "table",
    "http",
    "extern",
    "style",
    "environment",
];

/// The kind of the skipped declaration top-level statements make (script mode).
pub const SCRIPT_KIND: &str = "top-level statements";

/// Decorators whose arguments the interpreter reads (the others' are skipped, whatever they are).
pub const ROLE_DECORATORS: &[&str] = &[
    "tool",
    "mcp.tool",
    "mcp.resource",
    "mcp.prompt",
    "complete",
    "test",
];

/// Real Vox's decorators that change nothing for the interpreter (effect and contract
/// annotations, AI and UI metadata): accepted without a warning, whatever their arguments.
pub const VOX_DECORATORS: &[&str] = &[
    "uses",
    "ai",
    "prompt",
    "subagent",
    "search",
    "hole",
    "require",
    "ensure",
    "invariant",
    "pure",
    "deprecated",
    "remote",
    "scheduled",
    "cancellable",
    "durable",
    "traced",
    "native",
    "mobile.native",
    "inference",
    "distributed_train",
    "layer",
    "embed",
    "pii",
    "cors",
    "rate_limit",
    "webhook",
    "index",
    "forall",
    "v0",
    "tokens",
    "deep_link",
    "form",
    "push",
    "back_button",
    "resource",
];

/// Decorators that make a function (or type) opaque.
pub const OPAQUE_DECORATORS: &[&str] = &[
    "endpoint", "server", "query", "mutation", "table", "loading", "island",
];

/// A diagnostic has been reported; the caller recovers.
struct Fail;

type PResult<T> = Result<T, Fail>;

/// The result of parsing one file.
#[derive(Debug)]
pub struct Parsed {
    /// The tree (items that failed to parse are left out).
    pub file: File,
    /// Lexer and parser diagnostics, in source order.
    pub diags: Vec<Diagnostic>,
}

/// Lexes and parses `src`.
pub fn parse(src: &str) -> Parsed {
    let (toks, lex_diags) = lexer::lex(src);
    let lex_errors = lex_diags.iter().map(|d| d.span.start).collect();
    let mut f = File::default();
    // Sized from the token count: expression nodes are fewer than tokens, and regrowing a
    // large vector copies it.
    f.exprs.reserve(toks.len() / 2 + 16);
    f.expr_lists.reserve(toks.len() / 8 + 16);
    f.stmts.reserve(toks.len() / 8 + 16);
    f.str_parts.reserve(toks.len() / 16 + 16);
    f.strings.reserve(src.len() / 4 + 64);
    let mut p = Parser {
        src,
        lex_errors,
        toks,
        pos: 0,
        diags: Vec::new(),
        depth: 0,
        deep_reported: false,
        f,
        interner: Interner::default(),
        free_ids: Vec::new(),
        free_stmts: Vec::new(),
        raw_parts: Vec::new(),
    };
    p.interner.init(&mut p.f, src.len());
    p.file();
    let Parser {
        f: mut file,
        diags: parse_diags,
        ..
    } = p;
    file.items.shrink_to_fit();
    let opaque: Vec<Span> = file
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Opaque(o) if !o.broken => Some(o.span),
            _ => None,
        })
        .collect();
    // Lexical errors inside skipped declarations (JSX text with apostrophes, say) are not errors
    // of the subset, so they are dropped.
    let mut diags: Vec<Diagnostic> = lex_diags
        .into_iter()
        .filter(|d| {
            !opaque
                .iter()
                .any(|o| d.span.start >= o.start && d.span.start < o.end.max(o.start + 1))
        })
        .collect();
    diags.extend(parse_diags);
    diags.sort_by_key(|d| (d.span.start, d.span.end));
    Parsed { file, diags }
}

/// Interns names into a [`File`]: an open-addressing table of symbols keyed by their text in
/// [`File::strings`], so neither the table nor the symbols allocate per name.
#[derive(Default)]
struct Interner {
    /// Per slot: the high half of the name's hash and symbol + 1 (0 when empty), so most
    /// probes are settled without touching the text. The length is a power of two.
    table: Vec<u64>,
    /// Hash of each symbol's text, for growing the table.
    hashes: Vec<u64>,
}

const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// A fast hash of a short name, reading it in words (no byte-by-byte buffer, whose copy
/// stalled the load that followed).
#[inline]
fn hash_name(s: &str) -> u64 {
    let b = s.as_bytes();
    let n = b.len();
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
    let half = |i: usize| u64::from(u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4])));
    let (mut h, tail) = if n >= 8 {
        let mut h = n as u64;
        let mut i = 0;
        while i + 8 < n {
            h = (h ^ word(i)).wrapping_mul(K).rotate_left(29);
            i += 8;
        }
        (h, word(n - 8))
    } else if n >= 4 {
        (n as u64, (half(0) << 32) | half(n - 4))
    } else if n > 0 {
        (
            n as u64,
            (u64::from(b[0]) << 16) | (u64::from(b[n / 2]) << 8) | u64::from(b[n - 1]),
        )
    } else {
        (0, 0)
    };
    h = (h ^ tail).wrapping_mul(K);
    h ^ (h >> 29)
}

/// The predefined names, interned into an empty file with the smallest table: a small file
/// starts from a copy of it instead of hashing them again.
static PREDEFINED: std::sync::LazyLock<(Interner, Symbols, String)> =
    std::sync::LazyLock::new(|| {
        let mut f = File::default();
        let mut i = Interner::default();
        i.init_empty(&mut f, MIN_TABLE);
        (i, f.symbols, f.strings)
    });

const MIN_TABLE: usize = 256;

impl Interner {
    fn init(&mut self, f: &mut File, src_len: usize) {
        let size = (src_len / 32).clamp(MIN_TABLE, 1 << 22).next_power_of_two();
        if size == MIN_TABLE {
            let (i, symbols, strings) = &*PREDEFINED;
            self.table.clone_from(&i.table);
            self.hashes.clone_from(&i.hashes);
            f.symbols.texts.clone_from(&symbols.texts);
            f.strings.push_str(strings);
        } else {
            self.init_empty(f, size);
        }
    }

    fn init_empty(&mut self, f: &mut File, size: usize) {
        self.table = vec![0; size];
        for name in Sym::PREDEFINED {
            self.intern(f, name);
        }
    }

    #[inline]
    fn intern(&mut self, f: &mut File, text: &str) -> Sym {
        let h = hash_name(text);
        let tag = h & !0xffff_ffff;
        let mask = self.table.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let e = self.table[i];
            if e == 0 {
                break;
            }
            if e & !0xffff_ffff == tag {
                let sym = (e & 0xffff_ffff) as usize - 1;
                if f.symbols.texts[sym].get(&f.strings) == text {
                    return Sym(sym as u32);
                }
            }
            i = (i + 1) & mask;
        }
        let sym = f.symbols.texts.len();
        f.symbols.texts.push(StrRef::push(&mut f.strings, text));
        self.hashes.push(h);
        self.table[i] = tag | (sym as u64 + 1);
        if self.hashes.len() * 2 > self.table.len() {
            let size = self.table.len() * 2;
            let mask = size - 1;
            self.table = vec![0; size];
            for (s, &h) in self.hashes.iter().enumerate() {
                let mut i = h as usize & mask;
                while self.table[i] != 0 {
                    i = (i + 1) & mask;
                }
                self.table[i] = (h & !0xffff_ffff) | (s as u64 + 1);
            }
        }
        Sym(sym as u32)
    }
}

struct Parser<'a> {
    src: &'a str,
    /// Starts of lexical errors (sorted), so a parse error they cause is not reported twice.
    lex_errors: Vec<u32>,
    toks: Vec<Token>,
    pos: usize,
    diags: Vec<Diagnostic>,
    depth: u32,
    deep_reported: bool,
    /// The tree being built.
    f: File,
    interner: Interner,
    /// Emptied vectors kept for the next list, so building a list does not allocate.
    free_ids: Vec<Vec<ExprId>>,
    free_stmts: Vec<Vec<Stmt>>,
    raw_parts: Vec<lexer::RawPart>,
}

fn describe(t: Tok) -> &'static str {
    match t {
        Tok::Newline => "end of line",
        Tok::Eof => "end of file",
        Tok::Ident => "identifier",
        Tok::TypeIdent => "type name",
        Tok::Int | Tok::Float | Tok::Dec => "number",
        Tok::Str | Tok::SStr | Tok::RawStr(_) | Tok::Unterminated => "string",
        Tok::LParen => "`(`",
        Tok::RParen => "`)`",
        Tok::LBrace => "`{`",
        Tok::RBrace => "`}`",
        Tok::LBracket => "`[`",
        Tok::RBracket => "`]`",
        Tok::Comma => "`,`",
        Tok::Colon => "`:`",
        Tok::Semi => "`;`",
        Tok::Eq => "`=`",
        Tok::FatArrow => "`=>`",
        Tok::Arrow => "`->`",
        _ => "token",
    }
}

fn bh(b: &Block) -> u32 {
    b.height
}

fn height_of(f: &File, s: &Stmt) -> u32 {
    match s {
        Stmt::Let { value, .. } | Stmt::LetPattern { value, .. } => f.expr(*value).height,
        Stmt::Assign { target, value, .. } => f.expr(*target).height.max(f.expr(*value).height),
        Stmt::Expr(e) => f.expr(*e).height,
    }
}

impl<'a> Parser<'a> {
    // ---- token helpers -------------------------------------------------------------------

    fn peek(&self) -> Tok {
        self.toks[self.pos].kind
    }

    fn peek_at(&self, n: usize) -> Tok {
        self.toks
            .get(self.pos + n)
            .map(|t| t.kind)
            .unwrap_or(Tok::Eof)
    }

    fn span(&self) -> Span {
        self.toks[self.pos].span
    }

    fn prev_span(&self) -> Span {
        if self.pos == 0 {
            Span::default()
        } else {
            self.toks[self.pos - 1].span
        }
    }

    fn text(&self) -> &'a str {
        let s = self.span();
        &self.src[s.start as usize..s.end as usize]
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos];
        if t.kind != Tok::Eof {
            self.pos += 1;
        }
        t
    }

    fn at(&self, t: Tok) -> bool {
        self.peek() == t
    }

    fn eat(&mut self, t: Tok) -> bool {
        if self.at(t) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn skip_newlines(&mut self) {
        while self.at(Tok::Newline) {
            self.bump();
        }
    }

    /// The first token after any newlines, without consuming.
    fn peek_past_newlines(&self) -> Tok {
        let mut i = self.pos;
        while self.toks[i].kind == Tok::Newline {
            i += 1;
        }
        self.toks[i].kind
    }

    fn error(&mut self, code: Code, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(code, span, msg));
    }

    fn unexpected(&mut self, expected: &str) -> Fail {
        let found = self.peek();
        let span = self.span();
        let gap_start = self.prev_span().end;
        let caused_by_lex_error = self
            .lex_errors
            .iter()
            .any(|&e| e >= gap_start && e <= span.start);
        let msg = if found == Tok::Unterminated || caused_by_lex_error {
            // The lexer already reported the character or string that led here.
            return Fail;
        } else {
            format!("expected {expected}, found {}", self.found_text(found))
        };
        self.error(Code::UnexpectedToken, span, msg);
        Fail
    }

    fn found_text(&self, t: Tok) -> String {
        match t {
            Tok::Newline | Tok::Eof => describe(t).to_string(),
            _ => format!("`{}`", self.text()),
        }
    }

    fn expect(&mut self, t: Tok, expected: &str) -> PResult<Span> {
        if self.at(t) {
            Ok(self.bump().span)
        } else {
            Err(self.unexpected(expected))
        }
    }

    fn ident(&mut self, what: &str) -> PResult<Name> {
        if self.at(Tok::Ident) {
            Ok(self.name())
        } else {
            Err(self.unexpected(what))
        }
    }

    /// Interns the current token's text and consumes it.
    fn name(&mut self) -> Name {
        let sym = self.intern(self.text());
        let span = self.bump().span;
        Name { sym, span }
    }

    fn intern(&mut self, text: &str) -> Sym {
        self.interner.intern(&mut self.f, text)
    }

    fn e(&self, id: ExprId) -> &Expr {
        &self.f.exprs[id.0 as usize]
    }

    fn ids(&mut self) -> Vec<ExprId> {
        self.free_ids.pop().unwrap_or_default()
    }

    fn finish_ids(&mut self, mut v: Vec<ExprId>) -> Seq<ExprId> {
        let s = Seq::push_all(&mut self.f.expr_lists, v.drain(..));
        self.free_ids.push(v);
        s
    }

    fn max_height(&self, ids: &[ExprId]) -> u32 {
        ids.iter().map(|&a| self.e(a).height).max().unwrap_or(0)
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.depth -= 1;
            self.too_deep(self.span());
            return Err(Fail);
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn too_deep(&mut self, span: Span) {
        if !self.deep_reported {
            self.deep_reported = true;
            self.diags.push(
                Diagnostic::new(Code::NestingTooDeep, span, "nesting too deep")
                    .with_help(format!(
                        "split the expression: at most {MAX_DEPTH} nested levels and trees {MAX_HEIGHT} high are accepted"
                    )),
            );
        }
    }

    /// Builds a node, or an error node when it would be higher than [`MAX_HEIGHT`].
    fn mk(&mut self, kind: ExprKind, span: Span, height: u32) -> ExprId {
        let e = if height > MAX_HEIGHT {
            self.too_deep(span);
            Expr {
                kind: ExprKind::Error,
                span,
                height: 1,
            }
        } else {
            Expr { kind, span, height }
        };
        let id = ExprId(self.f.exprs.len() as u32);
        self.f.exprs.push(e);
        id
    }

    // ---- recovery ------------------------------------------------------------------------

    /// Skips to the end of the current statement: a newline or `;` outside brackets, or the
    /// `}` that closes the enclosing block (not consumed).
    fn recover_stmt(&mut self) {
        let mut nest = 0u32;
        loop {
            match self.peek() {
                Tok::Eof => return,
                Tok::Newline | Tok::Semi | Tok::Comma if nest == 0 => return,
                Tok::RBrace | Tok::RParen | Tok::RBracket if nest == 0 => return,
                Tok::LBrace | Tok::LParen | Tok::LBracket => nest += 1,
                Tok::RBrace | Tok::RParen | Tok::RBracket => nest -= 1,
                _ => {}
            }
            self.bump();
        }
    }

    fn at_item_start(&self) -> bool {
        match self.peek() {
            Tok::Fn | Tok::At | Tok::Type | Tok::Let | Tok::Import | Tok::Pub | Tok::Async => true,
            Tok::Ident => OPAQUE_KEYWORDS.contains(&self.text()),
            _ => false,
        }
    }

    /// Skips to the next line that starts an item, outside any braces.
    fn recover_item(&mut self) {
        let mut nest = 0i64;
        let mut line_start = false;
        loop {
            let t = self.peek();
            if t == Tok::Eof {
                return;
            }
            if line_start && nest <= 0 && self.at_item_start() {
                return;
            }
            line_start = t == Tok::Newline;
            match t {
                Tok::LBrace | Tok::LParen | Tok::LBracket => nest += 1,
                Tok::RBrace | Tok::RParen | Tok::RBracket => nest -= 1,
                _ => {}
            }
            self.bump();
        }
    }

    // ---- items ---------------------------------------------------------------------------

    fn file(&mut self) {
        loop {
            while matches!(self.peek(), Tok::Newline | Tok::Semi) {
                self.bump();
            }
            if self.at(Tok::Eof) {
                break;
            }
            self.deep_reported = false;
            let before = self.pos;
            match self.item() {
                Ok(item) => self.push_item(item),
                Err(Fail) => {
                    self.recover_item();
                    if let Some(item) = self.broken_item(before) {
                        self.f.items.push(item);
                    }
                }
            }
            if self.pos == before {
                // Guarantees progress on any input.
                self.bump();
            }
        }
    }

    /// A placeholder for a declaration that failed to parse (tokens `from..pos`), when its name
    /// can be found (`fn name`, `type Name`, `let NAME`): the name then still resolves, so code
    /// that uses it is not wrong too, and calling it fails at run time.
    fn broken_item(&mut self, from: usize) -> Option<Item> {
        let toks = &self.toks[from..self.pos];
        let at = toks
            .iter()
            .position(|t| matches!(t.kind, Tok::Fn | Tok::Type | Tok::Let))?;
        let name = toks
            .get(at + 1)
            .filter(|t| matches!(t.kind, Tok::Ident | Tok::TypeIdent))?;
        let kind = match toks[at].kind {
            Tok::Fn => "fn",
            Tok::Type => "type",
            _ => "let",
        };
        let (name_span, first, last) = (name.span, toks[0].span, self.prev_span());
        let text = &self.src[name_span.start as usize..name_span.end as usize];
        let sym = self.intern(text);
        Some(Item::Opaque(OpaqueItem {
            kind: kind.to_string(),
            name: Some(Name {
                sym,
                span: name_span,
            }),
            span: first.to(last),
            broken: true,
        }))
    }

    fn item(&mut self) -> PResult<Item> {
        let start = self.span();
        let mut decorators = Vec::new();
        while self.at(Tok::At) {
            decorators.push(self.decorator()?);
            self.skip_newlines();
        }
        if let Some(d) = decorators
            .iter()
            .find(|d| OPAQUE_DECORATORS.contains(&self.f.str(d.path)))
        {
            let kind = format!("@{}", self.f.str(d.path));
            return Ok(self.opaque(kind, start));
        }
        match self.peek() {
            Tok::Fn | Tok::Pub | Tok::Async => {
                let decorators = Seq::push_all(&mut self.f.decorators, decorators);
                Ok(Item::Fn(self.fn_decl(decorators, start)?))
            }
            Tok::Type if decorators.is_empty() => Ok(Item::Type(self.type_decl()?)),
            Tok::Let if decorators.is_empty() => Ok(Item::Const(self.const_decl()?)),
            Tok::Import if decorators.is_empty() => Ok(Item::Import(self.import_decl())),
            Tok::Ident if OPAQUE_KEYWORDS.contains(&self.text()) => {
                let kind = self.text().to_string();
                Ok(self.opaque(kind, start))
            }
            Tok::Lt if decorators.is_empty() => Ok(self.opaque("jsx".to_string(), start)),
            // Real Vox's decorator-headed declarations (`@form Name { … }`, `@push { … }`,
            // `@back_button { … }`).
            Tok::Ident | Tok::TypeIdent | Tok::LBrace
                if decorators.len() == 1
                    && !ROLE_DECORATORS.contains(&self.f.str(decorators[0].path)) =>
            {
                let kind = format!("@{}", self.f.str(decorators[0].path));
                Ok(self.opaque(kind, start))
            }
            _ if !decorators.is_empty() => Err(self.unexpected("`fn` after decorators")),
            t if decorators.is_empty() && starts_expr(t) => self.script_stmt(start),
            _ => Err(self.unexpected("an item (`fn`, `type`, `let` or `import`)")),
        }
    }

    /// A statement at the top level: real Vox runs a file's top-level statements as a script
    /// (a synthetic `main`). They are checked as statements and skipped as one declaration per
    /// run of consecutive statements.
    fn script_stmt(&mut self, start: Span) -> PResult<Item> {
        let _ = self.stmt()?;
        Ok(Item::Opaque(OpaqueItem {
            kind: SCRIPT_KIND.to_string(),
            name: None,
            span: start.to(self.prev_span()),
            broken: false,
        }))
    }

    /// Adds an item; a top-level statement right after another (only blanks or `;` between)
    /// extends its run instead, so a script is one skipped declaration.
    fn push_item(&mut self, item: Item) {
        if let Item::Opaque(o) = &item
            && o.kind == SCRIPT_KIND
            && let Some(Item::Opaque(prev)) = self.f.items.last_mut()
            && prev.kind == SCRIPT_KIND
            && self.src[prev.span.end as usize..o.span.start as usize]
                .bytes()
                .all(|b| b.is_ascii_whitespace() || b == b';')
        {
            prev.span = prev.span.to(o.span);
            return;
        }
        self.f.items.push(item);
    }

    fn decorator(&mut self) -> PResult<Decorator> {
        let at = self.expect(Tok::At, "`@`")?;
        let path_start = self.f.strings.len();
        loop {
            if matches!(self.peek(), Tok::Ident | Tok::TypeIdent | Tok::Type) {
                self.f.strings.push_str(self.text());
                self.bump();
            } else {
                return Err(self.unexpected("a decorator name"));
            }
            if self.at(Tok::Dot) {
                self.bump();
                self.f.strings.push('.');
            } else {
                break;
            }
        }
        let path = StrRef {
            start: path_start as u32,
            len: (self.f.strings.len() - path_start) as u32,
        };
        let span = at.to(self.prev_span());
        let mut args = Vec::new();
        if self.at(Tok::LParen) && !ROLE_DECORATORS.contains(&self.f.str(path)) {
            // Another decorator's arguments mean nothing to the interpreter, whatever their
            // form (`@endpoint(kind: server)`, `@require(x > 0)`): skipped, balanced.
            let open = self.span();
            let mut nest = 0u32;
            loop {
                match self.peek() {
                    Tok::Eof => {
                        self.error(
                            Code::UnexpectedToken,
                            open,
                            "this `(` of decorator arguments is never closed",
                        );
                        return Err(Fail);
                    }
                    Tok::LParen | Tok::LBracket | Tok::LBrace => nest += 1,
                    Tok::RParen | Tok::RBracket | Tok::RBrace => {
                        nest -= 1;
                        if nest == 0 {
                            self.bump();
                            break;
                        }
                    }
                    _ => {}
                }
                self.bump();
            }
        } else if self.at(Tok::LParen) {
            self.bump();
            self.skip_newlines();
            while !self.at(Tok::RParen) {
                args.push(self.decorator_arg()?);
                self.skip_newlines();
                if !self.eat(Tok::Comma) {
                    break;
                }
                self.skip_newlines();
            }
            self.expect(Tok::RParen, "`)` after decorator arguments")?;
        } else {
            while matches!(self.peek(), Tok::Str | Tok::SStr | Tok::RawStr(_)) {
                args.push(self.decorator_arg()?);
            }
        }
        let args = Seq::push_all(&mut self.f.decorator_args, args);
        Ok(Decorator { path, span, args })
    }

    /// Decodes the current string token into one piece of text, interpolation left as
    /// written (`{x}` stays literal text).
    fn plain_string(&mut self) -> (StrRef, Span) {
        let tok = self.bump();
        let slice = &self.src[tok.span.start as usize..tok.span.end as usize];
        let start = self.f.strings.len();
        let mut parts = std::mem::take(&mut self.raw_parts);
        lexer::decode_string(
            tok.kind,
            slice,
            tok.span.start,
            false,
            &mut self.diags,
            &mut self.f.strings,
            &mut parts,
        );
        parts.clear();
        self.raw_parts = parts;
        let text = StrRef {
            start: start as u32,
            len: (self.f.strings.len() - start) as u32,
        };
        (text, tok.span)
    }

    fn decorator_arg(&mut self) -> PResult<DecoratorArg> {
        match self.peek() {
            Tok::Str | Tok::SStr | Tok::RawStr(_) => {
                // Interpolation means nothing in a decorator, so `{x}` stays literal text.
                let (value, span) = self.plain_string();
                Ok(DecoratorArg {
                    value: Some(value),
                    span,
                })
            }
            _ => {
                let e = self.expr()?;
                Ok(DecoratorArg {
                    value: None,
                    span: self.e(e).span,
                })
            }
        }
    }

    /// Skips a declaration outside the subset: up to its balanced closing brace, or to the end
    /// of its line when it has no braces.
    fn opaque(&mut self, kind: String, start: Span) -> Item {
        let mut name = None;
        let mut nest = 0i64;
        let mut seen_brace = false;
        loop {
            let t = self.peek();
            match t {
                Tok::Eof => break,
                Tok::Ident | Tok::TypeIdent if name.is_none() && nest == 0 && !seen_brace => {
                    let text = self.text();
                    if text != kind && !OPAQUE_KEYWORDS.contains(&text) {
                        name = Some(Name {
                            sym: self.intern(text),
                            span: self.span(),
                        });
                    }
                }
                Tok::LBrace => seen_brace = true,
                Tok::Newline if nest <= 0 => {
                    let next = self.peek_past_newlines();
                    let save = self.pos;
                    self.skip_newlines();
                    let starts = next == Tok::Eof || self.at_item_start();
                    self.pos = save;
                    if seen_brace || starts {
                        break;
                    }
                }
                _ => {}
            }
            let mut closed = t == Tok::RBrace;
            match t {
                Tok::LBrace | Tok::LParen | Tok::LBracket => nest += 1,
                Tok::RBrace | Tok::RParen | Tok::RBracket => nest -= 1,
                Tok::Unterminated => {
                    // JSX text such as `Don't` lexes as an unterminated string running to the
                    // end of the line; the braces it swallowed still count.
                    for c in self.text().chars() {
                        match c {
                            '{' => {
                                nest += 1;
                                seen_brace = true;
                            }
                            '}' => {
                                nest -= 1;
                                closed = true;
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
            self.bump();
            if closed && nest <= 0 && seen_brace {
                break;
            }
        }
        Item::Opaque(OpaqueItem {
            kind,
            name,
            span: start.to(self.prev_span()),
            broken: false,
        })
    }

    fn fn_decl(&mut self, decorators: Seq<Decorator>, start: Span) -> PResult<FnDecl> {
        let mut is_pub = false;
        let mut is_async = false;
        loop {
            match self.peek() {
                Tok::Pub => is_pub = true,
                Tok::Async => is_async = true,
                _ => break,
            }
            self.bump();
        }
        self.expect(Tok::Fn, "`fn`")?;
        // Real Vox names functions with a capital too (actor handlers such as
        // `InventoryActor_MergeRequest`).
        let name = if self.at(Tok::TypeIdent) {
            self.name()
        } else {
            self.ident("a function name")?
        };
        let params = self.params()?;
        let ret = self.ret_type()?;
        self.skip_newlines();
        let body = self.block()?;
        let span = start.to(body.span);
        Ok(FnDecl {
            decorators,
            is_pub,
            is_async,
            name,
            params,
            ret,
            body,
            span,
        })
    }

    fn params(&mut self) -> PResult<Seq<Param>> {
        self.expect(Tok::LParen, "`(` to start the parameter list")?;
        let mut params = Vec::new();
        loop {
            self.skip_newlines();
            if self.at(Tok::RParen) {
                break;
            }
            let name = self.ident("a parameter name")?;
            let ty = if self.eat(Tok::Colon) {
                Some(self.type_expr()?)
            } else {
                None
            };
            let default = if self.eat(Tok::Eq) {
                Some(self.expr()?)
            } else {
                None
            };
            params.push(Param { name, ty, default });
            self.skip_newlines();
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.skip_newlines();
        self.expect(Tok::RParen, "`,` or `)` in the parameter list")?;
        Ok(Seq::push_all(&mut self.f.params, params))
    }

    fn ret_type(&mut self) -> PResult<Option<TypeId>> {
        if self.eat(Tok::To) {
            return Ok(Some(self.type_expr()?));
        }
        if self.at(Tok::Arrow) {
            let span = self.bump().span;
            self.diags.push(
                Diagnostic::new(
                    Code::ArrowReturnDeprecated,
                    span,
                    "`->` for return types is deprecated",
                )
                .with_help("write `to Type`"),
            );
            return Ok(Some(self.type_expr()?));
        }
        Ok(None)
    }

    fn type_expr(&mut self) -> PResult<TypeId> {
        let t = self.type_node()?;
        let id = TypeId(self.f.types.len() as u32);
        self.f.types.push(t);
        Ok(id)
    }

    fn type_node(&mut self) -> PResult<TypeExpr> {
        self.enter()?;
        let r = self.type_expr_inner();
        self.leave();
        r
    }

    fn type_expr_inner(&mut self) -> PResult<TypeExpr> {
        match self.peek() {
            Tok::Ident | Tok::TypeIdent => {
                let name = self.name();
                let mut args = Vec::new();
                if self.eat(Tok::LBracket) {
                    loop {
                        self.skip_newlines();
                        if self.at(Tok::RBracket) {
                            break;
                        }
                        if self.at(Tok::Int) {
                            let span = self.bump().span;
                            args.push(TypeExpr::Size { span });
                        } else {
                            args.push(self.type_node()?);
                        }
                        self.skip_newlines();
                        if !self.eat(Tok::Comma) {
                            break;
                        }
                    }
                    self.expect(Tok::RBracket, "`]` to close the type arguments")?;
                }
                let args = Seq::push_all(&mut self.f.types, args);
                Ok(TypeExpr::Named { name, args })
            }
            Tok::Fn => {
                let start = self.bump().span;
                self.expect(Tok::LParen, "`(` in a function type")?;
                let mut params = Vec::new();
                loop {
                    self.skip_newlines();
                    if self.at(Tok::RParen) {
                        break;
                    }
                    params.push(self.type_node()?);
                    if !self.eat(Tok::Comma) {
                        break;
                    }
                }
                self.skip_newlines();
                self.expect(Tok::RParen, "`)` in a function type")?;
                let params = Seq::push_all(&mut self.f.types, params);
                let ret = self.ret_type()?;
                Ok(TypeExpr::Fn {
                    params,
                    ret,
                    span: start.to(self.prev_span()),
                })
            }
            _ => Err(self.unexpected("a type")),
        }
    }

    fn type_decl(&mut self) -> PResult<TypeDecl> {
        let start = self.expect(Tok::Type, "`type`")?;
        let name = if self.at(Tok::TypeIdent) {
            self.name()
        } else {
            return Err(self.unexpected("a type name (starting with an uppercase letter)"));
        };
        let body = if self.eat(Tok::Eq) {
            self.skip_newlines();
            if self.at(Tok::LBrace) {
                TypeBody::Record(self.record_fields()?)
            } else {
                TypeBody::Adt(self.variants()?)
            }
        } else if self.at(Tok::LBrace) {
            TypeBody::Record(self.record_fields()?)
        } else {
            return Err(self.unexpected("`=` or `{` after the type name"));
        };
        Ok(TypeDecl {
            name,
            body,
            span: start.to(self.prev_span()),
        })
    }

    fn variants(&mut self) -> PResult<Seq<VariantDecl>> {
        let mut variants = Vec::new();
        self.eat(Tok::Bar);
        loop {
            self.skip_newlines();
            if !self.at(Tok::TypeIdent) {
                return Err(self.unexpected("a variant name (starting with an uppercase letter)"));
            }
            let name = self.name();
            let mut fields = Vec::new();
            if self.eat(Tok::LParen) {
                let mut index = 0;
                loop {
                    self.skip_newlines();
                    if self.at(Tok::RParen) {
                        break;
                    }
                    fields.push(self.field_decl(Some(index))?);
                    index += 1;
                    self.skip_newlines();
                    if !self.eat(Tok::Comma) {
                        break;
                    }
                }
                self.skip_newlines();
                self.expect(Tok::RParen, "`,` or `)` after a variant field")?;
            }
            let fields = Seq::push_all(&mut self.f.field_decls, fields);
            variants.push(VariantDecl { name, fields });
            if self.peek_past_newlines() == Tok::Bar {
                self.skip_newlines();
                self.bump();
            } else {
                break;
            }
        }
        Ok(Seq::push_all(&mut self.f.variants, variants))
    }

    /// `name: Type`, or a bare type for a positional variant field.
    fn field_decl(&mut self, positional: Option<usize>) -> PResult<FieldDecl> {
        if self.at(Tok::Ident) && self.peek_at(1) == Tok::Colon {
            let name = self.ident("a field name")?;
            self.bump();
            let ty = Some(self.type_expr()?);
            return Ok(FieldDecl { name, ty });
        }
        match positional {
            Some(i) => {
                let ty = self.type_expr()?;
                let span = self.f.ty(ty).span();
                Ok(FieldDecl {
                    name: Name {
                        sym: self.intern(&format!("_{i}")),
                        span,
                    },
                    ty: Some(ty),
                })
            }
            None => {
                let name = self.ident("a field name")?;
                let ty = if self.eat(Tok::Colon) {
                    Some(self.type_expr()?)
                } else {
                    None
                };
                Ok(FieldDecl { name, ty })
            }
        }
    }

    fn record_fields(&mut self) -> PResult<Seq<FieldDecl>> {
        self.expect(Tok::LBrace, "`{`")?;
        let mut fields = Vec::new();
        loop {
            while matches!(self.peek(), Tok::Newline | Tok::Comma | Tok::Semi) {
                self.bump();
            }
            if self.at(Tok::RBrace) || self.at(Tok::Eof) {
                break;
            }
            fields.push(self.field_decl(None)?);
        }
        self.expect(Tok::RBrace, "`}` to close the record type")?;
        Ok(Seq::push_all(&mut self.f.field_decls, fields))
    }

    fn const_decl(&mut self) -> PResult<ConstDecl> {
        let start = self.expect(Tok::Let, "`let`")?;
        if self.at(Tok::Mut) {
            let span = self.bump().span;
            self.error(
                Code::UnexpectedToken,
                span,
                "module constants cannot be `mut`",
            );
        }
        let name = if matches!(self.peek(), Tok::Ident | Tok::TypeIdent) {
            self.name()
        } else {
            return Err(self.unexpected("a constant name"));
        };
        let ty = if self.eat(Tok::Colon) {
            Some(self.type_expr()?)
        } else {
            None
        };
        self.expect(Tok::Eq, "`=` in a constant")?;
        self.skip_newlines();
        let value = self.expr()?;
        self.end_of_stmt()?;
        Ok(ConstDecl {
            name,
            ty,
            span: start.to(self.e(value).span),
            value,
        })
    }

    fn import_decl(&mut self) -> ImportDecl {
        let start = self.bump().span;
        let from = self.pos;
        if let Some(d) = self.import_path(start) {
            return d;
        }
        // Any other form is accepted and kept as the names it brings in (the last segment of
        // each dotted path), with no module to load.
        self.pos = from;
        let mut names = Vec::new();
        // A `{…}` list or an `as` says the author meant a form that loads a file.
        let mut meant_a_module = false;
        while !matches!(self.peek(), Tok::Newline | Tok::Semi | Tok::Eof) {
            meant_a_module |=
                self.peek() == Tok::LBrace || self.peek() == Tok::Ident && self.text() == "as";
            if matches!(self.peek(), Tok::Ident | Tok::TypeIdent)
                && self.peek_at(1) != Tok::Dot
                && self.text() != "as"
                && self.text() != "from"
            {
                names.push(Name {
                    sym: self.intern(self.text()),
                    span: self.span(),
                });
            }
            self.bump();
        }
        let names = Seq::push_all(&mut self.f.names, names);
        let span = start.to(self.prev_span());
        if meant_a_module {
            self.diags.push(
                Diagnostic::new(
                    Code::ImportForm,
                    span,
                    "this import is neither `import a.b.{c, d}` nor `import a.b.c [as e]`, so it loads no file",
                )
                .with_help("separate the names in `{…}` with commas; `as` takes one name"),
            );
        }
        ImportDecl {
            module: Seq::EMPTY,
            items: names,
            names,
            malformed: meant_a_module,
            span,
        }
    }

    /// `import a.b.{c, d as e}` or `import a.b.c [as e]`: the forms that name a module (`a.b`,
    /// the file `a/b.vox`) and items in it. `None` (having consumed tokens) for anything else.
    fn import_path(&mut self, start: Span) -> Option<ImportDecl> {
        let mut path = Vec::new();
        let mut items = Vec::new();
        let mut bound = Vec::new();
        loop {
            if !matches!(self.peek(), Tok::Ident | Tok::TypeIdent) || self.text() == "as" {
                return None;
            }
            path.push(self.name_here());
            self.bump();
            if self.peek() != Tok::Dot {
                break;
            }
            self.bump();
            if self.peek() == Tok::LBrace {
                self.bump();
                loop {
                    while self.peek() == Tok::Newline {
                        self.bump();
                    }
                    if self.peek() == Tok::RBrace {
                        self.bump();
                        break;
                    }
                    if !matches!(self.peek(), Tok::Ident | Tok::TypeIdent) {
                        return None;
                    }
                    let item = self.name_here();
                    self.bump();
                    items.push(item);
                    bound.push(self.import_alias()?.unwrap_or(item));
                    while self.peek() == Tok::Newline {
                        self.bump();
                    }
                    match self.peek() {
                        Tok::Comma => {
                            self.bump();
                        }
                        Tok::RBrace => {}
                        _ => return None,
                    }
                }
                return self.import_end(start, path, items, bound);
            }
        }
        // `import a.b.c`: the last segment is the item.
        if path.len() < 2 {
            return None;
        }
        let item = path.pop()?;
        items.push(item);
        bound.push(self.import_alias()?.unwrap_or(item));
        self.import_end(start, path, items, bound)
    }

    /// An optional `as name`; `None` when `as` is not followed by a name.
    fn import_alias(&mut self) -> Option<Option<Name>> {
        if self.peek() != Tok::Ident || self.text() != "as" {
            return Some(None);
        }
        self.bump();
        if !matches!(self.peek(), Tok::Ident | Tok::TypeIdent) {
            return None;
        }
        let n = self.name_here();
        self.bump();
        Some(Some(n))
    }

    fn import_end(
        &mut self,
        start: Span,
        path: Vec<Name>,
        items: Vec<Name>,
        bound: Vec<Name>,
    ) -> Option<ImportDecl> {
        if !matches!(self.peek(), Tok::Newline | Tok::Semi | Tok::Eof) {
            return None;
        }
        Some(ImportDecl {
            module: Seq::push_all(&mut self.f.names, path),
            items: Seq::push_all(&mut self.f.names, items),
            names: Seq::push_all(&mut self.f.names, bound),
            malformed: false,
            span: start.to(self.prev_span()),
        })
    }

    fn name_here(&mut self) -> Name {
        Name {
            sym: self.intern(self.text()),
            span: self.span(),
        }
    }

    // ---- statements ----------------------------------------------------------------------

    fn block(&mut self) -> PResult<Block> {
        self.enter()?;
        let r = self.block_inner();
        self.leave();
        r
    }

    fn block_inner(&mut self) -> PResult<Block> {
        let open = self.expect(Tok::LBrace, "`{`")?;
        let mut stmts = self.free_stmts.pop().unwrap_or_default();
        let mut height = 1;
        loop {
            while matches!(self.peek(), Tok::Newline | Tok::Semi) {
                self.bump();
            }
            match self.peek() {
                Tok::RBrace => break,
                Tok::Eof => {
                    // An unterminated raw string that ran to the end already explains this.
                    if self.pos == 0 || self.toks[self.pos - 1].kind != Tok::Unterminated {
                        self.unclosed(open);
                    }
                    return Err(Fail);
                }
                // A declaration at the start of a line inside a block means a `}` is missing;
                // stopping here lets the next item parse normally.
                Tok::At | Tok::Type | Tok::Import | Tok::Pub => {
                    self.unclosed(open);
                    return Err(Fail);
                }
                Tok::Fn if self.peek_at(1) == Tok::Ident => {
                    self.unclosed(open);
                    return Err(Fail);
                }
                _ => {}
            }
            let before = self.pos;
            match self.stmt() {
                Ok(s) => {
                    let h = height_of(&self.f, &s);
                    height = height.max(h + 1);
                    stmts.push(s);
                    if self.end_of_stmt().is_err() {
                        self.recover_stmt();
                    }
                }
                Err(Fail) => {
                    self.recover_stmt();
                    if matches!(self.peek(), Tok::RParen | Tok::RBracket | Tok::Comma) {
                        self.bump();
                    }
                }
            }
            if self.pos == before {
                self.bump();
            }
        }
        let close = self.expect(Tok::RBrace, "`}`")?;
        if height > MAX_HEIGHT {
            self.too_deep(open);
            stmts.clear();
            self.free_stmts.push(stmts);
            return Ok(Block {
                stmts: Seq::EMPTY,
                span: open.to(close),
                height: 1,
            });
        }
        let seq = Seq::push_all(&mut self.f.stmts, stmts.drain(..));
        self.free_stmts.push(stmts);
        Ok(Block {
            stmts: seq,
            span: open.to(close),
            height,
        })
    }

    fn unclosed(&mut self, open: Span) {
        self.diags.push(
            Diagnostic::new(Code::UnexpectedToken, open, "this `{` is never closed")
                .with_help("add the missing `}` at the end of the block"),
        );
    }

    fn end_of_stmt(&mut self) -> PResult<()> {
        match self.peek() {
            Tok::Newline | Tok::Semi => {
                self.bump();
                Ok(())
            }
            Tok::RBrace | Tok::Eof => Ok(()),
            _ => Err(self.unexpected("end of line or `;` after the statement")),
        }
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        if self.at(Tok::Let) {
            self.bump();
            let mutable = self.eat(Tok::Mut);
            let target = if self.at(Tok::Ident) {
                Ok(self.ident("a variable name")?)
            } else if matches!(self.peek(), Tok::LParen | Tok::TypeIdent) {
                Err(self.pattern()?)
            } else {
                return Err(self.unexpected("a variable name or a pattern"));
            };
            let ty = if self.eat(Tok::Colon) {
                Some(self.type_expr()?)
            } else {
                None
            };
            self.expect(Tok::Eq, "`=` in `let`")?;
            self.skip_newlines();
            let value = self.expr()?;
            return Ok(match target {
                Ok(name) => Stmt::Let {
                    mutable,
                    name,
                    ty,
                    value,
                },
                Err(pattern) => Stmt::LetPattern {
                    mutable,
                    pattern,
                    ty,
                    value,
                },
            });
        }
        let e = self.expr()?;
        let op = match self.peek() {
            Tok::Eq => None,
            Tok::PlusEq => Some(BinOp::Add),
            Tok::MinusEq => Some(BinOp::Sub),
            Tok::StarEq => Some(BinOp::Mul),
            Tok::SlashEq => Some(BinOp::Div),
            _ => return Ok(Stmt::Expr(e)),
        };
        self.bump();
        self.skip_newlines();
        if !is_place(&self.f, e) {
            self.error(
                Code::InvalidAssignTarget,
                self.e(e).span,
                "only a variable, a field or an index can be assigned to",
            );
        }
        let value = self.expr()?;
        Ok(Stmt::Assign {
            target: e,
            op,
            value,
        })
    }

    // ---- expressions ---------------------------------------------------------------------

    fn expr(&mut self) -> PResult<ExprId> {
        self.expr_bp(0)
    }

    fn expr_bp(&mut self, min_bp: u8) -> PResult<ExprId> {
        self.enter()?;
        let r = self.expr_bp_inner(min_bp);
        self.leave();
        r
    }

    fn infix(&mut self) -> Option<(u8, Option<BinOp>)> {
        // `None` as the operator means the pipe.
        Some(match self.peek() {
            Tok::Pipe => (1, None),
            Tok::Or => (2, Some(BinOp::Or)),
            Tok::BarBar => (2, Some(BinOp::Or)),
            Tok::And => (3, Some(BinOp::And)),
            Tok::AmpAmp => (3, Some(BinOp::And)),
            Tok::EqEq | Tok::Is => (5, Some(BinOp::Eq)),
            Tok::NotEq | Tok::Isnt => (5, Some(BinOp::Ne)),
            Tok::Lt => (5, Some(BinOp::Lt)),
            Tok::Gt => (5, Some(BinOp::Gt)),
            Tok::Le => (5, Some(BinOp::Le)),
            Tok::Ge => (5, Some(BinOp::Ge)),
            Tok::Plus => (6, Some(BinOp::Add)),
            Tok::Minus => (6, Some(BinOp::Sub)),
            Tok::Star => (7, Some(BinOp::Mul)),
            Tok::Slash => (7, Some(BinOp::Div)),
            Tok::Percent => (7, Some(BinOp::Rem)),
            _ => return None,
        })
    }

    fn expr_bp_inner(&mut self, min_bp: u8) -> PResult<ExprId> {
        let mut lhs = self.prefix()?;
        loop {
            // A pipe at the start of the next line continues the expression.
            if self.at(Tok::Newline) && min_bp == 0 && self.peek_past_newlines() == Tok::Pipe {
                self.skip_newlines();
            }
            let Some((bp, op)) = self.infix() else { break };
            if bp <= min_bp {
                break;
            }
            let op_tok = self.bump();
            if matches!(op_tok.kind, Tok::AmpAmp | Tok::BarBar) {
                let (bad, good) = if op_tok.kind == Tok::AmpAmp {
                    ("&&", "and")
                } else {
                    ("||", "or")
                };
                self.diags.push(
                    Diagnostic::new(
                        Code::UnexpectedToken,
                        op_tok.span,
                        format!("`{bad}` is not a Vox operator"),
                    )
                    .with_help(format!("write `{good}`")),
                );
            }
            self.skip_newlines();
            let rhs = self.expr_bp(bp)?;
            let (l, r) = (self.e(lhs), self.e(rhs));
            let span = l.span.to(r.span);
            let height = l.height.max(r.height) + 1;
            let kind = match op {
                Some(op) => ExprKind::Binary(op, lhs, rhs),
                None => ExprKind::Pipe(lhs, rhs),
            };
            lhs = self.mk(kind, span, height);
        }
        Ok(lhs)
    }

    fn prefix(&mut self) -> PResult<ExprId> {
        let op = match self.peek() {
            Tok::Minus => Some((UnOp::Neg, 8)),
            Tok::Bang => Some((UnOp::Not, 8)),
            Tok::Not => Some((UnOp::Not, 4)),
            _ => None,
        };
        if let Some((op, bp)) = op {
            let start = self.bump().span;
            let operand = self.expr_bp(bp)?;
            let o = *self.e(operand);
            // Folding `-<int>` keeps `i64::MIN` expressible and saves a node.
            if op == UnOp::Neg
                && let ExprKind::Int(i) = o.kind
            {
                // The literal's node is replaced in place.
                let id = operand;
                self.f.exprs[id.0 as usize] = Expr {
                    kind: ExprKind::Int(i.wrapping_neg()),
                    span: start.to(o.span),
                    height: 1,
                };
                return Ok(id);
            }
            let span = start.to(o.span);
            let h = o.height + 1;
            return Ok(self.mk(ExprKind::Unary(op, operand), span, h));
        }
        let primary = self.primary()?;
        self.postfix(primary)
    }

    fn postfix(&mut self, mut lhs: ExprId) -> PResult<ExprId> {
        loop {
            if self.at(Tok::Newline) && self.peek_past_newlines() == Tok::Dot {
                self.skip_newlines();
            }
            match self.peek() {
                Tok::LParen => {
                    let args = self.args(Tok::LParen, Tok::RParen)?;
                    let l = *self.e(lhs);
                    let span = l.span.to(self.prev_span());
                    let h = self.max_height(&self.f.expr_lists[args]).max(l.height) + 1;
                    lhs = self.mk(ExprKind::Call(lhs, args), span, h);
                }
                Tok::Dot => {
                    self.bump();
                    let name = if matches!(self.peek(), Tok::Ident | Tok::TypeIdent) {
                        self.name()
                    } else {
                        return Err(self.unexpected("a field or method name after `.`"));
                    };
                    if self.at(Tok::LParen) {
                        let args = self.args(Tok::LParen, Tok::RParen)?;
                        let l = *self.e(lhs);
                        let span = l.span.to(self.prev_span());
                        let h = self.max_height(&self.f.expr_lists[args]).max(l.height) + 1;
                        lhs = self.mk(ExprKind::Method(lhs, name, args), span, h);
                    } else {
                        let l = *self.e(lhs);
                        let span = l.span.to(name.span);
                        let h = l.height + 1;
                        lhs = self.mk(ExprKind::Field(lhs, name), span, h);
                    }
                }
                Tok::LBracket => {
                    self.bump();
                    self.skip_newlines();
                    let index = self.expr()?;
                    self.skip_newlines();
                    self.expect(Tok::RBracket, "`]` after the index")?;
                    let l = *self.e(lhs);
                    let span = l.span.to(self.prev_span());
                    let h = l.height.max(self.e(index).height) + 1;
                    lhs = self.mk(ExprKind::Index(lhs, index), span, h);
                }
                Tok::Question => {
                    let q = self.bump().span;
                    let l = *self.e(lhs);
                    let span = l.span.to(q);
                    let h = l.height + 1;
                    lhs = self.mk(ExprKind::Try(lhs), span, h);
                }
                // Real Vox's durable-execution options: `call() with { retries: 2 }`.
                Tok::Ident if self.text() == "with" && self.peek_at(1) == Tok::LBrace => {
                    self.bump();
                    let opts = self.record()?;
                    let l = *self.e(lhs);
                    let span = l.span.to(self.e(opts).span);
                    let h = l.height.max(self.e(opts).height) + 1;
                    lhs = self.mk(ExprKind::With(lhs, opts), span, h);
                }
                _ => return Ok(lhs),
            }
        }
    }

    /// A comma-separated list between `open` and `close`; newlines are free inside.
    fn args(&mut self, open: Tok, close: Tok) -> PResult<Seq<ExprId>> {
        self.expect(open, "`(`")?;
        let mut args = self.ids();
        loop {
            self.skip_newlines();
            if self.at(close) {
                break;
            }
            args.push(self.expr()?);
            self.skip_newlines();
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.skip_newlines();
        let what = if close == Tok::RParen {
            "`,` or `)`"
        } else {
            "`,` or `]`"
        };
        self.expect(close, what)?;
        Ok(self.finish_ids(args))
    }

    fn string(&mut self) -> ExprId {
        let tok = self.bump();
        let slice = &self.src[tok.span.start as usize..tok.span.end as usize];
        let mut raw = std::mem::take(&mut self.raw_parts);
        lexer::decode_string(
            tok.kind,
            slice,
            tok.span.start,
            true,
            &mut self.diags,
            &mut self.f.strings,
            &mut raw,
        );
        let start = self.f.str_parts.len();
        for p in raw.drain(..) {
            let part = match p {
                RawPart::Text(t) => StrPart::Text(t),
                RawPart::Var(span) => {
                    let text = &self.src[span.start as usize..span.end as usize];
                    StrPart::Var(self.interner.intern(&mut self.f, text), span)
                }
            };
            self.f.str_parts.push(part);
        }
        self.raw_parts = raw;
        let parts = Seq::since(start, &self.f.str_parts);
        self.mk(ExprKind::Str(parts), tok.span, 1)
    }

    fn primary(&mut self) -> PResult<ExprId> {
        let span = self.span();
        match self.peek() {
            Tok::Int => {
                let text = self.text();
                let digits: std::borrow::Cow<str> = if text.contains('_') {
                    text.replace('_', "").into()
                } else {
                    text.into()
                };
                self.bump();
                let v = match digits.parse::<i64>() {
                    Ok(v) => v,
                    // `-9223372036854775808` is folded by `prefix`; the positive literal wraps
                    // to MIN here and negates back to MIN there.
                    Err(_) if digits == "9223372036854775808" => i64::MIN,
                    Err(_) => {
                        self.error(
                            Code::NumberOutOfRange,
                            span,
                            "integer literal does not fit in 64 bits",
                        );
                        0
                    }
                };
                Ok(self.mk(ExprKind::Int(v), span, 1))
            }
            Tok::Float => {
                let text = self.text();
                let digits: std::borrow::Cow<str> = if text.contains('_') {
                    text.replace('_', "").into()
                } else {
                    text.into()
                };
                self.bump();
                let v = digits.parse::<f64>().unwrap_or(0.0);
                if !v.is_finite() {
                    self.error(Code::NumberOutOfRange, span, "float literal is too large");
                }
                Ok(self.mk(ExprKind::Float(v), span, 1))
            }
            Tok::Dec => {
                let text = self.text();
                let start = self.f.strings.len();
                self.f.strings.push_str(&text[..text.len() - 3]);
                let digits = StrRef {
                    start: start as u32,
                    len: (self.f.strings.len() - start) as u32,
                };
                self.bump();
                Ok(self.mk(ExprKind::Dec(digits), span, 1))
            }
            Tok::Str | Tok::SStr | Tok::RawStr(_) => Ok(self.string()),
            Tok::Unterminated => {
                self.bump();
                Ok(self.mk(ExprKind::Error, span, 1))
            }
            Tok::True | Tok::False => {
                let b = self.bump().kind == Tok::True;
                Ok(self.mk(ExprKind::Bool(b), span, 1))
            }
            Tok::Ident if self.peek_at(1) == Tok::FatArrow => self.lambda(span),
            Tok::LParen if self.lambda_params_ahead() => self.lambda(span),
            Tok::Ident => {
                let name = self.name();
                Ok(self.mk(ExprKind::Var(name.sym), span, 1))
            }
            // `Order { customer: "Ada" }`: a record (the type name documents it).
            Tok::TypeIdent if self.peek_at(1) == Tok::LBrace && self.typed_record_ahead() => {
                self.bump();
                self.record()
            }
            Tok::TypeIdent => {
                let name = self.name();
                Ok(self.mk(ExprKind::Upper(name.sym), span, 1))
            }
            Tok::LParen => {
                self.bump();
                self.skip_newlines();
                if self.at(Tok::RParen) {
                    let close = self.bump().span;
                    let block = Block {
                        stmts: Seq::EMPTY,
                        span: span.to(close),
                        height: 1,
                    };
                    return Ok(self.mk(ExprKind::Block(block), span.to(close), 2));
                }
                let e = self.expr()?;
                self.skip_newlines();
                if self.at(Tok::Comma) {
                    // Real Vox's tuple `(a, b)`: a list here.
                    let mut items = vec![e];
                    while self.eat(Tok::Comma) {
                        self.skip_newlines();
                        if self.at(Tok::RParen) {
                            break;
                        }
                        items.push(self.expr()?);
                        self.skip_newlines();
                    }
                    let close = self.expect(Tok::RParen, "`,` or `)` in the tuple")?;
                    let h = self.max_height(&items) + 1;
                    let items = Seq::push_all(&mut self.f.expr_lists, items);
                    return Ok(self.mk(ExprKind::List(items), span.to(close), h));
                }
                let close = self.expect(Tok::RParen, "`)`")?;
                self.f.exprs[e.0 as usize].span = span.to(close);
                Ok(e)
            }
            Tok::LBracket => {
                let items = self.args(Tok::LBracket, Tok::RBracket)?;
                let span = span.to(self.prev_span());
                let h = self.max_height(&self.f.expr_lists[items]) + 1;
                Ok(self.mk(ExprKind::List(items), span, h))
            }
            Tok::LBrace => {
                if self.looks_like_record() {
                    self.record()
                } else {
                    let b = self.block()?;
                    let (h, sp) = (bh(&b) + 1, b.span);
                    Ok(self.mk(ExprKind::Block(b), sp, h))
                }
            }
            Tok::If => self.if_expr(),
            Tok::Match => self.match_expr(),
            Tok::While => {
                self.bump();
                let cond = self.expr()?;
                self.skip_newlines();
                let body = self.block()?;
                let h = self.e(cond).height.max(bh(&body)) + 1;
                let span = span.to(body.span);
                Ok(self.mk(ExprKind::While(cond, body), span, h))
            }
            Tok::Loop => {
                self.bump();
                self.skip_newlines();
                let body = self.block()?;
                let h = bh(&body) + 1;
                let span = span.to(body.span);
                Ok(self.mk(ExprKind::Loop(body), span, h))
            }
            Tok::For => {
                self.bump();
                let var = self.ident("a loop variable")?;
                let index = if self.eat(Tok::Comma) {
                    Some(self.ident("an index variable")?)
                } else {
                    None
                };
                self.expect(Tok::In, "`in`")?;
                let iter = self.expr()?;
                self.skip_newlines();
                let body = self.block()?;
                let h = self.e(iter).height.max(bh(&body)) + 1;
                let span = span.to(body.span);
                let id = self.f.fors.len() as u32;
                self.f.fors.push(ForLoop {
                    var,
                    index,
                    iter,
                    body,
                });
                Ok(self.mk(ExprKind::For(id), span, h))
            }
            Tok::Break => {
                self.bump();
                Ok(self.mk(ExprKind::Break, span, 1))
            }
            Tok::Continue => {
                self.bump();
                Ok(self.mk(ExprKind::Continue, span, 1))
            }
            Tok::Return | Tok::Ret => {
                let tok = self.bump();
                if tok.kind == Tok::Ret {
                    self.diags.push(
                        Diagnostic::new(Code::RetDeprecated, tok.span, "`ret` is deprecated")
                            .with_help("write `return`"),
                    );
                }
                if matches!(
                    self.peek(),
                    Tok::Newline | Tok::Semi | Tok::RBrace | Tok::Eof | Tok::Comma | Tok::RParen
                ) {
                    return Ok(self.mk(ExprKind::Return(None), span, 1));
                }
                let value = self.expr()?;
                let v = self.e(value);
                let h = v.height + 1;
                let span = span.to(v.span);
                Ok(self.mk(ExprKind::Return(Some(value)), span, h))
            }
            Tok::Fn => {
                self.bump();
                let params = self.params()?;
                let ret = self.ret_type()?;
                self.skip_newlines();
                let body = self.block()?;
                let h = self.f.params[params]
                    .iter()
                    .filter_map(|p| p.default.map(|d| self.e(d).height))
                    .max()
                    .unwrap_or(0)
                    .max(bh(&body))
                    + 1;
                let span = span.to(body.span);
                let id = self.f.closures.len() as u32;
                self.f.closures.push(Closure { params, ret, body });
                Ok(self.mk(ExprKind::Closure(id), span, h))
            }
            _ => Err(self.unexpected("an expression")),
        }
    }

    /// Whether `( a, b ) =>` starts here: real Vox's lambda with a parameter list.
    fn lambda_params_ahead(&self) -> bool {
        let mut i = self.pos + 1;
        let mut want_name = true;
        loop {
            match self.toks[i].kind {
                Tok::RParen => return self.toks[i + 1].kind == Tok::FatArrow,
                Tok::Ident if want_name => want_name = false,
                Tok::Comma if !want_name => want_name = true,
                _ => return false,
            }
            i += 1;
        }
    }

    /// `x => expr` or `(a, b) => expr`: a closure whose body is the expression.
    fn lambda(&mut self, span: Span) -> PResult<ExprId> {
        let mut params = Vec::new();
        if self.eat(Tok::LParen) {
            while !self.eat(Tok::RParen) {
                let name = self.name();
                params.push(Param {
                    name,
                    ty: None,
                    default: None,
                });
                self.eat(Tok::Comma);
            }
        } else {
            let name = self.name();
            params.push(Param {
                name,
                ty: None,
                default: None,
            });
        }
        self.expect(Tok::FatArrow, "`=>`")?;
        self.skip_newlines();
        let e = self.expr()?;
        let body_span = self.e(e).span;
        let h = self.e(e).height + 1;
        let stmts = Seq::push_all(&mut self.f.stmts, [Stmt::Expr(e)]);
        let body = Block {
            stmts,
            span: body_span,
            height: h,
        };
        let params = Seq::push_all(&mut self.f.params, params);
        let id = self.f.closures.len() as u32;
        self.f.closures.push(Closure {
            params,
            ret: None,
            body,
        });
        Ok(self.mk(ExprKind::Closure(id), span.to(body_span), h + 1))
    }

    /// At `Name {`: whether a non-empty record follows (`Name { field: … }`).
    fn typed_record_ahead(&self) -> bool {
        let mut i = self.pos + 2;
        while self.toks[i].kind == Tok::Newline {
            i += 1;
        }
        matches!(self.toks[i].kind, Tok::Ident | Tok::Str | Tok::SStr)
            && self.toks.get(i + 1).map(|t| t.kind) == Some(Tok::Colon)
    }

    fn looks_like_record(&self) -> bool {
        let mut i = self.pos + 1;
        while self.toks[i].kind == Tok::Newline {
            i += 1;
        }
        match self.toks[i].kind {
            Tok::RBrace => true,
            Tok::Ident | Tok::TypeIdent | Tok::Str | Tok::SStr => {
                self.toks.get(i + 1).map(|t| t.kind) == Some(Tok::Colon)
            }
            _ => false,
        }
    }

    fn record(&mut self) -> PResult<ExprId> {
        self.enter()?;
        let r = self.record_inner();
        self.leave();
        r
    }

    fn record_inner(&mut self) -> PResult<ExprId> {
        let open = self.expect(Tok::LBrace, "`{`")?;
        let mut fields = Vec::new();
        loop {
            self.skip_newlines();
            if self.at(Tok::RBrace) {
                break;
            }
            let name = match self.peek() {
                Tok::Ident | Tok::TypeIdent => self.name(),
                Tok::Str | Tok::SStr => {
                    let (text, span) = self.plain_string();
                    let text = &self.f.strings[text.start as usize..][..text.len as usize];
                    // The key's text is already in the arena; interning copies it once more
                    // only when it is new, which is rare enough not to matter.
                    let text = text.to_owned();
                    Name {
                        sym: self.intern(&text),
                        span,
                    }
                }
                _ => return Err(self.unexpected("a field name")),
            };
            self.expect(Tok::Colon, "`:` after the field name")?;
            self.skip_newlines();
            let value = self.expr()?;
            fields.push((name, value));
            self.skip_newlines();
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.skip_newlines();
        let close = self.expect(Tok::RBrace, "`,` or `}` in the record")?;
        let h = fields
            .iter()
            .map(|&(_, e)| self.e(e).height)
            .max()
            .unwrap_or(0)
            + 1;
        let fields = Seq::push_all(&mut self.f.fields, fields);
        Ok(self.mk(ExprKind::Record(fields), open.to(close), h))
    }

    fn if_expr(&mut self) -> PResult<ExprId> {
        self.enter()?;
        let r = self.if_inner();
        self.leave();
        r
    }

    fn if_inner(&mut self) -> PResult<ExprId> {
        let start = self.expect(Tok::If, "`if`")?;
        let cond = self.expr()?;
        self.skip_newlines();
        let then = self.block()?;
        let mut h = self.e(cond).height.max(bh(&then));
        let mut end = then.span;
        let otherwise = if self.peek_past_newlines() == Tok::Else {
            self.skip_newlines();
            self.bump();
            self.skip_newlines();
            let e = if self.at(Tok::If) {
                self.if_expr()?
            } else {
                let b = self.block()?;
                let (hb, sp) = (bh(&b) + 1, b.span);
                self.mk(ExprKind::Block(b), sp, hb)
            };
            h = h.max(self.e(e).height);
            end = self.e(e).span;
            Some(e)
        } else {
            None
        };
        Ok(self.mk(ExprKind::If(cond, then, otherwise), start.to(end), h + 1))
    }

    fn match_expr(&mut self) -> PResult<ExprId> {
        let start = self.expect(Tok::Match, "`match`")?;
        let scrutinee = self.expr()?;
        self.skip_newlines();
        self.expect(Tok::LBrace, "`{` after the match value")?;
        let mut arms = Vec::new();
        let mut h = self.e(scrutinee).height;
        loop {
            while matches!(self.peek(), Tok::Newline | Tok::Comma | Tok::Semi) {
                self.bump();
            }
            if self.at(Tok::RBrace) || self.at(Tok::Eof) {
                break;
            }
            let before = self.pos;
            match self.arm() {
                Ok(arm) => {
                    h = h.max(self.e(arm.body).height);
                    arms.push(arm);
                }
                Err(Fail) => self.recover_stmt(),
            }
            if self.pos == before {
                self.bump();
            }
        }
        let close = self.expect(Tok::RBrace, "`}` to close the match")?;
        let arms = Seq::push_all(&mut self.f.arms, arms);
        Ok(self.mk(ExprKind::Match(scrutinee, arms), start.to(close), h + 1))
    }

    fn arm(&mut self) -> PResult<Arm> {
        let pat = self.pattern()?;
        match self.peek() {
            Tok::FatArrow => {
                self.bump();
            }
            Tok::Arrow => {
                let span = self.bump().span;
                self.diags.push(
                    Diagnostic::new(Code::ArrowMatchArm, span, "match arms use `=>`, not `->`")
                        .with_help("write `=>`"),
                );
            }
            _ => return Err(self.unexpected("`=>` after the pattern")),
        }
        self.skip_newlines();
        let body = self.expr()?;
        if !matches!(
            self.peek(),
            Tok::Newline | Tok::Comma | Tok::Semi | Tok::RBrace
        ) {
            return Err(self.unexpected("`,` or a new line after the match arm"));
        }
        Ok(Arm { pat, body })
    }

    fn pattern(&mut self) -> PResult<Pattern> {
        self.enter()?;
        let r = self.pattern_inner();
        self.leave();
        r
    }

    fn pattern_inner(&mut self) -> PResult<Pattern> {
        let span = self.span();
        match self.peek() {
            Tok::Ident => {
                let name = self.name();
                if name.sym == Sym::UNDERSCORE {
                    Ok(Pattern::Wild(span))
                } else {
                    Ok(Pattern::Bind(name))
                }
            }
            Tok::Int | Tok::Minus | Tok::Float => {
                let id = self.prefix()?;
                let e = *self.e(id);
                match e.kind {
                    ExprKind::Int(i) => Ok(Pattern::Int(i, e.span)),
                    ExprKind::Float(f) => Ok(Pattern::Float(f, e.span)),
                    ExprKind::Unary(UnOp::Neg, inner) => match self.e(inner).kind {
                        ExprKind::Float(f) => Ok(Pattern::Float(-f, e.span)),
                        _ => {
                            self.error(Code::UnexpectedToken, e.span, "expected a pattern");
                            Err(Fail)
                        }
                    },
                    _ => {
                        self.error(Code::UnexpectedToken, e.span, "expected a pattern");
                        Err(Fail)
                    }
                }
            }
            Tok::Str | Tok::SStr | Tok::RawStr(_) => {
                let (text, _) = self.plain_string();
                Ok(Pattern::Str(text, span))
            }
            Tok::True | Tok::False => Ok(Pattern::Bool(self.bump().kind == Tok::True, span)),
            Tok::TypeIdent => {
                let name = self.name();
                let mut args = Vec::new();
                if self.eat(Tok::LParen) {
                    loop {
                        self.skip_newlines();
                        if self.at(Tok::RParen) {
                            break;
                        }
                        args.push(self.pattern()?);
                        self.skip_newlines();
                        if !self.eat(Tok::Comma) {
                            break;
                        }
                    }
                    self.expect(Tok::RParen, "`,` or `)` in the pattern")?;
                }
                let args = Seq::push_all(&mut self.f.patterns, args);
                Ok(Pattern::Ctor(name, args))
            }
            Tok::LParen => {
                // A tuple pattern `(p, q)`: matches a list of that many items.
                self.bump();
                let mut items = Vec::new();
                loop {
                    self.skip_newlines();
                    if self.at(Tok::RParen) {
                        break;
                    }
                    items.push(self.pattern()?);
                    self.skip_newlines();
                    if !self.eat(Tok::Comma) {
                        break;
                    }
                }
                let close = self.expect(Tok::RParen, "`,` or `)` in the tuple pattern")?;
                let items = Seq::push_all(&mut self.f.patterns, items);
                Ok(Pattern::Tuple(items, span.to(close)))
            }
            Tok::Unterminated => {
                self.bump();
                Ok(Pattern::Error(span))
            }
            _ => Err(self.unexpected("a pattern")),
        }
    }
}

fn is_place(f: &File, e: ExprId) -> bool {
    match f.expr(e).kind {
        ExprKind::Var(_) => true,
        ExprKind::Field(inner, _) | ExprKind::Index(inner, _) => is_place(f, inner),
        _ => false,
    }
}

/// Whether a token can start a statement that is not a declaration (a top-level statement).
fn starts_expr(t: Tok) -> bool {
    matches!(
        t,
        Tok::Int
            | Tok::Float
            | Tok::Dec
            | Tok::Str
            | Tok::SStr
            | Tok::RawStr(_)
            | Tok::True
            | Tok::False
            | Tok::Ident
            | Tok::TypeIdent
            | Tok::LParen
            | Tok::LBracket
            | Tok::If
            | Tok::Match
            | Tok::While
            | Tok::Loop
            | Tok::For
            | Tok::Return
            | Tok::Ret
            | Tok::Minus
            | Tok::Bang
            | Tok::Not
    )
}

/// How many `@tool` / `@mcp.tool` decorators `src` holds, counted on tokens so that a
/// declaration too broken to parse still counts (`vox check --json` compares it with the
/// tools that load).
pub fn declared_tools(src: &str) -> usize {
    let (toks, _) = lexer::lex(src);
    let text = |t: &Token| &src[t.span.start as usize..t.span.end as usize];
    toks.windows(4)
        .filter(|w| {
            w[0].kind == Tok::At
                && (text(&w[1]) == "tool" && w[2].kind != Tok::Dot
                    || text(&w[1]) == "mcp" && w[2].kind == Tok::Dot && text(&w[3]) == "tool")
        })
        .count()
}
