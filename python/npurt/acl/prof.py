"""``acl.prof``: pyacl's profiling calls (``aclprofInit`` / ``aclprofCreateConfig`` /
``aclprofStart`` / ``aclprofStop`` / ``aclprofDestroyConfig`` / ``aclprofFinalize``) over
npurt's profiler::

    ret = acl.prof.init("./prof")
    cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, None, acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
    ret = acl.prof.start(cfg)
    ...                                   # the work to profile
    ret = acl.prof.stop(cfg)              # writes PROF_*/mindstudio_profiler_output/ under ./prof
    ret = acl.prof.destroy_config(cfg)
    ret = acl.prof.finalize()

``stop`` writes ``msprof_<time>.json`` (the Chrome trace, by npurt's one trace writer) and
``op_summary_<time>.csv`` into ``PROF_<n>_<time>/mindstudio_profiler_output`` under the
directory given to ``init``. ``data_type_config`` bits: ``ACL_PROF_ACL_API`` (host launch
slices), ``ACL_PROF_TASK_TIME`` (device tasks; neither bit: both), ``ACL_PROF_TASK_MEMORY``
(memory counters). Errors: 100001 before ``init`` / after ``finalize``, 100002 for a second
``init``, 100000 for bad arguments or a config started twice / stopped unstarted.
"""

from __future__ import annotations

import csv
import os
import threading
import time
from typing import Any, List, Optional

from . import constants as C
from ._state import Fail, add_handle, api, drop_handle, get_handle

__all__ = ["create_config", "destroy_config", "finalize", "init", "start", "stop"]

ACL_PROF_ACL_API = 0x0001
ACL_PROF_TASK_TIME = 0x0002
ACL_PROF_AICORE_METRICS = 0x0004
ACL_PROF_AICPU = 0x0008
ACL_PROF_HCCL_TRACE = 0x0020
ACL_PROF_TRAINING_TRACE = 0x0040
ACL_PROF_MSPROFTX = 0x0080
ACL_PROF_RUNTIME_API = 0x0100
ACL_PROF_TASK_MEMORY = 0x1000
ACL_AICORE_ARITHMETIC_UTILIZATION = 0
ACL_AICORE_PIPE_UTILIZATION = 1
ACL_AICORE_MEMORY_BANDWIDTH = 2
ACL_AICORE_L0B_AND_WIDTH = 3
ACL_AICORE_RESOURCE_CONFLICT_RATIO = 4
ACL_AICORE_NONE = 0xFF

CONSTANTS = [n for n in dir() if n.startswith(("ACL_PROF_", "ACL_AICORE_"))]

_lock = threading.Lock()
_dir: Optional[str] = None
_runs = 0


class _Config:
    def __init__(self, devices: List[int], data_type: int) -> None:
        self.devices = devices
        self.data_type = data_type
        self.prof: Any = None


def _need_init() -> str:
    if _dir is None:
        raise Fail(C.ACL_ERROR_UNINITIALIZE, "acl.prof.init was not called")
    return _dir


@api()
def init(profiler_path: str) -> int:
    """``ret = acl.prof.init(path)``: profiles go under ``path`` (created if missing)."""
    global _dir
    if not isinstance(profiler_path, str):
        raise TypeError("acl.prof.init args parse failed")
    with _lock:
        if _dir is not None:
            raise Fail(C.ACL_ERROR_REPEAT_INITIALIZE, "acl.prof.init was called already")
        if not profiler_path:
            raise Fail(C.ACL_ERROR_INVALID_PARAM, "empty profiler path")
        os.makedirs(profiler_path, exist_ok=True)
        _dir = os.path.abspath(profiler_path)
    return C.ACL_SUCCESS


