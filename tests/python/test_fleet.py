"""Agents the daemon runs, end to end with the official Python MCP SDK (`pip install mcp`) over
the real `vox mcp --profile knowledge,orchestrator` on stdio: two real `codex app-server`
workers (npm `@openai/codex@0.169.0`, found through `CODEX_MMO_CODEX_JS`) driven by
`scripted-model` (a process answering the Responses API from a script), each in its own git
worktree with `vox mcp` as its MCP server under the agent's credential.

The port of the Rust test `two_codex_workers_run_a_plan_through_conflict_approval_clarification_and_a_crash`
(crates/vox-cli/tests/fleet_e2e.rs): a plan's DAG (build, docs, ship after both), a lock conflict
between the workers, a call that waits for a person's approval, a step gated by a
clarification until it is answered, a worker killed mid-task and its task requeued, all of it
still there after the daemon restarts, and no process left behind once the daemon stops.

Run: CODEX_MMO_CODEX_JS=<dir>/node_modules/@openai/codex/bin/codex.js \\
       .venv/bin/python tests/python/test_fleet.py [path/to/vox]
(`scripted-model` is taken from beside `vox`.) Without CODEX_MMO_CODEX_JS it prints a notice
and passes, unless CI is set: then it fails. Exits non-zero on the first failed check; prints
one line per check.
"""

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from mcp import Client, StdioServerParameters

VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")
SCRIPTED_MODEL = os.path.join(os.path.dirname(VOX), "scripted-model")
PROFILE = "knowledge,orchestrator"
CODEX_VAR = "CODEX_MMO_CODEX_JS"


def check(cond: bool, what: str, got=None) -> None:
    """Prints `ok   what`, or `FAIL what` (with `got`, when given) and exits."""
    if not cond:
        print(f"FAIL {what}" + ("" if got is None else f": {got if isinstance(got, str) else json.dumps(got)}"))
        sys.exit(1)
    print(f"ok   {what}")


def codex_js() -> str | None:
    """Where the real Codex `codex.js` is, or None after a notice on a developer's machine
    without it; under CI (`CI` set) a missing one fails instead of passing silently."""
    path = os.environ.get(CODEX_VAR)
    if not path:
        if "CI" in os.environ:
            check(False, f"{CODEX_VAR} is unset under CI: .ci/run must install @openai/codex@0.169.0 and export it")
        print(f"NOTICE: the Codex fleet test did not run: set {CODEX_VAR} to "
              "<dir>/node_modules/@openai/codex/bin/codex.js", file=sys.stderr)
        return None
    check(os.path.isfile(path), f"{CODEX_VAR}={path} is a file")
    return path


def vox_call(tool: str, args: dict) -> dict:
    """A tool call of the vox MCP server, as the scripted model writes it."""
    return {"call": {"name": f"mcp__vox__{tool}", "arguments": args}}


FIRST_TASK = "{{first_output/queues/0/tasks/0/id}}"
SCRIPT = {"actors": [
    {"name": "w1", "match": "Agent w1:", "steps": [
        # build: claim its file, remember something (waits for a person), complete.
        vox_call("vox_queue_status", {}),
        vox_call("vox_claim_file", {"path": "src/lib.rs", "task_id": "{{last_output/queues/0/tasks/0/id}}"}),
        vox_call("vox_memory_store", {"key": "build/notes", "value": "lib builds"}),
        vox_call("vox_complete_task", {"task_id": FIRST_TASK, "result": "built"}),
        [{"say": "built"}],
        # ship, once the clarification is answered.
        vox_call("vox_queue_status", {}),
        vox_call("vox_complete_task", {"task_id": "{{last_output/queues/0/tasks/0/id}}", "result": "shipped"}),
        [{"say": "shipped"}],
    ]},
    {"name": "w2", "match": "Agent w2:", "steps": [
        [{"hang": True}],
        # docs, after the crash: the file w1 holds is refused, its own is granted.
        vox_call("vox_queue_status", {}),
        vox_call("vox_claim_file", {"path": "src/lib.rs"}),
        vox_call("vox_claim_file", {"path": "docs.md", "task_id": FIRST_TASK}),
        vox_call("vox_complete_task", {"task_id": FIRST_TASK, "result": "documented"}),
        [{"say": "documented"}],
    ]},
]}


