//! Built-in functions and methods (spec section 4).
//!
//! String positions (`find`, `slice`, indexing, `len`) count Unicode characters, not bytes.

use crate::diag::Span;
use crate::formats;
use crate::hir::{Builtin, Ctor, Method};
use crate::interp::{Interp, R, rt};
use crate::stdlib;
use crate::value::{self, Value};
use serde_json::Value as J;
use std::collections::BTreeMap;
use std::rc::Rc;

fn want_int(v: &Value, what: &str, span: Span) -> R<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        other => Err(rt(
            format!("{what} must be an int, found `{}`", other.type_name()),
            span,
        )),
    }
}

fn want_str<'v>(v: &'v Value, what: &str, span: Span) -> R<&'v str> {
    match v {
        Value::Str(s) => Ok(s),
        other => Err(rt(
            format!("{what} must be a str, found `{}`", other.type_name()),
            span,
        )),
    }
}

fn bool_of(interp: &mut Interp<'_>, f: &Value, x: Value, span: Span) -> R<bool> {
    match interp.call_value(f, vec![x], span)? {
        Value::Bool(b) => Ok(b),
        other => Err(rt(
            format!(
                "the predicate must return a bool, found `{}`",
                other.type_name()
            ),
            span,
        )),
    }
}

/// Calls a built-in function.
pub(crate) fn call_builtin(interp: &mut Interp<'_>, b: Builtin, args: Vec<Value>, span: Span) -> R {
    match b {
        Builtin::Print => {
            let mut line = String::new();
            for (i, a) in args.iter().enumerate() {
                if i > 0 {
                    line.push(' ');
                }
                interp.charge_display(a, span)?;
                interp.display_into(a, &mut line, true);
            }
            interp.log(line, span)?;
            Ok(Value::Unit)
        }
        Builtin::Len => len(&args[0], span),
        Builtin::Str => {
            interp.charge_display(&args[0], span)?;
            let mut s = String::new();
            interp.display_into(&args[0], &mut s, true);
            interp.string(s, span)
        }
        Builtin::Int => match &args[0] {
            Value::Int(i) => Ok(Value::Int(*i)),
            Value::Float(f) => {
                if f.is_finite() && f.abs() < 9.2e18 {
                    Ok(Value::Int(f.trunc() as i64))
                } else {
                    Err(rt(format!("{f} does not fit in an int"), span))
                }
            }
            Value::Bool(b) => Ok(Value::Int(*b as i64)),
            Value::Dec(d) => d
                .to_i64()
                .map(Value::Int)
                .ok_or_else(|| rt(format!("{d} does not fit in an int"), span)),
            Value::Str(s) => s
                .trim()
                .parse::<i64>()
                .map(Value::Int)
                .map_err(|_| rt(format!("cannot convert {:?} to int", &**s), span)),
            other => Err(rt(
                format!("cannot convert a `{}` to int", other.type_name()),
                span,
            )),
        },
        Builtin::Float => match &args[0] {
            Value::Int(i) => Ok(Value::Float(*i as f64)),
            Value::Float(f) => Ok(Value::Float(*f)),
            Value::Dec(d) => Ok(Value::Float(d.to_f64())),
            Value::Str(s) => s
                .trim()
                .parse::<f64>()
                .map(Value::Float)
                .map_err(|_| rt(format!("cannot convert {:?} to float", &**s), span)),
            other => Err(rt(
                format!("cannot convert a `{}` to float", other.type_name()),
                span,
            )),
        },
        Builtin::Assert => match &args[0] {
            Value::Bool(true) => Ok(Value::Unit),
            Value::Bool(false) => {
                let msg = match args.get(1) {
                    Some(Value::Str(m)) if m.len() <= 4096 => format!("assertion failed: {m}"),
                    Some(m) => format!("assertion failed: {}", interp.display(m)),
                    None => "assertion failed".to_string(),
                };
                Err(rt(msg, span))
            }
            other => Err(rt(
                format!("assert needs a bool, found `{}`", other.type_name()),
                span,
            )),
        },
        Builtin::Range => {
            let (lo, hi) = if args.len() == 1 {
                (0, want_int(&args[0], "range's end", span)?)
            } else {
                (
                    want_int(&args[0], "range's start", span)?,
                    want_int(&args[1], "range's end", span)?,
                )
            };
            let n = hi.saturating_sub(lo).max(0) as u64;
            // Charged before allocating so a huge range fails instead of exhausting memory.
            interp.charge((n as usize).saturating_mul(24), span)?;
            let items = (lo..hi.max(lo)).map(Value::Int).collect();
            interp.fresh(Value::list(items), span)
        }
        Builtin::PathJoin => {
            let a = want_str(&args[0], "path.join's first argument", span)?;
            let b = want_str(&args[1], "path.join's second argument", span)?;
            let joined = stdlib::path_join(a, b);
            interp.string(joined, span)
        }
        Builtin::PathJoinMany => {
            let Value::List(l) = &args[0] else {
                return Err(rt("path.join_many needs a list of str", span));
            };
            let mut out = String::new();
            for (i, part) in l.items.iter().enumerate() {
                let part = want_str(part, "each part of path.join_many", span)?;
                out = if i == 0 {
                    part.to_string()
                } else {
                    stdlib::path_join(&out, part)
                };
            }
            interp.string(if out.is_empty() { ".".into() } else { out }, span)
        }
        Builtin::PathBasename | Builtin::PathDirname | Builtin::PathExtension => {
            let p = want_str(&args[0], b.name(), span)?;
            let part = match b {
                Builtin::PathBasename => stdlib::basename(p),
                Builtin::PathDirname => stdlib::dirname(p),
                _ => stdlib::extension(p),
            };
            interp.string(part.to_string(), span)
        }
        Builtin::JsonParse => {
            // Real Vox's interpreter: the value itself, `null` (None) when the text is not JSON.
            let s = want_str(&args[0], "json.parse's argument", span)?;
            interp.charge(s.len() * 4, span)?;
            match serde_json::from_str::<serde_json::Value>(s) {
                Ok(j) => interp.fresh(crate::json::json_to_value(&j), span),
                Err(_) => Ok(Value::None),
            }
        }
        Builtin::JsonQuote => {
            let s = want_str(&args[0], "json.quote's argument", span)?;
            let q = serde_json::Value::String(s.to_string()).to_string();
            interp.string(q, span)
        }
        Builtin::NowMs => Ok(Value::Int(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0),
        )),
        Builtin::FsRead => {
            let p = want_str(&args[0], "fs.read's path", span)?;
            match stdlib::fs_read(interp.workspace, p) {
                Ok(text) => {
                    let v = interp.string(text, span)?;
                    interp.fresh(Value::ok(v), span)
                }
                Err(why) => Ok(Value::error(&why)),
            }
        }
        Builtin::FsExists | Builtin::FsIsFile | Builtin::FsIsDir => {
            let p = want_str(&args[0], b.name(), span)?;
            stdlib::fs_test(interp.workspace, p, b.name())
                .map(Value::Bool)
                .map_err(|why| rt(why, span))
        }
        Builtin::FsListDir | Builtin::FsGlob => {
            let arg = match args.first() {
                Some(a) => want_str(a, b.name(), span)?,
                None => ".",
            };
            let found = if b == Builtin::FsGlob {
                stdlib::fs_glob(interp.workspace, arg)
            } else {
                stdlib::fs_list_dir(interp.workspace, arg)
            };
            match found {
                Ok(names) => {
                    interp.charge(names.iter().map(|n| n.len() + 40).sum(), span)?;
                    let items = names.iter().map(|n| Value::str(n)).collect();
                    let list = interp.fresh(Value::list(items), span)?;
                    interp.fresh(Value::ok(list), span)
                }
                Err(why) => Ok(Value::error(&why)),
            }
        }
        Builtin::RegexCompile => {
            let p = want_str(&args[0], "regex.compile's pattern", span)?;
            interp.charge(p.len() * 16 + 256, span)?;
            match stdlib::regex_compile(p) {
                Ok(re) => interp.fresh(
                    Value::ok(Value::Regex(Rc::new(stdlib::RegexValue::Pattern(re)))),
                    span,
                ),
                Err(why) => Ok(Value::error(&why)),
            }
        }
        Builtin::CsvParse | Builtin::CsvParseRecords | Builtin::TomlParse | Builtin::YamlParse => {
            let text = want_str(&args[0], b.name(), span)?;
            interp.charge(text.len() * 4, span)?;
            let parsed = match b {
                Builtin::CsvParse => formats::csv_rows(text).map(|rows| {
                    J::Array(
                        rows.into_iter()
                            .map(|r| J::Array(r.into_iter().map(J::String).collect()))
                            .collect(),
                    )
                }),
                Builtin::CsvParseRecords => formats::csv_records(text)
                    .map(|rs| J::Array(rs.into_iter().map(J::Object).collect())),
                Builtin::TomlParse => formats::toml_parse(text),
                _ => formats::yaml_parse(text),
            };
            match parsed {
                Ok(j) => {
                    let v = interp.fresh(crate::json::json_to_value(&j), span)?;
                    interp.fresh(Value::ok(v), span)
                }
                Err(why) => Ok(Value::error(&format!("{}: {why}", b.name()))),
            }
        }
        Builtin::CsvRender | Builtin::TomlRender | Builtin::YamlRender => {
            interp.charge_display(&args[0], span)?;
            let j = crate::json::value_to_json(interp.p, &args[0]).map_err(|e| rt(e, span))?;
            let text = match b {
                Builtin::CsvRender => formats::csv_table(&j).map(|t| formats::csv_render(&t)),
                Builtin::TomlRender => formats::toml_render(&j),
                _ => formats::yaml_render(&j),
            };
            match text {
                Ok(t) => {
                    let s = interp.string(t, span)?;
                    interp.fresh(Value::ok(s), span)
                }
                Err(why) => Ok(Value::error(&format!("{}: {why}", b.name()))),
            }
        }
        Builtin::HashSecure | Builtin::HashFast => {
            let s = want_str(&args[0], b.name(), span)?;
            let h = if b == Builtin::HashSecure {
                formats::hash_secure(s)
            } else {
                formats::hash_fast(s)
            };
            interp.string(h, span)
        }
        Builtin::Now => interp.string(rfc3339_now(), span),
        Builtin::Uuid => interp.string(uuid_v4(), span),
        Builtin::JsonEncode => match interp
            .charge_display(&args[0], span)
            .map(|()| crate::json::value_to_json(interp.p, &args[0]))?
        {
            Ok(j) => interp.string(j.to_string(), span),
            Err(e) => Err(rt(e, span)),
        },
        Builtin::JsonDecode => {
            let s = want_str(&args[0], "json_decode's argument", span)?;
            interp.charge(s.len() * 4, span)?;
            match serde_json::from_str::<serde_json::Value>(s) {
                Ok(j) => {
                    let v = crate::json::json_to_value(&j);
                    let v = interp.fresh(v, span)?;
                    interp.fresh(Value::ok(v), span)
                }
                Err(e) => Ok(Value::error(&format!("invalid JSON: {e}"))),
            }
        }
        Builtin::Min | Builtin::Max => {
            let items: Vec<Value> = if args.len() == 1 {
                match &args[0] {
                    Value::List(l) => l.items.clone(),
                    other => {
                        return Err(rt(
                            format!(
                                "{}(x) needs a list, found `{}`",
                                b.name(),
                                other.type_name()
                            ),
                            span,
                        ));
                    }
                }
            } else {
                args
            };
            let mut best: Option<Value> = None;
            for x in items {
                best = Some(match best {
                    None => x,
                    Some(cur) => {
                        let ord = value::compare(&x, &cur).ok_or_else(|| {
                            rt(
                                format!(
                                    "cannot compare `{}` with `{}`",
                                    x.type_name(),
                                    cur.type_name()
                                ),
                                span,
                            )
                        })?;
                        let take = if b == Builtin::Min {
                            ord.is_lt()
                        } else {
                            ord.is_gt()
                        };
                        if take { x } else { cur }
                    }
                });
            }
            best.ok_or_else(|| rt(format!("{} of an empty list", b.name()), span))
        }
        Builtin::Abs => match &args[0] {
            Value::Int(i) => i
                .checked_abs()
                .map(Value::Int)
                .ok_or_else(|| rt("integer overflow in abs", span)),
            Value::Float(f) => Ok(Value::Float(f.abs())),
            other => Err(rt(
                format!("abs needs a number, found `{}`", other.type_name()),
                span,
            )),
        },
        Builtin::Log => log(interp, &args, span),
        Builtin::ContentText
        | Builtin::ContentImage
        | Builtin::ContentAudio
        | Builtin::ContentResource
        | Builtin::ContentBlob
        | Builtin::ContentLink => content(interp, b, &args, span),
        Builtin::ContentData => {
            interp.charge_display(&args[0], span)?;
            let j = crate::json::value_to_json(interp.p, &args[0]).map_err(|e| rt(e, span))?;
            Ok(Value::Content(Rc::new(crate::content::data(j))))
        }
        Builtin::Progress => progress(interp, &args, span),
        Builtin::Elicit => crate::ask::elicit(interp, &args, span),
        Builtin::Sample => crate::ask::sample(interp, &args, span),
    }
}

