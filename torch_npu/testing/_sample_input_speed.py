"""OpInfo sample inputs without reading source files.

Every ``OpInfo.sample_inputs`` call makes a ``TrackedInputIter``, which looks
for the running unittest method with ``extract_test_fn``: ``inspect.stack()``,
which reads a line of source for every frame and first stats every file
Python has cached source for. Under pytest's deep stacks that lookup took
three quarters of an OpInfo sweep (measured with py-spy on the op-coverage
sweep). ``frames_only_test_fn_lookup`` swaps in the same lookup over frame
objects, which needs no source: the same answer, without the I/O.
"""

import contextlib
import sys
import unittest


def _extract_test_fn():
    """torch.testing._internal.common_utils.extract_test_fn, walking frames directly."""
    try:
        frame = sys._getframe(1)
        while frame is not None:
            self_val = frame.f_locals.get("self")
            if isinstance(self_val, unittest.TestCase):
                test_id = self_val.id()
                *_, cls_name, test_name = test_id.rsplit(".", 2)
                if cls_name == type(self_val).__name__ and test_name.startswith("test"):
                    return getattr(self_val, test_name).__func__
            frame = frame.f_back
    except Exception:  # as the original: no test function found
        pass
    return None


@contextlib.contextmanager
def frames_only_test_fn_lookup():
    from torch.testing._internal import common_utils
    original = common_utils.extract_test_fn
    common_utils.extract_test_fn = _extract_test_fn
    try:
        yield
    finally:
        common_utils.extract_test_fn = original
