"""Every sharding rule vNPU registers: its npu fused operators (see _sharding), npu SDPA (_sdpa_rules), one_hot."""

from torch_npu.distributed.tensor import (  # noqa: F401
    _attention_rules, _math_rules, _matmul_rules, _one_hot_rules, _repeat_interleave_rules, _sdpa_rules)
from torch_npu.distributed.tensor._sharding import install_dtensor_handlers

install_dtensor_handlers()
