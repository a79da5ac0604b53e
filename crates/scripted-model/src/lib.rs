//! A scripted stand-in for a hosted model: answers `POST /v1/responses` (the OpenAI
//! Responses API, streamed as server-sent events) from a JSON script, routing each request to
//! the script's actor it belongs to. See the README for the script format and for how Codex
//! presents tools and tool outputs.

pub mod process;
pub mod script;
pub mod server;
pub mod sse;
