// `vox serve` as an OAuth 2.1 resource server with the official TypeScript SDK client (pinned in
// package.json) and a real authorization server (npm oidc-provider, tests/oauth/authz_server.mjs):
// the static bearer token beside OAuth; StreamableHTTPClientTransport with an OAuthClientProvider
// doing authorization code + PKCE + dynamic registration (the person is `ada`: the provider's
// redirectToAuthorization follows the authorization server's redirects, keeping its cookies, up to
// the redirect_uri), then finishAuth(code) and a new connection that lists the tools and calls
// one; and the SDK's ClientCredentialsProvider.
//
// Run: npm ci --prefix tests/node && npm ci --prefix tests/oauth && node tests/node/oauth_mcp.mjs [path/to/vox]

import { spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const VOX = resolve(process.argv[2] ?? 'target/debug/vox');
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const AUTHZ_SERVER = join(ROOT, 'tests/oauth/authz_server.mjs');
const STATIC = 'node-static-write-token-0123456789';
const CC = { id: 'vox-cc', secret: `vox-cc-secret-${randomBytes(12).toString('base64url')}` };
const RS = { id: 'vox-rs', secret: `vox-rs-secret-${randomBytes(12).toString('base64url')}` };
const KNOWLEDGE_TOOLS = 17;
const REDIRECT_URI = 'http://127.0.0.1:47612/callback'; // nothing listens: the provider stops there

// A failed check throws, so that the servers this test started are stopped on the way out.
class Failure extends Error {}

function check(cond, what) {
  if (!cond) {
    console.log(`FAIL ${what}`);
    throw new Failure(what);
  }
  console.log(`ok   ${what}`);
}

function note(what) {
  console.log(`     ${what}`);
}

function claims(token) {
  const [, payload] = token.split('.');
  return JSON.parse(Buffer.from(payload, 'base64url').toString());
}

function structured(result) {
  return result.structuredContent ?? JSON.parse(result.content[0].text);
}

async function firstLine(stream) {
  const lines = createInterface({ input: stream });
  for await (const line of lines) {
    lines.close();
    return line;
  }
  return '';
}

function newClient() {
  return new Client({ name: 'vox-node-oauth-test', version: '1.0.0' }, { capabilities: {} });
}

// Ada at her browser: the SDK's OAuthClientProvider for a public client (PKCE, no secret),
// registered dynamically, its state in memory.
class AdaProvider {
  constructor() {
    this.code = undefined;
    this.authorizationRequests = [];
  }

  get redirectUrl() {
    return REDIRECT_URI;
  }

  get clientMetadata() {
    return {
      client_name: 'vox-node-oauth-test',
      redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }

  state() {
    this._state = randomBytes(16).toString('base64url');
    return this._state;
  }

  clientInformation() {
    return this._client;
  }

  saveClientInformation(info) {
    this._client = info;
  }

  tokens() {
    return this._tokens;
  }

  saveTokens(tokens) {
    this._tokens = tokens;
  }

  saveCodeVerifier(verifier) {
    this._verifier = verifier;
  }

  codeVerifier() {
    return this._verifier;
  }

  // GET the authorization URL and follow the authorization server's redirects by hand, keeping
  // its cookies, until one leads to the redirect_uri: its code is what finishAuth exchanges.
  async redirectToAuthorization(authorizationUrl) {
    this.authorizationRequests.push(Object.fromEntries(authorizationUrl.searchParams));
    const jar = new Map();
    let url = authorizationUrl.href;
    for (let hop = 0; hop < 12; hop += 1) {
      const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
      const res = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
      for (const set of res.headers.getSetCookie()) {
        const [pair] = set.split(';');
        const eq = pair.indexOf('=');
        jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
      }
      const location = res.headers.get('location');
      if (res.status < 300 || res.status >= 400 || !location) {
        throw new Error(`the authorization server answered ${res.status} at ${url}: ${(await res.text()).slice(0, 500)}`);
      }
      await res.body?.cancel();
      url = new URL(location, url).href;
      if (url.split('?')[0] === REDIRECT_URI) {
        const back = new URL(url).searchParams;
        if (back.get('state') !== this._state) throw new Error(`state mismatch: ${url}`);
        if (!back.get('code')) throw new Error(`no code: ${url}`);
        this.code = back.get('code');
        this.iss = back.get('iss');
        return;
      }
    }
    throw new Error('too many redirects');
  }
}

async function startAuthorizationServer(dir) {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'vox-node-test-key', alg: 'RS256', use: 'sig' };
  const config = {
    signing_jwk: jwk,
    clients: [
      { client_id: CC.id, client_secret: CC.secret, grant_types: ['client_credentials'], response_types: [], redirect_uris: [], token_endpoint_auth_method: 'client_secret_basic' },
      { client_id: RS.id, client_secret: RS.secret, grant_types: [], response_types: [], redirect_uris: [], token_endpoint_auth_method: 'client_secret_basic' },
    ],
    opaque_clients: [],
    access_token_ttl: 300,
  };
  writeFileSync(join(dir, 'authz.json'), JSON.stringify(config));
  const as = spawn(process.execPath, [AUTHZ_SERVER, join(dir, 'authz.json')], { stdio: ['pipe', 'pipe', 'inherit'] });
  const line = await firstLine(as.stdout);
  let issuer;
  try {
    ({ issuer } = JSON.parse(line));
  } catch {
    as.kill();
  }
  check(issuer, `the authorization server started (${JSON.stringify(line)})`);
  return { as, issuer };
}

async function main() {
  if (!existsSync(join(ROOT, 'tests/oauth/node_modules/oidc-provider'))) {
    check(!process.env.CI, 'tests/oauth/node_modules (npm ci --prefix tests/oauth)');
    console.log('skipped: tests/oauth/node_modules is missing');
    return;
  }
  check(spawnSync(VOX, ['--version']).status === 0, `vox binary at ${VOX}`);
  const ws = mkdtempSync(join('/tmp', 'voxnodeoauth'));
  try {
    const { as, issuer } = await startAuthorizationServer(ws);
    try {
      await withServers(ws, issuer);
    } finally {
      as.stdin.end();
      await new Promise((r) => (as.exitCode !== null || as.signalCode !== null ? r() : as.once('exit', r)));
    }
    check(as.exitCode !== null, `the authorization server exited when its stdin closed (exit ${as.exitCode})`);
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
}

async function withServers(ws, issuer) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VOX_')));
  Object.assign(env, {
    VOX_WORKSPACE: ws,
    VOX_HOME: join(ws, 'home'),
    VOX_MCP_HTTP_PORT: '0',
    VOX_MCP_HTTP_OAUTH_ISSUER: issuer,
    VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_ID: RS.id,
    VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_SECRET: RS.secret,
    VOX_MCP_HTTP_BEARER_TOKEN: STATIC,
    VOX_LOG: 'warn',
  });
  const server = spawn(VOX, ['serve', '--profile', 'knowledge'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const line = await firstLine(server.stdout);
    check(line.includes('listening on http://'), `vox serve with OAuth settings starts (${line})`);
    const base = `http://${line.split('http://')[1].split(/\s/)[0]}`;
    const url = new URL(`${base}/mcp`);

    // The static bearer token beside OAuth.
    {
      const c = newClient();
      await c.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: `Bearer ${STATIC}` } } }));
      check((await c.listTools()).tools.length === KNOWLEDGE_TOOLS, `the static bearer token lists the ${KNOWLEDGE_TOOLS} tools beside OAuth`);
      await c.close();
    }

    // Authorization code + PKCE + dynamic registration; ada consents.
    const ada = new AdaProvider();
    {
      const c = newClient();
      const transport = new StreamableHTTPClientTransport(url, { authProvider: ada });
      let refused;
      try {
        await c.connect(transport);
      } catch (e) {
        refused = e;
      }
      check(refused instanceof UnauthorizedError && ada.code,
        `the first connection is sent to authorize, and ada's consent comes back with a code (${refused})`);
      const asked = ada.authorizationRequests[0];
      note(`the SDK's authorization request: resource=${asked.resource} scope=${asked.scope} code_challenge_method=${asked.code_challenge_method}`);
      note(`the registered client: ${JSON.stringify({ ...ada.clientInformation(), client_id: undefined, registration_access_token: undefined })}`);
      check(ada.iss === issuer, `the authorization response names the issuer (iss=${ada.iss})`);
      await transport.finishAuth(ada.code);
      const token = ada.tokens().access_token;
      const at = claims(token);
      note(`its access token's claims: ${JSON.stringify(at)}`);
      check(at.aud === url.href && at.sub === 'ada', `finishAuth got an access token for ada with aud=${url.href}`);
      await c.close();
    }
    {
      const c = newClient();
      await c.connect(new StreamableHTTPClientTransport(url, { authProvider: ada }));
      const names = (await c.listTools()).tools.map((t) => t.name);
      check(names.length === KNOWLEDGE_TOOLS && names.includes('vox_memory_store'),
        `reconnected with ada's token: the knowledge profile's ${KNOWLEDGE_TOOLS} tools (${names.length})`);
      let r = await c.callTool({ name: 'vox_memory_store', arguments: { key: 'oauth/node', value: 'stored by ada from node' } });
      check(!r.isError, 'and stores');
      r = await c.callTool({ name: 'vox_memory_recall', arguments: { key: 'oauth/node' } });
      check(!r.isError && structured(r).memory.value === 'stored by ada from node', 'and recalls');
      await c.close();
    }

    // The SDK's client-credentials provider (client_secret_basic).
    {
      const cc = new ClientCredentialsProvider({ clientId: CC.id, clientSecret: CC.secret, expectedIssuer: issuer, scope: 'vox:read vox:write' });
      const c = newClient();
      await c.connect(new StreamableHTTPClientTransport(url, { authProvider: cc }));
      const names = (await c.listTools()).tools.map((t) => t.name);
      check(names.length === KNOWLEDGE_TOOLS, `client credentials (${CC.id}) list the tools (${names.length})`);
      const r = await c.callTool({ name: 'vox_memory_recall', arguments: { key: 'oauth/node' } });
      check(!r.isError, 'and call one');
      note(`its access token's claims: ${JSON.stringify(claims(cc.tokens().access_token))}`);
      await c.close();
    }
  } finally {
    spawnSync(VOX, ['daemon', 'stop'], { env });
    await new Promise((r) => (server.exitCode !== null || server.signalCode !== null ? r() : server.once('exit', r)));
  }
  check(server.exitCode !== null, `vox serve stopped (vox daemon stop; exit ${server.exitCode})`);
}

try {
  await main();
} catch (e) {
  if (!(e instanceof Failure)) {
    console.log(e?.stack ?? e);
    console.log('FAIL the checks ran to the end without an exception');
  }
  process.exit(1);
}