/// `content.*(…)`: an MCP content block.
fn content(interp: &mut Interp<'_>, b: Builtin, args: &[Value], span: Span) -> R {
    use crate::content as c;
    let s = |i: usize, what: &str| -> R<&str> { want_str(&args[i], what, span) };
    for a in args {
        interp.charge_display(a, span)?;
    }
    let made = match b {
        Builtin::ContentText => Ok(c::text(s(0, "content.text's text")?)),
        Builtin::ContentImage => c::media(
            "image",
            s(0, "content.image's data")?,
            s(1, "content.image's MIME type")?,
        ),
        Builtin::ContentAudio => c::media(
            "audio",
            s(0, "content.audio's data")?,
            s(1, "content.audio's MIME type")?,
        ),
        Builtin::ContentResource => c::resource(
            s(0, "content.resource's URI")?,
            s(1, "content.resource's text")?,
            if args.len() > 2 {
                s(2, "content.resource's MIME type")?
            } else {
                "text/plain"
            },
        ),
        Builtin::ContentBlob => c::blob(
            s(0, "content.blob's URI")?,
            s(1, "content.blob's data")?,
            s(2, "content.blob's MIME type")?,
        ),
        _ => c::link(
            s(0, "content.link's URI")?,
            s(1, "content.link's name")?,
            if args.len() > 2 {
                Some(s(2, "content.link's MIME type")?)
            } else {
                None
            },
        ),
    };
    made.map(|x| Value::Content(Rc::new(x)))
        .map_err(|e| rt(e, span))
}

