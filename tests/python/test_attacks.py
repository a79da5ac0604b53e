"""Attacks from outside that once got through (issue #32), each through a real client: the
official Python MCP SDK over stdio and Streamable HTTP, and plain HTTP for REST and `/v1/ws`.

1. A tool that calls tools acts as its caller: a chat's model (`vox_chat_message {"tools":
   true}`) is offered, and may run, only its caller's surface, less a person's tools (operator
   and internal exposure): an agent's model cannot store memories past the agent's profile, set
   the active model or approve a draft; over HTTP the allowlist holds for the model as for the
   caller.
2. Agents see and change only their own: no resources of others over stdio, and no agent takes
   a name the records use for a person (`operator`). (Changing others' tasks and plans is
   tested in process: crates/vox-tools-orchestration/tests/orchestration.rs.)
3. The workspace's `.vox` is not trusted blindly: a symlinked or world-writable one is refused,
   and state files are never written through a symlink.

Run: .venv/bin/python tests/python/test_attacks.py [path/to/vox]
Exits non-zero on the first failed check; prints one line per check.
"""

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from scripted import requests, scripted_model

VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")
SCRIPTED = os.path.join(os.path.dirname(VOX), "scripted-model")
WRITE = "write-token-attacks-0123456789"

# What a model asks for when it tries to leave its caller's scope: a public tool outside a
# `models` agent's profile, the operator's tools (a person's), an internal tool, and a
# workspace tool; then one tool its caller may call.
ESCAPES = [
    ("vox_memory_store", {"key": "escaped", "value": "by the model"}),
    ("vox_set_active_model", {"model_id": "env/scripted-chat"}),
    ("vox_attention_reset", {}),
    ("vox_news_approve", {"draft_id": 1}),
    ("vox_boot_report", {}),
    ("vox_spawn_agent", {"agent_id": "minion", "profile": "dev"}),
    ("add", {"a": 1, "b": 2}),
    ("vox_chat_message", {"message": "and again", "tools": True}),
]
ALLOWED = ("vox_list_models", {})


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok   {what}")


def escaping_actor(mark: str) -> dict:
    calls = [{"call": {"name": n, "arguments": a}} for n, a in ESCAPES + [ALLOWED]]
    return {"name": mark, "match": mark, "steps": [calls, [{"say": "done"}]]}


SCRIPT = {"actors": [escaping_actor(m) for m in ("AGENT-MARK", "OPERATOR-MARK", "HTTP-MARK", "REST-MARK")]}


