"""Upstream MCP servers behind vox, with the official Python MCP SDK as the client: the npm
reference `server-everything` and a misbehaving one (`tests/upstream/faulty.mjs`) declared in
`.vox/servers.toml`, reached through `vox mcp` (both wire eras) and `vox serve`'s /mcp: tools
listed as `<server>__<tool>`, a call, progress, the server's sampling and elicitation requests
answered by this client, resources and prompts, and `list_changed` when a server's tools change.

Run: .venv/bin/python tests/python/test_upstream.py [path/to/vox]
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import warnings

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from workspace_harness import VOX, check, env_for

warnings.simplefilter("ignore")  # sampling is deprecated by SEP-2577; clients still use it

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVERYTHING = os.path.join(ROOT, "tests/upstream/node_modules/.bin/mcp-server-everything")
FAULTY = os.path.join(ROOT, "tests/upstream/faulty.mjs")
TOKEN = "upstream-test-token-0123456789abcdef"
# server-everything, its echo classified public, read-only and for the read role.
EVERY_TOML = f"""[servers.every]
command = {json.dumps(EVERYTHING)}
args = ["stdio"]
[servers.every.tools.echo]
exposure = "public"
side_effect = "read_only"
read_role = true
"""


def workspace(ws: str) -> None:
    # `dev` over HTTP serves only public tools; this profile serves both servers whole.
    os.makedirs(os.path.join(ws, ".vox", "profiles"))
    with open(os.path.join(ws, ".vox", "profiles", "full.v1.yaml"), "w") as f:
        f.write("id: full\ndescription: both servers\ntools:\n  include: [every__*, chg__*]\n"
                "requires: []\nmax_exposure: operator\n")
    with open(os.path.join(ws, "tools.json"), "w") as f:
        json.dump({"alpha": "first"}, f)
    with open(os.path.join(ws, ".vox", "servers.toml"), "w") as f:
        f.write(EVERY_TOML + f"""[servers.chg]
