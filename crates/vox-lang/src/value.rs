//! Run-time values.
//!
//! Values have value semantics: containers are `Rc` and copied on write (`Rc::make_mut`), so
//! there is no aliasing and no reference cycle. Every container records its nesting depth and
//! construction refuses to go past [`MAX_VALUE_DEPTH`], so printing, comparing, converting and
//! dropping a value never recurse deeper than that.

use crate::hir::{BodyId, Builtin, Ctor};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Deepest nesting of lists, records, variants and closures a value may have.
pub const MAX_VALUE_DEPTH: u32 = 100;

/// A run-time value.
///
/// `repr(C, u8)` puts every payload at offset 8: with the default layout `Bool` sits at offset
/// 1, and copies of any value then move bytes 1..8 in overlapping pieces, which stalls store
/// forwarding on the interpreter's hottest paths.
#[derive(Clone, Debug)]
#[repr(C, u8)]
pub enum Value {
    /// `()`
    Unit,
    /// `true` / `false`
    Bool(bool),
    /// 64-bit integer.
    Int(i64),
    /// 64-bit float.
    Float(f64),
    /// `dec`: an exact decimal.
    Dec(Rc<crate::decimal::Dec>),
    /// A compiled `regex.compile` pattern, or one of its matches.
    Regex(Rc<crate::stdlib::RegexValue>),
    /// Immutable string. `Rc<String>` rather than `Rc<str>`: a thin pointer keeps `Value` at
    /// 16 bytes, so evaluation results and stack slots stay small.
    Str(Rc<String>),
    /// List.
    List(Rc<List>),
    /// Record or map (string keys, sorted so output is deterministic).
    Map(Rc<Map>),
    /// `None`
    None,
    /// `Some`, `Ok`, `Error` or a user variant.
    Adt(Rc<Adt>),
    /// A function value.
    Func(Rc<Func>),
    /// An MCP content block (`content.image(…)`, …).
    Content(Rc<crate::content::Content>),
}

/// List contents.
#[derive(Clone, Debug, Default)]
pub struct List {
    /// Items.
    pub items: Vec<Value>,
    /// Nesting depth (1 + deepest item).
    pub depth: u32,
}

/// Record/map contents.
#[derive(Clone, Debug, Default)]
pub struct Map {
    /// Entries.
    pub entries: BTreeMap<Rc<str>, Value>,
    /// Nesting depth.
    pub depth: u32,
}

/// A constructed variant.
#[derive(Clone, Debug)]
pub struct Adt {
    /// Which constructor.
    pub ctor: Ctor,
    /// Field values.
    pub fields: Vec<Value>,
    /// Nesting depth.
    pub depth: u32,
}

/// Function values.
#[derive(Clone, Debug)]
pub enum Func {
    /// A top-level function.
    Fn(u32),
    /// A closure with captured values for its slots.
    Closure {
        /// Body.
        body: BodyId,
        /// (slot, value) pairs.
        captures: Vec<(u32, Value)>,
        /// Nesting depth.
        depth: u32,
    },
    /// A built-in function.
    Builtin(Builtin),
    /// A constructor used as a function.
    Ctor(Ctor),
}

/// The value would nest deeper than [`MAX_VALUE_DEPTH`].
#[derive(Debug, Clone, Copy)]
pub struct TooDeep;

fn check(depth: u32) -> Result<u32, TooDeep> {
    if depth > MAX_VALUE_DEPTH {
        Err(TooDeep)
    } else {
        Ok(depth)
    }
}

impl Value {
    /// Nesting depth: 0 for scalars.
    pub fn depth(&self) -> u32 {
        match self {
            Value::List(l) => l.depth,
            Value::Map(m) => m.depth,
            Value::Adt(a) => a.depth,
            Value::Func(f) => match &**f {
                Func::Closure { depth, .. } => *depth,
                _ => 0,
            },
            _ => 0,
        }
    }

    /// Whether the value owns no memory (dropping it does nothing).
    #[inline(always)]
    pub fn is_scalar(&self) -> bool {
        matches!(
            self,
            Value::Unit | Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::None
        )
    }

    /// A string value.
    pub fn str(s: &str) -> Value {
        Value::Str(Rc::new(s.to_string()))
    }

    /// A list, checking depth.
    pub fn list(items: Vec<Value>) -> Result<Value, TooDeep> {
        let depth = check(1 + items.iter().map(Value::depth).max().unwrap_or(0))?;
        Ok(Value::List(Rc::new(List { items, depth })))
    }

    /// A record/map, checking depth.
    pub fn map(entries: BTreeMap<Rc<str>, Value>) -> Result<Value, TooDeep> {
        let depth = check(1 + entries.values().map(Value::depth).max().unwrap_or(0))?;
        Ok(Value::Map(Rc::new(Map { entries, depth })))
    }

