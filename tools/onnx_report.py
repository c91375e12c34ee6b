"""Pass counts per op of ONNX's conformance cases on npurt.

    python tools/onnx_report.py [--all] [--failures]

For every op npurt supports (``npurt.model.supported_ops()``): the cases testing it
(``collect_testcases()``, grouped by the op under test; ``_expanded`` cases count for
their op), how many ran and passed, how many are refused by design (excluded by name or a
dtype npurt devices do not hold; each must raise a typed npurt error) and how many failed.
``--all`` also lists the ops npurt does not support (their case counts); ``--models``
also runs the wheel's model tests (``pytorch-converted/``, ``pytorch-operator/``,
``simple/``, ``light/``) and prints, per directory, how many ran and matched and why the
others were refused.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "model"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="also list unsupported ops")
    ap.add_argument("--failures", action="store_true", help="print each failure and refusal")
    ap.add_argument("--models", action="store_true", help="also run the wheel's model tests")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import npurt
    import onnx_cases as oc
    from test_onnx_node import _device_dtype_gap

    sup = set(npurt.model.supported_ops())
    rows = []
    reasons: Counter = Counter()
    total = Counter()
    for op, cases in sorted(oc.cases_by_op().items()):
        run = [c for c in cases if oc.runnable(c, sup)]
        if op not in sup and not run:
            if args.all:
                rows.append((op, len(cases), 0, 0, 0, 0, "unsupported"))
            continue
        passed = refused = failed = 0
        for c in run:
            why = oc.excluded(c.name) or _device_dtype_gap(c)
            try:
                ok, msg = oc.run_case(c)
            except npurt.Error as e:
                ok, msg = False, f"{type(e).__name__}: {e}"
            if why:
                refused += 1
                reasons[why] += 1
                if ok:
                    failed += 1
                    msg = f"excluded ({why}) but passed: remove the exclusion"
                if args.failures:
                    print(f"  refused {c.name}: {why}")
            elif ok:
                passed += 1
            else:
                failed += 1
                if args.failures:
                    print(f"  FAILED {c.name}: {msg}")
        other = len(cases) - len(run)
        rows.append((op, len(cases), len(run), passed, refused, failed, f"{other} use other ops" if other else ""))
        total.update(cases=len(cases), run=len(run), passed=passed, refused=refused, failed=failed)
    print(f"{'op':<28}{'cases':>6}{'run':>6}{'pass':>6}{'refused':>8}{'fail':>6}  note")
    for op, n, r, p, x, f, note in rows:
        print(f"{op:<28}{n:>6}{r:>6}{p:>6}{x:>8}{f:>6}  {note}")
    print(f"{'total':<28}{total['cases']:>6}{total['run']:>6}{total['passed']:>6}{total['refused']:>8}{total['failed']:>6}")
    print(f"\nnpurt supports {len(sup)} op types; refusals by reason:")
    for why, n in reasons.most_common():
        print(f"  {n:>4}  {why}")
    failed = total["failed"]
    if args.models:
        failed += models_report()
    return 1 if failed else 0


def models_report() -> int:
    """Runs each model test of the wheel; prints counts per directory and refusal reasons."""
    import time

    import npurt
    import test_onnx_models as tm

    groups: dict = {}
    for d in tm._DIRS:
        groups.setdefault(os.path.basename(os.path.dirname(d)), []).append((os.path.basename(d), os.path.join(d, "model.onnx"), d))
    groups["light"] = [(os.path.basename(p)[6:-5], p, None) for p in tm._LIGHT]
    bad = 0
    print(f"\n{'models':<20}{'total':>6}{'ran':>6}{'match':>6}{'refused':>8}")
    reasons: Counter = Counter()
    for group, items in groups.items():
        ran = match = refused = 0
        for name, path, d in items:
            try:
                npurt.Model.load(path)
            except npurt.Error as e:
                refused += 1
                for part in str(e).split(": ", 1)[-1].split("; "):
                    reasons[part.split(": ")[-1].split(" [")[0][:70]] += 1
                continue
            ran += 1
            t = time.perf_counter()
            try:
                tm.test_stored_model(d) if d else tm.test_light_model(path)
                match += 1
            except AssertionError as e:
                bad += 1
                print(f"  MISMATCH {group}/{name}: {str(e)[:200]}")
            if time.perf_counter() - t > 20:
                print(f"  slow: {group}/{name} took {time.perf_counter() - t:.0f} s")
        print(f"{group:<20}{len(items):>6}{ran:>6}{match:>6}{refused:>8}")
    print("refusals by reason (a model may have several):")
    for why, n in reasons.most_common(20):
        print(f"  {n:>4}  {why}")
    return bad


if __name__ == "__main__":
    sys.exit(main())
