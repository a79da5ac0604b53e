//! The syntax tree the parser produces. It keeps every span; names are not resolved yet.
//!
//! Expression trees are at most [`crate::parser::MAX_HEIGHT`] high (the parser enforces it), so
//! every recursive pass over them, and dropping them, has a bounded stack.

use crate::diag::Span;
use crate::lexer::StrPart;

/// A parsed file.
#[derive(Clone, Debug, Default)]
pub struct File {
    /// Top-level items in source order.
    pub items: Vec<Item>,
}

/// A name with its span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name {
    /// The text.
    pub text: String,
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
#[derive(Clone, Debug)]
pub struct Decorator {
    /// Dotted path, e.g. `mcp.tool`.
    pub path: String,
    /// Span of `@` through the path.
    pub span: Span,
    /// String (or other literal) arguments, whichever syntax was used.
    pub args: Vec<DecoratorArg>,
}

/// One decorator argument.
#[derive(Clone, Debug)]
pub struct DecoratorArg {
    /// The string value, or `None` when the argument was not a plain string literal.
    pub value: Option<String>,
    /// Where.
    pub span: Span,
}

/// A function declaration.
#[derive(Clone, Debug)]
pub struct FnDecl {
    /// Decorators in order.
    pub decorators: Vec<Decorator>,
    /// `pub` was written.
    pub is_pub: bool,
    /// `async` was written (accepted and ignored: the interpreter is synchronous).
    pub is_async: bool,
    /// Name.
    pub name: Name,
    /// Parameters.
    pub params: Vec<Param>,
    /// Return type, if declared.
    pub ret: Option<TypeExpr>,
    /// Body.
    pub body: Block,
    /// Whole declaration.
    pub span: Span,
}

/// `name [: Type] [= default]`.
#[derive(Clone, Debug)]
pub struct Param {
    /// Name.
    pub name: Name,
    /// Declared type.
    pub ty: Option<TypeExpr>,
    /// Default value.
    pub default: Option<Expr>,
}

/// A written type.
#[derive(Clone, Debug)]
pub enum TypeExpr {
    /// `Name` or `Name[Args]` (also lowercase builtins like `int`, `list[T]`).
    Named {
        /// Name.
        name: Name,
        /// Generic arguments.
        args: Vec<TypeExpr>,
    },
    /// `fn(A, B) to R`.
    Fn {
        /// Parameter types.
        params: Vec<TypeExpr>,
        /// Result type.
        ret: Option<Box<TypeExpr>>,
        /// Where.
        span: Span,
    },
}

