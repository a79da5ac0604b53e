//! The syntax tree the parser produces. It keeps every span; names are interned but not
//! resolved yet.
//!
//! The tree is flat: nodes live in a few vectors of the [`File`] and refer to each other by
//! index ([`ExprId`]) or by a range ([`Seq`]) of one of those vectors. Building it costs a few
//! amortized vector pushes instead of one allocation per node, and dropping it frees a handful
//! of buffers. Expression trees are at most [`crate::parser::MAX_HEIGHT`] high (the parser
//! enforces it), so every recursive pass over them has a bounded stack.

use crate::diag::Span;
use std::fmt;
use std::marker::PhantomData;

/// A contiguous run of elements in one of the [`File`]'s (or the program's) vectors; index
/// that vector with it (`file.expr_lists[seq]`) to get the slice.
pub struct Seq<T> {
    /// First element.
    pub start: u32,
    /// Number of elements.
    pub len: u32,
    _t: PhantomData<fn() -> T>,
}

impl<T> Seq<T> {
    /// No elements.
    pub const EMPTY: Seq<T> = Seq {
        start: 0,
        len: 0,
        _t: PhantomData,
    };

    /// The elements pushed onto `pool` since it had length `start`.
    pub fn since(start: usize, pool: &[T]) -> Seq<T> {
        Seq {
            start: start as u32,
            len: (pool.len() - start) as u32,
            _t: PhantomData,
        }
    }

    /// Appends `items` to `pool` and returns where they are.
    pub fn push_all(pool: &mut Vec<T>, items: impl IntoIterator<Item = T>) -> Seq<T> {
        let start = pool.len();
        pool.extend(items);
        Seq::since(start, pool)
    }

    /// Number of elements.
    pub fn len(self) -> usize {
        self.len as usize
    }

    /// Whether there are none.
    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The index range.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }
}

impl<T> Clone for Seq<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Seq<T> {}
impl<T> Default for Seq<T> {
    fn default() -> Self {
        Seq::EMPTY
    }
}
impl<T> fmt::Debug for Seq<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.start + self.len)
    }
}
impl<T> PartialEq for Seq<T> {
    fn eq(&self, other: &Self) -> bool {
        self.start == other.start && self.len == other.len
    }
}
impl<T> Eq for Seq<T> {}

impl<T> std::ops::Index<Seq<T>> for Vec<T> {
    type Output = [T];
    fn index(&self, s: Seq<T>) -> &[T] {
        &self[s.range()]
    }
}

impl<T> std::ops::Index<Seq<T>> for [T] {
    type Output = [T];
    fn index(&self, s: Seq<T>) -> &[T] {
        &self[s.range()]
    }
}

/// A piece of text in [`File::strings`] (decoded literals, interned names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StrRef {
    /// First byte.
    pub start: u32,
    /// Length in bytes.
    pub len: u32,
}

impl StrRef {
    /// The text in `arena`.
    pub fn get(self, arena: &str) -> &str {
        &arena[self.start as usize..self.start as usize + self.len as usize]
    }

    /// Appends `s` to `arena` and returns where it is.
    pub fn push(arena: &mut String, s: &str) -> StrRef {
        let start = arena.len();
        arena.push_str(s);
        StrRef {
            start: start as u32,
            len: s.len() as u32,
        }
    }
}

/// An interned name: equal names have equal symbols. The first [`Sym::PREDEFINED`] names
/// (built-ins, constructors, built-in types and methods) have the same symbols in every file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(pub u32);

