"""The embedded mesh with the official Python MCP SDK against the real `vox mcp --profile
orchestrator,mesh`: agents (each a client presenting its credential) message each other through
the daemon's journey store; delivery is at least once with acknowledgements, inbox reads are
idempotent, history is bounded and by thread, the sender is who the caller is, and unacked
messages survive a daemon restart.

Run: .venv/bin/python tests/python/test_mesh.py [path/to/vox]
"""

import asyncio
import json
import os
import subprocess
import sys
import tempfile

from mcp import Client, StdioServerParameters

VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok   {what}")


async def ok(c: Client, tool: str, args: dict) -> dict:
    r = await c.call_tool(tool, args)
    if r.is_error:
        check(False, f"{tool} {json.dumps(args)} succeeds (got {json.dumps(r.structured_content)})")
    return r.structured_content


async def fails(c: Client, tool: str, args: dict, code: str, needle: str, what: str) -> None:
    r = await c.call_tool(tool, args)
    err = (r.structured_content or {}).get("error") or {}
    check(r.is_error and err.get("code") == code and needle in err.get("message", ""), f"{what} ({json.dumps(err)})")


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="voxmesh", dir="/tmp") as ws, \
            tempfile.TemporaryDirectory(prefix="voxmeshh", dir="/tmp") as home:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
        env.update({"VOX_HOME": home, "VOX_WORKSPACE": ws, "VOX_LOG": "warn"})

        def params(token: str | None = None) -> StdioServerParameters:
            e = dict(env, **({"VOX_AGENT_TOKEN": token} if token else {}))
            return StdioServerParameters(command=VOX, args=["mcp", "--profile", "orchestrator,mesh"], env=e, cwd=ws)

        try:
            async with Client(params()) as op:
                tokens = {}
                for a in ("a1", "a2"):
                    tokens[a] = (await ok(op, "vox_spawn_agent", {"agent_id": a, "profile": "mesh"}))["token"]
                # An agent's calls with side effects wait for a person unless allowed: messaging is.
                await ok(op, "vox_add_approval_allowlist_entry", {"tool": "vox_a2a_*", "note": "agents message each other"})
                node = await ok(op, "vox_populi_local_status", {})
                check(node["mode"] == "embedded" and sorted(node["agents"]) == ["a1", "a2"] and len(node["node_id"]) > 0,
                      f"this node is the whole mesh ({node})")
                nodes = (await ok(op, "vox_mesh_nodes", {}))["nodes"]
                check(len(nodes) == 1 and nodes[0]["node_id"] == node["node_id"], "vox_mesh_nodes lists it")

                async with Client(params(tokens["a1"])) as a1, Client(params(tokens["a2"])) as a2:
                    sent = await ok(a1, "vox_a2a_send", {"to": "a2", "body": "can you review src/lib.rs?", "thread": "review-1"})
                    m = sent["message"]
                    check(m["sender"] == "a1" and m["recipient"] == "a2" and m["thread"] == "review-1",
                          "the sender is the calling agent, never a name the request states")
                    first = (await ok(a2, "vox_a2a_inbox", {}))["messages"]
                    again = (await ok(a2, "vox_a2a_inbox", {}))["messages"]
                    check([x["id"] for x in first] == [m["id"]] and first == again,
                          "an inbox read is idempotent: the message comes back until acknowledged")
                    await fails(a2, "vox_a2a_inbox", {"agent_id": "a1"}, "invalid_arguments", "acts only as itself",
                                "an agent reads only its own inbox")
                    acked = await ok(a2, "vox_a2a_ack", {"message_ids": [m["id"]]})
                    twice = await ok(a2, "vox_a2a_ack", {"message_ids": [m["id"]]})
                    check(acked["acked"] == 1 and twice["acked"] == 0, "an acknowledgement counts once")
                    check((await ok(a2, "vox_a2a_inbox", {}))["messages"] == [], "an acknowledged message is not delivered again")
                    reply = await ok(a2, "vox_a2a_send", {"to": "a1", "body": "looks good", "thread": "review-1"})
                    h = await ok(a1, "vox_a2a_history", {"thread": "review-1"})
                    check([x["body"] for x in h["messages"]] == ["looks good", "can you review src/lib.rs?"],
                          "the thread's history, newest first")
                    await ok(op, "vox_a2a_send", {"to": "a1", "body": "private to a1", "thread": "op-a1"})
                    check((await ok(a2, "vox_a2a_history", {"thread": "op-a1"}))["messages"] == [],
                          "an agent's history shows only its own messages")
                    await fails(a1, "vox_a2a_send", {"to": "nobody", "body": "hi"}, "not_found", "nobody",
                                "a message to an unknown agent is refused")
                    await fails(a1, "vox_a2a_send", {"to": "a2", "body": "x" * (64 * 1024 + 1)}, "invalid_arguments",
                                "`body`", "a body over 64 KiB is refused")
                    priv = [x["id"] for x in (await ok(a1, "vox_a2a_inbox", {}))["messages"] if x["body"] == "private to a1"]
                    await ok(a1, "vox_a2a_ack", {"message_ids": [reply["message"]["id"]] + priv})

                b = await ok(op, "vox_a2a_broadcast", {"body": "standup in 5"})
                check(sorted(b["recipients"]) == ["a1", "a2"] and b["message"]["sender"] == "operator",
                      "a broadcast from the operator reaches every agent")
                await ok(op, "vox_publish_message", {"topic": "releases", "body": "v1 is out"})
                board = (await ok(op, "vox_a2a_history", {"thread": "bulletin:releases"}))["messages"]
                check([x["body"] for x in board] == ["v1 is out"], "the bulletin board is read by its thread")
                stats = {q["recipient"]: q for q in (await ok(op, "vox_mesh_queue_stats", {}))["queues"]}
                check(stats["a1"]["pending"] == 1 and stats["a2"]["pending"] == 1 and stats["a2"]["acked"] == 1
                      and stats["a1"]["acked"] == 2,
                      f"queue statistics per recipient ({stats})")
                page = await ok(op, "vox_a2a_history", {"limit": 2})
                check(len(page["messages"]) == 2 and page["next_cursor"] is not None, "history is paged")
        finally:
            subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
        # Unacknowledged messages survive a restart.
        try:
            async with Client(params(tokens["a1"])) as a1:
                msgs = (await ok(a1, "vox_a2a_inbox", {}))["messages"]
                check([x["body"] for x in msgs] == ["standup in 5"], "an unacknowledged message survives a daemon restart")
        finally:
            subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)


asyncio.run(main())
