"""The orchestrator profile end to end with the official Python MCP SDK (`pip install mcp`)
against the real `vox mcp --profile knowledge,orchestrator` over stdio.

1. The operator (no VOX_AGENT_TOKEN) calls every tool of the `orchestrator` profile in one
   story: two agents, routing, locks and a conflict, a plan, a clarification gating a task, a
   handoff chain, completion and retry, rebalancing, events read by cursor, approvals, an
   emergency stop, retirement.
2. Bad input is an `isError` result whose `{"error": {"code", "message"}}` names what was wrong.
3. The agent path and its leak matrix: an agent's session lists and may call exactly its own
   profile's tools, never acts as another agent nor as the operator, waits for a person before
   a call with side effects, and stops working once retired; an unknown credential is refused
   at the handshake.
4. Durability: agents, tasks, the allowlist and pending clarifications survive a daemon restart.

Run: .venv/bin/python tests/python/test_orchestrator.py [path/to/vox]
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

VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")
PROFILE = "knowledge,orchestrator"
ACTIVE = ("queued", "assigned", "running")

# The orchestrator tools the operator called successfully, across every workspace.
exercised: set[str] = set()


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok   {what}")


def check_quietly(cond: bool, what: str) -> None:
    """A check that prints only when it fails (for what every call must satisfy)."""
    if not cond:
        check(cond, what)


def env_for(workspace: str, home: str, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
    env.update({"VOX_HOME": home, "VOX_WORKSPACE": workspace, "VOX_LOG": "warn"})
    env.update(extra or {})
    return env


def profile_tools(profile: str) -> list[dict]:
    out = subprocess.run([VOX, "profile", "show", profile, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["tools"]


def profile_slice(profile: str) -> list[str]:
    return [t["name"] for t in profile_tools(profile)]


class Workspace:
    """A temporary git workspace (one commit) with its own VOX_HOME; sessions of `vox mcp` on
    it, as the operator or as an agent presenting its credential."""

    def __init__(self, ws: str, home: str):
        self.ws, self.home = ws, home

    def client(self, token: str | None = None) -> Client:
        extra = {"VOX_AGENT_TOKEN": token} if token else {}
        params = StdioServerParameters(command=VOX, args=["mcp", "--profile", PROFILE],
                                       env=env_for(self.ws, self.home, extra), cwd=self.ws)
        return Client(params)  # mode "auto": the newest protocol era vox speaks

    def stop_daemon(self) -> None:
        subprocess.run([VOX, "daemon", "stop"], env=env_for(self.ws, self.home), cwd=self.ws, capture_output=True)


@contextlib.contextmanager
def workspace(prefix: str):
    """A fresh workspace whose daemon is stopped at the end, whatever happened."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir="/tmp") as ws, \
            tempfile.TemporaryDirectory(prefix=prefix + "h", dir="/tmp") as home:
        os.makedirs(os.path.join(ws, "src"))
        with open(os.path.join(ws, "src", "lib.rs"), "w") as f:
            f.write("pub fn build() {}\n")
        with open(os.path.join(ws, "README.md"), "w") as f:
            f.write("# demo\n")
        git = ["git", "-c", "user.name=vox", "-c", "user.email=vox@example.invalid"]
        for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "initial"]):
            subprocess.run(git + args, cwd=ws, check=True)
        w = Workspace(ws, home)
        try:
            yield w
        finally:
            w.stop_daemon()


def structured(result, what: str) -> dict:
    check_quietly(result.structured_content is not None, f"{what}: the result has structuredContent")
    return result.structured_content


async def ok(c: Client, tool: str, args: dict, operator: bool = True) -> dict:
    """Calls `tool`, which must succeed; its structuredContent (the SDK has validated it
    against the tool's outputSchema)."""
    r = await c.call_tool(tool, args)
    out = structured(r, f"{tool} {json.dumps(args)}")
    check_quietly(not r.is_error, f"{tool} {json.dumps(args)} succeeds (got {json.dumps(out)})")
    if operator:
        exercised.add(tool)
    return out


async def refusal(c: Client, tool: str, args: dict, code: str | None, needle: str | None) -> tuple[bool, dict, str]:
    """Calls `tool`, which should fail with an isError result of `code` (any, with None) whose
    message contains `needle`: whether it did, the error object, and what came back."""
    r = await c.call_tool(tool, args)
    out = structured(r, f"{tool} {json.dumps(args)}")
    err = out.get("error") or {}
    refused = (r.is_error is True and set(err) >= {"code", "message"} and code in (None, err["code"])
               and (needle is None or needle in err["message"]))
    return refused, err, f"{tool} {json.dumps(args)} -> isError={r.is_error} {json.dumps(out)}"


