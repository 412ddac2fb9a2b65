"""ACLGraph update plans: which host arguments of the operators an NPU graph
captured automatically (``torch.npu.graph(g, auto_dispatch_capture=True)``)
come from which of a compiled graph's inputs, so that a replay with new
inputs first updates those operators (``NPUGraph.update``). A plan is a list
with one entry per captured updatable operator, in capture order::

    [{"op": "npu_fused_infer_attention_score.default",
      "updates": {"actual_seq_lengths": {"kind": "input", "index": 3},
                  "actual_seq_lengths_kv": {"kind": "constant", "value": [128]}}}]

A source is ``{"kind": "input", "index": i}`` (the i-th new input),
``{"kind": "constant", "value": v}`` (a Python literal, or a list or tuple of
them), ``{"kind": "none"}`` or ``{"kind": "list", "items": [sources]}``.
"""

from torch_npu.npu._aclgraph_update_plan.resolver import *  # noqa: F401,F403
from torch_npu.npu._aclgraph_update_plan.resolver import __all__  # noqa: F401