command = "node"
args = [{json.dumps(FAULTY)}, {json.dumps(ws)}]
trust_new_tools = true
""")


def text(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def wait_for_tool(c, name: str) -> list:
    for _ in range(100):
        names = [t.name for t in (await c.list_tools()).tools]
        if name in names:
            return names
        await asyncio.sleep(0.1)
    check(False, f"{name} listed")


async def exercise(make, ws: str, tag: str) -> None:
    sampled, elicited, changed = [], [], asyncio.Event()

    async def sample(context, params):
        sampled.append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", model="scripted",
                                         content=types.TextContent(type="text", text="a sampled answer"))

    async def elicit(context, params):
        elicited.append(params.message)
        return types.ElicitResult(action="decline")

    async def on_message(message):
        root = getattr(message, "root", message)
        if isinstance(root, types.ToolListChangedNotification):
            changed.set()

    async with make(sampling_callback=sample, elicitation_callback=elicit, message_handler=on_message) as c:
        names = await wait_for_tool(c, "every__echo")
        check("chg__alpha" in names and "every__get-sum" in names, f"[{tag}] both servers' tools listed as <server>__<tool>")
        tool = next(t for t in (await c.list_tools()).tools if t.name == "every__echo")
        meta = tool.meta or {}
        check(meta.get("vox_source") == "upstream" and meta.get("vox_server") == "every", f"[{tag}] _meta says where a tool is from")
        r = await c.call_tool("every__echo", {"message": "hi"})
        check(not r.is_error and "Echo: hi" in text(r), f"[{tag}] a call through vox: {text(r)!r}")

        seen = []

        async def on_progress(progress, total, message):
            seen.append(progress)

        r = await c.call_tool("every__trigger-long-running-operation", {"duration": 1, "steps": 3},
                              progress_callback=on_progress)
        check(not r.is_error and len(seen) >= 2, f"[{tag}] the server's progress reaches the client ({len(seen)})")

        r = await c.call_tool("every__trigger-sampling-request", {"prompt": "tea", "maxTokens": 10})
        check(not r.is_error and "a sampled answer" in text(r) and sampled, f"[{tag}] the server's sampling request is answered by this client")
        r = await c.call_tool("every__trigger-elicitation-request", {})
        check(not r.is_error and elicited, f"[{tag}] the server's elicitation request reaches this client ({elicited[:1]})")

        resources = (await c.list_resources()).resources
        doc = next((x for x in resources if str(x.uri).startswith("upstream://every/")), None)
        check(doc is not None, f"[{tag}] the server's resources are listed under upstream://every/")
        body = await c.read_resource(str(doc.uri))
        check(len(body.contents) == 1, f"[{tag}] and read through vox")
        prompts = [p.name for p in (await c.list_prompts()).prompts]
        check("every__simple-prompt" in prompts, f"[{tag}] its prompts as every__<prompt>")
        got = await c.get_prompt("every__args-prompt", {"city": "Lyon"})
        check("Lyon" in json.dumps([m.content.text for m in got.messages if getattr(m.content, "text", None)]),
              f"[{tag}] a prompt got through vox")

        with open(os.path.join(ws, "tools.json"), "w") as f:
            json.dump({"alpha": "first", "beta": "added"}, f)
        changed.clear()
        if tag.endswith("auto"):
            # The 2026-07-28 era: change events come on a listen stream the client opens.
            async with c.listen(tools_list_changed=True) as sub:
                await c.call_tool("chg__reload", {})
                await asyncio.wait_for(sub.__anext__(), 10)
        else:
            await c.call_tool("chg__reload", {})
            await asyncio.wait_for(changed.wait(), 10)
        names = await wait_for_tool(c, "chg__beta")
        check("chg__beta" in names, f"[{tag}] the server's list_changed reaches the client, and the new tool is listed")


READ = "upstream-read-token-0123456789abcdef"
PROFILE = """id: team
description: a memory tool, the approval tools and three tools of the reference server
tools:
  include: [vox_memory_recall, vox_spawn_agent, vox_pending_approvals, vox_resolve_approval,
            every__echo, every__get-sum, every__get-env]
requires: [memory, agent_fleet]
max_exposure: operator
"""


def leak_workspace(ws: str) -> None:
    """echo: public, read-only, for the read role; get-sum: public but a network call, not for
    the read role; get-env: not classified (operator, the worst side effects)."""
    os.makedirs(os.path.join(ws, ".vox", "profiles"))
    with open(os.path.join(ws, ".vox", "profiles", "team.v1.yaml"), "w") as f:
        f.write(PROFILE)
    with open(os.path.join(ws, ".vox", "servers.toml"), "w") as f:
        f.write(EVERY_TOML + """[servers.every.tools.get-sum]
