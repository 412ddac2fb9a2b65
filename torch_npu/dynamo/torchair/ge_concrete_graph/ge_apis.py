"""torchair's v1 module of GE operator builders (``ge_apis as ge``): the
builders vNPU names, each raising "not supported on vNPU" when called (vNPU
builds no GE graph). Converter modules import it at load."""

from torch_npu.dynamo.torchair.ge._ge_graph import Cast, Const, DataType, Format, Tensor, TensorSpec, _no_graph, \
    custom_op

__all__ = ["Cast", "Const", "DataType", "Fill", "Format", "Tensor", "TensorSpec", "custom_op"]


def Fill(dims, value, *, dependencies=(), node_name=None):
    """A GE Fill operator (raises: vNPU has no GE graph)."""
    raise _no_graph("torchair.ge_concrete_graph.ge_apis.Fill")
