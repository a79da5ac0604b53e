//! Output contracts for codex-mmo: a deliberately small, offline JSON Schema subset.
//!
//! The subset is closed: schemas are first checked here, keyword by keyword, so an unsupported
//! keyword, any `$ref`, a vocabulary or an unknown dialect is a pack error (a general engine
//! would ignore or support it). Instances are then validated by the `jsonschema` crate, built
//! offline with format assertion on and the subset's `uri`, `date` and `date-time` checks
//! registered as its formats; its errors are mapped to findings carrying the instance pointer,
//! the schema pointer and a stable rule id.

pub mod correlate;
pub mod format;
mod project;

pub use project::{project_output_schema, projection_problems};

use serde_json::{Value, json};

/// Every keyword the subset admits.
pub const KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "uniqueItems",
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
];
/// `$schema` values accepted as dialect labels (no vocabulary is loaded for either).
pub const DIALECTS: &[&str] = &[
    "https://json-schema.org/draft/2020-12/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-07/schema",
];
/// Supported `format` values (each checked by its entry in [`FORMAT_CHECKS`]).
pub const FORMATS: &[&str] = &["uri", "date", "date-time"];
const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// A problem with a schema itself (a pack error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaProblem {
    /// JSON pointer into the schema.
    pub pointer: String,
    /// Stable rule id.
    pub rule: &'static str,
    pub message: String,
}

/// An instance failing a contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceError {
    /// JSON pointer into the instance.
    pub instance_pointer: String,
    /// JSON pointer into the schema of the failing keyword.
    pub schema_pointer: String,
    /// Stable rule id, `contract_instance_<keyword>` (e.g. `contract_instance_required`).
    pub rule: &'static str,
    pub message: String,
}

