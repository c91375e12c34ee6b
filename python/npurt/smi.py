"""``npurt-smi`` (``python -m npurt.smi``): the virtual devices of every npurt process on
this host, in ``npu-smi info``'s table (Health, AICore(%), Memory-Usage(MB),
Hugepages-Usage(page), the process table) or as JSON.

It reads the per-device shared status regions (the processes attached to each device,
their memory, quota and streams, updated on every allocation) and the status records the
processes keep (:mod:`npurt._status`: AI-core utilisation, hugetlb pages); it starts no
device itself. A process that is gone (killed without exiting) is shown once as ``Stale``;
its record is then removed and its share of the device reclaimed.

    npurt-smi                 # the table
    npurt-smi --json          # the same data for scripts
    npurt-smi --watch 1       # redraw every second (Ctrl-C stops)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from . import _status

__all__ = ["collect", "main", "render"]

MB = 1 << 20
HUGE_PAGE = 2 << 20


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped) is gone for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _hugepages_total() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("HugePages_Total:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _regions(clean: bool) -> list[dict[str, Any]]:
    from . import _npurt

    try:
        regions = _npurt._shared_snapshot()
    except Exception:  # noqa: BLE001 - an unsafe status directory: nothing shared to read
        return []
    if clean and any(not p["alive"] for r in regions for p in r["processes"]):
        try:
            _npurt._shared_reclaim()
        except Exception:  # noqa: BLE001 - a stuck lock: reclaimed next time
            pass
    return regions


def _merge_regions(procs: list[dict[str, Any]], regions: list[dict[str, Any]]) -> None:
    """Region data (exact, live) over the records' copies; processes that keep no record
    (``NPURT_STATUS=0``, Rust programs) are added from the regions."""
    by_pid = {r["pid"]: r for r in procs}
    for reg in regions:
        for p in reg["processes"]:
            rec = by_pid.get(p["pid"])
            if rec is None:
                if p["pid"] == os.getpid():
                    continue
                rec = by_pid[p["pid"]] = {"pid": p["pid"], "name": p["name"], "stale": not p["alive"],
                                          "updated": None, "devices": []}
                procs.append(rec)
            rec["stale"] = rec["stale"] or not p["alive"]
            dv = next((x for x in rec["devices"] if x["device"] == reg["device"]), None)
            if dv is None:
                dv = {"device": reg["device"], "capacity": reg["capacity"], "workers": 0, "events": 0}
                rec["devices"].append(dv)
            dv.update(allocated=p["allocated"], reserved=p["reserved"], quota=p["quota"], shared=True,
                      capacity=reg["capacity"], events=max(dv.get("events", 0), p["events"]))
            rec["streams"] = max(rec.get("streams", 0), p["streams"])


def collect(clean: bool = True) -> dict[str, Any]:
    """Every process using a device: ``{"devices": [...], "processes": [...]}`` from the
    shared regions and the status records. Dead processes are marked ``"stale": True``
    and (``clean``) their records removed and their shares reclaimed."""
    try:
        d = _status.status_dir()
    except Exception as e:  # noqa: BLE001 - an unsafe status directory
        return {"time": time.time(), "status_dir": None, "error": str(e), "hugepages_total": _hugepages_total(),
                "devices": [], "processes": []}
    procs: list[dict[str, Any]] = []
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            rec = json.loads(p.read_text())
            pid = int(rec["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if pid == os.getpid():
            continue
        rec["stale"] = not _alive(pid)
        if rec["stale"] and clean:
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        procs.append(rec)
    _merge_regions(procs, _regions(clean))
    devices: dict[int, dict[str, Any]] = {}
    for rec in procs:
        for dv in rec.get("devices", []):
            agg = devices.setdefault(
                dv["device"],
                {"device": dv["device"], "aicore_count": 0, "aicore_util": 0.0, "memory_total": 0,
                 "memory_used": 0, "memory_reserved": 0, "events": 0, "streams": 0, "hugetlb_pages": 0,
                 "processes": 0, "health": "OK"},
            )
            agg["memory_total"] = max(agg["memory_total"], dv["capacity"])
            agg["aicore_count"] = max(agg["aicore_count"], dv.get("workers", 0))
            if rec["stale"]:
                agg["health"] = "Warning"
                continue
            agg["processes"] += 1
            agg["aicore_util"] = min(100.0, agg["aicore_util"] + dv.get("aicore_util", 0.0))
            agg["memory_used"] += dv["allocated"]
            agg["memory_reserved"] += dv["reserved"]
            agg["events"] += dv.get("events", 0)
            agg["streams"] += rec.get("streams", 0)
            agg["hugetlb_pages"] += dv.get("hugetlb_bytes", 0) // HUGE_PAGE
    return {
        "time": time.time(),
        "status_dir": str(d),
        "hugepages_total": _hugepages_total(),
        "devices": [devices[k] for k in sorted(devices)],
        "processes": [
            {"pid": r["pid"], "name": r.get("name", "?"), "stale": r["stale"], "updated": r.get("updated"),
             "streams": r.get("streams", 0),
             "devices": [{"device": dv["device"], "memory_used": dv["allocated"], "memory_reserved": dv["reserved"],
                          "quota": dv.get("quota", 0), "shared": dv.get("shared", False)}
                         for dv in r.get("devices", [])]}
            for r in procs
        ],
    }


def render(info: dict[str, Any]) -> str:
    """``npu-smi info``'s layout (its column labels, so scripts that grep them work)."""
    w = 96
    bar = "+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 50 + "+"
    dbl = "+" + "=" * 27 + "+" + "=" * 15 + "+" + "=" * 50 + "+"
    out = ["+" + "-" * (w - 2) + "+", f"| {'npurt-smi':<20}Version: npurt (virtual NPUs on the CPU)".ljust(w - 1) + "|", bar,
           f"| {'NPU   Name':<26}| {'Health':<14}| {'AICore(%)   Memory-Usage(MB)  Hugepages-Usage(page)':<49}|",
           f"| {'Chip':<26}| {'Bus-Id':<14}| {'Streams     Events            Reserved(MB)':<49}|", dbl]
    huge_total = info.get("hugepages_total", 0)
    for dv in info["devices"]:
        mem = f"{dv['memory_used'] // MB} / {dv['memory_total'] // MB}"
        huge = f"{dv['hugetlb_pages']} / {huge_total}"
        out.append(f"| {dv['device']:<6}{'npurt-vNPU':<20}| {dv['health']:<14}| "
                   f"{dv['aicore_util']:<12.1f}{mem:<18}{huge:<19}|")
        out.append(f"| {0:<26}| {'virtual':<14}| {dv['streams']:<12}{dv['events']:<18}"
                   f"{dv['memory_reserved'] // MB:<19}|")
        out.append(dbl)
    if not info["devices"]:
        out.append(f"| {'No npurt process is using a device':<{w - 3}}|")
        out.append(dbl)
    out.append("+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 26 + "+" + "-" * 23 + "+")
    out.append(f"| {'NPU     Chip':<26}| {'Process id':<14}| {'Process name':<25}| {'Process memory(MB)':<22}|")
    out.append(dbl.replace("=" * 50, "=" * 26 + "+" + "=" * 23))
    rows = 0
    for p in info["processes"]:
        for dv in p["devices"]:
            name = (p["name"] + (" (Stale)" if p["stale"] else ""))[:24]
            out.append(f"| {dv['device']:<8}{0:<18}| {p['pid']:<14}| {name:<25}| {dv['memory_reserved'] // MB:<22}|")
            rows += 1
    if not rows:
        out.append(f"| {'No running processes found in NPU':<{w - 3}}|")
    out.append("+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 26 + "+" + "-" * 23 + "+")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="npurt-smi", description="npurt's virtual NPUs across processes")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--watch", nargs="?", const=1.0, type=float, metavar="SECONDS",
                    help="redraw every SECONDS (default 1) until interrupted")
    ap.add_argument("--count", type=int, default=0, help="with --watch: stop after COUNT redraws")
    args = ap.parse_args(argv)
    n = 0
    try:
        while True:
            info = collect()
            if args.json:
                print(json.dumps(info))
            else:
                if args.watch and sys.stdout.isatty():
                    print("\033[2J\033[H", end="")
                print(render(info))
            sys.stdout.flush()
            n += 1
            if not args.watch or (args.count and n >= args.count):
                return 0
            time.sleep(max(0.05, args.watch))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