impl TypeExpr {
    /// Where.
    pub fn span(&self) -> Span {
        match self {
            TypeExpr::Named { name, .. } => name.span,
            TypeExpr::Fn { span, .. } => *span,
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
#[derive(Clone, Debug)]
pub enum TypeBody {
    /// `| A(x: T) | B`.
    Adt(Vec<VariantDecl>),
    /// `{ a: T, b: U }`.
    Record(Vec<FieldDecl>),
}

/// One variant of an ADT.
#[derive(Clone, Debug)]
pub struct VariantDecl {
    /// Name.
    pub name: Name,
    /// Fields, possibly empty.
    pub fields: Vec<FieldDecl>,
}

/// `name: Type` in a record or variant (the name may be omitted in a variant: `A(int)`).
#[derive(Clone, Debug)]
pub struct FieldDecl {
    /// Name; positional variant fields get `_0`, `_1`, ….
    pub name: Name,
    /// Type.
    pub ty: Option<TypeExpr>,
}

/// `let NAME [: Type] = expr` at top level.
#[derive(Clone, Debug)]
pub struct ConstDecl {
    /// Name.
    pub name: Name,
    /// Declared type.
    pub ty: Option<TypeExpr>,
    /// Value.
    pub value: Expr,
    /// Whole declaration.
    pub span: Span,
}

/// `import a.b.{c, d}` and similar: kept as the names it brings in.
#[derive(Clone, Debug)]
pub struct ImportDecl {
    /// Names the import makes visible (the last segment of each path).
    pub names: Vec<Name>,
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
}

/// `{ stmts }`.
#[derive(Clone, Debug)]
pub struct Block {
    /// Statements; the value of a trailing `Expr` statement is the block's value.
    pub stmts: Vec<Stmt>,
    /// Where.
    pub span: Span,
    /// Height of the tree below, bounded by the parser.
    pub height: u32,
}

/// A statement.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `let [mut] x [: T] = e`.
    Let {
        /// `mut` was written.
        mutable: bool,
        /// Name.
        name: Name,
        /// Declared type.
        ty: Option<TypeExpr>,
        /// Value.
        value: Expr,
    },
    /// `place op= e`.
    Assign {
        /// Target.
        target: Expr,
        /// `None` for `=`, else the arithmetic operator.
        op: Option<BinOp>,
        /// Value.
        value: Expr,
    },
    /// An expression.
    Expr(Expr),
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
#[derive(Clone, Debug)]
pub struct Expr {
    /// What.
    pub kind: ExprKind,
    /// Where.
    pub span: Span,
    /// Height of the tree below, bounded by the parser.
    pub height: u32,
}

/// Expression kinds.
#[derive(Clone, Debug)]
pub enum ExprKind {
    /// Integer literal.
    Int(i64),
    /// Float literal.
    Float(f64),
    /// String literal, possibly interpolating.
    Str(Vec<StrPart>),
    /// `true` / `false`.
    Bool(bool),
    /// A lowercase name (the span of the identifier; the text is in the source).
    Var(Span),
    /// An uppercase name: constructor, constant or type.
    Upper(Span),
    /// `[a, b]`.
    List(Vec<Expr>),
    /// `{ k: v }`.
    Record(Vec<(Name, Expr)>),
    /// `a op b`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `op a`.
    Unary(UnOp, Box<Expr>),
    /// `f(args)`.
    Call(Box<Expr>, Vec<Expr>),
    /// `recv.name(args)`.
    Method(Box<Expr>, Name, Vec<Expr>),
    /// `recv.name`.
    Field(Box<Expr>, Name),
    /// `recv[index]`.
    Index(Box<Expr>, Box<Expr>),
    /// `e?`.
    Try(Box<Expr>),
    /// `x |> f`.
    Pipe(Box<Expr>, Box<Expr>),
    /// `if c { } else …`.
    If(Box<Expr>, Block, Option<Box<Expr>>),
    /// `match e { arms }`.
    Match(Box<Expr>, Vec<Arm>),
    /// `while c { }`.
    While(Box<Expr>, Block),
    /// `loop { }`.
    Loop(Block),
    /// `for x[, i] in e { }`.
    For(Box<ForLoop>),
    /// `break`.
    Break,
    /// `continue`.
    Continue,
    /// `return [e]`.
    Return(Option<Box<Expr>>),
    /// `{ stmts }` as an expression.
    Block(Block),
    /// `fn(params) [to T] { body }`.
    Closure(Box<Closure>),
    /// A syntax error was reported here.
    Error,
}

/// `for var[, index] in iter body`.
#[derive(Clone, Debug)]
pub struct ForLoop {
    /// Loop variable.
    pub var: Name,
    /// Index variable.
    pub index: Option<Name>,
    /// Iterated value.
    pub iter: Expr,
    /// Body.
    pub body: Block,
}

/// `fn(params) [to T] { body }`.
#[derive(Clone, Debug)]
pub struct Closure {
    /// Parameters.
    pub params: Vec<Param>,
    /// Declared result type.
    pub ret: Option<TypeExpr>,
    /// Body.
    pub body: Block,
}

/// `pattern => body`.
#[derive(Clone, Debug)]
pub struct Arm {
    /// Pattern.
    pub pat: Pattern,
    /// Body.
    pub body: Expr,
}

/// Match patterns.
#[derive(Clone, Debug)]
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
    Str(String, Span),
    /// `true`/`false`.
    Bool(bool, Span),
    /// `Name` or `Name(p, …)`.
    Ctor(Name, Vec<Pattern>),
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
            | Pattern::Error(s) => *s,
            Pattern::Bind(n) => n.span,
            Pattern::Ctor(n, _) => n.span,
        }
    }
}
