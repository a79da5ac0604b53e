"""The models profile end to end with the official Python MCP SDK (`pip install mcp`) against
the real `vox mcp --profile models` over stdio, with `scripted-model` (built with the
workspace) standing in for the hosted model APIs: OpenAI-compatible Chat Completions from the
environment's endpoint (VOX_LLM_*), and Anthropic Messages from a user overlay file.

1. The registry: every models-profile tool is listed; the environment's model is active; which
   providers have credentials is said by variable name, and no key value ever appears.
2. Suggestions are explained and follow recorded benchmarks; bad input names what was wrong.
3. Chat streams to the caller as progress, keeps its history with tokens and cost, retries a
   429, goes to the chosen active model's API, and a cancelled chat leaves no answer behind.
4. Durability: the active model, benchmarks and history survive a daemon restart.

Run: .venv/bin/python tests/python/test_models.py [path/to/vox]
Exits non-zero on the first failed check; prints one line per check.
"""

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile

from mcp import Client, StdioServerParameters
from scripted import requests, scripted_model

VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")
SCRIPTED = os.path.join(os.path.dirname(VOX), "scripted-model")
SECRET = "sk-scripted-secret-6f1d"
MODELS_TOOLS = {
    "vox_list_models", "vox_suggest_model", "vox_set_model", "vox_set_active_model",
    "vox_get_active_model", "vox_capability_model_manifest", "vox_credentials_status",
    "vox_benchmark_record", "vox_benchmark_list", "vox_chat_message", "vox_chat_history",
}


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok   {what}")


SCRIPT = {"actors": [
    {"name": "chat", "match": "CHAT-MARK", "steps": [
        [{"say": "Hello from the scripted model"}, {"usage": {"input_tokens": 40, "output_tokens": 6}}],
        [{"status": 429}],
        [{"say": "after a retry"}],
        [{"say": "slow start"}, {"hang": True}],
    ]},
    {"name": "research", "match": "<question>What does add do", "steps": [
        [{"say": json.dumps({"claims": [
            {"text": "add returns the sum of its two arguments", "citations": [{"file": "src/lib.rs", "lines": [1, 1]}]},
            {"text": "add is tested in lines 40-41", "citations": [{"file": "src/lib.rs", "lines": [40, 41]}]},
            {"text": "production runs on fly.io", "citations": [{"memory": "deploy/target"}]},
            {"text": "the system has users", "citations": [{"file": "../../etc/passwd", "lines": [1, 1]}]},
            {"text": "add is fast", "citations": []},
        ]})}, {"usage": {"input_tokens": 300, "output_tokens": 80}}],
    ]},
    {"name": "resumed", "match": "<question>Where is it deployed", "steps": [
        [{"hang": True}],
        [{"say": json.dumps({"claims": [{"text": "it is deployed on fly.io", "citations": [{"memory": "deploy/target"}]}]})}],
    ]},
    {"name": "tooluser", "match": "TOOLS-MARK", "steps": [
        [{"call": {"name": "vox_benchmark_record", "arguments": {"model_id": "env/scripted-chat", "category": "chat", "score": 0.1}}},
         {"call": {"name": "vox_list_models", "arguments": {"needs": ["image"]}}}],
        [{"say": "I listed the models; recording was not allowed."}],
    ]},
    {"name": "planner", "match": "<goal>", "steps": [
        [{"say": json.dumps({"steps": [
            {"key": "impl", "title": "Implement add", "files": ["src/lib.rs"]},
            {"key": "test", "title": "Test add", "after": ["impl"]}]})}],
        [{"say": json.dumps({"steps": [{"key": "a", "title": "A", "after": ["b"]}, {"key": "b", "title": "B", "after": ["a"]}]})}],
        [{"say": "I would rather not plan."}],
    ]},
    {"name": "claude", "match": "CLAUDE-MARK", "steps": [
        [{"say": "Anthropic says hi"}, {"usage": {"input_tokens": 1000000, "output_tokens": 1000000}}],
        [{"say": "Anthropic says hi again"}, {"usage": {"input_tokens": 1000000, "output_tokens": 1000000}}],
    ]},
]}


