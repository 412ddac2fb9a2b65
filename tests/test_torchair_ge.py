"""torchair's GE converter API (torchair.ge, register_fx_node_ge_converter).

Modules written for Ascend register GE converters for their custom ops when
they load (MindSpeed's op builders). On vNPU they must import and register
unchanged; the torchair backend compiles with Inductor and calls the op's
npu kernel, so the converter is kept and never run, and building GE
operators says it is not supported.
"""

import pytest
import torch

import torch_npu  # noqa: F401
import torchair
from torchair import ge
from torchair.ge import DataType, Tensor, TensorSpec


def test_the_names_converter_modules_import_exist():
    from torchair import register_fx_node_ge_converter  # noqa: F401
    from torchair.ge import Cast, Const, Format, custom_op  # noqa: F401
    assert torchair.ge is ge
    assert "register_fx_node_ge_converter" in torchair.__all__ and "ge" in torchair.__all__


def test_data_types_and_formats_have_ge_values():
    assert (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_INT8, DataType.DT_INT32, DataType.DT_INT64,
            DataType.DT_UINT64, DataType.DT_BOOL, DataType.DT_BF16, DataType.DT_FLOAT8_E4M3FN) == \
        (0, 1, 2, 3, 9, 10, 12, 27, 36)
    assert (ge.Format.FORMAT_ND, ge.Format.FORMAT_NCHW, ge.Format.FORMAT_FRACTAL_NZ) == (2, 0, 29)


def test_attrs_check_their_kind_and_compare_by_value():
    assert ge.attr.Int(3) == ge.attr.Int(3) != ge.attr.Int(4)
    assert ge.attr.Int(3) != ge.attr.Float(3)
    assert repr(ge.attr.ListInt([1, 2])) == "ge.attr.ListInt([1, 2])"
    assert ge.attr.Bool(ge.attr.Bool(True)) == ge.attr.Bool(True)
    with pytest.raises(AssertionError, match="Type mismatch"):
        ge.attr.Int(ge.attr.Bool(True))
    with pytest.raises(AssertionError, match="ge.attr.Int cannot hold True"):
        ge.attr.Int(True)
    with pytest.raises(AssertionError, match="cannot be None"):
        ge.attr.Str(None)


def test_a_converter_registers_and_the_op_still_compiles_through_the_npu_backend():
    lib = torch.library.Library("vnpu_ge_test", "DEF")
    lib.define("scale(Tensor x, float s) -> Tensor")
    lib.impl("scale", lambda x, s: x * s, "PrivateUse1")
    lib.impl("scale", lambda x, s: torch.empty_like(x), "Meta")

    @torchair.register_fx_node_ge_converter(torch.ops.vnpu_ge_test.scale.default)
    def convert_scale(x: Tensor, s: float, meta_outputs: TensorSpec = None):
        return ge.custom_op("Muls", inputs={"x": x}, attrs={"value": ge.attr.Float(s)}, outputs=["y"])

    assert torchair.registered_ge_converters()[torch.ops.vnpu_ge_test.scale.default] is convert_scale
    fn = torch.compile(lambda x: torch.ops.vnpu_ge_test.scale(x + 1, 2.0), backend=torchair.get_npu_backend(),
                       fullgraph=True)
    x = torch.randn(8)
    torch.testing.assert_close(fn(x.npu()).cpu(), (x + 1) * 2)


def test_building_ge_operators_is_checked_then_not_supported():
    with pytest.raises(AssertionError, match="Invalid input type:list vs expect one of \\[None, dict\\]"):
        ge.custom_op("Fill", inputs=[1], outputs=["y"])
    with pytest.raises(AssertionError, match="Invalid attr 'n' type:int"):
        ge.custom_op("Fill", inputs={}, attrs={"n": 1}, outputs=["y"])
    with pytest.raises(RuntimeError, match="torchair.ge.custom_op\\('Fill'\\) is not supported on vNPU"):
        ge.custom_op("Fill", inputs={"dims": None}, attrs={"n": ge.attr.Int(1)}, outputs=["y"])
    for build in (lambda: ge.Const(0), lambda: ge.Cast(None, dst_type=DataType.DT_FLOAT), Tensor):
        with pytest.raises(RuntimeError, match="no graph engine"):
            build()