pub(crate) fn esc(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// Check that a value is a contract: a schema of the subset that the validator accepts.
/// Returns every subset problem (or, when there are none, the validator's objection).
pub fn check_schema(schema: &Value) -> Vec<SchemaProblem> {
    match compile(schema) {
        Ok(_) => Vec::new(),
        Err(problems) => problems,
    }
}

/// The subset check alone: every keyword, value, dialect and pattern, with JSON pointers.
fn check_schema_subset(schema: &Value) -> Vec<SchemaProblem> {
    let mut out = Vec::new();
    if !schema.is_object() {
        out.push(SchemaProblem {
            pointer: String::new(),
            rule: "contract_not_object",
            message: "a contract is a JSON object schema".into(),
        });
        return out;
    }
    check(schema, "", true, &mut out);
    if out.is_empty() {
        // Only a schema of the subset is walked for satisfiability.
        project::unsatisfiable_required(schema, "", &mut out);
    }
    out
}

fn push(out: &mut Vec<SchemaProblem>, pointer: String, rule: &'static str, message: String) {
    out.push(SchemaProblem {
        pointer,
        rule,
        message,
    });
}

fn check(s: &Value, ptr: &str, root: bool, out: &mut Vec<SchemaProblem>) {
    let obj = match s {
        Value::Bool(_) => return,
        Value::Object(o) => o,
        _ => {
            push(
                out,
                ptr.into(),
                "contract_keyword_value",
                "a subschema is an object or a boolean".into(),
            );
            return;
        }
    };
    for (k, v) in obj {
        let p = format!("{ptr}/{}", esc(k));
        if !KEYWORDS.contains(&k.as_str()) {
            let (rule, why) = match k.as_str() {
                "$ref" | "$dynamicRef" | "$recursiveRef" => (
                    "contract_ref",
                    "references are not supported; no schema is ever loaded",
                ),
                "$vocabulary" => ("contract_vocabulary", "vocabularies are not loaded"),
                _ => (
                    "contract_unsupported_keyword",
                    "not in the supported subset",
                ),
            };
            push(out, p, rule, format!("`{k}`: {why}"));
            continue;
        }
        let problem: Option<&str> = match k.as_str() {
            "$schema" if !root => Some("belongs at the contract root"),
            "$schema" => {
                if !v.as_str().is_some_and(|d| DIALECTS.contains(&d)) {
                    push(
                        out,
                        p.clone(),
                        "contract_dialect",
                        format!("unsupported dialect {v}; use {}", DIALECTS[0]),
                    );
                }
                None
            }
            "$id" | "title" | "description" => (!v.is_string()).then_some("must be a string"),
            "type" => {
                let ok = match v {
                    Value::String(t) => TYPES.contains(&t.as_str()),
                    Value::Array(a) => {
                        !a.is_empty()
                            && a.iter()
                                .all(|t| t.as_str().is_some_and(|t| TYPES.contains(&t)))
                            && a.iter().enumerate().all(|(i, t)| !a[..i].contains(t))
                    }
                    _ => false,
                };
                (!ok).then_some("must be a type name or a non-empty array of distinct type names")
            }
            "properties" => match v.as_object() {
                Some(props) => {
                    for (name, sub) in props {
                        check(sub, &format!("{p}/{}", esc(name)), false, out);
                    }
                    None
                }
                None => Some("must be an object of schemas"),
            },
            "required" => {
                let ok = v.as_array().is_some_and(|a| {
                    a.iter().all(Value::is_string)
                        && a.iter().enumerate().all(|(i, t)| !a[..i].contains(t))
                });
                (!ok).then_some("must be an array of distinct strings")
            }
            "items" if v.is_array() => Some("in tuple form is not in the subset"),
            "additionalProperties" | "items" | "not" | "if" | "then" | "else" => {
                check(v, &p, false, out);
                None
            }
            "enum" => v
                .as_array()
                .is_none_or(|a| a.is_empty())
                .then_some("must be a non-empty array"),
            "const" => None,
            "minLength" | "maxLength" | "minItems" | "maxItems" => {
                (v.as_u64().is_none()).then_some("must be a non-negative integer")
            }
            "minimum" | "maximum" => (!v.is_number()).then_some("must be a number"),
            "uniqueItems" => (!v.is_boolean()).then_some("must be a boolean"),
            "pattern" => match v.as_str() {
                Some(re) => {
                    if !pattern_compiles(re) {
                        push(
                            out,
                            p.clone(),
                            "contract_pattern",
                            format!(
                                "pattern /{re}/ is not an ECMA-262 regular expression the \
                                 validator can compile (look-around and back-references are \
                                 not supported)"
                            ),
                        );
                    }
                    None
                }
                None => Some("must be a string"),
            },
            "format" => match v.as_str() {
                Some(f) if FORMATS.contains(&f) => None,
                Some(f) => {
                    push(
                        out,
                        p.clone(),
                        "contract_format_unsupported",
                        format!("format `{f}` is not supported (uri, date, date-time)"),
                    );
                    None
                }
                None => Some("must be a string"),
            },
            "oneOf" | "anyOf" | "allOf" => match v.as_array() {
                Some(a) if !a.is_empty() => {
                    for (i, sub) in a.iter().enumerate() {
                        check(sub, &format!("{p}/{i}"), false, out);
                    }
                    None
                }
                _ => Some("must be a non-empty array of schemas"),
            },
            _ => None,
        };
        if let Some(m) = problem {
            push(out, p, "contract_keyword_value", format!("`{k}` {m}"));
        }
    }
}

/// A checked contract, ready to validate instances.
///
/// The subset check above decides what a contract may say; instance validation is the
/// `jsonschema` crate's, built offline (no retriever can fetch anything, and the subset admits
/// no `$ref`), with format assertion on and the subset's three formats checked by [`format`].
#[derive(Debug, Clone)]
pub struct Contract {
    schema: Value,
    validator: jsonschema::Validator,
}

/// A format name and the check that asserts it.
pub type FormatCheck = (&'static str, fn(&str) -> bool);

/// The subset's formats, checked by this crate's RFC 3986/3339 functions (registered with the
/// engine in place of its built-in checks of the same names).
pub const FORMAT_CHECKS: &[FormatCheck] = &[
    ("uri", format::is_uri),
    ("date", format::is_date),
    ("date-time", format::is_date_time),
];

/// The engine's options: offline, formats asserted, unknown formats refused, the subset's three
/// formats checked by [`FORMAT_CHECKS`], and `pattern` compiled by the `regex` engine.
fn engine_options() -> jsonschema::ValidationOptions<'static> {
    engine_options_with(FORMAT_CHECKS)
}

fn engine_options_with(formats: &[FormatCheck]) -> jsonschema::ValidationOptions<'static> {
    let mut options = jsonschema::options()
        .offline()
        .should_validate_formats(true)
        .should_ignore_unknown_formats(false)
        .with_pattern_options(jsonschema::PatternOptions::regex());
    for (name, check) in formats {
        options = options.with_format(*name, *check);
    }
    options
}