def create_config(device_id_list: Any, aicore_metrics: int, aicore_events: Any, data_type_config: int) -> int:
    """``cfg = acl.prof.create_config(device_ids, aicore_metrics, aicore_events, data_type)``:
    a config handle (0 on failure, as pyacl returns a null pointer). ``aicore_metrics`` and
    ``aicore_events`` are accepted (npurt has no hardware counters)."""
    if not isinstance(device_id_list, (list, tuple)) or not all(isinstance(d, int) for d in device_id_list):
        raise TypeError("acl.prof.create_config args parse failed")
    if not isinstance(aicore_metrics, int) or not isinstance(data_type_config, int):
        raise TypeError("acl.prof.create_config args parse failed")
    from .. import device_count

    if _dir is None or any(d < 0 or d >= device_count() for d in device_id_list):
        return 0
    return add_handle("prof_config", _Config(list(device_id_list), data_type_config))


@api()
def start(config: int) -> int:
    """``ret = acl.prof.start(cfg)``: starts recording the config's devices."""
    from ..profiler import ProfilerActivity, profile

    _need_init()
    cfg = get_handle("prof_config", config)
    if cfg.prof is not None:
        raise Fail(C.ACL_ERROR_INVALID_PARAM, "this profiling config is already started")
    acts = set()
    if cfg.data_type & (ACL_PROF_ACL_API | ACL_PROF_RUNTIME_API):
        acts.add(ProfilerActivity.CPU)
    if cfg.data_type & ACL_PROF_TASK_TIME:
        acts.add(ProfilerActivity.NPU)
    if not acts:
        acts = {ProfilerActivity.CPU, ProfilerActivity.NPU}
    if ProfilerActivity.CPU in acts:
        acts.add(ProfilerActivity.NPU)  # host slices are drawn with the tasks they queue
    p = profile(activities=acts, profile_memory=bool(cfg.data_type & ACL_PROF_TASK_MEMORY),
                devices=cfg.devices or None)
    p.start()
    cfg.prof = p
    return C.ACL_SUCCESS


@api()
def stop(config: int) -> int:
    """``ret = acl.prof.stop(cfg)``: stops and writes the profile under the init directory."""
    global _runs
    root = _need_init()
    cfg = get_handle("prof_config", config)
    if cfg.prof is None:
        raise Fail(C.ACL_ERROR_INVALID_PARAM, "this profiling config was not started")
    p, cfg.prof = cfg.prof, None
    p.stop()
    with _lock:
        _runs += 1
        n = _runs
    stamp = time.strftime("%Y%m%d%H%M%S")
    out = os.path.join(root, f"PROF_{n:06d}_{stamp}", "mindstudio_profiler_output")
    os.makedirs(out, exist_ok=True)
    p.export_chrome_trace(os.path.join(out, f"msprof_{stamp}.json"))
    _op_summary(p, os.path.join(out, f"op_summary_{stamp}.csv"))
    return C.ACL_SUCCESS


def _op_summary(p: Any, path: str) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Device_id", "Stream ID", "Task ID", "Op Name", "Task Type", "Task Start Time(us)",
                    "Task Duration(us)", "Task Wait Time(us)", "Block Dim", "Input Shapes", "Source Location"])
        for e in p.events():
            w.writerow([e.device, e.stream, e.seq, e.name, e.kind, f"{e.start_ns / 1e3:.3f}",
                        f"{(e.end_ns - e.start_ns) / 1e3:.3f}", f"{(e.start_ns - e.submit_ns) / 1e3:.3f}",
                        e.blocks, e.shapes or "", e.site or ""])


@api()
def destroy_config(config: int) -> int:
    """``ret = acl.prof.destroy_config(cfg)`` (a started config is stopped, unsaved)."""
    cfg = drop_handle("prof_config", config)
    if cfg.prof is not None:
        cfg.prof._running = False
        cfg.prof._end()
        cfg.prof = None
    return C.ACL_SUCCESS


@api()
def finalize() -> int:
    """``ret = acl.prof.finalize()``: 100001 without ``init``."""
    global _dir
    with _lock:
        if _dir is None:
            raise Fail(C.ACL_ERROR_UNINITIALIZE, "acl.prof.init was not called")
        _dir = None
    return C.ACL_SUCCESS


