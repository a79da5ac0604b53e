//! The lowered program: names resolved to slots and globals, decorators interpreted, pipes and
//! interpolation desugared. It holds no interior mutability and no `Rc`, so a
//! [`crate::Module`] built from it is `Send + Sync`.

pub use crate::ast::{BinOp, Seq, StrRef, UnOp};
use crate::diag::Span;
use serde::Serialize;

/// Index of a function body in [`Program::bodies`].
pub type BodyId = u32;

/// Index of an expression in [`Program::exprs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExprId(pub u32);

/// A declared type, as far as the interpreter and JSON schemas care.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ty {
    /// No annotation, or a type that constrains nothing at the boundary.
    Any,
    /// `int`
    Int,
    /// `float`
    Float,
    /// `dec`
    Dec,
    /// `str`
    Str,
    /// `bool`
    Bool,
    /// `Unit`
    Unit,
    /// `list[T]`
    List {
        /// Element type.
        of: Box<Ty>,
    },
    /// `Map[K, V]`
    Map {
        /// Key type.
        key: Box<Ty>,
        /// Value type.
        value: Box<Ty>,
    },
    /// `Option[T]`
    Option {
        /// Inner type.
        of: Box<Ty>,
    },
    /// `Result[T, E]`
    Result {
        /// Success type.
        ok: Box<Ty>,
        /// Error type.
        err: Box<Ty>,
    },
    /// A user type (record or ADT), by index into [`Program::types`].
    User {
        /// Name.
        name: String,
        /// Index.
        index: u32,
    },
    /// `fn(A) to B`
    Fn {
        /// Parameter types.
        params: Vec<Ty>,
        /// Result type.
        ret: Box<Ty>,
    },
}

/// What a function is for, from its decorator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FnRole {
    /// No decorator: callable from other functions (and from `vox run`).
    Plain,
    /// `@tool` (or the deprecated `@mcp.tool`).
    Tool {
        /// Description string, if given.
        description: Option<String>,
        /// `true` when written `@mcp.tool`.
        deprecated_spelling: bool,
    },
    /// `@mcp.resource("uri", "description")`.
    Resource {
        /// Resource URI.
        uri: String,
        /// Description, if given.
        description: Option<String>,
    },
    /// `@mcp.prompt ["description"]`: an MCP prompt; its parameters are the prompt's
    /// arguments (strings).
    Prompt {
        /// Description string, if given.
        description: Option<String>,
    },
    /// `@complete("arg")`: completes the prompt argument or template variable `arg` of the
    /// prompts and templates of its file; called with the text typed so far, returns the
    /// suggestions (a list of strings).
    Complete {
        /// The argument it completes.
        argument: String,
    },
    /// `@test ["label"]`.
    Test {
        /// Label, if given.
        label: Option<String>,
    },
}

/// A parameter's signature.
#[derive(Clone, Debug, Serialize)]
pub struct ParamSig {
    /// Name.
    pub name: String,
    /// Declared type (`Any` when unannotated).
    pub ty: Ty,
    /// Whether a default exists (then the argument is optional).
    pub has_default: bool,
}

/// A top-level function's signature and metadata.
#[derive(Clone, Debug, Serialize)]
pub struct FnSig {
    /// Name.
    pub name: String,
    /// Role from the decorator.
    pub role: FnRole,
    /// Parameters.
    pub params: Vec<ParamSig>,
    /// Declared return type (`Any` when none).
    pub ret: Ty,
    /// Decorator paths as written, e.g. `["mcp.tool"]`.
    pub decorators: Vec<String>,
    /// 1-based line of the declaration.
    pub line: usize,
    /// Why the interpreter does not run it (it uses a namespace member with an effect, say);
    /// calling it fails at run time with this message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_executable: Option<String>,
    /// Body to run.
    #[serde(skip)]
    pub body: BodyId,
    /// Span of the declaration.
    #[serde(skip)]
    pub span: Span,
}

