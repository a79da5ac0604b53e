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
