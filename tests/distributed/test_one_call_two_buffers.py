"""The one-call path of the two-buffer collectives (issue 18, session 12):
``all_gather_into_tensor``, ``reduce_scatter_tensor`` and ``all_to_all_single`` with
``async_op=False`` and no timeout run through ``_npurt._Comm.run_sync(..., output=)``; it
takes them only when the general path would do the same, and orders them the same way.
Local backend (threads)."""

import npurt
import npurt.distributed as dist
import numpy as np
import pytest
from test_local import run_ranks


def spy(g):
    """Wraps the group's one-call path; returns the list of (kind, taken) it saw."""
    seen, inner = [], g.one_call

    def f(kind, *a, **k):
        taken = inner(kind, *a, **k)
        seen.append((kind, taken))
        return taken

    g.one_call = f
    return seen


@pytest.mark.parametrize("one_call", [True, False])
def test_two_buffer_collectives_take_the_one_call_path_and_order_like_the_general_path(one_call):
    # Work queued on the current stream before a collective is in its input; work after
    # it sees its output. Same results with the one-call path switched off.
    world = 3

    def fn(r):
        g = dist.group_of(None)
        seen = spy(g) if one_call else None
        if not one_call:
            g.one_call = None
        dev = r % 2
        x = npurt.to_device(np.arange(6, dtype=np.float32) + 10 * r, device=dev)
        out = {}
        for step in range(2):
            npurt.add(x, 1.0, out=x)  # before: in the input
            ag = npurt.empty((world * 6,), "float32", device=dev)
            dist.all_gather_into_tensor(ag, x)
            npurt.multiply(ag, 2.0, out=ag)  # after: sees the gathered data
            rs = npurt.empty((2,), "float32", device=dev)
            dist.reduce_scatter_tensor(rs, x)
            a2a = npurt.empty((6,), "float32", device=dev)
            dist.all_to_all_single(a2a, x)
            out[step] = (ag.to_host().tolist(), rs.to_host().tolist(), a2a.to_host().tolist())
        return out, seen

    res = run_ranks(world, fn)
    for r, (out, seen) in enumerate(res):
        for step in range(2):
            xs = [np.arange(6, dtype=np.float32) + 10 * q + step + 1 for q in range(world)]
            ag, rs, a2a = out[step]
            assert ag == (2 * np.concatenate(xs)).tolist(), (r, step, ag)
            assert rs == sum(xs)[2 * r:2 * r + 2].tolist(), (r, step, rs)
            assert a2a == np.concatenate([x[2 * r:2 * r + 2] for x in xs]).tolist(), (r, step, a2a)
        if one_call:
            # The first call finds no communication stream for the device yet: the general
            # path makes it; every later call is the one-call path's.
            expect = [("all_gather", True), ("reduce_scatter", True), ("all_to_all", True)] * 2
            assert seen == [("all_gather", False)] + expect[1:], seen


def test_the_one_call_path_declines_what_the_general_path_must_take():
    # Nothing done, False: the general path takes the call (and raises its errors).
    def fn(r):
        g = dist.group_of(None)
        dev = r % 2
        x = npurt.to_device(np.ones(4, np.float32), device=dev)
        wide = npurt.empty((4, 4), "float32", device=dev)
        other_dtype = npurt.empty((8,), "int32", device=dev)
        other_dev = npurt.empty((8,), "float32", device=1 - dev)
        ok = npurt.empty((8,), "float32", device=dev)
        seq = g.backend.comm.seq
        declined = [
            g.one_call("all_gather", x._a, 0, 0, g._streams, output=wide[:, :2]._a),  # non-contiguous
            g.one_call("all_gather", x._a, 0, 0, g._streams, output=other_dtype._a),
            g.one_call("all_gather", x._a, 0, 0, g._streams, output=other_dev._a),
            g.one_call("all_gather", x._a, 0, 0, g._streams, output=np.zeros(8, np.float32)),
            g.one_call("all_gather", x._a, 0, 0, g._streams),  # two-buffer kind, no output
            g.one_call("all_reduce", x._a, 0, 0, g._streams, output=ok._a),  # in-place kind
        ]
        nothing_ran = g.backend.comm.seq == seq
        with pytest.raises(npurt.InvalidValueError, match="contiguous"):
            dist.all_gather_into_tensor(wide[:, :2], x)
        dist.all_gather_into_tensor(ok, x)  # and then a call it takes
        return declined, nothing_ran, ok.to_host().tolist()

    for declined, nothing_ran, got in run_ranks(2, fn):
        assert declined == [False] * 6 and nothing_ran, declined
        assert got == [1.0] * 8


def test_a_one_call_size_mismatch_raises_the_general_paths_error():
    # The checks are the engine's (`check_regions`), the same text on either path.
    def fn(r):
        x = npurt.to_device(np.ones(4, np.float32), device=r % 2)
        small = npurt.empty((3,), "float32", device=r % 2)
        with pytest.raises(npurt.CollectiveError, match="holds 12 bytes, 32 needed"):
            dist.all_gather_into_tensor(small, x)
        return True

    assert run_ranks(2, fn) == [True, True]
