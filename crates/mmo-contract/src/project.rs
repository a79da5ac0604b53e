//! The strict `outputSchema` projection and the checks that it can be satisfied.
//!
//! A projection that contradicts its contract fails every strict answer: Codex makes the model
//! produce what the projection admits, and the original contract then rejects it. So a
//! contract whose projection would admit no answer the contract accepts (beyond the empty
//! object) fails pack validation instead of compiling.

use crate::{SchemaProblem, esc};
use serde_json::{Map, Value};

/// Keywords kept in the transport projection: shape, not validation.
const SHAPE_KEYWORDS: &[&str] = &["type", "title", "description", "enum", "const"];

/// An object schema merged with its `allOf` branches (recursively): an instance must satisfy
/// every branch, so every branch's required names are required of it, and a property schema
/// from any branch describes that property.
#[derive(Default)]
struct Shape<'a> {
    /// Property name, its schema and that schema's pointer; the first one seen wins.
    properties: Vec<(&'a str, &'a Value, String)>,
    /// Required name and the pointer of its `required` entry, in order of appearance.
    required: Vec<(&'a str, String)>,
}

impl<'a> Shape<'a> {
    fn of(o: &'a Map<String, Value>, ptr: &str) -> Shape<'a> {
        let mut s = Shape::default();
        s.merge(o, ptr);
        s
    }

    fn merge(&mut self, o: &'a Map<String, Value>, ptr: &str) {
        if let Some(Value::Object(props)) = o.get("properties") {
            for (k, v) in props {
                if !self.properties.iter().any(|(n, _, _)| *n == k.as_str()) {
                    self.properties
                        .push((k.as_str(), v, format!("{ptr}/properties/{}", esc(k))));
                }
            }
        }
        if let Some(Value::Array(req)) = o.get("required") {
            for (i, r) in req.iter().enumerate() {
                if let Some(r) = r.as_str() {
                    self.required.push((r, format!("{ptr}/required/{i}")));
                }
            }
        }
        if let Some(Value::Array(branches)) = o.get("allOf") {
            for (i, b) in branches.iter().enumerate() {
                if let Some(bo) = b.as_object() {
                    self.merge(bo, &format!("{ptr}/allOf/{i}"));
                }
            }
        }
    }

    fn property(&self, name: &str) -> Option<&(&'a str, &'a Value, String)> {
        self.properties.iter().find(|(n, _, _)| *n == name)
    }

    /// Required names that have a property schema, each once, with that schema.
    fn kept(&self) -> Vec<(&'a str, &'a Value, &str)> {
        let mut out: Vec<(&'a str, &'a Value, &str)> = Vec::new();
        for (r, _) in &self.required {
            if out.iter().any(|(n, _, _)| n == r) {
                continue;
            }
            if let Some((_, v, p)) = self.property(r) {
                out.push((r, v, p.as_str()));
            }
        }
        out
    }
}

/// Whether the projection treats `o` as an object schema.
fn is_object(o: &Map<String, Value>, shape: &Shape<'_>) -> bool {
    !shape.properties.is_empty()
        || match o.get("type") {
            Some(Value::String(t)) => t == "object",
            Some(Value::Array(a)) => a.iter().any(|t| t == "object"),
            _ => false,
        }
}

/// The strict `outputSchema` projection sent to Codex in `turn/start`.
///
/// Closed objects and required properties are kept, including the required names and property
/// schemas of `allOf` branches, which are merged into their object (an instance must satisfy
/// every branch). Optional properties are dropped because Codex strict schemas require every
/// advertised property, which would force a value where the contract permits omission. Every
/// object is closed, since strict mode needs that and a closed answer still satisfies an open
/// contract. Validation-only keywords and `not`/`if`/`then`/`else` are dropped; `oneOf` becomes
/// `anyOf`, which admits a superset. The original contract is still what validates the answer;
/// [`projection_problems`] says when the projection would contradict it.
pub fn project_output_schema(schema: &Value) -> Value {
    let Some(o) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for k in SHAPE_KEYWORDS {
        if let Some(v) = o.get(*k) {
            out.insert((*k).to_string(), v.clone());
        }
    }
    let shape = Shape::of(o, "");
    if is_object(o, &shape) {
        let mut kept = Map::new();
        let mut kept_req = Vec::new();
        for (name, sub, _) in shape.kept() {
            kept.insert(name.to_string(), project_output_schema(sub));
            kept_req.push(Value::String(name.to_string()));
        }
        out.insert("properties".into(), Value::Object(kept));
        out.insert("required".into(), Value::Array(kept_req));
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    if let Some(items) = o.get("items") {
        out.insert("items".into(), project_output_schema(items));
    }
    let alts = o.get("anyOf").or_else(|| o.get("oneOf"));
    if let Some(Value::Array(a)) = alts {
        out.insert(
            "anyOf".into(),
            Value::Array(a.iter().map(project_output_schema).collect()),
        );
    }
    Value::Object(out)
}

/// Where the strict projection of `schema` would contradict it, each with its JSON pointer:
///
/// - `contract_projection_required`: a required name (of the object or of one of its `allOf`
///   branches) has no schema under the merged `properties`, so the projection cannot advertise
///   it and every strict answer would lack it. (When the object is closed the contract itself
///   is unsatisfiable, which [`crate::check_schema`] reports as `contract_required_unsatisfiable`.)
/// - `contract_projection_empty`: the root object requires no property, so the projection
///   admits only `{}` (properties required only inside `anyOf`/`oneOf`/`if` are not projected).
///
/// Only contracts that are projected (strict roles on models with structured output) need this.
pub fn projection_problems(schema: &Value) -> Vec<SchemaProblem> {
    let mut out = Vec::new();
    walk_projection(schema, "", true, &mut out);
    out
}

fn walk_projection(s: &Value, ptr: &str, root: bool, out: &mut Vec<SchemaProblem>) {
    let Some(o) = s.as_object() else {
        return;
    };
    let shape = Shape::of(o, ptr);
    if is_object(o, &shape) {
        let closed = o.get("additionalProperties") == Some(&Value::Bool(false));
        let mut reported = Vec::new();
        for (name, rptr) in &shape.required {
            if shape.property(name).is_none() && !closed && !reported.contains(name) {
                reported.push(*name);
                out.push(SchemaProblem {
                    pointer: rptr.clone(),
                    rule: "contract_projection_required",
                    message: format!(
                        "`{name}` is required but has no schema under properties (or an allOf \
                         branch's properties): the strict projection cannot advertise it, so \
                         every strict answer would lack it and fail the contract"
                    ),
                });
            }
        }
        let kept = shape.kept();
        if root && kept.is_empty() {
            out.push(SchemaProblem {
                pointer: ptr.to_string(),
                rule: "contract_projection_empty",
                message: "the strict projection of this object admits only `{}`: it requires no \
                          property at its top level (optional properties, and those required \
                          only inside anyOf/oneOf/if/then/else, are not projected); require the \
                          properties a strict answer must carry"
                    .into(),
            });
        }
        for (_, sub, pptr) in kept {
            walk_projection(sub, pptr, false, out);
        }
    }
    if let Some(items) = o.get("items") {
        walk_projection(items, &format!("{ptr}/items"), false, out);
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(Value::Array(a)) = o.get(k) {
            for (i, b) in a.iter().enumerate() {
                walk_projection(b, &format!("{ptr}/{k}/{i}"), false, out);
            }
        }
    }
}

/// Report every closed object (`additionalProperties: false`) requiring a name that neither its
/// `properties` nor those of its `allOf` branches define: no instance can satisfy it.
/// `not` and `if` are not walked, since an unsatisfiable schema there is meaningful.
pub(crate) fn unsatisfiable_required(s: &Value, ptr: &str, out: &mut Vec<SchemaProblem>) {
    let Some(o) = s.as_object() else {
        return;
    };
    if o.get("additionalProperties") == Some(&Value::Bool(false)) {
        let shape = Shape::of(o, ptr);
        let mut reported = Vec::new();
        for (name, rptr) in &shape.required {
            if shape.property(name).is_none() && !reported.contains(name) {
                reported.push(*name);
                out.push(SchemaProblem {
                    pointer: rptr.clone(),
                    rule: "contract_required_unsatisfiable",
                    message: format!(
                        "`{name}` is required but not under properties while \
                         additionalProperties is false: no instance satisfies this object"
                    ),
                });
            }
        }
    }
    if let Some(Value::Object(props)) = o.get("properties") {
        for (k, v) in props {
            unsatisfiable_required(v, &format!("{ptr}/properties/{}", esc(k)), out);
        }
    }
    for k in ["items", "additionalProperties", "then", "else"] {
        if let Some(v) = o.get(k) {
            unsatisfiable_required(v, &format!("{ptr}/{k}"), out);
        }
    }
    for k in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(a)) = o.get(k) {
            for (i, b) in a.iter().enumerate() {
                unsatisfiable_required(b, &format!("{ptr}/{k}/{i}"), out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(v: &[SchemaProblem]) -> Vec<String> {
        v.iter()
            .map(|p| format!("{} {}", p.pointer, p.rule))
            .collect()
    }

    #[test]
    fn all_of_required_names_are_merged_into_the_projection() {
        let c = json!({
            "type": "object", "additionalProperties": false,
            "properties": {"a": {"type": "string"}},
            "allOf": [{"required": ["a"]}, {"properties": {"b": {"type": "integer"}}, "required": ["b"]}]
        });
        let p = project_output_schema(&c);
        assert_eq!(p["required"], json!(["a", "b"]));
        assert_eq!(p["properties"]["b"], json!({"type": "integer"}));
        assert!(projection_problems(&c).is_empty());
    }

    #[test]
    fn projection_problems_name_their_pointers() {
        let c = json!({
            "type": "object",
            "required": ["a", "ghost"],
            "properties": {
                "a": {"type": "object", "required": ["x"], "properties": {}},
                "list": {"type": "array"}
            }
        });
        assert_eq!(
            rules(&projection_problems(&c)),
            [
                "/required/1 contract_projection_required",
                "/properties/a/required/0 contract_projection_required"
            ]
        );
        let empty = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert_eq!(
            rules(&projection_problems(&empty)),
            [" contract_projection_empty"]
        );
        // A root that is not an object (an array of verdicts) has no empty-object problem.
        assert!(
            projection_problems(&json!({"type": "array", "items": {"type": "string"}})).is_empty()
        );
    }

    #[test]
    fn closed_objects_requiring_undefined_names_are_unsatisfiable_anywhere() {
        let c = json!({
            "type": "object",
            "properties": {"a": {"type": "array", "items": {
                "type": "object", "additionalProperties": false, "required": ["x"]
            }}},
            "anyOf": [{"additionalProperties": false, "required": ["y"], "properties": {"y": true}}],
            "not": {"additionalProperties": false, "required": ["z"]}
        });
        let mut out = Vec::new();
        unsatisfiable_required(&c, "", &mut out);
        assert_eq!(
            rules(&out),
            ["/properties/a/items/required/0 contract_required_unsatisfiable"]
        );
    }
}