async def fails(c: Client, tool: str, args: dict, code: str | None, needle: str | None, what: str) -> dict:
    """Calls `tool`, which must fail as `refusal` describes; the error object."""
    refused, err, got = await refusal(c, tool, args, code, needle)
    check(refused, what if refused else f"{what}: {got}")
    return err


def ids(tasks: list[dict]) -> list[int]:
    return [t["id"] for t in tasks]


async def task(c: Client, task_id: int) -> dict:
    return (await ok(c, "vox_task_status", {"task_id": task_id}))["task"]


async def all_events(c: Client, tool: str, args: dict, page: int) -> list[dict]:
    """Every event `tool` gives, read `page` at a time by cursor: each page holds only events
    after the previous one's `next_cursor`, oldest first, and `next_cursor` is its last."""
    events, cursor = [], 0
    while True:
        r = await ok(c, tool, {**args, "cursor": cursor, "limit": page})
        got = [e["id"] for e in r["events"]]
        check_quietly(all(i > cursor for i in got) and got == sorted(set(got)),
                      f"{tool} from cursor {cursor} gives only newer events, oldest first: {got}")
        events += r["events"]
        if not got:
            check_quietly(r["next_cursor"] == cursor, f"{tool}: an empty page keeps the cursor")
            return events
        check_quietly(r["next_cursor"] == got[-1], f"{tool}: next_cursor is the last event given")
        cursor = r["next_cursor"]


async def wait_for_approval(op: Client, tool: str, agent: str) -> dict:
    """The pending approval of `agent`'s call of `tool`, once it appears (at most 30 s)."""
    for _ in range(600):
        for a in (await ok(op, "vox_pending_approvals", {}))["approvals"]:
            if a["tool"] == tool and a["agent"] == agent:
                return a
        await asyncio.sleep(0.05)
    check(False, f"{agent}'s call of {tool} shows up in vox_pending_approvals")


# 1 and 4: the operator's story, then a restart.

async def operator_story() -> None:
    with workspace("voxorch") as w:
        async with w.client() as op:
            await story(op)
            # What must outlive the daemon: agents (retired ones too), tasks, the allowlist and
            # the pending clarification the story left.
            before = await durable_state(op)
        w.stop_daemon()
        async with w.client() as op:
            after = await durable_state(op)
            for k in before:
                check(after[k] == before[k], f"[restart] {k} are as before the daemon stopped")
            check(len(after["pending clarifications"]) == 1, "[restart] the pending clarification is still pending")


async def durable_state(op: Client) -> dict:
    agents = (await ok(op, "vox_agent_status", {"retired": True}))["agents"]
    return {
        "agents": [a["agent"] for a in agents],
        "tasks": await ok(op, "vox_a2a_tasks", {}),
        "allowlist entries": await ok(op, "vox_list_approval_allowlist", {}),
        "pending clarifications": (await ok(op, "vox_feedback_list", {}))["clarifications"],
    }


