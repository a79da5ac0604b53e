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
    pub name: &'static str,
    /// The contract steps this family performs (each step belongs to exactly one family).
    pub steps: Vec<(BootStep, StepFn)>,
    /// Its tools, by catalog name.
    pub handlers: Vec<(&'static str, HandlerEntry)>,
    /// Runs after every boot step, for state no contract step owns (the skill catalog).
    pub after_boot: Option<fn(&mut Ctx)>,
    /// Runs once the context is shared (background work such as a file watcher).
    pub on_started: Option<fn(Arc<Ctx>)>,
}

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
pub fn decode<A: DeserializeOwned>(args: Value) -> Result<A, ToolError> {
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

pub fn schema_of<A: JsonSchema>() -> Value {
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
pub fn async_typed<A, F, Fut>(f: F) -> HandlerEntry
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
pub fn blocking<A: DeserializeOwned + JsonSchema + Send + 'static>(
    f: fn(&Ctx, &CallCtx, A) -> HandlerResult,
) -> HandlerEntry {
    async_typed::<A, _, _>(move |ctx, call, a| run_blocking(move || f(&ctx, &call, a)))
}

/// A synchronous handler of the context and its arguments alone.
pub fn typed<A: DeserializeOwned + JsonSchema + Send + 'static>(
    f: fn(&Ctx, A) -> HandlerResult,
) -> HandlerEntry {
    async_typed::<A, _, _>(move |ctx, _call, a| run_blocking(move || f(&ctx, a)))
}

/// A synchronous handler that is quick and bounded (a SQLite point lookup by key): it runs on
/// the async worker itself when `inline(ctx)` says nothing it needs is busy, and on the
/// blocking pool otherwise. The hand-off to the blocking pool costs two thread wake-ups, more
/// than such a call's own work; but a worker must never wait behind a long write or scan, so
/// `inline` checks (e.g. that no long store operation is under way). Anything that can take longer
/// than a point read must use [`typed`].
pub fn quick<A: DeserializeOwned + JsonSchema + Send + 'static>(
    f: fn(&Ctx, A) -> HandlerResult,
    inline: fn(&Ctx) -> bool,
) -> HandlerEntry {
    HandlerEntry {
        schema: schema_of::<A>(),
        call: Box::new(move |ctx, _call, args| {
            if inline(&ctx) {
                let out = decode::<A>(args).and_then(|a| f(&ctx, a));
                Box::pin(std::future::ready(out))
            } else {
                Box::pin(async move {
                    let a = decode::<A>(args)?;
                    run_blocking(move || f(&ctx, a)).await
                })
            }
        }),
    }
}
