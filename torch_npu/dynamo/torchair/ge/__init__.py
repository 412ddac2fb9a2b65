"""torchair.ge: torchair's API for writing GE (Graph Engine) converters.

Real torchair lowers FX graphs to GE graphs, and a converter registered with
``torchair.register_fx_node_ge_converter(op)`` tells it how to express a
custom op in GE operators (``ge.custom_op("GroupedMatmul", inputs=...,
attrs={"x": ge.attr.Int(1)}, outputs=["y"])``, ``ge.Const``, ``ge.Cast``).
Libraries such as MindSpeed register converters when their modules load.

vNPU has no graph engine: its torchair backend compiles with Inductor
(``torchair.get_npu_backend()``), which runs custom ops as opaque calls to
their npu kernels. So here registering a converter works (the registry keeps
it, ``torchair.registered_ge_converters()`` lists them) and modules that
register converters import unchanged; building GE operators raises "not
supported on vNPU", after the same argument checks real torchair makes.
The names and values of ``DataType`` and ``Format`` are GE's.
"""

from torch_npu.dynamo.torchair.ge import attr
from torch_npu.dynamo.torchair.ge._ge_graph import Cast, Clone, Const, DataType, Format, Tensor, TensorSpec, custom_op

__all__ = ["attr", "Cast", "Clone", "Const", "DataType", "Format", "Tensor", "TensorSpec", "custom_op"]