async def story(op: Client) -> None:
    s = "[operator]"
    # Two agents: a1 holds two tasks at once, a2 (one) is decided under `knowledge`.
    a1 = await ok(op, "vox_spawn_agent", {"agent_id": "a1", "capacity": 2})
    check(a1["token"].startswith("voxa_") and a1["agent"]["state"] == "active" and a1["agent"]["capacity"] == 2,
          f"{s} vox_spawn_agent a1: active, capacity 2, a one-time voxa_ token")
    a2 = await ok(op, "vox_spawn_agent", {"agent_id": "a2", "profile": "knowledge"})
    check(a2["agent"]["profile"] == "knowledge" and a2["agent"]["capacity"] == 1 and a2["token"] != a1["token"],
          f"{s} vox_spawn_agent a2: profile knowledge, capacity 1, its own token")

    # Routing: three tasks fill the room the agents have (2 + 1); the fourth waits.
    build = await ok(op, "vox_submit_task", {"title": "build", "files": ["src/lib.rs"], "priority": 3})
    docs = await ok(op, "vox_submit_task", {"title": "docs"})
    review = await ok(op, "vox_submit_task", {"title": "review"})
    for t in (build, docs, review):
        check(t["task"]["state"] == "assigned"
              and [(a["agent"], a["task_id"]) for a in t["assigned"]] == [(t["task"]["owner"], t["task"]["id"])],
            f"{s} vox_submit_task {t['task']['title']!r} is routed to an agent with room ({t['task']['owner']})")
    spare = await ok(op, "vox_submit_task", {"title": "spare"})
    check(spare["task"]["state"] == "queued" and spare["task"]["owner"] is None and spare["assigned"] == [],
          f"{s} a fourth task waits in the queue: no agent has room")
    status = await ok(op, "vox_orchestrator_status", {})
    check({a["agent"]["id"]: a["load"] for a in status["agents"]} == {"a1": 2, "a2": 1},
          f"{s} vox_orchestrator_status: each agent's load is its capacity")
    build_id, holder = build["task"]["id"], build["task"]["owner"]
    other = "a2" if holder == "a1" else "a1"

    t = await task(op, build_id)
    check((t["state"], t["owner"], t["attempts"], t["files"]) == ("assigned", holder, 0, ["src/lib.rs"]),
          f"{s} vox_task_status: build is assigned to {holder}, not started")
    beat = await ok(op, "vox_heartbeat", {"agent_id": holder, "task_id": build_id})
    started = next(x for x in beat["tasks"] if x["id"] == build_id)
    check(beat["agent"]["id"] == holder and started["state"] == "running" and started["attempts"] == 1,
          f"{s} vox_heartbeat with task_id starts the assigned task (running, attempt 1)")

    # Locks: a second agent's claim of a held file is refused and recorded as a conflict.
    claim = await ok(op, "vox_claim_file", {"agent_id": holder, "path": "src/lib.rs", "task_id": build_id})
    check(claim["outcome"] == "granted" and claim["lock"]["agent"] == holder and claim["lock"]["task_id"] == build_id,
          f"{s} vox_claim_file: {holder} holds src/lib.rs for build")
    held = await ok(op, "vox_claim_file", {"agent_id": other, "path": "src/lib.rs"})
    check(held["outcome"] == "held" and held["holder"]["agent"] == holder,
          f"{s} vox_claim_file by {other} of the same file: outcome held, naming the holder")
    conflicts = (await ok(op, "vox_conflicts", {}))["conflicts"]
    check([(c["path"], c["holder"], c["requester"], c["active"]) for c in conflicts] == [("src/lib.rs", holder, other, True)]
          and conflicts[0]["id"] == held["conflict_id"], f"{s} vox_conflicts shows the refused claim")
    owner = await ok(op, "vox_check_file_owner", {"path": "./src/lib.rs"})
    check(owner["path"] == "src/lib.rs" and owner["lock"]["agent"] == holder,
          f"{s} vox_check_file_owner normalizes ./src/lib.rs and names {holder}")
    await ok(op, "vox_claim_file", {"agent_id": holder, "path": "README.md"})
    mine = (await ok(op, "vox_my_files", {"agent_id": holder}))["locks"]
    check(sorted(l["path"] for l in mine) == ["README.md", "src/lib.rs"], f"{s} vox_my_files: {holder}'s two locks")
    check((await ok(op, "vox_my_files", {"agent_id": other}))["locks"] == [], f"{s} vox_my_files: {other} holds nothing")
    locks = (await ok(op, "vox_lock_status", {}))["locks"]
    check([(l["path"], l["agent"]) for l in locks] == [("README.md", holder), ("src/lib.rs", holder)],
          f"{s} vox_lock_status: every live lock, in path order")
    moved = await ok(op, "vox_transfer_file", {"agent_id": holder, "path": "README.md", "to_agent": other})
    check(moved["agent"] == other and (await ok(op, "vox_check_file_owner", {"path": "README.md"}))["lock"]["agent"] == other,
          f"{s} vox_transfer_file moves README.md to {other}")
    released = await ok(op, "vox_release_file", {"agent_id": other, "path": "README.md"})
    check(released["released"] is True and (await ok(op, "vox_check_file_owner", {"path": "README.md"}))["lock"] is None,
          f"{s} vox_release_file: README.md is free")

    # A plan is a DAG of tasks; a replan adds a revision.
    plan = (await ok(op, "vox_plan", {"goal": "ship", "steps": [
        {"key": "lint", "title": "lint"}, {"key": "test", "title": "test", "after": ["lint"]}]}))["plan"]
    steps = {st["key"]: st["task"] for st in plan["steps"]}
    check(plan["revision"] == 1 and list(steps) == ["lint", "test"] and steps["test"]["depends_on"] == [steps["lint"]["id"]],
          f"{s} vox_plan: two steps, test after lint")
    plan_id = plan["id"]
    ps = await ok(op, "vox_plan_status", {"plan_id": plan_id})
    check(ps["id"] == plan_id and ps["finished"] is False and sum(ps["progress"].values()) == 2,
          f"{s} vox_plan_status: the plan's progress over its two steps")
    re = (await ok(op, "vox_replan", {"plan_id": plan_id, "reason": "publish too",
                                      "add": [{"key": "publish", "title": "publish", "after": ["test"]}]}))["plan"]
    steps = {st["key"]: st["task"] for st in re["steps"]}
    check(re["revision"] == 2 and steps["publish"]["depends_on"] == [steps["test"]["id"]],
          f"{s} vox_replan: revision 2 adds publish after test")

    # A clarification gates a task: while it is pending the task is passed over for work, even
    # with the highest priority and room free.
    gated = (await ok(op, "vox_submit_task", {"title": "migrate", "priority": 100}))["task"]["id"]
    q = await ok(op, "vox_ask_clarification", {"question": "Which database?", "options": ["sqlite", "postgres"], "gates": [gated]})
    check(q["state"] == "pending" and q["gates"] == [gated], f"{s} vox_ask_clarification: pending, gating migrate")
    check((await ok(op, "vox_task_status", {"task_id": gated}))["gated_by"] == [q["id"]], f"{s} vox_task_status names the gate")
    listed = (await ok(op, "vox_feedback_list", {}))["clarifications"]
    check([c["id"] for c in listed] == [q["id"]], f"{s} vox_feedback_list: the pending question")
    review_id, reviewer = review["task"]["id"], review["task"]["owner"]
    done = await ok(op, "vox_complete_task", {"agent_id": reviewer, "task_id": review_id, "result": "lgtm"})
    check(done["task"]["state"] == "completed" and done["task"]["result"] == "lgtm", f"{s} vox_complete_task: review completed")
    check(done["assigned"] != [] and gated not in [a["task_id"] for a in done["assigned"]]
          and (await task(op, gated))["state"] == "queued",
          f"{s} the freed room goes to another task, not to the gated one")
    answered = await ok(op, "vox_resolve_feedback", {"id": q["id"], "action": "answer", "answer": "sqlite"})
    check(answered["clarification"]["state"] == "answered" and answered["clarification"]["answer"] == "sqlite",
          f"{s} vox_resolve_feedback answers it")
    check((await ok(op, "vox_task_status", {"task_id": gated}))["gated_by"] == [], f"{s} the answered question gates nothing")

    # A handoff chain: build goes to the other agent and back.
    h1 = (await ok(op, "vox_agent_handoff", {"agent_id": holder, "to_agent": other, "task_id": build_id,
                                             "summary": "finish the build", "context": "tests pass"}))["handoff"]
    check((h1["from_agent"], h1["to_agent"], h1["task_id"]) == (holder, other, build_id)
          and (await task(op, build_id))["owner"] == other, f"{s} vox_agent_handoff gives build to {other}")
    h2 = (await ok(op, "vox_agent_handoff", {"agent_id": other, "to_agent": holder, "task_id": build_id,
                                             "summary": "back to you", "parent": h1["id"]}))["handoff"]
    lineage = (await ok(op, "vox_handoff_lineage", {"handoff_id": h2["id"]}))["handoffs"]
    check([h["id"] for h in lineage] == [h1["id"], h2["id"]] and lineage[1]["parent"] == h1["id"],
          f"{s} vox_handoff_lineage: the chain h1 -> h2, oldest first")
    built = await ok(op, "vox_complete_task", {"agent_id": holder, "task_id": build_id, "result": "built"})
    check((built["task"]["state"], built["task"]["owner"], built["task"]["result"]) == ("completed", holder, "built"),
          f"{s} vox_complete_task by {holder} after the handoffs")
    check((await ok(op, "vox_check_file_owner", {"path": "src/lib.rs"}))["lock"] is None
          and (await ok(op, "vox_conflicts", {}))["conflicts"] == []
          and len((await ok(op, "vox_conflicts", {"all": True}))["conflicts"]) == 1,
          f"{s} completing build released its lock; its conflict is past")

    # Fail with retry: the started task goes back to the queue, its attempt counted.
    docs_id, writer = docs["task"]["id"], docs["task"]["owner"]
    await ok(op, "vox_heartbeat", {"agent_id": writer, "task_id": docs_id})
    retried = await ok(op, "vox_fail_task", {"agent_id": writer, "task_id": docs_id, "reason": "flaky network", "retry": True})
    check((retried["task"]["state"], retried["task"]["owner"], retried["task"]["attempts"]) == ("queued", None, 1),
          f"{s} vox_fail_task with retry requeues docs (attempt 1 counted)")

    # Reordering: the ready tasks no agent holds wait highest priority first (every agent is
    # full now, so a new task waits beside the plan's first step).
    notes = (await ok(op, "vox_submit_task", {"title": "release notes", "priority": 1}))["task"]
    check(notes["state"] == "queued", f"{s} vox_submit_task: release notes wait, every agent is full")
    queues = await ok(op, "vox_queue_status", {})
    for qu in queues["queues"]:
        check_quietly(all(x["owner"] == qu["agent"]["id"] for x in qu["tasks"]), f"{s} each queue holds its agent's tasks")
    waiting = queues["unassigned"]
    check(len(waiting) >= 2 and all(x["state"] == "queued" and x["owner"] is None for x in waiting)
          and [x["priority"] for x in waiting] == sorted((x["priority"] for x in waiting), reverse=True)
          and not {steps["test"]["id"], steps["publish"]["id"]} & set(ids(waiting)),
          f"{s} vox_queue_status: {len(waiting)} ready tasks wait, by priority; steps after open ones are not ready")
    last = waiting[-1]["id"]
    r = await ok(op, "vox_reorder_task", {"task_id": last, "priority": 500})
    check(r["task"]["priority"] == 500, f"{s} vox_reorder_task sets priority 500")
    check(ids((await ok(op, "vox_queue_status", {}))["unassigned"])[0] == last,
          f"{s} the reordered task is now first in line")
    graph = await ok(op, "vox_a2a_tasks", {})
    check({"task": steps["publish"]["id"], "depends_on": steps["test"]["id"]} in graph["edges"]
          and {"task": steps["test"]["id"], "depends_on": steps["lint"]["id"]} in graph["edges"],
          f"{s} vox_a2a_tasks: the plan's dependency edges")
    completed = ids((await ok(op, "vox_a2a_tasks", {"state": "completed"}))["tasks"])
    check(sorted(completed) == sorted([build_id, review_id]), f"{s} vox_a2a_tasks by state: build and review completed")

    # Rebalance: pausing an agent keeps its tasks; rebalancing takes back the ones not started.
    queues = (await ok(op, "vox_queue_status", {}))["queues"]
    busy = next((qu for qu in queues if any(x["state"] == "assigned" for x in qu["tasks"])), None)
    check(busy is not None, f"{s} an agent holds a task it has not started")
    busy_id = busy["agent"]["id"]
    waiting_there = sorted(x["id"] for x in busy["tasks"] if x["state"] == "assigned")
    paused = await ok(op, "vox_pause_agent", {"agent_id": busy_id})
    check(paused["agent"]["state"] == "paused", f"{s} vox_pause_agent: {busy_id} paused")
    reb = await ok(op, "vox_rebalance", {})
    owners = [(await task(op, i))["owner"] for i in waiting_there]
    check(sorted(reb["requeued"]) == waiting_there and busy_id not in owners,
          f"{s} vox_rebalance takes {busy_id}'s waiting tasks {waiting_there} back")
    resumed = await ok(op, "vox_resume_agent", {"agent_id": busy_id})
    check(resumed["agent"]["state"] == "active", f"{s} vox_resume_agent: {busy_id} active again")

    budget = await ok(op, "vox_set_agent_budget", {"agent_id": "a1", "tokens": 1000})
    mine = [b for b in budget["budget"]["agents"] if b["agent"] == "a1"]
    check(budget["agent"]["budget_tokens"] == 1000 and mine and mine[0]["token_budget"] == 1000,
          f"{s} vox_set_agent_budget: a1's budget is 1000 tokens")
    agents = (await ok(op, "vox_agent_status", {}))["agents"]
    check([(a["agent"]["id"], a["agent"]["state"]) for a in agents] == [("a1", "active"), ("a2", "active")],
          f"{s} vox_agent_status: both agents, active")
    one = (await ok(op, "vox_agent_status", {"agent_id": "a2"}))["agents"]
    check([a["agent"]["id"] for a in one] == ["a2"] and all(x["owner"] == "a2" for x in one[0]["tasks"]),
          f"{s} vox_agent_status of a2: a2 and its tasks")

    # Approvals as the operator (deciding one is exercised on the agent path).
    entry = await ok(op, "vox_add_approval_allowlist_entry", {"tool": "vox_kb_*", "agent_id": "a2", "note": "reading is fine"})
    check((entry["tool"], entry["agent"], entry["created_by"]) == ("vox_kb_*", "a2", "operator"),
          f"{s} vox_add_approval_allowlist_entry: vox_kb_* for a2")
    check((await ok(op, "vox_list_approval_allowlist", {}))["entries"] == [entry], f"{s} vox_list_approval_allowlist: the entry")
    check((await ok(op, "vox_pending_approvals", {"all": True}))["approvals"] == [], f"{s} vox_pending_approvals: none yet")

    cancelled = await ok(op, "vox_cancel_task", {"task_id": spare["task"]["id"], "reason": "not needed"})
    check(cancelled["task"]["state"] == "cancelled", f"{s} vox_cancel_task: spare cancelled")

    # Events: every change is one, read by cursor without repeats.
    first = await ok(op, "vox_poll_events", {"limit": 5})
    check(len(first["events"]) == 5 and first["next_cursor"] == first["events"][-1]["id"],
          f"{s} vox_poll_events: a page of 5 and its next_cursor")
    second = await ok(op, "vox_poll_events", {"cursor": first["next_cursor"], "limit": 5})
    check(second["events"] and not set(ids(first["events"])) & set(ids(second["events"]))
          and min(ids(second["events"])) > first["next_cursor"], f"{s} vox_poll_events from next_cursor: no old event again")
    paged = await all_events(op, "vox_poll_events", {}, 7)
    check(paged == (await ok(op, "vox_poll_events", {"limit": 1000}))["events"]
          and paged[-1]["id"] == (await ok(op, "vox_orchestrator_status", {}))["events_head"],
          f"{s} vox_poll_events paged by cursor gives every event once, up to events_head ({len(paged)})")
    tasks_only = (await ok(op, "vox_poll_events", {"subject": "task", "limit": 1000}))["events"]
    check(tasks_only and all(e["subject"] == "task" for e in tasks_only), f"{s} vox_poll_events by subject")
    a1_events = await all_events(op, "vox_agent_events", {"agent_id": "a1"}, 4)
    kinds = {(e["subject"], e["kind"]) for e in a1_events if e.get("subject_id") == "a1"}
    check(all(e["agent"] == "a1" or e.get("subject_id") == "a1" for e in a1_events)
          and {("agent", "spawned"), ("agent", "budget")} <= kinds,
          f"{s} vox_agent_events: only a1's events, its spawn and budget among them")

    status = await ok(op, "vox_orchestrator_status", {})
    graph = await ok(op, "vox_a2a_tasks", {})
    per_state: dict[str, int] = {}
    for x in graph["tasks"]:
        per_state[x["state"]] = per_state.get(x["state"], 0) + 1
    check(status["tasks"] == per_state and status["pending_clarifications"] == 0 and status["pending_approvals"] == 0,
          f"{s} vox_orchestrator_status: tasks per state {per_state} match vox_a2a_tasks")

    # Left pending on purpose: it must survive the restart.
    await ok(op, "vox_ask_clarification", {"question": "Ship on Friday?"})

    # Emergency stop: every active task cancelled (a running one too), every active agent paused.
    a1_next = next((x["id"] for x in graph["tasks"] if x["owner"] == "a1" and x["state"] == "assigned"), None)
    check(a1_next is not None, f"{s} a1 holds a task it has not started")
    await ok(op, "vox_heartbeat", {"agent_id": "a1", "task_id": a1_next})
    graph = await ok(op, "vox_a2a_tasks", {})
    active = sorted(x["id"] for x in graph["tasks"] if x["state"] in ACTIVE)
    check({x["state"] for x in graph["tasks"] if x["state"] in ACTIVE} == set(ACTIVE),
          f"{s} before the stop, tasks are queued, assigned and running")
    stop = await ok(op, "vox_emergency_stop", {"reason": "drill"})
    check(sorted(stop["cancelled"]) == active and sorted(stop["paused_agents"]) == ["a1", "a2"],
          f"{s} vox_emergency_stop cancels the {len(active)} active tasks and pauses a1, a2")
    left = [x for x in (await ok(op, "vox_a2a_tasks", {}))["tasks"] if x["state"] in ACTIVE]
    states = {a["agent"]["state"] for a in (await ok(op, "vox_agent_status", {}))["agents"]}
    check(left == [] and states == {"paused"}, f"{s} after the stop no task is active and every agent is paused")

    gone = await ok(op, "vox_retire_agent", {"agent_id": "a1", "reason": "drill over"})
    check(gone["agent"]["state"] == "retired", f"{s} vox_retire_agent: a1 retired")
    listed = [a["agent"]["id"] for a in (await ok(op, "vox_agent_status", {}))["agents"]]
    with_retired = {a["agent"]["id"]: a["agent"]["state"] for a in (await ok(op, "vox_agent_status", {"retired": True}))["agents"]}
    check(listed == ["a2"] and with_retired == {"a1": "retired", "a2": "paused"},
          f"{s} vox_agent_status hides retired agents unless asked")


