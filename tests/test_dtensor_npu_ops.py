"""npu fused operators on DTensors (torch_npu/distributed/tensor/_sharding.py): the
rules run on 2 ranks over hccl against the operators on whole tensors
(tests/distributed/dtensor_ops.py), context parallelism and DTensor SDPA on npu
(tests/distributed/context_parallel.py), and the hook costs nothing to programs
that never import DTensor."""

import subprocess
import sys

from conftest import clean_env
from torchrun_jobs import torchrun


def test_fused_operators_on_dtensors_equal_the_whole_tensors():
    torchrun("dtensor_ops.py", 2, timeout=300)


def test_context_parallel_rings_npu_attention_and_dtensor_sdpa_shards_heads():
    # torch's context_parallel on npu (the overrideable SDPA kernel in its ring, blocks merged by
    # npu_ring_attention_update) equals the whole attention, forward and backward; DTensor SDPA on npu
    # with heads or batch sharded equals it too
    torchrun("context_parallel.py", 2, timeout=300)


def test_import_torch_npu_leaves_dtensor_alone():
    code = ("import sys, torch, torch_npu; x = torch.ones(2, 4, device='npu');"
            "torch_npu.npu_rms_norm(x, torch.ones(4, device='npu'));"
            "assert 'torch.distributed.tensor' not in sys.modules, 'DTensor imported'")
    subprocess.run([sys.executable, "-c", code], env=clean_env(), check=True, timeout=120)


def test_rules_are_registered_when_dtensor_is_imported():
    code = ("import torch, torch_npu, torch.distributed.tensor as dt;"
            "from torch_npu.distributed.tensor import _sharding as s;"
            "assert s.has_rule('npu::npu_fusion_attention.default') and s.has_rule('npu::npu_rms_norm.default');"
            "handlers = dt.DTensor._op_dispatcher._custom_op_handlers;"
            "assert torch.ops.npu.npu_grouped_matmul.default in handlers;"
            "from torch.distributed.tensor._ops._view_ops import dim_maps, InputDim;"
            "rule = dim_maps[torch.ops.npu.npu_transpose](torch.empty(2, 3, 4), (2, 0, 1));"
            "assert rule == (InputDim(2), InputDim(0), InputDim(1)), rule")
    subprocess.run([sys.executable, "-c", code], env=clean_env(), check=True, timeout=120)
