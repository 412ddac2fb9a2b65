"""TORCH_NPU_LOGS and torch_npu's log names in torch._logging: `env` logs each
environment variable read through os.getenv / os.environ.get once; the other
names real torch_npu registers are accepted (and silent on vNPU)."""

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