def test_registering_something_that_is_not_an_operator_is_refused():
    with pytest.raises(TypeError, match="expects an operator such as torch.ops"):
        torchair.register_fx_node_ge_converter("aten::add")


def test_the_v1_paths_name_the_same_api():
    from torchair.ge_concrete_graph import ge_apis
    from torchair.ge_concrete_graph.fx2ge_converter import register_fx_node_ge_converter
    from torchair.ge_concrete_graph.ge_graph import DataType as V1DataType, Tensor as V1Tensor, compat_as_bytes
    assert register_fx_node_ge_converter is torchair.register_fx_node_ge_converter
    assert V1DataType is DataType and V1Tensor is Tensor and ge_apis.Const is ge.Const
    assert compat_as_bytes("x") == b"x" and compat_as_bytes(b"y") == b"y"
    with pytest.raises(RuntimeError, match="ge_apis.Fill is not supported on vNPU"):
        ge_apis.Fill([0], None)
    from torchair.ge_concrete_graph.ge_graph import get_default_ge_graph
    with pytest.raises(RuntimeError, match="not supported on vNPU"):
        get_default_ge_graph()


def test_declare_supported_records_the_cases_of_a_registered_converter():
    from torchair.ge_concrete_graph.fx2ge_converter import declare_supported, register_fx_node_ge_converter
    from torch_npu.dynamo.torchair._ge_converters import declared_supported_converters
    cases = ["Support(F32(2, 2))", "Support(F16(8))"]  # what torchair.testing.Support(...) would describe

    @declare_supported(cases)
    @register_fx_node_ge_converter(torch.ops.aten.sinc.default)
    def convert_sinc(x, meta_outputs=None):
        return x

    assert convert_sinc.supported_cases == cases
    assert declared_supported_converters()[torch.ops.aten.sinc.default] is convert_sinc
    with pytest.raises(AssertionError, match="must decorate a converter registered"):
        declare_supported(cases)(lambda x: x)
    with pytest.raises(TypeError, match="expects a list of supported cases"):
        declare_supported("case")


def test_llm_datadist_creates_npu_tensors_over_device_memory_it_does_not_own():
    from torchair.llm_datadist import create_npu_tensors

    buffer = torch.arange(24, dtype=torch.float32, device="npu")
    first, second = create_npu_tensors([2, 3], torch.float32, [buffer.data_ptr(), buffer.data_ptr() + 24])
    assert first.device == buffer.device and first.shape == (2, 3) and first.is_contiguous()
    assert torch.equal(second.cpu(), torch.arange(6.0, 12.0).view(2, 3))
    second.fill_(-1)  # a view: writes reach the buffer
    assert torch.equal(buffer.cpu()[6:12], torch.full((6,), -1.0)) and buffer.cpu()[5] == 5
    halves = create_npu_tensors((4,), torch.float16, [buffer.data_ptr()])
    assert halves[0].dtype == torch.float16 and halves[0].numel() == 4
    host = torch.zeros(4)
    for args, error, match in (
            (([2, 3], torch.float32, [host.data_ptr()]), ValueError, "is not npu memory"),
            (([8, 8], torch.float32, [buffer.data_ptr()]), ValueError, "past the end of its npu allocation"),
            (([2], "float32", [buffer.data_ptr()]), TypeError, "dtype only support"),
            (([2], torch.qint8, [buffer.data_ptr()]), ValueError, "unsupported dtype"),
            (([2.0], torch.float32, [buffer.data_ptr()]), TypeError, "shape inner type"),
            (([2], torch.float32, buffer.data_ptr()), TypeError, "addresses only support")):
        with pytest.raises(error, match=match):
            create_npu_tensors(*args)
