"""torch_npu.testing.testcase: the TestCase torch_npu's own suites derive from.

Its assertEqual takes a precision (``prec``, absolute, default
``self.precision``) rather than torch's rtol/atol, and compares tensors on any
device by moving them to the cpu; assertRtolEqual is torch_npu's relative
comparison with separate float16 precision.
"""

import os
import random
import unittest
from numbers import Number

import expecttest
import numpy as np
import torch

from torch_npu.testing.common_utils import iter_indices, set_npu_device


def run_tests():
    unittest.main()


class TestCase(expecttest.TestCase):
    _precision = 1e-5
    maxDiff = None
    exact_dtype = False

    @property
    def precision(self):
        return self._precision

    @precision.setter
    def precision(self, prec):
        self._precision = prec

    @classmethod
    def setUpClass(cls):
        cls.npu_device = set_npu_device()

    def setUp(self):
        seed = int(os.getenv("SEED", "666"))
        torch.manual_seed(seed)
        random.seed(seed)
        np.random.seed(seed)

    def assertTensorsSlowEqual(self, x, y, prec=None, message=""):
        self.assertEqual(x.size(), y.size())
        self.assertEqual(x.dtype, y.dtype)
        y = y.type_as(x)
        worst = max((abs(float(x[i]) - float(y[i])) for i in iter_indices(x)), default=0.0)
        self.assertLessEqual(worst, self.precision if prec is None else prec, message)

    def assertRtolEqual(self, x, y, prec=1.0e-4, prec16=1.0e-3, auto_trans_dtype=False, message=None):
        """Fails when more than a `prec` fraction of elements miss both the
        absolute and the relative bound (prec16 for float16)."""
        if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
            for a, b in zip(x, y):
                self.assertRtolEqual(a, b, prec, prec16, auto_trans_dtype, message)
            return
        if torch.is_tensor(x) and torch.is_tensor(y):
            if auto_trans_dtype:
                x = x.to(y.dtype)
            x, y = (t.detach().cpu() for t in (x, y))
            if x.dtype == torch.bfloat16:
                x, y = x.float(), y.float()
            x, y = x.numpy(), y.numpy()
        x, y = np.asarray(x), np.asarray(y)
        self.assertEqual(x.shape, y.shape, message or "shape error")
        self.assertEqual(x.dtype, y.dtype, message or "dtype error")
        if x.dtype == np.bool_:
            self.assertTrue(np.equal(x, y).all(), message or "result error")
            return
        bound, minimum = (prec16, 6e-8) if x.dtype == np.float16 else (prec, 1e-9)
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        diff = np.abs(yf - xf)
        atol_ok = diff <= bound
        rtol_ok = diff / (np.maximum(np.abs(xf), np.abs(yf)) + minimum) <= bound
        size = x.size
        if not rtol_ok.all() and not atol_ok.all():
            if (~rtol_ok).sum() > size * bound and (~atol_ok).sum() > size * bound:
                self.fail(message or "result error")

    def assertEqual(self, x, y, prec=None, message="", allow_inf=False, exact_dtype=None):
        if isinstance(prec, str) and not message:
            prec, message = None, prec
        prec = self.precision if prec is None else prec
        exact_dtype = self.exact_dtype if exact_dtype is None else exact_dtype
        if torch.is_tensor(x) and torch.is_tensor(y):
            self._assert_tensors(x, y, prec, message, allow_inf, exact_dtype)
        elif torch.is_tensor(x) and isinstance(y, Number):
            self.assertEqual(x.item(), y, prec, message, allow_inf, exact_dtype)
        elif isinstance(x, Number) and torch.is_tensor(y):
            self.assertEqual(x, y.item(), prec, message, allow_inf, exact_dtype)
        elif isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            self._assert_tensors(torch.as_tensor(np.asarray(x)), torch.as_tensor(np.asarray(y)), prec, message,
                                 allow_inf, exact_dtype)
        elif isinstance(x, Number) and isinstance(y, Number) and not isinstance(x, bool):
            if abs(x) == float("inf") or abs(y) == float("inf"):
                if not allow_inf:
                    self.fail(f"Expected finite numeric values - x={x}, y={y}")
                super().assertEqual(x, y, message)
            elif x != x or y != y:
                super().assertTrue(x != x and y != y, message)
            else:
                super().assertLessEqual(abs(x - y), prec, message)
        elif isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)) and not isinstance(x, torch.Size):
            super().assertEqual(len(x), len(y), message)
            for a, b in zip(x, y):
                self.assertEqual(a, b, prec, message, allow_inf, exact_dtype)
        else:
            super().assertEqual(x, y, message)

    def _assert_tensors(self, a, b, prec, message, allow_inf, exact_dtype):
        super().assertEqual(a.size(), b.size(), message)
        if exact_dtype:
            super().assertEqual(a.dtype, b.dtype, message)
        if a.numel() == 0:
            return
        a, b = a.detach().cpu(), b.detach().cpu()
        if a.dtype == torch.bool or b.dtype == torch.bool:
            a, b = a.int(), b.int()
        if a.is_floating_point() or a.is_complex() or b.is_floating_point():
            a, b = a.to(torch.complex128 if a.is_complex() else torch.float64), b.to(
                torch.complex128 if a.is_complex() else torch.float64)
            nan = torch.isnan(a)
            self.assertTrue(torch.equal(nan, torch.isnan(b)), message)
            diff = (a - b).abs()
            diff[nan] = 0
            if allow_inf:
                inf = torch.isinf(a)
                self.assertTrue(torch.equal(a[inf], b[inf]), message)
                diff[inf] = 0
        else:
            diff = (a.long() - b.long()).abs()
        self.assertLessEqual(diff.max().item(), prec, message)
