"""torchair's user-facing API for vNPU (``import torchair``).

Real torchair compiles FX graphs into GE (Graph Engine) graphs for the
Ascend chip. vNPU has no GE: ``get_npu_backend()`` compiles with Inductor
for npu (torch_npu/_inductor), the same kernels-on-streams path as
``backend="inductor"``, and honours torchair's configuration where it has a
meaning here (``mode``, ``debug.graph_dump``, ``debug.run_eagerly``);
see torchair/npu_fx_compiler.py (real torchair's module of that name) and docs/graph_mode.md. GE converters
(``register_fx_node_ge_converter``, ``torchair.ge``) register, and building GE
operators raises "not supported on vNPU" (torchair/ge/__init__.py).
"""

import logging

from torch_npu.dynamo.torchair import experimental, ge, inference, llm_datadist, ops, scope
from torch_npu.dynamo.torchair._ge_converters import register_fx_node_ge_converter, registered_ge_converters
from torch_npu.dynamo.torchair._top_level import dynamo_export, get_compiler, patch_for_hcom, register_replacement
from torch_npu.dynamo.torchair.npu_fx_compiler import get_npu_backend
from torch_npu.dynamo.torchair.configs.compiler_config import CompilerConfig
from torch_npu.dynamo.torchair.experimental.inference import npu_format_cast_via_cpu, use_internal_format_weight

__all__ = ["get_compiler", "get_npu_backend", "dynamo_export", "CompilerConfig", "use_internal_format_weight",
           "logger", "register_fx_node_ge_converter", "patch_for_hcom", "register_replacement",
           "npu_format_cast_via_cpu", "experimental", "ge", "inference", "llm_datadist", "ops", "scope"]

# torchair's logger (real torchair's torchair.core.utils.logger, exported as torchair.logger).
logger = logging.getLogger("torchair")