/// A user type.
#[derive(Clone, Debug, Serialize)]
pub struct TypeDef {
    /// Name.
    pub name: String,
    /// Record fields or variants.
    pub shape: TypeShape,
}

/// The two kinds of user types.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TypeShape {
    /// `type T { a: int }`
    Record {
        /// Fields and their types.
        fields: Vec<(String, Ty)>,
    },
    /// `type T = | A(x: int) | B`
    Adt {
        /// Variants.
        variants: Vec<VariantDef>,
    },
}

/// One variant.
#[derive(Clone, Debug, Serialize)]
pub struct VariantDef {
    /// Name.
    pub name: String,
    /// Fields and their types (positional fields are `_0`, `_1`, …).
    pub fields: Vec<(String, Ty)>,
}

/// A module constant.
#[derive(Clone, Debug, Serialize)]
pub struct ConstDef {
    /// Name.
    pub name: String,
    /// Declared type.
    pub ty: Ty,
    /// Initializer (a nullary body).
    #[serde(skip)]
    pub body: BodyId,
}

/// A skipped declaration (spec section 5).
#[derive(Clone, Debug, Serialize)]
pub struct OpaqueDef {
    /// Kind (`component`, `@endpoint`, …).
    pub kind: String,
    /// Name, when known.
    pub name: Option<String>,
    /// 1-based line.
    pub line: usize,
    /// A subset declaration left out because it has errors (not a section 5 declaration).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub broken: bool,
}

/// Executable code for one function, closure or constant initializer.
#[derive(Clone, Copy, Debug)]
pub struct Body {
    /// Frame size.
    pub n_slots: u32,
    /// Number of parameters (slots `0..n_params`).
    pub n_params: u32,
    /// Parameters: names (for error messages) and defaults, in [`Program::params`].
    pub params: Seq<BodyParam>,
    /// Code.
    pub expr: ExprId,
    /// Name for error messages, in [`Program::strings`].
    pub name: StrRef,
}

/// A parameter of a [`Body`].
#[derive(Clone, Copy, Debug)]
pub struct BodyParam {
    /// Name, in [`Program::strings`].
    pub name: StrRef,
    /// Default value, if any.
    pub default: Option<ExprId>,
}

/// A whole lowered file.
///
/// Code is flat: expressions, statements, patterns and the like live in the vectors below and
/// refer to each other by index ([`ExprId`]) or range ([`Seq`]), so lowering a file costs a few
/// vector pushes per node and no allocation of its own, and dropping the program frees a
/// handful of buffers.
#[derive(Clone, Debug, Default)]
pub struct Program {
    /// Top-level functions, in source order.
    pub functions: Vec<FnSig>,
    /// `dec` literals.
    pub decs: Vec<crate::decimal::Dec>,
    /// All bodies (functions, closures, constants).
    pub bodies: Vec<Body>,
    /// User types.
    pub types: Vec<TypeDef>,
    /// Constants.
    pub consts: Vec<ConstDef>,
    /// Skipped declarations.
    pub opaque: Vec<OpaqueDef>,
    /// Names brought in by imports that load no file.
    pub imports: Vec<String>,
    /// Where the root file's items start: the items of the files it imports come first.
    pub root: RootItems,
    /// Expression nodes.
    pub exprs: Vec<Expr>,
    /// Lists of expressions (arguments, list items).
    pub expr_lists: Vec<ExprId>,
    /// Statements of all blocks.
    pub stmts: Vec<Stmt>,
    /// Record literal fields.
    pub fields: Vec<(StrRef, ExprId)>,
    /// Match arms.
    pub arms: Vec<Arm>,
    /// Sub-patterns of constructor patterns.
    pub pats: Vec<Pat>,
    /// Pieces of interpolated strings.
    pub pieces: Vec<StrPiece>,
    /// Assignable places.
    pub places: Vec<Place>,
    /// Steps of places.
    pub place_steps: Vec<PlaceStep>,
    /// Closure captures: (outer slot, inner slot).
    pub captures: Vec<(u32, u32)>,
    /// Parameters of bodies.
    pub params: Vec<BodyParam>,
    /// Text of string literals, field names and messages.
    pub strings: String,
}

