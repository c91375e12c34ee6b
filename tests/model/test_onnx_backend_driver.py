"""ONNX's own test driver (``onnx.backend.test.BackendTest``) runs on ``NpurtBackend``: a
few of the wheel's model tests through unittest, as another project's CI would use it."""

import io
import unittest

import pytest

pytest.importorskip("onnx")


def test_backend_test_drives_npurt():
    from npurt.model.backend import NpurtBackend
    from onnx.backend.test import BackendTest

    bt = BackendTest(NpurtBackend, __name__)
    bt.include(r"^test_(operator_add_broadcast|operator_mm|operator_exp|operator_view|Linear|Softmax|PReLU_2d|single_relu_model)_cpu$")
    suite = unittest.TestSuite()
    for case in bt.test_cases.values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(verbosity=0, stream=io.StringIO()).run(suite)
    assert result.testsRun == 8, result.testsRun
    assert not result.skipped, result.skipped
    assert result.wasSuccessful(), (result.failures + result.errors)[:1]
