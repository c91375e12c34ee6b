"""Cross-process event wake latency: ``python benches/ipc_event_latency.py [--events N]``.

A ping-pong between this process (A) and a spawned peer (B), as round-trip times:

- ``npurt device``: A records interprocess event ``ping_k`` on an idle stream and
  host-waits (``synchronize``) on B's ``pong_k``; B's stream has ``wait_event(ping_k)``
  then ``pong_k.record`` queued in advance, so B's side is the device path: the stream
  parks on the external-wait thread and resumes on a worker when ``ping_k`` completes.
- ``npurt host``: the same events, but B host-waits on ``ping_k`` and records ``pong_k``
  on an idle stream (the futex path without a stream in between).
- baselines in the same run: a ``multiprocessing.Pipe`` round trip of one byte
  (``send_bytes``/``recv_bytes``) and a ``multiprocessing.Semaphore`` round trip (POSIX
  semaphores in shared memory: a futex each way).

Each round uses fresh events (a wait before an event's first record waits for that
record, so pre-queued waits are never satisfied early); rounds alternate the order of the
cases. Prints the CPU model, the median and minimum RTT per case in µs and each case's
ratio to the pipe's median. Figures compare only within one run on one machine.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import time

# Both processes must share one status directory (the device's shared region).
os.environ.setdefault("NPURT_STATUS_DIR", tempfile.mkdtemp(prefix="npurt-bench-ipc-"))

import npurt  # noqa: E402


def peer(conn, sem_ping, sem_pong) -> None:
    """Process B: answers every case A asks for until told to stop."""
    s = npurt.Stream()
    while True:
        msg = conn.recv()
        kind = msg[0]
        if kind == "stop":
            return
        if kind == "pipe":
            for _ in range(msg[1]):
                conn.send_bytes(conn.recv_bytes())
        elif kind == "sem":
            for _ in range(msg[1]):
                sem_ping.acquire()
                sem_pong.release()
        else:  # "device" / "host": msg = (kind, ping handles)
            pings = [npurt.Event.from_ipc_handle(h) for h in msg[1]]
            pongs = [npurt.Event(interprocess=True) for _ in pings]
            if kind == "device":
                for ping, pong in zip(pings, pongs, strict=True):
                    s.wait_event(ping, timeout=60.0)
                    pong.record(s)
            conn.send([e.ipc_handle() for e in pongs])
            if kind == "host":
                for ping, pong in zip(pings, pongs, strict=True):
                    ping.synchronize(timeout=60.0)
                    pong.record(s)
            s.synchronize(timeout=120.0)
            del pings, pongs  # give the slots back before the next round makes new ones
            conn.send("done")


def npurt_round(conn, kind: str, n: int, s: npurt.Stream) -> list[float]:
    pings = [npurt.Event(interprocess=True) for _ in range(n)]
    conn.send((kind, [e.ipc_handle() for e in pings]))
    pongs = [npurt.Event.from_ipc_handle(h) for h in conn.recv()]
    out = []
    for ping, pong in zip(pings, pongs, strict=True):
        t = time.perf_counter_ns()
        ping.record(s)
        pong.synchronize(timeout=60.0)
        out.append((time.perf_counter_ns() - t) / 1e3)
    assert conn.recv() == "done"
    return out


def pipe_round(conn, n: int) -> list[float]:
    conn.send(("pipe", n))
    out = []
    for _ in range(n):
        t = time.perf_counter_ns()
        conn.send_bytes(b"x")
        conn.recv_bytes()
        out.append((time.perf_counter_ns() - t) / 1e3)
    return out


def sem_round(conn, sem_ping, sem_pong, n: int) -> list[float]:
    conn.send(("sem", n))
    out = []
    for _ in range(n):
        t = time.perf_counter_ns()
        sem_ping.release()
        sem_pong.acquire()
        out.append((time.perf_counter_ns() - t) / 1e3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100, help="round trips per round (events per side: <= 200)")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    n = max(1, min(a.events, 200))  # a region has 512 event slots; both sides' live at once
    print(npurt.isa_info()["summary"], f"({os.cpu_count()} logical CPUs)")
    ctx = mp.get_context("spawn")
    sem_ping, sem_pong = ctx.Semaphore(0), ctx.Semaphore(0)
    mine, theirs = ctx.Pipe()
    p = ctx.Process(target=peer, args=(theirs, sem_ping, sem_pong), daemon=True)
    p.start()
    s = npurt.Stream()
    cases = {
        "pipe (baseline)": lambda: pipe_round(mine, n),
        "semaphore (baseline)": lambda: sem_round(mine, sem_ping, sem_pong, n),
        "npurt host": lambda: npurt_round(mine, "host", n, s),
        "npurt device": lambda: npurt_round(mine, "device", n, s),
    }
    for run in cases.values():  # warm-up: imports, first mappings, thread start-up
        run()
    res: dict[str, list[float]] = {k: [] for k in cases}
    names = list(cases)
    try:
        for r in range(a.rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                res[name].extend(cases[name]())
    finally:
        mine.send(("stop",))
        p.join(30)
    base = statistics.median(res["pipe (baseline)"])
    print(f"{'round trip':<22}{'median µs':>12}{'min µs':>10}{'vs pipe':>10}   ({a.rounds} x {n})")
    for name, v in res.items():
        med = statistics.median(v)
        print(f"{name:<22}{med:>12.1f}{min(v):>10.1f}{med / base:>9.2f}x")


if __name__ == "__main__":
    main()
