"""The device side of one host op: the kernels it launched, summed up for its rows in
operator_details.csv.

A kernel is any object with ``ts`` (start, ns), ``dur`` (length, us) and ``is_ai_core``. The
two clocks differ on purpose: starts come from the device timeline (ns), lengths from msprof's
task summary (us), so an end is the start plus the length converted to ns.
"""

from torch_npu.profiler.analysis.prof_common_func._constant import convert_us2ns

__all__ = []


def _busy_us(kernels):
    # Added one by one in launch order, as floats: the csv shows this sum, so its rounding must
    # not depend on how the kernels were grouped.
    total = 0.0
    for kernel in kernels:
        total += float(kernel.dur)
    return total


def _end_ns(kernel):
    return kernel.ts + convert_us2ns(kernel.dur)


class NodeInfoBean:
    """Read-only view of one op's kernels; an op without kernels has no start or end (ValueError)."""

    def __init__(self, kernels: list):
        self._kernels = kernels

    @property
    def kernel_list(self) -> list:
        return self._kernels

    @property
    def device_dur(self) -> float:
        """Time (us) the op kept the device busy, all kernels together."""
        return _busy_us(self._kernels)

    @property
    def device_dur_with_ai_core(self) -> float:
        """The part of ``device_dur`` spent on AI Core kernels (us)."""
        return _busy_us(kernel for kernel in self._kernels if kernel.is_ai_core)

    @property
    def min_start(self) -> int:
        """When the op's first kernel started (ns)."""
        return min(kernel.ts for kernel in self._kernels)

    @property
    def max_end(self) -> int:
        """When the op's last kernel finished (ns)."""
        return max(map(_end_ns, self._kernels))
