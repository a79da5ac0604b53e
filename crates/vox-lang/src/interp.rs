//! The tree-walking interpreter over the HIR, with per-call budgets.
//!
//! Locals live in one value stack addressed by frame pointer + slot, so a call costs no
//! allocation; a direct call writes its arguments straight into the callee's slots. Every
//! evaluated node costs one step; the wall clock is read every 1024 steps; call depth and the
//! native stack used are checked on every call, so a runaway call ends with a
//! [`RunError::Budget`] and the process stays healthy.
//!
//! Code that computes ints (arithmetic, comparisons, calls, conditionals) runs on an int path
//! (`eval_i`) that mirrors `eval` step for step but returns `Result<i64, Slow>`, two machine
//! words that come back in registers; any other value waits in `Interp::acc`.

use crate::ast::{BinOp, UnOp};
use crate::diag::Span;
use crate::hir::*;
use crate::value::{self, Func, MAX_VALUE_DEPTH, TooDeep, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Limits for one call. Every field is configurable; the defaults suit a tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Evaluation steps (one per expression node evaluated).
    pub max_steps: u64,
    /// Nested function calls.
    pub max_call_depth: u32,
    /// Wall-clock time.
    pub max_wall: Duration,
    /// Bytes allocated over the whole call (cumulative, approximate).
    pub max_memory: usize,
    /// Native stack the interpreter may use below its entry point. Keep it under the calling
    /// thread's stack size minus what the caller already uses (Rust threads get 2 MiB).
    pub max_stack_bytes: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_steps: 10_000_000,
            max_call_depth: 400,
            max_wall: Duration::from_secs(5),
            max_memory: 64 << 20,
            max_stack_bytes: 1 << 20,
        }
    }
}

/// Which budget ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetKind {
    /// Step limit.
    Steps,
    /// Call depth (or native stack) limit.
    Depth,
    /// Wall-clock limit.
    Time,
    /// Allocation limit.
    Memory,
    /// The caller cancelled the call (`CallOptions::cancel`).
    Cancelled,
}

impl std::fmt::Display for BudgetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BudgetKind::Steps => "step limit exceeded",
            BudgetKind::Depth => "recursion depth limit exceeded",
            BudgetKind::Time => "time limit exceeded",
            BudgetKind::Memory => "memory limit exceeded",
            BudgetKind::Cancelled => "cancelled",
        })
    }
}

/// Why a call stopped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RunError {
    /// A run-time error in the program (type mismatch, failed assertion, no match arm...).
    #[error("{message}")]
    Runtime {
        /// What happened.
        message: String,
        /// Where.
        span: Span,
    },
    /// A budget ran out.
    #[error("{kind}")]
    Budget {
        /// Which one.
        kind: BudgetKind,
        /// Where the interpreter was.
        span: Span,
    },
}

impl RunError {
    /// Where it happened.
    pub fn span(&self) -> Span {
        match self {
            RunError::Runtime { span, .. } | RunError::Budget { span, .. } => *span,
        }
    }
}

/// Non-local control flow, and errors, travel as the `Err` side of evaluation.
///
/// `Flow` carries no payload so that `Result<Value, Flow>` stays 16 bytes, the size of a
/// `Value` (it is still returned through memory; int-heavy code takes the int path, whose
/// `Result<i64, Slow>` comes back in registers). The returned value waits in
/// `Interp::ret_val`, the error in `PENDING`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    Break,
    Continue,
    Return,
    Error,
}

pub(crate) type R<T = Value> = Result<T, Flow>;

/// Why an int-path evaluation ([`Interp::eval_i`]) did not produce an int: the value was of
/// another type (it waits in `Interp::acc`), or control flow, or an error.
///
/// `repr(u64)` makes `Result<i64, Slow>` a pair of machine words, which Rust returns in two
/// registers; `R` is returned through memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum Slow {
    Value,
    Break,
    Continue,
    Return,
    Error,
}

impl From<Flow> for Slow {
    #[inline(always)]
    fn from(f: Flow) -> Slow {
        match f {
            Flow::Break => Slow::Break,
            Flow::Continue => Slow::Continue,
            Flow::Return => Slow::Return,
            Flow::Error => Slow::Error,
        }
    }
}

type RI = Result<i64, Slow>;

thread_local! {
    /// The error of the call running on this thread. A call is synchronous and the language
    /// cannot catch errors, so at most one is pending; `take_error` collects it at the top.
    static PENDING: std::cell::RefCell<Option<RunError>> = const { std::cell::RefCell::new(None) };
}

fn fail(e: RunError) -> Flow {
    PENDING.with(|p| *p.borrow_mut() = Some(e));
    Flow::Error
}

/// Takes the pending error of this thread's call.
pub(crate) fn take_error() -> RunError {
    PENDING
        .with(|p| p.borrow_mut().take())
        .unwrap_or(RunError::Runtime {
            message: "internal error: no error recorded".to_string(),
            span: Span::default(),
        })
}

pub(crate) fn rt(message: impl Into<String>, span: Span) -> Flow {
    fail(RunError::Runtime {
        message: message.into(),
        span,
    })
}

enum ConstState {
    Unset,
    Running,
    Done(Value),
}

/// Sink for `print`: receives each printed line.
pub type LogSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// The log levels `log(level, message)` takes (MCP's, from RFC 5424), least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Where a tool call's `log` and `progress` go while it runs: the MCP caller
/// (`notifications/message`, `notifications/progress`). Without one, `log` lines go to the
/// `print` sink as `level: message` and `progress` is dropped.
pub trait ToolEvents: Sync {
    /// `level` is one of [`LOG_LEVELS`].
    fn log(&self, level: &str, message: &str);
    /// `done` is finite and larger than every earlier `done` of the call.
    fn progress(&self, done: f64, total: Option<f64>, message: Option<&str>);
    /// Sends a client request (`elicitation/create` or `sampling/createMessage` with these
    /// params) to the caller's client and blocks until its answer (the result's JSON), at most
    /// `timeout`, and not past the call's cancellation.
    fn ask(
        &self,
        kind: crate::ask::AskKind,
        _params: serde_json::Value,
        _timeout: Duration,
    ) -> Result<serde_json::Value, crate::ask::AskFailure> {
        Err(crate::ask::AskFailure::Unsupported(format!(
            "this call has no client to {}",
            match kind {
                crate::ask::AskKind::Elicit => "ask the user (elicitation)",
                crate::ask::AskKind::Sample => "ask for a model's answer (sampling)",
            }
        )))
    }
}

/// One call's interpreter state.
pub(crate) struct Interp<'p> {
    pub(crate) p: &'p Program,
    exprs: &'p [Expr],
    /// Locals of all active frames, addressed by frame pointer + slot. Every element is
    /// initialized; `sp` is the first free slot. Free slots may hold stale scalars (nothing
    /// reads a slot before writing it) but never a value that owns memory.
    stack: Vec<Value>,
    sp: usize,
    fp: usize,
    pub(crate) steps: u64,
    /// The step count at which `tick` next leaves its fast path (the step limit, or the next
    /// native-stack check).
    next_check: u64,
    /// The step count at which the wall clock is next read.
    next_time: u64,
    budget: Budget,
    deadline: Instant,
    /// Set by the caller to stop the call; read with the wall clock.
    cancel: Option<&'p std::sync::atomic::AtomicBool>,
    depth: u32,
    mem: usize,
    stack_base: usize,
    consts: Vec<ConstState>,
    pub(crate) logs: Vec<String>,
    sink: Option<LogSink<'p>>,
    /// Where `log` and `progress` go, when the call has a caller to tell.
    pub(crate) events: Option<&'p dyn ToolEvents>,
    /// The last `progress(done, …)`: each must be larger (MCP).
    pub(crate) last_progress: Option<f64>,
    /// The workspace `fs.*` reads from, when the call has one.
    pub(crate) workspace: Option<&'p crate::import::FsLoader>,
    /// The value of a `return` (or `?`) while `Flow::Return` unwinds to the call.
    pub(crate) ret_val: Option<Value>,
    /// A non-int result of the int path ([`Slow::Value`]).
    acc: Value,
}

