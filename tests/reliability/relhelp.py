"""Helpers of the reliability suite: run a script in a fresh interpreter with a timeout,
so that a crash (SIGSEGV, SIGABRT) or a hang fails the test instead of killing pytest."""

import os
import signal
import subprocess
import sys
import textwrap


def run_script(code, env=None, timeout=60, args=()):
    """Runs ``code`` in a fresh interpreter; returns the CompletedProcess. A hang past
    ``timeout`` raises ``subprocess.TimeoutExpired`` (the child is killed)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("NPURT_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def describe(p):
    """A failure message: how the child ended and what it printed."""
    how = f"signal {signal.Signals(-p.returncode).name}" if p.returncode < 0 else f"exit {p.returncode}"
    return f"child ended with {how}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"


def assert_clean(p, *expect):
    """The child exited with 0, printed every string of ``expect``, and neither panicked nor
    aborted."""
    assert p.returncode == 0, describe(p)
    for s in expect:
        assert s in p.stdout, describe(p)
    for bad in ("panicked", "Fatal Python error", "Traceback"):
        assert bad not in p.stderr, describe(p)
