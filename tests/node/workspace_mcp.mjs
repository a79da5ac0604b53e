// All of MCP from `.vox` files with the official TypeScript SDK client (@modelcontextprotocol/sdk,
// pinned in package.json; it speaks the 2025 era), over stdio (`vox mcp` with
// VOX_MCP_WORKSPACE_TOOLS=1, through the daemon socket) and Streamable HTTP (`vox serve --profile
// dev`'s /mcp with VOX_MCP_HTTP_WORKSPACE_TOOLS=1): progress and log built-ins, content blocks with
// a structured result, prompts with arguments (a Vox one and a skill), completions, a resource
// template read, elicitation accepted / declined / cancelled, sampling, cancelling a call while it
// waits for the user, and a subscribed resource announced when its file is saved.
//
// Run: npm ci --prefix tests/node && node tests/node/workspace_mcp.mjs [path/to/vox]

import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { resolve, join } from 'node:path';
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const VOX = resolve(process.argv[2] ?? 'target/debug/vox');
const TOKEN = 'node-sdk-test-token-0123456789abcdef';

const TOOLS = `
type Tone = | Formal | Friendly | Frank

@tool "Counts to three, reporting as it goes"
fn count() {
    log("info", "counting")
    progress(1, 3)
    progress(2, 3)
    progress(3, 3, "done")
    [content.text("counted to 3"), content.data({count: 3})]
}

@mcp.prompt "A letter in a tone"
fn letter(tone: Tone, city: str) to str {
    match tone {
        Formal => "Write formally to {city}."
        _ => "Write warmly to {city}."
    }
}

@complete("city")
fn cities(typed: str) to list[str] {
    ["paris", "park", "rome"].filter(c => c.starts_with(typed))
}

@mcp.resource("notes://{id}", "A note by id")
fn note(id: str) to str {
    "Note {id}"
}

@tool "Asks who you are"
fn who() to str {
    let r = elicit("Who are you?", {"properties": {"name": {"type": "string"}}, "required": ["name"]})
    if r.action == "accept" { "hello " + r.content.name } else { "no answer: " + r.action }
}

@tool "Reports progress around a question"
fn survey() to str {
    progress(1, 2, "asking")
    let r = elicit("Who are you?", {"properties": {"name": {"type": "string"}}, "required": ["name"]})
    progress(2, 2, "asked")
    "asked " + r.content.name
}

@tool "Asks the client's model"
fn think(q: str) to str {
    sample([{role: "user", content: q}], 20)
}
`;
const WATCHED = '@mcp.resource("docs://watched", "A watched note")\nfn watched() to str {\n    "FIRST"\n}\n';
const SKILL = '---\nname: triage\ndescription: Triage a change.\nmetadata:\n  vox-arguments: target\n---\nTriage {{target}}.\n';

function check(cond, what) {
  if (!cond) {
    console.log(`FAIL ${what}`);
    process.exit(1);
  }
  console.log(`ok   ${what}`);
}

function workspace(prefix) {
  const ws = mkdtempSync(join('/tmp', prefix));
  mkdirSync(join(ws, 'tools'));
  writeFileSync(join(ws, 'tools', 'all.vox'), TOOLS);
  writeFileSync(join(ws, 'tools', 'watched.vox'), WATCHED);
  mkdirSync(join(ws, '.vox', 'skills', 'triage'), { recursive: true });
  writeFileSync(join(ws, '.vox', 'skills', 'triage', 'SKILL.md'), SKILL);
  return ws;
}

function envFor(ws, home, extra) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VOX_')));
  return { ...env, VOX_HOME: home, VOX_WORKSPACE: ws, VOX_LOG: 'warn', ...extra };
}

/** The tool's str result (vox sends a value as its JSON text), or the error's text. */
function text(result) {
  const t = result.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
  try {
    const v = JSON.parse(t);
    return typeof v === 'string' ? v : t;
  } catch {
    return t;
  }
}