/// `log(level, message)`: a log message for the caller; a message that is not a str is shown
/// as `print` shows it.
fn log(interp: &mut Interp<'_>, args: &[Value], span: Span) -> R {
    let level = want_str(&args[0], "the log level", span)?;
    let Some(level) = crate::interp::LOG_LEVELS.iter().find(|l| **l == level) else {
        return Err(rt(
            format!(
                "unknown log level {level:?}: use one of {}",
                crate::interp::LOG_LEVELS.join(", ")
            ),
            span,
        ));
    };
    let message = match &args[1] {
        Value::Str(s) => s.to_string(),
        other => {
            interp.charge_display(other, span)?;
            interp.display(other)
        }
    };
    match interp.events {
        Some(ev) => {
            interp.charge(message.len(), span)?;
            ev.log(level, &message);
        }
        None => interp.log(format!("{level}: {message}"), span)?,
    }
    Ok(Value::Unit)
}

fn number(v: &Value, what: &str, span: Span) -> R<f64> {
    let n = match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Dec(d) => d.to_f64(),
        other => {
            return Err(rt(
                format!("{what} must be a number, found `{}`", other.type_name()),
                span,
            ));
        }
    };
    if !n.is_finite() {
        return Err(rt(format!("{what} must be finite, found {n}"), span));
    }
    Ok(n)
}