class Model:
    """The scripted model: a process answering `POST /v1/responses` from a script."""

    def __init__(self, dir: str, script: dict):
        check(os.path.isfile(SCRIPTED_MODEL), f"scripted-model is built beside vox ({SCRIPTED_MODEL})")
        script_path = os.path.join(dir, "script.json")
        with open(script_path, "w") as f:
            json.dump(script, f, indent=2)
        port_file = os.path.join(dir, "model.port")
        self.log = os.path.join(dir, "model.jsonl")
        self.proc = subprocess.Popen([SCRIPTED_MODEL, "--script", script_path, "--port-file", port_file,
                                      "--log", self.log], stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        self.port = None
        while self.port is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                with open(port_file) as f:
                    self.port = int(f.read().strip())
            if self.port is None:
                time.sleep(0.02)
        check(self.port is not None, f"the scripted model starts within 10 s (port {self.port})")

    def requests(self) -> list[dict]:
        """The requests it answered, as logged."""
        out = []
        with contextlib.suppress(OSError):
            with open(self.log) as f:
                for line in f:
                    with contextlib.suppress(ValueError):
                        out.append(json.loads(line))
        return out

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


class Workspace:
    """A temporary git workspace (one commit) with its own VOX_HOME, whose daemon runs Codex
    workers against the scripted model."""

    def __init__(self, ws: str, home: str, extra: dict):
        self.ws, self.home, self.extra = ws, home, extra
        self.agents = os.path.join(ws, ".vox", "agents")

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
        env.update({"VOX_HOME": self.home, "VOX_WORKSPACE": self.ws, "VOX_LOG": "warn"})
        env.update(self.extra)
        return env

    def client(self) -> Client:
        params = StdioServerParameters(command=VOX, args=["mcp", "--profile", PROFILE], env=self.env(), cwd=self.ws)
        return Client(params)

    def stop_daemon(self) -> subprocess.CompletedProcess:
        return subprocess.run([VOX, "daemon", "stop"], env=self.env(), cwd=self.ws, capture_output=True, text=True)

    def tail(self, rel: str, n: int = 3000) -> str:
        with contextlib.suppress(OSError):
            with open(os.path.join(self.ws, rel), errors="replace") as f:
                return f.read()[-n:]
        return "(none)"


def fleet_workspace(ws: str, home: str, dir: str, codex: str, model: Model) -> Workspace:
    config = os.path.join(dir, "codex-base.toml")
    with open(config, "w") as f:
        f.write(f'model = "scripted"\nmodel_provider = "local"\n\n[model_providers.local]\nname = "local"\n'
                f'base_url = "http://127.0.0.1:{model.port}/v1"\nwire_api = "responses"\nenv_key = "LOCAL_KEY"\n')
    os.makedirs(os.path.join(ws, "src"))
    with open(os.path.join(ws, "src", "lib.rs"), "w") as f:
        f.write("pub fn f() {}\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@e", "-c", "commit.gpgsign=false"]
    genv = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null"}
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "base"]):
        subprocess.run(git + args, cwd=ws, check=True, env=genv)
    return Workspace(ws, home, {CODEX_VAR: codex, "VOX_FLEET_CODEX_CONFIG": config, "LOCAL_KEY": "scripted",
                                "VOX_DAEMON_IDLE_SECS": "0"})


def pids_in(dir: str) -> list[int]:
    """Processes whose working directory is under `dir`."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cwd = os.readlink(f"/proc/{name}/cwd")
            if cwd == dir or cwd.startswith(dir + "/"):
                pids.append(int(name))
    return pids


def cmdline(pid: int, under: str) -> str:
    """`pid`'s command line, with where it works (relative to `under`), its parent, process
    group and session."""
    with contextlib.suppress(OSError, ValueError):
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        ppid, pgid, sid = stat[stat.rindex(")") + 2:].split()[1:4]
        cwd = os.path.relpath(os.readlink(f"/proc/{pid}/cwd"), under)
        return f"pid {pid} (ppid {ppid}, pgid {pgid}, sid {sid}) in {cwd}: {cmd}"
    return f"pid {pid} (gone)"


def no_worker_left(w: Workspace, what: str) -> None:
    """Every process working under .vox/agents (a worker, its `vox mcp`) is gone within 5 s of
    the daemon's stop."""
    dir = os.path.realpath(w.agents)
    deadline = time.monotonic() + 5
    while (left := pids_in(dir)) and time.monotonic() < deadline:
        time.sleep(0.05)
    check(not left, what, "\n  " + "\n  ".join(cmdline(p, dir) for p in left))


async def ok(c: Client, tool: str, args: dict) -> dict:
    """Calls `tool`, which must succeed; its structuredContent."""
    r = await c.call_tool(tool, args)
    out = r.structured_content
    if r.is_error or out is None:
        check(False, f"{tool} {json.dumps(args)} succeeds", f"isError={r.is_error} {json.dumps(out)}")
    return out