# 2: bad input.

async def bad_input() -> None:
    s = "[bad input]"
    with workspace("voxbad") as w:
        async with w.client() as op:
            await ok(op, "vox_spawn_agent", {"agent_id": "a1"})
            await ok(op, "vox_spawn_agent", {"agent_id": "a2"})
            t = (await ok(op, "vox_submit_task", {"title": "mine"}))["task"]
            before = await ok(op, "vox_a2a_tasks", {})
            await fails(op, "vox_submit_task", {"title": "x", "bogus": 1}, "invalid_arguments", "bogus",
                        f"{s} vox_submit_task with an unknown argument names it")
            stranger = "a2" if t["owner"] == "a1" else "a1"
            await fails(op, "vox_complete_task", {"agent_id": stranger, "task_id": t["id"], "result": "r"}, "conflict",
                        f"assigned to {t['owner']}, not to {stranger}",
                        f"{s} vox_complete_task by an agent that does not own the task is a conflict naming the owner")
            # Malformed input is invalid_arguments, as everywhere else in vox (a path with `..` is
            # for vox_repo_file, vox_kb_ingest, vox_check, vox_skill_install), not a conflict.
            await fails(op, "vox_claim_file", {"agent_id": "a1", "path": "../etc/passwd"}, "invalid_arguments", "..",
                        f"{s} vox_claim_file of ../etc/passwd is invalid_arguments naming '..'")
            await fails(op, "vox_plan", {"goal": "g", "steps": [{"key": "a", "title": "a", "after": ["b"]},
                                                               {"key": "b", "title": "b", "after": ["a"]}]},
                        "invalid_arguments", "cycle", f"{s} vox_plan whose steps form a cycle is invalid_arguments naming the cycle")
            await fails(op, "vox_submit_task", {"title": "x", "files": ["../outside.rs"]}, "invalid_arguments", "..",
                        f"{s} vox_submit_task with a file outside the workspace is invalid_arguments naming '..'")
            check(await ok(op, "vox_a2a_tasks", {}) == before and (await task(op, t["id"]))["state"] == "assigned",
                  f"{s} the refused calls changed nothing")


