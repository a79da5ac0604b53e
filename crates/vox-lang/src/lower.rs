//! AST → HIR lowering, with the checks that need resolved names: unknown names and types,
//! arity, duplicates, decorators, resources, tests, mutability and misplaced control flow.
//!
//! Names are interned symbols, so the global tables are vectors indexed by symbol and a local
//! lookup compares integers. Both trees are flat: lowering reads AST nodes by index and pushes
//! HIR nodes onto the program's vectors, reusing scratch vectors for lists under construction.

use crate::ast::{self, ExprKind as A, Item, Seq, StrRef, Sym, TypeBody};
use crate::diag::{Code, Diagnostic, SourceFile, Span};
use crate::hir::*;

/// Unknown imported names reported per file; the rest only fail at run time.
const MAX_UNKNOWN_IMPORTS: usize = 20;

/// One file of a compilation unit.
pub struct UnitFile<'a> {
    /// Its syntax tree.
    pub ast: &'a ast::File,
    /// Its source.
    pub src: &'a SourceFile,
    /// Added to its spans in the program, so a span says which file it is in.
    pub base: u32,
    /// Per `import` item, in item order: the unit file it loads, if any.
    pub imports: Vec<Option<usize>>,
}

/// A lowered unit: one program, and each file's diagnostics (by file index).
pub struct LoweredUnit {
    /// Program holding every file's items; the root's come last.
    pub program: Program,
    /// Diagnostics per file.
    pub diags: Vec<Vec<Diagnostic>>,
}

/// What a file offers to files that import it.
#[derive(Clone, Copy)]
enum Export {
    Value(Global),
    Type(u32),
}

type Exports = std::collections::HashMap<String, Export>;

/// Lowers files into one program in `order` (each file after the files it imports; the root,
/// the last, is the one whose items the program exposes). A file's imports bind the items of
/// files lowered before it; an import of a file not yet lowered (a cycle) stays unresolved.
pub fn lower_unit(files: &[UnitFile<'_>], order: &[usize]) -> LoweredUnit {
    let mut program = Program {
        strings: String::with_capacity(files.iter().map(|f| f.ast.strings.len() + 16).sum()),
        exprs: Vec::with_capacity(files.iter().map(|f| f.ast.exprs.len() + 16).sum()),
        expr_lists: Vec::with_capacity(files.iter().map(|f| f.ast.expr_lists.len() + 16).sum()),
        stmts: Vec::with_capacity(files.iter().map(|f| f.ast.stmts.len() + 16).sum()),
        ..Program::default()
    };
    let mut fn_arity = Vec::new();
    let mut exports: Vec<Option<Exports>> = vec![None; files.len()];
    let mut diags = vec![Vec::new(); files.len()];
    for (k, &i) in order.iter().enumerate() {
        let file = &files[i];
        if k + 1 == order.len() {
            program.root = RootItems {
                functions: program.functions.len() as u32,
                types: program.types.len() as u32,
                consts: program.consts.len() as u32,
                opaque: program.opaque.len() as u32,
            };
        }
        // The file's literal texts and names keep their relative places in the program's text.
        let str_base = program.strings.len() as u32;
        program.strings.push_str(&file.ast.strings);
        let closure_name = StrRef::push(&mut program.strings, "<closure>");
        let n_syms = file.ast.symbols.texts.len();
        let mut l = Lowerer {
            f: file.ast,
            src: file.src,
            diags: Vec::new(),
            program,
            globals: vec![None; n_syms],
            global_spans: vec![None; n_syms],
            type_index: vec![None; n_syms],
            predefined: &PREDEFINED,
            fn_arity,
            fns: Vec::new(),
            free_ctx: Vec::new(),
            free_ids: Vec::new(),
            free_stmts: Vec::new(),
            closure_name,
            str_base,
            span_base: file.base,
            imports: &file.imports,
            files,
            exports: &exports,
            syms_by_text: None,
            variants_bound: Vec::new(),
            import_help: vec![None; files.len()],
            unknown_imports: 0,
            unavailable_msgs: std::collections::HashMap::new(),
            blocked: None,
            bind_mutable: false,
        };
        l.run();
        // The root is imported by no file (an import back to it is a cycle, left unresolved).
        let own = (k + 1 < order.len()).then(|| l.exports());
        diags[i] = l.diags;
        program = l.program;
        fn_arity = l.fn_arity;
        exports[i] = own;
    }
    LoweredUnit { program, diags }
}

struct Local {
    name: Sym,
    slot: u32,
    mutable: bool,
    captured: bool,
}

#[derive(Default)]
struct FnCtx {
    /// Locals of all open scopes, innermost last; `scope_starts` marks where each scope begins
    /// (one flat vector avoids an allocation per block).
    locals: Vec<Local>,
    scope_starts: Vec<usize>,
    n_slots: u32,
    captures: Vec<(u32, u32)>,
    loop_depth: u32,
    is_const: bool,
}

/// What an assignment-like use does to its target, for error messages.
#[derive(Clone, Copy)]
enum Verb {
    Assign,
    CallOn(Sym),
}

struct Lowerer<'a> {
    f: &'a ast::File,
    src: &'a SourceFile,
    diags: Vec<Diagnostic>,
    program: Program,
    /// Per symbol: the global it names, where it was defined, the user type it names.
    globals: Vec<Option<Global>>,
    global_spans: Vec<Option<Span>>,
    type_index: Vec<Option<u32>>,
    predefined: &'static Predefined,
    /// (required, total) parameters per top-level function.
    fn_arity: Vec<(usize, usize)>,
    fns: Vec<FnCtx>,
    /// Emptied vectors kept for reuse.
    free_ctx: Vec<FnCtx>,
    free_ids: Vec<Vec<ExprId>>,
    free_stmts: Vec<Vec<Stmt>>,
    closure_name: StrRef,
    /// Where this file's text starts in the program's text.
    str_base: u32,
    /// Added to this file's spans in the program.
    span_base: u32,
    /// Per `import` item: the unit file it loads.
    imports: &'a [Option<usize>],
    files: &'a [UnitFile<'a>],
    /// What each already-lowered file offers.
    exports: &'a [Option<Exports>],
    /// This file's symbols by text, built when an imported type brings its variants.
    syms_by_text: Option<std::collections::HashMap<&'a str, Sym>>,
    /// Imported types whose variants are already bound in this file.
    variants_bound: Vec<u32>,
    /// Per unit file: the help listing what it defines, built at the first unknown name.
    import_help: Vec<Option<String>>,
    unknown_imports: usize,
    /// The run-time message for each unavailable name, stored once.
    unavailable_msgs: std::collections::HashMap<Sym, StrRef>,
    /// The first namespace member the function being lowered uses that the interpreter does
    /// not run (where, and why): the function is then skipped.
    blocked: Option<(Span, String)>,
    /// The names a pattern binds are mutable (`let mut (a, b) = …`).
    bind_mutable: bool,
}

/// Per predefined symbol: the built-in, method and built-in constructor of that name.
struct Predefined {
    builtins: Vec<Option<Builtin>>,
    methods: Vec<Option<(Method, usize, usize, bool)>>,
    ctors: Vec<Option<Ctor>>,
}