async def until(limit: float, what: str, f, diagnose=None):
    """Polls `f` every 100 ms until it gives something other than None, or fails after `limit`
    seconds naming `what` (and what `diagnose` says)."""
    deadline = time.monotonic() + limit
    while True:
        v = await f()
        if v is not None:
            return v
        if time.monotonic() > deadline:
            check(False, f"{what} within {limit:g} s", await diagnose() if diagnose else None)
        await asyncio.sleep(0.1)


async def task_state(op: Client, task_id) -> dict:
    return (await ok(op, "vox_task_status", {"task_id": task_id}))["task"]


def step_task(plan: dict, key: str):
    return next(s for s in plan["plan"]["steps"] if s["key"] == key)["task"]["id"]


async def story(op: Client, w: Workspace, model: Model) -> dict:
    s = "[fleet]"

    async def diagnose() -> str:
        agents = await ok(op, "vox_agent_status", {})
        tasks = [{k: t.get(k) for k in ("id", "title", "state", "owner", "attempts", "result")}
                 for t in (await ok(op, "vox_a2a_tasks", {}))["tasks"]]
        events = (await ok(op, "vox_poll_events", {"subject": "task", "limit": 1000}))["events"]
        reqs = [{k: r.get(k) for k in ("actor", "step", "error", "exhausted")} for r in model.requests()]
        logs = "".join(f"\n{a} app-server log (tail): {w.tail(f'.vox/agents/{a}/app-server.log')}" for a in ("w1", "w2"))
        return (f"\nagents: {json.dumps(agents)}\ntasks: {json.dumps(tasks)}\nevents: {json.dumps(events)}"
                f"\nmodel: {json.dumps(reqs)}{logs}"
                f"\ndaemon log (tail): {w.tail('.vox/daemon.log')}")

    for agent in ("w1", "w2"):
        spawned = await ok(op, "vox_spawn_agent", {"agent_id": agent, "runner": "codex", "profile": PROFILE})
        check(spawned["agent"]["runner"] == "codex"
              and os.path.isfile(os.path.join(w.agents, agent, "worktree", "src", "lib.rs")),
              f"{s} vox_spawn_agent {agent}: a codex runner in its own worktree", spawned)
    plan = await ok(op, "vox_plan", {"goal": "release", "steps": [
        {"key": "build", "title": "build the library", "files": ["src/lib.rs"]},
        {"key": "docs", "title": "write the docs", "files": ["docs.md"]},
        {"key": "ship", "title": "ship it", "after": ["build", "docs"]},
    ]})
    build, docs, ship = (step_task(plan, k) for k in ("build", "docs", "ship"))
    q = await ok(op, "vox_ask_clarification", {"question": "Ship to production?", "options": ["yes", "no"], "gates": [ship]})

    # w1 holds src/lib.rs, and its memory write waits for a person.
    async def first_approval():
        a = (await ok(op, "vox_pending_approvals", {}))["approvals"]
        return a[0] if a else None
    approval = await until(60, f"{s} w1's approval request", first_approval, diagnose)
    check((approval["agent"], approval["tool"]) == ("w1", "vox_memory_store"),
          f"{s} w1's vox_memory_store waits for a person's approval", approval)
    owner = await ok(op, "vox_check_file_owner", {"path": "src/lib.rs"})
    check((owner.get("lock") or {}).get("agent") == "w1", f"{s} w1 holds src/lib.rs", owner)

    # Meanwhile w2 hangs on docs: kill its worker.
    async def w2_at_work():
        worker = (await ok(op, "vox_agent_status", {"agent_id": "w2"}))["agents"][0]["worker"]
        asked = any(r.get("actor") == "w2" for r in model.requests())
        return worker["pid"] if worker["state"] == "working" and asked else None
    pid = await until(60, f"{s} w2 at work (its model asked)", w2_at_work, diagnose)
    # The app-server leads its own process group (node and the native codex under it): the
    # whole worker dies, as in a crash.
    try:
        os.killpg(pid, signal.SIGKILL)
        killed = None
    except OSError as e:
        killed = repr(e)
    check(killed is None, f"{s} w2's worker (process group {pid}) killed mid-task", killed)

    # Restarted, w2 asks for the file w1 holds while w1 waits: a conflict. Then the person
    # approves w1's call.
    async def first_conflict():
        c = (await ok(op, "vox_conflicts", {}))["conflicts"]
        return c[0] if c else None
    conflict = await until(60, f"{s} w2's refused claim", first_conflict, diagnose)
    check((conflict["path"], conflict["holder"], conflict["requester"]) == ("src/lib.rs", "w1", "w2"),
          f"{s} the restarted w2's claim of src/lib.rs is a conflict: held by w1, requested by w2", conflict)
    await ok(op, "vox_resolve_approval", {"approval_id": approval["id"], "decision": "approve"})
    check(True, f"{s} the operator approves w1's vox_memory_store")

    # Both finish; ship waits for the answer, then w1 ships.
    for task_id, result in ((build, "built"), (docs, "documented")):
        async def completed(task_id=task_id):
            t = await task_state(op, task_id)
            return t if t["state"] == "completed" else None
        t = await until(90, f"{s} {result}", completed, diagnose)
        check(t["result"] == result, f"{s} task {task_id} completed with result {result!r}", t)
    docs_task = await task_state(op, docs)
    check(docs_task["attempts"] == 2, f"{s} docs ran twice (attempts 2)", docs_task)
    held = await ok(op, "vox_task_status", {"task_id": ship})
    check(held["task"]["state"] == "queued" and held["gated_by"] == [q["id"]],
          f"{s} ship stays queued, gated by the clarification", held)
    past = await ok(op, "vox_conflicts", {"all": True})
    check(past["conflicts"] and past["conflicts"][0]["active"] is False,
          f"{s} the conflict is history once w1's task released the file", past)
    await ok(op, "vox_resolve_feedback", {"id": q["id"], "action": "answer", "answer": "yes"})
    check(True, f"{s} the operator answers the clarification: yes")

    async def shipped_task():
        t = await task_state(op, ship)
        return t if t["state"] == "completed" else None
    shipped = await until(90, f"{s} ship", shipped_task, diagnose)
    check((shipped["owner"], shipped["result"]) == ("w1", "shipped"), f"{s} w1 ships", shipped)
    notes = await ok(op, "vox_memory_recall", {"key": "build/notes"})
    check(notes["found"] is True, f"{s} w1's approved memory write is there", notes)
    bad = [{k: r.get(k) for k in ("actor", "step", "error", "exhausted")} for r in model.requests()
           if r.get("exhausted") is True or r.get("error") is not None]
    check(bad == [], f"{s} the model was asked no more than the script says (nothing exhausted, no error)", bad)
    return {"plan_id": plan["plan"]["id"]}


