// A deliberately misbehaving MCP server for vox's upstream fault tests (written here, on the
// official TypeScript SDK). `node faulty.mjs <dir>`: its tools are those of <dir>/tools.json
// ({"name": "description", ...}), read again at every tools/list; and these, always:
//   reload  -> tells the client its tool list changed (after the test edited tools.json)
//   hang    -> never answers
//   flood   -> writes one 8 MiB line of garbage to stdout instead of an answer
//   garbage -> writes a line that is not JSON-RPC, then answers
//   echo    -> answers {"text": <its "text" argument>}
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { ListToolsRequestSchema, CallToolRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { readFileSync } from "node:fs";

const dir = process.argv[2];
const server = new Server({ name: "faulty", version: "1.0.0" }, { capabilities: { tools: { listChanged: true } } });
const object = { type: "object", properties: { text: { type: "string" } } };

server.setRequestHandler(ListToolsRequestSchema, async () => {
  const extra = JSON.parse(readFileSync(`${dir}/tools.json`, "utf8"));
  const fixed = ["reload", "hang", "flood", "garbage", "echo"].map((name) => ({ name, description: name, inputSchema: object }));
  return { tools: [...fixed, ...Object.entries(extra).map(([name, description]) => ({ name, description, inputSchema: object }))] };
});

server.setRequestHandler(CallToolRequestSchema, async (req) => {
  const name = req.params.name;
  if (name === "reload") {
    await server.sendToolListChanged();
    return { content: [{ type: "text", text: "reloaded" }] };
  }
  if (name === "hang") return new Promise(() => {});
  if (name === "flood") {
    process.stdout.write("x".repeat(8 * 1024 * 1024) + "\n");
    return new Promise(() => {});
  }
  if (name === "garbage") process.stdout.write("this is not JSON-RPC\n");
  return { content: [{ type: "text", text: String(req.params.arguments?.text ?? name) }] };
});

await server.connect(new StdioServerTransport());