def env_for(ws: str, home: str, base: str, overlay: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("VOX_") and k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY")}
    env.update({"VOX_HOME": home, "VOX_WORKSPACE": ws, "VOX_LOG": "warn",
                "VOX_LLM_API": "chat", "VOX_LLM_BASE_URL": base, "VOX_LLM_MODEL": "scripted-chat",
                "VOX_MODELS_FILE": overlay, "SCRIPTED_KEY": SECRET,
                # Retries here wait the scripted 429 out quickly.
                "VOX_LLM_RETRIES": "2"})
    return env


async def ok(c: Client, tool: str, args: dict) -> dict:
    r = await c.call_tool(tool, args)
    out = r.structured_content
    if r.is_error:
        check(False, f"{tool} {json.dumps(args)} succeeds (got {json.dumps(out)})")
    return out


async def fails(c: Client, tool: str, args: dict, code: str, needle: str, what: str) -> None:
    r = await c.call_tool(tool, args)
    err = (r.structured_content or {}).get("error") or {}
    check(r.is_error and err.get("code") == code and needle in err.get("message", ""),
          f"{what} ({json.dumps(err)})")


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="voxm", dir="/tmp") as tmp:
        ws, home = os.path.join(tmp, "ws"), os.path.join(tmp, "home")
        os.makedirs(os.path.join(ws, "src"))
        os.makedirs(home)
        with open(os.path.join(ws, "src", "lib.rs"), "w") as f:
            f.write("pub fn add(a: i32, b: i32) -> i32 { a + b }\n// more\n")
        with scripted_model(SCRIPTED, tmp, SCRIPT) as (base, log):
            overlay = os.path.join(tmp, "models.toml")
            with open(overlay, "w") as f:
                f.write(f'[providers.scripted-anthropic]\napi = "anthropic"\nbase_url = "{base}"\n'
                        'api_key_env = "SCRIPTED_KEY"\n\n'
                        '[models."scripted-anthropic/claude-x"]\nprovider = "scripted-anthropic"\nname = "claude-x"\n'
                        'context_window = 200000\ntool_calling = true\nprice_input_per_mtok = 3.0\n'
                        'price_output_per_mtok = 15.0\nstrengths = ["review"]\n')
            env = env_for(ws, home, base, overlay)
            params = StdioServerParameters(command=VOX, args=["mcp", "--profile", "models"], env=env, cwd=ws)
            seen_outputs: list[str] = []
            try:
                await story(params, log, seen_outputs)
                await after_restart(params, ws, env, seen_outputs)
                rparams = StdioServerParameters(command=VOX, args=["mcp", "--profile", "knowledge,models,research"],
                                                env=env, cwd=ws)
                subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
                await research(rparams, ws, env, log)
                subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
                await chat_with_tools(StdioServerParameters(command=VOX, args=["mcp", "--profile", "models,skills"],
                                                            env=env, cwd=ws), ws, log)
                subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
                await planning(StdioServerParameters(command=VOX, args=["mcp", "--profile", "orchestrator"],
                                                     env=env, cwd=ws))
                subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
                async with Client(StdioServerParameters(command=VOX, args=["mcp", "--profile", "dev"], env=env, cwd=ws)) as c:
                    await ok(c, "vox_chat_message", {"message": "CLAUDE-MARK again", "model_id": "scripted-anthropic/claude-x"})
                    days = (await ok(c, "vox_cost_history", {}))["days"]
                    spent = sum(d["cost_usd"] for d in days)
                    check(abs(spent - 18.0) < 1e-6, f"with the attention subsystem up, model spend is in its ledger ({spent} USD)")
            finally:
                subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
            check(all(SECRET not in o for o in seen_outputs), "no tool output ever holds a key's value")


