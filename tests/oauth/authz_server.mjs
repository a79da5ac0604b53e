// A real OAuth 2.1 / OpenID Connect authorization server for vox serve's resource-server tests:
// npm oidc-provider (pinned in package.json), configured for them.
//
// Run: node tests/oauth/authz_server.mjs <config.json>
//
// It listens on 127.0.0.1 (a free port), prints one line of JSON on stdout when ready,
// {"issuer":"http://127.0.0.1:<port>"}, and nothing else on stdout (errors go to stderr). It exits
// when its stdin closes or on SIGTERM/SIGINT, so a test that dies leaves nothing behind.
//
// The config (written by the test):
//   signing_jwk       a private RSA JWK with "kid", "alg": "RS256", "use": "sig" (the only signing key)
//   clients           oidc-provider client metadata, statically registered
//   opaque_clients    client ids whose access tokens are opaque (the others get JWTs, RFC 9068)
//   access_token_ttl  seconds (default 300)
//
// What it does:
// - resource indicators (RFC 8707): any resource under http://127.0.0.1: or http://localhost: is a
//   resource server with the scopes vox:read vox:write vox:profile:knowledge; its access tokens
//   have aud = the resource, RS256, or are opaque for opaque_clients;
// - client credentials, open Dynamic Client Registration, introspection, revocation; PKCE (S256)
//   required for every authorization-code request;
// - the person behind every authorization request is the account `ada` (sub "ada"): the
//   interaction URL logs her in and consents to what was asked, so GETting an authorization URL
//   and following its redirects (keeping cookies) ends in a redirect to the client's
//   redirect_uri with code, state and iss.
//
// oidc-provider's expected warnings (in-memory store, Node 20) are dropped unless
// AUTHZ_SERVER_VERBOSE is set; its errors are printed on stderr. The module can also be imported:
// startAuthorizationServer(config) resolves to { issuer, provider, close }.

import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { pathToFileURL } from 'node:url';

// oidc-provider is imported when the server starts, after main() has pointed its notices at stderr.
let oidc;
async function loadOidcProvider() {
  oidc ??= await import('oidc-provider');
  return oidc;
}

export const RESOURCE_SCOPES = ['vox:read', 'vox:write', 'vox:profile:knowledge'];
const ACCOUNT = 'ada';

function isTestResource(resource) {
  return typeof resource === 'string'
    && (resource.startsWith('http://127.0.0.1:') || resource.startsWith('http://localhost:'));
}