impl Sym {
    /// Names interned before parsing starts, in this order.
    pub const PREDEFINED: &'static [&'static str] = &[
        // Built-in functions.
        "print",
        "len",
        "str",
        "int",
        "float",
        "assert",
        "range",
        "now",
        "uuid",
        "json_encode",
        "json_decode",
        "min",
        "max",
        "abs",
        "progress",
        "log",
        "elicit",
        "sample",
        // Built-in constructors.
        "Some",
        "None",
        "Ok",
        "Error",
        // Built-in types (`int`, `float` and `str` are above).
        "bool",
        "Unit",
        "list",
        "List",
        "Map",
        "Option",
        "Result",
        // Methods (`len` is above).
        "trim",
        "to_upper",
        "to_lower",
        "split",
        "replace",
        "contains",
        "starts_with",
        "ends_with",
        "find",
        "slice",
        "chars",
        "lines",
        "parse_int",
        "parse_float",
        "push",
        "pop",
        "get",
        "first",
        "last",
        "map",
        "filter",
        "fold",
        "any",
        "all",
        "join",
        "sorted",
        "sorted_by_key",
        "reverse",
        "concat",
        "keys",
        "values",
        "contains_key",
        "insert",
        "remove",
        "is_some",
        "is_none",
        "is_ok",
        "is_error",
        "unwrap",
        "unwrap_or",
        // Methods of real Vox (and their second spellings).
        "is_empty",
        "to_string",
        "to_str",
        "char_at",
        "trim_start",
        "trim_end",
        "repeat",
        "floor",
        "ceil",
        "round",
        "sqrt",
        "is_err",
        "length",
        "to_uppercase",
        "to_lowercase",
        "index_of",
        "matches",
        "find_all",
        "group",
        // Other names the front end looks for.
        "_",
    ];

    /// `_`.
    pub const UNDERSCORE: Sym = Sym(Sym::PREDEFINED.len() as u32 - 1);
}

/// The names of a file, interned.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    /// Text of each symbol, in [`File::strings`].
    pub texts: Vec<StrRef>,
}

/// A parsed file: the items, and the vectors their nodes live in.
#[derive(Clone, Debug, Default)]
pub struct File {
    /// Top-level items in source order.
    pub items: Vec<Item>,
    /// Expression nodes.
    pub exprs: Vec<Expr>,
    /// Lists of expressions (call arguments, list items).
    pub expr_lists: Vec<ExprId>,
    /// Statements of all blocks.
    pub stmts: Vec<Stmt>,
    /// Record literal fields.
    pub fields: Vec<(Name, ExprId)>,
    /// Match arms.
    pub arms: Vec<Arm>,
    /// Patterns (sub-patterns of constructor patterns).
    pub patterns: Vec<Pattern>,
    /// Pieces of string literals.
    pub str_parts: Vec<StrPart>,
    /// Parameters of functions and closures.
    pub params: Vec<Param>,
    /// Written types and their arguments.
    pub types: Vec<TypeExpr>,
    /// `for` loops.
    pub fors: Vec<ForLoop>,
    /// Closures.
    pub closures: Vec<Closure>,
    /// Decorators.
    pub decorators: Vec<Decorator>,
    /// Decorator arguments.
    pub decorator_args: Vec<DecoratorArg>,
    /// Variants of ADT declarations.
    pub variants: Vec<VariantDecl>,
    /// Fields of record and variant declarations.
    pub field_decls: Vec<FieldDecl>,
    /// Names (imports).
    pub names: Vec<Name>,
    /// Decoded text of string literals and the text of every interned name.
    pub strings: String,
    /// Interned names.
    pub symbols: Symbols,
}

impl File {
    /// An expression node.
    pub fn expr(&self, id: ExprId) -> &Expr {
        &self.exprs[id.0 as usize]
    }

    /// The text of a name.
    pub fn sym(&self, s: Sym) -> &str {
        self.symbols.texts[s.0 as usize].get(&self.strings)
    }

    /// A piece of text.
    pub fn str(&self, s: StrRef) -> &str {
        s.get(&self.strings)
    }

    /// A written type.
    pub fn ty(&self, id: TypeId) -> &TypeExpr {
        &self.types[id.0 as usize]
    }
}

/// Index of an expression in [`File::exprs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExprId(pub u32);

/// Index of a written type in [`File::types`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeId(pub u32);

