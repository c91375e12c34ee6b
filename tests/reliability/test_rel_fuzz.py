"""Stateful fuzzing of the runtime: a hypothesis RuleBasedStateMachine over streams, events
(timing, timeouts), contexts with memory limits, buffers, arrays, copies, kernels, host
callbacks, memory pools and their destruction — including freed objects, destroyed
handles, absurd sizes and injected allocation failures (``_npurt._fault_set("alloc:N")``).
After every step: no crash, every error an npurt.Error, the statistics consistent; after the run (every sequence torn down): memory back to the baseline.

CI: 56 sequences of up to 50 steps (≥ 2 000 steps). ``-m soak``: 1 250 of up to 100 (≥ 100 000)."""

import gc
import threading
import warnings

import npurt
import numpy as np
import pytest
from helpers import release_stream
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, multiple, rule
from npurt import _npurt

LONG = 30.0
SHAPES = st.sampled_from([(1,), (7,), (64,), (3, 5), (16, 16), (2, 3, 4)])
ABSURD = st.sampled_from([0, -1, 1 << 62, 2**64 + 1, 1 << 50])
STEPS = {"count": 0, "sequences": 0, "errors": 0, "baseline": None}


def expect_typed(fn, *args, **kwargs):
    """Calls fn; an exception must be an npurt.Error. Returns (ok, value)."""
    try:
        return True, fn(*args, **kwargs)
    except npurt.Error:
        STEPS["errors"] += 1
        return False, None