/// First indices of the root file's functions, types, constants and skipped items.
#[derive(Clone, Copy, Debug, Default)]
pub struct RootItems {
    /// In [`Program::functions`].
    pub functions: u32,
    /// In [`Program::types`].
    pub types: u32,
    /// In [`Program::consts`].
    pub consts: u32,
    /// In [`Program::opaque`].
    pub opaque: u32,
}

impl Program {
    /// An expression node.
    #[inline(always)]
    pub fn expr(&self, id: ExprId) -> &Expr {
        &self.exprs[id.0 as usize]
    }

    /// A piece of text.
    pub fn str(&self, s: StrRef) -> &str {
        s.get(&self.strings)
    }
}

/// Built-in functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// `print(...)`
    Print,
    /// `len(x)`
    Len,
    /// `str(x)`
    Str,
    /// `int(x)`
    Int,
    /// `float(x)`
    Float,
    /// `assert(cond[, msg])`
    Assert,
    /// `range(a, b)`
    Range,
    /// `now()`
    Now,
    /// `uuid()`
    Uuid,
    /// `json_encode(v)`
    JsonEncode,
    /// `json_decode(s)`
    JsonDecode,
    /// `min(a, b)` or `min(list)`
    Min,
    /// `max(a, b)` or `max(list)`
    Max,
    /// `abs(x)`
    Abs,
    /// `progress(done[, total[, message]])`: an MCP progress notification for the caller.
    Progress,
    /// `log(level, message)`: an MCP log message for the caller.
    Log,
    /// `path.join(a, b)`
    PathJoin,
    /// `path.join_many(parts)`
    PathJoinMany,
    /// `path.basename(p)`
    PathBasename,
    /// `path.dirname(p)`
    PathDirname,
    /// `path.extension(p)`
    PathExtension,
    /// `json.parse(s)`: the value, or `None` when `s` is not JSON.
    JsonParse,
    /// `json.quote(s)`
    JsonQuote,
    /// `time.now_ms()`
    NowMs,
    /// `fs.read(p)`: `Ok(text)` or `Error(why)`.
    FsRead,
    /// `fs.exists(p)`
    FsExists,
    /// `fs.is_file(p)`
    FsIsFile,
    /// `fs.is_dir(p)`
    FsIsDir,
    /// `fs.list_dir(p)`: `Ok(names)` or `Error(why)`.
    FsListDir,
    /// `fs.glob(pattern)`: `Ok(paths)` or `Error(why)`.
    FsGlob,
    /// `regex.compile(pattern)`: `Ok(re)` or `Error(why)`.
    RegexCompile,
    /// `csv.parse(text)`: `Ok(rows)` (lists of str) or `Error(why)`.
    CsvParse,
    /// `csv.parse_records(text)`: `Ok(records)` (maps keyed by the header row) or `Error(why)`.
    CsvParseRecords,
    /// `csv.render(rows)`: `Ok(text)` or `Error(why)`.
    CsvRender,
    /// `toml.parse(text)`: `Ok(value)` or `Error(why)`.
    TomlParse,
    /// `toml.render(value)`: `Ok(text)` or `Error(why)`.
    TomlRender,
    /// `yaml.parse(text)`: `Ok(value)` or `Error(why)`.
    YamlParse,
    /// `yaml.render(value)`: `Ok(text)` or `Error(why)`.
    YamlRender,
    /// `crypto.hash_secure(s)`: SHA-256, hex.
    HashSecure,
    /// `crypto.hash_fast(s)`: 64-bit FNV-1a, hex.
    HashFast,
    /// `elicit(message, schema)`: the user's answer through the MCP client.
    Elicit,
    /// `sample(messages[, max_tokens])`: the client's model's answer.
    Sample,
    /// `content.text(text)`
    ContentText,
    /// `content.data(value)`: the structured result beside content blocks.
    ContentData,
    /// `content.image(data, mime)`
    ContentImage,
    /// `content.audio(data, mime)`
    ContentAudio,
    /// `content.resource(uri, text[, mime])`
    ContentResource,
    /// `content.blob(uri, data, mime)`
    ContentBlob,
    /// `content.link(uri, name[, mime])`
    ContentLink,
}