    /// A constructed variant, checking depth.
    pub fn adt(ctor: Ctor, fields: Vec<Value>) -> Result<Value, TooDeep> {
        if ctor == Ctor::None {
            return Ok(Value::None);
        }
        let depth = check(1 + fields.iter().map(Value::depth).max().unwrap_or(0))?;
        Ok(Value::Adt(Rc::new(Adt {
            ctor,
            fields,
            depth,
        })))
    }

    /// A closure, checking depth.
    pub fn closure(body: BodyId, captures: Vec<(u32, Value)>) -> Result<Value, TooDeep> {
        let depth = check(1 + captures.iter().map(|(_, v)| v.depth()).max().unwrap_or(0))?;
        Ok(Value::Func(Rc::new(Func::Closure {
            body,
            captures,
            depth,
        })))
    }

    /// `Ok(v)`.
    pub fn ok(v: Value) -> Result<Value, TooDeep> {
        Value::adt(Ctor::Ok, vec![v])
    }

    /// `Error(msg)`.
    pub fn error(msg: &str) -> Value {
        Value::Adt(Rc::new(Adt {
            ctor: Ctor::Error,
            fields: vec![Value::str(msg)],
            depth: 1,
        }))
    }

    /// `Some(v)`.
    pub fn some(v: Value) -> Result<Value, TooDeep> {
        Value::adt(Ctor::Some, vec![v])
    }

    /// The type name used in error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Unit => "Unit",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Dec(_) => "dec",
            Value::Regex(r) => match **r {
                crate::stdlib::RegexValue::Pattern(_) => "Regex",
                crate::stdlib::RegexValue::Match(_) => "Match",
            },
            Value::Str(_) => "str",
            Value::List(_) => "list",
            Value::Map(_) => "record",
            Value::None => "Option",
            Value::Adt(a) => match a.ctor {
                Ctor::Some | Ctor::None => "Option",
                Ctor::Ok | Ctor::Error => "Result",
                Ctor::User { .. } => "variant",
            },
            Value::Func(_) => "function",
            Value::Content(_) => "Content",
        }
    }

    /// Approximate heap bytes of this value's own allocation (not its children), for the
    /// memory budget.
    pub fn alloc_size(&self) -> usize {
        match self {
            Value::Str(s) => 16 + s.len(),
            Value::List(l) => 32 + 24 * l.items.len(),
            Value::Map(m) => 48 + 64 * m.entries.len(),
            Value::Adt(a) => 40 + 24 * a.fields.len(),
            Value::Func(_) => 64,
            _ => 0,
        }
    }
}

/// Structural equality; ints and floats compare by numeric value.
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Unit, Value::Unit) | (Value::None, Value::None) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Int(x), Value::Float(y)) | (Value::Float(y), Value::Int(x)) => (*x as f64) == *y,
        (Value::Dec(x), Value::Dec(y)) => x.numeric_cmp(**y).is_eq(),
        (Value::Dec(x), Value::Int(i)) | (Value::Int(i), Value::Dec(x)) => {
            x.numeric_cmp(crate::decimal::Dec::from_int(*i)).is_eq()
        }
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Regex(x), Value::Regex(y)) => x == y,
        (Value::Content(x), Value::Content(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            x.items.len() == y.items.len() && x.items.iter().zip(&y.items).all(|(a, b)| equal(a, b))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.entries.len() == y.entries.len()
                && x.entries
                    .iter()
                    .zip(&y.entries)
                    .all(|((ka, va), (kb, vb))| ka == kb && equal(va, vb))
        }
        (Value::Adt(x), Value::Adt(y)) => {
            x.ctor == y.ctor
                && x.fields.len() == y.fields.len()
                && x.fields.iter().zip(&y.fields).all(|(a, b)| equal(a, b))
        }
        (Value::Func(x), Value::Func(y)) => Rc::ptr_eq(x, y),
        _ => false,
    }
}

/// Ordering for `<`, `sorted` and `min`/`max`: numbers with numbers, strings with strings.
pub fn compare(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Float(x), Value::Float(y)) => x.partial_cmp(y),
        (Value::Int(x), Value::Float(y)) => (*x as f64).partial_cmp(y),
        (Value::Float(x), Value::Int(y)) => x.partial_cmp(&(*y as f64)),
        (Value::Dec(x), Value::Dec(y)) => Some(x.numeric_cmp(**y)),
        (Value::Dec(x), Value::Int(y)) => Some(x.numeric_cmp(crate::decimal::Dec::from_int(*y))),
        (Value::Int(x), Value::Dec(y)) => Some(crate::decimal::Dec::from_int(*x).numeric_cmp(**y)),
        (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

// The interpreter returns `Result<Value, Flow>` from every step and keeps locals in a stack of
// values; growing `Value` past 16 bytes costs measurably (see the fib bench).
const _: () = assert!(std::mem::size_of::<Value>() == 16);