class Runtime(RuleBasedStateMachine):
    streams = Bundle("streams")
    events = Bundle("events")
    arrays = Bundle("arrays")
    buffers = Bundle("buffers")

    def __init__(self):
        super().__init__()
        self.owned_streams, self.keep, self.model = [], [], {}
        self.callbacks, self.expected_callbacks = [], 0

    @initialize()
    def start(self):
        gc.collect()
        if STEPS["baseline"] is None:
            npurt.synchronize(timeout=LONG)
            STEPS["baseline"] = npurt.memory_allocated()
        self.owned_streams = []
        self.model = {}  # id(DeviceArray) -> expected numpy value
        self.readers = {}  # id(DeviceArray) -> streams with queued reads of it
        # id(DeviceArray) -> the streams whose work made its value: a value is only checked
        # when none of them failed (a timed-out wait...) or dropped work (destroy(force)).
        self.deps = {}
        self.dropped = []
        self.keep = []  # arrays, buffers, pools, events (released at teardown)
        self.callbacks = []
        self.expected_callbacks = 0
        self.lock = threading.Lock()
        STEPS["sequences"] += 1

    # --- streams and events -----------------------------------------------------------

    @rule(target=streams, priority=st.integers(-2, 9))
    def new_stream(self, priority):
        ok, s = expect_typed(npurt.Stream, priority=priority)
        assert ok == (0 <= priority <= 7)
        if ok:
            self.owned_streams.append(s)
            return s
        return npurt.default_stream()

    @rule(s=streams, force=st.booleans())
    def destroy_stream(self, s, force):
        if s.is_default:
            assert not expect_typed(s.destroy)[0]
            return
        ok, _ = expect_typed(s.destroy, force=force)
        if ok and force:
            self.dropped.append(s)
        if not ok:
            assert not s.is_alive or force is False
        assert not s.is_alive

    @rule(target=events, s=streams, timing=st.booleans())
    def record(self, s, timing):
        e = npurt.Event(timing=timing)
        self.keep.append(e)
        ok, _ = expect_typed(e.record, s)
        assert ok or not s.is_alive or expect_typed(s.query)[0] is False
        return e

    @rule(s=streams, e=events, timeout=st.sampled_from([None, 0.5, 3600.0]))
    def wait_event(self, s, e, timeout):
        expect_typed(s.wait_event, e, timeout=timeout)

    @rule(e=events)
    def sync_event(self, e):
        expect_typed(e.synchronize, timeout=LONG)

    @rule(a=events, b=events)
    def elapsed(self, a, b):
        ok, ms = expect_typed(a.elapsed_time, b)
        if ok:
            assert isinstance(ms, float)

    @rule(s=streams)
    def sync_stream(self, s):
        ok, _ = expect_typed(s.synchronize, timeout=LONG)
        if ok:
            assert s.query()

    @rule(s=streams, n=st.integers(1, 3))
    def host_callbacks(self, s, n):
        for i in range(n):
            ok, _ = expect_typed(s.launch_host_func, self._callback, i)
            if ok:
                self.expected_callbacks += 1

    def _callback(self, i):
        with self.lock:
            self.callbacks.append(i)

    @rule(s=streams, seconds=st.sampled_from([0.0, 0.0005]), blocks=st.integers(1, 4))
    def busy(self, s, seconds, blocks):
        expect_typed(npurt.kernels.busy, seconds, stream=s, blocks=blocks)

    # --- arrays and kernels ------------------------------------------------------------

    @rule(target=arrays, shape=SHAPES, value=st.floats(-4, 4, allow_nan=False).map(lambda v: float(np.float32(v))))
    def full(self, shape, value):
        ok, a = expect_typed(npurt.full, shape, value)  # fails only when a fault was armed
        if not ok:
            return multiple()
        self.model[id(a)] = np.full(shape, value, np.float32)
        self.deps[id(a)] = [npurt.current_stream()]
        self.keep.append(a)
        return a

    @rule(target=arrays, a=arrays, s=streams, op=st.sampled_from(["add1", "mul2", "neg", "exp", "copy"]))
    def unary(self, a, s, op):
        fns = {
            "add1": (lambda x, s: npurt.add(x, 1.0, stream=s), lambda v: v + np.float32(1)),
            "mul2": (lambda x, s: npurt.multiply(x, 2.0, stream=s), lambda v: v * np.float32(2)),
            "neg": (lambda x, s: npurt.negative(x, stream=s), lambda v: -v),
            "exp": (lambda x, s: npurt.exp(npurt.multiply(x, 0.0, stream=s), stream=s), lambda v: np.ones_like(v)),
            "copy": (lambda x, s: x.copy(stream=s), lambda v: v.copy()),
        }
        f, ref = fns[op]
        ok, out = expect_typed(f, a, s)
        if not ok:
            return a
        self.readers.setdefault(id(a), []).append(s)
        if id(a) in self.model:
            self.model[id(out)] = ref(self.model[id(a)])
            self.deps[id(out)] = [*self.deps.get(id(a), []), s]
        self.keep.append(out)
        return out

    @rule(a=arrays, b=arrays, s=streams)
    def add_into(self, a, b, s):
        if a is b:
            return
        try:
            fits = np.broadcast_shapes(a.shape, b.shape) == a.shape  # b broadcasts into out=a
        except ValueError:
            fits = False
        # Arrays order a write after their last writer, not after readers on other streams
        # (CUDA's rule too): correct code makes the writing stream wait for the reader.
        for r in self.readers.pop(id(a), []):
            if r is not s and r.is_alive and s.is_alive:
                expect_typed(s.wait_stream, r)
        ok, _ = expect_typed(npurt.add, a, b, out=a, stream=s)
        assert fits or not ok, f"add of {b.shape} into out={a.shape} was accepted"
        if ok:
            self.readers.setdefault(id(b), []).append(s)
        if ok and id(a) in self.model and id(b) in self.model:
            self.model[id(a)] = self.model[id(a)] + self.model[id(b)]
            self.deps[id(a)] = [*self.deps.get(id(a), []), *self.deps.get(id(b), []), s]
        elif ok:
            self.model.pop(id(a), None)

    def _trusted(self, a):
        """False when a stream that made ``a``'s value failed or dropped queued work."""
        for s in self.deps.get(id(a), []):
            if any(s is d for d in self.dropped):
                return False
            try:
                s.query()
            except npurt.TaskFailedError:
                return False
            except npurt.Error:
                pass  # destroyed after its work ran
        return True

    @rule(a=arrays)
    def read(self, a):
        ok, host = expect_typed(a.to_host)
        if ok and id(a) in self.model and self._trusted(a):
            np.testing.assert_allclose(host, self.model[id(a)], rtol=1e-5, atol=1e-5)

    @rule(a=arrays, s=streams)
    def reduce(self, a, s):
        ok, r = expect_typed(npurt.sum, a, stream=s)
        if ok and id(a) in self.model:
            ok2, v = expect_typed(r.to_host)
            if ok2 and self._trusted(a):
                np.testing.assert_allclose(v, self.model[id(a)].sum(), rtol=1e-4, atol=1e-3)

    @rule(shape=st.lists(st.sampled_from([0, 1, 1 << 31, 1 << 40, -1]), min_size=1, max_size=3))
    def absurd_array(self, shape):
        ok, a = expect_typed(npurt.empty, tuple(shape))
        if ok:
            assert a.size == int(np.prod(shape))

    # --- memory ------------------------------------------------------------------------

    @rule(target=buffers, n=st.integers(1, 1 << 20))
    def malloc(self, n):
        ok, b = expect_typed(npurt.malloc, n)  # fails only when a fault was armed
        if not ok:
            return multiple()
        self.keep.append(b)
        return b

    @rule(n=ABSURD)
    def malloc_absurd(self, n):
        assert not expect_typed(npurt.malloc, n)[0]

    @rule(b=buffers)
    def free(self, b):
        expect_typed(b.free)

    @rule(dst=buffers, src=buffers, s=streams)
    def copy_async(self, dst, src, s):
        n = min(dst.nbytes, src.nbytes) if not dst.freed and not src.freed else 16
        expect_typed(npurt.memcpy_async, dst, src, s, nbytes=n)

    @rule(b=buffers, s=streams, v=st.integers(-1, 256))
    def memset_async(self, b, s, v):
        ok, _ = expect_typed(npurt.memset_async, b, v, s)
        assert not ok or 0 <= v <= 255

    @rule(b=buffers)
    def host_roundtrip(self, b):
        if b.freed:
            assert not expect_typed(b.copy_to_host)[0]
            return
        # A synchronous memcpy is not ordered with async copies/memsets of b still queued on
        # streams (ACL's rule): let those finish first, or they overwrite the data.
        for s in [*self.owned_streams, npurt.default_stream()]:
            if s.is_alive:
                expect_typed(s.synchronize, timeout=LONG)
        data = np.arange(b.nbytes, dtype=np.uint64).astype(np.uint8)
        written, _ = expect_typed(npurt.memcpy, b, data)
        ok, back = expect_typed(b.copy_to_host)
        if written and ok:
            assert (np.frombuffer(bytes(back), np.uint8) == data).all()

    @rule(size=st.sampled_from([1 << 20, 4 << 20]), n=st.integers(1, 3))
    def mempool(self, size, n):
        pool = npurt.MemPool(size)
        with pool:
            bufs = [expect_typed(npurt.malloc, 256 << 10)[1] for _ in range(n)]
        for b in bufs:
            if b is not None:
                b.free()
        pool.destroy()
        assert not expect_typed(pool.malloc, 16)[0]

    @rule(n=st.integers(1, 4))
    def arm_alloc_fault(self, n):
        # Injected: the n-th device allocation from now fails (OutOfMemoryError).
        _npurt._fault_set(f"alloc:{n}")

    @rule(limit=st.sampled_from([1 << 20, 2 << 20]), count=st.integers(1, 12))
    def context_limit(self, limit, count):
        ctx = npurt.Context(memory_limit=limit)
        made = []
        with ctx:
            ok, x = expect_typed(npurt.zeros, 1 << 16)  # 256 KiB; fails only with a fault armed
            for _ in range(count if ok else 0):
                ok, y = expect_typed(npurt.exp, x)
                if not ok:
                    break
                made.append(y)
            assert ctx.memory_allocated() <= limit
        del made, x
        gc.collect()
        ctx.destroy()

    # --- invariants --------------------------------------------------------------------

    @invariant()
    def stats_consistent(self):
        STEPS["count"] += 1
        s = npurt.memory_stats()
        assert npurt.memory_allocated() <= npurt.memory_reserved()
        assert s["allocated_bytes.all.current"] <= s["allocated_bytes.all.peak"]
        assert 0 <= npurt.memory_allocated()

    def teardown(self):
        _npurt._fault_clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            for s in self.owned_streams:
                release_stream(s, timeout=LONG)
            npurt.synchronize(timeout=LONG)
            assert len(self.callbacks) <= self.expected_callbacks
            for k in self.keep:
                if isinstance(k, npurt.DeviceBuffer) and not k.freed:
                    k.free()
            self.keep.clear()
            self.model.clear()
            self.readers.clear()
            self.deps.clear()
            self.dropped.clear()
            for values in self.bundles.values():  # the machine's own references
                values.clear()
            self.names_to_values.clear()


