"""SIGKILL of a child process in the middle of launching (issue 13, processes): the parent
and the other children are unaffected, and nothing is left behind — no process of the
killed child, no shared-memory file of npurt's, and the parent's own runtime still
works. Every child has a timeout."""

import os
import signal
import subprocess
import sys
import textwrap

import npurt
import numpy as np

# A child launches without pause (kernels on 4 streams, host callbacks, async copies,
# allocations, events) until its stdin closes; "ready" after the first round.
CHILD = textwrap.dedent(
    """
    import sys, threading
    import numpy as np
    import npurt
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    streams = [npurt.Stream() for _ in range(4)]
    host = npurt.malloc_host(1 << 16)
    rounds, total, hits = 0, 0.0, []
    while not stop.is_set():
        for i, s in enumerate(streams):
            x = npurt.full((256,), float(i + 1), stream=s)
            y = npurt.add(npurt.exp(npurt.multiply(x, 0.0, stream=s), stream=s), x, stream=s)
            d = npurt.malloc(1 << 16)
            npurt.memcpy_async(d, host, s)
            s.launch_host_func(hits.append, i)
            npurt.kernels.busy(0.0002, stream=s, blocks=2)
            e = npurt.Event()
            e.record(s)
            streams[(i + 1) % 4].wait_event(e)
            total += float(y.to_host()[0]) if rounds % 16 == 0 else 0.0
            del d
        rounds += 1
        if rounds == 1:
            print("ready", flush=True)
    npurt.synchronize(timeout=60)
    ok = all(abs(float(npurt.add(npurt.full((8,), 1.0, stream=s), 1.0, stream=s).to_host()[0]) - 2.0) < 1e-6
             for s in streams)
    print("done", rounds, ok, len(hits) == 4 * rounds, flush=True)
    """
)


def _shm():
    """npurt's files in /dev/shm besides npurt-smi's status directory (memory is anonymous
    memfds only)."""
    try:
        status = f"npurt-{os.getuid()}"  # npurt-smi's status records (stale ones are cleaned by pid)
        return {n for n in os.listdir("/dev/shm") if "npurt" in n and n != status}
    except FileNotFoundError:
        return set()


def _children_of(pid):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                out.append(int(p))
    return out


def test_sigkill_of_a_child_mid_launch_leaves_the_others_and_nothing_behind():
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPURT_")}
    env["NPURT_DEVICE_MEMORY"] = "1G"
    shm = _shm()
    mine = npurt.add(npurt.full((64,), 3.0), 1.0)  # the parent uses npurt throughout
    kids = [
        subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
        for _ in range(3)
    ]
    try:
        for k in kids:
            assert k.stdout.readline().strip() == "ready", k.stderr.read() if k.poll() is not None else "no ready"
        victim = kids[0]
        threads = len(os.listdir(f"/proc/{victim.pid}/task"))
        assert threads > 3, "the child's runtime threads are running"
        victim.send_signal(signal.SIGKILL)  # mid-launch: the loop never pauses
        assert victim.wait(timeout=30) == -signal.SIGKILL
        assert not os.path.exists(f"/proc/{victim.pid}"), "the killed child was reaped"
        assert _children_of(victim.pid) == []
        npurt.kernels.busy(0.001)
        assert float(npurt.add(mine, 1.0).to_host()[0]) == 5.0
        for k in kids[1:]:
            out, err = k.communicate(input="", timeout=120)
            assert k.returncode == 0, err
            words = out.split()
            assert words[0] == "done" and words[2:] == ["True", "True"], out + err
            assert "panicked" not in err and "Traceback" not in err, err
    finally:
        for k in kids:
            if k.poll() is None:
                k.kill()
                k.wait(timeout=30)
    assert _shm() == shm, "shared-memory files left behind"
    npurt.synchronize(timeout=30)
    assert np.asarray(npurt.multiply(mine, 2.0)).tolist() == [8.0] * 64
