"""Long calls with the official Python MCP SDK, over stdio (`vox mcp`) and Streamable HTTP
(`vox serve`'s /mcp), in both wire eras: cancelling a `vox_skill_run` kills its process within
1 s, progress notifications of a kb ingest of 500 files, and log messages filtered by the
client's level (`logging/setLevel` in the 2025 era, the per-request `_meta` opt-in in 2026).

Run: .venv/bin/python tests/python/test_long_calls.py [path/to/vox]
"""

import asyncio
import os
import subprocess
import sys
import tempfile
import time
import warnings

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")
TOKEN = "long-calls-token-0123456789"
warnings.simplefilter("ignore")  # logging is deprecated by SEP-2577; 2025 clients still use it


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


def running(needle: str) -> bool:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if needle in f.read().replace(b"\0", b" ").decode(errors="replace"):
                    return True
        except OSError:
            pass
    return False


def workspace(ws: str) -> None:
    skill = os.path.join(ws, ".vox/skills/sleeper")
    os.makedirs(skill)
    with open(os.path.join(skill, "SKILL.md"), "w") as f:
        f.write("---\nname: sleeper\ndescription: Runs commands that take a while.\n---\nRun things.\n")
    docs = os.path.join(ws, "docs")
    os.makedirs(docs)
    for i in range(500):
        with open(os.path.join(docs, f"d{i:03}.md"), "w") as f:
            f.write(f"# Doc {i}\nword{i} text\n")


async def cancel_a_skill_run(client: Client, tag: str, marker: str) -> None:
    call = asyncio.create_task(client.call_tool(
        "vox_skill_run", {"id": "sleeper", "command": ["sleep", marker], "timeout_ms": 25000}))
    started = time.monotonic()
    while not running(f"sleep {marker}"):
        check(time.monotonic() - started < 15 and not call.done(), f"[{tag}] the sleep starts")
        await asyncio.sleep(0.02)
    call.cancel()  # the SDK sends notifications/cancelled (or, over 2026 HTTP, drops the stream)
    cancelled = time.monotonic()
    while running(f"sleep {marker}"):
        if time.monotonic() - cancelled > 1.0:
            check(False, f"[{tag}] the cancelled run's process is gone within 1 s")
        await asyncio.sleep(0.01)
    check(True, f"[{tag}] the cancelled run's process is gone within {time.monotonic() - cancelled:.3f} s")
    r = await client.call_tool("vox_skill_list", {})
    check(not r.is_error, f"[{tag}] the server keeps serving after a cancel")


async def progress_of_an_ingest(client: Client, tag: str) -> None:
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total))

    r = await client.call_tool("vox_kb_ingest", {"path": "docs/**/*.md"}, progress_callback=on_progress)
    check(not r.is_error and r.structured_content["ingested"] == 500, f"[{tag}] kb ingest of 500 files")
    check(len(seen) >= 500 and seen[-1] == (500, 500), f"[{tag}] {len(seen)} progress notifications, the last 500 of 500")


async def log_filtering(make_client, mode: str, tag: str) -> None:
    got = []

    async def on_log(params):
        got.append((params.level, params.logger, params.data))

    if mode == "legacy":
        async with make_client(logging_callback=on_log) as c:
            await c.call_tool("vox_kb_ingest", {"path": "docs/**/*.md"})
            check(got == [], f"[{tag}] no log messages before logging/setLevel")
            await c.set_logging_level("warning")
            await c.call_tool("vox_kb_ingest", {"path": "docs/**/*.md"})
            check(got == [], f"[{tag}] setLevel warning filters an info message")
            await c.set_logging_level("info")
            await c.call_tool("vox_kb_ingest", {"path": "docs/**/*.md"})
            check(got == [("info", "kb", "ingesting 500 documents")], f"[{tag}] setLevel info delivers it: {got}")
    else:
        async with make_client(logging_callback=on_log, log_level="warning") as c:
            await c.call_tool("vox_kb_ingest", {"path": "docs/**/*.md"})
            check(got == [], f"[{tag}] a request opted in at warning gets no info message")
        async with make_client(logging_callback=on_log, log_level="info") as c:
            await c.call_tool("vox_kb_ingest", {"path": "docs/**/*.md"})
            check(got == [("info", "kb", "ingesting 500 documents")], f"[{tag}] a request opted in at info gets it: {got}")


async def over_stdio() -> None:
    for mode in ("legacy", "auto"):
        with tempfile.TemporaryDirectory(prefix="voxlc", dir="/tmp") as ws, \
                tempfile.TemporaryDirectory(prefix="voxlch", dir="/tmp") as home:
            workspace(ws)
            params = StdioServerParameters(command=VOX, args=["mcp"], env=env_for(ws, home), cwd=ws)

            def make(**kw):
                return Client(params, mode=mode, **kw)

            tag = f"stdio {mode}"
            try:
                async with make() as c:
                    await cancel_a_skill_run(c, tag, f"30.{os.getpid()}{len(mode)}1")
                    await progress_of_an_ingest(c, tag)
                await log_filtering(make, mode, tag)
            finally:
                subprocess.run([VOX, "daemon", "stop"], env=env_for(ws, home), cwd=ws, capture_output=True)


async def over_http() -> None:
    with tempfile.TemporaryDirectory(prefix="voxlh", dir="/tmp") as ws:
        workspace(ws)
        env = env_for(ws, os.path.join(ws, "home"), {"VOX_MCP_HTTP_PORT": "0", "VOX_MCP_HTTP_BEARER_TOKEN": TOKEN,
                                                           "VOX_MCP_HTTP_ALLOWED_TOOLS": "vox_skill_run,vox_skill_list,vox_kb_ingest"})
        server = subprocess.Popen([VOX, "serve"], env=env, stdout=subprocess.PIPE, text=True, cwd=ws)
        try:
            url = "http://" + server.stdout.readline().split("http://")[1].split()[0] + "/mcp"
            for mode in ("legacy", "auto"):
                def make(**kw):
                    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
                    return Client(streamable_http_client(url, http_client=http), mode=mode, **kw)

                tag = f"/mcp {mode}"
                async with make() as c:
                    await cancel_a_skill_run(c, tag, f"30.{os.getpid()}{len(mode)}2")
                    await progress_of_an_ingest(c, tag)
                await log_filtering(make, mode, tag)
        finally:
            server.terminate()
            server.wait(timeout=15)


async def main() -> None:
    check(os.path.exists(VOX), f"vox binary at {VOX}")
    await over_stdio()
    await over_http()


asyncio.run(main())