def _run(examples, steps):
    Runtime.TestCase.settings = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=False,
        database=None,
    )
    STEPS.update(count=0, sequences=0, errors=0, baseline=None)
    faults = _npurt._fault_injected()["alloc"]
    try:
        Runtime.TestCase().runTest()
    finally:
        _npurt._fault_clear()
    faults = _npurt._fault_injected()["alloc"] - faults
    gc.collect()
    npurt.synchronize(timeout=LONG)
    gc.collect()
    leaked = npurt.memory_allocated() - STEPS["baseline"]
    assert leaked == 0, f"{leaked} bytes still allocated after all sequences were torn down"
    print(
        f"fuzz: {STEPS['sequences']} sequences, {STEPS['count']} steps, {STEPS['errors']} typed errors, "
        f"{faults} injected allocation faults"
    )
    return STEPS["count"]


# A hang guard, not a speed bound: ~15 s on an idle 2-core machine, over 120 s (the suite's
# default guard) when other builds load it 10-deep; a real hang still fails here.
# Misuse on purpose, so the sanitizer may report it: copy_async / memset_async on buffers
# from any streams, unordered (races); waits on events whose record failed (on a destroyed
# stream: unrecorded-event); forced destroys of streams others wait on (destroyed-while-waited).
@pytest.mark.npurt_sanitizer(allow=["race", "unrecorded-event", "destroyed-while-waited"])
@pytest.mark.timeout(600)
def test_fuzz_runtime_state_machine():
    assert _run(56, 50) >= 2000  # hypothesis ends some sequences early


@pytest.mark.soak
def test_fuzz_runtime_state_machine_soak():
    assert _run(1250, 100) >= 100_000
