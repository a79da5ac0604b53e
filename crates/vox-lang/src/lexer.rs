//! The `logos` lexer and string-literal decoding.
//!
//! The lexer never fails: a character it does not know becomes a diagnostic and is skipped, so
//! the parser always gets a token stream. Newlines are tokens because they end statements.

use crate::ast::StrRef;
use crate::diag::{Code, Diagnostic, Span};
use logos::Logos;

/// Token kinds (each spelled by its attribute). Literal values are decoded by the parser from
/// the source slice.
#[allow(missing_docs)]
#[derive(Logos, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[logos(skip r"[ \t\r\f]+")]
// Both comment forms in one pattern: `// …` and `# …` run to the end of the line.
#[logos(skip(r"(//|#)[^\n]*", allow_greedy = true))]
pub enum Tok {
    #[token("fn")]
    Fn,
    #[token("let")]
    Let,
    #[token("mut")]
    Mut,
    #[token("if")]
    If,
    #[token("else")]
    Else,
    #[token("while")]
    While,
    #[token("loop")]
    Loop,
    #[token("for")]
    For,
    #[token("in")]
    In,
    #[token("break")]
    Break,
    #[token("continue")]
    Continue,
    #[token("return")]
    Return,
    #[token("ret")]
    Ret,
    #[token("match")]
    Match,
    #[token("type")]
    Type,
    #[token("to")]
    To,
    #[token("and")]
    And,
    #[token("or")]
    Or,
    #[token("not")]
    Not,
    #[token("is")]
    Is,
    #[token("isnt")]
    Isnt,
    #[token("true")]
    True,
    #[token("false")]
    False,
    #[token("import")]
    Import,
    #[token("pub")]
    Pub,
    #[token("async")]
    Async,

    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    #[token(";")]
    Semi,
    #[token(".")]
    Dot,
    #[token("@")]
    At,
    #[token("?")]
    Question,
    #[token("|")]
    Bar,
    #[token("|>")]
    Pipe,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("%")]
    Percent,
    #[token("==")]
    EqEq,
    #[token("!=")]
    NotEq,
    #[token("<")]
    Lt,
    #[token(">")]
    Gt,
    #[token("<=")]
    Le,
    #[token(">=")]
    Ge,
    #[token("!")]
    Bang,
    #[token("=")]
    Eq,
    #[token("+=")]
    PlusEq,
    #[token("-=")]
    MinusEq,
    #[token("*=")]
    StarEq,
    #[token("/=")]
    SlashEq,
    #[token("=>")]
    FatArrow,
    #[token("->")]
    Arrow,
    /// `&&`, accepted only to say "use `and`".
    #[token("&&")]
    AmpAmp,
    /// `||`, accepted only to say "use `or`".
    #[token("||")]
    BarBar,

    #[token("\n")]
    Newline,

    #[regex(r"[0-9][0-9_]*")]
    Int,
    #[regex(r"[0-9][0-9_]*\.[0-9][0-9_]*([eE][+-]?[0-9]+)?")]
    Float,
    /// `0.1dec`, `100dec`: an exact decimal.
    #[regex(r"[0-9][0-9_]*(\.[0-9][0-9_]*)?dec")]
    Dec,
    /// `"…"` (may interpolate).
    #[regex(r#""([^"\\\n]|\\[^\n])*""#)]
    Str,
    /// `'…'`.
    #[regex(r#"'([^'\\\n]|\\[^\n])*'"#)]
    SStr,
    /// `r"…"` or `r#"…"#`; the flag says whether the closing delimiter was found.
    #[regex(r##"r#*""##, lex_raw)]
    RawStr(bool),
    /// A quote with no closing quote on its line.
    #[regex(r#""([^"\\\n]|\\[^\n])*\\?"#)]
    #[regex(r#"'([^'\\\n]|\\[^\n])*\\?"#)]
    Unterminated,

    #[regex(r"[a-z_][A-Za-z0-9_]*")]
    Ident,
    #[regex(r"[A-Z][A-Za-z0-9_]*")]
    TypeIdent,

    /// End of input (added by [`lex`], never produced by logos).
    Eof,
}

/// Finds the closing `"###` that matches the opening hashes; raw strings may span lines.
fn lex_raw(lex: &mut logos::Lexer<Tok>) -> bool {
    let hashes = lex.slice().len() - 2;
    let rest = lex.remainder();
    let bytes = rest.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'"'
            && bytes[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&b| b == b'#')
                .count()
                == hashes
            && bytes.len() >= i + 1 + hashes
        {
            lex.bump(i + 1 + hashes);
            return true;
        }
        i += 1;
    }
    lex.bump(rest.len());
    false
}

/// One token with its byte span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// Kind.
    pub kind: Tok,
    /// Where in the source.
    pub span: Span,
}

