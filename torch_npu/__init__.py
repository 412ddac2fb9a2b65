"""vNPU: the torch_npu API on a virtual Ascend NPU.

An independent emulator of Huawei's torch_npu for machines without Ascend
hardware: ``import torch_npu`` registers the ``npu`` device with PyTorch,
and its kernels run asynchronously on the host CPU. Not Huawei's package.
"""

def _autoload():
    """Entry point of the ``torch.backends`` group: ``import torch`` calls it
    (unless TORCH_DEVICE_BACKEND_AUTOLOAD=0). Importing this package does the
    work; the function is defined before ``import torch`` so that
    ``import torch_npu`` as the first import (which imports torch, which
    autoloads torch_npu again) finds it on the partially imported module."""


import torch  # noqa: E402

__version__ = "2.13.0+vnpu1"

from torch_npu import _C  # noqa: E402  (the C++ adaptor; registers kernels on load)
from torch_npu import _c_lazy  # noqa: E402

_C.__getattr__ = _c_lazy.c_getattr  # the bindings vNPU writes in Python, imported at first use
from torch_npu import _registration  # noqa: E402

_registration.register()

import torch_npu.npu  # noqa: E402
from torch_npu import _shutdown  # noqa: E402,F401
from torch_npu.npu import _smi_status  # noqa: E402  (what npu-smi shows of this process)
from torch_npu import _dtypes  # noqa: E402  (torch_npu.hifloat8 and the other dtype constants)
import sys as _sys  # noqa: E402
_dtypes.install(_sys.modules[__name__], _C)
_smi_status.start()
from torch_npu.npu import (  # noqa: E402,F401
    get_soc_version,
)

# Custom ops live in torch.ops.npu and are re-exported here, as in torch_npu.
from torch_npu.npu._format import Format, get_npu_format  # noqa: E402  (get_npu_format returns a Format)

from torch_npu import op_plugin as _op_plugin  # noqa: E402  (defines the fused ops)

npu_format_cast = _op_plugin.documented("npu", "npu_format_cast")
npu_format_cast_ = _op_plugin.documented("npu", "npu_format_cast_")

# The fused ops are resolved at first use (__getattr__): building the
# packets and docstrings of some 400 operators is a tenth of the import.
_fused_ops = _op_plugin.export_names()
_lazy_fused_ops = frozenset(_fused_ops)