# 3: the agent path.

async def agent_path() -> None:
    s = "[agent path]"
    # An agent is offered the public tools of its profile; the operator's are a person's.
    public = lambda tools: [t["name"] for t in tools if t["exposure"] == "public"]
    knowledge_all, orchestrator_all = profile_tools("knowledge"), profile_tools("orchestrator")
    operator_tools = [t["name"] for t in orchestrator_all if t["exposure"] == "operator"]
    knowledge, orchestrator = [t["name"] for t in knowledge_all], [t["name"] for t in orchestrator_all]
    with workspace("voxagent") as w:
        async with w.client() as op:
            r_token = (await ok(op, "vox_spawn_agent", {"agent_id": "r", "profile": "knowledge"}))["token"]
            l_token = (await ok(op, "vox_spawn_agent", {"agent_id": "l", "profile": "orchestrator"}))["token"]
            question = await ok(op, "vox_ask_clarification", {"question": "Which region?"})
            async with w.client(r_token) as r, w.client(l_token) as l:
                # The leak matrix: each agent lists exactly its profile, and may call nothing else.
                for name, c, mine, theirs in (("r", r, public(knowledge_all), orchestrator),
                                              ("l", l, public(orchestrator_all), knowledge)):
                    listed = [t.name for t in (await c.list_tools()).tools]
                    check(listed == mine, f"{s} {name}'s tools/list is exactly its profile's public tools ({len(listed)} tools)")
                    leaks = []
                    for tool in theirs:
                        refused, _, got = await refusal(c, tool, {}, "tool_not_in_profile", f"agent {name}'s profile")
                        leaks += [] if refused else [got]
                    check(leaks == [], f"{s} {name} calling any of the {len(theirs)} tools of the other profile: "
                                       f"tool_not_in_profile naming its profile" + (f" {leaks}" if leaks else ""))

                # A read-only call runs at once; one with side effects waits for a person.
                await ok(r, "vox_memory_list", {}, operator=False)
                call = asyncio.create_task(r.call_tool("vox_memory_store", {"key": "draft", "value": "v1"}))
                pending = await wait_for_approval(op, "vox_memory_store", "r")
                check(not call.done() and pending["state"] == "pending" and pending["arguments"] == {"key": "draft", "value": "v1"},
                      f"{s} r's vox_memory_store waits, pending with its arguments")
                await operator_only(l, "vox_resolve_approval", {"approval_id": pending["id"], "decision": "approve"})
                decided = await ok(op, "vox_resolve_approval", {"approval_id": pending["id"], "decision": "approve"})
                check(decided["state"] == "approved" and decided["decided_by"] == "operator", f"{s} the operator approves it")
                done = await asyncio.wait_for(call, 30)
                check(not done.is_error and done.structured_content["stored"] is True, f"{s} the approved call then succeeds")
                check((await ok(op, "vox_memory_recall", {"key": "draft"}, operator=False))["memory"]["value"] == "v1",
                      f"{s} what r stored is there")

                call = asyncio.create_task(r.call_tool("vox_memory_store", {"key": "draft", "value": "v2"}))
                pending = await wait_for_approval(op, "vox_memory_store", "r")
                await ok(op, "vox_resolve_approval", {"approval_id": pending["id"], "decision": "reject", "reason": "no"})
                done = await asyncio.wait_for(call, 30)
                err = (done.structured_content or {}).get("error", {})
                check(done.is_error and err.get("code") == "refused" and "no" in err.get("message", ""),
                      f"{s} a rejected call fails with refused and the reason ({err.get('message')})")
                check((await ok(op, "vox_memory_recall", {"key": "draft"}, operator=False))["memory"]["value"] == "v1",
                      f"{s} the rejected call did not run")

                # l coordinates only as itself, and does nothing only the operator does.
                for tool in operator_tools:
                    await operator_only(l, tool, operator_args(tool, pending["id"], question["id"]))
                states = {a["agent"]["id"]: a["agent"]["state"] for a in (await ok(op, "vox_agent_status", {}))["agents"]}
                pending_questions = (await ok(op, "vox_feedback_list", {}))["clarifications"]
                check(states == {"l": "active", "r": "active"} and ids(pending_questions) == [question["id"]]
                      and (await ok(op, "vox_list_approval_allowlist", {}))["entries"] == [],
                      f"{s} l's refused calls changed nothing (agents, the question, the allowlist)")
                await fails(l, "vox_my_files", {"agent_id": "r"}, "invalid_arguments", "acts only as itself",
                            f"{s} l cannot act as r (vox_my_files agent_id r)")
                # As itself, l coordinates at once: the orchestrator's own tools do not wait for a person.
                claim = await ok(l, "vox_claim_file", {"path": "src/lib.rs"}, operator=False)
                mine = (await ok(l, "vox_my_files", {}, operator=False))["locks"]
                check(claim["lock"]["agent"] == "l" and [x["path"] for x in mine] == ["src/lib.rs"],
                      f"{s} l claims src/lib.rs as itself, and vox_my_files shows it")

                # Retiring r stops its credential in the session it has open.
                await ok(op, "vox_retire_agent", {"agent_id": "r"})
                await fails(r, "vox_memory_list", {}, "unauthorized", None, f"{s} retired r's open session is unauthorized")

            # An unknown credential, or a retired one, is refused at the handshake.
            for what, token in (("an unknown credential", "voxa_" + "0" * 64), ("retired r's credential", r_token)):
                try:
                    async with w.client(token) as c:
                        await c.list_tools()
                    refused = ""
                except Exception as e:  # the SDK raises an ExceptionGroup around the MCPError
                    refused = repr(e)
                check("unauthorized" in refused, f"{s} a session with {what} fails to initialize: unauthorized")
        # l's credential still works after a daemon restart.
        w.stop_daemon()
        async with w.client(l_token) as l:
            me = (await ok(l, "vox_agent_status", {}, operator=False))["agents"]
            check([a["agent"]["id"] for a in me] == ["l"], f"{s} after a restart l's credential still works, l sees itself")


