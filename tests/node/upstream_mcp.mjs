// Upstream MCP servers behind vox with the official TypeScript SDK client (pinned in
// package.json): the npm reference `server-everything` declared in `.vox/servers.toml`, reached
// through `vox mcp` (stdio): its tools listed as `every__<tool>` with `_meta` saying where they
// are from, a call, progress, the server's sampling and elicitation requests answered by this
// client, a resource read and a prompt got through vox, and the tools/list_changed and
// prompts/list_changed it hears when a server is added to servers.toml.
//
// Run: npm ci --prefix tests/node && npm ci --prefix tests/upstream && node tests/node/upstream_mcp.mjs [path/to/vox]

import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  PromptListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const VOX = resolve(process.argv[2] ?? 'target/debug/vox');
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const EVERYTHING = join(ROOT, 'tests/upstream/node_modules/.bin/mcp-server-everything');

function check(cond, what) {
  if (!cond) {
    console.log(`FAIL ${what}`);
    process.exit(1);
  }
  console.log(`ok   ${what}`);
}

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
}

async function until(cond, ms) {
  const end = Date.now() + ms;
  while (!(await cond()) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
  return cond();
}

function servers(extra) {
  return `[servers.every]\ncommand = ${JSON.stringify(EVERYTHING)}\nargs = ["stdio"]\n${extra}`;
}

if (!existsSync(EVERYTHING)) {
  check(!process.env.CI, 'tests/upstream/node_modules (npm ci --prefix tests/upstream)');
  console.log('skipped: tests/upstream/node_modules is missing');
  process.exit(0);
}
check(spawnSync(VOX, ['--version']).status === 0, `vox binary at ${VOX}`);
const ws = mkdtempSync(join('/tmp', 'voxnodeup'));
const home = mkdtempSync(join('/tmp', 'voxnodeuph'));
mkdirSync(join(ws, '.vox'));
writeFileSync(join(ws, '.vox', 'servers.toml'), servers(''));
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VOX_')));
Object.assign(env, { VOX_HOME: home, VOX_WORKSPACE: ws, VOX_LOG: 'warn' });

const c = new Client({ name: 'vox-node-upstream-test', version: '1.0.0' }, { capabilities: { elicitation: {}, sampling: {} } });
const heard = { sampled: [], elicited: [], changed: 0, prompts: 0 };
c.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  heard.sampled.push(req.params.messages[0].content.text);
  return { role: 'assistant', model: 'scripted', content: { type: 'text', text: 'a sampled answer' } };
});
c.setRequestHandler(ElicitRequestSchema, async (req) => {
  heard.elicited.push(req.params.message);
  return { action: 'decline' };
});
c.setNotificationHandler(ToolListChangedNotificationSchema, () => { heard.changed += 1; });
c.setNotificationHandler(PromptListChangedNotificationSchema, () => { heard.prompts += 1; });
try {
  await c.connect(new StdioClientTransport({ command: VOX, args: ['mcp'], cwd: ws, env, stderr: 'ignore' }));
  const names = async () => (await c.listTools()).tools.map((t) => t.name);
  check(await until(async () => (await names()).includes('every__echo'), 20000), 'every__echo is listed');
  const echo = (await c.listTools()).tools.find((t) => t.name === 'every__echo');
  check(echo._meta?.vox_source === 'upstream' && echo._meta?.vox_server === 'every', '_meta says where it is from');
  let r = await c.callTool({ name: 'every__echo', arguments: { message: 'from node' } });
  check(!r.isError && text(r).includes('Echo: from node'), `a call through vox: ${text(r)}`);
  const seen = [];
  r = await c.callTool({ name: 'every__trigger-long-running-operation', arguments: { duration: 1, steps: 3 } },
    undefined, { onprogress: (p) => seen.push(p) });
  check(!r.isError && seen.length >= 2, `the server's progress reaches the client (${seen.length})`);
  r = await c.callTool({ name: 'every__trigger-sampling-request', arguments: { prompt: 'tea', maxTokens: 10 } });
  check(!r.isError && text(r).includes('a sampled answer') && heard.sampled.length === 1, 'sampling answered by this client');
  r = await c.callTool({ name: 'every__trigger-elicitation-request', arguments: {} });
  check(!r.isError && heard.elicited.length === 1, 'elicitation reaches this client');
  const resources = (await c.listResources()).resources.filter((x) => x.uri.startsWith('upstream://every/'));
  check(resources.length > 0, `its resources under upstream://every/ (${resources.length})`);
  const read = await c.readResource({ uri: resources[0].uri });
  check(read.contents.length === 1, 'a resource read through vox');
  const got = await c.getPrompt({ name: 'every__args-prompt', arguments: { city: 'Lyon' } });
  check(JSON.stringify(got.messages).includes('Lyon'), 'a prompt got through vox');

  // A second server declared while the session runs: vox starts it and says the list changed.
  writeFileSync(join(ws, '.vox', 'servers.toml'), servers(`[servers.more]\ncommand = ${JSON.stringify(EVERYTHING)}\nargs = ["stdio"]\n`));
  check(await until(async () => heard.changed > 0 && (await names()).includes('more__echo'), 20000),
    `a server added to servers.toml is served, and list_changed heard (${heard.changed})`);
  check(await until(async () => heard.prompts > 0 && (await c.listPrompts()).prompts.some((p) => p.name === 'more__simple-prompt'), 20000),
    `and its prompts, with prompts/list_changed (${heard.prompts})`);
  await c.close();
} finally {
  spawnSync(VOX, ['daemon', 'stop'], { env, cwd: ws });
  rmSync(ws, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
}
