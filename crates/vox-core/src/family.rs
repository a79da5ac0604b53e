//! A tool family is one module outside the core: its boot steps (functions it registers
//! against the contract's [`BootStep`]s), its state (put into the [`Ctx`] at boot), its
//! handlers and, where it needs them, hooks into the call path ([`Hooks`]). The core knows
//! families only through [`Family`]; adding one changes nothing here.
//!
//! A handler is an async function of the booted context, the call ([`CallCtx`]: caller,
//! cancellation, progress and log sinks) and its typed arguments; it knows nothing of
//! transports. Synchronous handlers run on the blocking pool through [`blocking`] / [`typed`]
//! and check `call.cancel` between their units of work.

use crate::call::CallCtx;
use crate::ctx::Ctx;
use crate::error::ToolError;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use vox_mcp_registry::BootStep;

/// What a boot step did.
pub enum StepDone {
    /// The subsystem is up; the detail says how.
    Ready(String),
    /// The subsystem has no tools in this build: nothing was started, and the boot report
    /// says so (`placeholder`) instead of claiming it is up.
    Placeholder(&'static str),
}

/// One boot step's work: it may put state into the context and register hooks.
pub type StepFn = fn(&mut Ctx) -> Result<StepDone, String>;

/// A boot step that starts nothing: its subsystem's tools have not landed.
pub fn placeholder(_ctx: &mut Ctx) -> Result<StepDone, String> {
    Ok(StepDone::Placeholder("no tools in this build"))
}

/// One tool family, as it registers itself.
#[derive(Default)]
pub struct Family {
    /// The family's name, for logs and errors.
    pub name: &'static str,
    /// The contract steps this family performs (each step belongs to exactly one family).
    pub steps: Vec<(BootStep, StepFn)>,
    /// Its tools, by catalog name.
    pub handlers: Vec<(&'static str, HandlerEntry)>,
    /// Runs after every boot step, for state no contract step owns (the skill catalog).
    pub after_boot: Option<fn(&mut Ctx)>,
    /// Runs once the context is shared (background work such as a file watcher).
    pub on_started: Option<fn(Arc<Ctx>)>,
    /// Runs when the daemon stops, before it lets go of its workspace: what the family started
    /// outside this process must end here (processes it runs).
    pub on_stopping: Option<fn(&Ctx)>,
}

/// What a handler's future yields once its typed result is encoded.
pub type HandlerResult = Result<Value, ToolError>;

/// A handler's future: owned, so the deadline and the transport can drop it.
pub type HandlerFuture = Pin<Box<dyn Future<Output = HandlerResult> + Send>>;

/// A handler: the booted context, the call, the raw arguments.
type HandlerFn = Box<dyn Fn(Arc<Ctx>, CallCtx, Value) -> HandlerFuture + Send + Sync>;

/// A handler with the input schema generated from its argument type and the output schema
/// from its result type.
pub struct HandlerEntry {
    /// The input schema (a JSON Schema object), generated from the argument type.
    pub schema: Value,
    /// The MCP `outputSchema` (an object schema); `None` when the result type does not say
    /// what an answer looks like.
    pub output_schema: Option<Value>,
    /// Decodes the arguments and runs the handler.
    pub call: HandlerFn,
}

pub use tool_schema::{object_root, output_schema_of, portability_problems, portable, schema_of};

/// Decodes arguments strictly ([`tool_schema::decode`]: unknown fields are errors, errors name
/// the argument's path, a top-level `null` is a left-out argument) into the tool error clients
/// get for bad arguments.
pub fn decode<A: DeserializeOwned>(args: Value) -> Result<A, ToolError> {
    tool_schema::decode(args).map_err(|e| ToolError::invalid_arguments(e.message))
}

/// Encodes a handler's typed result.
fn encode<R: Serialize>(r: Result<R, ToolError>) -> HandlerResult {
    serde_json::to_value(r?)
        .map_err(|e| ToolError::internal(format!("the result cannot be encoded: {e}")))
}

/// An async handler: `f(ctx, call, args)` with typed arguments and a typed result; the input
/// schema comes from the argument type, the output schema from the result type.
pub fn async_typed<A, R, F, Fut>(f: F) -> HandlerEntry
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    R: Serialize + JsonSchema + 'static,
    F: Fn(Arc<Ctx>, CallCtx, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
{
    let f = Arc::new(f);
    HandlerEntry {
        schema: schema_of::<A>(),
        output_schema: output_schema_of::<R>(),
        call: Box::new(move |ctx, call, args| {
            let f = f.clone();
            Box::pin(async move { encode(f(ctx, call, decode::<A>(args)?).await) })
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
        Err(join) => Err(ToolError::internal(format!("the handler panicked: {join}"))),
    }
}

/// A synchronous handler that reads the call (its session, cancellation, progress, logs).
pub fn blocking<A, R>(f: fn(&Ctx, &CallCtx, A) -> Result<R, ToolError>) -> HandlerEntry
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    R: Serialize + JsonSchema + Send + 'static,
{
    async_typed::<A, R, _, _>(move |ctx, call, a| run_blocking(move || f(&ctx, &call, a)))
}

/// A synchronous handler of the context and its arguments alone.
pub fn typed<A, R>(f: fn(&Ctx, A) -> Result<R, ToolError>) -> HandlerEntry
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    R: Serialize + JsonSchema + Send + 'static,
{
    async_typed::<A, R, _, _>(move |ctx, _call, a| run_blocking(move || f(&ctx, a)))
}

/// A synchronous handler that is quick and bounded (a SQLite point lookup or a one-row write,
/// reading the call if it needs to): it runs on
/// the async worker itself when `inline(ctx)` says nothing it needs is busy, and on the
/// blocking pool otherwise. The hand-off to the blocking pool costs two thread wake-ups, more
/// than such a call's own work; but a worker must never wait behind a long write or scan, so
/// `inline` checks (e.g. that no long store operation is under way). Anything that can take longer
/// than a point read must use [`typed`].
pub fn quick<A, R>(
    f: fn(&Ctx, &CallCtx, A) -> Result<R, ToolError>,
    inline: fn(&Ctx) -> bool,
) -> HandlerEntry
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    R: Serialize + JsonSchema + Send + 'static,
{
    HandlerEntry {
        schema: schema_of::<A>(),
        output_schema: output_schema_of::<R>(),
        call: Box::new(move |ctx, call, args| {
            if inline(&ctx) {
                let out = decode::<A>(args).and_then(|a| f(&ctx, &call, a));
                Box::pin(std::future::ready(encode(out)))
            } else {
                Box::pin(async move {
                    let a = decode::<A>(args)?;
                    encode(run_blocking(move || f(&ctx, &call, a)).await)
                })
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Args {
        key: String,
        range: Option<Range>,
    }

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Range {
        from: u32,
    }

    /// Bad arguments are the `invalid_arguments` tool error, naming the argument's path
    /// (tool-schema's tests cover decoding itself).
    #[test]
    fn bad_arguments_are_an_invalid_arguments_error_naming_the_path() {
        let e = decode::<Args>(json!({"key": "k", "range": {"from": "x"}})).unwrap_err();
        assert_eq!(e.code(), "invalid_arguments");
        assert!(e.message().contains("`range.from`"), "{e}");
        let e = decode::<Args>(json!({"key": "k", "extra": 1})).unwrap_err();
        assert!(e.message().contains("extra"), "{e}");
    }
}