impl Builtin {
    /// All built-ins with their names and arity (min, max).
    pub const ALL: &'static [(Builtin, &'static str, usize, usize)] = &[
        (Builtin::Print, "print", 0, usize::MAX),
        (Builtin::Len, "len", 1, 1),
        (Builtin::Str, "str", 1, 1),
        (Builtin::Int, "int", 1, 1),
        (Builtin::Float, "float", 1, 1),
        (Builtin::Assert, "assert", 1, 2),
        (Builtin::Range, "range", 1, 2),
        (Builtin::Now, "now", 0, 0),
        (Builtin::Uuid, "uuid", 0, 0),
        (Builtin::JsonEncode, "json_encode", 1, 1),
        (Builtin::JsonDecode, "json_decode", 1, 1),
        (Builtin::Min, "min", 1, 2),
        (Builtin::Max, "max", 1, 2),
        (Builtin::Abs, "abs", 1, 1),
        (Builtin::Progress, "progress", 1, 3),
        (Builtin::Log, "log", 2, 2),
        (Builtin::Elicit, "elicit", 2, 2),
        (Builtin::Sample, "sample", 1, 2),
        // Namespace members (`crate::stdlib`): found by their dotted path, never as a name.
        (Builtin::PathJoin, "path.join", 2, 2),
        (Builtin::PathJoinMany, "path.join_many", 1, 1),
        (Builtin::PathBasename, "path.basename", 1, 1),
        (Builtin::PathDirname, "path.dirname", 1, 1),
        (Builtin::PathExtension, "path.extension", 1, 1),
        (Builtin::JsonParse, "json.parse", 1, 1),
        (Builtin::JsonQuote, "json.quote", 1, 1),
        (Builtin::NowMs, "time.now_ms", 0, 0),
        (Builtin::FsRead, "fs.read", 1, 1),
        (Builtin::FsExists, "fs.exists", 1, 1),
        (Builtin::FsIsFile, "fs.is_file", 1, 1),
        (Builtin::FsIsDir, "fs.is_dir", 1, 1),
        (Builtin::FsListDir, "fs.list_dir", 0, 1),
        (Builtin::FsGlob, "fs.glob", 1, 1),
        (Builtin::RegexCompile, "regex.compile", 1, 1),
        (Builtin::CsvParse, "csv.parse", 1, 1),
        (Builtin::CsvParseRecords, "csv.parse_records", 1, 1),
        (Builtin::CsvRender, "csv.render", 1, 1),
        (Builtin::TomlParse, "toml.parse", 1, 1),
        (Builtin::TomlRender, "toml.render", 1, 1),
        (Builtin::YamlParse, "yaml.parse", 1, 1),
        (Builtin::YamlRender, "yaml.render", 1, 1),
        (Builtin::HashSecure, "crypto.hash_secure", 1, 1),
        (Builtin::HashFast, "crypto.hash_fast", 1, 1),
        (Builtin::ContentText, "content.text", 1, 1),
        (Builtin::ContentData, "content.data", 1, 1),
        (Builtin::ContentImage, "content.image", 2, 2),
        (Builtin::ContentAudio, "content.audio", 2, 2),
        (Builtin::ContentResource, "content.resource", 2, 3),
        (Builtin::ContentBlob, "content.blob", 3, 3),
        (Builtin::ContentLink, "content.link", 2, 3),
    ];

    /// Looks a built-in up by name.
    pub fn by_name(name: &str) -> Option<(Builtin, usize, usize)> {
        Self::ALL
            .iter()
            .find(|(_, n, _, _)| *n == name)
            .map(|&(b, _, lo, hi)| (b, lo, hi))
    }

    /// The name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(b, ..)| *b == self)
            .map(|(_, n, ..)| *n)
            .unwrap_or("?")
    }

    /// The arity range (min, max).
    pub fn arity(self) -> (usize, usize) {
        Self::ALL
            .iter()
            .find(|(b, ..)| *b == self)
            .map(|&(_, _, lo, hi)| (lo, hi))
            .unwrap_or((0, usize::MAX))
    }
}

