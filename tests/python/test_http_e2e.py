"""The official Python MCP SDK over Streamable HTTP (`/mcp`) of a real `vox serve`, with bearer
tokens, in both wire eras. Run: .venv/bin/python tests/python/test_http_e2e.py [path/to/vox]"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")
WRITE, READ = "write-token-0123456789", "read-token-0123456789"


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok   {what}")


def structured(result) -> dict:
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


async def session(url: str, token: str, mode: str):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="voxhttp", dir="/tmp") as ws:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
        env.update({"VOX_WORKSPACE": ws, "VOX_HOME": os.path.join(ws, "home"), "VOX_MCP_HTTP_PORT": "0",
                    "VOX_MCP_HTTP_BEARER_TOKEN": WRITE, "VOX_MCP_HTTP_READ_BEARER_TOKEN": READ, "VOX_LOG": "warn"})
        server = subprocess.Popen([VOX, "serve", "--profile", "knowledge"], env=env, stdout=subprocess.PIPE, text=True)
        try:
            line = server.stdout.readline()
            url = line.split("http://")[1].split()[0]
            url = f"http://{url}/mcp"
            for mode in ("legacy", "auto"):
                async with await session(url, WRITE, mode) as c:
                    tools = (await c.list_tools()).tools
                    names = [t.name for t in tools]
                    check("vox_memory_store" in names and len(names) == 17, f"[{mode}] write token lists the knowledge slice over /mcp")
                    check(all((t.output_schema or {}).get("type") == "object" for t in tools), f"[{mode}] every tool advertises an object outputSchema over /mcp")
                    r = await c.call_tool("vox_memory_store", {"key": "http/k", "value": "over http"})
                    check(not r.is_error, f"[{mode}] write token can store")
                    check((await c.list_resources()).resources == [], f"[{mode}] a profile without skills serves no resources over /mcp")
                async with await session(url, READ, mode) as c:
                    names = [t.name for t in (await c.list_tools()).tools]
                    check("vox_memory_store" not in names and "vox_memory_recall" in names, f"[{mode}] read token lists only read-role tools")
                    r = await c.call_tool("vox_memory_recall", {"key": "http/k"})
                    check(structured(r)["memory"]["value"] == "over http", f"[{mode}] read token recalls")
                    r = await c.call_tool("vox_memory_store", {"key": "x", "value": "y"})
                    check(r.is_error and structured(r)["error"]["code"] == "insufficient_role", f"[{mode}] read token store is insufficient_role")
                    r = await c.call_tool("vox_repo_log", {})
                    check(r.is_error and structured(r)["error"]["code"] == "tool_not_in_profile", f"[{mode}] out-of-profile tool is tool_not_in_profile")
            await sessions_belong_to_their_opener(url)
        finally:
            subprocess.run([VOX, "daemon", "stop"], env=env, capture_output=True)
            server.wait(timeout=20)


async def sessions_belong_to_their_opener(url: str) -> None:
    """A 2025-era session opened with the write token cannot be used or ended with the read token."""
    seen: list[str] = []

    async def remember(response) -> None:
        sid = response.headers.get("mcp-session-id")
        if sid:
            seen.append(sid)

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {WRITE}"}, timeout=30,
                              event_hooks={"response": [remember]})
    async with Client(streamable_http_client(url, http_client=http), mode="legacy") as c:
        await c.list_tools()
        check(bool(seen), "[legacy] the write token's session has an Mcp-Session-Id")
        sid = seen[-1]
        async with httpx2.AsyncClient(timeout=30) as other:
            headers = {"Authorization": f"Bearer {READ}", "Mcp-Session-Id": sid,
                       "Accept": "application/json, text/event-stream"}
            r = await other.delete(url, headers=headers)
            check(r.status_code == 404, f"[legacy] the read token cannot end the write token's session ({r.status_code})")
            body = {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}
            r = await other.post(url, headers={**headers, "Content-Type": "application/json"}, json=body)
            check(r.status_code == 404, f"[legacy] nor use it ({r.status_code})")
        r = await c.call_tool("vox_memory_recall", {"key": "http/k"})
        check(not r.is_error, "[legacy] the write token's session still works")


async def degraded() -> None:
    """exposure_denied and subsystem_not_booted over /mcp: attention+knowledge with a broken store."""
    with tempfile.TemporaryDirectory(prefix="voxhttp", dir="/tmp") as ws:
        open(os.path.join(ws, "blocker"), "w").write("x")
        env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
        env.update({"VOX_WORKSPACE": ws, "VOX_HOME": os.path.join(ws, "home"), "VOX_MCP_HTTP_PORT": "0",
                    "VOX_MCP_HTTP_BEARER_TOKEN": WRITE, "VOX_MCP_HTTP_READ_BEARER_TOKEN": READ, "VOX_LOG": "warn",
                    "VOX_DB_PATH": os.path.join(ws, "blocker", "journey.db")})
        server = subprocess.Popen([VOX, "serve", "--profile", "attention,knowledge"], env=env, stdout=subprocess.PIPE, text=True)
        try:
            url = "http://" + server.stdout.readline().split("http://")[1].split()[0] + "/mcp"
            async with await session(url, READ, "legacy") as c:
                r = await c.call_tool("vox_trust_override", {"agent": "a", "level": "high"})
                check(r.is_error and structured(r)["error"]["code"] == "exposure_denied", "read token on an operator tool is exposure_denied over /mcp")
            async with await session(url, WRITE, "auto") as c:
                r = await c.call_tool("vox_memory_recall", {"key": "k"})
                err = structured(r)["error"]
                check(r.is_error and err["code"] == "subsystem_not_booted" and err["subsystem"] == "memory", "a down subsystem is subsystem_not_booted over /mcp")
        finally:
            subprocess.run([VOX, "daemon", "stop"], env=env, capture_output=True)
            server.wait(timeout=20)


async def skills_over_http() -> None:
    """The skills profile over /mcp: skill tools, and skill:// resources for callers who may list skills."""
    with tempfile.TemporaryDirectory(prefix="voxhttp", dir="/tmp") as ws:
        os.makedirs(os.path.join(ws, ".vox", "skills", "demo"))
        with open(os.path.join(ws, ".vox", "skills", "demo", "SKILL.md"), "w") as f:
            f.write("---\nname: demo\ndescription: Say hello politely.\nmetadata:\n  vox-tools: vox_memory_*\n---\nGreet the user by name.\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
        env.update({"VOX_WORKSPACE": ws, "VOX_HOME": os.path.join(ws, "home"), "VOX_MCP_HTTP_PORT": "0",
                    "VOX_MCP_HTTP_BEARER_TOKEN": WRITE, "VOX_MCP_HTTP_READ_BEARER_TOKEN": READ, "VOX_LOG": "warn"})
        server = subprocess.Popen([VOX, "serve", "--profile", "knowledge,skills"], env=env, stdout=subprocess.PIPE, text=True)
        try:
            url = "http://" + server.stdout.readline().split("http://")[1].split()[0] + "/mcp"
            for mode in ("legacy", "auto"):
                for token in (WRITE, READ):
                    role = "write" if token == WRITE else "read"
                    async with await session(url, token, mode) as c:
                        uris = [str(r.uri) for r in (await c.list_resources()).resources]
                        check(uris == ["skill://index.json", "skill://demo/SKILL.md"], f"[{mode}/{role}] skill resources are listed over /mcp")
                        body = (await c.read_resource("skill://demo/SKILL.md")).contents[0].text
                        check("Greet the user" in body, f"[{mode}/{role}] SKILL.md is read over /mcp")
                        r = await c.call_tool("vox_skill_search", {"query": "hello"})
                        check(structured(r)["hits"][0]["id"] == "demo", f"[{mode}/{role}] skill search over /mcp")
            # A 2025-era /mcp session scopes the active skill; the 2026 era has no session, so
            # activation needs X-Vox-Session there.
            async with await session(url, WRITE, "legacy") as c, await session(url, WRITE, "legacy") as other:
                r = await c.call_tool("vox_skill_use", {"id": "demo"})
                check(not r.is_error, "[legacy] vox_skill_use activates in this /mcp session")
                r = await c.call_tool("vox_kb_query", {"query": "x"})
                check(r.is_error and structured(r)["error"]["code"] == "skill_tool_not_allowed", "[legacy] the active skill limits its /mcp session")
                r = await other.call_tool("vox_kb_query", {"query": "x"})
                check(not r.is_error, "[legacy] another /mcp session is not limited")
            async with await session(url, WRITE, "auto") as c:
                r = await c.call_tool("vox_skill_use", {"id": "demo"})
                check(r.is_error and "X-Vox-Session" in structured(r)["error"]["message"], "[auto] without a session, vox_skill_use asks for X-Vox-Session")
        finally:
            subprocess.run([VOX, "daemon", "stop"], env=env, capture_output=True)
            server.wait(timeout=20)


asyncio.run(main())
asyncio.run(degraded())
asyncio.run(skills_over_http())
