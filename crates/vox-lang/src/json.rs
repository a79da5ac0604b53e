//! Value ↔ JSON and input schemas (spec section 6).

use crate::hir::{Ctor, FnSig, Program, Ty, TypeShape};
use crate::interp::format_float;
use crate::value::{Func, TooDeep, Value};
use serde_json::{Map as JMap, Value as J, json};
use std::collections::BTreeMap;
use std::rc::Rc;

/// Converts a run-time value to JSON. `Some(v)`/`Ok(v)` unwrap to `v`, `None` and `()` are
/// `null`, a nested `Error(e)` is `{"error": e}`, user variants are
/// `{"variant": "Name", "fields": {…}}`. Functions and non-finite floats have no JSON form.
pub fn value_to_json(p: &Program, v: &Value) -> Result<J, String> {
    Ok(match v {
        Value::Unit | Value::None => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        // Exact: a JSON number would round it (real Vox sends `dec` as a string too).
        Value::Dec(d) => J::String(d.to_string()),
        Value::Regex(r) => r.to_json(),
        Value::Content(c) => c.0.clone(),
        Value::Float(f) => match serde_json::Number::from_f64(*f) {
            Some(n) => J::Number(n),
            None => {
                let mut s = String::new();
                format_float(*f, &mut s);
                return Err(format!("the float {s} has no JSON form"));
            }
        },
        Value::Str(s) => J::String(s.to_string()),
        Value::List(l) => J::Array(
            l.items
                .iter()
                .map(|x| value_to_json(p, x))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(m) => {
            let mut out = JMap::new();
            for (k, x) in &m.entries {
                out.insert(k.to_string(), value_to_json(p, x)?);
            }
            J::Object(out)
        }
        Value::Adt(a) => match a.ctor {
            Ctor::Some | Ctor::Ok => value_to_json(p, &a.fields[0])?,
            Ctor::Error => json!({ "error": value_to_json(p, &a.fields[0])? }),
            Ctor::None => J::Null,
            Ctor::User { ty, variant } => {
                let (name, names): (&str, Vec<&str>) = match &p.types[ty as usize].shape {
                    TypeShape::Adt { variants } => {
                        let v = &variants[variant as usize];
                        (&v.name, v.fields.iter().map(|(n, _)| n.as_str()).collect())
                    }
                    TypeShape::Record { .. } => (&p.types[ty as usize].name, Vec::new()),
                };
                let mut fields = JMap::new();
                for (i, x) in a.fields.iter().enumerate() {
                    let key = names
                        .get(i)
                        .map(|s| s.to_string())
                        .unwrap_or(format!("_{i}"));
                    fields.insert(key, value_to_json(p, x)?);
                }
                json!({ "variant": name, "fields": fields })
            }
        },
        Value::Func(f) => {
            let what = match &**f {
                Func::Fn(id) => format!("function `{}`", p.functions[*id as usize].name),
                _ => "function value".to_string(),
            };
            return Err(format!("a {what} has no JSON form"));
        }
    })
}

/// Converts JSON to a value without a declared type.
pub fn json_to_value(j: &J) -> Result<Value, TooDeep> {
    Ok(match j {
        J::Null => Value::None,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => Value::str(s),
        J::Array(items) => Value::list(items.iter().map(json_to_value).collect::<Result<_, _>>()?)?,
        J::Object(m) => {
            let mut entries = BTreeMap::new();
            for (k, x) in m {
                entries.insert(Rc::from(k.as_str()), json_to_value(x)?);
            }
            Value::map(entries)?
        }
    })
}

fn kind_of(j: &J) -> &'static str {
    match j {
        J::Null => "null",
        J::Bool(_) => "boolean",
        J::Number(n) if n.is_i64() || n.is_u64() => "integer",
        J::Number(_) => "number",
        J::String(_) => "string",
        J::Array(_) => "array",
        J::Object(_) => "object",
    }
}

fn too_deep(_: TooDeep) -> String {
    "value nested too deeply".to_string()
}