/// `progress(done[, total[, message]])`: a progress notification for the caller (sent only
/// when the caller asked for progress). `done` must grow from call to call, as MCP requires.
fn progress(interp: &mut Interp<'_>, args: &[Value], span: Span) -> R {
    let done = number(&args[0], "progress's `done`", span)?;
    let total = match args.get(1) {
        None | Some(Value::Unit | Value::None) => None,
        Some(t) => Some(number(t, "progress's `total`", span)?),
    };
    let message = match args.get(2) {
        None => None,
        Some(m) => Some(want_str(m, "progress's `message`", span)?.to_owned()),
    };
    if let Some(last) = interp.last_progress
        && done <= last
    {
        return Err(rt(
            format!("progress must increase from call to call: {done} after {last}"),
            span,
        ));
    }
    interp.last_progress = Some(done);
    if let Some(ev) = interp.events {
        ev.progress(done, total, message.as_deref());
    }
    Ok(Value::Unit)
}

fn len(v: &Value, span: Span) -> R {
    Ok(Value::Int(match v {
        Value::Str(s) => s.chars().count() as i64,
        Value::List(l) => l.items.len() as i64,
        Value::Map(m) => m.entries.len() as i64,
        other => {
            return Err(rt(format!("a `{}` has no length", other.type_name()), span));
        }
    }))
}

fn no_method(v: &Value, m: Method, span: Span) -> crate::interp::Flow {
    rt(
        format!("a `{}` has no method `{}`", v.type_name(), m.name()),
        span,
    )
}

