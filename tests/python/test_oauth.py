"""`vox serve` as an OAuth 2.1 resource server, with the official Python MCP SDK's OAuth clients and a
real authorization server (npm oidc-provider, tests/oauth/authz_server.mjs): protected resource
metadata and the 401 challenge; the SDK's authorization code + PKCE + dynamic registration flow
(the person is `ada`) and its client-credentials provider; a matrix of bad tokens; scopes; opaque
tokens through introspection, and revoked; the static bearer token beside OAuth.

Run: npm ci --prefix tests/oauth && .venv/bin/python tests/python/test_oauth.py [path/to/vox]
(VOX_TEST_NODE names the node that runs the authorization server; default `node`.)"""

import asyncio
import base64
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import traceback
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")
AUTHZ_SERVER = os.path.join(ROOT, "tests", "oauth", "authz_server.mjs")
NODE = os.environ.get("VOX_TEST_NODE", "node")
STATIC = "static-write-token-0123456789"
CC_ID, CC_SECRET = "vox-cc", "vox-cc-secret-" + secrets.token_urlsafe(16)
OPAQUE_ID, OPAQUE_SECRET = "vox-opaque", "vox-opaque-secret-" + secrets.token_urlsafe(16)
RS_ID, RS_SECRET = "vox-rs", "vox-rs-secret-" + secrets.token_urlsafe(16)
KID = "vox-test-key-1"
CHALLENGE_SCOPE = "vox:read vox:write"
KNOWLEDGE_TOOLS = 17
REDIRECT_URI = "http://127.0.0.1:47611/callback"  # nothing listens: the redirect handler stops there


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok   {what}")


def note(what: str) -> None:
    print(f"     {what}")


def structured(result) -> dict:
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_json(value) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode())


def unverified(token: str) -> tuple[dict, dict]:
    """The header and claims of a JWS compact token, unverified."""
    h, p, _ = token.split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    return json.loads(base64.urlsafe_b64decode(pad(h))), json.loads(base64.urlsafe_b64decode(pad(p)))