/// Converts a JSON argument to a value of the declared type; the error names the path
/// (`tags[2]`) and what was expected.
pub fn json_to_typed(p: &Program, j: &J, ty: &Ty, path: &str) -> Result<Value, String> {
    let mismatch = |want: &str| format!("`{path}` must be {want}, got {}", kind_of(j));
    match ty {
        Ty::Any | Ty::Fn { .. } | Ty::Result { .. } => json_to_value(j).map_err(too_deep),
        Ty::Int => match j.as_i64() {
            Some(i) if j.is_i64() || j.is_u64() => Ok(Value::Int(i)),
            _ => Err(mismatch("an integer")),
        },
        Ty::Float => match j {
            J::Number(n) => Ok(Value::Float(n.as_f64().unwrap_or(f64::NAN))),
            _ => Err(mismatch("a number")),
        },
        Ty::Dec => {
            let text = match j {
                J::String(s) => s.clone(),
                J::Number(n) => n.to_string(),
                _ => return Err(mismatch("a decimal number or a string of one")),
            };
            crate::decimal::Dec::parse(&text)
                .map(|d| Value::Dec(std::rc::Rc::new(d)))
                .ok_or_else(|| {
                    format!("`{path}` must be a decimal such as \"12.50\", got `{text}`")
                })
        }
        Ty::Str => match j {
            J::String(s) => Ok(Value::str(s)),
            _ => Err(mismatch("a string")),
        },
        Ty::Bool => match j {
            J::Bool(b) => Ok(Value::Bool(*b)),
            _ => Err(mismatch("a boolean")),
        },
        Ty::Unit => match j {
            J::Null => Ok(Value::Unit),
            _ => Err(mismatch("null")),
        },
        Ty::List { of } => match j {
            J::Array(items) => {
                let vals = items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| json_to_typed(p, x, of, &format!("{path}[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                Value::list(vals).map_err(too_deep)
            }
            _ => Err(mismatch("an array")),
        },
        Ty::Map { value, .. } => match j {
            J::Object(m) => {
                let mut entries = BTreeMap::new();
                for (k, x) in m {
                    entries.insert(
                        Rc::from(k.as_str()),
                        json_to_typed(p, x, value, &format!("{path}.{k}"))?,
                    );
                }
                Value::map(entries).map_err(too_deep)
            }
            _ => Err(mismatch("an object")),
        },
        Ty::Option { of } => match j {
            J::Null => Ok(Value::None),
            other => Value::some(json_to_typed(p, other, of, path)?).map_err(too_deep),
        },
        Ty::User { index, .. } => user_from_json(p, j, *index, path),
    }
}

/// A user type's JSON form is checked against its declaration. A record is an object with
/// exactly its fields (an `Option` field may be left out: it is `None`); an ADT value is
/// `{"variant": "Name", "fields": {…}}` with exactly that variant's fields (`fields` may be left
/// out when there are none, an `Option` field may be left out). Every error names the path of
/// the offending value (`order.lines[2].qty`, `shape.fields.w`).
fn user_from_json(p: &Program, j: &J, index: u32, path: &str) -> Result<Value, String> {
    let def = &p.types[index as usize];
    match &def.shape {
        TypeShape::Record { fields } => {
            let J::Object(m) = j else {
                return Err(format!(
                    "`{path}` must be an object (a `{}` record), got {}",
                    def.name,
                    kind_of(j)
                ));
            };
            let entries =
                fields_from_json(p, m, fields, path, &format!("a `{}` record", def.name))?;
            Value::map(entries).map_err(too_deep)
        }
        TypeShape::Adt { variants } => {
            let names = || {
                variants
                    .iter()
                    .map(|v| format!("`{}`", v.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            // A variant without fields may be given by its name alone (what an enum is).
            if let J::String(name) = j {
                return match variants
                    .iter()
                    .position(|v| v.name == *name && v.fields.is_empty())
                {
                    Some(vi) => Value::adt(
                        Ctor::User {
                            ty: index,
                            variant: vi as u32,
                        },
                        Vec::new(),
                    )
                    .map_err(too_deep),
                    None if variants.iter().any(|v| v.name == *name) => Err(format!(
                        "`{path}`: variant `{name}` of `{}` has fields; give it as {{\"variant\": \"{name}\", \"fields\": {{…}}}}",
                        def.name
                    )),
                    None => Err(format!(
                        "`{path}`: `{name}` is not a variant of `{}` without fields ({})",
                        def.name,
                        names()
                    )),
                };
            }
            let J::Object(m) = j else {
                return Err(format!(
                    "`{path}` must be a `{}` value, an object {{\"variant\": …, \"fields\": {{…}}}}, got {}",
                    def.name,
                    kind_of(j)
                ));
            };
            if let Some(k) = m
                .keys()
                .find(|k| !matches!(k.as_str(), "variant" | "fields"))
            {
                return Err(format!(
                    "`{path}` has an unknown key `{k}`: a `{}` value has only `variant` and `fields`",
                    def.name
                ));
            }
            let name = match m.get("variant") {
                Some(J::String(s)) => s.as_str(),
                Some(other) => {
                    return Err(format!(
                        "`{path}.variant` must be a string, got {}",
                        kind_of(other)
                    ));
                }
                None => {
                    return Err(format!(
                        "`{path}.variant` is missing (a variant of `{}`: {})",
                        def.name,
                        names()
                    ));
                }
            };
            let Some(vi) = variants.iter().position(|v| v.name == name) else {
                return Err(format!(
                    "`{path}`: `{name}` is not a variant of `{}` ({})",
                    def.name,
                    names()
                ));
            };
            let empty = JMap::new();
            let given = match m.get("fields") {
                None => &empty,
                Some(J::Object(f)) => f,
                Some(other) => {
                    return Err(format!(
                        "`{path}.fields` must be an object, got {}",
                        kind_of(other)
                    ));
                }
            };
            let variant = &variants[vi];
            let mut entries = fields_from_json(
                p,
                given,
                &variant.fields,
                &format!("{path}.fields"),
                &format!("variant `{name}`"),
            )?;
            // In declaration order, as the constructor takes them.
            let vals = variant
                .fields
                .iter()
                .map(|(f, _)| entries.remove(f.as_str()).unwrap_or(Value::None))
                .collect();
            Value::adt(
                Ctor::User {
                    ty: index,
                    variant: vi as u32,
                },
                vals,
            )
            .map_err(too_deep)
        }
    }
}

/// The declared fields of a record or variant from a JSON object: an unknown key, a missing
/// field that is not an `Option`, or a value of the wrong type is an error naming its path.
fn fields_from_json(
    p: &Program,
    given: &JMap<String, J>,
    fields: &[(String, Ty)],
    path: &str,
    what: &str,
) -> Result<BTreeMap<Rc<str>, Value>, String> {
    if let Some(k) = given.keys().find(|k| !fields.iter().any(|(f, _)| f == *k)) {
        let known: Vec<String> = fields.iter().map(|(f, _)| format!("`{f}`")).collect();
        let known = if known.is_empty() {
            "no fields".to_string()
        } else {
            format!("the fields {}", known.join(", "))
        };
        return Err(format!("`{path}.{k}` is not a field: {what} has {known}"));
    }
    let mut entries = BTreeMap::new();
    for (f, ty) in fields {
        let sub = format!("{path}.{f}");
        let v = match given.get(f) {
            Some(x) => json_to_typed(p, x, ty, &sub)?,
            None if matches!(ty, Ty::Option { .. }) => Value::None,
            None => return Err(format!("`{sub}` is missing ({what} requires it)")),
        };
        entries.insert(Rc::from(f.as_str()), v);
    }
    Ok(entries)
}

/// The JSON Schema dialect an input schema with `$defs` declares.
pub const SCHEMA_DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The definitions of the user types one schema refers to, keyed by the type's name in
/// snake case (`OrderLine` → `order_line`).
#[derive(Default)]
pub struct Defs {
    by_type: std::collections::HashMap<u32, String>,
    schemas: JMap<String, J>,
}

impl Defs {
    /// Whether no user type was referred to.
    pub fn is_empty(&self) -> bool {
        self.schemas.is_empty()
    }

    /// `$defs`.
    pub fn into_json(self) -> J {
        J::Object(self.schemas)
    }

    /// A reference to user type `index`, defining it first (once: a recursive type refers to
    /// itself).
    fn reference(&mut self, p: &Program, index: u32) -> J {
        if let Some(key) = self.by_type.get(&index) {
            return json!({"$ref": format!("#/$defs/{key}")});
        }
        let def = &p.types[index as usize];
        let mut key = snake_case(&def.name);
        if self.schemas.contains_key(&key) {
            key = format!("{key}_{index}");
        }
        self.by_type.insert(index, key.clone());
        self.schemas.insert(key.clone(), J::Null);
        let s = match &def.shape {
            TypeShape::Record { fields } => {
                let mut s = fields_schema(p, fields, self);
                s["description"] = J::String(format!("record `{}`", def.name));
                s
            }
            // Variants without fields only: an enum of their names.
            TypeShape::Adt { variants } if enum_names(&def.shape).is_some() => {
                let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
                json!({"type": "string", "enum": names, "description": format!("one variant of `{}`", def.name)})
            }
            TypeShape::Adt { variants } => {
                let one_of: Vec<J> = variants
                    .iter()
                    .map(|v| {
                        let fields = fields_schema(p, &v.fields, self);
                        let mut required = vec![json!("variant")];
                        if fields["required"].as_array().is_some_and(|r| !r.is_empty()) {
                            required.push(json!("fields"));
                        }
                        json!({
                            "type": "object",
                            "properties": {"variant": {"const": v.name}, "fields": fields},
                            "required": required,
                            "additionalProperties": false,
                        })
                    })
                    .collect();
                json!({"description": format!("one variant of `{}`", def.name), "oneOf": one_of})
            }
        };
        self.schemas.insert(key.clone(), s);
        json!({"$ref": format!("#/$defs/{key}")})
    }
}

/// The variant names of an ADT whose variants have no fields (an enum); `None` otherwise.
pub fn enum_names(shape: &TypeShape) -> Option<Vec<&str>> {
    match shape {
        TypeShape::Adt { variants }
            if !variants.is_empty() && variants.iter().all(|v| v.fields.is_empty()) =>
        {
            Some(variants.iter().map(|v| v.name.as_str()).collect())
        }
        _ => None,
    }
}

/// `OrderLine` → `order_line`.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() {
            if i > 0 && !out.ends_with('_') {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The JSON schema of a declared type: what [`json_to_typed`] accepts. A record is an object
/// with exactly its fields; an ADT value one of `{"variant": "Name", "fields": {…}}`; both are
/// defined once in `defs` and referred to (`{"$ref": "#/$defs/name"}`).
pub fn ty_schema(p: &Program, ty: &Ty, defs: &mut Defs) -> J {
    match ty {
        Ty::Int => json!({"type": "integer"}),
        Ty::Float => json!({"type": "number"}),
        Ty::Dec => json!({"type": ["string", "number"], "pattern": "^-?[0-9]+(\\.[0-9]+)?$"}),
        Ty::Str => json!({"type": "string"}),
        Ty::Bool => json!({"type": "boolean"}),
        Ty::Unit => json!({"type": "null"}),
        Ty::List { of } => {
            let items = ty_schema(p, of, defs);
            if items.as_object().is_some_and(|o| o.is_empty()) {
                json!({"type": "array"})
            } else {
                json!({"type": "array", "items": items})
            }
        }
        Ty::Map { value, .. } => {
            let v = ty_schema(p, value, defs);
            if v.as_object().is_some_and(|o| o.is_empty()) {
                json!({"type": "object"})
            } else {
                json!({"type": "object", "additionalProperties": v})
            }
        }
        // Advertised as its plain type: nullable types (`["string", "null"]`) are rejected or
        // warned about by some clients. `null` is still accepted, and an `Option` parameter
        // may be left out (see [`input_schema`]).
        Ty::Option { of } => ty_schema(p, of, defs),
        Ty::User { index, .. } => defs.reference(p, *index),
        Ty::Any | Ty::Result { .. } | Ty::Fn { .. } => json!({}),
    }
}

/// An object with exactly these fields; those that are not `Option`s are required.
fn fields_schema(p: &Program, fields: &[(String, Ty)], defs: &mut Defs) -> J {
    let mut props = JMap::new();
    let mut required = Vec::new();
    for (name, ty) in fields {
        props.insert(name.clone(), ty_schema(p, ty, defs));
        if !matches!(ty, Ty::Option { .. }) {
            required.push(J::String(name.clone()));
        }
    }
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

/// Whether a parameter may be left out: it has a default, or it is an `Option` (then it is
/// `None`).
pub fn is_optional_param(has_default: bool, ty: &Ty) -> bool {
    has_default || matches!(ty, Ty::Option { .. })
}

/// The input schema of a function: one property per parameter (record and ADT types in
/// `$defs`), `required` for those without
/// a default that are not `Option`s, no additional properties.
pub fn input_schema(p: &Program, sig: &FnSig) -> J {
    let mut props = JMap::new();
    let mut required = Vec::new();
    let mut defs = Defs::default();
    for prm in &sig.params {
        props.insert(prm.name.clone(), ty_schema(p, &prm.ty, &mut defs));
        if !is_optional_param(prm.has_default, &prm.ty) {
            required.push(J::String(prm.name.clone()));
        }
    }
    let mut schema = json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    });
    // Record and ADT parameters refer to their definitions, in the dialect MCP assumes,
    // declared because `$ref`/`$defs` need one.
    if !defs.is_empty() {
        schema["$schema"] = json!(SCHEMA_DIALECT);
        schema["$defs"] = defs.into_json();
    }
    schema
}