/// A name with its span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Name {
    /// The interned text ([`File::sym`]).
    pub sym: Sym,
    /// Where.
    pub span: Span,
}

/// A top-level item.
#[derive(Clone, Debug)]
pub enum Item {
    /// `fn`, with its decorators.
    Fn(FnDecl),
    /// `type Name = | A | B` or `type Name { … }`.
    Type(TypeDecl),
    /// `let NAME = expr`.
    Const(ConstDecl),
    /// `import …`.
    Import(ImportDecl),
    /// A declaration outside the subset, skipped (section 5 of the spec).
    Opaque(OpaqueItem),
}

/// `@name` or `@a.b` with literal arguments.
#[derive(Clone, Copy, Debug)]
pub struct Decorator {
    /// Dotted path, e.g. `mcp.tool`, in [`File::strings`].
    pub path: StrRef,
    /// Span of `@` through the path.
    pub span: Span,
    /// String (or other literal) arguments, whichever syntax was used.
    pub args: Seq<DecoratorArg>,
}

/// One decorator argument.
#[derive(Clone, Copy, Debug)]
pub struct DecoratorArg {
    /// The string value, or `None` when the argument was not a plain string literal.
    pub value: Option<StrRef>,
    /// Where.
    pub span: Span,
}

/// A function declaration.
#[derive(Clone, Debug)]
pub struct FnDecl {
    /// Decorators in order.
    pub decorators: Seq<Decorator>,
    /// `pub` was written.
    pub is_pub: bool,
    /// `async` was written (accepted and ignored: the interpreter is synchronous).
    pub is_async: bool,
    /// Name.
    pub name: Name,
    /// Parameters.
    pub params: Seq<Param>,
    /// Return type, if declared.
    pub ret: Option<TypeId>,
    /// Body.
    pub body: Block,
    /// Whole declaration.
    pub span: Span,
}

/// `name [: Type] [= default]`.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    /// Name.
    pub name: Name,
    /// Declared type.
    pub ty: Option<TypeId>,
    /// Default value.
    pub default: Option<ExprId>,
}

/// A written type.
#[derive(Clone, Copy, Debug)]
pub enum TypeExpr {
    /// `Name` or `Name[Args]` (also lowercase builtins like `int`, `list[T]`).
    Named {
        /// Name.
        name: Name,
        /// Generic arguments.
        args: Seq<TypeExpr>,
    },
    /// `fn(A, B) to R`.
    Fn {
        /// Parameter types.
        params: Seq<TypeExpr>,
        /// Result type.
        ret: Option<TypeId>,
        /// Where.
        span: Span,
    },
    /// A number as a type argument (real Vox's `Tensor[2]`, a rank).
    Size {
        /// Where.
        span: Span,
    },
}

impl TypeExpr {
    /// Where.
    pub fn span(&self) -> Span {
        match self {
            TypeExpr::Named { name, .. } => name.span,
            TypeExpr::Fn { span, .. } | TypeExpr::Size { span } => *span,
        }
    }
}

/// A type declaration.
#[derive(Clone, Debug)]
pub struct TypeDecl {
    /// Name.
    pub name: Name,
    /// Variants or fields.
    pub body: TypeBody,
    /// Whole declaration.
    pub span: Span,
}

/// The two shapes of a type declaration.
#[derive(Clone, Copy, Debug)]
pub enum TypeBody {
    /// `| A(x: T) | B`.
    Adt(Seq<VariantDecl>),
    /// `{ a: T, b: U }`.
    Record(Seq<FieldDecl>),
}

/// One variant of an ADT.
#[derive(Clone, Copy, Debug)]
pub struct VariantDecl {
    /// Name.
    pub name: Name,
    /// Fields, possibly empty.
    pub fields: Seq<FieldDecl>,
}

/// `name: Type` in a record or variant (the name may be omitted in a variant: `A(int)`).
#[derive(Clone, Copy, Debug)]
pub struct FieldDecl {
    /// Name; positional variant fields get `_0`, `_1`, ….
    pub name: Name,
    /// Type.
    pub ty: Option<TypeId>,
}