async def story(params, log: str, outputs: list[str]) -> None:
    async with Client(params) as c:
        async def call(tool, args):
            out = await ok(c, tool, args)
            outputs.append(json.dumps(out))
            return out

        names = {t.name for t in (await c.list_tools()).tools}
        check(names == MODELS_TOOLS, f"the models profile lists its 11 tools ({sorted(names)})")

        listed = await call("vox_list_models", {})
        by_id = {m["id"]: m for m in listed["models"]}
        check(listed["active_model"] == "env/scripted-chat", "the environment's model is active")
        check(by_id["env/scripted-chat"]["api"] == "chat" and by_id["env/scripted-chat"]["has_credentials"],
              "the environment's endpoint is a chat provider that needs no key")
        check(by_id["scripted-anthropic/claude-x"]["has_credentials"] and not by_id["openai/gpt-5"]["has_credentials"],
              "credentials: the overlay's provider has its key, openai has none here")
        tool_models = (await call("vox_list_models", {"needs": ["image"]}))["models"]
        check(all("image" in m["input_modalities"] for m in tool_models) and tool_models,
              "vox_list_models filters by what a model needs")
        await fails(c, "vox_list_models", {"needs": ["telepathy"]}, "invalid_arguments", "`telepathy`",
                    "an unknown need is refused, named")

        creds = {p["provider"]: p for p in (await call("vox_credentials_status", {}))["providers"]}
        check(creds["scripted-anthropic"] == {"provider": "scripted-anthropic", "api_key_env": "SCRIPTED_KEY", "set": True}
              and creds["openai"]["set"] is False and creds["ollama"]["api_key_env"] is None,
              "vox_credentials_status names variables and whether they are set")
        manifest = await call("vox_capability_model_manifest", {})
        check(len(manifest["sources"]) == 3 and "the environment" in manifest["sources"][2],
              f"the manifest says where it came from ({manifest['sources']})")

        s = await call("vox_suggest_model", {"task_category": "review"})
        check(s["model_id"] is not None and all("why" in r and r["parts"] for r in s["ranked"]),
              f"vox_suggest_model picks a callable model and explains every score ({s['model_id']})")
        check(any(e["model_id"] == "ollama/llama3.1" for e in (await call("vox_suggest_model", {"task_category": "vision"}))["excluded"]),
              "a model without image input is left out of vision, named")
        await fails(c, "vox_suggest_model", {"task_category": "poetry"}, "invalid_arguments", "`poetry` is not one of",
                    "an unknown category is refused")
        for score in (1.0, 0.9):
            await call("vox_benchmark_record", {"model_id": "env/scripted-chat", "category": "review", "score": score, "metric": "verdicts"})
        await fails(c, "vox_benchmark_record", {"model_id": "env/scripted-chat", "category": "review", "score": 1.5},
                    "invalid_arguments", "from 0 to 1", "a score above 1 is refused")
        await fails(c, "vox_benchmark_record", {"model_id": "no/such", "category": "review", "score": 0.5},
                    "not_found", "no/such", "a benchmark of an unknown model is refused")
        s = await call("vox_suggest_model", {"task_category": "review"})
        check(s["model_id"] == "env/scripted-chat" and "over 2 run(s)" in s["ranked"][0]["why"],
              "recorded benchmarks lead the suggestion")
        b = await call("vox_benchmark_list", {"category": "review"})
        check(len(b["benchmarks"]) == 2 and abs(b["means"][0]["mean"] - 0.95) < 1e-9, "vox_benchmark_list with means")

        # Chat, streamed to the caller as progress.
        pieces = []

        async def on_progress(progress, total, message):
            pieces.append(message)

        r = await c.call_tool("vox_chat_message", {"message": "CHAT-MARK say hello", "session": "s1"},
                              progress_callback=on_progress)
        a = r.structured_content
        outputs.append(json.dumps(a))
        check(not r.is_error and a["text"] == "Hello from the scripted model", f"a chat answer ({a})")
        check("".join(p or "" for p in pieces) == a["text"] and len(pieces) == 5,
              f"the answer streamed as {len(pieces)} progress notifications")
        check(a["input_tokens"] == 40 and a["output_tokens"] == 6 and a["cost_usd"] == 0 and a["attempts"] == 1,
              "tokens and cost are accounted")
        a = await call("vox_chat_message", {"message": "CHAT-MARK again", "session": "s1"})
        check(a["text"] == "after a retry" and a["attempts"] == 2, "a 429 is retried")
        body = requests(log)[-1]["body"]
        check([m["content"] for m in body["messages"]][:3] == ["CHAT-MARK say hello", "Hello from the scripted model", "CHAT-MARK again"],
              "the session's history goes with the next message")

        # A cancelled chat: the call ends at once and no answer is kept.
        task = asyncio.create_task(c.call_tool("vox_chat_message", {"message": "CHAT-MARK slowly", "session": "s1"}))
        for _ in range(500):
            if any(q.get("step") == 3 for q in requests(log)):
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        h = await call("vox_chat_history", {"session": "s1"})
        check([m["role"] for m in h["messages"]] == ["user", "assistant", "user", "assistant", "user"],
              "the cancelled message is kept without an answer")

        # The chosen active model, on its own API.
        await fails(c, "vox_set_active_model", {"model_id": "no/such"}, "not_found", "no/such", "an unknown model cannot be made active")
        await call("vox_set_active_model", {"model_id": "scripted-anthropic/claude-x"})
        act = await call("vox_get_active_model", {})
        check(act["model_id"] == "scripted-anthropic/claude-x" and act["source"] == "chosen", "the active model is the chosen one")
        a = await call("vox_chat_message", {"message": "CLAUDE-MARK hello", "session": "s2"})
        last = requests(log)[-1]
        check(last["path"] == "/v1/messages" and a["text"] == "Anthropic says hi", "chat reaches the active model's API (Anthropic Messages)")
        check(abs(a["cost_usd"] - 18.0) < 1e-9, f"its cost from the registry's prices ({a['cost_usd']})")
        await fails(c, "vox_set_model", {"agent_id": "nobody", "model_id": "env/scripted-chat"}, "not_found", "nobody",
                    "an unknown agent gets no model")


