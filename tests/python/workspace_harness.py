"""What the Python SDK tests of workspace `.vox` files share: the vox binary, checks, and a
run of one exercise against every transport and era (`vox mcp` with VOX_MCP_WORKSPACE_TOOLS=1,
and `vox serve --profile dev`'s /mcp with VOX_MCP_HTTP_WORKSPACE_TOOLS=1; legacy and auto)."""

import os
import subprocess
import sys
import tempfile

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")
TOKEN = "workspace-harness-token-0123456789"


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok   {what}")


def env_for(workspace: str, home: str, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
    env.update({"VOX_HOME": home, "VOX_WORKSPACE": workspace, "VOX_LOG": "warn"})
    env.update(extra or {})
    return env


async def on_every_transport(setup, exercise) -> None:
    """`setup(ws)` writes a fresh workspace; `exercise(make, tag, mode, ws)` runs against it,
    `make(**client_kwargs)` opening a client: over stdio, then over /mcp, each in both eras."""
    check(os.path.exists(VOX), f"vox binary at {VOX}")
    for mode in ("legacy", "auto"):
        with tempfile.TemporaryDirectory(prefix="voxws", dir="/tmp") as ws, \
                tempfile.TemporaryDirectory(prefix="voxwsh", dir="/tmp") as home:
            setup(ws)
            params = StdioServerParameters(command=VOX, args=["mcp"], cwd=ws,
                                           env=env_for(ws, home, {"VOX_MCP_WORKSPACE_TOOLS": "1"}))
            try:
                await exercise(lambda **kw: Client(params, mode=mode, **kw), f"stdio {mode}", mode, ws)
            finally:
                subprocess.run([VOX, "daemon", "stop"], env=env_for(ws, home), cwd=ws, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="voxwsw", dir="/tmp") as ws:
        setup(ws)
        env = env_for(ws, os.path.join(ws, "home"), {"VOX_MCP_HTTP_PORT": "0", "VOX_MCP_HTTP_BEARER_TOKEN": TOKEN,
                                                           "VOX_MCP_HTTP_WORKSPACE_TOOLS": "1"})
        server = subprocess.Popen([VOX, "serve", "--profile", "dev"], env=env, stdout=subprocess.PIPE, text=True, cwd=ws)
        try:
            url = "http://" + server.stdout.readline().split("http://")[1].split()[0] + "/mcp"
            for mode in ("legacy", "auto"):
                def make(**kw):
                    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
                    return Client(streamable_http_client(url, http_client=http), mode=mode, **kw)

                await exercise(make, f"/mcp {mode}", mode, ws)
        finally:
            server.terminate()
            server.wait(timeout=15)