/// Whether the engine compiles `re` as a `pattern`: it reads patterns as ECMA-262 and translates
/// them for the `regex` engine, so this, not the `regex` crate's own syntax, decides.
fn pattern_compiles(re: &str) -> bool {
    engine_options().build(&json!({ "pattern": re })).is_ok()
}

/// Check a schema against the subset, then build the engine's validator from it.
fn compile(schema: &Value) -> Result<jsonschema::Validator, Vec<SchemaProblem>> {
    let problems = check_schema_subset(schema);
    if !problems.is_empty() {
        return Err(problems);
    }
    engine_options().build(schema).map_err(|e| {
        // A build error on a schema the subset admits is either the engine's meta-schema check
        // (its instance is the schema, so the instance path points into the contract) or a
        // keyword it cannot compile (located by the schema path).
        let at = if e.instance_path().is_empty() {
            e.schema_path().as_str().to_string()
        } else {
            e.instance_path().as_str().to_string()
        };
        let rule = match e.kind() {
            jsonschema::error::ValidationErrorKind::Format { format } if format == "regex" => {
                "contract_pattern"
            }
            _ => "contract_engine_rejected",
        };
        vec![SchemaProblem {
            pointer: at,
            rule,
            message: format!("the validator rejects this schema: {}", e.masked()),
        }]
    })
}

impl Contract {
    /// Check `schema` against the subset and build its validator.
    pub fn new(schema: Value) -> Result<Contract, Vec<SchemaProblem>> {
        let validator = compile(&schema)?;
        Ok(Contract { schema, validator })
    }

    /// The schema as written.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Validate an instance; returns every failing keyword (empty = valid).
    pub fn validate(&self, instance: &Value) -> Vec<InstanceError> {
        if self.validator.is_valid(instance) {
            return Vec::new();
        }
        let mut out = Vec::new();
        for e in self.validator.iter_errors(instance) {
            push_instance_errors(&e, &mut out);
        }
        out
    }

    /// Whether an instance is valid.
    pub fn is_valid(&self, instance: &Value) -> bool {
        self.validator.is_valid(instance)
    }
}

/// The stable rule id of an instance failure: `contract_instance_<keyword>`.
fn instance_rule(kind: &jsonschema::error::ValidationErrorKind) -> &'static str {
    use jsonschema::error::ValidationErrorKind as K;
    match kind {
        K::Type { .. } => "contract_instance_type",
        K::Required { .. } => "contract_instance_required",
        K::AdditionalProperties { .. } => "contract_instance_additional_properties",
        K::Enum { .. } => "contract_instance_enum",
        K::Constant { .. } => "contract_instance_const",
        K::MinLength { .. } => "contract_instance_min_length",
        K::MaxLength { .. } => "contract_instance_max_length",
        K::Pattern { .. } | K::BacktrackLimitExceeded { .. } | K::RegexEngineFailure { .. } => {
            "contract_instance_pattern"
        }
        K::Format { .. } => "contract_instance_format",
        K::Minimum { .. } => "contract_instance_minimum",
        K::Maximum { .. } => "contract_instance_maximum",
        K::MinItems { .. } => "contract_instance_min_items",
        K::MaxItems { .. } => "contract_instance_max_items",
        K::UniqueItems => "contract_instance_unique_items",
        K::AnyOf { .. } => "contract_instance_any_of",
        K::OneOfNotValid { .. } | K::OneOfMultipleValid { .. } => "contract_instance_one_of",
        K::Not { .. } => "contract_instance_not",
        K::FalseSchema => "contract_instance_false_schema",
        // Keywords outside the subset never reach the engine (the subset check refuses them).
        _ => "contract_instance_invalid",
    }
}