/// Calls a method on a receiver value (mutating methods act on a copy here).
pub(crate) fn call_method(
    interp: &mut Interp<'_>,
    recv: Value,
    m: Method,
    args: Vec<Value>,
    span: Span,
) -> R {
    if matches!(
        m,
        Method::Push | Method::Pop | Method::Insert | Method::Remove
    ) {
        let mut copy = recv;
        return mutate(interp, &mut copy, m, &args, span);
    }
    match m {
        Method::ToStr => {
            interp.charge_display(&recv, span)?;
            let mut s = String::new();
            interp.display_into(&recv, &mut s, true);
            return interp.string(s, span);
        }
        Method::IsEmpty => {
            return match &recv {
                Value::Str(s) => Ok(Value::Bool(s.is_empty())),
                Value::List(l) => Ok(Value::Bool(l.items.is_empty())),
                Value::Map(m) => Ok(Value::Bool(m.entries.is_empty())),
                _ => Err(no_method(&recv, m, span)),
            };
        }
        _ => {}
    }
    match &recv {
        Value::Regex(r) => regex_method(interp, r, m, &args, span),
        Value::Int(_) | Value::Float(_) => num_method(&recv, m, &args, span),
        Value::Str(s) => str_method(interp, s, m, &args, span),
        Value::List(l) => {
            let l = Rc::clone(l);
            list_method(interp, &l.items, m, args, span)
        }
        Value::Map(map) => {
            let map = Rc::clone(map);
            map_method(interp, &map.entries, m, &args, span)
        }
        Value::None | Value::Adt(_) => option_method(interp, &recv, m, args, span),
        _ => Err(no_method(&recv, m, span)),
    }
}

/// A compiled pattern's `matches(s)`, `find(s)` (an Option of a match), `find_all(s)` and
/// `replace(s, with)` (every match; `$1` names a group); a match's `group(i)`.
fn regex_method(
    interp: &mut Interp<'_>,
    r: &stdlib::RegexValue,
    m: Method,
    args: &[Value],
    span: Span,
) -> R {
    let wrap = |g: Vec<Option<String>>| Value::Regex(Rc::new(stdlib::RegexValue::Match(g)));
    match (r, m) {
        (stdlib::RegexValue::Pattern(re), Method::Matches) => {
            let s = want_str(&args[0], "the text", span)?;
            Ok(Value::Bool(re.is_match(s)))
        }
        (stdlib::RegexValue::Pattern(re), Method::Find) => {
            let s = want_str(&args[0], "the text", span)?;
            match re.captures(s) {
                Some(c) => {
                    interp.charge(s.len().min(c[0].len() * 2) + 64, span)?;
                    interp.fresh(Value::some(wrap(stdlib::groups(&c))), span)
                }
                None => Ok(Value::None),
            }
        }
        (stdlib::RegexValue::Pattern(re), Method::FindAll) => {
            let s = want_str(&args[0], "the text", span)?;
            let mut items = Vec::new();
            for c in re.captures_iter(s) {
                interp.charge(c[0].len() * 2 + 64, span)?;
                items.push(wrap(stdlib::groups(&c)));
            }
            interp.fresh(Value::list(items), span)
        }
        (stdlib::RegexValue::Pattern(re), Method::Replace) => {
            let s = want_str(&args[0], "the text", span)?;
            let with = want_str(&args[1], "the replacement", span)?;
            let out = re.replace_all(s, with).into_owned();
            interp.string(out, span)
        }
        (stdlib::RegexValue::Match(g), Method::Group) => {
            let i = want_int(&args[0], "the group", span)?;
            let found = usize::try_from(i)
                .ok()
                .and_then(|i| g.get(i))
                .cloned()
                .flatten();
            match found {
                Some(t) => {
                    let v = interp.string(t, span)?;
                    interp.fresh(Value::some(v), span)
                }
                None => Ok(Value::None),
            }
        }
        _ => {
            let kind = match r {
                stdlib::RegexValue::Pattern(_) => "Regex",
                stdlib::RegexValue::Match(_) => "Match",
            };
            Err(rt(format!("a `{kind}` has no method `{}`", m.name()), span))
        }
    }
}

/// Real Vox's number methods: `abs`, `min(x)`, `max(x)` keep the receiver's kind; `floor`,
/// `ceil`, `round` and `sqrt` give a float.
fn num_method(v: &Value, m: Method, args: &[Value], span: Span) -> R {
    let f = match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        _ => return Err(no_method(v, m, span)),
    };
    match (m, v) {
        (Method::Abs, Value::Int(i)) => i
            .checked_abs()
            .map(Value::Int)
            .ok_or_else(|| rt("integer overflow in `abs`", span)),
        (Method::Abs, _) => Ok(Value::Float(f.abs())),
        (Method::Floor, _) => Ok(Value::Float(f.floor())),
        (Method::Ceil, _) => Ok(Value::Float(f.ceil())),
        (Method::Round, _) => Ok(Value::Float(f.round())),
        (Method::Sqrt, _) => Ok(Value::Float(f.sqrt())),
        (Method::Min | Method::Max, _) => {
            let Some(ord) = value::compare(v, &args[0]) else {
                return Err(rt(
                    format!(
                        "`{}` needs a number, found `{}`",
                        m.name(),
                        args[0].type_name()
                    ),
                    span,
                ));
            };
            let take_self = (m == Method::Min) == ord.is_le();
            Ok(if take_self {
                v.clone()
            } else {
                args[0].clone()
            })
        }
        _ => Err(no_method(v, m, span)),
    }
}