#[inline(always)]
fn stack_addr() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

impl<'p> Interp<'p> {
    pub(crate) fn new(
        p: &'p Program,
        budget: Budget,
        sink: Option<LogSink<'p>>,
        events: Option<&'p dyn ToolEvents>,
        cancel: Option<&'p std::sync::atomic::AtomicBool>,
        workspace: Option<&'p crate::import::FsLoader>,
    ) -> Self {
        // Nothing should be left over from an earlier call, but a stale error must never be
        // reported for this one.
        PENDING.with(|p| p.borrow_mut().take());
        Interp {
            p,
            exprs: &p.exprs,
            // Small: most calls need a few slots, and the stack doubles when it must.
            stack: vec![Value::Unit; 16],
            sp: 0,
            fp: 0,
            steps: 0,
            next_check: budget.max_steps.saturating_add(1).min(32),
            next_time: 1024,
            budget,
            deadline: Instant::now() + budget.max_wall,
            cancel,
            depth: 0,
            mem: 0,
            stack_base: stack_addr(),
            consts: p.consts.iter().map(|_| ConstState::Unset).collect(),
            logs: Vec::new(),
            sink,
            events,
            last_progress: None,
            workspace,
            ret_val: None,
            acc: Value::Unit,
        }
    }

    fn budget_err(&self, kind: BudgetKind, span: Span) -> Flow {
        fail(RunError::Budget { kind, span })
    }

    /// Counts one step. The step limit, the wall clock (every 1024 steps) and the native
    /// stack (every 32) are checked off the fast path, which is one compare.
    #[inline(always)]
    fn tick(&mut self, span: Span) -> R<()> {
        self.steps += 1;
        if self.steps >= self.next_check {
            return self.tick_slow(span);
        }
        Ok(())
    }

    #[inline(never)]
    fn tick_slow(&mut self, span: Span) -> R<()> {
        if self.steps > self.budget.max_steps {
            return Err(self.budget_err(BudgetKind::Steps, span));
        }
        if self.steps >= self.next_time {
            self.next_time = self.steps + 1024;
            if Instant::now() > self.deadline {
                return Err(self.budget_err(BudgetKind::Time, span));
            }
            if self
                .cancel
                .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
            {
                return Err(self.budget_err(BudgetKind::Cancelled, span));
            }
        }
        // Calls check the native stack on entry; this catches deep nesting inside one body
        // too, within a few levels, without paying for the check on every node.
        if self.stack_base.abs_diff(stack_addr()) > self.budget.max_stack_bytes {
            return Err(self.budget_err(BudgetKind::Depth, span));
        }
        self.next_check = (self.steps + 32).min(self.budget.max_steps.saturating_add(1));
        Ok(())
    }