async def after_restart(params, ws: str, env: dict, outputs: list[str]) -> None:
    subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True, check=True)
    async with Client(params) as c:
        act = await ok(c, "vox_get_active_model", {})
        check(act["model_id"] == "scripted-anthropic/claude-x", "the active model survives a daemon restart")
        h = await ok(c, "vox_chat_history", {"session": "s1", "limit": 2})
        outputs.append(json.dumps(h))
        check(len(h["messages"]) == 2 and h["next_cursor"] is not None, "chat history survives, paged")
        older = await ok(c, "vox_chat_history", {"session": "s1", "cursor": h["next_cursor"]})
        check([m["content"] for m in older["messages"]][0] == "CHAT-MARK say hello", "the older page")
        b = await ok(c, "vox_benchmark_list", {})
        check(len(b["benchmarks"]) == 2, "benchmarks survive")


async def research(params, ws: str, env: dict, log: str) -> None:
    async with Client(params) as c:
        await ok(c, "vox_set_active_model", {"model_id": "env/scripted-chat"})
        await ok(c, "vox_memory_store", {"key": "deploy/target", "value": "production runs on fly.io"})
        r = await ok(c, "vox_research_run", {"question": "What does add do, and where does production run?"})
        kept = [k["text"] for k in r["kept"]]
        dropped = {d["text"]: d["reason"] for d in r["dropped"]}
        check(kept == ["add returns the sum of its two arguments", "production runs on fly.io"],
              f"claims whose citations resolve are kept ({kept})")
        check("lines 40-41 do not exist" in dropped["add is tested in lines 40-41"],
              f"a claim citing a line that does not exist is dropped, named ({dropped})")
        check("not a plain workspace-relative path" in dropped["the system has users"]
              and dropped["add is fast"] == "the claim cites nothing",
              "a citation outside the workspace and a claim citing nothing are dropped")
        cite = r["kept"][0]["citations"][0]
        check(cite["kind"] == "file" and cite["start_line"] == 1 and len(cite["sha256"]) == 64,
              "a kept file citation carries its line range and content hash")
        check(r["run"]["state"] == "done" and r["run"]["input_tokens"] == 300, "the run is done, its tokens kept")
        evidence = requests(log)[-1]["body"]["messages"][-1]["content"]
        check("[file src/lib.rs]" in evidence and "[memory deploy/target]" in evidence,
              f"the model was shown workspace and memory evidence ({evidence!r})")
        run_id = r["run"]["id"]
        d = await ok(c, "vox_news_draft", {"run_id": run_id, "title": "What add does"})
        check(d["body"].startswith("# What add does") and "src/lib.rs lines 1-1" in d["body"]
              and "fly.io" in d["body"], "a draft from the kept claims, with their citations")
        e = await ok(c, "vox_research_evaluate", {"run_id": run_id})
        check(e["holding"] == 2 and e["stale"] == 0, "the claims hold while nothing changed")
        with open(os.path.join(ws, "src", "lib.rs"), "w") as f:
            f.write("pub fn add(a: i64, b: i64) -> i64 { a + b }\n// more\n")
        e = await ok(c, "vox_research_evaluate", {"run_id": run_id})
        check(e["stale"] == 1 and "src/lib.rs lines 1-1 changed" in e["claims"][0]["changes"][0],
              f"a changed cited line makes its claim stale ({e['claims'][0]})")
        await fails(c, "vox_research_status", {"run_id": 999}, "not_found", "999", "an unknown run is named")

        # A run cut by a daemon killed mid-answer is resumed by the next daemon.
        task = asyncio.create_task(c.call_tool("vox_research_run", {"question": "Where is it deployed?"}))
        for _ in range(500):
            if any(q.get("actor") == "resumed" for q in requests(log)):
                break
            await asyncio.sleep(0.01)
        status = json.loads(subprocess.run([VOX, "daemon", "status", "--json"], env=env, cwd=ws,
                                           capture_output=True, text=True).stdout)
        os.kill(status["ping"]["pid"], 9)
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 5)
    async with Client(params) as c:
        done = None
        for _ in range(500):
            runs = (await ok(c, "vox_research_list", {}))["runs"]
            done = next((x for x in runs if x["question"] == "Where is it deployed?"), None)
            if done and done["state"] == "done":
                break
            await asyncio.sleep(0.02)
        check(done is not None and done["state"] == "done", f"the cut run was resumed and finished ({done})")
        st = await ok(c, "vox_research_status", {"run_id": done["id"]})
        check([k["text"] for k in st["kept"]] == ["it is deployed on fly.io"], "with its claims")
        first = (await ok(c, "vox_research_status", {"run_id": run_id}))
        check(len(first["kept"]) == 2 and len(first["dropped"]) == 3, "the earlier run survives the restart")

        # The daemon's research RPCs, on its socket: the research tools' own decision.
        answer = rpc(ws, "research.persist_claims", {"question": "Is add generic?", "source": "agent-7",
                                                    "claims": [{"text": "add takes i64", "citations": [{"file": "src/lib.rs", "lines": [1, 1]}]},
                                                               {"text": "add has 9 lines", "citations": [{"file": "src/lib.rs", "lines": [1, 9]}]}]})
        value = answer["result"]["outcome"]["value"]
        check(answer["result"]["outcome"]["kind"] == "ok" and len(value["kept"]) == 1 and len(value["dropped"]) == 1
              and value["run"]["model_id"] == "agent-7",
              "research.persist_claims on the daemon socket checks and keeps claims as a run")
        bad = rpc(ws, "research.run", ["not", "an", "object"])
        check("error" in bad and "as an object" in bad["error"]["message"], "a malformed research RPC is refused, named")
    # Under a profile without research, the RPCs are refused as the tools are.
    subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
    mparams = StdioServerParameters(command=VOX, args=["mcp", "--profile", "models"], env=env, cwd=ws)
    async with Client(mparams) as c:
        await ok(c, "vox_get_active_model", {})
        answer = rpc(ws, "research.run", {"question": "What does add do?"})
        outcome = answer["result"]["outcome"]
        check(outcome["kind"] == "denied" and outcome["code"] == "tool_not_in_profile",
              f"research.run under the models profile is denied as vox_research_run is ({outcome})")