fn str_method(interp: &mut Interp<'_>, s: &str, m: Method, args: &[Value], span: Span) -> R {
    match m {
        Method::TrimStart => interp.string(s.trim_start().to_string(), span),
        Method::TrimEnd => interp.string(s.trim_end().to_string(), span),
        Method::CharAt => {
            let i = want_int(&args[0], "the position", span)?;
            let c = usize::try_from(i).ok().and_then(|i| s.chars().nth(i));
            match c {
                Some(c) => {
                    let v = interp.string(c.to_string(), span)?;
                    interp.fresh(Value::some(v), span)
                }
                None => Ok(Value::None),
            }
        }
        Method::Repeat => {
            let n = match args.first() {
                Some(a) => want_int(a, "the count", span)?,
                None => 1,
            };
            let n = usize::try_from(n).map_err(|_| rt("the count must not be negative", span))?;
            interp.charge(s.len().saturating_mul(n), span)?;
            interp.string(s.repeat(n), span)
        }
        Method::Len => Ok(Value::Int(s.chars().count() as i64)),
        Method::Trim => interp.string(s.trim().to_string(), span),
        Method::ToUpper => interp.string(s.to_uppercase(), span),
        Method::ToLower => interp.string(s.to_lowercase(), span),
        Method::Split => {
            let sep = want_str(&args[0], "the separator", span)?;
            let parts: Vec<&str> = if sep.is_empty() {
                s.split_whitespace().collect()
            } else {
                s.split(sep).collect()
            };
            interp.charge(parts.len() * 24 + s.len(), span)?;
            let items = parts.into_iter().map(Value::str).collect();
            interp.fresh(Value::list(items), span)
        }
        Method::Replace => {
            let from = want_str(&args[0], "the pattern", span)?;
            let to = want_str(&args[1], "the replacement", span)?;
            if from.is_empty() {
                return Err(rt("replace needs a non-empty pattern", span));
            }
            // Bound the result before building it: each match may grow the string.
            let count = s.matches(from).count();
            interp.charge(count.saturating_mul(to.len()), span)?;
            interp.string(s.replace(from, to), span)
        }
        Method::Contains => Ok(Value::Bool(s.contains(want_str(
            &args[0],
            "the needle",
            span,
        )?))),
        Method::StartsWith => Ok(Value::Bool(s.starts_with(want_str(
            &args[0],
            "the prefix",
            span,
        )?))),
        Method::EndsWith => Ok(Value::Bool(s.ends_with(want_str(
            &args[0],
            "the suffix",
            span,
        )?))),
        Method::Find => {
            let needle = want_str(&args[0], "the needle", span)?;
            match s.find(needle) {
                Some(byte) => interp.fresh(
                    Value::some(Value::Int(s[..byte].chars().count() as i64)),
                    span,
                ),
                None => Ok(Value::None),
            }
        }
        Method::Slice => {
            let n = s.chars().count() as i64;
            let clamp = |i: i64| if i < 0 { (n + i).max(0) } else { i.min(n) };
            let a = clamp(want_int(&args[0], "the start", span)?);
            let b = match args.get(1) {
                Some(v) => clamp(want_int(v, "the end", span)?),
                None => n,
            };
            let out: String = s
                .chars()
                .skip(a as usize)
                .take((b - a).max(0) as usize)
                .collect();
            interp.string(out, span)
        }
        Method::Chars => {
            interp.charge(s.len() * 24, span)?;
            let items = s
                .chars()
                .map(|c| Value::str(c.encode_utf8(&mut [0; 4])))
                .collect();
            interp.fresh(Value::list(items), span)
        }
        Method::Lines => {
            interp.charge(s.len() + 24 * s.lines().count(), span)?;
            let items = s.lines().map(Value::str).collect();
            interp.fresh(Value::list(items), span)
        }
        Method::ParseInt => Ok(match s.trim().parse::<i64>() {
            Ok(i) => interp.fresh(Value::ok(Value::Int(i)), span)?,
            Err(_) => Value::error(&format!("invalid integer: {s:?}")),
        }),
        Method::ParseFloat => Ok(match s.trim().parse::<f64>() {
            Ok(f) => interp.fresh(Value::ok(Value::Float(f)), span)?,
            Err(_) => Value::error(&format!("invalid float: {s:?}")),
        }),
        _ => Err(no_method(&Value::str(""), m, span)),
    }
}

