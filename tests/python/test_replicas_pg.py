"""`vox serve` replicas sharing one PostgreSQL database (`VOX_DB_URL`), with real HTTP clients:
two replicas of the knowledge profile on two workspaces see each other's memories, sessions and
knowledge-base documents; a replica killed with kill -9 loses nothing the other can read; three
replicas of the orchestrator profile take 10,000 tasks (VOX_REPLICA_TASKS) submitted and
completed through the tools from many clients at once, each assigned to exactly one agent once.

Needs VOX_TEST_PG_URL (a role that may create databases; `.ci/run` sets it).
Run: .venv/bin/python tests/python/test_replicas_pg.py [path/to/vox]
"""

import asyncio
import http.client
import json
import threading
from concurrent.futures import ThreadPoolExecutor
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

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


def replica(base: str, env: dict, servers: list, i: int, profile: str) -> tuple[subprocess.Popen, str, dict]:
    """`vox serve --profile <profile>` on workspace `r<i>` under `base`: its process, URL and env."""
    ws = os.path.join(base, f"r{i}")
    os.makedirs(ws, exist_ok=True)
    e = dict(env, VOX_HOME=os.path.join(base, f"h{i}"), VOX_WORKSPACE=ws)
    p = subprocess.Popen([VOX, "serve", "--profile", profile, "--workspace", ws], env=e,
                         stdout=subprocess.PIPE, text=True)
    servers.append(p)
    return p, "http://" + p.stdout.readline().split("http://")[1].split()[0], e


def orchestrators(base: str, env: dict, db_url: str, servers: list, admin: str) -> None:
    """Three orchestrator replicas; agents complete the tasks the replicas' dispatchers assign."""
    urls = [replica(base, env, servers, i, "orchestrator")[1] for i in (4, 5, 6)]
    agents = [f"w{i}" for i in range(6)]
    for n, a in enumerate(agents):
        call(urls[n % 3], "vox_spawn_agent", {"agent_id": a, "capacity": 4})
    check(len(call(urls[2], "vox_agent_status", {})["agents"]) == 6, "agents spawned on any replica are on all three")

    total = int(os.environ.get("VOX_REPLICA_TASKS", "10000"))
    started = time.monotonic()
    with ThreadPoolExecutor(12) as pool:
        ids = list(pool.map(lambda i: call(urls[i % 3], "vox_submit_task", {"title": f"t{i}"})["task"]["id"],
                            range(total)))
    check(len(set(ids)) == total,
          f"{total} tasks submitted through the three replicas from 12 clients ({time.monotonic() - started:.1f} s)")

    done = []
    lock = threading.Lock()

    def work(n: int, a: str) -> None:
        k = n
        while True:
            mine = [t for t in call(urls[k % 3], "vox_agent_status", {"agent_id": a})["agents"][0]["tasks"]
                    if t["state"] in ("assigned", "running")]
            if not mine:
                with lock:
                    if len(done) >= total:
                        return
                time.sleep(0.01)
                continue
            for t in mine:
                k += 1
                call(urls[k % 3], "vox_complete_task", {"agent_id": a, "task_id": t["id"], "result": "ok"})
                with lock:
                    done.append(t["id"])

    with ThreadPoolExecutor(len(agents)) as pool:
        list(pool.map(lambda na: work(*na), enumerate(agents)))
    elapsed = time.monotonic() - started
    check(sorted(done) == sorted(ids), f"every task completed once by the agent it was assigned to ({elapsed:.1f} s)")
    twice = subprocess.run(["psql", db_url_with_admin(admin, db_url), "-tAc",
                            "SELECT count(*) FROM (SELECT subject_id FROM events WHERE subject = 'task' AND kind = 'assigned'"
                            " GROUP BY subject_id HAVING count(*) <> 1) x"], capture_output=True, text=True, check=True)
    check(twice.stdout.strip() == "0", f"each of the {total} tasks was assigned exactly once across the three dispatchers")
    metrics = urllib.request.urlopen(urls[0] + "/metrics", timeout=10).read().decode()
    check('vox_store_info{backend="postgres"}' in metrics and 'vox_store_transactions_total{backend="postgres"}' in metrics
          and "vox_store_write_lock_wait_seconds" in metrics and 'vox_store_pool_connections{state="open"}' in metrics,
          "the store's metrics are on /metrics")
    sessions(urls)


