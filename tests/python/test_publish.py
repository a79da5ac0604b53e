"""Research-publish over `vox serve`'s REST API (`POST /v1/tools/call`) with a write token and a
read token: a research run (scripted-model as the model) drafted, refused to the read token and
refused without approval, approved by the write token, published to a directory of the
workspace and to a webhook (a local HTTP server, on loopback that `allow_private` lists) whose
answer names a status URL, that external job polled to its end, and every attempt kept as a
submission; a webhook's redirect is not followed, a status URL off its origin is not fetched,
and an address `allow_private` does not list is refused.

Run: .venv/bin/python tests/python/test_publish.py [path/to/vox]
"""

import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request

from scripted import scripted_model

VOX = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/vox")
SCRIPTED = os.path.join(os.path.dirname(VOX), "scripted-model")
WRITE, READ = "pub-write-token-0123456789", "pub-read-token-9876543210"
CLAIMS = {"claims": [{"text": "add returns the sum of its arguments", "citations": [{"file": "src/lib.rs", "lines": [1, 1]}]}]}
SCRIPT = {"actors": [{"name": "r", "match": "<question>", "steps": [[{"say": json.dumps(CLAIMS)}]]}]}


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"FAIL {what}")
        sys.exit(1)
    print(f"ok   {what}")


class Hook(http.server.BaseHTTPRequestHandler):
    """A webhook that accepts a draft as an external job, and its status endpoint."""
    received: list[dict] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Hook.received.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        if self.path == "/redirect":
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{Other.port}/took-it")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/offorigin":
            self.reply(202, {"job": "j2", "status_url": f"http://127.0.0.1:{Other.port}/status/j2"})
        else:
            self.reply(202, {"job": "j1", "status_url": f"http://127.0.0.1:{self.server.server_port}/status/j1"})

    def do_GET(self):
        self.reply(200, {"state": "published", "url": "https://news.example/j1"})

    def reply(self, code: int, body: dict):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class Other(Hook):
    """Another server on another port: what a redirect or a status URL off the webhook's origin
    names. It must get nothing."""
    port = 0
    got: list[str] = []

    def do_POST(self):
        Other.got.append(self.path)
        self.reply(200, {"state": "published", "secret": "other-secret"})

    def do_GET(self):
        self.do_POST()