fn opt(interp: &mut Interp<'_>, v: Option<Value>, span: Span) -> R {
    match v {
        Some(v) => interp.fresh(Value::some(v), span),
        None => Ok(Value::None),
    }
}

fn list_method(
    interp: &mut Interp<'_>,
    items: &[Value],
    m: Method,
    args: Vec<Value>,
    span: Span,
) -> R {
    match m {
        Method::Len => Ok(Value::Int(items.len() as i64)),
        Method::Get => {
            let i = want_int(&args[0], "the index", span)?;
            let v = usize::try_from(i).ok().and_then(|i| items.get(i)).cloned();
            opt(interp, v, span)
        }
        Method::First => opt(interp, items.first().cloned(), span),
        Method::Last => opt(interp, items.last().cloned(), span),
        Method::Map => {
            let mut out = Vec::with_capacity(items.len());
            for x in items {
                out.push(interp.call_value(&args[0], vec![x.clone()], span)?);
            }
            interp.fresh(Value::list(out), span)
        }
        Method::Filter => {
            let mut out = Vec::new();
            for x in items {
                if bool_of(interp, &args[0], x.clone(), span)? {
                    out.push(x.clone());
                }
            }
            interp.fresh(Value::list(out), span)
        }
        Method::Fold => {
            let mut acc = args[0].clone();
            for x in items {
                acc = interp.call_value(&args[1], vec![acc, x.clone()], span)?;
            }
            Ok(acc)
        }
        Method::Any => {
            for x in items {
                if bool_of(interp, &args[0], x.clone(), span)? {
                    return Ok(Value::Bool(true));
                }
            }
            Ok(Value::Bool(false))
        }
        Method::All => {
            for x in items {
                if !bool_of(interp, &args[0], x.clone(), span)? {
                    return Ok(Value::Bool(false));
                }
            }
            Ok(Value::Bool(true))
        }
        Method::Find => {
            for x in items {
                if bool_of(interp, &args[0], x.clone(), span)? {
                    return opt(interp, Some(x.clone()), span);
                }
            }
            Ok(Value::None)
        }
        Method::Join => {
            let sep = match args.first() {
                Some(v) => want_str(v, "the separator", span)?.to_string(),
                None => String::new(),
            };
            let total: usize = items.len().saturating_mul(sep.len());
            interp.charge(total, span)?;
            for x in items {
                interp.charge_display(x, span)?;
            }
            let mut out = String::new();
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&sep);
                }
                interp.display_into(x, &mut out, true);
            }
            interp.string(out, span)
        }
        Method::Sorted => {
            let mut out = items.to_vec();
            sort_checked(&mut out, |v| v.clone(), span)?;
            interp.fresh(Value::list(out), span)
        }
        Method::SortedByKey => {
            let mut keyed = Vec::with_capacity(items.len());
            for x in items {
                let k = interp.call_value(&args[0], vec![x.clone()], span)?;
                keyed.push((k, x.clone()));
            }
            sort_checked(&mut keyed, |(k, _)| k.clone(), span)?;
            let out = keyed.into_iter().map(|(_, v)| v).collect();
            interp.fresh(Value::list(out), span)
        }
        Method::Reverse => {
            let out = items.iter().rev().cloned().collect();
            interp.fresh(Value::list(out), span)
        }
        Method::Contains => Ok(Value::Bool(items.iter().any(|x| value::equal(x, &args[0])))),
        Method::Concat => match &args[0] {
            Value::List(other) => {
                let mut out = items.to_vec();
                out.extend(other.items.iter().cloned());
                interp.fresh(Value::list(out), span)
            }
            other => Err(rt(
                format!("concat needs a list, found `{}`", other.type_name()),
                span,
            )),
        },
        _ => Err(no_method(&Value::List(Rc::default()), m, span)),
    }
}

/// Sorts by a key, failing (instead of panicking or ordering arbitrarily) on incomparable keys.
fn sort_checked<T>(items: &mut [T], key: impl Fn(&T) -> Value, span: Span) -> R<()> {
    let mut bad = None;
    items.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        match value::compare(&ka, &kb) {
            Some(o) => o,
            None => {
                bad.get_or_insert((ka.type_name(), kb.type_name()));
                std::cmp::Ordering::Equal
            }
        }
    });
    match bad {
        Some((a, b)) => Err(rt(
            format!("cannot sort: `{a}` and `{b}` do not compare"),
            span,
        )),
        None => Ok(()),
    }
}

