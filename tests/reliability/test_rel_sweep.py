"""Defect 11: every public entry point of ``npurt``, ``npurt.kernels``, DeviceArray and the
runtime classes, found by introspection (so new ones are covered), called with each of a
table of wrong-type and out-of-range arguments, raises an ``npurt.Error`` subclass (which
may also derive from the builtin), never a bare TypeError / ValueError / OverflowError /
IndexError / AttributeError, and never crashes. The sweep (``sweep_script.py``) runs in a
fresh interpreter with a timeout."""

import npurt
import pytest
from relhelp import describe, run_script

with open(__file__.replace("test_rel_sweep.py", "sweep_script.py")) as f:
    SWEEP = f.read()


def test_every_entry_point_raises_typed_errors_for_bad_arguments():
    p = run_script(SWEEP, timeout=240)
    assert p.returncode == 0, describe(p)
    untyped = [line for line in p.stdout.splitlines() if line.startswith("UNTYPED")]
    assert "calls checked" in p.stdout, describe(p)
    assert untyped == [], "\n".join(untyped[:40]) + f"\n... {len(untyped)} untyped in all"


@pytest.mark.parametrize(
    "call, builtin",
    [
        (lambda: npurt.Event(timing="yes"), TypeError),
        (lambda: npurt.Stream().record_event(event="e"), TypeError),
        (lambda: npurt.sum(npurt.ones((2, 2)), axis="0"), TypeError),
        (lambda: npurt.zeros_like(3.0), TypeError),
        (lambda: npurt.stream("s").__enter__(), TypeError),
        (lambda: npurt.to_device(["a", "b"], dtype="float32"), TypeError),
        (lambda: npurt.ones((2, 2))[5], IndexError),
        (lambda: npurt.ones(4).reshape(2**70), ValueError),
        (lambda: npurt.kernels.fault(block=2**40), ValueError),
        (lambda: npurt.reset_device(0, force="no"), TypeError),
    ],
    ids=["Event(timing=)", "record_event(event=)", "axis", "zeros_like", "npurt.stream", "to_device(str)",
         "index", "reshape(huge)", "fault(block=)", "reset_device(force=)"],
)
def test_known_cases_are_typed_and_keep_their_builtin(call, builtin):
    with pytest.raises(npurt.Error) as ei:
        call()
    assert isinstance(ei.value, builtin)
    assert ei.value.code == 107000