/// Lexes `src` into tokens (ending with `Eof`) and diagnostics for what could not be lexed.
pub fn lex(src: &str) -> (Vec<Token>, Vec<Diagnostic>) {
    // Typical code has a token every three to four bytes; over-reserving costs only address
    // space, while regrowing a large vector copies it.
    let mut tokens = Vec::with_capacity(src.len() / 3 + 16);
    let mut diags = Vec::new();
    let mut lexer = Tok::lexer(src);
    while let Some(res) = lexer.next() {
        let span = Span::new(lexer.span().start, lexer.span().end);
        match res {
            Ok(Tok::Unterminated) => {
                diags.push(
                    Diagnostic::new(Code::UnterminatedString, span, "unterminated string literal")
                        .with_help("close the string on the same line, or use a raw string r\"…\" to span lines"),
                );
                tokens.push(Token {
                    kind: Tok::Unterminated,
                    span,
                });
            }
            Ok(Tok::RawStr(false)) => {
                diags.push(Diagnostic::new(
                    Code::UnterminatedString,
                    Span::new(
                        span.start as usize,
                        span.start as usize
                            + 1
                            + lexer
                                .slice()
                                .bytes()
                                .skip(1)
                                .take_while(|&b| b == b'#')
                                .count()
                            + 1,
                    ),
                    "unterminated raw string literal",
                ));
                tokens.push(Token {
                    kind: Tok::Unterminated,
                    span,
                });
            }
            Ok(kind) => tokens.push(Token { kind, span }),
            Err(()) => {
                let ch = lexer.slice().chars().next().unwrap_or('?');
                // U+FFFD stands for invalid UTF-8 that was already reported when decoding.
                if ch != '\u{FFFD}' {
                    diags.push(Diagnostic::new(
                        Code::UnexpectedChar,
                        span,
                        format!("unexpected character {ch:?}"),
                    ));
                }
            }
        }
    }
    let end = Span::new(src.len(), src.len());
    tokens.push(Token {
        kind: Tok::Eof,
        span: end,
    });
    (tokens, diags)
}

/// A piece of a decoded string literal, as [`decode_string`] produces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawPart {
    /// Literal text, in the arena given to [`decode_string`].
    Text(StrRef),
    /// `{name}` interpolation: the span of `name`.
    Var(Span),
}

/// Decodes a string token's slice (quotes included), reporting bad escapes: the decoded text
/// is appended to `arena` and the pieces to `parts`.
///
/// `"…"` strings interpolate `{identifier}` when `interpolate` is set; any other `{` is literal
/// text, so JSON-looking strings need no escaping. Without `interpolate`, `{name}` stays text.
pub fn decode_string(
    kind: Tok,
    slice: &str,
    start: u32,
    interpolate: bool,
    diags: &mut Vec<Diagnostic>,
    arena: &mut String,
    parts: &mut Vec<RawPart>,
) {
    let text_since = |arena: &String, from: usize| StrRef {
        start: from as u32,
        len: (arena.len() - from) as u32,
    };
    match kind {
        Tok::RawStr(_) => {
            let hashes = slice[1..].bytes().take_while(|&b| b == b'#').count();
            let body = &slice[2 + hashes..slice.len() - 1 - hashes];
            parts.push(RawPart::Text(StrRef::push(arena, body)));
        }
        _ => {
            let interpolate = interpolate && kind == Tok::Str;
            let body = &slice[1..slice.len() - 1];
            // Most literals have no escape and no brace: their text is the slice.
            if !body
                .bytes()
                .any(|b| b == b'\\' || (interpolate && b == b'{'))
            {
                parts.push(RawPart::Text(StrRef::push(arena, body)));
                return;
            }
            let base = start as usize + 1;
            let first_part = parts.len();
            let mut text_start = arena.len();
            let mut chars = body.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        let Some((j, e)) = chars.next() else { break };
                        let decoded = match e {
                            'n' => '\n',
                            't' => '\t',
                            'r' => '\r',
                            '\\' => '\\',
                            '"' => '"',
                            '\'' => '\'',
                            '0' => '\0',
                            '{' => '{',
                            '}' => '}',
                            other => {
                                diags.push(
                                    Diagnostic::new(
                                        Code::InvalidEscape,
                                        Span::new(base + i, base + j + other.len_utf8()),
                                        format!("unknown escape `\\{other}`"),
                                    )
                                    .with_help(r#"valid escapes are \n \t \r \\ \" \' \0 \{ \}"#),
                                );
                                other
                            }
                        };
                        arena.push(decoded);
                    }
                    '{' if interpolate => {
                        let rest = &body[i + 1..];
                        let name_len = rest
                            .bytes()
                            .enumerate()
                            .take_while(|&(k, b)| {
                                if k == 0 {
                                    b.is_ascii_lowercase() || b == b'_'
                                } else {
                                    b.is_ascii_alphanumeric() || b == b'_'
                                }
                            })
                            .count();
                        if name_len > 0 && rest.as_bytes().get(name_len) == Some(&b'}') {
                            if arena.len() > text_start {
                                parts.push(RawPart::Text(text_since(arena, text_start)));
                            }
                            let s = base + i + 1;
                            parts.push(RawPart::Var(Span::new(s, s + name_len)));
                            for _ in 0..=name_len {
                                chars.next();
                            }
                            text_start = arena.len();
                        } else {
                            arena.push('{');
                        }
                    }
                    c => arena.push(c),
                }
            }
            if arena.len() > text_start || parts.len() == first_part {
                parts.push(RawPart::Text(text_since(arena, text_start)));
            }
        }
    }
}
