//! AST → HIR lowering, with the checks that need resolved names: unknown names and types,
//! arity, duplicates, decorators, resources, tests, mutability and misplaced control flow.

use crate::ast::{self, ExprKind as A, Item, TypeBody};
use crate::diag::{Code, Diagnostic, SourceFile, Span};
use crate::hir::*;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A small multiplicative hasher for short identifier keys: SipHash's flood resistance buys
/// nothing for names from one source file and costs a visible share of lowering time.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut buf = [0u8; 8];
            buf[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(buf))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write(&[i]);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxBuild = BuildHasherDefault<FxHasher>;

/// The lowered program and the diagnostics found while lowering.
pub struct Lowered {
    /// Program (complete even when there are errors; erroneous parts become `Unit`).
    pub program: Program,
    /// Diagnostics.
    pub diags: Vec<Diagnostic>,
}

/// Lowers a parsed file.
pub fn lower<'a>(file: &'a ast::File, src: &'a SourceFile) -> Lowered {
    let mut l = Lowerer {
        src,
        diags: Vec::new(),
        program: Program::default(),
        // Sized up front: regrowing these maps showed up in the front-end profile.
        globals: HashMap::with_capacity_and_hasher(file.items.len() * 2, FxBuild::default()),
        global_spans: HashMap::with_capacity_and_hasher(file.items.len() * 2, FxBuild::default()),
        type_index: HashMap::with_capacity_and_hasher(file.items.len() / 4, FxBuild::default()),
        fn_arity: Vec::new(),
        fns: Vec::new(),
    };
    l.run(file);
    Lowered {
        program: l.program,
        diags: l.diags,
    }
}

struct Local<'a> {
    name: &'a str,
    slot: u32,
    mutable: bool,
    captured: bool,
}

struct FnCtx<'a> {
    /// Locals of all open scopes, innermost last; `scope_starts` marks where each scope begins
    /// (one flat vector avoids an allocation per block).
    locals: Vec<Local<'a>>,
    scope_starts: Vec<usize>,
    n_slots: u32,
    captures: Vec<(u32, u32)>,
    loop_depth: u32,
    is_const: bool,
}

struct Lowerer<'a> {
    src: &'a SourceFile,
    diags: Vec<Diagnostic>,
    program: Program,
    globals: HashMap<&'a str, Global, FxBuild>,
    global_spans: HashMap<&'a str, Span, FxBuild>,
    type_index: HashMap<&'a str, u32, FxBuild>,
    /// (required, total) parameters per top-level function.
    fn_arity: Vec<(usize, usize)>,
    fns: Vec<FnCtx<'a>>,
}

fn builtin_ctor(name: &str) -> Option<Ctor> {
    match name {
        "Some" => Some(Ctor::Some),
        "None" => Some(Ctor::None),
        "Ok" => Some(Ctor::Ok),
        "Error" => Some(Ctor::Error),
        _ => None,
    }
}