def call(url: str, token: str, name: str, args: dict) -> tuple[int, dict]:
    rq = urllib.request.Request(url + "/v1/tools/call", data=json.dumps({"name": name, "args": args}).encode(),
                                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(rq, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def main() -> None:
    hook = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    other = http.server.HTTPServer(("127.0.0.1", 0), Other)
    Other.port = other.server_port
    threading.Thread(target=other.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="voxpub", dir="/tmp") as tmp:
        ws = os.path.join(tmp, "ws")
        os.makedirs(os.path.join(ws, "src"))
        os.makedirs(os.path.join(ws, ".vox"))
        with open(os.path.join(ws, "src", "lib.rs"), "w") as f:
            f.write("pub fn add(a: i32, b: i32) -> i32 { a + b }\n")
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgSign=false"]
        for args in (["init", "-q", "-b", "main"], ["add", "src"], ["commit", "-q", "-m", "initial"]):
            subprocess.run(git + args, cwd=ws, check=True)
        with open(os.path.join(ws, ".vox", "publish.toml"), "w") as f:
            f.write('allow_private = ["127.0.0.0/8"]\n\n'
                    '[destinations.docs]\nkind = "file"\ndir = "docs/news"\n\n'
                    f'[destinations.hook]\nkind = "webhook"\nurl = "http://127.0.0.1:{hook.server_port}/drafts"\ntoken_env = "HOOK_TOKEN"\n\n'
                    f'[destinations.redirecting]\nkind = "webhook"\nurl = "http://127.0.0.1:{hook.server_port}/redirect"\n\n'
                    f'[destinations.offorigin]\nkind = "webhook"\nurl = "http://127.0.0.1:{hook.server_port}/offorigin"\n\n'
                    f'[destinations.loopback6]\nkind = "webhook"\nurl = "http://[::1]:{hook.server_port}/drafts"\n\n'
                    '[destinations.outside]\nkind = "file"\ndir = "../escape"\n\n'
                    '[destinations.newsbranch]\nkind = "branch"\nbranch = "news"\ndir = "drafts"\n')
        with scripted_model(SCRIPTED, tmp, SCRIPT) as (base, _log):
            env = {k: v for k, v in os.environ.items() if not k.startswith("VOX_")}
            env.update({"VOX_WORKSPACE": ws, "VOX_HOME": os.path.join(tmp, "home"), "VOX_MCP_HTTP_PORT": "0",
                        "VOX_MCP_HTTP_BEARER_TOKEN": WRITE, "VOX_MCP_HTTP_READ_BEARER_TOKEN": READ, "VOX_LOG": "warn",
                        "VOX_LLM_API": "chat", "VOX_LLM_BASE_URL": base, "VOX_LLM_MODEL": "m",
                        "HOOK_TOKEN": "hook-secret"})
            server = subprocess.Popen([VOX, "serve", "--profile", "research,research-publish"], env=env,
                                      stdout=subprocess.PIPE, text=True)
            try:
                url = "http://" + server.stdout.readline().split("http://")[1].split()[0]
                story(url, ws)
            finally:
                subprocess.run([VOX, "daemon", "stop"], env=env, cwd=ws, capture_output=True)
                server.wait(timeout=20)
    hook.shutdown()
    other.shutdown()


def story(url: str, ws: str) -> None:
    code, r = call(url, WRITE, "vox_research_run", {"question": "What does add do?"})
    check(code == 200 and len(r["result"]["kept"]) == 1, f"a research run ({code} {r})")
    code, d = call(url, WRITE, "vox_news_draft", {"run_id": r["result"]["run"]["id"], "title": "Add, explained"})
    draft_id = d["result"]["id"]
    check(code == 200 and "add returns the sum" in d["result"]["body"], "a draft of it")

    code, e = call(url, READ, "vox_news_publish", {"draft_id": draft_id, "destination": "docs"})
    check(code == 403 and e["error"]["code"] == "exposure_denied" and "read token" in e["error"]["message"],
          f"the read token cannot publish ({code} {e})")
    code, e = call(url, READ, "vox_news_approve", {"draft_id": draft_id})
    check(code == 403 and e["error"]["code"] == "exposure_denied", "nor approve: approval is a person's, with the write token")
    code, e = call(url, WRITE, "vox_news_publish", {"draft_id": draft_id, "destination": "docs"})
    check(e["error"]["code"] == "refused" and "not approved" in e["error"]["message"],
          f"an unapproved draft is refused ({code} {e})")
    check(not os.path.exists(os.path.join(ws, "docs")), "and nothing was written")

    code, a = call(url, WRITE, "vox_news_approve", {"draft_id": draft_id, "note": "checked the citation"})
    check(code == 200 and a["result"]["draft_id"] == draft_id, "the write token approves it")
    code, e = call(url, WRITE, "vox_news_approve", {"draft_id": draft_id})
    check(e["error"]["code"] == "conflict", "a second approval is a conflict")

    code, p = call(url, WRITE, "vox_news_publish", {"draft_id": draft_id, "destination": "docs"})
    sub = p["result"]
    path = os.path.join(ws, sub["location"])
    check(code == 200 and sub["state"] == "published" and sub["location"].startswith("docs/news/"),
          f"published to a file of the workspace ({sub})")
    check(open(path).read().startswith("# Add, explained"), "the file holds the draft")

    for n in (1, 2):
        code, p = call(url, WRITE, "vox_news_publish", {"draft_id": draft_id, "destination": "newsbranch"})
        loc = p.get("result", {}).get("location") or json.dumps(p)
        check(code == 200 and loc.startswith("news:drafts/1-add-explained.md@"), f"published to a branch, commit {n} ({loc})")
    shown = subprocess.run(["git", "show", "news:drafts/1-add-explained.md"], cwd=ws, capture_output=True, text=True).stdout
    log = subprocess.run(["git", "log", "--format=%s", "news"], cwd=ws, capture_output=True, text=True).stdout.splitlines()
    branch = subprocess.run(["git", "branch", "--show-current"], cwd=ws, capture_output=True, text=True).stdout.strip()
    check(shown.startswith("# Add, explained") and log[:2] == ["Publish draft 1: Add, explained"] * 2 and log[2] == "initial",
          "the branch holds the draft, one commit per publish, on top of HEAD")
    check(branch == "main" and not os.path.exists(os.path.join(ws, "drafts")),
          "the checkout stays on its branch, untouched")

    code, p = call(url, WRITE, "vox_news_publish", {"draft_id": draft_id, "destination": "hook"})
    job = p["result"]
    check(code == 200 and job["state"] == "pending" and job["status_url"].endswith("/status/j1"),
          f"a webhook that names a status URL is a pending external job ({job})")
    check(Hook.received[-1]["body"]["title"] == "Add, explained" and Hook.received[-1]["auth"] == "Bearer hook-secret",
          "the webhook got the draft and its token")
    code, s = call(url, READ, "vox_scientia_submissions", {"draft_id": draft_id})
    check(code == 200 and len(s["result"]["submissions"]) == 4, "the read token lists the submissions")
    code, j = call(url, WRITE, "vox_external_job_status", {"submission_id": job["id"]})
    check(code == 200 and j["result"]["state"] == "published" and "news.example" in j["result"]["detail"],
          f"the external job's status is polled to its end ({j})")

    n = len(Hook.received)
    code, e = call(url, WRITE, "vox_news_publish", {"draft_id": draft_id, "destination": "redirecting"})
    m = e.get("error", {}).get("message", "")
    check(e.get("error", {}).get("code") == "tool_error" and "HTTP 307" in m and f":{Other.port}/took-it" in m
          and "not followed" in m, f"a webhook's redirect is a failed attempt naming where it pointed ({code} {e})")
    check(len(Hook.received) == n + 1 and Other.got == [], "and it was not followed")
    code, e = call(url, WRITE, "vox_news_publish", {"draft_id": draft_id, "destination": "offorigin"})
    m = e.get("error", {}).get("message", "")
    check(e.get("error", {}).get("code") == "refused" and "status_url" in m and "origin" in m,
          f"a status URL on another port fails the submission ({code} {e})")
    code, s = call(url, WRITE, "vox_scientia_submissions", {})
    last = s["result"]["submissions"][0]
    check(last["destination"] == "offorigin" and last["state"] == "failed" and last["status_url"] is None,
          f"recorded as failed, with no status URL to poll ({last})")
    code, j = call(url, WRITE, "vox_external_job_status", {"submission_id": last["id"]})
    check(code == 200 and j["result"]["state"] == "failed" and "other-secret" not in json.dumps(j) and Other.got == [],
          "and nothing on the other port was fetched")
    n = len(Hook.received)
    code, e = call(url, WRITE, "vox_news_publish", {"draft_id": draft_id, "destination": "loopback6"})
    m = e.get("error", {}).get("message", "")
    check(e.get("error", {}).get("code") == "refused" and "::1" in m and "allow_private" in m and len(Hook.received) == n,
          f"a loopback address allow_private does not list is refused, nothing sent ({code} {e})")

    code, e = call(url, WRITE, "vox_news_publish", {"draft_id": draft_id, "destination": "nowhere"})
    check(e["error"]["code"] == "invalid_arguments"
          and "docs, hook, loopback6, newsbranch, offorigin, outside, redirecting" in e["error"]["message"],
          "an unknown destination is refused, naming the configured ones")
    code, e = call(url, WRITE, "vox_news_publish", {"draft_id": draft_id, "destination": "outside"})
    check(e["error"]["code"] == "tool_error" and "not a plain workspace-relative path" in e["error"]["message"],
          f"a destination outside the workspace fails ({e})")
    code, s = call(url, WRITE, "vox_scientia_submissions", {})
    check(s["result"]["submissions"][0]["state"] == "failed" and s["result"]["submissions"][0]["destination"] == "outside",
          "and the failed attempt is recorded")
    check(not os.path.exists(os.path.join(os.path.dirname(ws), "escape")), "nothing was written outside")


main()