/// Constructors: the four built-in ones and user variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ctor {
    /// `Some(v)`
    Some,
    /// `None`
    None,
    /// `Ok(v)`
    Ok,
    /// `Error(e)`
    Error,
    /// A user variant.
    User {
        /// Type index.
        ty: u32,
        /// Variant index.
        variant: u32,
    },
}

/// What a global name refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Global {
    /// A top-level function.
    Fn(u32),
    /// A constant.
    Const(u32),
    /// A built-in function.
    Builtin(Builtin),
    /// A constructor.
    Ctor(Ctor),
    /// A skipped declaration.
    Opaque(u32),
    /// A name from an `import`.
    Import(u32),
}

/// Methods, resolved by name at lowering and dispatched on the receiver at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Method {
    Len,
    Trim,
    ToUpper,
    ToLower,
    Split,
    Replace,
    Contains,
    StartsWith,
    EndsWith,
    Find,
    Slice,
    Chars,
    Lines,
    ParseInt,
    ParseFloat,
    Push,
    Pop,
    Get,
    First,
    Last,
    Map,
    Filter,
    Fold,
    Any,
    All,
    Join,
    Sorted,
    SortedByKey,
    Reverse,
    Concat,
    Keys,
    Values,
    ContainsKey,
    Insert,
    Remove,
    IsSome,
    IsNone,
    IsOk,
    IsError,
    Unwrap,
    UnwrapOr,
    IsEmpty,
    ToStr,
    CharAt,
    TrimStart,
    TrimEnd,
    Repeat,
    Abs,
    Floor,
    Ceil,
    Round,
    Sqrt,
    Min,
    Max,
    Matches,
    FindAll,
    Group,
}

