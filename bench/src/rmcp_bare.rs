//! `rmcp-bare`: the smallest rmcp stdio server, the baseline vox's stdio round trip is compared
//! with in the same run:
//!
//! ```text
//! mcp-bench --calls 5000 --tool echo --args '{"key":"k"}' -- target/release/rmcp-bare
//! ```
//!
//! It serves `tools/list` (one tool) and `tools/call` of `echo`, which returns its arguments as
//! structured content plus the same JSON as a text block. Nothing else: no logging, no
//! resources, no state. Like `vox mcp` it runs on one thread over rmcp's stdio transport
//! (the same `tokio::io` stdin and stdout handles `vox mcp` uses).
//!
//! `rmcp-bare --tools N` also lists N tools shaped like vox's workspace tools (a title, a
//! description, a two-property schema, annotations and two `_meta` entries): the peer of vox's
//! `tools/list` of thousands of tools.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::sync::Arc;

struct Bare {
    tools: Vec<Tool>,
}

impl ServerHandler for Bare {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("rmcp-bare", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "echo" {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {}", request.name),
                None,
            ));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        Ok(CallToolResult::structured(args).into())
    }
}

fn echo_tool() -> Tool {
    let schema = json!({"type": "object", "additionalProperties": true});
    let Value::Object(schema) = schema else {
        unreachable!("the schema is an object")
    };
    Tool::new("echo", "Returns its arguments.", Arc::new(schema))
}

/// A tool shaped like one of vox's workspace tools.
fn listed_tool(i: usize) -> Tool {
    let Value::Object(schema) = json!({
        "type": "object", "additionalProperties": false, "required": ["a"],
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
    }) else {
        unreachable!("the schema is an object")
    };
    let name = format!("tool_{i}");
    let mut t = Tool::new(name.clone(), format!("Tool number {i}"), Arc::new(schema));
    t.title = Some(name);
    t.annotations = Some(
        rmcp::model::ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .open_world(false),
    );
    let mut meta = rmcp::model::JsonObject::new();
    meta.insert(
        "vox_file".into(),
        json!(format!("tools/t{:03}.vox", i / 50)),
    );
    meta.insert("vox_source".into(), json!("workspace"));
    t.meta = Some(rmcp::model::MetaObject(meta));
    t
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let extra = match args.as_slice() {
        [] => 0,
        [flag, n] if flag == "--tools" => match n.parse::<usize>() {
            Ok(n) => n,
            Err(e) => {
                eprintln!("rmcp-bare: --tools {n}: {e}");
                std::process::exit(2);
            }
        },
        _ => {
            eprintln!("usage: rmcp-bare [--tools N]");
            std::process::exit(2);
        }
    };
    let mut tools = vec![echo_tool()];
    tools.extend((0..extra).map(listed_tool));
    let server = Bare { tools };
    let service = match server.serve(rmcp::transport::stdio()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rmcp-bare: session failed to start: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = service.waiting().await {
        eprintln!("rmcp-bare: session ended with an error: {e}");
        std::process::exit(1);
    }
}