/// Built once per process: every file has the same predefined symbols.
static PREDEFINED: std::sync::LazyLock<Predefined> = std::sync::LazyLock::new(|| Predefined {
    builtins: Sym::PREDEFINED
        .iter()
        .map(|n| Builtin::by_name(n).map(|(b, ..)| b))
        .collect(),
    methods: Sym::PREDEFINED.iter().map(|n| Method::by_name(n)).collect(),
    ctors: Sym::PREDEFINED.iter().map(|n| builtin_ctor(n)).collect(),
});

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
    fn name(&self, s: Sym) -> &'a str {
        self.f.sym(s)
    }

    fn sym_ref(&self, s: Sym) -> StrRef {
        self.text_ref(self.f.symbols.texts[s.0 as usize])
    }

    /// A text of this file, as a reference into the program's text.
    fn text_ref(&self, r: StrRef) -> StrRef {
        StrRef {
            start: r.start + self.str_base,
            len: r.len,
        }
    }

    /// A span of this file, as the program records it.
    fn hir_span(&self, s: Span) -> Span {
        Span {
            start: s.start + self.span_base,
            end: s.end + self.span_base,
        }
    }

    fn builtin(&self, s: Sym) -> Option<Builtin> {
        self.predefined
            .builtins
            .get(s.0 as usize)
            .copied()
            .flatten()
    }

    fn method(&self, s: Sym) -> Option<(Method, usize, usize, bool)> {
        self.predefined.methods.get(s.0 as usize).copied().flatten()
    }

    fn ctor(&self, s: Sym) -> Option<Ctor> {
        self.predefined.ctors.get(s.0 as usize).copied().flatten()
    }

    fn diag(&mut self, code: Code, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(code, span, msg));
    }

    fn line(&self, span: Span) -> usize {
        self.src.line(span.start)
    }

    fn push(&mut self, kind: ExprKind, span: Span) -> ExprId {
        let id = ExprId(self.program.exprs.len() as u32);
        let span = self.hir_span(span);
        self.program.exprs.push(Expr { kind, span });
        id
    }

    fn define(&mut self, name: ast::Name, g: Global) {
        let i = name.sym.0 as usize;
        // Importing the same item twice (`import a.{Shape, Circle}` brings `Circle` both ways)
        // binds nothing new.
        if self.globals[i] == Some(g) && self.global_spans[i].is_some() {
            return;
        }
        if let Some(prev) = self.global_spans[i] {
            let line = self.line(prev);
            self.diags.push(
                Diagnostic::new(
                    Code::Duplicate,
                    name.span,
                    format!("`{}` is defined more than once", self.name(name.sym)),
                )
                .with_help(format!(
                    "the first definition is on line {line}; rename one"
                )),
            );
            return;
        }
        self.global_spans[i] = Some(name.span);
        self.globals[i] = Some(g);
    }

    fn run(&mut self) {
        let f = self.f;
        let fn_base = self.program.functions.len();
        let const_base = self.program.consts.len();
        // Pass 1: every global name, so bodies can refer to items declared later. Types and
        // imports first, so field and parameter types can name them.
        let mut type_slots = Vec::new();
        let mut import_no = 0;
        for item in &f.items {
            match item {
                Item::Type(t) => {
                    if self.type_index[t.name.sym.0 as usize].is_some() {
                        self.diag(
                            Code::Duplicate,
                            t.name.span,
                            format!("type `{}` is defined more than once", self.name(t.name.sym)),
                        );
                        type_slots.push(None);
                        continue;
                    }
                    let index = self.program.types.len() as u32;
                    self.type_index[t.name.sym.0 as usize] = Some(index);
                    type_slots.push(Some(index));
                    self.program.types.push(TypeDef {
                        name: self.name(t.name.sym).to_string(),
                        shape: TypeShape::Record { fields: Vec::new() },
                    });
                }
                Item::Import(i) => {
                    let dep = self.imports.get(import_no).copied().flatten();
                    import_no += 1;
                    self.import(i, dep);
                }
                _ => {}
            }
        }
        let mut type_slots = type_slots.into_iter();
        for item in &f.items {
            match item {
                Item::Type(t) => {
                    if let Some(Some(index)) = type_slots.next() {
                        self.type_decl(t, index);
                    }
                }
                Item::Fn(fd) => {
                    let id = self.program.functions.len() as u32;
                    self.define(fd.name, Global::Fn(id));
                    let params = &f.params[fd.params];
                    let required = params.iter().filter(|p| p.default.is_none()).count();
                    self.fn_arity.push((required, params.len()));
                    self.program.functions.push(FnSig {
                        name: self.name(fd.name.sym).to_string(),
                        role: FnRole::Plain,
                        params: Vec::new(),
                        ret: Ty::Any,
                        decorators: f.decorators[fd.decorators]
                            .iter()
                            .map(|d| f.str(d.path).to_string())
                            .collect(),
                        line: self.line(fd.span),
                        not_executable: None,
                        body: 0,
                        span: self.hir_span(fd.span),
                    });
                }
                Item::Const(c) => {
                    let id = self.program.consts.len() as u32;
                    self.define(c.name, Global::Const(id));
                    self.program.consts.push(ConstDef {
                        name: self.name(c.name.sym).to_string(),
                        ty: Ty::Any,
                        body: 0,
                    });
                }
                Item::Import(_) => {}
                Item::Opaque(o) => {
                    let id = self.program.opaque.len() as u32;
                    self.program.opaque.push(OpaqueDef {
                        kind: o.kind.clone(),
                        name: o.name.map(|n| self.name(n.sym).to_string()),
                        line: self.line(o.span),
                        broken: o.broken,
                    });
                    if o.broken {
                        // Its errors are reported where they are; its name still resolves.
                        if let Some(n) = &o.name
                            && self.globals[n.sym.0 as usize].is_none()
                        {
                            self.globals[n.sym.0 as usize] = Some(Global::Opaque(id));
                        }
                        continue;
                    }
                    let what = match &o.name {
                        Some(n) => format!("`{} {}`", o.kind, self.name(n.sym)),
                        None if o.kind == crate::parser::SCRIPT_KIND => {
                            "this run of top-level statements (script mode)".to_string()
                        }
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
                        && self.globals[n.sym.0 as usize].is_none()
                    {
                        self.globals[n.sym.0 as usize] = Some(Global::Opaque(id));
                    }
                }
            }
        }
        // Pass 2: bodies.
        let mut fn_id = fn_base;
        let mut const_id = const_base;
        for item in &f.items {
            match item {
                Item::Fn(fd) => {
                    self.fn_decl(fd, fn_id);
                    fn_id += 1;
                }
                Item::Const(c) => {
                    let ty = match c.ty {
                        Some(t) => self.ty(f.ty(t)),
                        None => Ty::Any,
                    };
                    self.fns.clear();
                    self.open_ctx(true);
                    let expr = self.expr(c.value);
                    let ctx = self.fns.pop().expect("pushed above");
                    let body = self.push_body(Body {
                        n_slots: ctx.n_slots,
                        n_params: 0,
                        params: Seq::EMPTY,
                        expr,
                        name: self.sym_ref(c.name.sym),
                    });
                    self.free_ctx.push(ctx);
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

    /// Binds the names an `import` brings in: the items of the file it loads (`dep`), or, when
    /// it loads none, names whose use fails at run time.
    fn import(&mut self, i: &ast::ImportDecl, dep: Option<usize>) {
        let f = self.f;
        let items = &f.names[i.items];
        let names = &f.names[i.names];
        let Some((dep, exports)) = dep.and_then(|d| Some((d, self.exports[d].as_ref()?))) else {
            for n in names {
                self.bind_unavailable(*n);
            }
            return;
        };
        for (item, bound) in items.iter().zip(names) {
            match exports.get(self.name(item.sym)) {
                Some(&Export::Value(g)) => self.define(*bound, g),
                Some(&Export::Type(index)) => {
                    let slot = &mut self.type_index[bound.sym.0 as usize];
                    if slot.is_some() {
                        self.diag(
                            Code::Duplicate,
                            bound.span,
                            format!("type `{}` is defined more than once", self.name(bound.sym)),
                        );
                        continue;
                    }
                    *slot = Some(index);
                    // An ADT's variants come with it: they are how its values are built and
                    // matched. Once per type, however many names it is imported under.
                    if self.variants_bound.contains(&index) {
                        continue;
                    }
                    self.variants_bound.push(index);
                    let variants: Vec<String> = match &self.program.types[index as usize].shape {
                        TypeShape::Adt { variants } => {
                            variants.iter().map(|v| v.name.clone()).collect()
                        }
                        TypeShape::Record { .. } => Vec::new(),
                    };
                    for (vi, v) in variants.iter().enumerate() {
                        if let Some(sym) = self.sym_by_text(v) {
                            let g = Global::Ctor(Ctor::User {
                                ty: index,
                                variant: vi as u32,
                            });
                            self.define(
                                ast::Name {
                                    sym,
                                    span: bound.span,
                                },
                                g,
                            );
                        }
                    }
                }
                None => {
                    // Uses of the name then fail at run time instead of each being an error.
                    self.bind_unavailable(*bound);
                    self.unknown_imports += 1;
                    if self.unknown_imports > MAX_UNKNOWN_IMPORTS {
                        continue;
                    }
                    let file = &self.files[dep].src.name;
                    let help = self.import_help[dep]
                        .get_or_insert_with(|| {
                            let mut have: Vec<&str> = exports.keys().map(String::as_str).collect();
                            have.sort_unstable();
                            if have.is_empty() {
                                format!("`{file}` defines nothing at top level")
                            } else {
                                let more = if have.len() > 12 { ", …" } else { "" };
                                have.truncate(12);
                                format!("`{file}` defines: {}{more}", have.join(", "))
                            }
                        })
                        .clone();
                    let message = if self.unknown_imports == MAX_UNKNOWN_IMPORTS {
                        format!(
                            "`{file}` has no top-level `{}` (further unknown imported names in this file are not reported)",
                            self.name(item.sym)
                        )
                    } else {
                        format!("`{file}` has no top-level `{}`", self.name(item.sym))
                    };
                    self.diags.push(
                        Diagnostic::new(Code::ImportUnknownName, item.span, message)
                            .with_help(help),
                    );
                }
            }
        }
    }

    /// Binds an imported name that refers to nothing loadable: using it fails at run time.
    fn bind_unavailable(&mut self, n: ast::Name) {
        if self.globals[n.sym.0 as usize].is_some() {
            return;
        }
        let id = self.program.imports.len() as u32;
        self.program.imports.push(self.name(n.sym).to_string());
        self.globals[n.sym.0 as usize] = Some(Global::Import(id));
    }

    fn sym_by_text(&mut self, text: &str) -> Option<Sym> {
        let f = self.f;
        self.syms_by_text
            .get_or_insert_with(|| {
                f.symbols
                    .texts
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (r.get(&f.strings), Sym(i as u32)))
                    .collect()
            })
            .get(text)
            .copied()
    }

    /// The items this file defines (not those it imports), for files that import it.
    fn exports(&self) -> Exports {
        let mut out = Exports::new();
        for item in &self.f.items {
            let name = match item {
                Item::Fn(fd) => fd.name,
                Item::Const(c) => c.name,
                Item::Opaque(ast::OpaqueItem { name: Some(n), .. }) => *n,
                Item::Type(t) => {
                    if let Some(index) = self.type_index[t.name.sym.0 as usize] {
                        out.entry(self.name(t.name.sym).to_string())
                            .or_insert(Export::Type(index));
                        if let TypeShape::Adt { variants } =
                            &self.program.types[index as usize].shape
                        {
                            for (vi, v) in variants.iter().enumerate() {
                                out.entry(v.name.clone())
                                    .or_insert(Export::Value(Global::Ctor(Ctor::User {
                                        ty: index,
                                        variant: vi as u32,
                                    })));
                            }
                        }
                    }
                    continue;
                }
                _ => continue,
            };
            // A skipped declaration can be imported like a local one: using it fails at run
            // time with a message naming it.
            if let Some(g @ (Global::Fn(_) | Global::Const(_) | Global::Opaque(_))) =
                self.globals[name.sym.0 as usize]
            {
                out.entry(self.name(name.sym).to_string())
                    .or_insert(Export::Value(g));
            }
        }
        out
    }

    fn push_body(&mut self, body: Body) -> BodyId {
        self.program.bodies.push(body);
        (self.program.bodies.len() - 1) as BodyId
    }

    fn type_decl(&mut self, t: &'a ast::TypeDecl, index: u32) {
        let f = self.f;
        let shape = match t.body {
            TypeBody::Record(fields) => TypeShape::Record {
                fields: self.fields(&f.field_decls[fields]),
            },
            TypeBody::Adt(variants) => {
                let mut out = Vec::new();
                for (vi, v) in f.variants[variants].iter().enumerate() {
                    // Real Vox lets a file's own variant take a built-in constructor's name.
                    if self.ctor(v.name.sym).is_some() {
                        let vname = self.name(v.name.sym);
                        self.diags.push(
                            Diagnostic::new(
                                Code::ShadowsBuiltin,
                                v.name.span,
                                format!("variant `{vname}` hides the built-in constructor `{vname}` in this file"),
                            )
                            .with_help(format!("`{vname}(…)` and the pattern `{vname}(…)` mean this type's variant here; rename the variant to keep the built-in")),
                        );
                    }
                    self.define(
                        v.name,
                        Global::Ctor(Ctor::User {
                            ty: index,
                            variant: vi as u32,
                        }),
                    );
                    out.push(VariantDef {
                        name: self.name(v.name.sym).to_string(),
                        fields: self.fields(&f.field_decls[v.fields]),
                    });
                }
                TypeShape::Adt { variants: out }
            }
        };
        self.program.types[index as usize].shape = shape;
    }

    fn fields(&mut self, fields: &'a [ast::FieldDecl]) -> Vec<(String, Ty)> {
        let mut out: Vec<(String, Ty)> = Vec::new();
        for fd in fields {
            let name = self.name(fd.name.sym);
            if out.iter().any(|(n, _)| n == name) {
                self.diag(
                    Code::Duplicate,
                    fd.name.span,
                    format!("field `{name}` is declared twice"),
                );
                continue;
            }
            let ty = match fd.ty {
                Some(t) => self.ty(self.f.ty(t)),
                None => Ty::Any,
            };
            out.push((name.to_string(), ty));
        }
        out
    }

    fn ty(&mut self, t: &'a ast::TypeExpr) -> Ty {
        let f = self.f;
        match t {
            ast::TypeExpr::Fn { params, ret, .. } => Ty::Fn {
                params: f.types[*params].iter().map(|p| self.ty(p)).collect(),
                ret: Box::new(ret.map(|r| self.ty(f.ty(r))).unwrap_or(Ty::Any)),
            },
            // Only a type declared nowhere takes a number (`Tensor[2]`); it is skipped anyway.
            ast::TypeExpr::Size { .. } => Ty::Any,
            ast::TypeExpr::Named { name, args } => {
                let n_args = args.len();
                let arg_exprs = &f.types[*args];
                let mut args: Vec<Ty> = arg_exprs.iter().map(|a| self.ty(a)).collect();
                let text = self.name(name.sym);
                let (want, ty): (std::ops::RangeInclusive<usize>, Ty) = match text {
                    "int" => (0..=0, Ty::Int),
                    "float" => (0..=0, Ty::Float),
                    "dec" => (0..=0, Ty::Dec),
                    // Real Vox has no char literal (`'x'` is a str): a char is a str here.
                    "char" => (0..=0, Ty::Str),
                    // A table row's id.
                    "Id" => (0..=1, Ty::Int),
                    // A UI element (in skipped declarations' signatures).
                    "Element" => (0..=0, Ty::Any),
                    // An MCP content block (`content.*`); its JSON is the block.
                    "Content" => (0..=0, Ty::Any),
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
                    other => match self.type_index[name.sym.0 as usize] {
                        Some(index) => (
                            0..=0,
                            Ty::User {
                                name: other.to_string(),
                                index,
                            },
                        ),
                        // A type declared by a skipped or broken declaration, or brought in by
                        // an import that loaded nothing: no constraint (spec section 5).
                        None if matches!(
                            self.globals[name.sym.0 as usize],
                            Some(Global::Opaque(_) | Global::Import(_))
                        ) =>
                        {
                            return Ty::Any;
                        }
                        // Real Vox takes a type declared nowhere as opaque: what uses it is
                        // skipped, not an error.
                        None => {
                            self.diags.push(
                                Diagnostic::new(
                                    Code::UnknownType,
                                    name.span,
                                    format!("unknown type `{other}`: the declaration using it is skipped"),
                                )
                                .with_help(
                                    "built-in types are int, float, str, bool, Unit, list[T], Map[K, V], Option[T], Result[T, E]; declare others with `type`",
                                ),
                            );
                            if self.blocked.is_none() {
                                self.blocked = Some((
                                    name.span,
                                    format!("type `{other}` is declared nowhere"),
                                ));
                            }
                            return Ty::Any;
                        }
                    },
                };
                if let Some(size) = arg_exprs
                    .iter()
                    .find(|a| matches!(a, ast::TypeExpr::Size { .. }))
                {
                    self.diag(
                        Code::TypeArguments,
                        size.span(),
                        format!("`{text}` takes types as arguments, not numbers"),
                    );
                } else if !want.contains(&n_args) {
                    self.diag(
                        Code::TypeArguments,
                        name.span,
                        format!(
                            "`{}` takes {} type argument(s), found {}",
                            text,
                            if want.start() == want.end() {
                                want.start().to_string()
                            } else {
                                format!("{} to {}", want.start(), want.end())
                            },
                            n_args
                        ),
                    );
                }
                ty
            }
        }
    }

    /// A resource returns `str`, or `Content` (`content.resource` / `content.blob`).
    fn resource_return(&mut self, fd: &'a ast::FnDecl, ret: &Ty, fname: &str) {
        let f = self.f;
        let content = fd.ret.is_some_and(|t| {
            matches!(f.ty(t), ast::TypeExpr::Named { name, .. } if self.name(name.sym) == "Content")
        });
        if *ret != Ty::Str && !content {
            let span = fd.ret.map(|t| f.ty(t).span()).unwrap_or(fd.name.span);
            let msg = if fd.ret.is_none() {
                format!("resource function `{fname}` must declare `to str` or `to Content`")
            } else {
                format!("resource function `{fname}` must return `str` or `Content`")
            };
            self.diags.push(
                Diagnostic::new(Code::ResourceReturn, span, msg)
                    .with_help("a resource's body is text (`to str`), or typed text or bytes (`to Content`, made by `content.resource` or `content.blob`)"),
            );
        }
    }

    fn fn_decl(&mut self, fd: &'a ast::FnDecl, id: usize) {
        let f = self.f;
        let mut role = FnRole::Plain;
        let mut role_span: Option<Span> = None;
        for d in &f.decorators[fd.decorators] {
            let path = f.str(d.path);
            let args = &f.decorator_args[d.args];
            let strings: Vec<Option<String>> = args
                .iter()
                .map(|a| a.value.map(|v| f.str(v).to_string()))
                .collect();
            if let Some(bad) = args.iter().find(|a| a.value.is_none())
                && crate::parser::ROLE_DECORATORS.contains(&path)
            {
                self.diag(
                    Code::DecoratorArgs,
                    bad.span,
                    format!("`@{path}` takes string literals only"),
                );
            }
            let new_role = match path {
                "tool" | "mcp.tool" => {
                    if path == "mcp.tool" {
                        self.diags.push(
                            Diagnostic::new(
                                Code::McpToolDeprecated,
                                d.span,
                                "`@mcp.tool` is deprecated",
                            )
                            .with_help("write `@tool`"),
                        );
                    }
                    if args.len() > 1 {
                        self.diag(
                            Code::DecoratorArgs,
                            args[1].span,
                            format!("`@{path}` takes at most one description string"),
                        );
                    }
                    Some(FnRole::Tool {
                        description: strings.first().cloned().flatten(),
                        deprecated_spelling: path == "mcp.tool",
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
                "mcp.prompt" => {
                    if args.len() > 1 {
                        self.diag(
                            Code::DecoratorArgs,
                            args[1].span,
                            "`@mcp.prompt` takes at most one description string",
                        );
                    }
                    Some(FnRole::Prompt {
                        description: strings.first().cloned().flatten(),
                    })
                }
                "complete" => match strings.as_slice() {
                    [Some(argument)] => Some(FnRole::Complete {
                        argument: argument.clone(),
                    }),
                    _ => {
                        self.diags.push(
                            Diagnostic::new(
                                Code::DecoratorArgs,
                                d.span,
                                "`@complete` takes the name of the argument it completes",
                            )
                            .with_help(r#"write `@complete("city")`"#),
                        );
                        None
                    }
                },
                "test" => {
                    if args.len() > 1 {
                        self.diag(
                            Code::DecoratorArgs,
                            args[1].span,
                            "`@test` takes at most one label string",
                        );
                    }
                    Some(FnRole::Test {
                        label: strings.first().cloned().flatten(),
                    })
                }
                // Real Vox's other decorators mean nothing to the interpreter.
                other if crate::parser::VOX_DECORATORS.contains(&other) => None,
                other => {
                    self.diags.push(
                        Diagnostic::new(
                            Code::UnknownDecorator,
                            d.span,
                            format!("unknown decorator `@{other}` is ignored"),
                        )
                        .with_help(
                            "known decorators: @tool, @mcp.resource, @mcp.prompt, @complete, @test",
                        ),
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
                            "a function can have only one of @tool, @mcp.resource, @mcp.prompt and @test",
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
        // What the signature or the body uses that the interpreter cannot run skips the function.
        self.blocked = None;
        let fn_params = &f.params[fd.params];
        let params: Vec<ParamSig> = fn_params
            .iter()
            .map(|p| ParamSig {
                name: self.name(p.name.sym).to_string(),
                ty: match p.ty {
                    Some(t) => self.ty(f.ty(t)),
                    None => Ty::Any,
                },
                has_default: p.default.is_some(),
            })
            .collect();
        let ret = match fd.ret {
            Some(t) => self.ty(f.ty(t)),
            None => Ty::Any,
        };
        let fname = self.name(fd.name.sym);
        match &role {
            FnRole::Resource { uri, .. } if crate::template::is_template(uri) => {
                match crate::template::variables(uri) {
                    Err(e) => self.diag(Code::DecoratorArgs, role_span.unwrap_or(fd.name.span), e),
                    Ok(vars) => {
                        let names: Vec<&str> =
                            fn_params.iter().map(|p| self.name(p.name.sym)).collect();
                        let mut want = vars.clone();
                        want.sort_unstable();
                        let mut have = names.clone();
                        have.sort_unstable();
                        if want != have {
                            self.diags.push(
                                Diagnostic::new(
                                    Code::ResourceParams,
                                    fd.name.span,
                                    format!(
                                        "resource template {uri:?} has the variables ({}) but `{fname}` takes ({})",
                                        vars.join(", "),
                                        names.join(", ")
                                    ),
                                )
                                .with_help("give the function one `str` parameter per template variable, named alike"),
                            );
                        }
                    }
                }
                self.resource_return(fd, &ret, fname);
            }
            FnRole::Resource { .. } => {
                if let Some(p) = fn_params.first() {
                    self.diags.push(
                        Diagnostic::new(
                            Code::ResourceParams,
                            p.name.span,
                            format!("resource function `{fname}` must not take parameters"),
                        )
                        .with_help(
                            "resources are read without arguments; make it `fn name() to str`",
                        ),
                    );
                }
                self.resource_return(fd, &ret, fname);
            }
            FnRole::Test { .. } => {
                if let Some(p) = fn_params.first() {
                    self.diag(
                        Code::TestParams,
                        p.name.span,
                        format!("test function `{fname}` must not take parameters"),
                    );
                }
            }
            _ => {}
        }
        let (body, _) = self.lower_fn_body(self.sym_ref(fd.name.sym), fd.params, &fd.body, false);
        if let Some((at, why)) = self.blocked.take() {
            let fname = self.name(fd.name.sym).to_string();
            self.diags.push(
                Diagnostic::new(
                    Code::NotExecutable,
                    at,
                    format!(
                        "`fn {fname}` is not executable by the tool interpreter and is skipped: {why}"
                    ),
                )
                .with_help(format!(
                    "the file's other functions still load; calling `{fname}` fails at run time"
                )),
            );
            let msg = StrRef::push(
                &mut self.program.strings,
                &format!("`{fname}` is not run by the tool interpreter: {why}"),
            );
            let expr = self.push(ExprKind::Unavailable(msg), fd.name.span);
            self.program.bodies[body as usize].expr = expr;
            self.program.functions[id].not_executable = Some(why);
        }
        let sig = &mut self.program.functions[id];
        sig.role = role;
        sig.params = params;
        sig.ret = ret;
        sig.body = body;
    }

    fn open_ctx(&mut self, is_const: bool) {
        let mut ctx = self.free_ctx.pop().unwrap_or_default();
        ctx.locals.clear();
        ctx.scope_starts.clear();
        ctx.captures.clear();
        ctx.n_slots = 0;
        ctx.loop_depth = 0;
        ctx.is_const = is_const;
        self.fns.push(ctx);
    }

    /// Lowers parameters and a body into a new frame; for closures the frame captures from the
    /// enclosing ones.
    fn lower_fn_body(
        &mut self,
        name: StrRef,
        params: Seq<ast::Param>,
        block: &ast::Block,
        closure: bool,
    ) -> (BodyId, Seq<(u32, u32)>) {
        if !closure {
            while let Some(ctx) = self.fns.pop() {
                self.free_ctx.push(ctx);
            }
        }
        self.open_ctx(false);
        let f = self.f;
        let params = &f.params[params];
        let mut body_params = Vec::with_capacity(params.len());
        for (i, p) in params.iter().enumerate() {
            let default = p.default.map(|d| self.expr(d));
            if params[..i].iter().any(|q| q.name.sym == p.name.sym) {
                self.diag(
                    Code::Duplicate,
                    p.name.span,
                    format!("parameter `{}` is declared twice", self.name(p.name.sym)),
                );
            }
            body_params.push(BodyParam {
                name: self.sym_ref(p.name.sym),
                default,
            });
            self.declare(p.name.sym, false);
        }
        let expr = self.block(block);
        let ctx = self.fns.pop().expect("pushed above");
        let captures = Seq::push_all(&mut self.program.captures, ctx.captures.iter().copied());
        let params_seq = Seq::push_all(&mut self.program.params, body_params);
        let id = self.push_body(Body {
            n_slots: ctx.n_slots,
            n_params: params.len() as u32,
            params: params_seq,
            expr,
            name,
        });
        self.free_ctx.push(ctx);
        (id, captures)
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

    fn ctx(&mut self) -> &mut FnCtx {
        self.fns.last_mut().expect("inside a body")
    }

    fn declare(&mut self, name: Sym, mutable: bool) -> u32 {
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
    fn lookup_local(&mut self, level: usize, name: Sym) -> Option<(u32, bool, bool)> {
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

    fn resolve(&mut self, name: Sym, span: Span) -> ExprKind {
        if !self.fns.is_empty() {
            let level = self.fns.len() - 1;
            if let Some((slot, _, _)) = self.lookup_local(level, name) {
                return ExprKind::Local(slot);
            }
        }
        if let Some(g) = self.globals[name.0 as usize] {
            return match g {
                Global::Ctor(Ctor::User { ty, variant })
                    if self.variant_arity(Ctor::User { ty, variant }) == 0 =>
                {
                    ExprKind::Construct(Ctor::User { ty, variant }, Seq::EMPTY)
                }
                Global::Opaque(_) | Global::Import(_) => {
                    ExprKind::Unavailable(self.unavailable(name, g))
                }
                g => ExprKind::Global(g),
            };
        }
        if let Some(b) = self.builtin(name) {
            return ExprKind::Global(Global::Builtin(b));
        }
        if let Some(c) = self.ctor(name) {
            return if c == Ctor::None {
                ExprKind::Construct(Ctor::None, Seq::EMPTY)
            } else {
                ExprKind::Global(Global::Ctor(c))
            };
        }
        let text = self.name(name);
        match text {
            // Real Vox writes the unit value as its type's name (`return Ok(Unit)`), and has
            // `null`, which is JSON's null: `None` here.
            "Unit" => return ExprKind::Unit,
            "null" => return ExprKind::Construct(Ctor::None, Seq::EMPTY),
            _ => {}
        }
        if self.type_index[name.0 as usize].is_some() {
            self.diag(
                Code::UnknownName,
                span,
                format!("`{text}` is a type, not a value"),
            );
        } else {
            self.diags.push(
                Diagnostic::new(
                    Code::UnknownName,
                    span,
                    format!("cannot find `{text}` in this scope"),
                )
                .with_help("declare it with `let`, as a parameter, or as a top-level `fn`"),
            );
        }
        ExprKind::Unit
    }

    /// The dotted path of a namespace expression (`std.fs` of `std.fs.read(p)`), when its root
    /// is a namespace name ([`crate::stdlib::ROOTS`]) that no local or top-level item shadows
    /// (an `import fs` that loaded no file does not).
    fn ns_path(&self, e: ast::ExprId) -> Option<String> {
        match self.f.expr(e).kind {
            A::Var(sym) | A::Upper(sym) => {
                let text = self.name(sym);
                if !crate::stdlib::ROOTS.contains(&text)
                    || !matches!(self.globals[sym.0 as usize], None | Some(Global::Import(_)))
                    || self
                        .fns
                        .iter()
                        .any(|c| c.locals.iter().any(|l| l.name == sym))
                {
                    return None;
                }
                Some(text.to_string())
            }
            A::Field(recv, name) => {
                Some(format!("{}.{}", self.ns_path(recv)?, self.name(name.sym)))
            }
            _ => None,
        }
    }

    /// A call of namespace member `path`: a built-in when the interpreter runs it, else a
    /// use that fails at run time and makes the enclosing function skipped.
    fn ns_member(&mut self, path: String, args: Seq<ast::ExprId>, span: Span) -> ExprKind {
        match crate::stdlib::member(&path) {
            crate::stdlib::Member::Runs(b) => {
                let (lo, hi) = b.arity();
                self.arity(span, || format!("`{path}`"), lo, hi, args.len());
                ExprKind::CallBuiltin(b, self.exprs(args))
            }
            crate::stdlib::Member::Effect(why) => self.not_run(format!("`{path}` {why}"), span),
            crate::stdlib::Member::Unknown => self.not_run(
                format!("`{path}` is not a standard-library member the tool interpreter provides"),
                span,
            ),
        }
    }

    /// A use of something the interpreter does not run: fails at run time with `why`, and the
    /// function it is in is skipped.
    fn not_run(&mut self, why: String, span: Span) -> ExprKind {
        let msg = StrRef::push(&mut self.program.strings, &why);
        if self.blocked.is_none() {
            self.blocked = Some((span, why));
        }
        ExprKind::Unavailable(msg)
    }

    fn unavailable(&mut self, sym: Sym, g: Global) -> StrRef {
        if let Some(&r) = self.unavailable_msgs.get(&sym) {
            return r;
        }
        let name = self.name(sym);
        let msg = match g {
            Global::Opaque(i) if self.program.opaque[i as usize].broken => {
                format!("`{name}` has errors (run `vox check` on its file), so it was not compiled")
            }
            Global::Opaque(i) => format!(
                "`{name}` is a `{}` declaration, which the tool interpreter does not run",
                self.program.opaque[i as usize].kind
            ),
            _ => format!("`{name}` comes from an import that loaded no .vox file"),
        };
        let r = StrRef::push(&mut self.program.strings, &msg);
        self.unavailable_msgs.insert(sym, r);
        r
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

    fn block(&mut self, b: &ast::Block) -> ExprId {
        let f = self.f;
        self.open_scope();
        let mut stmts = self.free_stmts.pop().unwrap_or_default();
        for s in &f.stmts[b.stmts] {
            let s = self.stmt(s);
            stmts.push(s);
        }
        self.close_scope();
        // A block that is one expression is that expression: it binds nothing, and the
        // interpreter saves a level per block (`if c { x } else { y }` is everywhere).
        if let [Stmt::Expr(e)] = stmts[..] {
            stmts.clear();
            self.free_stmts.push(stmts);
            return e;
        }
        let seq = Seq::push_all(&mut self.program.stmts, stmts.drain(..));
        self.free_stmts.push(stmts);
        self.push(ExprKind::Block(seq), b.span)
    }

    fn stmt(&mut self, s: &ast::Stmt) -> Stmt {
        match *s {
            ast::Stmt::Let {
                mutable,
                name,
                ty,
                value,
            } => {
                if let Some(t) = ty {
                    self.ty(self.f.ty(t));
                }
                let v = self.expr(value);
                let slot = self.declare(name.sym, mutable);
                Stmt::Let(slot, v)
            }
            ast::Stmt::LetPattern {
                mutable,
                pattern,
                ty,
                value,
            } => {
                if let Some(t) = ty {
                    self.ty(self.f.ty(t));
                }
                let v = self.expr(value);
                self.bind_mutable = mutable;
                let pat = self.pattern(&pattern);
                self.bind_mutable = false;
                Stmt::LetPattern(pat, v)
            }
            ast::Stmt::Assign { target, op, value } => {
                let place = self.place(target, Verb::Assign);
                let v = self.expr(value);
                match place {
                    Some(p) => Stmt::Assign(p, op, v),
                    None => Stmt::Expr(v),
                }
            }
            ast::Stmt::Expr(e) => Stmt::Expr(self.expr(e)),
        }
    }

    fn verb(&self, v: Verb) -> String {
        match v {
            Verb::Assign => "assign to".to_string(),
            Verb::CallOn(m) => format!("call `{}` on", self.name(m)),
        }
    }

    /// Resolves an assignment target; reports why it cannot be assigned.
    fn place(&mut self, e: ast::ExprId, verb: Verb) -> Option<u32> {
        let f = self.f;
        let mut path = Vec::new();
        let mut cur = f.expr(e);
        loop {
            match cur.kind {
                A::Field(inner, name) => {
                    path.push(PlaceStep::Field(self.sym_ref(name.sym)));
                    cur = f.expr(inner);
                }
                A::Index(inner, idx) => {
                    path.push(PlaceStep::Index(self.expr(idx)));
                    cur = f.expr(inner);
                }
                A::Var(sym) => {
                    let name = self.name(sym);
                    path.reverse();
                    let level = self.fns.len() - 1;
                    return match self.lookup_local(level, sym) {
                        Some((slot, true, _)) => {
                            let path = Seq::push_all(&mut self.program.place_steps, path);
                            let id = self.program.places.len() as u32;
                            self.program.places.push(Place { slot, path });
                            Some(id)
                        }
                        Some((_, false, true)) => {
                            let verb = self.verb(verb);
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
                            let verb = self.verb(verb);
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
                            let verb = self.verb(verb);
                            if self.globals[sym.0 as usize].is_some() || self.builtin(sym).is_some()
                            {
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

    fn exprs(&mut self, es: Seq<ast::ExprId>) -> Seq<ExprId> {
        let f = self.f;
        let mut out = self.free_ids.pop().unwrap_or_default();
        for &e in &f.expr_lists[es] {
            let id = self.expr(e);
            out.push(id);
        }
        let seq = Seq::push_all(&mut self.program.expr_lists, out.drain(..));
        self.free_ids.push(out);
        seq
    }

    /// Lowers `callee(first, rest…)`; `first` is the piped value of `x |> f(…)`.
    fn call(
        &mut self,
        callee: ast::ExprId,
        first: Option<ast::ExprId>,
        rest: Seq<ast::ExprId>,
        span: Span,
    ) -> ExprId {
        let f = self.f;
        let mut lowered = self.free_ids.pop().unwrap_or_default();
        if let Some(a) = first {
            let id = self.expr(a);
            lowered.push(id);
        }
        for &a in &f.expr_lists[rest] {
            let id = self.expr(a);
            lowered.push(id);
        }
        let n = lowered.len();
        let args = Seq::push_all(&mut self.program.expr_lists, lowered.drain(..));
        self.free_ids.push(lowered);
        let callee_e = f.expr(callee);
        let kind = match callee_e.kind {
            A::Var(sym) | A::Upper(sym) => {
                let name = self.name(sym);
                let callee_kind = self.resolve(sym, callee_e.span);
                match callee_kind {
                    ExprKind::Global(Global::Fn(id)) => {
                        let (lo, hi) = self.fn_arity[id as usize];
                        self.arity(callee_e.span, || format!("`{name}`"), lo, hi, n);
                        ExprKind::CallFn(id, args)
                    }
                    ExprKind::Global(Global::Builtin(b)) => {
                        let (lo, hi) = b.arity();
                        self.arity(callee_e.span, || format!("`{name}`"), lo, hi, n);
                        ExprKind::CallBuiltin(b, args)
                    }
                    ExprKind::Global(Global::Ctor(c)) => {
                        let k = self.variant_arity(c);
                        self.arity(callee_e.span, || format!("`{name}`"), k, k, n);
                        ExprKind::Construct(c, args)
                    }
                    ExprKind::Construct(c, _) => {
                        self.arity(callee_e.span, || format!("`{name}`"), 0, 0, n);
                        ExprKind::Construct(c, args)
                    }
                    ExprKind::Unavailable(m) => ExprKind::Unavailable(m),
                    ExprKind::Unit => ExprKind::Unit,
                    other => ExprKind::Call(self.push(other, callee_e.span), args),
                }
            }
            _ => ExprKind::Call(self.expr(callee), args),
        };
        self.push(kind, span)
    }

    fn expr(&mut self, id: ast::ExprId) -> ExprId {
        let f = self.f;
        let e = f.expr(id);
        let span = e.span;
        let kind = match e.kind {
            A::Int(i) => ExprKind::Int(i),
            A::Float(x) => ExprKind::Float(x),
            A::Dec(digits) => match crate::decimal::Dec::parse(f.str(digits)) {
                Some(d) => {
                    self.program.decs.push(d);
                    ExprKind::Dec((self.program.decs.len() - 1) as u32)
                }
                None => {
                    self.diag(
                        Code::NumberOutOfRange,
                        span,
                        format!(
                            "`dec` literal has more than 38 digits or {} after the point",
                            crate::decimal::MAX_SCALE
                        ),
                    );
                    ExprKind::Unit
                }
            },
            A::Bool(b) => ExprKind::Bool(b),
            A::Str(parts) => {
                if let [ast::StrPart::Text(t)] = f.str_parts[parts] {
                    ExprKind::Str(self.text_ref(t))
                } else {
                    // Resolving a name pushes no pieces, so they stay contiguous.
                    let start = self.program.pieces.len();
                    for p in &f.str_parts[parts] {
                        let piece = match *p {
                            ast::StrPart::Text(t) => StrPiece::Text(self.text_ref(t)),
                            ast::StrPart::Var(name, s) => {
                                let kind = self.resolve(name, s);
                                StrPiece::Value(self.push(kind, s))
                            }
                        };
                        self.program.pieces.push(piece);
                    }
                    ExprKind::Interp(Seq::since(start, &self.program.pieces))
                }
            }
            A::Var(sym) | A::Upper(sym) => self.resolve(sym, span),
            A::List(items) => ExprKind::List(self.exprs(items)),
            A::Record(fields) => {
                let mut out: Vec<(Sym, ExprId)> = Vec::with_capacity(fields.len());
                for &(name, value) in &f.fields[fields] {
                    if out.iter().any(|(n, _)| *n == name.sym) {
                        self.diag(
                            Code::Duplicate,
                            name.span,
                            format!(
                                "field `{}` appears twice in this record",
                                self.name(name.sym)
                            ),
                        );
                    }
                    let v = self.expr(value);
                    out.push((name.sym, v));
                }
                let out: Vec<(StrRef, ExprId)> =
                    out.into_iter().map(|(n, v)| (self.sym_ref(n), v)).collect();
                ExprKind::Record(Seq::push_all(&mut self.program.fields, out))
            }
            A::Binary(op, l, r) => {
                let l = self.expr(l);
                let r = self.expr(r);
                self.binary(op, l, r)
            }
            A::Unary(op, x) => ExprKind::Unary(op, self.expr(x)),
            A::Call(callee, args) => return self.call(callee, None, args, span),
            A::Pipe(lhs, rhs) => {
                // `x |> f(a)` is `f(x, a)`; `x |> f` is `f(x)`.
                if let A::Call(callee, args) = f.expr(rhs).kind {
                    return self.call(callee, Some(lhs), args, span);
                }
                return self.call(rhs, Some(lhs), Seq::EMPTY, span);
            }
            A::Method(recv, name, _) | A::Field(recv, name)
                if let Some(ns) = self.ns_path(recv) =>
            {
                let path = format!("{ns}.{}", self.name(name.sym));
                match e.kind {
                    A::Method(_, _, args) => self.ns_member(path, args, span),
                    _ => self.not_run(
                        format!("`{path}` is not a value the tool interpreter provides"),
                        span,
                    ),
                }
            }
            A::Method(recv, name, args) => match self.method(name.sym) {
                Some((m, lo, hi, mutates)) => {
                    let text = self.name(name.sym);
                    self.arity(name.span, || format!("method `{text}`"), lo, hi, args.len());
                    let args = self.exprs(args);
                    if mutates
                        && matches!(f.expr(recv).kind, A::Var(_) | A::Field(..) | A::Index(..))
                    {
                        match self.place(recv, Verb::CallOn(name.sym)) {
                            Some(p) => ExprKind::MutMethod(p, m, args),
                            None => ExprKind::Unit,
                        }
                    } else {
                        ExprKind::Method(self.expr(recv), m, args)
                    }
                }
                None => {
                    // Not a built-in method: call the record field of that name.
                    let r = self.expr(recv);
                    let field = self.push(
                        ExprKind::Field(r, self.sym_ref(name.sym)),
                        f.expr(recv).span.to(name.span),
                    );
                    ExprKind::Call(field, self.exprs(args))
                }
            },
            A::Field(recv, name) => ExprKind::Field(self.expr(recv), self.sym_ref(name.sym)),
            A::Index(recv, idx) => {
                let r = self.expr(recv);
                let i = self.expr(idx);
                ExprKind::Index(r, i)
            }
            A::Try(x) => ExprKind::Try(self.expr(x)),
            A::With(..) => self.not_run(
                "`with { … }` (retries, timeouts: Vox's durable-execution options) is run by Vox's \
                 workflow runtime, not the tool interpreter"
                    .to_string(),
                span,
            ),
            A::If(c, then, otherwise) => {
                let c = self.expr(c);
                let t = self.block(&then);
                let o = otherwise.map(|o| self.expr(o));
                ExprKind::If(c, t, o)
            }
            A::Match(scrutinee, arms) => {
                let s = self.expr(scrutinee);
                let mut out = Vec::with_capacity(arms.len());
                for arm in &f.arms[arms] {
                    self.open_scope();
                    let pat = self.pattern(&arm.pat);
                    let body = self.expr(arm.body);
                    self.close_scope();
                    out.push(Arm { pat, body });
                }
                ExprKind::Match(s, Seq::push_all(&mut self.program.arms, out))
            }
            A::While(c, body) => {
                let c = self.expr(c);
                self.ctx().loop_depth += 1;
                let b = self.block(&body);
                self.ctx().loop_depth -= 1;
                ExprKind::While(c, b)
            }
            A::Loop(body) => {
                self.ctx().loop_depth += 1;
                let b = self.block(&body);
                self.ctx().loop_depth -= 1;
                ExprKind::Loop(b)
            }
            A::For(i) => {
                let ast::ForLoop {
                    var,
                    index,
                    iter,
                    body,
                } = f.fors[i as usize];
                let it = self.expr(iter);
                self.open_scope();
                let v = self.declare(var.sym, false);
                let i = index.map(|n| self.declare(n.sym, false));
                self.ctx().loop_depth += 1;
                let b = self.block(&body);
                self.ctx().loop_depth -= 1;
                self.close_scope();
                ExprKind::For(v, i, it, b)
            }
            A::Break | A::Continue => {
                let is_break = matches!(e.kind, A::Break);
                if self.ctx().loop_depth == 0 {
                    let word = if is_break { "break" } else { "continue" };
                    self.diag(
                        Code::MisplacedControl,
                        span,
                        format!("`{word}` outside of a loop"),
                    );
                    ExprKind::Unit
                } else if is_break {
                    ExprKind::Break
                } else {
                    ExprKind::Continue
                }
            }
            A::Return(value) => {
                let v = value.map(|v| self.expr(v));
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
            A::Block(b) => return self.block(&b),
            A::Closure(c) => {
                let ast::Closure { params, ret, body } = f.closures[c as usize];
                if let Some(t) = ret {
                    self.ty(f.ty(t));
                }
                for p in &f.params[params] {
                    if let Some(t) = p.ty {
                        self.ty(f.ty(t));
                    }
                }
                let (id, captures) = self.lower_fn_body(self.closure_name, params, &body, true);
                ExprKind::Closure(id, captures)
            }
            A::Error => ExprKind::Unit,
        };
        self.push(kind, span)
    }

    /// A binary node; a local with an int literal or another local is fused into one node
    /// (the two leaves, just pushed, are taken back).
    fn binary(&mut self, op: BinOp, l: ExprId, r: ExprId) -> ExprKind {
        let n = self.program.exprs.len() as u32;
        if matches!(op, BinOp::And | BinOp::Or) || l.0 + 2 != n || r.0 + 1 != n {
            return ExprKind::Binary(op, l, r);
        }
        let fused = match (self.program.expr(l).kind, self.program.expr(r).kind) {
            (ExprKind::Local(a), ExprKind::Int(k)) => ExprKind::BinLocalInt(op, a, k),
            (ExprKind::Local(a), ExprKind::Local(b)) => ExprKind::BinLocalLocal(op, a, b),
            _ => return ExprKind::Binary(op, l, r),
        };
        self.program.exprs.truncate(l.0 as usize);
        fused
    }

    fn pattern(&mut self, p: &ast::Pattern) -> Pat {
        let f = self.f;
        match *p {
            ast::Pattern::Wild(_) | ast::Pattern::Error(_) => Pat::Wild,
            ast::Pattern::Bind(n) => Pat::Bind(self.declare(n.sym, self.bind_mutable)),
            ast::Pattern::Int(i, _) => Pat::Int(i),
            ast::Pattern::Float(x, _) => Pat::Float(x),
            ast::Pattern::Str(s, _) => Pat::Str(self.text_ref(s)),
            ast::Pattern::Bool(b, _) => Pat::Bool(b),
            ast::Pattern::Ctor(name, args) => {
                let ctor = match self.globals[name.sym.0 as usize] {
                    Some(Global::Ctor(c)) => Some(c),
                    _ => None,
                }
                .or(self.ctor(name.sym))
                // Real Vox matches `Err(e)` as well as `Error(e)`.
                .or_else(|| (self.name(name.sym) == "Err").then_some(Ctor::Error));
                let text = self.name(name.sym);
                let Some(c) = ctor else {
                    self.diag(
                        Code::UnknownName,
                        name.span,
                        format!("no variant named `{text}`"),
                    );
                    return Pat::Wild;
                };
                let k = self.variant_arity(c);
                self.arity(name.span, || format!("pattern `{text}`"), k, k, args.len());
                let subs: Vec<Pat> = f.patterns[args].iter().map(|a| self.pattern(a)).collect();
                Pat::Ctor(c, Seq::push_all(&mut self.program.pats, subs))
            }
            ast::Pattern::Tuple(items, _) => {
                let subs: Vec<Pat> = f.patterns[items].iter().map(|a| self.pattern(a)).collect();
                Pat::Tuple(Seq::push_all(&mut self.program.pats, subs))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_and_method_name_is_predefined() {
        // Namespace members (`path.join`) are found by their dotted path, not as symbols.
        for (_, name, ..) in Builtin::ALL.iter().filter(|(_, n, ..)| !n.contains('.')) {
            assert!(Sym::PREDEFINED.contains(name), "{name}");
        }
        for (_, name, ..) in Method::ALL {
            assert!(Sym::PREDEFINED.contains(name), "{name}");
        }
        for name in ["Some", "None", "Ok", "Error", "_"] {
            assert!(Sym::PREDEFINED.contains(&name), "{name}");
        }
        let mut seen = std::collections::HashSet::new();
        for name in Sym::PREDEFINED {
            assert!(seen.insert(name), "{name} is listed twice");
        }
        assert_eq!(Sym::PREDEFINED[Sym::UNDERSCORE.0 as usize], "_");
    }
}