/// `let NAME [: Type] = expr` at top level.
#[derive(Clone, Debug)]
pub struct ConstDecl {
    /// Name.
    pub name: Name,
    /// Declared type.
    pub ty: Option<TypeId>,
    /// Value.
    pub value: ExprId,
    /// Whole declaration.
    pub span: Span,
}

/// `import a.b.{c, d as e}`, `import a.b.c [as e]`, or any other form (kept as the names it
/// brings in, with no module).
#[derive(Clone, Debug)]
pub struct ImportDecl {
    /// The module path (`a.b`, meaning the file `a/b.vox`); empty for forms that name none.
    pub module: Seq<Name>,
    /// The items taken from the module, parallel to `names`.
    pub items: Seq<Name>,
    /// The names the import makes visible (an item's alias, or the item itself).
    pub names: Seq<Name>,
    /// Whether it looks meant to load a file but is malformed (reported by the parser).
    pub malformed: bool,
    /// Whole declaration.
    pub span: Span,
}

/// A declaration the interpreter does not run.
#[derive(Clone, Debug)]
pub struct OpaqueItem {
    /// What kind of declaration (`component`, `@endpoint fn`, ...).
    pub kind: String,
    /// Its name, when one could be found.
    pub name: Option<Name>,
    /// Whole item.
    pub span: Span,
    /// A subset declaration with errors (a syntax error in it, or one found when lowering
    /// it), kept so that its name resolves: using it fails at run time, nothing else breaks.
    pub broken: bool,
}

/// `{ stmts }`.
#[derive(Clone, Copy, Debug)]
pub struct Block {
    /// Statements; the value of a trailing `Expr` statement is the block's value.
    pub stmts: Seq<Stmt>,
    /// Where.
    pub span: Span,
    /// Height of the tree below, bounded by the parser.
    pub height: u32,
}