def env_for(ws: str, home: str, base: str, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("VOX_") and k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY")}
    env.update({"VOX_HOME": home, "VOX_WORKSPACE": ws, "VOX_LOG": "warn", "VOX_LLM_API": "chat",
                "VOX_LLM_BASE_URL": base, "VOX_LLM_MODEL": "scripted-chat", "VOX_MCP_WORKSPACE_TOOLS": "1"})
    env.update(extra or {})
    return env


def structured(r) -> dict:
    return r.structured_content if r.structured_content is not None else json.loads(r.content[0].text)


async def ok(c: Client, tool: str, args: dict) -> dict:
    r = await c.call_tool(tool, args)
    check(not r.is_error, f"{tool} succeeds ({json.dumps(structured(r))[:300]})")
    return structured(r)


def offered(log: str, mark: str) -> set[str]:
    """The tools the model was offered in the first request that carried `mark`."""
    for r in requests(log):
        if any(mark in json.dumps(m.get("content", "")) for m in r["body"].get("messages", [])):
            return {t["function"]["name"] for t in r["body"].get("tools", [])}
    return set()


def escaped(answer: dict) -> list:
    """The model's calls that ran although they leave the caller's scope."""
    return [(u["name"], u["code"]) for u in answer["tool_calls"] if u["ok"] and u["name"] != ALLOWED[0]]


async def wait_for_approval(op: Client, tool: str, agent: str) -> dict:
    """The pending approval of `agent`'s call of `tool`, once it appears (at most 30 s)."""
    for _ in range(600):
        for a in (await ok(op, "vox_pending_approvals", {}))["approvals"]:
            if a["tool"] == tool and a["agent"] == agent:
                return a
        await asyncio.sleep(0.05)
    check(False, f"{agent}'s call of {tool} shows up in vox_pending_approvals")


def a_person_s(tool: dict) -> bool:
    return tool["exposure"] in ("operator", "internal")


def profile_tools(profile: str) -> list[dict]:
    out = subprocess.run([VOX, "profile", "show", profile, "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["tools"]


async def chat_acts_as_its_caller(ws: str, home: str, base: str, log: str) -> None:
    s = "[chat scope]"
    env = env_for(ws, home, base)
    op_params = StdioServerParameters(command=VOX, args=["mcp", "--profile", "dev"], env=env, cwd=ws)
    models_public = {t["name"] for t in profile_tools("models") if not a_person_s(t)} - {"vox_chat_message", "vox_chat_history"}
    dev_public = {t["name"] for t in profile_tools("dev") if not a_person_s(t)}
    async with Client(op_params) as op:
        active_before = await ok(op, "vox_get_active_model", {})
        token = (await ok(op, "vox_spawn_agent", {"agent_id": "m", "profile": "models"}))["token"]
        agent_params = StdioServerParameters(command=VOX, args=["mcp", "--profile", "dev"],
                                             env={**env, "VOX_AGENT_TOKEN": token}, cwd=ws)
        async with Client(agent_params) as m:
            chat = asyncio.create_task(ok(m, "vox_chat_message", {"message": "AGENT-MARK go", "session": "agent", "tools": True}))
            # The chat itself writes (its history): a person approves it, as any agent's write.
            approval = await wait_for_approval(op, "vox_chat_message", "m")
            await ok(op, "vox_resolve_approval", {"approval_id": approval["id"], "decision": "approve"})
            a = await asyncio.wait_for(chat, 60)
        check(escaped(a) == [], f"{s} an agent's model runs nothing outside the agent's public tools ({escaped(a)})")
        check(all(u["code"] in ("tool_not_in_profile", "unknown_tool") for u in a["tool_calls"][:-1]),
              f"{s} each escape is refused as the agent's own call would be ({a['tool_calls']})")
        check(a["tool_calls"][-1]["ok"], f"{s} and the tool the agent may call runs ({a['tool_calls'][-1]})")
        r = await op.call_tool("vox_memory_recall", {"key": "escaped"})
        check(r.is_error or not structured(r).get("memory"), f"{s} the agent's model stored nothing ({structured(r)})")
        got = offered(log, "AGENT-MARK")
        check(got == models_public, f"{s} the agent's model is offered exactly its public tools, less chat "
                                    f"(extra {sorted(got - models_public)}, missing {sorted(models_public - got)})")

        b = await ok(op, "vox_chat_message", {"message": "OPERATOR-MARK go", "session": "operator", "tools": True})
        ran = {n for n, _ in escaped(b)}
        check(ran <= {"vox_memory_store", "add"},
              f"{s} the operator's model runs none of a person's tools, nor internal ones ({sorted(ran)})")
        got = offered(log, "OPERATOR-MARK")
        check(not any(a_person_s(t) for t in profile_tools("dev") if t["name"] in got) and not any(n.startswith("vox_chat_") for n in got),
              f"{s} the operator's model is offered no operator or internal tool ({len(got)} offered)")
        check(got - {"add", "divide", "stats"} <= dev_public, f"{s} and nothing outside the operator's surface")
        check(await ok(op, "vox_get_active_model", {}) == active_before, f"{s} the active model is unchanged")
        agents = [x["agent"]["id"] for x in (await ok(op, "vox_agent_status", {}))["agents"]]
        check(agents == ["m"], f"{s} no model spawned an agent ({agents})")


async def agents_see_only_their_own(ws: str, home: str, base: str) -> None:
    s = "[agents' reach]"
    env = env_for(ws, home, base)
    op_params = StdioServerParameters(command=VOX, args=["mcp", "--profile", "dev"], env=env, cwd=ws)
    async with Client(op_params) as op:
        token = (await ok(op, "vox_spawn_agent", {"agent_id": "k", "profile": "knowledge"}))["token"]
        r = await op.call_tool("vox_spawn_agent", {"agent_id": "operator", "profile": "orchestrator"})
        check(r.is_error and "reserved" in json.dumps(structured(r)), f"{s} no agent may be named operator")
        params = StdioServerParameters(command=VOX, args=["mcp", "--profile", "dev"],
                                       env={**env, "VOX_AGENT_TOKEN": token}, cwd=ws)
        async with Client(params) as k:
            listed = [str(x.uri) for x in (await k.list_resources()).resources]
            check(listed == [], f"{s} an agent lists no resource of others (events, skills): {listed}")
            for uri in ("vox://orchestrator/events", "skill://lister/SKILL.md"):
                try:
                    await k.read_resource(uri)
                    refused = False
                except Exception:
                    refused = True
                check(refused, f"{s} an agent reading {uri} is refused")


def workspace_state_is_not_redirected(tmp: str) -> None:
    s = "[workspace dir]"
    elsewhere = os.path.join(tmp, "elsewhere")
    os.makedirs(elsewhere)
    for case in ("symlink", "world-writable", "log-symlink"):
        ws = os.path.join(tmp, f"ws-{case}")
        os.makedirs(ws)
        if case == "symlink":
            os.symlink(elsewhere, os.path.join(ws, ".vox"))
        else:
            os.makedirs(os.path.join(ws, ".vox"))
            if case == "world-writable":
                os.chmod(os.path.join(ws, ".vox"), 0o777)
            else:
                os.chmod(os.path.join(ws, ".vox"), 0o700)
                target = os.path.join(elsewhere, "victim.log")
                open(target, "w").close()
                os.symlink(target, os.path.join(ws, ".vox", "daemon.log"))
        env = env_for(ws, os.path.join(tmp, "home"), "http://127.0.0.1:9/v1")
        if case == "log-symlink":
            out = subprocess.run([VOX, "mcp", "--profile", "knowledge"], env=env, cwd=ws, input="",
                                 capture_output=True, text=True, timeout=60)
            check(os.path.getsize(target) == 0, f"{s} a daemon.log symlink is never written through")
            check("symlink" in out.stderr, f"{s} and the error says why ({out.stderr.strip()[-200:]})")
            continue
        out = subprocess.run([VOX, "daemon", "start", "--profile", "knowledge"], env=env, cwd=ws,
                             capture_output=True, text=True, timeout=60)
        subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
        check(out.returncode != 0 and ("symlink" in out.stderr or "anyone may write" in out.stderr),
              f"{s} a {case} .vox is refused, named ({out.stderr.strip()[-200:]})")
        check(os.listdir(elsewhere) == [] or case != "symlink", f"{s} nothing was written where the link points")


async def chat_over_http_keeps_the_allowlist(ws: str, home: str, base: str, log: str) -> None:
    s = "[chat scope, http]"
    allowed = "vox_chat_message,vox_memory_recall"
    env = env_for(ws, home, base, {"VOX_MCP_HTTP_PORT": "0", "VOX_MCP_HTTP_BEARER_TOKEN": WRITE,
                                   "VOX_MCP_HTTP_ALLOWED_TOOLS": allowed})
    server = subprocess.Popen([VOX, "serve", "--profile", "dev"], env=env, cwd=ws, stdout=subprocess.PIPE, text=True)
    try:
        origin = "http://" + server.stdout.readline().split("http://")[1].split()[0]
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {WRITE}"}, timeout=60)
        async with Client(streamable_http_client(f"{origin}/mcp", http_client=http)) as c:
            a = await ok(c, "vox_chat_message", {"message": "HTTP-MARK go", "session": "http", "tools": True})
        check(escaped(a) == [], f"{s} over /mcp the model runs nothing outside the allowlist ({escaped(a)})")
        got = offered(log, "HTTP-MARK")
        check(got == {"vox_memory_recall"}, f"{s} and is offered only the allowlist, less chat ({sorted(got)})")
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {WRITE}"}, timeout=60) as h:
            r = await h.post(f"{origin}/v1/tools/call", json={"name": "vox_chat_message",
                                                                "args": {"message": "REST-MARK go", "tools": True}})
            check(r.status_code == 200, f"{s} REST chat answers ({r.status_code} {r.text[:200]})")
            check(escaped(r.json()["result"]) == [], f"{s} over REST too ({escaped(r.json()['result'])})")
    finally:
        subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
        server.wait(timeout=20)


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="voxatk", dir="/tmp") as tmp:
        workspace_state_is_not_redirected(tmp)
        ws, home = os.path.join(tmp, "ws"), os.path.join(tmp, "home")
        os.makedirs(os.path.join(ws, "tools"))
        os.makedirs(home)
        with open(os.path.join(ws, "tools", "math.vox"), "w") as f:
            f.write('@tool "Add two integers"\nfn add(a: int, b: int) to int {\n    a + b\n}\n')
        with scripted_model(SCRIPTED, tmp, SCRIPT) as (base, log):
            try:
                await chat_acts_as_its_caller(ws, home, base, log)
                await agents_see_only_their_own(ws, home, base)
            finally:
                subprocess.run([VOX, "daemon", "stop"], env=env_for(ws, home, base), cwd=ws, capture_output=True)
            await chat_over_http_keeps_the_allowlist(ws, home, base, log)


if __name__ == "__main__":
    asyncio.run(main())