function providerConfiguration(config, { errors }) {
  const ttl = Number(config.access_token_ttl ?? 300);
  const opaque = new Set(config.opaque_clients ?? []);
  return {
    clients: config.clients ?? [],
    jwks: { keys: [config.signing_jwk] },
    // Authorization-server scopes: the OIDC ones and the resource's (a client registering
    // with `scope` may only name scopes listed here).
    scopes: ['openid', 'offline_access', ...RESOURCE_SCOPES],
    // OAuth 2.1: the authorization code flow only (no implicit, no hybrid).
    responseTypes: ['code'],
    claims: { openid: ['sub'] },
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      registration: { enabled: true },
      introspection: { enabled: true, allowedPolicy: async () => true },
      // A client revokes its own tokens.
      revocation: { enabled: true, allowedPolicy: async (ctx, client, token) => token.clientId === client.clientId },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (ctx, client, oneOf) => oneOf ?? undefined,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (ctx, resource, client) => {
          if (!isTestResource(resource)) {
            throw new errors.InvalidTarget();
          }
          return {
            scope: RESOURCE_SCOPES.join(' '),
            audience: resource,
            accessTokenTTL: ttl,
            accessTokenFormat: opaque.has(client.clientId) ? 'opaque' : 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    ttl: {
      AccessToken: (ctx, token) => token.resourceServer?.accessTokenTTL ?? ttl,
      ClientCredentials: (ctx, token) => token.resourceServer?.accessTokenTTL ?? ttl,
      AuthorizationCode: 60,
      IdToken: 3600,
      RefreshToken: 24 * 3600,
      Interaction: 600,
      Session: 3600,
      Grant: 24 * 3600,
    },
    findAccount: async (ctx, id) => (id === ACCOUNT
      ? { accountId: ACCOUNT, claims: async () => ({ sub: ACCOUNT }) }
      : undefined),
    clientBasedCORS: () => false,
    renderError: async (ctx, out) => {
      ctx.type = 'json';
      ctx.body = out;
    },
  };
}

// The interaction URL: log in `ada`, then consent to everything that was asked (OIDC scopes,
// claims, each resource's scopes), then hand back to the provider, which redirects on.
async function interaction(provider, req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  if (prompt.name === 'login') {
    await provider.interactionFinished(req, res, { login: { accountId: ACCOUNT } }, { mergeWithLastSubmission: false });
    return;
  }
  if (prompt.name !== 'consent') {
    throw new Error(`unexpected prompt ${prompt.name}`);
  }
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const missing = prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

const ERROR_EVENTS = [
  'server_error', 'authorization.error', 'grant.error', 'introspection.error', 'revocation.error',
  'registration_create.error', 'discovery.error', 'jwks.error', 'userinfo.error', 'end_session.error',
  'pushed_authorization_request.error', 'registration_read.error',
];

/** Starts the server; resolves to { issuer, provider, close() }. */
export async function startAuthorizationServer(config) {
  const { Provider, errors } = await loadOidcProvider();
  let provider;
  const server = createServer((req, res) => {
    if (req.url.startsWith('/interaction/')) {
      interaction(provider, req, res).catch((err) => {
        console.error(`authz_server: interaction: ${err?.stack ?? err}`);
        if (!res.headersSent) {
          res.statusCode = 500;
          res.setHeader('Content-Type', 'application/json');
        }
        res.end(JSON.stringify({ error: 'server_error', error_description: String(err?.message ?? err) }));
      });
      return;
    }
    provider.callback()(req, res);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const issuer = `http://127.0.0.1:${server.address().port}`;
  provider = new Provider(issuer, providerConfiguration(config, { errors }));
  for (const event of ERROR_EVENTS) {
    provider.on(event, (ctx, err) => {
      const e = err ?? ctx;
      console.error(`authz_server: ${event}: ${e?.error ?? ''} ${e?.error_description ?? e?.message ?? e}`);
    });
  }
  const close = () => new Promise((resolve) => {
    server.closeAllConnections?.();
    server.close(() => resolve());
  });
  return { issuer, provider, close };
}

// Warnings that only say this is a test server (an in-memory store, and Node 20 where oidc-provider
// asks for 22): not printed unless AUTHZ_SERVER_VERBOSE is set.
const EXPECTED_WARNINGS = ['development-only in-memory adapter', 'Unsupported runtime'];

async function main() {
  // oidc-provider prints notices with console.info (stdout); stdout is the ready line's alone.
  const verbose = !!process.env.AUTHZ_SERVER_VERBOSE;
  const toStderr = (...args) => {
    if (verbose || !EXPECTED_WARNINGS.some((w) => String(args[0]).includes(w))) console.error(...args);
  };
  console.info = toStderr;
  console.log = toStderr;
  console.warn = toStderr;
  const path = process.argv[2];
  if (!path) {
    console.error('usage: node tests/oauth/authz_server.mjs <config.json>');
    process.exit(2);
  }
  const config = JSON.parse(readFileSync(path, 'utf8'));
  const { issuer } = await startAuthorizationServer(config);
  const bye = () => process.exit(0);
  process.on('SIGTERM', bye);
  process.on('SIGINT', bye);
  process.stdin.on('end', bye);
  process.stdin.on('close', bye);
  process.stdin.on('error', bye);
  process.stdin.resume();
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    console.error(`authz_server: ${err?.stack ?? err}`);
    process.exit(1);
  });
}