impl Method {
    /// All methods: name, arity range, and whether it mutates its receiver in place.
    pub const ALL: &'static [(Method, &'static str, usize, usize, bool)] = &[
        (Method::Len, "len", 0, 0, false),
        (Method::Trim, "trim", 0, 0, false),
        (Method::ToUpper, "to_upper", 0, 0, false),
        (Method::ToLower, "to_lower", 0, 0, false),
        (Method::Split, "split", 1, 1, false),
        (Method::Replace, "replace", 2, 2, false),
        (Method::Contains, "contains", 1, 1, false),
        (Method::StartsWith, "starts_with", 1, 1, false),
        (Method::EndsWith, "ends_with", 1, 1, false),
        (Method::Find, "find", 1, 1, false),
        (Method::Slice, "slice", 1, 2, false),
        (Method::Chars, "chars", 0, 0, false),
        (Method::Lines, "lines", 0, 0, false),
        (Method::ParseInt, "parse_int", 0, 0, false),
        (Method::ParseFloat, "parse_float", 0, 0, false),
        (Method::Push, "push", 1, 1, true),
        (Method::Pop, "pop", 0, 0, true),
        (Method::Get, "get", 1, 1, false),
        (Method::First, "first", 0, 0, false),
        (Method::Last, "last", 0, 0, false),
        (Method::Map, "map", 1, 1, false),
        (Method::Filter, "filter", 1, 1, false),
        (Method::Fold, "fold", 2, 2, false),
        (Method::Any, "any", 1, 1, false),
        (Method::All, "all", 1, 1, false),
        (Method::Join, "join", 0, 1, false),
        (Method::Sorted, "sorted", 0, 0, false),
        (Method::SortedByKey, "sorted_by_key", 1, 1, false),
        (Method::Reverse, "reverse", 0, 0, false),
        (Method::Concat, "concat", 1, 1, false),
        (Method::Keys, "keys", 0, 0, false),
        (Method::Values, "values", 0, 0, false),
        (Method::ContainsKey, "contains_key", 1, 1, false),
        (Method::Insert, "insert", 2, 2, true),
        (Method::Remove, "remove", 1, 1, true),
        (Method::IsSome, "is_some", 0, 0, false),
        (Method::IsNone, "is_none", 0, 0, false),
        (Method::IsOk, "is_ok", 0, 0, false),
        (Method::IsError, "is_error", 0, 0, false),
        (Method::Unwrap, "unwrap", 0, 0, false),
        (Method::UnwrapOr, "unwrap_or", 1, 1, false),
        // Real Vox's methods; a second spelling comes after the first.
        (Method::IsEmpty, "is_empty", 0, 0, false),
        (Method::ToStr, "to_string", 0, 0, false),
        (Method::ToStr, "to_str", 0, 0, false),
        (Method::CharAt, "char_at", 1, 1, false),
        (Method::TrimStart, "trim_start", 0, 0, false),
        (Method::TrimEnd, "trim_end", 0, 0, false),
        (Method::Repeat, "repeat", 0, 1, false),
        (Method::Abs, "abs", 0, 0, false),
        (Method::Floor, "floor", 0, 0, false),
        (Method::Ceil, "ceil", 0, 0, false),
        (Method::Round, "round", 0, 0, false),
        (Method::Sqrt, "sqrt", 0, 0, false),
        (Method::Min, "min", 1, 1, false),
        (Method::Max, "max", 1, 1, false),
        (Method::Matches, "matches", 1, 1, false),
        (Method::FindAll, "find_all", 1, 1, false),
        (Method::Group, "group", 1, 1, false),
        (Method::IsError, "is_err", 0, 0, false),
        (Method::Len, "length", 0, 0, false),
        (Method::ToUpper, "to_uppercase", 0, 0, false),
        (Method::ToLower, "to_lowercase", 0, 0, false),
        (Method::Find, "index_of", 1, 1, false),
    ];

    /// Looks a method up by name: (method, min arity, max arity, mutates).
    pub fn by_name(name: &str) -> Option<(Method, usize, usize, bool)> {
        Self::ALL
            .iter()
            .find(|(_, n, ..)| *n == name)
            .map(|&(m, _, lo, hi, mutates)| (m, lo, hi, mutates))
    }

    /// The name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(m, ..)| *m == self)
            .map(|(_, n, ..)| *n)
            .unwrap_or("?")
    }
}

/// An assignable place: a local slot and a path of fields and indexes below it.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    /// Root slot.
    pub slot: u32,
    /// Steps from the root, in [`Program::place_steps`].
    pub path: Seq<PlaceStep>,
}

/// One step of a [`Place`].
#[derive(Clone, Copy, Debug)]
pub enum PlaceStep {
    /// `.name`
    Field(StrRef),
    /// `[expr]`
    Index(ExprId),
}

/// A piece of an interpolated string.
#[derive(Clone, Copy, Debug)]
pub enum StrPiece {
    /// Literal text.
    Text(StrRef),
    /// A value to format.
    Value(ExprId),
}

/// A match pattern with bindings resolved to slots.
#[derive(Clone, Copy, Debug)]
pub enum Pat {
    /// `_`
    Wild,
    /// Binds the value to a slot.
    Bind(u32),
    /// Literal int.
    Int(i64),
    /// Literal float.
    Float(f64),
    /// Literal string.
    Str(StrRef),
    /// Literal bool.
    Bool(bool),
    /// Constructor with sub-patterns (in [`Program::pats`]).
    Ctor(Ctor, Seq<Pat>),
    /// A list of exactly these items (real Vox's tuples).
    Tuple(Seq<Pat>),
}