/// A statement.
#[derive(Clone, Copy, Debug)]
pub enum Stmt {
    /// `let [mut] x [: T] = e`.
    Let {
        /// `mut` was written.
        mutable: bool,
        /// Name.
        name: Name,
        /// Declared type.
        ty: Option<TypeId>,
        /// Value.
        value: ExprId,
    },
    /// `let [mut] pattern [: T] = e` (real Vox's `let (a, b) = pair`): a value that does not
    /// match is a run-time error.
    LetPattern {
        /// `mut` was written: every name the pattern binds is mutable.
        mutable: bool,
        /// What the value is taken apart by.
        pattern: Pattern,
        /// Declared type.
        ty: Option<TypeId>,
        /// Value.
        value: ExprId,
    },
    /// `place op= e`.
    Assign {
        /// Target.
        target: ExprId,
        /// `None` for `=`, else the arithmetic operator.
        op: Option<BinOp>,
        /// Value.
        value: ExprId,
    },
    /// An expression.
    Expr(ExprId),
}

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%`
    Rem,
    /// `==` / `is`
    Eq,
    /// `!=` / `isnt`
    Ne,
    /// `<`
    Lt,
    /// `>`
    Gt,
    /// `<=`
    Le,
    /// `>=`
    Ge,
    /// `and`
    And,
    /// `or`
    Or,
}

impl BinOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Gt => ">",
            BinOp::Le => "<=",
            BinOp::Ge => ">=",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `-`
    Neg,
    /// `not` / `!`
    Not,
}

/// An expression with its span.
#[derive(Clone, Copy, Debug)]
pub struct Expr {
    /// What.
    pub kind: ExprKind,
    /// Where.
    pub span: Span,
    /// Height of the tree below, bounded by the parser.
    pub height: u32,
}

/// Expression kinds.
#[derive(Clone, Copy, Debug)]
pub enum ExprKind {
    /// Integer literal.
    Int(i64),
    /// Float literal.
    Float(f64),
    /// `dec` literal: its digits (`0.1` of `0.1dec`).
    Dec(StrRef),
    /// String literal, possibly interpolating.
    Str(Seq<StrPart>),
    /// `true` / `false`.
    Bool(bool),
    /// A lowercase name.
    Var(Sym),
    /// An uppercase name: constructor, constant or type.
    Upper(Sym),
    /// `[a, b]`.
    List(Seq<ExprId>),
    /// `{ k: v }`.
    Record(Seq<(Name, ExprId)>),
    /// `a op b`.
    Binary(BinOp, ExprId, ExprId),
    /// `op a`.
    Unary(UnOp, ExprId),
    /// `f(args)`.
    Call(ExprId, Seq<ExprId>),
    /// `recv.name(args)`.
    Method(ExprId, Name, Seq<ExprId>),
    /// `recv.name`.
    Field(ExprId, Name),
    /// `recv[index]`.
    Index(ExprId, ExprId),
    /// `e?`.
    Try(ExprId),
    /// `e with { options }` (real Vox's durable-execution options; not run here).
    With(ExprId, ExprId),
    /// `x |> f`.
    Pipe(ExprId, ExprId),
    /// `if c { } else …`.
    If(ExprId, Block, Option<ExprId>),
    /// `match e { arms }`.
    Match(ExprId, Seq<Arm>),
    /// `while c { }`.
    While(ExprId, Block),
    /// `loop { }`.
    Loop(Block),
    /// `for x[, i] in e { }`: index into [`File::fors`].
    For(u32),
    /// `break`.
    Break,
    /// `continue`.
    Continue,
    /// `return [e]`.
    Return(Option<ExprId>),
    /// `{ stmts }` as an expression.
    Block(Block),
    /// `fn(params) [to T] { body }`: index into [`File::closures`].
    Closure(u32),
    /// A syntax error was reported here.
    Error,
}

/// A piece of a decoded string literal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrPart {
    /// Literal text.
    Text(StrRef),
    /// `{name}` interpolation, with the span of `name`.
    Var(Sym, Span),
}

/// `for var[, index] in iter body`.
#[derive(Clone, Copy, Debug)]
pub struct ForLoop {
    /// Loop variable.
    pub var: Name,
    /// Index variable.
    pub index: Option<Name>,
    /// Iterated value.
    pub iter: ExprId,
    /// Body.
    pub body: Block,
}

/// `fn(params) [to T] { body }`.
#[derive(Clone, Copy, Debug)]
pub struct Closure {
    /// Parameters.
    pub params: Seq<Param>,
    /// Declared result type.
    pub ret: Option<TypeId>,
    /// Body.
    pub body: Block,
}

/// `pattern => body`.
#[derive(Clone, Copy, Debug)]
pub struct Arm {
    /// Pattern.
    pub pat: Pattern,
    /// Body.
    pub body: ExprId,
}

/// Match patterns.
#[derive(Clone, Copy, Debug)]
pub enum Pattern {
    /// `_`.
    Wild(Span),
    /// A lowercase name binds the value.
    Bind(Name),
    /// Int literal (possibly negative).
    Int(i64, Span),
    /// Float literal.
    Float(f64, Span),
    /// String literal.
    Str(StrRef, Span),
    /// `true`/`false`.
    Bool(bool, Span),
    /// `Name` or `Name(p, …)`.
    Ctor(Name, Seq<Pattern>),
    /// `(p, q, …)`: a tuple (a list of exactly that many items).
    Tuple(Seq<Pattern>, Span),
    /// A syntax error was reported here.
    Error(Span),
}

impl Pattern {
    /// Where.
    pub fn span(&self) -> Span {
        match self {
            Pattern::Wild(s)
            | Pattern::Int(_, s)
            | Pattern::Float(_, s)
            | Pattern::Str(_, s)
            | Pattern::Bool(_, s)
            | Pattern::Tuple(_, s)
            | Pattern::Error(s) => *s,
            Pattern::Bind(n) => n.span,
            Pattern::Ctor(n, _) => n.span,
        }
    }
}
