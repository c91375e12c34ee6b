"""pytest-benchmark suites; not part of the normal test run (`make bench` runs them).

Each group compares npurt against a baseline measured in the same run; read ratios, not
absolute numbers (the machines are shared and noisy).
"""

import os

os.environ.setdefault("NPURT_DEVICE_COUNT", "1")

import pytest  # noqa: E402

pytest.importorskip("pytest_benchmark")

import npurt  # noqa: E402


@pytest.fixture()
def stream():
    s = npurt.Stream()
    yield s
    s.destroy()
