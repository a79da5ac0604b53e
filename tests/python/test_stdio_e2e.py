"""End to end with the official Python MCP SDK (`pip install mcp`) against the real `vox mcp`.

Run: .venv/bin/python tests/python/test_stdio_e2e.py [path/to/vox]
Exits non-zero on the first failed check; prints one line per check.
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile

from mcp import Client, StdioServerParameters

VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")


def env_for(workspace: str, home: str, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
    env.update({"VOX_HOME": home, "VOX_WORKSPACE": workspace, "VOX_LOG": "warn"})
    env.update(extra or {})
    return env


def structured(result) -> dict:
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok   {what}")


def nullable(schema) -> bool:
    """Whether a schema anywhere has a "null" type, a type array or a $ref."""
    if isinstance(schema, dict):
        t = schema.get("type")
        if isinstance(t, list) or t == "null" or "$ref" in schema:
            return True
        return any(nullable(v) for k, v in schema.items() if k not in ("enum", "const", "default", "examples"))
    if isinstance(schema, list):
        return any(nullable(v) for v in schema)
    return False


def expected_slice(profile: str) -> list[str]:
    out = subprocess.run([VOX, "profile", "show", profile, "--json"], check=True, capture_output=True, text=True)
    return [t["name"] for t in json.loads(out.stdout)["tools"]]


async def session(workspace: str, home: str, profile: str, mode: str):
    params = StdioServerParameters(command=VOX, args=["mcp", "--profile", profile], env=env_for(workspace, home), cwd=workspace)
    return Client(params, mode=mode)


async def run_mode(mode: str) -> None:
    with tempfile.TemporaryDirectory(prefix="voxpy", dir="/tmp") as ws, tempfile.TemporaryDirectory(prefix="voxpyh", dir="/tmp") as home:
        try:
            async with await session(ws, home, "knowledge", mode) as client:
                want = "2026-07-28" if mode == "auto" else "2025-11-25"
                check(str(client.protocol_version) == want, f"[{mode}] negotiated protocol {client.protocol_version}")
                tools = (await client.list_tools()).tools
                names = [t.name for t in tools]
                check(names == expected_slice("knowledge"), f"[{mode}] knowledge tools/list is exactly the profile slice ({len(names)} tools)")
                meta = next(t for t in tools if t.name == "vox_memory_store").meta or {}
                check(meta.get("vox_side_effect_class") == "writes_state", f"[{mode}] tools carry _meta vox_side_effect_class")
                check(all((t.output_schema or {}).get("type") == "object" for t in tools), f"[{mode}] every tool advertises an object outputSchema")
                check(not any(nullable(t.input_schema) for t in tools), f"[{mode}] no input schema has a null type, a type array or a $ref")
                # The SDK validates each successful result's structuredContent against the outputSchema.
                r = await client.call_tool("vox_memory_store", {"key": "py/k", "value": "from python"})
                check(not r.is_error, f"[{mode}] vox_memory_store succeeds")
                r = await client.call_tool("vox_memory_list", {"prefix": None, "tag": None, "limit": None})
                check(not r.is_error and structured(r)["memories"][0]["key"] == "py/k", f"[{mode}] null for optional arguments is accepted")
                r = await client.call_tool("vox_memory_recall", {"key": "py/k"})
                check(structured(r)["memory"]["value"] == "from python", f"[{mode}] vox_memory_recall returns the stored value")
                r = await client.call_tool("vox_repo_status", {})
                err = structured(r)["error"]
                check(r.is_error and err["code"] == "tool_not_in_profile", f"[{mode}] out-of-profile call is denied with tool_not_in_profile")
                r = await client.call_tool("vox_memory_recall", {"key": 3})
                check(r.is_error and structured(r)["error"]["code"] == "invalid_arguments", f"[{mode}] wrong argument type is an isError result")
        finally:
            subprocess.run([VOX, "daemon", "stop"], env=env_for(ws, home), cwd=ws, capture_output=True)


async def main() -> None:
    check(os.path.exists(VOX), f"vox binary at {VOX}")
    await run_mode("legacy")
    await run_mode("auto")


asyncio.run(main())