exposure = "public"
side_effect = "network"
""")


async def denied(c, tool: str, args: dict) -> str:
    r = await c.call_tool(tool, args)
    if not r.is_error:
        return "ran"
    return (r.structured_content or {}).get("error", {}).get("code", text(r))


async def leak_matrix() -> None:
    """A workspace profile over upstream tools: each path reaches exactly what its caller may."""
    s = "[upstream leak matrix]"
    args = {"every__echo": {"message": "x"}, "every__get-sum": {"a": 1, "b": 2}, "every__get-env": {}}
    with tempfile.TemporaryDirectory(prefix="voxul", dir="/tmp") as ws, \
            tempfile.TemporaryDirectory(prefix="voxulh", dir="/tmp") as home:
        leak_workspace(ws)
        env = env_for(ws, home)
        op_params = StdioServerParameters(command=VOX, args=["mcp", "--profile", "team"], cwd=ws, env=env)
        try:
            async with Client(op_params) as op:
                names = set(await wait_for_tool(op, "every__get-env"))
                upstream = {n for n in names if "__" in n}
                check(upstream == set(args), f"{s} stdio operator: exactly the profile's upstream tools ({sorted(upstream)})")
                check(await denied(op, "every__get-tiny-image", {}) == "tool_not_in_profile",
                      f"{s} stdio operator: a tool of the server outside the profile is refused")
                for tool, a in args.items():
                    check(await denied(op, tool, a) == "ran", f"{s} stdio operator: {tool} runs")
                token = structured_of(await op.call_tool("vox_spawn_agent", {"agent_id": "a", "profile": "team"}))
                check("token" in token, f"{s} an agent under the workspace profile ({token})")
                agent_params = StdioServerParameters(command=VOX, args=["mcp", "--profile", "team"], cwd=ws,
                                                     env={**env, "VOX_AGENT_TOKEN": token["token"]})
                async with Client(agent_params) as agent:
                    seen = {t.name for t in (await agent.list_tools()).tools if "__" in t.name}
                    check(seen == {"every__echo", "every__get-sum"}, f"{s} agent: lists only public upstream tools ({sorted(seen)})")
                    check(await denied(agent, "every__get-env", {}) == "tool_not_in_profile", f"{s} agent: an operator upstream tool is refused")
                    check(await denied(agent, "every__echo", {"message": "x"}) == "ran", f"{s} agent: a read-only public one runs")
                    call = asyncio.create_task(agent.call_tool("every__get-sum", {"a": 1, "b": 2}))
                    pending = []
                    for _ in range(100):
                        pending = structured_of(await op.call_tool("vox_pending_approvals", {})).get("approvals", [])
                        if pending:
                            break
                        await asyncio.sleep(0.1)
                    check(any(p["tool"] == "every__get-sum" for p in pending),
                          f"{s} agent: a side-effecting upstream call waits for a person ({pending})")
                    await op.call_tool("vox_resolve_approval", {"approval_id": pending[0]["id"], "decision": "approve"})
                    r = await asyncio.wait_for(call, 30)
                    check(not r.is_error, f"{s} agent: and runs once approved")
        finally:
            subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)

        http_env = env_for(ws, home, {"VOX_MCP_HTTP_PORT": "0", "VOX_MCP_HTTP_BEARER_TOKEN": TOKEN,
                                      "VOX_MCP_HTTP_READ_BEARER_TOKEN": READ})
        server = subprocess.Popen([VOX, "serve", "--profile", "team"], env=http_env, cwd=ws, stdout=subprocess.PIPE, text=True)
        try:
            origin = "http://" + server.stdout.readline().split("http://")[1].split()[0]
            for who, token, allowed in (("write", TOKEN, set(args)), ("read", READ, {"every__echo"})):
                http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
                async with Client(streamable_http_client(f"{origin}/mcp", http_client=http), mode="legacy") as c:
                    listed = set(await wait_for_tool(c, "every__echo"))
                    got = {n for n in listed if "__" in n}
                    check(got == allowed, f"{s} /mcp {who} token lists {sorted(got)}")
                    for tool, a in args.items():
                        code = await denied(c, tool, a)
                        check((code == "ran") == (tool in allowed), f"{s} /mcp {who} token: {tool} -> {code}")
                async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as h:
                    for tool, a in args.items():
                        r = await h.post(f"{origin}/v1/tools/call", json={"name": tool, "args": a})
                        check((r.status_code == 200) == (tool in allowed),
                              f"{s} REST {who} token: {tool} -> {r.status_code}")
                    if who == "read":
                        codes = {}
                        for tool in ("every__get-sum", "every__get-env"):
                            r = await h.post(f"{origin}/v1/tools/call", json={"name": tool, "args": args[tool]})
                            codes[tool] = r.json()["error"]["code"]
                        check(codes == {"every__get-sum": "insufficient_role", "every__get-env": "exposure_denied"},
                              f"{s} the read token never reaches a side-effecting upstream tool ({codes})")
        finally:
            server.terminate()
            server.wait(timeout=15)


def structured_of(r) -> dict:
    return r.structured_content or {}


async def reference_servers() -> None:
    """The npm filesystem server and PyPI's time and git servers, started by vox."""
    s = "[reference servers]"
    venv = os.path.join(ROOT, "tests/upstream/.venv/bin")
    fs = os.path.join(ROOT, "tests/upstream/node_modules/.bin/mcp-server-filesystem")
    if not os.path.exists(os.path.join(venv, "mcp-server-git")):
        check(not os.environ.get("CI"), "tests/upstream/.venv with mcp-server-time and mcp-server-git")
        print("skipped: tests/upstream/.venv is missing")
        return
    with tempfile.TemporaryDirectory(prefix="voxur", dir="/tmp") as ws, \
            tempfile.TemporaryDirectory(prefix="voxurh", dir="/tmp") as home:
        subprocess.run(["git", "init", "-q", ws], check=True)
        with open(os.path.join(ws, "notes.txt"), "w") as f:
            f.write("hello from the workspace\n")
        os.makedirs(os.path.join(ws, ".vox"))
        with open(os.path.join(ws, ".vox", "servers.toml"), "w") as f:
            f.write(f"""[servers.fs]
command = {json.dumps(fs)}
args = [{json.dumps(ws)}]
[servers.time]
command = {json.dumps(os.path.join(venv, "mcp-server-time"))}
[servers.git]
command = {json.dumps(os.path.join(venv, "mcp-server-git"))}
args = ["--repository", {json.dumps(ws)}]
""")
        env = env_for(ws, home)
        params = StdioServerParameters(command=VOX, args=["mcp"], cwd=ws, env=env)
        try:
            async with Client(params) as c:
                for tool in ("fs__read_text_file", "time__get_current_time", "git__git_status"):
                    await wait_for_tool(c, tool)
                r = await c.call_tool("fs__read_text_file", {"path": os.path.join(ws, "notes.txt")})
                check(not r.is_error and "hello from the workspace" in text(r), f"{s} server-filesystem reads a file through vox")
                r = await c.call_tool("time__get_current_time", {"timezone": "UTC"})
                check(not r.is_error and "UTC" in text(r), f"{s} mcp-server-time answers through vox")
                r = await c.call_tool("git__git_status", {"repo_path": ws})
                check(not r.is_error and "notes.txt" in text(r), f"{s} mcp-server-git answers through vox")
        finally:
            subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)