async def after_restart(op: Client, plan_id) -> None:
    s = "[restart]"
    p = await ok(op, "vox_plan_status", {"plan_id": plan_id})
    check(p["finished"] is True and p["progress"] == {"completed": 3}, f"{s} the plan is finished, 3 steps completed", p)
    approvals = await ok(op, "vox_pending_approvals", {"all": True})
    check(approvals["approvals"] and approvals["approvals"][0]["state"] == "approved",
          f"{s} w1's approval is recorded as approved", approvals)
    asked = await ok(op, "vox_feedback_list", {"all": True})
    check(asked["clarifications"] and asked["clarifications"][0]["answer"] == "yes",
          f"{s} the clarification is recorded with its answer", asked)
    lineage = await ok(op, "vox_agent_events", {"agent_id": "w2"})
    check(bool(lineage["events"]), f"{s} w2's events are still there ({len(lineage['events'])})")


async def main() -> None:
    check(os.path.exists(VOX), f"vox binary at {VOX}")
    codex = codex_js()
    if codex is None:
        return
    with tempfile.TemporaryDirectory(prefix="voxfleet", dir="/tmp", ignore_cleanup_errors=True) as dir, \
            tempfile.TemporaryDirectory(prefix="voxws", dir="/tmp", ignore_cleanup_errors=True) as ws, \
            tempfile.TemporaryDirectory(prefix="voxhome", dir="/tmp", ignore_cleanup_errors=True) as home:
        model = Model(dir, SCRIPT)
        w = None
        try:
            w = fleet_workspace(ws, home, dir, codex, model)
            async with w.client() as op:
                state = await story(op, w, model)
            # Durable across a restart, which starts the workers again (idle now); then nothing
            # is left running once the daemon stops.
            stop = w.stop_daemon()
            check(stop.returncode == 0, "vox daemon stop", stop.stderr)
            no_worker_left(w, "no worker outlives the daemon (5 s after its stop)")
            async with w.client() as op:
                await after_restart(op, state["plan_id"])
            stop = w.stop_daemon()
            check(stop.returncode == 0, "vox daemon stop, after the restart", stop.stderr)
            no_worker_left(w, "no worker outlives the restarted daemon (5 s after its stop)")
        finally:
            if w is not None:
                w.stop_daemon()
                # After a failure, end what the daemon left in this test's workspace.
                for pid in pids_in(os.path.realpath(ws)):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            model.stop()


try:
    asyncio.run(main())
except BaseExceptionGroup as group:
    # A failed check() exits from inside the SDK's task groups, which wrap its SystemExit.
    if group.split(SystemExit)[1] is None:
        sys.exit(1)
    raise
