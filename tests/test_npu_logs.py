"""TORCH_NPU_LOGS and torch_npu's log names in torch._logging: `env` logs each
environment variable read through os.getenv / os.environ.get once; `op_plugin`
each operator called on npu tensors under its aclnn name, through
TORCH_NPU_LOGS_FILTER; the other names real torch_npu registers are accepted
(and silent on vNPU)."""

import re

import torch_npu

from conftest import run_python

READ_TWICE = """
    import os
    import torch, torch_npu
    os.getenv("VNPU_TEST_FOO"); os.environ.get("VNPU_TEST_FOO"); os.getenv("VNPU_TEST_FOO", "x")
    os.getenv("VNPU_TEST_UNSET")
    print("done")
"""


def _log_lines(result):
    assert result.returncode == 0, result.stderr
    return [line for line in (result.stdout + result.stderr).splitlines() if "get env" in line]


def test_env_logs_each_variable_read_once():
    lines = _log_lines(run_python(READ_TWICE, TORCH_NPU_LOGS="env", VNPU_TEST_FOO="bar"))
    assert sum("get env VNPU_TEST_FOO = bar" in line for line in lines) == 1
    assert not any("VNPU_TEST_UNSET" in line for line in lines)


def test_nothing_is_logged_without_the_setting():
    assert _log_lines(run_python(READ_TWICE, VNPU_TEST_FOO="bar")) == []


def test_torch_logs_takes_torch_npu_names_too():
    lines = _log_lines(run_python(READ_TWICE, TORCH_LOGS="env", VNPU_TEST_FOO="bar"))
    assert sum("VNPU_TEST_FOO = bar" in line for line in lines) == 1


def test_real_torch_npu_log_names_are_accepted():
    code = """
        import logging
        import torch, torch_npu
        # "+name" is DEBUG, a bare name INFO, as for torch's own names.
        assert logging.getLogger("torch_npu.op_plugin").getEffectiveLevel() == logging.DEBUG
        assert logging.getLogger("torch_npu.memory").getEffectiveLevel() == logging.INFO
        print("done")
    """
    result = run_python(code, TORCH_NPU_LOGS="memory,npugraph,acl,+op_plugin")
    assert result.returncode == 0 and "done" in result.stdout, result.stderr


def test_an_unknown_name_is_refused_with_torchs_message():
    result = run_python("import torch, torch_npu", TORCH_NPU_LOGS="no_such_log")
    assert result.returncode != 0
    assert "Invalid log settings: no_such_log" in result.stderr


OPS = """
    import torch, torch_npu
    a = torch.randn(3, 3).npu()
    b = torch.randn(3, 3).npu()
    c = torch.matmul(a, b)
    d = torch.add(a, b)
    d.mul_(2)
    e = d.view(9).t()  # views launch nothing
    f = torch.randn(3) + 1  # cpu: not logged
    torch.npu.synchronize()
    print("done")
"""


def _op_lines(result):
    assert result.returncode == 0, result.stderr
    return [line for line in result.stderr.splitlines() if "EXEC_NPU_CMD" in line]


def test_op_plugin_logs_each_operator_the_user_calls_under_its_aclnn_name():
    lines = _op_lines(run_python(OPS, TORCH_NPU_LOGS="op_plugin"))
    names = [line.split("] ", 1)[1].split(" ")[0] for line in lines]
    # Only the outermost operator: matmul's own mm call is not a second line.
    assert names == ["aclnnMatmul", "aclnnAdd", "aclnnInplaceMul"], lines
    # torch_npu's layout: level, date, time, pid, then the message with the arguments.
    assert re.match(r"I\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+\] aclnnMatmul EXEC_NPU_CMD with task_queue = true, "
                    r"self = Tensor\(\[3, 3\], Float, npu:0\); other = Tensor\(\[3, 3\], Float, npu:0\)$", lines[0]), lines[0]