def operator_args(tool: str, approval_id: int, question_id: int) -> dict:
    """Well-formed arguments for `tool`, naming this workspace's agents, approval and question:
    only who calls decides that the call is refused."""
    return {
        "vox_add_approval_allowlist_entry": {"tool": "vox_memory_*"},
        "vox_pause_agent": {"agent_id": "r"},
        "vox_resume_agent": {"agent_id": "r"},
        "vox_retire_agent": {"agent_id": "r"},
        "vox_set_agent_budget": {"agent_id": "l", "tokens": 10},
        "vox_resolve_approval": {"approval_id": approval_id, "decision": "approve"},
        "vox_resolve_feedback": {"id": question_id, "action": "dismiss"},
    }.get(tool, {})


async def operator_only(l: Client, tool: str, args: dict) -> None:
    """Agent l's call of an operator tool (in its profile, never offered to an agent) is refused
    as a person's tool."""
    await fails(l, tool, args, "tool_not_in_profile", "the operator's",
                f"[agent path] l calling {tool}: the operator's tool, refused to agents")


async def main() -> None:
    check(os.path.exists(VOX), f"vox binary at {VOX}")
    await operator_story()
    await agent_path()
    missing = sorted(set(profile_slice("orchestrator")) - exercised)
    check(missing == [], "the operator called every orchestrator tool successfully" + (f" (not: {missing})" if missing else ""))
    # In a workspace of its own, and last: a wrong error code stops the run only once everything
    # else has been checked.
    await bad_input()


try:
    asyncio.run(main())
except BaseExceptionGroup as group:
    # A failed check() exits from inside the SDK's task groups, which wrap its SystemExit.
    if group.split(SystemExit)[1] is None:
        sys.exit(1)
    raise