impl<'a> Lowerer<'a> {
    fn text(&self, span: Span) -> &'a str {
        &self.src.text[span.start as usize..span.end as usize]
    }

    fn diag(&mut self, code: Code, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(code, span, msg));
    }

    fn line(&self, span: Span) -> usize {
        self.src.line_col(span.start).0
    }

    fn define(&mut self, name: &'a ast::Name, g: Global) {
        if let Some(prev) = self.global_spans.get(name.text.as_str()) {
            let line = self.line(*prev);
            self.diags.push(
                Diagnostic::new(
                    Code::Duplicate,
                    name.span,
                    format!("`{}` is defined more than once", name.text),
                )
                .with_help(format!(
                    "the first definition is on line {line}; rename one"
                )),
            );
            return;
        }
        self.global_spans.insert(&name.text, name.span);
        self.globals.insert(&name.text, g);
    }

    fn run(&mut self, file: &'a ast::File) {
        // Pass 1: every global name, so bodies can refer to items declared later.
        for item in &file.items {
            if let Item::Type(t) = item {
                if self.type_index.contains_key(t.name.text.as_str()) {
                    self.diag(
                        Code::Duplicate,
                        t.name.span,
                        format!("type `{}` is defined more than once", t.name.text),
                    );
                    continue;
                }
                let index = self.program.types.len() as u32;
                self.type_index.insert(&t.name.text, index);
                self.program.types.push(TypeDef {
                    name: t.name.text.clone(),
                    shape: TypeShape::Record { fields: Vec::new() },
                });
            }
        }
        for item in &file.items {
            match item {
                Item::Type(t) => {
                    let Some(&index) = self.type_index.get(t.name.text.as_str()) else {
                        continue;
                    };
                    if self.program.types[index as usize].name != t.name.text {
                        continue;
                    }
                    self.type_decl(t, index);
                }
                Item::Fn(f) => {
                    let id = self.program.functions.len() as u32;
                    self.define(&f.name, Global::Fn(id));
                    let required = f.params.iter().filter(|p| p.default.is_none()).count();
                    self.fn_arity.push((required, f.params.len()));
                    self.program.functions.push(FnSig {
                        name: f.name.text.clone(),
                        role: FnRole::Plain,
                        params: Vec::new(),
                        ret: Ty::Any,
                        decorators: f.decorators.iter().map(|d| d.path.clone()).collect(),
                        line: self.line(f.span),
                        body: 0,
                        span: f.span,
                    });
                }
                Item::Const(c) => {
                    let id = self.program.consts.len() as u32;
                    self.define(&c.name, Global::Const(id));
                    self.program.consts.push(ConstDef {
                        name: c.name.text.clone(),
                        ty: Ty::Any,
                        body: 0,
                    });
                }
                Item::Import(i) => {
                    for n in &i.names {
                        if self.globals.contains_key(n.text.as_str()) {
                            continue;
                        }
                        let id = self.program.imports.len() as u32;
                        self.program.imports.push(n.text.clone());
                        self.globals.insert(&n.text, Global::Import(id));
                    }
                }
                Item::Opaque(o) => {
                    let id = self.program.opaque.len() as u32;
                    self.program.opaque.push(OpaqueDef {
                        kind: o.kind.clone(),
                        name: o.name.as_ref().map(|n| n.text.clone()),
                        line: self.line(o.span),
                    });
                    let what = match &o.name {
                        Some(n) => format!("`{} {}`", o.kind, n.text),
                        None => format!("this `{}` declaration", o.kind),
                    };
                    let start = o.span.start as usize;
                    let head = match &o.name {
                        Some(n) => Span::new(start, start + 1).to(n.span),
                        None => Span::new(start, (start + o.kind.len()).min(o.span.end as usize)),
                    };
                    self.diags.push(
                        Diagnostic::new(
                            Code::NotExecutable,
                            head,
                            format!(
                                "{what} is not executable by the tool interpreter and is skipped"
                            ),
                        )
                        .with_help(
                            "the file's tools still load; a tool that calls it fails at run time",
                        ),
                    );
                    if let Some(n) = &o.name
                        && !self.globals.contains_key(n.text.as_str())
                    {
                        self.globals.insert(&n.text, Global::Opaque(id));
                    }
                }
            }
        }
        // Pass 2: bodies.
        let mut fn_id = 0usize;
        let mut const_id = 0usize;
        for item in &file.items {
            match item {
                Item::Fn(f) => {
                    self.fn_decl(f, fn_id);
                    fn_id += 1;
                }
                Item::Const(c) => {
                    let ty = match &c.ty {
                        Some(t) => self.ty(t),
                        None => Ty::Any,
                    };
                    self.fns.push(FnCtx {
                        locals: Vec::new(),
                        scope_starts: Vec::new(),
                        n_slots: 0,
                        captures: Vec::new(),
                        loop_depth: 0,
                        is_const: true,
                    });
                    let expr = self.expr(&c.value);
                    let ctx = self.fns.pop().expect("pushed above");
                    let body = self.push_body(Body {
                        n_slots: ctx.n_slots,
                        n_params: 0,
                        defaults: Vec::new(),
                        param_names: Vec::new(),
                        expr,
                        name: c.name.text.clone(),
                    });
                    let cd = &mut self.program.consts[const_id];
                    cd.ty = ty;
                    cd.body = body;
                    const_id += 1;
                }
                _ => {}
            }
        }
        self.diags.sort_by_key(|d| (d.span.start, d.span.end));
    }

    fn push_body(&mut self, body: Body) -> BodyId {
        self.program.bodies.push(body);
        (self.program.bodies.len() - 1) as BodyId
    }

    fn type_decl(&mut self, t: &'a ast::TypeDecl, index: u32) {
        let shape = match &t.body {
            TypeBody::Record(fields) => TypeShape::Record {
                fields: self.fields(fields),
            },
            TypeBody::Adt(variants) => {
                let mut out = Vec::new();
                for (vi, v) in variants.iter().enumerate() {
                    if builtin_ctor(&v.name.text).is_some() {
                        self.diag(
                            Code::Duplicate,
                            v.name.span,
                            format!("`{}` is a built-in constructor", v.name.text),
                        );
                        continue;
                    }
                    self.define(
                        &v.name,
                        Global::Ctor(Ctor::User {
                            ty: index,
                            variant: vi as u32,
                        }),
                    );
                    out.push(VariantDef {
                        name: v.name.text.clone(),
                        fields: self.fields(&v.fields),
                    });
                }
                TypeShape::Adt { variants: out }
            }
        };
        self.program.types[index as usize].shape = shape;
    }

    fn fields(&mut self, fields: &'a [ast::FieldDecl]) -> Vec<(String, Ty)> {
        let mut out: Vec<(String, Ty)> = Vec::new();
        for f in fields {
            if out.iter().any(|(n, _)| *n == f.name.text) {
                self.diag(
                    Code::Duplicate,
                    f.name.span,
                    format!("field `{}` is declared twice", f.name.text),
                );
                continue;
            }
            let ty = match &f.ty {
                Some(t) => self.ty(t),
                None => Ty::Any,
            };
            out.push((f.name.text.clone(), ty));
        }
        out
    }

    fn ty(&mut self, t: &'a ast::TypeExpr) -> Ty {
        match t {
            ast::TypeExpr::Fn { params, ret, .. } => Ty::Fn {
                params: params.iter().map(|p| self.ty(p)).collect(),
                ret: Box::new(ret.as_ref().map(|r| self.ty(r)).unwrap_or(Ty::Any)),
            },
            ast::TypeExpr::Named { name, args } => {
                let mut args: Vec<Ty> = args.iter().map(|a| self.ty(a)).collect();
                let (want, ty): (std::ops::RangeInclusive<usize>, Ty) = match name.text.as_str() {
                    "int" => (0..=0, Ty::Int),
                    "float" => (0..=0, Ty::Float),
                    "str" => (0..=0, Ty::Str),
                    "bool" => (0..=0, Ty::Bool),
                    "Unit" => (0..=0, Ty::Unit),
                    "list" | "List" => {
                        let of = args.pop().unwrap_or(Ty::Any);
                        (0..=1, Ty::List { of: Box::new(of) })
                    }
                    "Map" => {
                        let value = args.pop().unwrap_or(Ty::Any);
                        let key = args.pop().unwrap_or(Ty::Any);
                        (
                            0..=2,
                            Ty::Map {
                                key: Box::new(key),
                                value: Box::new(value),
                            },
                        )
                    }
                    "Option" => {
                        let of = args.pop().unwrap_or(Ty::Any);
                        (1..=1, Ty::Option { of: Box::new(of) })
                    }
                    "Result" => {
                        let err = if args.len() == 2 {
                            args.pop().unwrap_or(Ty::Any)
                        } else {
                            Ty::Str
                        };
                        let ok = args.pop().unwrap_or(Ty::Any);
                        (
                            1..=2,
                            Ty::Result {
                                ok: Box::new(ok),
                                err: Box::new(err),
                            },
                        )
                    }
                    other => match self.type_index.get(other) {
                        Some(&index) => (
                            0..=0,
                            Ty::User {
                                name: other.to_string(),
                                index,
                            },
                        ),
                        None => {
                            self.diags.push(
                                Diagnostic::new(
                                    Code::UnknownType,
                                    name.span,
                                    format!("unknown type `{other}`"),
                                )
                                .with_help(
                                    "built-in types are int, float, str, bool, Unit, list[T], Map[K, V], Option[T], Result[T, E]",
                                ),
                            );
                            return Ty::Any;
                        }
                    },
                };
                if let ast::TypeExpr::Named { args, .. } = t
                    && !want.contains(&args.len())
                {
                    self.diag(
                        Code::UnknownType,
                        name.span,
                        format!(
                            "`{}` takes {} type argument(s), found {}",
                            name.text,
                            if want.start() == want.end() {
                                want.start().to_string()
                            } else {
                                format!("{} to {}", want.start(), want.end())
                            },
                            args.len()
                        ),
                    );
                }
                ty
            }
        }
    }

    fn fn_decl(&mut self, f: &'a ast::FnDecl, id: usize) {
        let mut role = FnRole::Plain;
        let mut role_span: Option<Span> = None;
        for d in &f.decorators {
            let strings: Vec<Option<String>> = d.args.iter().map(|a| a.value.clone()).collect();
            if let Some(bad) = d.args.iter().find(|a| a.value.is_none()) {
                self.diag(
                    Code::DecoratorArgs,
                    bad.span,
                    format!("`@{}` takes string literals only", d.path),
                );
            }
            let new_role = match d.path.as_str() {
                "tool" | "mcp.tool" => {
                    if d.path == "mcp.tool" {
                        self.diags.push(
                            Diagnostic::new(
                                Code::McpToolDeprecated,
                                d.span,
                                "`@mcp.tool` is deprecated",
                            )
                            .with_help("write `@tool`"),
                        );
                    }
                    if d.args.len() > 1 {
                        self.diag(
                            Code::DecoratorArgs,
                            d.args[1].span,
                            format!("`@{}` takes at most one description string", d.path),
                        );
                    }
                    Some(FnRole::Tool {
                        description: strings.first().cloned().flatten(),
                        deprecated_spelling: d.path == "mcp.tool",
                    })
                }
                "mcp.resource" => match strings.as_slice() {
                    [Some(uri)] | [Some(uri), None] => Some(FnRole::Resource {
                        uri: uri.clone(),
                        description: None,
                    }),
                    [Some(uri), Some(desc)] => Some(FnRole::Resource {
                        uri: uri.clone(),
                        description: Some(desc.clone()),
                    }),
                    _ => {
                        self.diags.push(
                            Diagnostic::new(
                                Code::DecoratorArgs,
                                d.span,
                                "`@mcp.resource` takes a URI and an optional description",
                            )
                            .with_help(
                                r#"write `@mcp.resource("docs://readme", "what it holds")`"#,
                            ),
                        );
                        Some(FnRole::Resource {
                            uri: String::new(),
                            description: None,
                        })
                    }
                },
                "test" => {
                    if d.args.len() > 1 {
                        self.diag(
                            Code::DecoratorArgs,
                            d.args[1].span,
                            "`@test` takes at most one label string",
                        );
                    }
                    Some(FnRole::Test {
                        label: strings.first().cloned().flatten(),
                    })
                }
                other => {
                    self.diags.push(
                        Diagnostic::new(
                            Code::UnknownDecorator,
                            d.span,
                            format!("unknown decorator `@{other}` is ignored"),
                        )
                        .with_help("known decorators: @tool, @mcp.resource, @test"),
                    );
                    None
                }
            };
            if let Some(r) = new_role {
                if let Some(prev) = role_span {
                    self.diags.push(
                        Diagnostic::new(
                            Code::ConflictingDecorators,
                            d.span,
                            "a function can have only one of @tool, @mcp.resource and @test",
                        )
                        .with_help(format!(
                            "another role decorator is on line {}",
                            self.line(prev)
                        )),
                    );
                } else {
                    role = r;
                    role_span = Some(d.span);
                }
            }
        }
        let ret = match &f.ret {
            Some(t) => self.ty(t),
            None => Ty::Any,
        };
        let params: Vec<ParamSig> = f
            .params
            .iter()
            .map(|p| ParamSig {
                name: p.name.text.clone(),
                ty: match &p.ty {
                    Some(t) => self.ty(t),
                    None => Ty::Any,
                },
                has_default: p.default.is_some(),
            })
            .collect();
        match &role {
            FnRole::Resource { .. } => {
                if let Some(p) = f.params.first() {
                    self.diags.push(
                        Diagnostic::new(
                            Code::ResourceParams,
                            p.name.span,
                            format!(
                                "resource function `{}` must not take parameters",
                                f.name.text
                            ),
                        )
                        .with_help(
                            "resources are read without arguments; make it `fn name() to str`",
                        ),
                    );
                }
                if ret != Ty::Str {
                    let span = f.ret.as_ref().map(|t| t.span()).unwrap_or(f.name.span);
                    let msg = if f.ret.is_none() {
                        format!("resource function `{}` must declare `to str`", f.name.text)
                    } else {
                        format!("resource function `{}` must return `str`", f.name.text)
                    };
                    self.diags.push(
                        Diagnostic::new(Code::ResourceReturn, span, msg)
                            .with_help("a resource's body is text: declare `to str`"),
                    );
                }
            }
            FnRole::Test { .. } => {
                if let Some(p) = f.params.first() {
                    self.diag(
                        Code::TestParams,
                        p.name.span,
                        format!("test function `{}` must not take parameters", f.name.text),
                    );
                }
            }
            _ => {}
        }
        let (body, _) = self.lower_fn_body(&f.name.text, &f.params, &f.body, false);
        let sig = &mut self.program.functions[id];
        sig.role = role;
        sig.params = params;
        sig.ret = ret;
        sig.body = body;
    }

    /// Lowers parameters and a body into a new frame; for closures the frame captures from the
    /// enclosing ones.
    fn lower_fn_body(
        &mut self,
        name: &str,
        params: &'a [ast::Param],
        block: &'a ast::Block,
        closure: bool,
    ) -> (BodyId, Vec<(u32, u32)>) {
        if !closure {
            self.fns.clear();
        }
        self.fns.push(FnCtx {
            locals: Vec::new(),
            scope_starts: Vec::new(),
            n_slots: 0,
            captures: Vec::new(),
            loop_depth: 0,
            is_const: false,
        });
        let mut defaults = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for p in params {
            defaults.push(p.default.as_ref().map(|d| self.expr(d)));
            if names.contains(&p.name.text) {
                self.diag(
                    Code::Duplicate,
                    p.name.span,
                    format!("parameter `{}` is declared twice", p.name.text),
                );
            }
            names.push(p.name.text.clone());
            self.declare(&p.name.text, false);
        }
        let expr = self.block(block);
        let ctx = self.fns.pop().expect("pushed above");
        let id = self.push_body(Body {
            n_slots: ctx.n_slots,
            n_params: params.len() as u32,
            defaults,
            param_names: names,
            expr,
            name: name.to_string(),
        });
        (id, ctx.captures)
    }

    fn open_scope(&mut self) {
        let ctx = self.ctx();
        ctx.scope_starts.push(ctx.locals.len());
    }

    fn close_scope(&mut self) {
        let ctx = self.ctx();
        let start = ctx.scope_starts.pop().unwrap_or(0);
        ctx.locals.truncate(start);
    }

    fn ctx(&mut self) -> &mut FnCtx<'a> {
        self.fns.last_mut().expect("inside a body")
    }

    fn declare(&mut self, name: &'a str, mutable: bool) -> u32 {
        let ctx = self.ctx();
        let slot = ctx.n_slots;
        ctx.n_slots += 1;
        ctx.locals.push(Local {
            name,
            slot,
            mutable,
            captured: false,
        });
        slot
    }

    /// Finds a local in frame `level`, capturing it from enclosing frames when needed.
    /// Returns (slot, mutable, captured).
    fn lookup_local(&mut self, level: usize, name: &'a str) -> Option<(u32, bool, bool)> {
        if let Some(l) = self.fns[level].locals.iter().rev().find(|l| l.name == name) {
            return Some((l.slot, l.mutable, l.captured));
        }
        if level == 0 {
            return None;
        }
        let (outer, _, _) = self.lookup_local(level - 1, name)?;
        let ctx = &mut self.fns[level];
        let slot = ctx.n_slots;
        ctx.n_slots += 1;
        ctx.captures.push((outer, slot));
        ctx.locals.push(Local {
            name,
            slot,
            mutable: false,
            captured: true,
        });
        Some((slot, false, true))
    }

    fn resolve(&mut self, name: &'a str, span: Span) -> ExprKind {
        if !self.fns.is_empty() {
            let level = self.fns.len() - 1;
            if let Some((slot, _, _)) = self.lookup_local(level, name) {
                return ExprKind::Local(slot);
            }
        }
        if let Some(&g) = self.globals.get(name) {
            return match g {
                Global::Ctor(Ctor::User { ty, variant })
                    if self.variant_arity(Ctor::User { ty, variant }) == 0 =>
                {
                    ExprKind::Construct(Ctor::User { ty, variant }, Vec::new())
                }
                Global::Opaque(_) | Global::Import(_) => {
                    ExprKind::Unavailable(self.unavailable(name, g))
                }
                g => ExprKind::Global(g),
            };
        }
        if let Some((b, _, _)) = Builtin::by_name(name) {
            return ExprKind::Global(Global::Builtin(b));
        }
        if let Some(c) = builtin_ctor(name) {
            return if c == Ctor::None {
                ExprKind::Construct(Ctor::None, Vec::new())
            } else {
                ExprKind::Global(Global::Ctor(c))
            };
        }
        if self.type_index.contains_key(name) {
            self.diag(
                Code::UnknownName,
                span,
                format!("`{name}` is a type, not a value"),
            );
        } else {
            self.diags.push(
                Diagnostic::new(
                    Code::UnknownName,
                    span,
                    format!("cannot find `{name}` in this scope"),
                )
                .with_help("declare it with `let`, as a parameter, or as a top-level `fn`"),
            );
        }
        ExprKind::Unit
    }

    fn unavailable(&self, name: &str, g: Global) -> String {
        match g {
            Global::Opaque(i) => format!(
                "`{name}` is a `{}` declaration, which the tool interpreter does not run",
                self.program.opaque[i as usize].kind
            ),
            _ => format!(
                "`{name}` is imported from another file, which this interpreter does not load"
            ),
        }
    }

    fn variant_arity(&self, c: Ctor) -> usize {
        match c {
            Ctor::None => 0,
            Ctor::Some | Ctor::Ok | Ctor::Error => 1,
            Ctor::User { ty, variant } => match &self.program.types[ty as usize].shape {
                TypeShape::Adt { variants } => variants
                    .get(variant as usize)
                    .map(|v| v.fields.len())
                    .unwrap_or(0),
                TypeShape::Record { .. } => 0,
            },
        }
    }

    /// Reports a wrong argument count; `what` names the callee and is only built on error.
    fn arity(&mut self, span: Span, what: impl Fn() -> String, lo: usize, hi: usize, n: usize) {
        if n < lo || n > hi {
            let what = what();
            let want = if lo == hi {
                format!("{lo}")
            } else if hi == usize::MAX {
                format!("at least {lo}")
            } else {
                format!("{lo} to {hi}")
            };
            self.diag(
                Code::Arity,
                span,
                format!(
                    "{what} takes {want} argument{}, but {n} {} given",
                    if want == "1" { "" } else { "s" },
                    if n == 1 { "was" } else { "were" }
                ),
            );
        }
    }

    fn block(&mut self, b: &'a ast::Block) -> Expr {
        self.open_scope();
        let mut stmts: Vec<Stmt> = b.stmts.iter().map(|s| self.stmt(s)).collect();
        self.close_scope();
        // A block that is one expression is that expression: it binds nothing, and the
        // interpreter saves a level per block (`if c { x } else { y }` is everywhere).
        if stmts.len() == 1
            && let Some(Stmt::Expr(_)) = stmts.last()
            && let Some(Stmt::Expr(e)) = stmts.pop()
        {
            return e;
        }
        Expr {
            kind: ExprKind::Block(stmts),
            span: b.span,
        }
    }

    fn stmt(&mut self, s: &'a ast::Stmt) -> Stmt {
        match s {
            ast::Stmt::Let {
                mutable,
                name,
                ty,
                value,
            } => {
                if let Some(t) = ty {
                    self.ty(t);
                }
                let v = self.expr(value);
                let slot = self.declare(&name.text, *mutable);
                Stmt::Let(slot, v)
            }
            ast::Stmt::Assign { target, op, value } => {
                let place = self.place(target, "assign to");
                let v = self.expr(value);
                match place {
                    Some(p) => Stmt::Assign(p, *op, v),
                    None => Stmt::Expr(v),
                }
            }
            ast::Stmt::Expr(e) => Stmt::Expr(self.expr(e)),
        }
    }

    /// Resolves an assignment target; reports why it cannot be assigned.
    fn place(&mut self, e: &'a ast::Expr, verb: &str) -> Option<Place> {
        let mut path = Vec::new();
        let mut cur = e;
        loop {
            match &cur.kind {
                A::Field(inner, name) => {
                    path.push(PlaceStep::Field(name.text.clone()));
                    cur = inner;
                }
                A::Index(inner, idx) => {
                    path.push(PlaceStep::Index(self.expr(idx)));
                    cur = inner;
                }
                A::Var(name_span) => {
                    let name = self.text(*name_span);
                    path.reverse();
                    let level = self.fns.len() - 1;
                    return match self.lookup_local(level, name) {
                        Some((slot, true, _)) => Some(Place { slot, path }),
                        Some((_, false, true)) => {
                            self.diags.push(
                                Diagnostic::new(
                                    Code::ImmutableAssign,
                                    cur.span,
                                    format!("cannot {verb} `{name}`: closures capture variables by value"),
                                )
                                .with_help("return the new value from the closure instead"),
                            );
                            None
                        }
                        Some((_, false, false)) => {
                            self.diags.push(
                                Diagnostic::new(
                                    Code::ImmutableAssign,
                                    cur.span,
                                    format!("cannot {verb} immutable binding `{name}`"),
                                )
                                .with_help(format!("declare it with `let mut {name}`")),
                            );
                            None
                        }
                        None => {
                            if self.globals.contains_key(name) || Builtin::by_name(name).is_some() {
                                self.diag(
                                    Code::ImmutableAssign,
                                    cur.span,
                                    format!("cannot {verb} `{name}`: it is not a local variable"),
                                );
                            } else {
                                self.diag(
                                    Code::UnknownName,
                                    cur.span,
                                    format!("cannot find `{name}` in this scope"),
                                );
                            }
                            None
                        }
                    };
                }
                _ => {
                    // The parser already reported targets that are not places.
                    return None;
                }
            }
        }
    }

    fn exprs(&mut self, es: &'a [ast::Expr]) -> Vec<Expr> {
        es.iter().map(|e| self.expr(e)).collect()
    }

    /// Lowers `callee(first, rest…)`; `first` is the piped value of `x |> f(…)`.
    fn call(
        &mut self,
        callee: &'a ast::Expr,
        first: Option<&'a ast::Expr>,
        rest: &'a [ast::Expr],
        span: Span,
    ) -> Expr {
        let mut lowered = Vec::with_capacity(rest.len() + 1);
        if let Some(f) = first {
            lowered.push(self.expr(f));
        }
        for a in rest {
            lowered.push(self.expr(a));
        }
        let n = lowered.len();
        let kind = match &callee.kind {
            A::Var(name_span) | A::Upper(name_span) => {
                let name = self.text(*name_span);
                let callee_kind = self.resolve(name, callee.span);
                match callee_kind {
                    ExprKind::Global(Global::Fn(id)) => {
                        let (lo, hi) = self.fn_arity[id as usize];
                        self.arity(callee.span, || format!("`{name}`"), lo, hi, n);
                        ExprKind::CallFn(id, lowered)
                    }
                    ExprKind::Global(Global::Builtin(b)) => {
                        let (_, lo, hi) = Builtin::by_name(b.name()).unwrap_or((b, 0, usize::MAX));
                        self.arity(callee.span, || format!("`{name}`"), lo, hi, n);
                        ExprKind::CallBuiltin(b, lowered)
                    }
                    ExprKind::Global(Global::Ctor(c)) => {
                        let k = self.variant_arity(c);
                        self.arity(callee.span, || format!("`{name}`"), k, k, n);
                        ExprKind::Construct(c, lowered)
                    }
                    ExprKind::Construct(c, _) => {
                        self.arity(callee.span, || format!("`{name}`"), 0, 0, n);
                        ExprKind::Construct(c, lowered)
                    }
                    ExprKind::Unavailable(m) => ExprKind::Unavailable(m),
                    ExprKind::Unit => ExprKind::Unit,
                    other => ExprKind::Call(
                        Box::new(Expr {
                            kind: other,
                            span: callee.span,
                        }),
                        lowered,
                    ),
                }
            }
            _ => ExprKind::Call(Box::new(self.expr(callee)), lowered),
        };
        Expr { kind, span }
    }

    fn expr(&mut self, e: &'a ast::Expr) -> Expr {
        let span = e.span;
        let kind = match &e.kind {
            A::Int(i) => ExprKind::Int(*i),
            A::Float(f) => ExprKind::Float(*f),
            A::Bool(b) => ExprKind::Bool(*b),
            A::Str(parts) => {
                if let [crate::lexer::StrPart::Text(t)] = parts.as_slice() {
                    ExprKind::Str(t.clone())
                } else {
                    let pieces = parts
                        .iter()
                        .map(|p| match p {
                            crate::lexer::StrPart::Text(t) => StrPiece::Text(t.clone()),
                            crate::lexer::StrPart::Var(name, s) => StrPiece::Value(Expr {
                                kind: self.resolve(name, *s),
                                span: *s,
                            }),
                        })
                        .collect();
                    ExprKind::Interp(pieces)
                }
            }
            A::Var(name_span) | A::Upper(name_span) => {
                let name = self.text(*name_span);
                self.resolve(name, span)
            }
            A::List(items) => ExprKind::List(self.exprs(items)),
            A::Record(fields) => {
                let mut out: Vec<(String, Expr)> = Vec::new();
                for (name, value) in fields {
                    if out.iter().any(|(n, _)| *n == name.text) {
                        self.diag(
                            Code::Duplicate,
                            name.span,
                            format!("field `{}` appears twice in this record", name.text),
                        );
                    }
                    let v = self.expr(value);
                    out.push((name.text.clone(), v));
                }
                ExprKind::Record(out)
            }
            A::Binary(op, l, r) => {
                ExprKind::Binary(*op, Box::new(self.expr(l)), Box::new(self.expr(r)))
            }
            A::Unary(op, x) => ExprKind::Unary(*op, Box::new(self.expr(x))),
            A::Call(callee, args) => return self.call(callee, None, args, span),
            A::Pipe(lhs, rhs) => {
                // `x |> f(a)` is `f(x, a)`; `x |> f` is `f(x)`.
                if let A::Call(callee, args) = &rhs.kind {
                    return self.call(callee, Some(lhs), args, span);
                }
                return self.call(rhs, Some(lhs), &[], span);
            }
            A::Method(recv, name, args) => match Method::by_name(&name.text) {
                Some((m, lo, hi, mutates)) => {
                    self.arity(
                        name.span,
                        || format!("method `{}`", name.text),
                        lo,
                        hi,
                        args.len(),
                    );
                    let args = self.exprs(args);
                    if mutates && matches!(recv.kind, A::Var(_) | A::Field(..) | A::Index(..)) {
                        match self.place(recv, &format!("call `{}` on", name.text)) {
                            Some(p) => ExprKind::MutMethod(p, m, args),
                            None => ExprKind::Unit,
                        }
                    } else {
                        ExprKind::Method(Box::new(self.expr(recv)), m, args)
                    }
                }
                None => {
                    // Not a built-in method: call the record field of that name.
                    let field = Expr {
                        kind: ExprKind::Field(Box::new(self.expr(recv)), name.text.clone()),
                        span: recv.span.to(name.span),
                    };
                    ExprKind::Call(Box::new(field), self.exprs(args))
                }
            },
            A::Field(recv, name) => ExprKind::Field(Box::new(self.expr(recv)), name.text.clone()),
            A::Index(recv, idx) => {
                ExprKind::Index(Box::new(self.expr(recv)), Box::new(self.expr(idx)))
            }
            A::Try(x) => ExprKind::Try(Box::new(self.expr(x))),
            A::If(c, then, otherwise) => ExprKind::If(
                Box::new(self.expr(c)),
                Box::new(self.block(then)),
                otherwise.as_ref().map(|o| Box::new(self.expr(o))),
            ),
            A::Match(scrutinee, arms) => {
                let s = self.expr(scrutinee);
                let mut out = Vec::new();
                for arm in arms {
                    self.open_scope();
                    let pat = self.pattern(&arm.pat);
                    let body = self.expr(&arm.body);
                    self.close_scope();
                    out.push(Arm { pat, body });
                }
                ExprKind::Match(Box::new(s), out)
            }
            A::While(c, body) => {
                let c = self.expr(c);
                self.ctx().loop_depth += 1;
                let b = self.block(body);
                self.ctx().loop_depth -= 1;
                ExprKind::While(Box::new(c), Box::new(b))
            }
            A::Loop(body) => {
                self.ctx().loop_depth += 1;
                let b = self.block(body);
                self.ctx().loop_depth -= 1;
                ExprKind::Loop(Box::new(b))
            }
            A::For(f) => {
                let ast::ForLoop {
                    var,
                    index,
                    iter,
                    body,
                } = &**f;
                let it = self.expr(iter);
                self.open_scope();
                let v = self.declare(&var.text, false);
                let i = index.as_ref().map(|n| self.declare(&n.text, false));
                self.ctx().loop_depth += 1;
                let b = self.block(body);
                self.ctx().loop_depth -= 1;
                self.close_scope();
                ExprKind::For(v, i, Box::new(it), Box::new(b))
            }
            A::Break | A::Continue => {
                if self.ctx().loop_depth == 0 {
                    let word = if matches!(e.kind, A::Break) {
                        "break"
                    } else {
                        "continue"
                    };
                    self.diag(
                        Code::MisplacedControl,
                        span,
                        format!("`{word}` outside of a loop"),
                    );
                    ExprKind::Unit
                } else if matches!(e.kind, A::Break) {
                    ExprKind::Break
                } else {
                    ExprKind::Continue
                }
            }
            A::Return(value) => {
                let v = value.as_ref().map(|v| Box::new(self.expr(v)));
                if self.ctx().is_const {
                    self.diag(
                        Code::MisplacedControl,
                        span,
                        "`return` outside of a function",
                    );
                    ExprKind::Unit
                } else {
                    ExprKind::Return(v)
                }
            }
            A::Block(b) => return self.block(b),
            A::Closure(c) => {
                let ast::Closure { params, ret, body } = &**c;
                if let Some(t) = ret {
                    self.ty(t);
                }
                for p in params {
                    if let Some(t) = &p.ty {
                        self.ty(t);
                    }
                }
                let (id, captures) = self.lower_fn_body("<closure>", params, body, true);
                ExprKind::Closure(id, captures)
            }
            A::Error => ExprKind::Unit,
        };
        Expr { kind, span }
    }

    fn pattern(&mut self, p: &'a ast::Pattern) -> Pat {
        match p {
            ast::Pattern::Wild(_) | ast::Pattern::Error(_) => Pat::Wild,
            ast::Pattern::Bind(n) => Pat::Bind(self.declare(&n.text, false)),
            ast::Pattern::Int(i, _) => Pat::Int(*i),
            ast::Pattern::Float(f, _) => Pat::Float(*f),
            ast::Pattern::Str(s, _) => Pat::Str(s.clone()),
            ast::Pattern::Bool(b, _) => Pat::Bool(*b),
            ast::Pattern::Ctor(name, args) => {
                let ctor =
                    builtin_ctor(&name.text).or(match self.globals.get(name.text.as_str()) {
                        Some(Global::Ctor(c)) => Some(*c),
                        _ => None,
                    });
                let Some(c) = ctor else {
                    self.diag(
                        Code::UnknownName,
                        name.span,
                        format!("no variant named `{}`", name.text),
                    );
                    return Pat::Wild;
                };
                let k = self.variant_arity(c);
                self.arity(
                    name.span,
                    || format!("pattern `{}`", name.text),
                    k,
                    k,
                    args.len(),
                );
                Pat::Ctor(c, args.iter().map(|a| self.pattern(a)).collect())
            }
        }
    }
}