fn push_instance_errors(e: &jsonschema::ValidationError<'_>, out: &mut Vec<InstanceError>) {
    use jsonschema::error::ValidationErrorKind as K;
    let instance_pointer = e.instance_path().as_str();
    let schema_pointer = e.schema_path().as_str();
    let rule = instance_rule(e.kind());
    match e.kind() {
        // The engine reports extra properties once, at the object; a finding per property,
        // located at the property itself, is what a reader (and a repair prompt) needs.
        K::AdditionalProperties { unexpected } => {
            for k in unexpected {
                out.push(InstanceError {
                    instance_pointer: format!("{instance_pointer}/{}", esc(k)),
                    schema_pointer: schema_pointer.to_string(),
                    rule,
                    message: format!("property `{k}` is not allowed"),
                });
            }
        }
        K::Required { property } => out.push(InstanceError {
            instance_pointer: instance_pointer.to_string(),
            schema_pointer: schema_pointer.to_string(),
            rule,
            message: match property.as_str() {
                Some(p) => format!("missing required property `{p}`"),
                None => format!("missing required property {property}"),
            },
        }),
        kind => out.push(InstanceError {
            instance_pointer: instance_pointer.to_string(),
            schema_pointer: schema_pointer.to_string(),
            rule,
            message: instance_message(kind),
        }),
    }
}

/// A message that names the constraint but never repeats the instance, which may be large.
fn instance_message(kind: &jsonschema::error::ValidationErrorKind) -> String {
    use jsonschema::error::ValidationErrorKind as K;
    match kind {
        K::Type { kind } => match kind {
            jsonschema::error::TypeKind::Single(t) => format!("expected {t}"),
            jsonschema::error::TypeKind::Multiple(ts) => {
                let names: Vec<String> = ts.iter().map(|t| t.to_string()).collect();
                format!("expected {}", names.join(" or "))
            }
        },
        K::Enum { .. } => "value is not one of the enumerated values".into(),
        K::Constant { expected_value } => format!("expected the constant {expected_value}"),
        K::MinLength { limit } => format!("fewer than {limit} characters"),
        K::MaxLength { limit } => format!("more than {limit} characters"),
        K::Pattern { pattern } => format!("does not match /{pattern}/"),
        K::Format { format } => format!("not a valid {format}"),
        K::Minimum { limit } => format!("below the minimum {limit}"),
        K::Maximum { limit } => format!("above the maximum {limit}"),
        K::MinItems { limit } => format!("fewer than {limit} items"),
        K::MaxItems { limit } => format!("more than {limit} items"),
        K::UniqueItems => "items are not unique".into(),
        K::AnyOf { .. } => "matches none of the alternatives".into(),
        K::OneOfNotValid { .. } => {
            "matches none of the alternatives; exactly one is required".into()
        }
        K::OneOfMultipleValid { .. } => {
            "matches more than one alternative; exactly one is required".into()
        }
        K::Not { .. } => "matches a schema it must not match".into(),
        K::FalseSchema => "no value is allowed here".into(),
        other => format!("fails `{}`", other.keyword()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_format_checks_replace_the_engines_builtins() {
        let schema = json!({"format": "date-time"});
        let instance = json!("2026-11-29T18:00:00Z");
        let reject_all: &[FormatCheck] = &[("date-time", |_| false)];
        let overridden = engine_options_with(reject_all).build(&schema);
        assert!(overridden.is_ok_and(|v| !v.is_valid(&instance)));
        let ours = engine_options().build(&schema);
        assert!(ours.is_ok_and(|v| v.is_valid(&instance)));
    }

    #[test]
    fn every_supported_format_has_a_registered_check() {
        let names: Vec<&str> = FORMAT_CHECKS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, FORMATS);
    }
}