def test_op_plugin_filter_keeps_and_drops_by_substring():
    kept = _op_lines(run_python(OPS, TORCH_NPU_LOGS="op_plugin", TORCH_NPU_LOGS_FILTER="+aclnnMatmul"))
    assert [("aclnnMatmul" in line) for line in kept] == [True]
    dropped = _op_lines(run_python(OPS, TORCH_NPU_LOGS="op_plugin", TORCH_NPU_LOGS_FILTER=" -aclnnAdd , -Mul"))
    assert len(dropped) == 1 and "aclnnMatmul" in dropped[0]
    # A "-" word wins over a "+" word that matches the same line.
    both = _op_lines(run_python(OPS, TORCH_NPU_LOGS="op_plugin", TORCH_NPU_LOGS_FILTER="+aclnn,-Matmul"))
    assert len(both) == 2 and not any("Matmul" in line for line in both)


def test_op_plugin_debug_adds_the_aten_operator_and_set_logs_turns_it_on_and_off():
    code = OPS.replace('print("done")', """
    import logging, torch._logging
    torch._logging.set_logs(modules={"torch_npu.op_plugin": logging.INFO})
    torch.add(a, b)
    torch._logging.set_logs()
    torch.sub(a, b)
    print("done")""")
    result = run_python(code)
    assert [line.split("] ", 1)[1].split(" ")[0] for line in _op_lines(result)] == ["aclnnAdd"]
    debug = run_python(OPS, TORCH_NPU_LOGS="+op_plugin")
    assert re.search(r"^V\d{4} .*\] aclnnAdd aten::add\.Tensor$", debug.stderr, re.M), debug.stderr
    assert _op_lines(run_python(OPS)) == []


def test_aclnn_names_follow_op_plugins_convention():
    assert [torch_npu._C._aclnn_name_of(n) for n in ("aten::add", "aten::add_", "aten::native_layer_norm", "aten::mm")] \
        == ["aclnnAdd", "aclnnInplaceAdd", "aclnnNativeLayerNorm", "aclnnMm"]


def test_log_context_sets_every_cpp_loggers_level_as_torch_npus_does():
    # torch_npu._C._logging._LogContext.GetInstance().setLogs({qualified name: level}),
    # which torch_npu's own tests call directly: a logger takes the level of
    # the longest dotted prefix of its name that has one, else that of "torch".
    code = OPS.replace('print("done")', """
    context = torch_npu._C._logging._LogContext.GetInstance()
    assert context is torch_npu._C._logging._LogContext.GetInstance()
    context.setLogs({"torch_npu.op_plugin": 20})
    torch.add(a, b)
    context.setLogs({"torch_npu": 20})  # a prefix of the logger's name
    torch.sub(a, b)
    context.setLogs({"torch": 30, "torch_npu.op_plugin": 40})  # the longest prefix wins
    torch.mul(a, b)
    context.setLogs({"torch": 20})  # every logger's default
    torch.div(a, b)
    context.setLogs({})
    torch.neg(a)
    try:
        context.setLogs({"torch_npu": "INFO"})
    except TypeError:
        print("refused")
    print("done")""")
    result = run_python(code)
    assert "refused" in result.stdout, result.stdout + result.stderr
    assert [line.split("] ", 1)[1].split(" ")[0] for line in _op_lines(result)] == ["aclnnAdd", "aclnnSub", "aclnnDiv"]
    # TORCH_NPU_LOGS_FILTER applies to lines set this way too.
    filtered = run_python(code, TORCH_NPU_LOGS_FILTER="-aclnnSub")
    assert [line.split("] ", 1)[1].split(" ")[0] for line in _op_lines(filtered)] == ["aclnnAdd", "aclnnDiv"]


def test_env_reporting_wraps_the_lookups_once_and_keeps_their_names():
    import importlib
    import os

    from torch_npu.utils import patch_getenv
    getenv, environ_get = os.getenv, os.environ.get
    importlib.reload(patch_getenv)  # a second import must not add a second layer
    assert os.getenv is getenv and os.environ.get is environ_get
    # real torch_npu's tests compare the lookups with these module attributes
    assert (patch_getenv._patched_getenv, patch_getenv._patched_environ_get) == (os.getenv, os.environ.get)
    assert (os.getenv.__name__, os.environ.get.__name__) == ("getenv", "get")
    assert os.getenv("VNPU_TEST_SURELY_UNSET", "fallback") == "fallback"