/// Match arm.
#[derive(Clone, Copy, Debug)]
pub struct Arm {
    /// Pattern.
    pub pat: Pat,
    /// Body.
    pub body: ExprId,
}

/// A statement.
#[derive(Clone, Copy, Debug)]
pub enum Stmt {
    /// `let`: evaluate into a slot.
    Let(u32, ExprId),
    /// `let` with a pattern: evaluate, then bind by matching (a mismatch is a run-time error
    /// at the value).
    LetPattern(Pat, ExprId),
    /// Assignment (to [`Program::places`]), optionally compound.
    Assign(u32, Option<BinOp>, ExprId),
    /// Expression.
    Expr(ExprId),
}

/// A lowered expression with the span used for run-time errors.
#[derive(Clone, Copy, Debug)]
pub struct Expr {
    /// What.
    pub kind: ExprKind,
    /// Where.
    pub span: Span,
}

/// Lowered expression kinds.
///
/// `repr(u8)` gives the kind a plain tag byte: with a niche-encoded discriminant, every
/// dispatch in the interpreter first decoded it with arithmetic.
#[derive(Clone, Copy, Debug)]
#[repr(u8)]
pub enum ExprKind {
    /// `()`
    Unit,
    /// Bool literal.
    Bool(bool),
    /// Int literal.
    Int(i64),
    /// Float literal.
    Float(f64),
    /// `dec` literal: an index into [`Program::decs`].
    Dec(u32),
    /// String literal.
    Str(StrRef),
    /// Interpolated string.
    Interp(Seq<StrPiece>),
    /// Local slot.
    Local(u32),
    /// Global name.
    Global(Global),
    /// `[..]`
    List(Seq<ExprId>),
    /// `{ k: v }`
    Record(Seq<(StrRef, ExprId)>),
    /// Binary operator (`and`/`or` short-circuit).
    Binary(BinOp, ExprId, ExprId),
    /// `Binary(op, Local(slot), Int(k))` fused (`n - 1`, `i < 10`); never `and`/`or`.
    BinLocalInt(BinOp, u32, i64),
    /// `Binary(op, Local(a), Local(b))` fused; never `and`/`or`.
    BinLocalLocal(BinOp, u32, u32),
    /// Unary operator.
    Unary(UnOp, ExprId),
    /// Direct call of a top-level function.
    CallFn(u32, Seq<ExprId>),
    /// Call of a built-in.
    CallBuiltin(Builtin, Seq<ExprId>),
    /// Constructor application.
    Construct(Ctor, Seq<ExprId>),
    /// Call of a computed value.
    Call(ExprId, Seq<ExprId>),
    /// Non-mutating method.
    Method(ExprId, Method, Seq<ExprId>),
    /// Mutating method on a place (`xs.push(v)`), by index into [`Program::places`].
    MutMethod(u32, Method, Seq<ExprId>),
    /// `.field`
    Field(ExprId, StrRef),
    /// `[index]`
    Index(ExprId, ExprId),
    /// `?`
    Try(ExprId),
    /// `if`
    If(ExprId, ExprId, Option<ExprId>),
    /// `match`
    Match(ExprId, Seq<Arm>),
    /// `while`
    While(ExprId, ExprId),
    /// `loop`
    Loop(ExprId),
    /// `for var[, index] in iter`
    For(u32, Option<u32>, ExprId, ExprId),
    /// `break`
    Break,
    /// `continue`
    Continue,
    /// `return`
    Return(Option<ExprId>),
    /// Block: statements, value of the last expression statement.
    Block(Seq<Stmt>),
    /// Closure creation: body and (outer slot, inner slot) captures.
    Closure(BodyId, Seq<(u32, u32)>),
    /// A call of an opaque item or import: always fails at run time with this message.
    Unavailable(StrRef),
}

const _: () = assert!(std::mem::size_of::<Expr>() <= 32);