/** A client that answers elicitations and sampling from a script, and records what it hears. */
function scriptedClient() {
  const client = new Client(
    { name: 'vox-node-sdk-test', version: '1.0.0' },
    { capabilities: { elicitation: {}, sampling: {} } },
  );
  const heard = { logs: [], asked: [], updated: [], action: 'accept', hang: null };
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    heard.asked.push(req.params.message);
    if (heard.hang) {
      heard.hang();
      await new Promise(() => {}); // the user never answers
    }
    if (heard.action !== 'accept') return { action: heard.action };
    return { action: 'accept', content: { name: 'Ada' } };
  });
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
    role: 'assistant',
    model: 'scripted',
    content: { type: 'text', text: `thought about ${req.params.messages[0].content.text}` },
  }));
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => heard.logs.push(n.params.data));
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => heard.updated.push(n.params.uri));
  return { client, heard };
}

async function until(cond, ms) {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return cond();
}

async function exercise(transport, tag, ws) {
  const { client: c, heard } = scriptedClient();
  await c.connect(transport);
  await c.setLoggingLevel('info');

  let r = await c.callTool({ name: 'count', arguments: {} });
  check(!r.isError && r.content[0].text === 'counted to 3', `[${tag}] a tool's content blocks`);
  check(JSON.stringify(r.structuredContent) === '{"count":3}', `[${tag}] content.data is the structured result`);
  // The SDK handles notifications a microtask after a response read in the same chunk and drops
  // the progress handler on the response (typescript-sdk#2580): progress sent just before an
  // answer is lost by this client whatever the server does. This tool reports, then waits for
  // the user, so its first progress cannot race the answer.
  const seen = [];
  r = await c.callTool({ name: 'survey', arguments: {} }, undefined, { onprogress: (p) => seen.push(p) });
  check(!r.isError && text(r) === 'asked Ada', `[${tag}] a tool that reports progress: ${text(r)}`);
  check(seen[0]?.progress === 1 && seen[0]?.total === 2 && seen[0]?.message === 'asking',
    `[${tag}] progress from progress(): ${JSON.stringify(seen)}`);
  check(await until(() => heard.logs.includes('counting'), 2000), `[${tag}] a log message from log(): ${heard.logs}`);

  const prompts = Object.fromEntries((await c.listPrompts()).prompts.map((p) => [p.name, p]));
  check('letter' in prompts && 'triage' in prompts, `[${tag}] a Vox prompt and a skill prompt are listed`);
  check(prompts.letter.arguments.map((a) => `${a.name}:${a.required}`).join() === 'tone:true,city:true',
    `[${tag}] the Vox prompt's arguments come from its signature`);
  let got = await c.getPrompt({ name: 'letter', arguments: { tone: 'Formal', city: 'Rome' } });
  check(got.messages[0].content.text === 'Write formally to Rome.', `[${tag}] a prompt with arguments`);
  got = await c.getPrompt({ name: 'triage', arguments: { target: 'PR 9' } });
  check(got.messages[0].content.text.trim() === 'Triage PR 9.', `[${tag}] a skill's prompt with its argument`);

  const ref = { type: 'ref/prompt', name: 'letter' };
  let done = await c.complete({ ref, argument: { name: 'city', value: 'par' } });
  check(done.completion.values.join() === 'paris,park', `[${tag}] completion from @complete`);
  done = await c.complete({ ref, argument: { name: 'tone', value: 'Fr' } });
  check(done.completion.values.join() === 'Friendly,Frank', `[${tag}] completion from an enum parameter`);

  const templates = (await c.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  check(templates.join() === 'notes://{id}', `[${tag}] the resource template is listed: ${templates}`);
  const read = await c.readResource({ uri: 'notes://42' });
  check(read.contents[0].text === 'Note 42', `[${tag}] a template read`);

  r = await c.callTool({ name: 'who', arguments: {} });
  check(!r.isError && text(r) === 'hello Ada', `[${tag}] an accepted elicitation gives the answer: ${text(r)}`);
  for (const action of ['decline', 'cancel']) {
    heard.action = action;
    r = await c.callTool({ name: 'who', arguments: {} });
    check(!r.isError && text(r) === `no answer: ${action}`, `[${tag}] an elicitation answered ${action} says so`);
  }
  heard.action = 'accept';
  r = await c.callTool({ name: 'think', arguments: { q: 'tea' } });
  check(!r.isError && text(r) === 'thought about tea', `[${tag}] sampling gives the model's text: ${text(r)}`);

  // Cancel a call while its elicitation waits for the user: the SDK sends notifications/cancelled.
  const abort = new AbortController();
  const asking = new Promise((res) => { heard.hang = res; });
  const call = c.callTool({ name: 'who', arguments: {} }, undefined, { signal: abort.signal });
  await asking;
  heard.hang = null;
  abort.abort('the user walked away');
  const outcome = await call.then(() => 'answered', (e) => `rejected: ${e}`);
  check(outcome.startsWith('rejected'), `[${tag}] a cancelled call is abandoned by the client`);
  r = await c.callTool({ name: 'think', arguments: { q: 'again' } });
  check(!r.isError && text(r) === 'thought about again', `[${tag}] a call cancelled while waiting for the user frees the server`);

  // Subscribe, then save the resource's file: the workspace watcher announces it, no refresh call.
  const before = await c.readResource({ uri: 'docs://watched' });
  check(before.contents[0].text === 'FIRST', `[${tag}] the watched resource reads`);
  await c.subscribeResource({ uri: 'docs://watched' });
  writeFileSync(join(ws, 'tools', 'watched.vox'), WATCHED.replace('FIRST', 'SECOND'));
  check(await until(() => heard.updated.includes('docs://watched'), 10000),
    `[${tag}] a subscribed resource is announced when its file is saved: ${heard.updated}`);
  const after = await c.readResource({ uri: 'docs://watched' });
  check(after.contents[0].text === 'SECOND', `[${tag}] the update reads the saved file`);
  await c.close();
}

async function overStdio() {
  const ws = workspace('voxnode');
  const home = mkdtempSync(join('/tmp', 'voxnodeh'));
  const env = envFor(ws, home, { VOX_MCP_WORKSPACE_TOOLS: '1' });
  try {
    await exercise(new StdioClientTransport({ command: VOX, args: ['mcp'], cwd: ws, env, stderr: 'ignore' }), 'stdio', ws);
  } finally {
    spawnSync(VOX, ['daemon', 'stop'], { env: envFor(ws, home), cwd: ws });
    rmSync(ws, { recursive: true, force: true });
    rmSync(home, { recursive: true, force: true });
  }
}

async function overHttp() {
  const ws = workspace('voxnodew');
  const env = envFor(ws, join(ws, 'home'), {
    VOX_MCP_HTTP_PORT: '0', VOX_MCP_HTTP_BEARER_TOKEN: TOKEN, VOX_MCP_HTTP_WORKSPACE_TOOLS: '1',
  });
  const server = spawn(VOX, ['serve', '--profile', 'dev'], { env, cwd: ws, stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const line = await new Promise((res, rej) => {
      createInterface({ input: server.stdout }).once('line', res);
      server.once('exit', (code) => rej(new Error(`vox serve exited with ${code}`)));
    });
    const url = new URL(`http://${line.split('http://')[1].split(/\s/)[0]}/mcp`);
    const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } });
    await exercise(transport, '/mcp', ws);
  } finally {
    server.kill('SIGTERM');
    await new Promise((res) => (server.exitCode !== null ? res() : server.once('exit', res)));
    rmSync(ws, { recursive: true, force: true });
  }
}

check(spawnSync(VOX, ['--version']).status === 0, `vox binary at ${VOX}`);
await overStdio();
await overHttp();