async def main() -> None:
    if not os.path.exists(EVERYTHING):
        if os.environ.get("CI"):
            check(False, "tests/upstream/node_modules (npm ci --prefix tests/upstream)")
        print("skipped: tests/upstream/node_modules is missing")
        return
    for mode in ("legacy", "auto"):
        with tempfile.TemporaryDirectory(prefix="voxup", dir="/tmp") as ws, \
                tempfile.TemporaryDirectory(prefix="voxuph", dir="/tmp") as home:
            workspace(ws)
            params = StdioServerParameters(command=VOX, args=["mcp"], cwd=ws, env=env_for(ws, home))
            try:
                await exercise(lambda **kw: Client(params, mode=mode, **kw), ws, f"stdio {mode}")
            finally:
                subprocess.run([VOX, "daemon", "stop"], env=env_for(ws, home), cwd=ws, capture_output=True)
    with tempfile.TemporaryDirectory(prefix="voxupw", dir="/tmp") as ws:
        workspace(ws)
        env = env_for(ws, os.path.join(ws, "home"), {"VOX_MCP_HTTP_PORT": "0", "VOX_MCP_HTTP_BEARER_TOKEN": TOKEN})
        server = subprocess.Popen([VOX, "serve", "--profile", "full"], env=env, stdout=subprocess.PIPE, text=True, cwd=ws)
        try:
            url = "http://" + server.stdout.readline().split("http://")[1].split()[0] + "/mcp"

            def make(**kw):
                http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
                return Client(streamable_http_client(url, http_client=http), mode="legacy", **kw)

            await exercise(make, ws, "/mcp legacy (workspace profile full)")
        finally:
            server.terminate()
            server.wait(timeout=15)
    await leak_matrix()
    await reference_servers()


asyncio.run(main())
