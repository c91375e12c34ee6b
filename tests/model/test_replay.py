"""Plan replay (``npurt_kernels::replay`` through ``Plan.run``): a recorded instance gives
bitwise the results of the step-by-step path, instances are reused once their run
completed and added while all are busy, and concurrent runs from several threads on
their own streams each get their own instance."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

pytest.importorskip("onnx")
sys.path.insert(0, os.path.dirname(__file__))
import builders  # noqa: E402
import npurt  # noqa: E402

MODELS = {
    "mlp": (lambda: builders.mlp(), (5, 16)),
    "transformer": (lambda: builders.transformer_block(), (2, 7, 32)),
    "conv_net": (lambda: builders.conv_net(), (2, 3, 16, 16)),
}


def _load(name):
    build, shape = MODELS[name]
    proto, ref = build()
    return npurt.Model.load(proto), ref, shape


@pytest.mark.parametrize("name", sorted(MODELS))
def test_replay_is_bitwise_the_step_path(name):
    m, ref, shape = _load(name)
    rng = np.random.default_rng(5)
    s = npurt.Stream()
    for _ in range(3):
        x = npurt.to_device(rng.standard_normal(shape).astype(np.float32))
        plan = m.plan(x)
        (want,) = plan.run([x], None, s, m.device, replay=False)
        (got,) = plan.run([x], None, s, m.device)
        s.synchronize()
        assert plan.replay_off is None, plan.replay_off
        np.testing.assert_array_equal(got.to_host(), want.to_host())
        np.testing.assert_allclose(got.to_host(), ref(x.to_host()), rtol=2e-4, atol=2e-5)
    assert plan.instances == 1  # each run completed before the next: one instance reused


def test_busy_instances_add_more_and_outputs_are_the_callers():
    m, ref, shape = _load("transformer")
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(6)]
    ss = [npurt.Stream() for _ in range(3)]
    for s in ss:
        npurt.kernels.busy(0.03, stream=s)  # the runs queue behind it: their instances stay busy
    given = npurt.empty((2, 7, 32))
    outs = [m.run_async([x], stream=ss[i % 3])[0] for i, x in enumerate(xs[:-1])]
    outs.append(m.run_async([xs[-1]], outputs=[given], stream=ss[2])[0])
    assert outs[-1] is given
    for s in ss:
        s.synchronize()
    # One instance per stream: runs queued on one stream reuse its instance (stream order),
    # a busy instance is never taken by another stream.
    assert m.plan(xs[0]).instances == 3
    for x, y in zip(xs, outs, strict=True):
        np.testing.assert_allclose(y.to_host(), ref(x), rtol=2e-4, atol=2e-5)
    assert len({id(y) for y in outs}) == len(outs)


def test_four_threads_on_four_streams_share_one_model():
    m, ref, shape = _load("transformer")
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
    want = [ref(x) for x in xs]
    errors = []
    barrier = threading.Barrier(4)

    def worker(k):
        try:
            s = npurt.Stream()
            xd = npurt.to_device(xs[k], stream=s)
            barrier.wait(10)
            for _ in range(5):
                ys = [m.run_async([xd], stream=s)[0] for _ in range(3)]
                s.synchronize()
                for y in ys:
                    np.testing.assert_allclose(y.to_host(), want[k], rtol=2e-4, atol=2e-5)
        except Exception as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors, errors[0]
    assert 1 <= m.plan(xs[0]).instances <= 12


def test_an_input_written_on_another_stream_is_waited_for():
    m, ref, shape = _load("mlp")
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    s1, s2 = npurt.Stream(), npurt.Stream()
    m.run(x, stream=s2)  # the first run records the instance
    xd = npurt.empty(shape)
    npurt.kernels.busy(0.03, stream=s1)
    xd.copy_(x, stream=s1)  # written late on s1
    (y,) = m.run_async([xd], stream=s2)
    np.testing.assert_allclose(y.to_host(), ref(x), rtol=1e-5, atol=1e-6)


def test_replay_can_be_turned_off(tmp_path):
    import subprocess

    code = (
        "import sys; sys.path.insert(0, %r); import builders, npurt, numpy as np\n"
        "m = npurt.Model.load(builders.mlp()[0])\n"
        "x = np.ones((2, 16), np.float32); m(x); p = m.plan(x)\n"
        "print(p.instances, p.replay_off)\n"
    ) % os.path.dirname(__file__)
    env = dict(os.environ, NPURT_MODEL_REPLAY="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "NPURT_MODEL_REPLAY=0"]


def test_conv_batch_norm_pairs_are_folded_at_load():
    m, ref, shape = _load("conv_net")
    assert m._graph.fused == 1
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
    plan = m.plan(x)
    assert "BatchNormalization" not in {s.op for s in plan.step_list}
    np.testing.assert_allclose(m(x).to_host(), ref(x), rtol=2e-4, atol=2e-5)


def test_the_sanitizer_sees_a_replays_copies_of_the_callers_arrays():
    # racecheck: a replay reads the caller's inputs and writes its outputs (its copies in
    # and out); the host touching them before the stream got there is a race.
    m, ref, shape = _load("mlp")
    s = npurt.Stream()
    x = npurt.to_device(np.random.default_rng(11).standard_normal(shape).astype(np.float32))
    plan = m.plan(x)
    plan.run([x], None, s, m.device)  # records the instance
    s.synchronize()
    assert plan.instances == 1 and plan.replay_off is None, plan.replay_off
    with npurt.sanitizer.check("racecheck") as rep:
        npurt.kernels.busy(0.2, stream=s)
        (y,) = plan.run([x], None, s, m.device)  # a replay, queued behind the busy kernel
        assert plan.instances == 1
        x._host_view()  # a writable view: a host write of x before the replay read it
        y._host_view()  # y before the replay wrote it
        s.synchronize()
    assert rep.errors == 2, rep.text
    assert "Host write to memory a queued kernel has not read yet" in rep.text, rep.text
    assert "kernel copy (replay input)" in rep.text, rep.text
    assert "Host access to a kernel's output before the kernel is known complete" in rep.text, rep.text
    assert "kernel copy (replay output)" in rep.text, rep.text
    with npurt.sanitizer.check("racecheck") as rep:
        (y,) = plan.run([x], None, s, m.device)
        got = y.to_host()  # waits for y's writer, the replay's stream
        x._host_view()  # the replay read x before y was written: ordered
    assert not rep, rep.text
    np.testing.assert_allclose(got, ref(x.to_host()), rtol=1e-5, atol=1e-6)


def test_the_repeat_signature_path_still_checks_every_input():
    # After a run of device arrays, a run of the same signature skips feed parsing and the
    # plan lookup (Model.run_async): anything else must still take the checked path.
    m, ref, shape = _load("mlp")
    rng = np.random.default_rng(9)
    x = rng.standard_normal(shape).astype(np.float32)
    s = npurt.Stream()
    xd = npurt.to_device(x)
    np.testing.assert_allclose(m.run_async([xd], stream=s)[0].to_host(), ref(x), rtol=1e-4, atol=1e-5)
    y = m.run_async((xd,), stream=s)[0]  # the repeat path, a tuple too
    np.testing.assert_allclose(y.to_host(), ref(x), rtol=1e-4, atol=1e-5)
    with pytest.raises(npurt.InvalidTypeError, match="int32"):
        m.run_async([npurt.to_device(x.astype(np.int32))], stream=s)
    with pytest.raises(npurt.InvalidValueError):
        m.run_async([xd, xd], stream=s)
    # A strided view of the right shape: copied to a contiguous input, the right result.
    wide = npurt.to_device(np.repeat(x, 2, axis=1))
    view = wide[:, ::2]
    assert view.shape == xd.shape and not view.is_contiguous
    np.testing.assert_allclose(m.run_async([view], stream=s)[0].to_host(), ref(x), rtol=1e-4, atol=1e-5)
    # Another batch size: its own plan, and then the repeat path for it.
    x2 = rng.standard_normal((shape[0] + 3,) + shape[1:]).astype(np.float32)
    for _ in range(2):
        np.testing.assert_allclose(m.run_async([npurt.to_device(x2)], stream=s)[0].to_host(), ref(x2), rtol=1e-4, atol=1e-5)
    # A numpy input after device arrays: the checked path (host data copied in).
    np.testing.assert_allclose(m.run([x], stream=s)[0].to_host(), ref(x), rtol=1e-4, atol=1e-5)
