"""The device kernels one host op launched (objects with ``ts`` in ns, ``dur`` in us and
``is_ai_core``), and what the op's rows in operator_details.csv need of them."""

from torch_npu.profiler.analysis.prof_common_func._constant import convert_us2ns

__all__ = []


class NodeInfoBean:
    def __init__(self, kernel_list: list):
        self._kernels = kernel_list

    @property
    def kernel_list(self) -> list:
        return self._kernels

    @property
    def device_dur(self) -> float:
        """The kernels' total time (us)."""
        return sum(float(kernel.dur) for kernel in self._kernels)

    @property
    def device_dur_with_ai_core(self) -> float:
        """The AI Core kernels' total time (us)."""
        return sum(float(kernel.dur) for kernel in self._kernels if kernel.is_ai_core)

    @property
    def min_start(self) -> int:
        return min(kernel.ts for kernel in self._kernels)

    @property
    def max_end(self) -> int:
        return max(kernel.ts + convert_us2ns(kernel.dur) for kernel in self._kernels)
