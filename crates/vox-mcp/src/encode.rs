//! The one place a [`ToolOutcome`] becomes wire bytes: an MCP `CallToolResult`, a REST status
//! and body, a `/v1/ws` frame. (On the daemon socket it travels as itself, by serde.)

use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use vox_core::ToolOutcome;
use vox_mcp_registry::DenialCode;

/// The HTTP status of an outcome: denials carry their spec status, tool errors their code's.
pub fn http_status(o: &ToolOutcome) -> u16 {
    match o {
        ToolOutcome::Ok(_) | ToolOutcome::Content(_) => 200,
        ToolOutcome::Denied(d) => d.code.http_status(),
        ToolOutcome::Failed(e) => e.http_status(),
    }
}

/// The `type` of the block a Vox tool's `content.data(value)` makes (`vox_lang::content::
/// STRUCTURED`; a workspace e2e test holds the two together): the call's structured result.
pub const STRUCTURED_BLOCK: &str = "structured";

/// An outcome as an MCP call result. Denials and tool failures are results with
/// `isError: true`; only an unknown tool (under `dev`) is a protocol error, as MCP prescribes.
/// A `content.data` block among content blocks is the result's `structuredContent`.
pub fn call_result(outcome: ToolOutcome) -> Result<CallToolResult, McpError> {
    if let ToolOutcome::Denied(d) = &outcome
        && d.code == DenialCode::UnknownTool
    {
        return Err(McpError::invalid_params(
            d.message.clone(),
            Some(d.to_json()),
        ));
    }
    if let ToolOutcome::Content(blocks) = outcome {
        // `content.data`'s block is the structured result, the others the content.
        let (data, blocks): (Vec<Value>, Vec<Value>) = blocks
            .into_iter()
            .partition(|b| b["type"] == STRUCTURED_BLOCK);
        // Made by `content.*`, so well formed; a block rmcp cannot read is our bug, said so.
        let mut content = blocks
            .into_iter()
            .map(serde_json::from_value::<rmcp::model::ContentBlock>)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| McpError::internal_error(format!("a content block: {e}"), None))?;
        let Some(mut data) = data.into_iter().next() else {
            return Ok(CallToolResult::success(content));
        };
        let structured = data["structured"].take();
        // Clients that read only content see the data too, as MCP asks.
        if content.is_empty() {
            content.push(rmcp::model::ContentBlock::text(structured.to_string()));
        }
        let structured = if structured.is_object() {
            structured
        } else {
            json!({ "result": structured })
        };
        let mut result = CallToolResult::structured(structured);
        result.content = content;
        return Ok(result);
    }
    let is_error = outcome.is_error();
    let structured = match outcome {
        ToolOutcome::Ok(v) => v,
        other => other.to_json(),
    };
    // MCP's structuredContent is an object: a workspace tool's bare value (a number, a string)
    // is wrapped as {"result": v}; the text block carries the value as it was.
    let text = structured.to_string();
    let structured = if structured.is_object() {
        structured
    } else {
        json!({ "result": structured })
    };
    let mut result = if is_error {
        CallToolResult::structured_error(structured)
    } else {
        CallToolResult::structured(structured)
    };
    result.content = vec![rmcp::model::ContentBlock::text(text)];
    Ok(result)
}

/// A failed prompt get (`{"code", "message"}` of a [`vox_core::ToolError`]) as MCP says:
/// an unknown prompt or bad arguments are invalid params, anything else an internal error.
pub fn prompt_error(e: &Value) -> McpError {
    let message = e["message"].as_str().unwrap_or("prompt failed").to_owned();
    match e["code"].as_str() {
        Some("not_found" | "invalid_arguments") => {
            McpError::invalid_params(message, Some(json!({"error": e})))
        }
        _ => McpError::internal_error(message, Some(json!({"error": e}))),
    }
}

/// `POST /v1/tools/call`: the status and `{"result": v}` or the one error shape.
pub fn rest(outcome: ToolOutcome) -> (u16, Value) {
    let status = http_status(&outcome);
    let body = match outcome {
        ToolOutcome::Ok(v) => json!({"result": v}),
        ToolOutcome::Content(_) => json!({"result": outcome.to_json()}),
        other => other.to_json(),
    };
    (status, body)
}

