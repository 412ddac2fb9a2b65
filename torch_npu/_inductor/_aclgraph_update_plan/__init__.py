"""ACLGraph update plans written by Inductor (real torch_npu's
``torch_npu._inductor._aclgraph_update_plan``): the code generation half;
the plan's format, its checks and its resolution at replay are
torch_npu/npu/_aclgraph_update_plan's."""

from torch_npu._inductor._aclgraph_update_plan.codegen import (
    append_inductor_aclgraph_update_plan_for_codegen_node,
    emit_inductor_aclgraph_update_plan_for_wrapper,
)
from torch_npu.npu._aclgraph_update_plan import ACLGRAPH_UPDATE_PLAN_GLOBAL

__all__ = [
    "ACLGRAPH_UPDATE_PLAN_GLOBAL",
    "append_inductor_aclgraph_update_plan_for_codegen_node",
    "emit_inductor_aclgraph_update_plan_for_wrapper",
]