class Proxy:
    """One address in front of the replicas, as a load balancer: each request goes to the next
    replica in turn, except (when `sticky`) a request naming an MCP session, which goes to the
    replica whose answer opened it (HAProxy: `stick on req.hdr(mcp-session-id)` with
    `stick store-response res.hdr(mcp-session-id)`; docs/mesh.md)."""

    def __init__(self, upstreams: list, sticky: bool):
        self.upstreams, self.sticky, self.turn, self.owner = upstreams, sticky, 0, {}
        self.used = set()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def handle(self):
                try:
                    super().handle()
                except ConnectionResetError:
                    pass  # the client closed a kept-alive connection

            def relay(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sid = self.headers.get("Mcp-Session-Id")
                with lock:
                    if proxy.sticky and sid in proxy.owner:
                        up = proxy.owner[sid]
                    else:
                        up = proxy.upstreams[proxy.turn % len(proxy.upstreams)]
                        proxy.turn += 1
                    proxy.used.add(up)
                host, port = up.split("//")[1].split(":")
                conn = http.client.HTTPConnection(host, int(port), timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                conn.request(self.command, self.path, body=body, headers=headers)
                r = conn.getresponse()
                new = r.getheader("Mcp-Session-Id")
                if new:
                    with lock:
                        proxy.owner[new] = up
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    while chunk := r.read1(65536):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass
                conn.close()

            do_GET = do_POST = do_DELETE = relay

        lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/mcp"


async def mcp_session(url: str, mode: str) -> list:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    async with Client(streamable_http_client(url, http_client=http), mode=mode) as c:
        tools = await c.list_tools()
        names = [t.name for t in tools.tools]
        for _ in range(6):
            r = await c.call_tool("vox_queue_status", {})
            assert not r.is_error, r
        return names


def sessions(urls: list) -> None:
    """2025-era /mcp sessions live in the replica that opened them: behind sticky routing a
    session's requests all reach it; the 2026-07-28 era has no sessions and needs none."""
    sticky = Proxy(urls, sticky=True)
    first = asyncio.run(mcp_session(sticky.url, "legacy"))
    second = asyncio.run(mcp_session(sticky.url, "legacy"))
    check("vox_submit_task" in first and first == second and len(sticky.owner) == 2 and len(sticky.used) == 2,
          "two 2025-era sessions behind sticky routing, opened on two replicas: each listed and called 6 times on its own")
    plain = Proxy(urls, sticky=False)
    names = asyncio.run(mcp_session(plain.url, "auto"))
    check("vox_submit_task" in names and len(plain.used) == len(urls),
          "a 2026-07-28 client through plain round robin: every request on whichever replica")
    # Without stickiness, a 2025-era session id reaching another replica is unknown there: 404,
    # which tells the client to start a new session (MCP 2025-06-18, session management).
    sid, home = next(iter(sticky.owner.items()))
    other = next(u for u in urls if u != home)
    req = urllib.request.Request(other + "/mcp", method="POST", data=json.dumps(
        {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).encode(), headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json", "Mcp-Session-Id": sid,
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"})
    try:
        urllib.request.urlopen(req, timeout=10)
        code = 200
    except urllib.error.HTTPError as e:
        code = e.code
    check(code == 404, "a 2025-era session id on a replica that did not open it is 404 (the client starts a new session)")


def db_url_with_admin(admin: str, db_url: str) -> str:
    """The test database's URL with the admin role's credentials (psql's view of it)."""
    return admin.split("?")[0].rsplit("/", 1)[0] + "/" + db_url.rsplit("/", 1)[1]


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

        try:
            (p1, u1, e1), (p2, u2, e2) = (replica(base, env, servers, i, "knowledge") for i in (1, 2))
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

            orchestrators(base, env, db_url, servers, admin)
        finally:
            for p in servers:
                if p.poll() is None:
                    p.terminate()
                    p.wait(timeout=20)
            psql(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


main()
