"""torch's profiler API (npurt.npu.profiler) with schedule / step / on_trace_ready, the
tensorboard handler's torch_npu layout, and pyacl's acl.prof calls."""

import glob
import os

import npurt
import npurt.acl as acl
from npurt.npu import profiler as P
from trace_check import check_trace


def test_schedule_matches_torch():
    sch = P.schedule(wait=1, warmup=1, active=2, repeat=1, skip_first=1)
    A = P.ProfilerAction
    assert [sch(i) for i in range(7)] == [A.NONE, A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE, A.NONE, A.NONE]


def test_torch_style_profile_keeps_the_active_steps(tmp_path):
    s = npurt.Stream()
    ready = []
    with P.profile(activities=[P.ProfilerActivity.CPU, P.ProfilerActivity.NPU],
                   schedule=P.schedule(wait=1, warmup=1, active=2),
                   on_trace_ready=P.tensorboard_trace_handler(str(tmp_path)),
                   record_shapes=False, profile_memory=False, with_stack=False) as prof:
        for step in range(5):
            for _ in range(step + 1):
                npurt.kernels.empty(stream=s)
            s.synchronize()
            if step == 3:
                ready.append(len(prof.events()))
            prof.step()
    # Steps 2 and 3 were active: 3 + 4 kernels, saved at the step that ended the window
    # (the warm-up step 5 that exit interrupts is not kept).
    assert ready == [0]
    assert len(prof.events()) == 7
    traces = glob.glob(str(tmp_path / "*_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"))
    assert len(traces) == 1
    summary = check_trace(traces[0])
    assert len(summary.device_tasks()) == 7
    steps = [e["name"] for e in summary.trace["traceEvents"] if e.get("cat") == "user_annotation"]
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
    assert os.path.exists(os.path.join(os.path.dirname(traces[0]), "kernel_details.csv"))


def test_acl_prof_writes_under_the_init_dir(tmp_path):
    cfg0 = acl.prof.create_config([0], acl.ACL_AICORE_NONE, None, acl.ACL_PROF_TASK_TIME)
    assert cfg0 == 0  # before init: a null config
    assert acl.prof.start(12345) == acl.ACL_ERROR_UNINITIALIZE
    assert acl.prof.init(str(tmp_path)) == acl.ACL_SUCCESS
    assert acl.prof.init(str(tmp_path)) == acl.ACL_ERROR_REPEAT_INITIALIZE
    try:
        cfg = acl.prof.create_config([0], acl.ACL_AICORE_NONE, None, acl.ACL_PROF_ACL_API | acl.ACL_PROF_TASK_TIME)
        assert cfg != 0
        assert acl.prof.stop(cfg) == acl.ACL_ERROR_INVALID_PARAM  # not started
        assert acl.prof.start(cfg) == acl.ACL_SUCCESS
        assert acl.prof.start(cfg) == acl.ACL_ERROR_INVALID_PARAM
        stream, ret = acl.rt.create_stream()
        assert ret == 0
        npurt.kernels.empty()
        npurt.synchronize()
        assert acl.prof.stop(cfg) == acl.ACL_SUCCESS
        assert acl.prof.destroy_config(cfg) == acl.ACL_SUCCESS
        assert acl.rt.destroy_stream(stream) == 0
    finally:
        assert acl.prof.finalize() == acl.ACL_SUCCESS
    assert acl.prof.finalize() == acl.ACL_ERROR_UNINITIALIZE
    out = glob.glob(str(tmp_path / "PROF_*" / "mindstudio_profiler_output" / "msprof_*.json"))
    assert len(out) == 1
    assert any(t["args"]["kind"] == "kernel" for t in check_trace(out[0]).device_tasks())
    assert glob.glob(str(tmp_path / "PROF_*" / "mindstudio_profiler_output" / "op_summary_*.csv"))