async def chat_with_tools(params, ws: str, log: str) -> None:
    skill = os.path.join(ws, "skillsrc", "lister")
    os.makedirs(skill)
    with open(os.path.join(skill, "SKILL.md"), "w") as f:
        f.write("---\nname: lister\ndescription: Lists models only.\nmetadata:\n  vox-tools: vox_list_models\n---\nList the models.\n")
    async with Client(params) as c:
        await ok(c, "vox_skill_install", {"path": "skillsrc/lister"})
        before = len((await ok(c, "vox_benchmark_list", {"category": "chat"}))["benchmarks"])
        a = await ok(c, "vox_chat_message", {"message": "TOOLS-MARK list the vision models", "session": "tools",
                                             "tools": True, "active_skill": "lister"})
        uses = [(u["name"], u["ok"], u["code"]) for u in a["tool_calls"]]
        check(uses == [("vox_benchmark_record", False, "skill_tool_not_allowed"), ("vox_list_models", True, None)],
              f"the model's tool calls run as the caller's, within the active skill's list ({uses})")
        check(a["text"] == "I listed the models; recording was not allowed.", "and the answer follows the tool results")
        offered = {t["function"]["name"] for t in requests(log)[-2]["body"]["tools"]}
        check("vox_list_models" in offered and "vox_benchmark_record" not in offered and not any(n.startswith("vox_chat_") for n in offered),
              f"the model is offered only what the active skill allows ({sorted(offered)})")
        tool_msg = [m for m in requests(log)[-1]["body"]["messages"] if m["role"] == "tool"]
        check(len(tool_msg) == 2 and "skill_tool_not_allowed" in tool_msg[0]["content"] and "image" in tool_msg[1]["content"],
              "the tools' results (and the refusal) went back to the model")
        await fails(c, "vox_benchmark_list", {"category": "chat"}, "skill_tool_not_allowed", "lister",
                    "the skill the chat composer set stays the session's active skill")
        await ok(c, "vox_skill_use", {"id": None})
        after = len((await ok(c, "vox_benchmark_list", {"category": "chat"}))["benchmarks"])
        check(after == before, "the refused call changed nothing")


async def planning(params) -> None:
    async with Client(params) as c:
        p = await ok(c, "vox_plan", {"goal": "Add an add function", "model_id": "env/scripted-chat"})
        steps = {st["key"]: st for st in p["plan"]["steps"]}
        check(set(steps) == {"impl", "test"} and p["plan"]["goal"] == "Add an add function",
              f"vox_plan without steps: the model plans them ({sorted(steps)})")
        await fails(c, "vox_plan", {"goal": "Loop", "model_id": "env/scripted-chat"}, "invalid_arguments", "cycle",
                    "a model's plan with a cycle is refused as a given one would be")
        await fails(c, "vox_plan", {"goal": "Nothing", "model_id": "env/scripted-chat"}, "tool_error", "llm_answer_not_json",
                    "an answer that is no plan is refused, named")


def rpc(ws: str, method: str, params) -> dict:
    """One request on the workspace daemon's socket."""
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.path.join(ws, ".vox", "orchestrator.sock"))
    s.sendall((json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}) + "\n").encode())
    buf = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
        for line in buf.split(b"\n")[:-1]:
            msg = json.loads(line)
            if msg.get("id") == 1:
                s.close()
                return msg
    raise RuntimeError("the daemon closed the socket without answering")


asyncio.run(main())
