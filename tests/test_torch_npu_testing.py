"""torch_npu.testing: a test written the way torch_npu's own suites are runs
unchanged, and its assertions fail when results differ."""

import unittest

import numpy as np
import pytest
import torch

import torch_npu
from torch_npu.testing.common_utils import (SupportedDevices, create_common_tensor, freeze_rng_state,
                                            skipIfUnsupportMultiNPU)
from torch_npu.testing.decorator import Dtypes, instantiate_tests
from torch_npu.testing.testcase import TestCase


@instantiate_tests
class _AddSuite(TestCase):
    def test_add(self):
        cpu_x, npu_x = create_common_tensor([np.float32, 0, (2, 3)], -1, 1)
        self.assertEqual(npu_x.device.type, "npu")
        self.assertRtolEqual((cpu_x + 1).numpy(), (npu_x + 1).cpu().numpy())
        self.assertEqual(cpu_x * 2, npu_x * 2)

    @Dtypes(torch.float16, torch.float32)
    def test_mul(self, dtype, device):
        x = torch.ones(3, dtype=dtype)
        self.assertEqual(x.to(device) * 3, x * 3)

    @SupportedDevices(["Ascend910B"])
    def test_on_910b(self):
        self.assertTrue(torch.npu.get_device_name(0).startswith("Ascend910B"))

    @SupportedDevices(["Ascend310P"])
    def test_only_310p(self):
        raise AssertionError("must be skipped on the default chip")

    @skipIfUnsupportMultiNPU(64)
    def test_many_npus(self):
        raise AssertionError("must be skipped")


_AddSuite.__test__ = False  # run by test_suite_runs_unchanged through unittest, not collected by pytest


def test_suite_runs_unchanged():
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(_AddSuite)
    result = unittest.TestResult()
    suite.run(result)
    assert not result.failures and not result.errors, result.failures + result.errors
    assert result.testsRun == 6
    assert {t.id().split(".")[-1] for t, _ in result.skipped} == {"test_only_310p", "test_many_npus"}
    assert hasattr(_AddSuite, "test_mul_float16") and hasattr(_AddSuite, "test_mul_float32")


def test_assertions_fail_on_mismatch():
    case = TestCase()
    with pytest.raises(AssertionError):
        case.assertRtolEqual(np.ones(100, np.float32), np.full(100, 1.1, np.float32))
    with pytest.raises(AssertionError):
        case.assertEqual(torch.ones(3, device="npu"), torch.ones(3) + 1e-3)
    case.assertEqual(torch.ones(3, device="npu"), torch.ones(3) + 1e-6)
    with pytest.raises(AssertionError):
        case.assertEqual(torch.ones(2), torch.ones(3))


def test_freeze_rng_state_restores_cpu_and_npu():
    torch.manual_seed(1)
    with freeze_rng_state():
        a = torch.rand(2), torch.rand(2, device="npu")
    b = torch.rand(2), torch.rand(2, device="npu")
    assert torch.equal(a[0], b[0]) and torch.equal(a[1].cpu(), b[1].cpu())
