//! Tool handlers grouped by subsystem. A handler is an async function of the booted context,
//! the call ([`CallCtx`]: caller, cancellation, progress and log sinks) and its typed
//! arguments; it knows nothing of transports. Synchronous handlers run on the blocking pool
//! through [`blocking`] / [`typed`].

pub mod attention;
mod daemon;
mod lang;
mod memory;
mod repo;
pub mod search;
mod sessions;
mod skills;
mod workspace;

use crate::call::CallCtx;
use crate::orchestrator::{Ctx, ToolError};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What every handler returns.
pub type HandlerResult = Result<Value, ToolError>;

/// A handler's future: owned, so the deadline and the transport can drop it.
pub type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;

/// A handler: the booted context, the call, the raw arguments.
type HandlerFn = Box<dyn Fn(Arc<Ctx>, CallCtx, Value) -> HandlerFuture + Send + Sync>;

/// A handler with the input schema generated from its argument type.
pub struct HandlerEntry {
    pub schema: Value,
    pub call: HandlerFn,
}

/// Decodes arguments strictly: unknown fields are errors, and errors name the argument's path.
fn decode<A: DeserializeOwned>(args: Value) -> Result<A, ToolError> {
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            ToolError::InvalidArguments(format!("invalid arguments: {inner}"))
        } else {
            ToolError::InvalidArguments(format!("invalid argument `{path}`: {inner}"))
        }
    })
}

fn schema_of<A: JsonSchema>() -> Value {
    let mut schema =
        serde_json::to_value(schemars::schema_for!(A)).unwrap_or_else(|_| serde_json::json!({}));
    if let Some(obj) = schema.as_object_mut() {
        // Clients want a plain object schema; the meta-schema URI and Rust type name are noise.
        obj.remove("$schema");
        obj.remove("title");
        obj.entry("type").or_insert("object".into());
        obj.entry("properties").or_insert(serde_json::json!({}));
    }
    schema
}

/// An async handler: `f(ctx, call, args)` with typed arguments and the schema from their type.
fn async_typed<A, F, Fut>(f: F) -> HandlerEntry
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(Arc<Ctx>, CallCtx, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    let f = Arc::new(f);
    HandlerEntry {
        schema: schema_of::<A>(),
        call: Box::new(move |ctx, call, args| {
            let f = f.clone();
            Box::pin(async move { f(ctx, call, decode::<A>(args)?).await })
        }),
    }
}

/// Runs synchronous work (SQLite, tantivy, git, the interpreter, the sandbox) on the blocking
/// pool. The work cannot be dropped, so it checks `call.cancel` between its units.
pub async fn run_blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(r) => r,
        Err(join) => Err(ToolError::Internal(format!("the handler panicked: {join}"))),
    }
}

/// A synchronous handler that reads the call (its session, cancellation, progress, logs).
fn blocking<A: DeserializeOwned + JsonSchema + Send + 'static>(
    f: fn(&Ctx, &CallCtx, A) -> HandlerResult,
) -> HandlerEntry {
    async_typed::<A, _, _>(move |ctx, call, a| run_blocking(move || f(&ctx, &call, a)))
}

/// A synchronous handler of the context and its arguments alone.
fn typed<A: DeserializeOwned + JsonSchema + Send + 'static>(
    f: fn(&Ctx, A) -> HandlerResult,
) -> HandlerEntry {
    async_typed::<A, _, _>(move |ctx, _call, a| run_blocking(move || f(&ctx, a)))
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