def rsa_jwk(key: rsa.RSAPrivateKey, kid: str) -> dict:
    def num(n: int) -> str:
        return b64url(n.to_bytes((n.bit_length() + 7) // 8, "big"))

    priv = key.private_numbers()
    pub = priv.public_numbers
    return {"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig", "n": num(pub.n), "e": num(pub.e),
            "d": num(priv.d), "p": num(priv.p), "q": num(priv.q), "dp": num(priv.dmp1), "dq": num(priv.dmq1),
            "qi": num(priv.iqmp)}


def www_authenticate(response) -> tuple[str, dict]:
    """The scheme and auth-params of a WWW-Authenticate challenge (quoted or token values)."""
    header = response.headers.get("www-authenticate", "")
    scheme, _, rest = header.strip().partition(" ")
    params: dict[str, str] = {}
    i, n = 0, len(rest)
    while i < n:
        while i < n and rest[i] in " ,":
            i += 1
        eq = rest.find("=", i)
        if eq < 0:
            break
        name = rest[i:eq].strip().lower()
        i = eq + 1
        if i < n and rest[i] == '"':
            i += 1
            value = []
            while i < n and rest[i] != '"':
                if rest[i] == "\\" and i + 1 < n:
                    i += 1
                value.append(rest[i])
                i += 1
            i += 1
            params[name] = "".join(value)
        else:
            end = rest.find(",", i)
            end = n if end < 0 else end
            params[name] = rest[i:end].strip()
            i = end
    return scheme, params


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Browser:
    """Ada's browser: GETs the authorization URL and follows the authorization server's redirects
    (keeping its cookies) until one leads to the client's redirect_uri, whose code, state and iss
    it keeps for the callback handler."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None
        self.visits = 0

    async def redirect_handler(self, authorization_url: str) -> None:
        self.visits += 1
        q = parse_qs(urlsplit(authorization_url).query)
        note(f"the SDK's authorization request: resource={q.get('resource')} scope={q.get('scope')} "
             f"code_challenge_method={q.get('code_challenge_method')} prompt={q.get('prompt')}")
        url = authorization_url
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as http:
            for _ in range(12):
                r = await http.get(url)
                if r.status_code not in (301, 302, 303, 307, 308):
                    raise RuntimeError(f"the authorization server answered {r.status_code} at {url}: {r.text[:500]}")
                url = urljoin(url, r.headers["location"])
                if url.split("?")[0] == REDIRECT_URI:
                    params = parse_qs(urlsplit(url).query)
                    if "code" not in params:
                        raise RuntimeError(f"the authorization server redirected back without a code: {url}")
                    self.result = AuthorizationCodeResult(code=params["code"][0], state=params.get("state", [None])[0],
                                                          iss=params.get("iss", [None])[0])
                    return
        raise RuntimeError("too many redirects")

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self.result is not None
        result, self.result = self.result, None
        return result


class TokenRequests:
    """Records what the SDK asks the authorization server's token endpoint for."""

    def __init__(self, token_endpoint: str) -> None:
        self.token_endpoint = token_endpoint
        self.seen: list[dict] = []

    async def hook(self, request) -> None:
        if str(request.url).split("?")[0] == self.token_endpoint:
            body = parse_qs(request.content.decode())
            self.seen.append({k: v[0] for k, v in body.items() if k not in ("code", "code_verifier", "client_secret")})


async def sdk_session(url: str, http: httpx2.AsyncClient, mode: str = "legacy") -> Client:
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def bearer(token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "vox-oauth-test", "version": "1.0.0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def post_initialize(http: httpx2.AsyncClient, url: str, token: str | None):
    headers = dict(MCP_HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return await http.post(url, headers=headers, content=json.dumps(INITIALIZE))


def start_authorization_server(tmp: str, signing_jwk: dict) -> tuple[subprocess.Popen, str]:
    no_redirects = {"grant_types": ["client_credentials"], "response_types": [], "redirect_uris": [],
                    "token_endpoint_auth_method": "client_secret_basic"}
    config = {
        "signing_jwk": signing_jwk,
        "clients": [
            {"client_id": CC_ID, "client_secret": CC_SECRET, **no_redirects},
            {"client_id": OPAQUE_ID, "client_secret": OPAQUE_SECRET, **no_redirects},
            {"client_id": RS_ID, "client_secret": RS_SECRET, "grant_types": [], "response_types": [],
             "redirect_uris": [], "token_endpoint_auth_method": "client_secret_basic"},
        ],
        "opaque_clients": [OPAQUE_ID],
        "access_token_ttl": 300,
    }
    path = os.path.join(tmp, "authz.json")
    with open(path, "w") as f:
        json.dump(config, f)
    proc = subprocess.Popen([NODE, AUTHZ_SERVER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    try:
        issuer = json.loads(line)["issuer"]
    except (ValueError, KeyError):
        proc.kill()
        check(False, f"the authorization server started ({line!r})")
    return proc, issuer


class Tokens:
    """Access tokens minted with the authorization server's key (or deliberately not)."""

    def __init__(self, key: rsa.RSAPrivateKey, issuer: str, resource: str) -> None:
        self.key, self.issuer, self.resource = key, issuer, resource
        self.other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def claims(self, **over) -> dict:
        now = int(time.time())
        c = {"iss": self.issuer, "aud": self.resource, "sub": "mallory", "client_id": "mallory-client",
             "scope": "vox:write", "iat": now, "exp": now + 300, "jti": secrets.token_urlsafe(12)}
        for k, v in over.items():
            if v is None:
                c.pop(k, None)
            else:
                c[k] = v
        return c

    def sign(self, claims: dict, key=None, kid: str = KID) -> str:
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": kid, "typ": "at+jwt"})

    def good(self, **over) -> str:
        return self.sign(self.claims(**over))

    def bad(self) -> dict[str, str]:
        now = int(time.time())
        real = self.good(scope="vox:read")
        forged_claims = self.claims(sub="ada", scope="vox:write vox:profile:knowledge")
        h, _, s = real.split(".")
        public_pem = self.key.public_key().public_bytes(serialization.Encoding.PEM,
                                                        serialization.PublicFormat.SubjectPublicKeyInfo)
        hs_header = b64url_json({"alg": "HS256", "typ": "at+jwt", "kid": KID})
        hs_payload = b64url_json(self.claims())
        hs_sig = b64url(hmac.new(public_pem, f"{hs_header}.{hs_payload}".encode(), hashlib.sha256).digest())
        oversized = self.good(padding=secrets.token_urlsafe(15000))
        assert len(oversized) >= 20000
        return {
            "expired (exp 10 minutes ago)": self.good(iat=now - 900, exp=now - 600),
            "not yet valid (nbf in an hour)": self.good(nbf=now + 3600),
            "wrong audience": self.good(aud="http://127.0.0.1:1/mcp"),
            "wrong issuer": self.good(iss="http://127.0.0.1:1"),
            "alg none": f"{b64url_json({'alg': 'none', 'typ': 'at+jwt', 'kid': KID})}.{b64url_json(self.claims())}.",
            "tampered payload": f"{h}.{b64url_json(forged_claims)}.{s}",
            "unknown kid (another key)": self.sign(self.claims(), key=self.other_key, kid="unknown-kid"),
            "the right kid, another key": self.sign(self.claims(), key=self.other_key),
            "HS256 with the RSA public key as secret": f"{hs_header}.{hs_payload}.{hs_sig}",
            "exp as a string": self.good(exp=str(now + 300)),
            "no exp": self.good(exp=None),
            "garbage": "garbage-" + secrets.token_urlsafe(24),
            f"oversized ({len(oversized) // 1024} KB, validly signed)": oversized,
        }


async def as_token(http: httpx2.AsyncClient, meta: dict, client: tuple[str, str], resource: str, scope: str) -> dict:
    r = await http.post(meta["token_endpoint"], auth=client,
                        data={"grant_type": "client_credentials", "resource": resource, "scope": scope})
    check(r.status_code == 200, f"the authorization server issues a client_credentials token to {client[0]} ({r.status_code} {r.text[:200]})")
    return r.json()


async def main() -> None:
    if not os.path.isdir(os.path.join(ROOT, "tests", "oauth", "node_modules", "oidc-provider")):
        check(not os.environ.get("CI"), "tests/oauth/node_modules (npm ci --prefix tests/oauth)")
        print("skipped: tests/oauth/node_modules is missing")
        return
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with tempfile.TemporaryDirectory(prefix="voxoauth", dir="/tmp") as ws:
        authz, issuer = start_authorization_server(ws, rsa_jwk(key, KID))
        env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
        env.update({"VOX_WORKSPACE": ws, "VOX_HOME": os.path.join(ws, "home"), "VOX_MCP_HTTP_PORT": "0",
                    "VOX_MCP_HTTP_OAUTH_ISSUER": issuer,
                    "VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_ID": RS_ID,
                    "VOX_MCP_HTTP_OAUTH_INTROSPECTION_CLIENT_SECRET": RS_SECRET,
                    "VOX_MCP_HTTP_BEARER_TOKEN": STATIC, "VOX_LOG": "warn"})
        server = None
        try:
            server = subprocess.Popen([VOX, "serve", "--profile", "knowledge"], env=env, stdout=subprocess.PIPE, text=True)
            line = server.stdout.readline()
            check("listening on http://" in line, f"vox serve with OAuth settings starts ({line.strip()!r})")
            await checks("http://" + line.split("http://")[1].split()[0], issuer, key, env)
        except SystemExit:
            raise
        except BaseException:
            traceback.print_exc()
            check(False, "the checks ran to the end without an exception")
        finally:
            if server is not None:
                subprocess.run([VOX, "daemon", "stop"], env=env, capture_output=True)
                try:
                    server.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    server.kill()
            authz.stdin.close()
            try:
                authz.wait(timeout=10)
            except subprocess.TimeoutExpired:
                authz.kill()
        check(server.returncode is not None, f"vox serve stopped (vox daemon stop; exit {server.returncode})")
        check(authz.returncode is not None, f"the authorization server exited when its stdin closed (exit {authz.returncode})")
        check(not processes_of(ws), f"nothing left running in the test's workspace ({processes_of(ws)})")
        audit_checks(env)


def processes_of(ws: str) -> list[str]:
    """Processes whose environment names the test's workspace."""
    found = []
    needle = f"VOX_WORKSPACE={ws}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        cmdline = c.read().replace(b"\0", b" ").decode(errors="replace").strip()
                    found.append(f"{pid} {cmdline}")
        except OSError:
            pass
    return found


AUDITED: dict[str, str] = {}  # the principal each part's calls must be recorded under -> what it was


def audit_checks(env: dict) -> None:
    """The audit trail, read from the store once the daemon is down (a running knowledge-profile daemon
    does not serve vox_audit_query)."""
    r = subprocess.run([VOX, "audit", "--json", "--limit", "1000"], env=env, capture_output=True, text=True)
    check(r.returncode == 0, f"vox audit --json ({r.stderr.strip()[:300]})")
    records = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    principals = sorted({rec.get("principal") for rec in records if rec.get("principal")})
    note(f"audit principals: {principals}")
    for principal, what in AUDITED.items():
        check(any(rec.get("principal") == principal for rec in records), f"the audit trail records {what} as {principal}")


async def checks(base: str, issuer: str, key: rsa.RSAPrivateKey, env: dict) -> None:
    url = f"{base}/mcp"
    prm_url = f"{base}/.well-known/oauth-protected-resource/mcp"
    async with httpx2.AsyncClient(timeout=30) as http:
        meta = (await http.get(f"{issuer}/.well-known/oauth-authorization-server")).json()
        check(meta.get("issuer") == issuer and meta.get("introspection_endpoint") and meta.get("registration_endpoint"),
              f"the authorization server's metadata ({issuer})")

        # g. The static bearer token beside OAuth (first: it works before the OAuth side exists).
        async with await sdk_session(url, bearer(STATIC)) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            check(len(names) == KNOWLEDGE_TOOLS, f"the static bearer token lists the {KNOWLEDGE_TOOLS} tools beside OAuth")
            r = await c.call_tool("vox_memory_store", {"key": "oauth/static", "value": "stored with the static token"})
            check(not r.is_error, "and calls")
        r = await http.get(f"{base}/v1/info", headers={"Authorization": f"Bearer {STATIC}"})
        check(r.status_code == 200 and r.json()["you"]["role"] == "write", "and /v1/info says write")
        AUDITED["http:write"] = "the static token's call"

        # a. The challenge and protected resource metadata (RFC 9728).
        r = await post_initialize(http, url, None)
        scheme, params = www_authenticate(r)
        check(r.status_code == 401, f"a tokenless initialize is 401 ({r.status_code})")
        check(scheme == "Bearer" and params == {"resource_metadata": prm_url, "scope": CHALLENGE_SCOPE},
              f"its challenge: Bearer resource_metadata=\"{prm_url}\", scope=\"{CHALLENGE_SCOPE}\" "
              f"({r.headers.get('www-authenticate')!r})")
        for at in (prm_url, f"{base}/.well-known/oauth-protected-resource"):
            r = await http.get(at)
            doc = r.json() if r.status_code == 200 else {}
            check(r.status_code == 200 and doc.get("resource") == url and doc.get("authorization_servers") == [issuer]
                  and {"vox:read", "vox:write"} <= set(doc.get("scopes_supported") or [])
                  and doc.get("bearer_methods_supported") == ["header"],
                  f"protected resource metadata at {at[len(base):]} ({r.status_code} {r.text[:300]})")

        # b. The SDK's authorization code flow: PKCE, dynamic registration, ada consents.
        storage, browser = MemoryStorage(), Browser()
        requests = TokenRequests(meta["token_endpoint"])
        provider = OAuthClientProvider(
            server_url=url,
            client_metadata=OAuthClientMetadata(client_name="vox-oauth-test", redirect_uris=[REDIRECT_URI]),
            storage=storage, redirect_handler=browser.redirect_handler, callback_handler=browser.callback_handler)
        oauth_http = httpx2.AsyncClient(auth=provider, timeout=30, event_hooks={"request": [requests.hook]})
        for mode in ("legacy", "auto"):
            async with await sdk_session(url, oauth_http, mode) as c:
                tools = [t.name for t in (await c.list_tools()).tools]
                check("vox_memory_store" in tools and len(tools) == KNOWLEDGE_TOOLS,
                      f"[{mode}] the authorization-code token lists the knowledge profile's {KNOWLEDGE_TOOLS} tools ({len(tools)})")
                r = await c.call_tool("vox_memory_store", {"key": f"oauth/{mode}", "value": "stored by ada"})
                check(not r.is_error, f"[{mode}] and stores ({structured(r) if r.is_error else 'ok'})")
                r = await c.call_tool("vox_memory_recall", {"key": f"oauth/{mode}"})
                check(not r.is_error and structured(r)["memory"]["value"] == "stored by ada", f"[{mode}] and recalls")
        check(browser.visits == 1, f"one authorization for both sessions ({browser.visits})")
        client_id = storage.client_info.client_id
        note(f"registered: application_type={storage.client_info.application_type} "
             f"token_endpoint_auth_method={storage.client_info.token_endpoint_auth_method} scope={storage.client_info.scope}")
        for seen in requests.seen:
            note(f"the SDK's token request: {seen}")
        check(all(s.get("resource") == url for s in requests.seen), f"the SDK asked for resource={url}")
        access = storage.tokens.access_token
        header, claims = unverified(access)
        note(f"an authorization-code access token: header {header}, claims {sorted(claims)}")
        check(claims.get("aud") == url and claims.get("sub") == "ada" and claims.get("iss") == issuer,
              f"it is a JWT for ada with aud={url}")
        r = await http.get(f"{base}/v1/info", headers={"Authorization": f"Bearer {access}"})
        you = r.json().get("you", {}) if r.status_code == 200 else {}
        check(you.get("subject") == "ada", f"GET /v1/info with it: you.subject == 'ada' ({r.status_code} {you})")
        check(you.get("client_id") == client_id, f"and you.client_id is the registered client ({client_id})")
        AUDITED["oauth:ada"] = "ada's calls"
        await oauth_http.aclose()

        # c. The SDK's client-credentials provider.
        cc_storage = MemoryStorage()
        cc = ClientCredentialsOAuthProvider(server_url=url, storage=cc_storage, client_id=CC_ID, client_secret=CC_SECRET,
                                            token_endpoint_auth_method="client_secret_basic", scope=CHALLENGE_SCOPE,
                                            issuer=issuer)
        requests = TokenRequests(meta["token_endpoint"])
        async with httpx2.AsyncClient(auth=cc, timeout=30, event_hooks={"request": [requests.hook]}) as cc_http:
            async with await sdk_session(url, cc_http) as c:
                tools = [t.name for t in (await c.list_tools()).tools]
                check(len(tools) == KNOWLEDGE_TOOLS, f"client credentials ({CC_ID}) list the tools ({len(tools)})")
                r = await c.call_tool("vox_memory_recall", {"key": "oauth/legacy"})
                check(not r.is_error, "and call one")
        for seen in requests.seen:
            note(f"the SDK's client-credentials token request: {seen}")
        header, claims = unverified(cc_storage.tokens.access_token)
        note(f"a client-credentials access token: header {header}, claims {claims}")
        cc_principal = f"oauth:{claims.get('sub')}"
        check(claims.get("sub") == CC_ID, f"its sub is the client id ({claims.get('sub')})")
        AUDITED[cc_principal] = f"{CC_ID}'s call"

        # d. Bad tokens: each is 401 invalid_token on /mcp and on /v1/tools, never 200.
        tokens = Tokens(key, issuer, url)
        for what, token in tokens.bad().items():
            for where in ("/mcp", "/v1/tools"):
                if where == "/mcp":
                    r = await post_initialize(http, url, token)
                else:
                    r = await http.get(f"{base}/v1/tools", headers={"Authorization": f"Bearer {token}"})
                _, params = www_authenticate(r)
                check(r.status_code == 401 and params.get("error") == "invalid_token",
                      f"{what}: {where} is 401 invalid_token ({r.status_code} {r.headers.get('www-authenticate')!r})")

        # e. Scopes.
        async with await sdk_session(url, bearer(tokens.good(scope="vox:read"))) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            check("vox_memory_store" not in names and "vox_memory_recall" in names,
                  f"a vox:read token lists only read-role tools ({len(names)})")
            r = await c.call_tool("vox_memory_store", {"key": "x", "value": "y"})
            check(r.is_error and structured(r)["error"]["code"] == "insufficient_role",
                  "and its vox_memory_store is insufficient_role")
        r = await post_initialize(http, url, tokens.good(scope="openid"))
        _, params = www_authenticate(r)
        check(r.status_code == 403 and params.get("error") == "insufficient_scope" and params.get("scope") == CHALLENGE_SCOPE,
              f"a token without a vox scope is 403 insufficient_scope, scope=\"{CHALLENGE_SCOPE}\" "
              f"({r.status_code} {r.headers.get('www-authenticate')!r})")
        async with await sdk_session(url, bearer(tokens.good(scope="vox:write vox:profile:knowledge"))) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            check(len(names) == KNOWLEDGE_TOOLS and "vox_memory_store" in names,
                  f"vox:write vox:profile:knowledge lists the same {KNOWLEDGE_TOOLS} tools ({len(names)})")

        # f. Opaque tokens, through introspection; a revoked one is refused.
        opaque = (await as_token(http, meta, (OPAQUE_ID, OPAQUE_SECRET), url, CHALLENGE_SCOPE))["access_token"]
        check(opaque.count(".") != 2, "its token is opaque (not a JWT)")
        r = await http.post(meta["introspection_endpoint"], auth=(RS_ID, RS_SECRET), data={"token": opaque})
        note(f"the authorization server's introspection of it for {RS_ID}: {r.json()}")
        check(r.json().get("active") is True and r.json().get("aud") == url, f"the authorization server introspects it for {RS_ID}")
        async with await sdk_session(url, bearer(opaque)) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            check(len(names) == KNOWLEDGE_TOOLS, f"vox accepts the opaque token through introspection ({len(names)} tools)")
            r = await c.call_tool("vox_memory_recall", {"key": "oauth/legacy"})
            check(not r.is_error, "and a call with it")
        revoked = (await as_token(http, meta, (OPAQUE_ID, OPAQUE_SECRET), url, CHALLENGE_SCOPE))["access_token"]
        r = await http.post(meta["revocation_endpoint"], auth=(OPAQUE_ID, OPAQUE_SECRET),
                            data={"token": revoked, "token_type_hint": "access_token"})
        check(r.status_code == 200, f"the authorization server revokes another opaque token ({r.status_code})")
        r = await http.post(meta["introspection_endpoint"], auth=(RS_ID, RS_SECRET), data={"token": revoked})
        check(r.json() == {"active": False}, "and introspects it as inactive")
        r = await post_initialize(http, url, revoked)
        check(r.status_code == 401, f"vox refuses the revoked token on /mcp ({r.status_code})")
        r = await http.get(f"{base}/v1/tools", headers={"Authorization": f"Bearer {revoked}"})
        check(r.status_code == 401, f"and on /v1/tools ({r.status_code})")


asyncio.run(main())
