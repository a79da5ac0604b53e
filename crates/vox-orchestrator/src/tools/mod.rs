//! Tool handlers grouped by subsystem. A handler is a plain function of the booted context and
//! its typed arguments; it knows nothing of transports.

pub mod attention;
mod daemon;
mod lang;
mod memory;
mod repo;
pub mod search;
mod sessions;
mod skills;
mod workspace;

use crate::orchestrator::{Ctx, ToolError};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Who a handler runs for: the session key and the agent of the `CallScope`.
pub struct CallSession {
    pub key: String,
    pub agent: String,
}

/// A handler: the context, the calling session, the arguments.
type HandlerFn = Box<dyn Fn(&Ctx, &CallSession, Value) -> Result<Value, ToolError> + Send + Sync>;

/// A handler with the input schema generated from its argument type.
pub struct HandlerEntry {
    pub schema: Value,
    pub call: HandlerFn,
}

/// Wraps a typed handler: arguments are decoded strictly (unknown fields are errors, and
/// errors name the argument's path), and the schema comes from the same type.
fn typed<A: DeserializeOwned + JsonSchema + 'static>(
    f: fn(&Ctx, A) -> Result<Value, ToolError>,
) -> HandlerEntry {
    entry::<A>(move |ctx, _session, a| f(ctx, a))
}

/// [`typed`] for a handler that needs the calling session (`vox_skill_use`, `vox_skill_info`).
fn typed_in_session<A: DeserializeOwned + JsonSchema + 'static>(
    f: fn(&Ctx, &CallSession, A) -> Result<Value, ToolError>,
) -> HandlerEntry {
    entry::<A>(f)
}

fn entry<A: DeserializeOwned + JsonSchema + 'static>(
    f: impl Fn(&Ctx, &CallSession, A) -> Result<Value, ToolError> + Send + Sync + 'static,
) -> HandlerEntry {
    let mut schema =
        serde_json::to_value(schemars::schema_for!(A)).unwrap_or_else(|_| serde_json::json!({}));
    if let Some(obj) = schema.as_object_mut() {
        // Clients want a plain object schema; the meta-schema URI and Rust type name are noise.
        obj.remove("$schema");
        obj.remove("title");
        obj.entry("type").or_insert("object".into());
        obj.entry("properties").or_insert(serde_json::json!({}));
    }
    HandlerEntry {
        schema,
        call: Box::new(move |ctx, session, args| {
            let a: A = serde_path_to_error::deserialize(args).map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner();
                if path == "." {
                    ToolError::InvalidArguments(format!("invalid arguments: {inner}"))
                } else {
                    ToolError::InvalidArguments(format!("invalid argument `{path}`: {inner}"))
                }
            })?;
            f(ctx, session, a)
        }),
    }
}

/// Checks a bounded, non-empty string argument.
fn bounded(name: &str, v: &str, max: usize) -> Result<(), ToolError> {
    if v.trim().is_empty() {
        return Err(ToolError::InvalidArguments(format!(
            "`{name}` must not be empty"
        )));
    }
    if v.len() > max {
        return Err(ToolError::InvalidArguments(format!(
            "`{name}` is {} bytes; the limit is {max}",
            v.len()
        )));
    }
    Ok(())
}

/// Every handler this build has, by tool name.
pub fn handlers() -> Vec<(&'static str, HandlerEntry)> {
    let mut all = Vec::new();
    all.extend(memory::handlers());
    all.extend(sessions::handlers());
    all.extend(attention::handlers());
    all.extend(daemon::handlers());
    all.extend(search::handlers());
    all.extend(repo::handlers());
    all.extend(lang::handlers());
    all.extend(workspace::handlers());
    all.extend(skills::handlers());
    all
}
