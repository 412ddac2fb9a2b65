"""CANN's graph engine (GE) C++ headers on vNPU (third_party/acl/inc/ge, graph).

vNPU has no graph engine. Its GE headers let Ascend code compile up to its
first use of the engine: the data (status codes, DataType, Format, option
keys, AscendString) works, operator prototypes written with REG_OP compile,
and any call that needs the engine stops the build with "<symbol> is not
supported on vNPU". These tests compile small programs with the system C++
compiler; no torch headers are involved, so they are quick.
"""

import os
import shutil
import subprocess

import pytest

import torch_npu
from torch_npu.dynamo.torchair import ge
from torch_npu.utils import cpp_extension as npu_cpp_extension

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

ACL_INC = next(p for p in npu_cpp_extension.include_paths() if p.endswith(os.path.join("acl", "inc")))
CANN_INC = os.path.join(os.path.dirname(torch_npu.__file__), "_cann", "include")


def compile_and_run(tmp_path, source, include=ACL_INC, opt="-O0"):
    """Returns (returncode of the build, its stderr, the program's stdout or None)."""
    (tmp_path / "prog.cc").write_text(source)
    build = subprocess.run(["g++", "-std=c++17", opt, "-Wall", "-Werror", f"-I{include}", "prog.cc", "-o", "prog"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
    if build.returncode != 0:
        return build.returncode, build.stderr, None
    run = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return 0, build.stderr, run.stdout


def public_members(cls, prefix):
    return {k: v for k, v in vars(cls).items() if k.startswith(prefix)}


@pytest.mark.parametrize("include", [ACL_INC, CANN_INC], ids=["third_party_acl_inc", "ascend_home_path_include"])
def test_data_types_and_formats_have_the_values_torchair_and_ge_use(tmp_path, include):
    data_types, formats = public_members(ge.DataType, "DT_"), public_members(ge.Format, "FORMAT_")
    prints = "".join(f'  std::printf("{n} %d\\n", static_cast<int>(ge::{n}));\n' for n in [*data_types, *formats])
    rc, err, out = compile_and_run(tmp_path, f"""
#include <cstdio>
#include "ge/ge_api.h"
int main() {{
{prints}  return 0;
}}
""", include=include)
    assert rc == 0, err
    got = dict(line.split() for line in out.splitlines())
    assert {k: int(v) for k, v in got.items()} == {**data_types, **formats}


def test_plain_data_works_status_codes_ascend_string_and_sizes(tmp_path):
    rc, err, out = compile_and_run(tmp_path, r"""
#include <cstdio>
#include <map>
#include <unordered_set>
#include "ge/ge_api.h"
int main() {
  std::map<ge::AscendString, ge::AscendString> options{{ge::OPTION_EXEC_DEVICE_ID, "0"}, {ge::SOC_VERSION, "Ascend910B1"}};
  std::unordered_set<ge::AscendString> names{"a", "b", "a"};
  ge::AscendString empty, abc("abcdef", 3);
  std::printf("%s %s %zu %d %d %zu\n", options[ge::OPTION_EXEC_DEVICE_ID].GetString(),
              options[ge::SOC_VERSION].GetString(), names.size(), empty == "", abc == "abc", abc.Find("bc"));
  std::printf("%u %u %u %d %d %d %d\n", ge::SUCCESS, ge::FAILED, ge::PARAM_INVALID, ge::GetSizeByDataType(ge::DT_BF16),
              ge::GetSizeByDataType(ge::DT_COMPLEX128), ge::GetSizeByDataType(ge::DT_INT4),
              ge::GetSizeByDataType(ge::DT_STRING));
  return 0;
}
""")
    assert rc == 0, err
    assert out.splitlines() == ["0 Ascend910B1 2 1 1 1", "0 4294967295 145000 2 16 1004 -1"]


OP_PROTO = """
#include "graph/operator_reg.h"
namespace ge {
REG_OP(ScaledAdd)
    .INPUT(x1, TensorType({DT_FLOAT, DT_FLOAT16}))
    .OPTIONAL_INPUT(x2, TensorType({DT_FLOAT, DT_FLOAT16}))
    .DYNAMIC_INPUT(extra, TensorType::ALL())
    .OUTPUT(y, TensorType({DT_FLOAT, DT_FLOAT16}))
    .DYNAMIC_OUTPUT(parts, TensorType::ALL())
    .ATTR(alpha, Float, 1.0)
    .REQUIRED_ATTR(axes, ListInt)
    .DATATYPE(T, TensorType({DT_FLOAT}))
    .OP_END_FACTORY_REG(ScaledAdd)

IMPLEMT_COMMON_INFERFUNC(ScaledAddInfer) { return GRAPH_SUCCESS; }
COMMON_INFER_FUNC_REG(ScaledAdd, ScaledAddInfer);
}  // namespace ge
"""


def test_operator_prototypes_written_with_reg_op_compile(tmp_path):
    rc, err, out = compile_and_run(tmp_path, OP_PROTO + r"""
#include <cstdio>
int main() {
  std::printf("%s %s %s\n", ge::op::ScaledAdd::name_in_x1(), ge::op::ScaledAdd::name_out_y(),
              ge::op::ScaledAdd::name_attr_alpha());
  return 0;
}
""")
    assert rc == 0, err
    assert out.split() == ["x1", "y", "alpha"]


ENGINE_CALLS = {
    "ge::GEInitialize": '#include "ge/ge_api.h"\nint main() { return ge::GEInitialize(std::map<ge::AscendString, '
                        'ge::AscendString>{}) == ge::SUCCESS; }',
    "ge::Session::Session": '#include "ge/ge_api.h"\nint main() { ge::Session s(std::map<ge::AscendString, '
                            'ge::AscendString>{}); return 0; }',
    "ge::Graph::Graph": '#include "graph/graph.h"\nint main() { ge::Graph g("g"); return 0; }',
    "ge::Operator::Operator": OP_PROTO + 'int main() { ge::op::ScaledAdd add("add"); return 0; }',
    "ge::TensorDesc::TensorDesc": '#include "graph/tensor.h"\nint main() { ge::TensorDesc d; return 0; }',
    "ge::OperatorFactory::CreateOperator": '#include "graph/operator_factory.h"\n'
                                           'int main() { ge::OperatorFactory::CreateOperator("a", "Add"); }',
    "ge::aclgrphGenerateForOp": '#include "ge/ge_ir_build.h"\nint main() { ge::Graph g; '
                                'return ge::aclgrphGenerateForOp("Add", {}, {}, g); }',
}


@pytest.mark.parametrize("symbol", sorted(ENGINE_CALLS))
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_a_call_that_needs_the_graph_engine_fails_to_build_naming_the_symbol(tmp_path, symbol, opt):
    rc, err, _ = compile_and_run(tmp_path, ENGINE_CALLS[symbol], opt=opt)
    assert rc != 0
    assert f"{symbol} is not supported on vNPU" in err, err
