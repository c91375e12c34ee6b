"""Running programs under the sanitizer in a fresh interpreter."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUGGY = ROOT / "examples" / "buggy"
EXIT = 3  # NPURT_SANITIZER_EXITCODE of these runs


def run_sanitized(args, tools="all", timeout=120, cwd=None):
    """Runs ``python args...`` with ``NPURT_SANITIZER=tools``; returns (process, findings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPURT_SANITIZER")}
    env["NPURT_DEVICE_COUNT"] = env.get("NPURT_DEVICE_COUNT", "2")
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env.update(NPURT_SANITIZER=tools, NPURT_SANITIZER_JSON=path, NPURT_SANITIZER_EXITCODE=str(EXIT))
    try:
        r = subprocess.run(
            [sys.executable, *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd
        )
        with open(path) as f:
            text = f.read()
        report = json.loads(text) if text else None
    finally:
        os.unlink(path)
    return r, report
