"""`scripted-model` (built with the workspace, beside `vox`) for the Python end-to-end tests:
one process per script, its port and its request log."""

import contextlib
import json
import os
import subprocess
import time


@contextlib.contextmanager
def scripted_model(binary: str, tmp: str, script: dict):
    """Starts scripted-model with `script`; yields its base URL (`http://127.0.0.1:<port>/v1`)
    and the path of its request log. Killed at the end."""
    path = os.path.join(tmp, "script.json")
    with open(path, "w") as f:
        json.dump(script, f)
    port_file, log = os.path.join(tmp, "port"), os.path.join(tmp, "model.jsonl")
    p = subprocess.Popen([binary, "--script", path, "--port-file", port_file, "--log", log],
                         stdout=subprocess.DEVNULL)
    try:
        for _ in range(500):
            if os.path.exists(port_file) and open(port_file).read().strip() not in ("", "0"):
                break
            time.sleep(0.01)
        port = int(open(port_file).read().strip())
        yield f"http://127.0.0.1:{port}/v1", log
    finally:
        p.kill()
        p.wait()


def requests(log: str) -> list[dict]:
    """The requests the model logged, oldest first."""
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]
