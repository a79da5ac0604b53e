"""`vox serve` replicas sharing one PostgreSQL database (`VOX_DB_URL`), with real HTTP clients:
two replicas of the knowledge profile on two workspaces see each other's memories, sessions and
knowledge-base documents; a replica killed with kill -9 loses nothing the other can read; a
profile whose state is not on PostgreSQL yet gets the `db` subsystem refused with the reason.

Needs VOX_TEST_PG_URL (a role that may create databases; `.ci/run` sets it).
Run: .venv/bin/python tests/python/test_replicas_pg.py [path/to/vox]
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")
TOKEN = "replica-test-token-0123456789"


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok   {what}")


def call(url: str, tool: str, args: dict) -> dict:
    req = urllib.request.Request(url + "/v1/tools/call", data=json.dumps({"name": tool, "args": args}).encode(),
                                 headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["result"]


def psql(admin: str, sql: str) -> None:
    subprocess.run(["psql", admin, "-qc", sql], check=True, capture_output=True)


def main() -> None:
    admin = os.environ.get("VOX_TEST_PG_URL")
    if not admin:
        if os.environ.get("CI"):
            check(False, "VOX_TEST_PG_URL is set under CI (.ci/run starts PostgreSQL)")
        print("skipped: VOX_TEST_PG_URL is unset")
        return
    name = f"vox_replicas_{os.getpid()}"
    psql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    psql(admin, f"CREATE DATABASE {name}")
    db_url = admin.split("?")[0].rsplit("/", 1)[0] + "/" + name
    servers = []
    with tempfile.TemporaryDirectory(prefix="voxreplicas", dir="/tmp") as base:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
        env.update({"VOX_DB_URL": db_url, "VOX_MCP_HTTP_BEARER_TOKEN": TOKEN, "VOX_MCP_HTTP_PORT": "0",
                    "VOX_LOG": "warn"})

        def replica(i: int) -> tuple[subprocess.Popen, str, dict]:
            ws = os.path.join(base, f"r{i}")
            os.makedirs(ws, exist_ok=True)
            e = dict(env, VOX_HOME=os.path.join(base, f"h{i}"), VOX_WORKSPACE=ws)
            p = subprocess.Popen([VOX, "serve", "--profile", "knowledge", "--workspace", ws], env=e,
                                 stdout=subprocess.PIPE, text=True)
            servers.append(p)
            return p, "http://" + p.stdout.readline().split("http://")[1].split()[0], e

        try:
            (p1, u1, e1), (p2, u2, e2) = replica(1), replica(2)
            status = json.loads(subprocess.run([VOX, "daemon", "status", "--json", "--workspace", e1["VOX_WORKSPACE"]],
                                               env=e1, capture_output=True, text=True).stdout)
            db_step = next(s for s in status["boot_report"]["steps"] if s["step"] == "db")
            check(db_step["status"] == "ok" and "PostgreSQL" in db_step["detail"] and "s3cret" not in db_step["detail"],
                  f"the replica's store is PostgreSQL ({db_step['detail']})")

            call(u1, "vox_memory_store", {"key": "deploy/target", "value": "prod", "tags": ["ops"]})
            got = call(u2, "vox_memory_recall", {"key": "deploy/target"})
            check(got["found"] and got["memory"]["value"] == "prod", "a memory stored on one replica is recalled on the other")
            hits = call(u2, "vox_memory_search", {"query": "prod"})
            check(any(h["key"] == "deploy/target" for h in hits["results"]), "and found by the other's search (its index built from the shared store)")

            # Replica 2 has built its index; replica 1 adds a memory: replica 2's search finds it.
            call(u1, "vox_memory_store", {"key": "fresh/animal", "value": "zebra crossing"})
            hits = call(u2, "vox_memory_search", {"query": "zebra"})
            check([h["key"] for h in hits["results"]] == ["fresh/animal"],
                  "a memory another replica adds later is found by search here too")

            s = call(u1, "vox_session_create", {"title": "shared"})["session"]
            for u, text in ((u1, "first"), (u2, "second"), (u1, "third")):
                call(u, "vox_session_append", {"id": s["id"], "role": "user", "content": text})
            got = call(u2, "vox_session_get", {"id": s["id"]})
            check([m["content"] for m in got["messages"]] == ["first", "second", "third"]
                  and [m["seq"] for m in got["messages"]] == [1, 2, 3],
                  "a session appended to on both replicas numbers its messages in turn")

            call(u1, "vox_kb_ingest", {"text": "Replicas share one PostgreSQL database.", "title": "replicas"})
            listed = call(u2, "vox_kb_list", {})
            check([d["title"] for d in listed["documents"]] == ["replicas"], "a kb document ingested on one is listed on the other")
            q = call(u2, "vox_kb_query", {"query": "PostgreSQL"})
            call(u1, "vox_kb_ingest", {"text": "Heartbeats mark a node down.", "title": "heartbeats"})
            q = call(u2, "vox_kb_query", {"query": "heartbeats"})
            check(any(h["title"] == "heartbeats" for h in q["results"]), f"and queried there after its index was built ({q})")

            # kill -9 of replica 1: what it acknowledged is there for replica 2.
            call(u1, "vox_memory_store", {"key": "last/words", "value": "acknowledged"})
            p1.send_signal(signal.SIGKILL)
            p1.wait(timeout=10)
            got = call(u2, "vox_memory_recall", {"key": "last/words"})
            check(got["found"] and got["memory"]["value"] == "acknowledged",
                  "after kill -9 of one replica the other serves everything it acknowledged")

            # A profile whose state is not on PostgreSQL yet.
            ws3 = os.path.join(base, "r3")
            os.makedirs(ws3)
            e3 = dict(env, VOX_HOME=os.path.join(base, "h3"), VOX_WORKSPACE=ws3)
            subprocess.run([VOX, "daemon", "start", "--profile", "orchestrator", "--workspace", ws3], env=e3,
                           check=True, capture_output=True)
            status = json.loads(subprocess.run([VOX, "daemon", "status", "--json", "--workspace", ws3], env=e3,
                                               capture_output=True, text=True).stdout)
            failed = status["boot_report"]["failed"]
            check("db" in failed and "SQLite only yet" in failed["db"],
                  f"the orchestrator profile's db is refused on PostgreSQL with the reason ({failed['db'][:90]}…)")
            subprocess.run([VOX, "daemon", "stop", "--workspace", ws3], env=e3, capture_output=True)
        finally:
            for p in servers:
                if p.poll() is None:
                    p.terminate()
                    p.wait(timeout=20)
            psql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


main()
