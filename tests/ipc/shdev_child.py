"""Real child processes for the shared-device tests: a child runs a script that talks over
stdin/stdout lines; every read has a timeout and every child is killed at the end."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import textwrap
import time

BOUND = 30.0  # a liveness bound for one step, never a speed assertion


class Child:
    def __init__(self, code: str, env: dict[str, str], *args: str) -> None:
        self.p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.pid = self.p.pid

    def line(self, timeout: float = BOUND) -> str:
        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            self.kill()
            raise AssertionError(f"child {self.pid}: no output within {timeout}s; stderr: {self.p.stderr.read()}")
        out = self.p.stdout.readline()
        if not out:
            raise AssertionError(f"child {self.pid} exited ({self.p.wait(BOUND)}): {self.p.stderr.read()}")
        return out.strip()

    def expect(self, prefix: str) -> str:
        out = self.line()
        assert out.startswith(prefix), (out, prefix)
        return out[len(prefix):].strip()

    def json(self, prefix: str):
        return json.loads(self.expect(prefix))

    def send(self, text: str = "") -> None:
        self.p.stdin.write(text + "\n")
        self.p.stdin.flush()

    def finish(self) -> int:
        self.p.stdin.close()
        return self.p.wait(BOUND)

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(BOUND)

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


def env_for(tmp_path, **extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("NPURT_")}
    e.update(NPURT_STATUS_DIR=str(tmp_path / "status"), NPURT_STATUS_INTERVAL="0.05")
    e.update(extra)
    return e


def snapshot(env: dict[str, str]):
    r = subprocess.run([sys.executable, "-c", "import json, npurt; print(json.dumps(npurt._npurt._shared_snapshot()))"],
                       capture_output=True, text=True, timeout=BOUND, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def wait_for(pred, what: str, timeout: float = BOUND):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError(f"never saw {what}")
        time.sleep(0.05)