fn map_method(
    interp: &mut Interp<'_>,
    entries: &BTreeMap<Rc<str>, Value>,
    m: Method,
    args: &[Value],
    span: Span,
) -> R {
    match m {
        Method::Len => Ok(Value::Int(entries.len() as i64)),
        Method::Get => {
            let k = want_str(&args[0], "the key", span)?;
            opt(interp, entries.get(k).cloned(), span)
        }
        Method::Keys => {
            let items = entries.keys().map(|k| Value::str(k)).collect();
            interp.fresh(Value::list(items), span)
        }
        Method::Values => {
            let items = entries.values().cloned().collect();
            interp.fresh(Value::list(items), span)
        }
        Method::ContainsKey | Method::Contains => {
            let k = want_str(&args[0], "the key", span)?;
            Ok(Value::Bool(entries.contains_key(k)))
        }
        _ => Err(no_method(&Value::Map(Rc::default()), m, span)),
    }
}

fn option_method(interp: &mut Interp<'_>, v: &Value, m: Method, args: Vec<Value>, span: Span) -> R {
    let (ctor, inner) = match v {
        Value::None => (Ctor::None, None),
        Value::Adt(a) => (a.ctor, a.fields.first().cloned()),
        _ => return Err(no_method(v, m, span)),
    };
    if let Ctor::User { .. } = ctor {
        return Err(rt(format!("a variant has no method `{}`", m.name()), span));
    }
    match m {
        Method::IsSome => Ok(Value::Bool(ctor == Ctor::Some)),
        Method::IsNone => Ok(Value::Bool(ctor == Ctor::None)),
        Method::IsOk => Ok(Value::Bool(ctor == Ctor::Ok)),
        Method::IsError => Ok(Value::Bool(ctor == Ctor::Error)),
        Method::Unwrap => match (ctor, inner) {
            (Ctor::Some | Ctor::Ok, Some(x)) => Ok(x),
            (Ctor::Error, Some(e)) => Err(rt(
                format!("called unwrap on Error({})", interp.display(&e)),
                span,
            )),
            _ => Err(rt("called unwrap on None", span)),
        },
        Method::UnwrapOr => match (ctor, inner) {
            (Ctor::Some | Ctor::Ok, Some(x)) => Ok(x),
            _ => Ok(args[0].clone()),
        },
        Method::Map => match (ctor, inner) {
            (Ctor::Some | Ctor::Ok, Some(x)) => {
                let y = interp.call_value(&args[0], vec![x], span)?;
                interp.fresh(Value::adt(ctor, vec![y]), span)
            }
            _ => Ok(v.clone()),
        },
        _ => Err(no_method(v, m, span)),
    }
}

/// Applies a mutating method (`push`, `pop`, `insert`, `remove`) to `target` in place.
pub(crate) fn mutate(
    interp: &mut Interp<'_>,
    target: &mut Value,
    m: Method,
    args: &[Value],
    span: Span,
) -> R {
    match (m, &mut *target) {
        (Method::Push, Value::List(l)) => {
            let d = args[0].depth() + 1;
            if d > value::MAX_VALUE_DEPTH {
                return Err(rt("value nested too deeply", span));
            }
            interp.charge(24, span)?;
            let list = Rc::make_mut(l);
            list.items.push(args[0].clone());
            list.depth = list.depth.max(d);
            Ok(Value::Unit)
        }
        (Method::Pop, Value::List(l)) => {
            let v = Rc::make_mut(l).items.pop();
            opt(interp, v, span)
        }
        (Method::Insert, Value::Map(map)) => {
            let k = want_str(&args[0], "the key", span)?;
            let d = args[1].depth() + 1;
            if d > value::MAX_VALUE_DEPTH {
                return Err(rt("value nested too deeply", span));
            }
            interp.charge(64 + k.len(), span)?;
            let map = Rc::make_mut(map);
            map.entries.insert(Rc::from(k), args[1].clone());
            map.depth = map.depth.max(d);
            Ok(Value::Unit)
        }
        (Method::Remove, Value::Map(map)) => {
            let k = want_str(&args[0], "the key", span)?;
            let v = Rc::make_mut(map).entries.remove(k);
            opt(interp, v, span)
        }
        (_, other) => {
            let other = other.clone();
            Err(no_method(&other, m, span))
        }
    }
}

/// The current UTC time as RFC 3339 (`2026-01-02T03:04:05Z`).
pub fn rfc3339_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    rfc3339(secs)
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC.
pub fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm), valid for the whole proleptic calendar.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A random (version 4) UUID. Randomness comes from the standard library's per-process hash
/// keys mixed with a counter and the clock: unique, not cryptographic.
pub fn uuid_v4() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let word = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u64(nanos);
        h.write_u64(salt);
        h.finish()
    };
    let (a, b) = (word(1), word(2));
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