def __getattr__(name):
    if name in _lazy_fused_ops:
        value = globals()[name] = _op_plugin.export(name)
        return value
    # The HiFloat8 tensor subclass, imported at first use (its module is
    # torch_npu.utils.hif8_tensor, as in real torch_npu).
    if name == "HiFloat8Tensor":
        from torch_npu.utils.hif8_tensor import HiFloat8Tensor
        return HiFloat8Tensor
    # Real torch_npu's torch_npu._ShardedGradScaler, imported at first use:
    # it imports torch.distributed.fsdp, too heavy for every `import torch`.
    if name == "_ShardedGradScaler":
        from torch_npu.npu.amp.sharded_grad_scaler import _ShardedGradScaler
        return _ShardedGradScaler
    # Attention-FFN disaggregation's schedule context (real torch_npu imports it with the package).
    if name == "_afd":
        import importlib
        return importlib.import_module("torch_npu._afd")
    raise AttributeError(f"module 'torch_npu' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | _lazy_fused_ops)


from torch_npu.npu.graphs import print_npugraph_tensor, save_npugraph_tensor  # noqa: E402,F401  (graph debugging)

# torch_npu.utils (its heavier submodules load on first use) and the storage
# helpers torch_npu exposes at the top level for combined tensors.
from torch_npu import utils  # noqa: E402,F401
from torch_npu.utils import patch_getenv as _patch_getenv  # noqa: E402,F401  (TORCH_NPU_LOGS=env)
from torch_npu._logging import _internal as _logging_internal  # noqa: E402

_logging_internal._setup()  # torch_npu's log names; TORCH_NPU_LOGS
from torch_npu.utils.combine_tensors import get_storage_size, npu_change_data_ptr  # noqa: E402,F401

from torch_npu import _ascend_semantics  # noqa: E402,F401  (one_hot on int32, as on Ascend)
from torch_npu import _batch_norm_stats  # noqa: E402,F401  (SyncBatchNorm's CUDA-only kernels)
from torch_npu import _flex_attention  # noqa: E402

_flex_attention.install()  # FlexAttention accepts npu tensors
from torch_npu import _linear_cross_entropy  # noqa: E402

_linear_cross_entropy.install()  # linear_cross_entropy's "auto" choices for npu
from torch_npu import _rng_state_ops  # noqa: E402

_rng_state_ops.install()  # torch's RNG-state replay operators on npu
from torch_npu import _flop_counter  # noqa: E402

_flop_counter.install()  # FlopCounterMode counts npu's attention kernel
from torch_npu import _deprecated_patches  # noqa: E402

_deprecated_patches.install()  # torch.nn.DropoutWithByteMask, as torch_npu patches it
from torch_npu import _client_names  # noqa: E402
from torch_npu import optim  # noqa: E402,F401

_client_names.install()
from torch_npu.npu import _graph_pool  # noqa: E402

_graph_pool.install()  # the allocator bindings of NPU graph trees, under real torch_npu's names

# The other subpackages real torch_npu binds at import, so that
# torch_npu.profiler.profile(...) works without `import torch_npu.profiler`
# first. Each is cheap to import (contrib loads its contents on first use,
# atb and asd are small), so binding them eagerly costs little.
from torch_npu import asd, atb, contrib, multiprocessing, profiler  # noqa: E402,F401
from torch_npu.asd.checksum import _matmul_checksum as matmul_checksum  # noqa: E402
from torch_npu.npu.memory import _erase_stream as erase_stream  # noqa: E402

multiprocessing.reductions._add_reductions_methods()  # npu tensors on torch.multiprocessing queues: IPC handles
multiprocessing._exit.install()  # a child process waits at exit until its shared descriptors were fetched

import torch.distributed as _dist  # noqa: E402

if _dist.is_available():
    from torch_npu import distributed as _distributed  # noqa: E402

    _distributed.register()
    ParallelStore = _distributed.ParallelStore  # real torch_npu's export (torch_npu.ParallelStore)

# Graph mode: Dynamo, Inductor, torchair and NPU graph trees are set up when
# first used; nothing heavy is imported here (Note [Lazy Dynamo and Inductor
# setup] in torch_npu/utils/_dynamo.py).
from torch_npu.utils import _dynamo as _dynamo_setup  # noqa: E402
from torch_npu._after_import import call_after_import as _call_after_import  # noqa: E402

import os as _os  # noqa: E402

from torch_npu.npu import check_mode as _check_mode  # noqa: E402

_check_mode._enable_from_environment(_os.environ.get("VNPU_CHECK_MODE", "0"))  # strict chip mode for a whole run

# Backward passes run on their calling thread, not on autograd's npu thread
# (Note [npu backward on the calling thread], torch_npu/_backward_on_caller.py).
from torch_npu import _backward_on_caller  # noqa: E402

_backward_on_caller.install_from_environment(_os.environ.get("VNPU_AUTOGRAD_DEVICE_THREADS", "0"))

if _os.environ.get("TORCH_NPU_SANITIZER", "0") not in ("", "0"):  # stream race checks for a whole run
    from torch_npu.npu import _sanitizer as _npu_sanitizer  # imported only then: it imports torch.cuda._sanitizer

    _npu_sanitizer.enable_npu_sanitizer()

# Step-time dumps and the silent-check switches (torch_npu/utils/_step.py),
# imported only when one is set.
if any(_os.environ.get(_name) for _name in ("PERF_DUMP_CONFIG", "NPU_ASD_CONFIG", "NPU_ASD_ENABLE")):
    from torch_npu.utils._step import add_perf_dump_patch as _add_perf_dump_patch

    _add_perf_dump_patch()

# Dynamic profiling without code changes (PROF_CONFIG_PATH, MSMONITOR_USE_DAEMON;
# torch_npu/profiler/_non_intrusive_profile.py), imported only when one is set.
if any(_os.environ.get(_name) for _name in ("PROF_CONFIG_PATH", "MSMONITOR_USE_DAEMON", "KINETO_USE_DAEMON")):
    from torch_npu.profiler._non_intrusive_profile import _NonIntrusiveProfile

    _NonIntrusiveProfile.init()

from torch_npu import _philox_rand  # noqa: E402

_philox_rand.register()  # rngprims.philox_rand on npu (torch's is CUDA's only)
_call_after_import("torch._prims_common", _philox_rand.teach_aot_autograd_npu_rng_state)
_call_after_import("torch._decomp.decompositions_for_rng", _philox_rand.teach_rng_decompositions_npu)


def _register_npu_sharding_rules(_module):
    from torch_npu.distributed.tensor import _rules  # noqa: F401  (DTensor runs npu fused operators by rule)


def _add_npu_attention_to_context_parallel(_module):
    from torch_npu.distributed.tensor.experimental._context_parallel import _attention  # noqa: F401


_call_after_import("torch.distributed.tensor", _register_npu_sharding_rules)


def _register_npu_rpc_backend(_module):
    from torch_npu.distributed.rpc import backend_registry
    backend_registry._rpc_backend_registry()  # rpc.BackendType.NPU_TENSORPIPE


_call_after_import("torch.distributed.rpc", _register_npu_rpc_backend)


def _npu_sharded_grad_scaler(_module):
    import importlib
    importlib.import_module("torch_npu.npu.amp.sharded_grad_scaler")  # its import puts it in torch's module


_call_after_import("torch.distributed.fsdp.sharded_grad_scaler", _npu_sharded_grad_scaler)
# torch's context parallelism rings npu's attention kernel too, however it is imported
_call_after_import("torch.distributed.tensor.experimental._context_parallel._attention",
                   _add_npu_attention_to_context_parallel)

# TORCH_TRANSFER_TO_NPU=1: `import torch_npu` (or torch's autoload of it) also
# applies torch_npu.contrib.transfer_to_npu, as real torch_npu does.
_transfer = _os.environ.get("TORCH_TRANSFER_TO_NPU", "0")
if _transfer == "1":
    from torch_npu.contrib import transfer_to_npu as _transfer_to_npu  # noqa: F401
elif _transfer != "0":
    raise ValueError(f"Invalid value for TORCH_TRANSFER_TO_NPU: {_transfer}. Only '0' or '1' is supported.")

_dynamo_setup.add_dynamo_methods()  # last: with Dynamo imported already, its setup runs now

# Real torch_npu's __all__: its three Python names, then the operators its
# op-plugin marks exposed (torch_npu.utils.exposed_api). Every other fused op
# (and npu_format_cast, get_npu_format, ...) is an attribute all the same, and
# reports a module (torch._ops.npu) that says it is not listed here.
from torch_npu.utils.exposed_api import public_npu_functions as _public_npu_functions  # noqa: E402

__all__ = ["HiFloat8Tensor", "erase_stream", "matmul_checksum",
           *sorted(set(_fused_ops) & set(_public_npu_functions))]