/// A `/v1/ws` `call_tool` answer for request `id`.
pub fn ws(id: Value, outcome: ToolOutcome) -> Value {
    let status = http_status(&outcome);
    match outcome {
        ToolOutcome::Content(_) => {
            json!({"id": id, "type": "call_tool_result", "is_error": false, "result": outcome.to_json()})
        }
        ToolOutcome::Ok(v) => {
            json!({"id": id, "type": "call_tool_result", "is_error": false, "result": v})
        }
        ToolOutcome::Failed(e) => {
            json!({"id": id, "type": "call_tool_result", "is_error": true, "status": status, "result": e.to_json()})
        }
        ToolOutcome::Denied(d) => {
            let mut v = d.to_json();
            v["id"] = id;
            v["type"] = json!("error");
            v["status"] = json!(status);
            v
        }
    }
}

/// Tool descriptors (MCP field names, as the orchestrator builds them: `inputSchema`, and
/// `outputSchema` where the tool has one) as rmcp tools.
pub fn tools(descriptors: Value) -> Result<Vec<rmcp::model::Tool>, McpError> {
    serde_json::from_value(descriptors)
        .map_err(|e| McpError::internal_error(format!("malformed tool descriptors: {e}"), None))
}

/// Resource descriptors (MCP field names) as rmcp resources.
pub fn resources(descriptors: Value) -> Result<Vec<rmcp::model::Resource>, McpError> {
    serde_json::from_value(descriptors)
        .map_err(|e| McpError::internal_error(format!("malformed resources: {e}"), None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vox_core::ToolError;
    use vox_mcp_registry::Denial;

    #[test]
    fn every_encoding_agrees_on_status_and_shape() {
        let cases = [
            (ToolOutcome::Ok(json!({"a": 1})), 200, false),
            (ToolOutcome::Failed(ToolError::not_found("gone")), 404, true),
            (
                ToolOutcome::Denied(Denial::new(DenialCode::ExposureDenied, "no")),
                403,
                true,
            ),
        ];
        for (o, status, is_error) in cases {
            let (s, body) = rest(o.clone());
            assert_eq!(s, status);
            let frame = ws(json!(7), o.clone());
            assert_eq!(frame["id"], 7);
            let mcp = call_result(o.clone()).unwrap();
            assert_eq!(mcp.is_error, Some(is_error));
            if is_error {
                assert_eq!(body["error"]["code"], o.to_json()["error"]["code"]);
                assert_eq!(frame["status"], status);
            }
        }
    }

    #[test]
    fn content_blocks_are_the_mcp_content_and_the_rest_and_ws_result() {
        let blocks = vec![
            json!({"type": "text", "text": "Here:"}),
            json!({"type": "image", "data": "AAEC", "mimeType": "image/png"}),
        ];
        let o = ToolOutcome::Content(blocks.clone());
        let mcp = call_result(o.clone()).unwrap();
        assert_eq!(mcp.is_error, Some(false));
        assert_eq!(serde_json::to_value(&mcp.content).unwrap(), json!(blocks));
        assert_eq!(mcp.structured_content, None);
        assert_eq!(
            rest(o.clone()),
            (200, json!({"result": {"content": blocks}}))
        );
        let frame = ws(json!(1), o);
        assert_eq!(
            (&frame["is_error"], &frame["result"]["content"]),
            (&json!(false), &json!(blocks))
        );
    }

    #[test]
    fn tool_descriptors_keep_their_output_schema() {
        let out = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let listed = tools(json!([
            {"name": "a", "inputSchema": {"type": "object"}, "outputSchema": out},
            {"name": "b", "inputSchema": {"type": "object"}},
        ]))
        .unwrap();
        assert_eq!(
            listed[0]
                .output_schema
                .as_deref()
                .cloned()
                .map(Value::Object),
            Some(out)
        );
        assert!(listed[1].output_schema.is_none());
    }

    #[test]
    fn an_unknown_tool_is_a_protocol_error_and_bare_values_are_wrapped() {
        let unknown = ToolOutcome::Denied(Denial::new(DenialCode::UnknownTool, "no tool x"));
        assert!(call_result(unknown).is_err());
        let r = call_result(ToolOutcome::Ok(json!(3))).unwrap();
        assert_eq!(r.structured_content, Some(json!({"result": 3})));
    }
}