    /// Asks the caller's client (see [`ToolEvents::ask`]): one step, and the wait counts
    /// against the wall-time budget.
    pub(crate) fn ask(
        &mut self,
        kind: crate::ask::AskKind,
        params: serde_json::Value,
        span: Span,
    ) -> R<serde_json::Value> {
        use crate::ask::AskFailure;
        self.tick(span)?;
        let what = match kind {
            crate::ask::AskKind::Elicit => "elicit",
            crate::ask::AskKind::Sample => "sample",
        };
        let Some(ev) = self.events else {
            return Err(rt(
                format!(
                    "{what} needs an MCP client, and this call has none (`vox run` and `vox test` have no client to ask)"
                ),
                span,
            ));
        };
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.budget_err(BudgetKind::Time, span));
        }
        match ev.ask(kind, params, left) {
            Ok(answer) => Ok(answer),
            Err(AskFailure::TimedOut) => Err(self.budget_err(BudgetKind::Time, span)),
            Err(AskFailure::Cancelled) => Err(self.budget_err(BudgetKind::Cancelled, span)),
            Err(AskFailure::Unsupported(why) | AskFailure::Failed(why)) => {
                Err(rt(format!("{what}: {why}"), span))
            }
        }
    }

    /// Counts an allocation against the memory budget.
    pub(crate) fn charge(&mut self, bytes: usize, span: Span) -> R<()> {
        self.mem = self.mem.saturating_add(bytes);
        if self.mem > self.budget.max_memory {
            return Err(self.budget_err(BudgetKind::Memory, span));
        }
        Ok(())
    }

    /// Charges a freshly built value and passes it through.
    pub(crate) fn fresh(&mut self, v: Result<Value, TooDeep>, span: Span) -> R {
        match v {
            Ok(v) => {
                self.charge(v.alloc_size(), span)?;
                Ok(v)
            }
            Err(TooDeep) => Err(rt(
                format!("value nested deeper than {MAX_VALUE_DEPTH} levels"),
                span,
            )),
        }
    }

    pub(crate) fn string(&mut self, s: String, span: Span) -> R {
        self.charge(16 + s.len(), span)?;
        Ok(Value::Str(Rc::new(s)))
    }

    pub(crate) fn log(&mut self, line: String, span: Span) -> R<()> {
        self.charge(line.len(), span)?;
        if let Some(sink) = self.sink {
            sink(&line);
        }
        self.logs.push(line);
        Ok(())
    }

    // ---- calls ---------------------------------------------------------------------------

    /// Makes sure slots below `end` exist.
    #[inline(always)]
    fn reserve_to(&mut self, end: usize) {
        if end > self.stack.len() {
            self.grow_stack(end);
        }
    }

    #[inline(never)]
    fn grow_stack(&mut self, end: usize) {
        let n = end.max(self.stack.len() * 2);
        self.stack.resize(n, Value::Unit);
    }

    /// Writes a slot. A scalar being replaced needs no drop, so the common case is two plain
    /// stores.
    #[inline(always)]
    fn write_slot(&mut self, k: usize, v: Value) {
        let slot = &mut self.stack[k];
        if slot.is_scalar() {
            std::mem::forget(std::mem::replace(slot, v));
        } else {
            *slot = v;
        }
    }

    /// Writes an int into a slot. A slot usually held an int before (frames leave their
    /// scalars behind), and then only the payload is stored: building the whole value in a
    /// temporary and copying it stalled store forwarding on every call.
    #[inline(always)]
    fn write_int(&mut self, k: usize, i: i64) {
        match &mut self.stack[k] {
            Value::Int(x) => *x = i,
            _ => self.write_int_slow(k, i),
        }
    }

    #[inline(never)]
    fn write_int_slow(&mut self, k: usize, i: i64) {
        self.write_slot(k, Value::Int(i));
    }

    /// Pushes an argument onto the stack.
    #[inline(always)]
    fn push(&mut self, v: Value) {
        let k = self.sp;
        self.reserve_to(k + 1);
        self.write_slot(k, v);
        self.sp = k + 1;
    }

    /// Frees the slots from `base` up: values that own memory are released, scalars stay.
    #[inline(always)]
    fn pop_to(&mut self, base: usize) {
        for v in &mut self.stack[base..self.sp] {
            if !v.is_scalar() {
                *v = Value::Unit;
            }
        }
        self.sp = base;
    }

    /// Runs a body whose `nargs` arguments are already on the stack at `base` (and `sp` just
    /// past them); parameters in `missing` (and those past `nargs`) take their defaults.
    fn invoke(
        &mut self,
        body_id: BodyId,
        base: usize,
        nargs: usize,
        captures: &[(u32, Value)],
        missing: &[usize],
        span: Span,
    ) -> R {
        let p = self.p;
        let body = &p.bodies[body_id as usize];
        if nargs > body.n_params as usize {
            self.pop_to(base);
            return Err(rt(
                format!(
                    "`{}` takes {} argument(s), but {nargs} were given",
                    p.str(body.name),
                    body.n_params
                ),
                span,
            ));
        }
        // Checked per call only: a body's own expression nesting is bounded by the parser, so
        // the stack one call can use beyond this point is bounded too.
        if self.depth >= self.budget.max_call_depth
            || self.stack_base.abs_diff(stack_addr()) > self.budget.max_stack_bytes
        {
            self.pop_to(base);
            return Err(self.budget_err(BudgetKind::Depth, span));
        }
        self.depth += 1;
        let frame_end = base + body.n_slots as usize;
        self.reserve_to(frame_end);
        self.sp = self.sp.max(frame_end);
        let saved_fp = self.fp;
        self.fp = base;
        let mut r = self.run_frame(body, nargs, captures, missing, span);
        self.fp = saved_fp;
        self.pop_to(base);
        self.depth -= 1;
        // `r` is returned as is on the common path, so it can live in the caller's slot
        // instead of being copied there.
        match r {
            Err(Flow::Return) => r = Ok(self.ret_val.take().unwrap_or(Value::Unit)),
            Err(Flow::Break | Flow::Continue) => r = Ok(Value::Unit),
            _ => {}
        }
        r
    }

    fn run_frame(
        &mut self,
        body: &'p Body,
        nargs: usize,
        captures: &[(u32, Value)],
        missing: &[usize],
        span: Span,
    ) -> R {
        let n_params = body.n_params as usize;
        // The common call: every argument given, nothing captured.
        if nargs == n_params && missing.is_empty() && captures.is_empty() {
            return self.eval(self.x(body.expr));
        }
        for (slot, v) in captures {
            self.stack[self.fp + *slot as usize] = v.clone();
        }
        for i in 0..n_params {
            if i < nargs && !missing.contains(&i) {
                continue;
            }
            let param = self.p.params[body.params][i];
            match param.default {
                Some(d) => {
                    let v = self.eval(self.x(d))?;
                    self.stack[self.fp + i] = v;
                }
                None => {
                    return Err(rt(
                        format!(
                            "`{}` is missing argument `{}`",
                            self.p.str(body.name),
                            self.p.str(param.name)
                        ),
                        span,
                    ));
                }
            }
        }
        self.eval(self.x(body.expr))
    }

    /// Calls a top-level function with optional arguments (`None` takes the default).
    pub(crate) fn call_fn_optional(&mut self, fn_id: u32, args: Vec<Option<Value>>) -> R {
        let sig = &self.p.functions[fn_id as usize];
        let base = self.sp;
        let mut missing = Vec::new();
        let n = args.len();
        for (i, a) in args.into_iter().enumerate() {
            match a {
                Some(v) => self.push(v),
                None => {
                    missing.push(i);
                    self.push(Value::Unit);
                }
            }
        }
        self.invoke(sig.body, base, n, &[], &missing, sig.span)
    }

    /// Calls a function value with evaluated arguments.
    pub(crate) fn call_value(&mut self, f: &Value, args: Vec<Value>, span: Span) -> R {
        let Value::Func(func) = f else {
            return Err(rt(
                format!("a `{}` value is not callable", f.type_name()),
                span,
            ));
        };
        let func = Rc::clone(func);
        match &*func {
            Func::Fn(id) => {
                let body = self.p.functions[*id as usize].body;
                let base = self.sp;
                let n = args.len();
                for a in args {
                    self.push(a);
                }
                self.invoke(body, base, n, &[], &[], span)
            }
            Func::Closure { body, captures, .. } => {
                let base = self.sp;
                let n = args.len();
                for a in args {
                    self.push(a);
                }
                self.invoke(*body, base, n, captures, &[], span)
            }
            Func::Builtin(b) => {
                let (lo, hi) = b.arity();
                if args.len() < lo || args.len() > hi {
                    return Err(rt(
                        format!("`{}` got {} argument(s)", b.name(), args.len()),
                        span,
                    ));
                }
                crate::builtins::call_builtin(self, *b, args, span)
            }
            Func::Ctor(c) => self.construct(*c, args, span),
        }
    }

    fn construct(&mut self, c: Ctor, args: Vec<Value>, span: Span) -> R {
        let want = match c {
            Ctor::None => 0,
            Ctor::Some | Ctor::Ok | Ctor::Error => 1,
            Ctor::User { ty, variant } => match &self.p.types[ty as usize].shape {
                TypeShape::Adt { variants } => variants[variant as usize].fields.len(),
                TypeShape::Record { .. } => 0,
            },
        };
        if args.len() != want {
            return Err(rt(
                format!(
                    "`{}` takes {want} field(s), but {} were given",
                    self.ctor_name(c),
                    args.len()
                ),
                span,
            ));
        }
        self.fresh(Value::adt(c, args), span)
    }

    pub(crate) fn ctor_name(&self, c: Ctor) -> &'p str {
        match c {
            Ctor::Some => "Some",
            Ctor::None => "None",
            Ctor::Ok => "Ok",
            Ctor::Error => "Error",
            Ctor::User { ty, variant } => match &self.p.types[ty as usize].shape {
                TypeShape::Adt { variants } => &variants[variant as usize].name,
                TypeShape::Record { .. } => &self.p.types[ty as usize].name,
            },
        }
    }

    fn const_value(&mut self, id: u32, span: Span) -> R {
        match &self.consts[id as usize] {
            ConstState::Done(v) => return Ok(v.clone()),
            ConstState::Running => {
                return Err(rt(
                    format!(
                        "constant `{}` depends on itself",
                        self.p.consts[id as usize].name
                    ),
                    span,
                ));
            }
            ConstState::Unset => {}
        }
        self.consts[id as usize] = ConstState::Running;
        let base = self.sp;
        let r = self.invoke(self.p.consts[id as usize].body, base, 0, &[], &[], span);
        match r {
            Ok(v) => {
                self.consts[id as usize] = ConstState::Done(v.clone());
                Ok(v)
            }
            Err(e) => {
                self.consts[id as usize] = ConstState::Unset;
                Err(e)
            }
        }
    }

    // ---- evaluation ----------------------------------------------------------------------

    /// An expression node by id.
    #[inline(always)]
    fn x(&self, id: ExprId) -> &'p Expr {
        &self.exprs[id.0 as usize]
    }

    #[inline(always)]
    fn list(&self, s: Seq<ExprId>) -> &'p [ExprId] {
        &self.p.expr_lists[s]
    }

    fn eval_args(&mut self, args: Seq<ExprId>) -> R<Vec<Value>> {
        let args = self.list(args);
        let mut out = Vec::with_capacity(args.len());
        for &a in args {
            out.push(self.eval(self.x(a))?);
        }
        Ok(out)
    }

    /// Reads a local. Ints are rebuilt rather than cloned: the derived clone copies the enum
    /// in unaligned pieces, which stalls store forwarding on the hottest path.
    #[inline(always)]
    fn local(&self, slot: u32) -> Value {
        match &self.stack[self.fp + slot as usize] {
            Value::Int(i) => Value::Int(*i),
            other => other.clone(),
        }
    }

    /// Evaluates leaves without a recursive call; they still count as steps.
    #[inline(always)]
    fn operand(&mut self, e: &'p Expr) -> R {
        let r = self.operand_i(e);
        self.value_of(r)
    }

    /// `operand` on the int path.
    #[inline(always)]
    fn operand_i(&mut self, e: &'p Expr) -> RI {
        match e.kind {
            ExprKind::Binary(op, l, r)
                if let (Some(x), Some(y)) =
                    (self.peek_int(self.x(l)), self.peek_int(self.x(r)))
                    && let Some(v) = self.int_op_i(op, x, y) =>
            {
                self.steps += 3;
                v
            }
            ExprKind::BinLocalInt(op, a, k)
                if let Value::Int(x) = self.stack[self.fp + a as usize]
                    && let Some(v) = self.int_op_i(op, x, k) =>
            {
                self.steps += 3;
                v
            }
            ExprKind::BinLocalLocal(op, a, b)
                if let (Value::Int(x), Value::Int(y)) = (
                    &self.stack[self.fp + a as usize],
                    &self.stack[self.fp + b as usize],
                ) && let Some(v) = self.int_op_i(op, *x, *y) =>
            {
                self.steps += 3;
                v
            }
            ExprKind::Local(slot) => {
                self.steps += 1;
                self.local_i(slot)
            }
            ExprKind::Int(i) => {
                self.steps += 1;
                Ok(i)
            }
            _ => self.eval_i(e),
        }
    }

    /// `Binary(op, Local(a), Int(k))`, fused: the same steps and results.
    #[inline]
    fn bin_local_int(&mut self, op: BinOp, a: u32, k: i64, span: Span) -> RI {
        self.steps += 2;
        if let Value::Int(x) = self.stack[self.fp + a as usize]
            && let Some(v) = self.int_op_i(op, x, k)
        {
            return v;
        }
        let x = self.local(a);
        let v = self.binary(op, &x, &Value::Int(k), span);
        self.int_of(v)
    }

    /// `Binary(op, Local(a), Local(b))`, fused: the same steps and results.
    #[inline]
    fn bin_local_local(&mut self, op: BinOp, a: u32, b: u32, span: Span) -> RI {
        self.steps += 2;
        if let (Value::Int(x), Value::Int(y)) = (
            &self.stack[self.fp + a as usize],
            &self.stack[self.fp + b as usize],
        ) && let Some(v) = self.int_op_i(op, *x, *y)
        {
            return v;
        }
        let x = self.local(a);
        let y = self.local(b);
        let v = self.binary(op, &x, &y, span);
        self.int_of(v)
    }

    /// An int-path result as a value.
    #[inline(always)]
    fn value_of(&mut self, r: RI) -> R {
        match r {
            Ok(i) => Ok(Value::Int(i)),
            Err(Slow::Value) => Ok(std::mem::replace(&mut self.acc, Value::Unit)),
            Err(Slow::Break) => Err(Flow::Break),
            Err(Slow::Continue) => Err(Flow::Continue),
            Err(Slow::Return) => Err(Flow::Return),
            Err(Slow::Error) => Err(Flow::Error),
        }
    }

    /// A value as an int-path result.
    #[inline(always)]
    fn val_i(&mut self, v: Value) -> RI {
        match v {
            Value::Int(i) => Ok(i),
            other => {
                self.set_acc(other);
                Err(Slow::Value)
            }
        }
    }

    /// Stores a non-int result; the previous one has usually been taken (it is `Unit`), so
    /// the drop glue is skipped when it is a scalar.
    #[inline(always)]
    fn set_acc(&mut self, v: Value) {
        if self.acc.is_scalar() {
            std::mem::forget(std::mem::replace(&mut self.acc, v));
        } else {
            self.acc = v;
        }
    }

    /// Int-int arithmetic and comparison on the int path; `None` leaves the case (overflow,
    /// division, logic operators) to the general path, which reports errors.
    #[inline(always)]
    fn int_op_i(&mut self, op: BinOp, x: i64, y: i64) -> Option<RI> {
        match op {
            BinOp::Add => x.checked_add(y).map(Ok),
            BinOp::Sub => x.checked_sub(y).map(Ok),
            BinOp::Mul => x.checked_mul(y).map(Ok),
            _ => {
                let b = int_cmp(op, x, y)?;
                self.set_acc(Value::Bool(b));
                Some(Err(Slow::Value))
            }
        }
    }

    /// A general result as an int-path result.
    #[inline(always)]
    fn int_of(&mut self, r: R) -> RI {
        match r {
            Ok(v) => self.val_i(v),
            Err(f) => Err(f.into()),
        }
    }

    #[inline(always)]
    fn local_i(&mut self, slot: u32) -> RI {
        let i = self.fp + slot as usize;
        match self.stack[i] {
            Value::Int(v) => Ok(v),
            _ => {
                let v = self.stack[i].clone();
                self.set_acc(v);
                Err(Slow::Value)
            }
        }
    }

    /// Evaluates an expression. The common kinds are handled here, the rest in `eval_cold`,
    /// which keeps this function's frame small on the recursive path.
    pub(crate) fn eval(&mut self, e: &'p Expr) -> R {
        self.tick(e.span)?;
        let span = e.span;
        match &e.kind {
            ExprKind::Int(i) => Ok(Value::Int(*i)),
            ExprKind::Local(slot) => Ok(self.local(*slot)),
            ExprKind::Binary(op, l, r) if !matches!(op, BinOp::And | BinOp::Or) => {
                self.eval_binary(*op, self.x(*l), self.x(*r), span)
            }
            ExprKind::BinLocalInt(op, a, k) => {
                let r = self.bin_local_int(*op, *a, *k, span);
                self.value_of(r)
            }
            ExprKind::BinLocalLocal(op, a, b) => {
                let r = self.bin_local_local(*op, *a, *b, span);
                self.value_of(r)
            }
            ExprKind::CallFn(id, args) => {
                let r = self.call_fn_i(*id, *args, span);
                self.value_of(r)
            }
            ExprKind::If(c, then, otherwise) => {
                if self.truth(self.x(*c))? {
                    self.eval(self.x(*then))
                } else if let Some(o) = otherwise {
                    self.eval(self.x(*o))
                } else {
                    Ok(Value::Unit)
                }
            }
            ExprKind::Block(stmts) => self.eval_block(&self.p.stmts[*stmts], span),
            _ => self.eval_cold(e),
        }
    }

    /// `eval` for code that usually computes ints (arithmetic, calls, conditionals): the same
    /// steps and results, but an int comes back in registers; any other value is left in
    /// `self.acc` with `Err(Slow::Value)`.
    fn eval_i(&mut self, e: &'p Expr) -> RI {
        match e.kind {
            ExprKind::Int(i) => {
                self.tick(e.span)?;
                Ok(i)
            }
            ExprKind::Local(slot) => {
                self.tick(e.span)?;
                self.local_i(slot)
            }
            ExprKind::Binary(op, l, r) if !matches!(op, BinOp::And | BinOp::Or) => {
                self.tick(e.span)?;
                self.binary_i(op, self.x(l), self.x(r), e.span)
            }
            ExprKind::BinLocalInt(op, a, k) => {
                self.tick(e.span)?;
                self.bin_local_int(op, a, k, e.span)
            }
            ExprKind::BinLocalLocal(op, a, b) => {
                self.tick(e.span)?;
                self.bin_local_local(op, a, b, e.span)
            }
            ExprKind::CallFn(id, args) => {
                self.tick(e.span)?;
                self.call_fn_i(id, args, e.span)
            }
            ExprKind::If(c, then, otherwise) => {
                self.tick(e.span)?;
                if self.truth(self.x(c))? {
                    self.eval_i(self.x(then))
                } else if let Some(o) = otherwise {
                    self.eval_i(self.x(o))
                } else {
                    self.set_acc(Value::Unit);
                    Err(Slow::Value)
                }
            }
            _ => {
                let r = self.eval(e);
                self.int_of(r)
            }
        }
    }

    #[inline]
    fn eval_binary(&mut self, op: BinOp, l: &'p Expr, r: &'p Expr, span: Span) -> R {
        let r = self.binary_i(op, l, r, span);
        self.value_of(r)
    }

    /// A binary operator other than `and`/`or`, on the int path.
    #[inline]
    fn binary_i(&mut self, op: BinOp, l: &'p Expr, r: &'p Expr, span: Span) -> RI {
        if let (Some(x), Some(y)) = (self.peek_int(l), self.peek_int(r))
            && let Some(v) = self.int_op_i(op, x, y)
        {
            self.steps += 2;
            return v;
        }
        // Int-int arithmetic and comparison is the hot path of most tool code.
        let x = match self.operand_i(l) {
            Ok(x) => x,
            Err(Slow::Value) => {
                let a = std::mem::replace(&mut self.acc, Value::Unit);
                let b = self.operand(r)?;
                let v = self.binary(op, &a, &b, span);
                return self.int_of(v);
            }
            Err(e) => return Err(e),
        };
        let y = match self.operand_i(r) {
            Ok(y) => y,
            Err(Slow::Value) => {
                let b = std::mem::replace(&mut self.acc, Value::Unit);
                let v = self.binary(op, &Value::Int(x), &b, span);
                return self.int_of(v);
            }
            Err(e) => return Err(e),
        };
        match self.int_op_i(op, x, y) {
            Some(v) => v,
            None => {
                let v = self.binary(op, &Value::Int(x), &Value::Int(y), span);
                self.int_of(v)
            }
        }
    }

    /// Like `peek_int`, and also for int arithmetic on such operands (`n - 1`).
    #[inline(always)]
    fn arg_int(&self, e: &Expr) -> Option<i64> {
        let arith = |op: BinOp, x: i64, y: i64| match op {
            BinOp::Add => x.checked_add(y),
            BinOp::Sub => x.checked_sub(y),
            BinOp::Mul => x.checked_mul(y),
            _ => Option::None,
        };
        match &e.kind {
            ExprKind::BinLocalInt(op, a, k) => match self.stack[self.fp + *a as usize] {
                Value::Int(x) => arith(*op, x, *k),
                _ => Option::None,
            },
            ExprKind::BinLocalLocal(op, a, b) => match (
                &self.stack[self.fp + *a as usize],
                &self.stack[self.fp + *b as usize],
            ) {
                (Value::Int(x), Value::Int(y)) => arith(*op, *x, *y),
                _ => Option::None,
            },
            ExprKind::Binary(op, l, r) => {
                let (x, y) = (self.peek_int(self.x(*l))?, self.peek_int(self.x(*r))?);
                arith(*op, x, y)
            }
            _ => self.peek_int(e),
        }
    }

    /// The int an operand evaluates to, when that is known without evaluating anything
    /// (an int literal, or a local holding an int).
    #[inline(always)]
    fn peek_int(&self, e: &Expr) -> Option<i64> {
        match &e.kind {
            ExprKind::Int(i) => Some(*i),
            ExprKind::Local(slot) => match &self.stack[self.fp + *slot as usize] {
                Value::Int(i) => Some(*i),
                _ => Option::None,
            },
            _ => Option::None,
        }
    }

    /// Evaluates call arguments onto the stack (the general calling convention).
    fn push_args(&mut self, args: &'p [ExprId]) -> Result<(), Slow> {
        let base = self.sp;
        for &a in args {
            let a = self.x(a);
            if let Some(i) = self.arg_int(a) {
                self.steps += 1;
                self.push(Value::Int(i));
                continue;
            }
            match self.operand_i(a) {
                Ok(i) => self.push(Value::Int(i)),
                Err(Slow::Value) => {
                    let v = std::mem::replace(&mut self.acc, Value::Unit);
                    self.push(v);
                }
                Err(e) => {
                    self.pop_to(base);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// A direct call of a top-level function, on the int path. When every parameter gets an
    /// argument (always, unless defaults fill some), the frame is set up here rather than in
    /// the general `invoke`, and each argument is written straight into its slot.
    fn call_fn_i(&mut self, id: u32, args: Seq<ExprId>, span: Span) -> RI {
        let p = self.p;
        let args = &p.expr_lists[args];
        let body_id = p.functions[id as usize].body;
        let body = &p.bodies[body_id as usize];
        let base = self.sp;
        if args.len() != body.n_params as usize {
            self.push_args(args)?;
            let r = self.invoke(body_id, base, args.len(), &[], &[], span);
            return self.int_of(r);
        }
        let frame_end = base + body.n_slots as usize;
        self.reserve_to(frame_end);
        // Calls made while evaluating the arguments get frames above this one.
        self.sp = frame_end;
        // By index rather than through a slice iterator: fewer instructions per call.
        #[allow(clippy::needless_range_loop)]
        for k in 0..args.len() {
            let a = self.x(args[k]);
            if let Some(i) = self.arg_int(a) {
                self.steps += 1;
                self.write_int(base + k, i);
                continue;
            }
            match self.operand_i(a) {
                Ok(i) => self.write_int(base + k, i),
                Err(Slow::Value) => {
                    let v = std::mem::replace(&mut self.acc, Value::Unit);
                    self.write_slot(base + k, v);
                }
                Err(e) => {
                    self.pop_to(base);
                    return Err(e);
                }
            }
        }
        if self.depth >= self.budget.max_call_depth
            || self.stack_base.abs_diff(stack_addr()) > self.budget.max_stack_bytes
        {
            self.pop_to(base);
            return Err(self.budget_err(BudgetKind::Depth, span).into());
        }
        self.depth += 1;
        let saved_fp = self.fp;
        self.fp = base;
        let r = self.eval_i(self.x(body.expr));
        self.fp = saved_fp;
        self.pop_to(base);
        self.depth -= 1;
        match r {
            Err(Slow::Return) => {
                let v = self.ret_val.take().unwrap_or(Value::Unit);
                self.val_i(v)
            }
            Err(Slow::Break | Slow::Continue) => {
                self.set_acc(Value::Unit);
                Err(Slow::Value)
            }
            r => r,
        }
    }

    fn eval_block(&mut self, stmts: &'p [Stmt], span: Span) -> R {
        let mut last = Value::Unit;
        for s in stmts {
            last = Value::Unit;
            match s {
                Stmt::Let(slot, x) => {
                    let v = self.eval(self.x(*x))?;
                    self.stack[self.fp + *slot as usize] = v;
                }
                Stmt::LetPattern(pat, x) => {
                    let x = self.x(*x);
                    let v = self.eval(x)?;
                    if !self.matches(pat, &v) {
                        return Err(rt(
                            format!(
                                "{} does not match the pattern of this `let`",
                                self.display(&v)
                            ),
                            x.span,
                        ));
                    }
                }
                Stmt::Assign(place, op, x) => {
                    let x = self.x(*x);
                    let v = self.eval(x)?;
                    let op = *op;
                    let place = &self.p.places[*place as usize];
                    self.with_place(place, x.span, &mut |interp, target| {
                        let new = match op {
                            Some(op) => interp.binary(op, target, &v, span)?,
                            None => v.clone(),
                        };
                        *target = new;
                        Ok(Value::Unit)
                    })?;
                }
                Stmt::Expr(x) => last = self.eval(self.x(*x))?,
            }
        }
        Ok(last)
    }

    #[inline(never)]
    fn eval_cold(&mut self, e: &'p Expr) -> R {
        let span = e.span;
        match &e.kind {
            ExprKind::Unit => Ok(Value::Unit),
            ExprKind::Bool(b) => Ok(Value::Bool(*b)),
            ExprKind::Int(i) => Ok(Value::Int(*i)),
            ExprKind::Float(f) => Ok(Value::Float(*f)),
            ExprKind::Dec(i) => Ok(Value::Dec(Rc::new(self.p.decs[*i as usize]))),
            ExprKind::Str(s) => {
                let s = self.p.str(*s);
                self.charge(16 + s.len(), span)?;
                Ok(Value::str(s))
            }
            ExprKind::Interp(pieces) => {
                let mut out = String::new();
                for piece in &self.p.pieces[*pieces] {
                    match piece {
                        StrPiece::Text(t) => out.push_str(self.p.str(*t)),
                        StrPiece::Value(x) => {
                            let v = self.eval(self.x(*x))?;
                            self.charge_display(&v, span)?;
                            self.display_into(&v, &mut out, true);
                        }
                    }
                }
                self.string(out, span)
            }
            ExprKind::Local(slot) => Ok(self.stack[self.fp + *slot as usize].clone()),
            ExprKind::Global(g) => match *g {
                Global::Fn(id) => Ok(Value::Func(Rc::new(Func::Fn(id)))),
                Global::Const(id) => self.const_value(id, span),
                Global::Builtin(b) => Ok(Value::Func(Rc::new(Func::Builtin(b)))),
                Global::Ctor(c) => Ok(Value::Func(Rc::new(Func::Ctor(c)))),
                Global::Opaque(_) | Global::Import(_) => {
                    Err(rt("this declaration is not executable", span))
                }
            },
            ExprKind::List(items) => {
                let items = self.eval_args(*items)?;
                self.fresh(Value::list(items), span)
            }
            ExprKind::Record(fields) => {
                let mut map = BTreeMap::new();
                for (k, x) in &self.p.fields[*fields] {
                    let v = self.eval(self.x(*x))?;
                    map.insert(Rc::from(self.p.str(*k)), v);
                }
                self.fresh(Value::map(map), span)
            }
            ExprKind::Binary(BinOp::And, l, r) => {
                if self.truth(self.x(*l))? {
                    Ok(Value::Bool(self.truth(self.x(*r))?))
                } else {
                    Ok(Value::Bool(false))
                }
            }
            ExprKind::Binary(BinOp::Or, l, r) => {
                if self.truth(self.x(*l))? {
                    Ok(Value::Bool(true))
                } else {
                    Ok(Value::Bool(self.truth(self.x(*r))?))
                }
            }
            ExprKind::Binary(op, l, r) => self.eval_binary(*op, self.x(*l), self.x(*r), span),
            ExprKind::BinLocalInt(op, a, k) => {
                let r = self.bin_local_int(*op, *a, *k, span);
                self.value_of(r)
            }
            ExprKind::BinLocalLocal(op, a, b) => {
                let r = self.bin_local_local(*op, *a, *b, span);
                self.value_of(r)
            }
            ExprKind::Unary(op, x) => {
                let v = self.eval(self.x(*x))?;
                match (op, &v) {
                    (UnOp::Neg, Value::Int(i)) => i
                        .checked_neg()
                        .map(Value::Int)
                        .ok_or_else(|| rt("integer overflow", span)),
                    (UnOp::Neg, Value::Float(f)) => Ok(Value::Float(-f)),
                    (UnOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
                    (UnOp::Neg, _) => Err(rt(format!("cannot negate a `{}`", v.type_name()), span)),
                    (UnOp::Not, _) => Err(rt(
                        format!("`not` needs a bool, found `{}`", v.type_name()),
                        span,
                    )),
                }
            }
            ExprKind::CallFn(id, args) => {
                let r = self.call_fn_i(*id, *args, span);
                self.value_of(r)
            }
            ExprKind::CallBuiltin(b, args) => {
                let args = self.eval_args(*args)?;
                crate::builtins::call_builtin(self, *b, args, span)
            }
            ExprKind::Construct(c, args) => {
                if *c == Ctor::None {
                    return Ok(Value::None);
                }
                let args = self.eval_args(*args)?;
                self.construct(*c, args, span)
            }
            ExprKind::Call(f, args) => {
                let fv = self.eval(self.x(*f))?;
                let args = self.eval_args(*args)?;
                self.call_value(&fv, args, span)
            }
            ExprKind::Method(recv, m, args) => {
                let rv = self.eval(self.x(*recv))?;
                let args = self.eval_args(*args)?;
                crate::builtins::call_method(self, rv, *m, args, span)
            }
            ExprKind::MutMethod(place, m, args) => {
                let args = self.eval_args(*args)?;
                let m = *m;
                let place = &self.p.places[*place as usize];
                self.with_place(place, span, &mut |interp, target| {
                    crate::builtins::mutate(interp, target, m, &args, span)
                })
            }
            ExprKind::Field(recv, name) => {
                let rv = self.eval(self.x(*recv))?;
                self.field(&rv, self.p.str(*name), span)
            }
            ExprKind::Index(recv, idx) => {
                let rv = self.eval(self.x(*recv))?;
                let iv = self.eval(self.x(*idx))?;
                self.index(&rv, &iv, span)
            }
            ExprKind::Try(x) => {
                let v = self.eval(self.x(*x))?;
                match &v {
                    Value::None => {
                        self.ret_val = Some(Value::None);
                        Err(Flow::Return)
                    }
                    Value::Adt(a) => match a.ctor {
                        Ctor::Some | Ctor::Ok => Ok(a.fields[0].clone()),
                        Ctor::Error => {
                            self.ret_val = Some(v.clone());
                            Err(Flow::Return)
                        }
                        Ctor::User { .. } | Ctor::None => {
                            Err(rt("`?` needs an Option or a Result, found a variant", span))
                        }
                    },
                    _ => Err(rt(
                        format!("`?` needs an Option or a Result, found `{}`", v.type_name()),
                        span,
                    )),
                }
            }
            ExprKind::If(c, then, otherwise) => {
                if self.truth(self.x(*c))? {
                    self.eval(self.x(*then))
                } else if let Some(o) = otherwise {
                    self.eval(self.x(*o))
                } else {
                    Ok(Value::Unit)
                }
            }
            ExprKind::Match(s, arms) => {
                let v = self.eval(self.x(*s))?;
                for arm in &self.p.arms[*arms] {
                    if self.matches(&arm.pat, &v) {
                        return self.eval(self.x(arm.body));
                    }
                }
                let shown = self.display(&v);
                Err(rt(format!("no match arm covers the value {shown}"), span))
            }
            ExprKind::While(c, body) => {
                let (c, body) = (self.x(*c), self.x(*body));
                while self.truth(c)? {
                    match self.eval(body) {
                        Ok(_) | Err(Flow::Continue) => {}
                        Err(Flow::Break) => break,
                        Err(e) => return Err(e),
                    }
                }
                Ok(Value::Unit)
            }
            ExprKind::Loop(body) => loop {
                match self.eval(self.x(*body)) {
                    Ok(_) | Err(Flow::Continue) => {}
                    Err(Flow::Break) => return Ok(Value::Unit),
                    Err(e) => return Err(e),
                }
            },
            ExprKind::For(var, index, iter, body) => {
                let body = self.x(*body);
                let it = self.eval(self.x(*iter))?;
                let items: Vec<Value> = match &it {
                    Value::List(l) => {
                        let l = Rc::clone(l);
                        return self.for_items(*var, *index, l.items.iter().cloned(), body);
                    }
                    Value::Str(s) => {
                        let chars: Vec<Value> = s
                            .chars()
                            .map(|c| Value::str(c.encode_utf8(&mut [0; 4])))
                            .collect();
                        self.charge(chars.len() * 24, span)?;
                        chars
                    }
                    Value::Map(m) => m.entries.keys().map(|k| Value::str(k)).collect(),
                    other => {
                        return Err(rt(
                            format!("cannot iterate over a `{}`", other.type_name()),
                            span,
                        ));
                    }
                };
                self.for_items(*var, *index, items.into_iter(), body)
            }
            ExprKind::Break => Err(Flow::Break),
            ExprKind::Continue => Err(Flow::Continue),
            ExprKind::Return(v) => {
                let v = match v {
                    Some(x) => self.eval(self.x(*x))?,
                    None => Value::Unit,
                };
                self.ret_val = Some(v);
                Err(Flow::Return)
            }
            ExprKind::Block(stmts) => self.eval_block(&self.p.stmts[*stmts], span),
            ExprKind::Closure(body, caps) => {
                let captures = self.p.captures[*caps]
                    .iter()
                    .map(|(outer, inner)| (*inner, self.stack[self.fp + *outer as usize].clone()))
                    .collect();
                self.fresh(Value::closure(*body, captures), span)
            }
            ExprKind::Unavailable(msg) => Err(rt(self.p.str(*msg).to_string(), span)),
        }
    }

    fn for_items(
        &mut self,
        var: u32,
        index: Option<u32>,
        items: impl Iterator<Item = Value>,
        body: &'p Expr,
    ) -> R {
        for (i, item) in items.enumerate() {
            self.stack[self.fp + var as usize] = item;
            if let Some(ix) = index {
                self.stack[self.fp + ix as usize] = Value::Int(i as i64);
            }
            match self.eval(body) {
                Ok(_) | Err(Flow::Continue) => {}
                Err(Flow::Break) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(Value::Unit)
    }

    fn truth(&mut self, e: &'p Expr) -> R<bool> {
        if let ExprKind::BinLocalInt(op, a, k) = e.kind
            && let Value::Int(x) = self.stack[self.fp + a as usize]
            && let Some(b) = int_cmp(op, x, k)
        {
            self.steps += 3;
            return Ok(b);
        }
        if let ExprKind::BinLocalLocal(op, a, b) = e.kind
            && let (Value::Int(x), Value::Int(y)) = (
                &self.stack[self.fp + a as usize],
                &self.stack[self.fp + b as usize],
            )
            && let Some(b) = int_cmp(op, *x, *y)
        {
            self.steps += 3;
            return Ok(b);
        }
        if let ExprKind::Binary(op, l, r) = &e.kind
            && let (Some(x), Some(y)) = (self.peek_int(self.x(*l)), self.peek_int(self.x(*r)))
            && let Some(b) = int_cmp(*op, x, y)
        {
            self.steps += 3;
            return Ok(b);
        }
        match self.eval(e)? {
            Value::Bool(b) => Ok(b),
            other => Err(rt(
                format!("a condition must be a bool, found `{}`", other.type_name()),
                e.span,
            )),
        }
    }

    pub(crate) fn binary(&mut self, op: BinOp, a: &Value, b: &Value, span: Span) -> R {
        use Value::*;
        let overflow = || rt(format!("integer overflow in `{}`", op.as_str()), span);
        match op {
            BinOp::Eq => return Ok(Bool(value::equal(a, b))),
            BinOp::Ne => return Ok(Bool(!value::equal(a, b))),
            BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge => {
                let Some(ord) = value::compare(a, b) else {
                    return Err(rt(
                        format!(
                            "cannot compare `{}` with `{}`",
                            a.type_name(),
                            b.type_name()
                        ),
                        span,
                    ));
                };
                use std::cmp::Ordering::*;
                return Ok(Bool(match op {
                    BinOp::Lt => ord == Less,
                    BinOp::Gt => ord == Greater,
                    BinOp::Le => ord != Greater,
                    _ => ord != Less,
                }));
            }
            _ => {}
        }
        match (a, b) {
            (Int(x), Int(y)) => {
                let (x, y) = (*x, *y);
                let r = match op {
                    BinOp::Add => x.checked_add(y),
                    BinOp::Sub => x.checked_sub(y),
                    BinOp::Mul => x.checked_mul(y),
                    BinOp::Div | BinOp::Rem if y == 0 => {
                        return Err(rt("division by zero", span));
                    }
                    BinOp::Div => x.checked_div(y),
                    BinOp::Rem => x.checked_rem(y),
                    _ => Option::None,
                };
                r.map(Int).ok_or_else(overflow)
            }
            (Int(_) | Float(_), Int(_) | Float(_)) => {
                let x = match a {
                    Int(i) => *i as f64,
                    Float(f) => *f,
                    _ => 0.0,
                };
                let y = match b {
                    Int(i) => *i as f64,
                    Float(f) => *f,
                    _ => 0.0,
                };
                Ok(Float(match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div | BinOp::Rem if y == 0.0 => {
                        return Err(rt("division by zero", span));
                    }
                    BinOp::Div => x / y,
                    _ => x % y,
                }))
            }
            (Dec(_), Dec(_) | Int(_)) | (Int(_), Dec(_)) => {
                let d = |v: &Value| match v {
                    Dec(d) => **d,
                    Int(i) => crate::decimal::Dec::from_int(*i),
                    _ => crate::decimal::Dec::from_int(0),
                };
                let (x, y) = (d(a), d(b));
                if matches!(op, BinOp::Div | BinOp::Rem) && y.mantissa == 0 {
                    return Err(rt("division by zero", span));
                }
                let r = match op {
                    BinOp::Add => x.checked_add(y),
                    BinOp::Sub => x.checked_sub(y),
                    BinOp::Mul => x.checked_mul(y),
                    BinOp::Div => x.checked_div(y),
                    _ => x.checked_rem(y),
                };
                r.map(|r| Dec(Rc::new(r))).ok_or_else(|| {
                    rt(
                        format!("`dec` overflow in `{}` (38 digits at most)", op.as_str()),
                        span,
                    )
                })
            }
            (Str(x), Str(y)) if op == BinOp::Add => {
                let mut s = String::with_capacity(x.len() + y.len());
                s.push_str(x);
                s.push_str(y);
                self.string(s, span)
            }
            (List(x), List(y)) if op == BinOp::Add => {
                let mut items = x.items.clone();
                items.extend(y.items.iter().cloned());
                self.fresh(Value::list(items), span)
            }
            _ => Err(rt(
                format!(
                    "cannot apply `{}` to `{}` and `{}`",
                    op.as_str(),
                    a.type_name(),
                    b.type_name()
                ),
                span,
            )),
        }
    }

    fn field(&mut self, v: &Value, name: &str, span: Span) -> R {
        match v {
            Value::Map(m) => m
                .entries
                .get(name)
                .cloned()
                .ok_or_else(|| rt(format!("record has no field `{name}`"), span)),
            Value::Adt(a) => {
                if let Ctor::User { ty, variant } = a.ctor
                    && let TypeShape::Adt { variants } = &self.p.types[ty as usize].shape
                    && let Some(i) = variants[variant as usize]
                        .fields
                        .iter()
                        .position(|(n, _)| n == name)
                {
                    return Ok(a.fields[i].clone());
                }
                Err(rt(
                    format!("`{}` has no field `{name}`", self.ctor_name(a.ctor)),
                    span,
                ))
            }
            other => Err(rt(
                format!("a `{}` has no field `{name}`", other.type_name()),
                span,
            )),
        }
    }

    fn index(&mut self, v: &Value, i: &Value, span: Span) -> R {
        match (v, i) {
            (Value::List(l), Value::Int(n)) => usize::try_from(*n)
                .ok()
                .and_then(|n| l.items.get(n))
                .cloned()
                .ok_or_else(|| {
                    rt(
                        format!(
                            "index {n} is out of range for a list of length {}",
                            l.items.len()
                        ),
                        span,
                    )
                }),
            (Value::Str(s), Value::Int(n)) => {
                let c = usize::try_from(*n).ok().and_then(|n| s.chars().nth(n));
                match c {
                    Some(c) => self.string(c.to_string(), span),
                    None => Err(rt(
                        format!("index {n} is out of range for the string"),
                        span,
                    )),
                }
            }
            (Value::Map(m), Value::Str(k)) => m
                .entries
                .get(k.as_str())
                .cloned()
                .ok_or_else(|| rt(format!("no key {k:?} in the map"), span)),
            _ => Err(rt(
                format!(
                    "cannot index a `{}` with a `{}`",
                    v.type_name(),
                    i.type_name()
                ),
                span,
            )),
        }
    }

    /// Runs `f` on the value stored at `place`, keeping container depths up to date.
    fn with_place(
        &mut self,
        place: &'p Place,
        span: Span,
        f: &mut dyn FnMut(&mut Interp<'p>, &mut Value) -> R,
    ) -> R {
        let path = &self.p.place_steps[place.path];
        let mut steps = Vec::with_capacity(path.len());
        for s in path {
            steps.push(match s {
                PlaceStep::Field(name) => Value::str(self.p.str(*name)),
                PlaceStep::Index(x) => self.eval(self.x(*x))?,
            });
        }
        let slot = self.fp + place.slot as usize;
        // The target is moved out while `f` runs so `f` may use the interpreter freely.
        let mut root = std::mem::replace(&mut self.stack[slot], Value::Unit);
        let r = self.place_step(&mut root, &steps, span, f);
        self.stack[slot] = root;
        r
    }

    fn place_step(
        &mut self,
        target: &mut Value,
        steps: &[Value],
        span: Span,
        f: &mut dyn FnMut(&mut Interp<'p>, &mut Value) -> R,
    ) -> R {
        let Some((first, rest)) = steps.split_first() else {
            return f(self, target);
        };
        let r = match (&mut *target, first) {
            (Value::List(l), Value::Int(n)) => {
                let len = l.items.len();
                let list = Rc::make_mut(l);
                let Some(slot) = usize::try_from(*n).ok().and_then(|n| list.items.get_mut(n))
                else {
                    return Err(rt(
                        format!("index {n} is out of range for a list of length {len}"),
                        span,
                    ));
                };
                let r = self.place_step(slot, rest, span, f)?;
                let d = slot.depth() + 1;
                list.depth = list.depth.max(d);
                (r, list.depth)
            }
            (Value::Map(m), Value::Str(k)) => {
                let map = Rc::make_mut(m);
                let r = match map.entries.get_mut(k.as_str()) {
                    Some(slot) => {
                        let r = self.place_step(slot, rest, span, f)?;
                        map.depth = map.depth.max(slot.depth() + 1);
                        r
                    }
                    None if rest.is_empty() => {
                        // Assigning a new key adds it, like `insert`.
                        let mut fresh = Value::Unit;
                        let r = self.place_step(&mut fresh, rest, span, f)?;
                        map.depth = map.depth.max(fresh.depth() + 1);
                        map.entries.insert(Rc::from(k.as_str()), fresh);
                        self.charge(64, span)?;
                        r
                    }
                    None => return Err(rt(format!("no key {k:?} in the record"), span)),
                };
                (r, map.depth)
            }
            (Value::Adt(a), Value::Str(k)) => {
                let ctor = a.ctor;
                let pos = match ctor {
                    Ctor::User { ty, variant } => match &self.p.types[ty as usize].shape {
                        TypeShape::Adt { variants } => variants[variant as usize]
                            .fields
                            .iter()
                            .position(|(n, _)| **n == **k),
                        TypeShape::Record { .. } => None,
                    },
                    _ => None,
                };
                let Some(pos) = pos else {
                    return Err(rt(
                        format!("`{}` has no field `{k}`", self.ctor_name(ctor)),
                        span,
                    ));
                };
                let adt = Rc::make_mut(a);
                let r = self.place_step(&mut adt.fields[pos], rest, span, f)?;
                adt.depth = adt.depth.max(adt.fields[pos].depth() + 1);
                (r, adt.depth)
            }
            (t, k) => {
                return Err(rt(
                    format!(
                        "cannot assign into a `{}` with a `{}` key",
                        t.type_name(),
                        k.type_name()
                    ),
                    span,
                ));
            }
        };
        if r.1 > MAX_VALUE_DEPTH {
            return Err(rt(
                format!("value nested deeper than {MAX_VALUE_DEPTH} levels"),
                span,
            ));
        }
        Ok(r.0)
    }

    fn matches(&mut self, pat: &Pat, v: &Value) -> bool {
        match (pat, v) {
            (Pat::Wild, _) => true,
            (Pat::Bind(slot), _) => {
                self.stack[self.fp + *slot as usize] = v.clone();
                true
            }
            (Pat::Int(i), Value::Int(j)) => i == j,
            (Pat::Int(i), Value::Float(f)) => (*i as f64) == *f,
            (Pat::Float(f), Value::Float(g)) => f == g,
            (Pat::Float(f), Value::Int(i)) => *f == (*i as f64),
            (Pat::Str(s), Value::Str(t)) => *self.p.str(*s) == **t,
            (Pat::Bool(a), Value::Bool(b)) => a == b,
            (Pat::Ctor(Ctor::None, _), Value::None) => true,
            (Pat::Ctor(c, subs), Value::Adt(a)) => {
                *c == a.ctor
                    && subs.len() == a.fields.len()
                    && self.p.pats[*subs]
                        .iter()
                        .zip(a.fields.iter())
                        .all(|(p, f)| self.matches(p, f))
            }
            (Pat::Tuple(subs), Value::List(l)) => {
                subs.len() == l.items.len()
                    && self.p.pats[*subs]
                        .iter()
                        .zip(l.items.iter())
                        .all(|(p, x)| self.matches(p, x))
            }
            _ => false,
        }
    }

    // ---- display -------------------------------------------------------------------------

    /// Charges the memory budget for formatting `v` before it is formatted.
    pub(crate) fn charge_display(&mut self, v: &Value, span: Span) -> R<()> {
        let remaining = self.budget.max_memory.saturating_sub(self.mem);
        let need = size_hint(v, remaining);
        self.charge(need, span)
    }

    /// A value for an error message: formatted when small, its type name when large.
    pub(crate) fn display(&self, v: &Value) -> String {
        if size_hint(v, 400) > 400 {
            return format!("<a large {}>", v.type_name());
        }
        let mut s = String::new();
        self.display_into(v, &mut s, false);
        s
    }

    /// Formats a value; `top` strings are written bare, nested ones quoted.
    pub(crate) fn display_into(&self, v: &Value, out: &mut String, top: bool) {
        match v {
            Value::Unit => out.push_str("()"),
            Value::Bool(b) => {
                let _ = write!(out, "{b}");
            }
            Value::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Value::Float(f) => format_float(*f, out),
            Value::Dec(d) => {
                let _ = write!(out, "{d}");
            }
            Value::Regex(r) => {
                let _ = write!(out, "{r}");
            }
            Value::Content(c) => {
                let _ = write!(out, "{c}");
            }
            Value::Str(s) => {
                if top {
                    out.push_str(s);
                } else {
                    let _ = write!(out, "{:?}", &**s);
                }
            }
            Value::List(l) => {
                out.push('[');
                for (i, x) in l.items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    self.display_into(x, out, false);
                }
                out.push(']');
            }
            Value::Map(m) => {
                out.push('{');
                for (i, (k, x)) in m.entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(k);
                    out.push_str(": ");
                    self.display_into(x, out, false);
                }
                out.push('}');
            }
            Value::None => out.push_str("None"),
            Value::Adt(a) => {
                out.push_str(self.ctor_name(a.ctor));
                if !a.fields.is_empty() {
                    out.push('(');
                    for (i, x) in a.fields.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        self.display_into(x, out, false);
                    }
                    out.push(')');
                }
            }
            Value::Func(f) => match &**f {
                Func::Fn(id) => {
                    let _ = write!(out, "<fn {}>", self.p.functions[*id as usize].name);
                }
                Func::Closure { .. } => out.push_str("<closure>"),
                Func::Builtin(b) => {
                    let _ = write!(out, "<builtin {}>", b.name());
                }
                Func::Ctor(c) => {
                    let _ = write!(out, "<constructor {}>", self.ctor_name(*c));
                }
            },
        }
    }
}

/// An upper bound of the bytes needed to format `v` (as text or JSON), counted only until it
/// passes `cap`. Containers may share one big value many times, so formatting is checked
/// against the memory budget before it starts.
pub(crate) fn size_hint(v: &Value, cap: usize) -> usize {
    fn go(v: &Value, acc: &mut usize, cap: usize) {
        if *acc > cap {
            return;
        }
        match v {
            // Escaping can grow a string up to six times (`\u0000`).
            Value::Str(s) => *acc += s.len() * 6 + 2,
            Value::List(l) => {
                *acc += 2;
                for x in &l.items {
                    go(x, acc, cap);
                    *acc += 2;
                    if *acc > cap {
                        return;
                    }
                }
            }
            Value::Map(m) => {
                *acc += 2;
                for (k, x) in &m.entries {
                    *acc += k.len() * 6 + 4;
                    go(x, acc, cap);
                    if *acc > cap {
                        return;
                    }
                }
            }
            Value::Adt(a) => {
                *acc += 48;
                for x in &a.fields {
                    go(x, acc, cap);
                }
            }
            _ => *acc += 32,
        }
    }
    let mut acc = 0;
    go(v, &mut acc, cap);
    acc
}

/// Int-int comparison; `None` for other operators.
#[inline(always)]
fn int_cmp(op: BinOp, x: i64, y: i64) -> Option<bool> {
    match op {
        BinOp::Lt => Some(x < y),
        BinOp::Le => Some(x <= y),
        BinOp::Gt => Some(x > y),
        BinOp::Ge => Some(x >= y),
        BinOp::Eq => Some(x == y),
        BinOp::Ne => Some(x != y),
        _ => None,
    }
}

/// Floats always show a decimal point or exponent, so `1.0` does not print as `1`.
pub(crate) fn format_float(f: f64, out: &mut String) {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 {
        let _ = write!(out, "{f:.1}");
    } else {
        let _ = write!(out, "{f}");
    }
}
const _: () = assert!(std::mem::size_of::<R>() == 16);
