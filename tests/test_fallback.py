"""Operator support queries, torch.npu.set_option, and the CPU fallback for
operators that have no npu kernel."""

import pytest
import torch
from torch.testing import assert_close

from conftest import run_python

CAUTION = ("CAUTION: The operator '{op}' is not currently supported on the NPU backend and will "
           "fall back to run on the CPU. This may have performance implications.")


# --- is_support ------------------------------------------------------------------

@pytest.mark.parametrize("op", ["matmul", "add", "aten::add.Tensor", "conv2d", "softmax", "layer_norm",
                                "index_select", "aten::mm"])
def test_is_support_true(op):
    assert torch.npu.is_support(op) is True


@pytest.mark.parametrize("op", ["some_custom_op", "aten::no_such_op", "nonexistent_ns::op"])
def test_is_support_false(op):
    assert torch.npu.is_support(op) is False


def test_is_support_seed_snippet():
    # Seed 000, verbatim.
    assert torch.npu.is_support("matmul")
    assert not torch.npu.is_support("some_custom_op")


# --- set_option ------------------------------------------------------------------

def test_set_option_enable_debug():
    try:
        torch.npu.set_option("enable_debug", True)
        assert torch.npu.get_option("enable_debug") is True
    finally:
        torch.npu.set_option("enable_debug", False)
    assert torch.npu.get_option("enable_debug") is False


def test_set_option_dict():
    torch.npu.set_option({"ACL_OP_SELECT_IMPL_MODE": "high_precision"})
    assert torch.npu.get_option("ACL_OP_SELECT_IMPL_MODE") == "high_precision"
    torch.npu.set_option({"ACL_PRECISION_MODE": "allow_fp32_to_fp16",
                          "ACL_OP_COMPILER_CACHE_MODE": "enable"})
    assert torch.npu.get_option("ACL_PRECISION_MODE") == "allow_fp32_to_fp16"
    # Options change no numerics on the virtual chip: math still matches CPU.
    a = torch.randn(4, 4)
    assert_close((a.npu() @ a.npu()).cpu(), a @ a)


def test_set_option_key_value_form():
    # Seed 001 writes set_option('ACL_OP_SELECT_IMPL_MODE', 'high_precision').
    torch.npu.set_option("ACL_OP_SELECT_IMPL_MODE", "high_performance")
    assert torch.npu.get_option("ACL_OP_SELECT_IMPL_MODE") == "high_performance"


def test_set_option_not_a_dict():
    with pytest.raises(TypeError, match=r"^npu option must be a dict\.\n.*ERR00001 PTA invalid parameter"):
        torch.npu.set_option("not a dict")
    with pytest.raises(TypeError, match="npu option must be a dict."):
        torch.npu.set_option(["ACL_PRECISION_MODE"])


def test_set_option_unknown_key():
    # torch_npu's C++ option table refuses it, so a RuntimeError.
    with pytest.raises(RuntimeError, match="invalid npu option name:NO_SUCH_OPTION"):
        torch.npu.set_option({"NO_SUCH_OPTION": "x"})


def test_set_option_precision_modes_are_torch_npus_two():
    with pytest.raises(ValueError, match=r"value of ACL_PRECISION_MODE should be in \['allow_fp32_to_fp16', "
                                         r"'must_keep_origin_dtype'\] but got force_fp32"):
        torch.npu.set_option({"ACL_PRECISION_MODE": "force_fp32"})
    with pytest.raises(ValueError, match="ACL_AICORE_NUM should be an integer from 1 to 32 but got 33"):
        torch.npu.set_option({"ACL_AICORE_NUM": "33"})


def test_set_option_bad_value():
    with pytest.raises(ValueError, match="should be in") as info:
        torch.npu.set_option({"ACL_OP_SELECT_IMPL_MODE": "fastest"})
    assert "ACL_OP_SELECT_IMPL_MODE" in str(info.value) and "fastest" in str(info.value)
    with pytest.raises(ValueError, match="should be in"):
        torch.npu.set_option("enable_debug", "yes")


def test_set_option_is_atomic():
    # A dict with one bad entry changes nothing.
    torch.npu.set_option({"ACL_PRECISION_MODE": "must_keep_origin_dtype"})
    with pytest.raises(ValueError):
        torch.npu.set_option({"ACL_PRECISION_MODE": "allow_fp32_to_fp16", "ACL_OP_SELECT_IMPL_MODE": "bad"})
    assert torch.npu.get_option("ACL_PRECISION_MODE") == "must_keep_origin_dtype"


def test_set_compile_mode():
    torch.npu.set_compile_mode(jit_compile=False)
    assert torch.npu.is_jit_compile_false() is True
    torch.npu.set_compile_mode(jit_compile=True)
    assert torch.npu.is_jit_compile_false() is False
    torch.npu.set_compile_mode(jit_compile=False)
    with pytest.raises(TypeError):
        torch.npu.set_compile_mode(jit_compile="no")


# --- CPU fallback ----------------------------------------------------------------

_lib_counter = [0]


def _define_cpu_only_op():
    """A fresh custom op with only a CPU kernel: on npu it must take the
    fallback (a new name per call, since the warning is once per op)."""
    _lib_counter[0] += 1
    name = f"vnpu_test::cpu_only_{_lib_counter[0]}"
    lib = torch.library.Library("vnpu_test", "FRAGMENT")
    lib.define(f"cpu_only_{_lib_counter[0]}(Tensor x, Tensor y) -> Tensor")
    lib.impl(f"cpu_only_{_lib_counter[0]}", lambda x, y: x * 2 + y.sum(), "CPU")
    return name, lib, getattr(torch.ops.vnpu_test, f"cpu_only_{_lib_counter[0]}")


def test_fallback_is_correct_and_counted():
    name, lib, op = _define_cpu_only_op()
    assert torch.npu.is_support(name) is False
    before = torch.npu.fallback_counts().get(name, 0)
    x, y = torch.randn(3, 4), torch.randn(5)
    out = op(x.npu(), y.npu())
    # Output comes back to the npu, as if the op had run there.
    assert out.device == torch.device("npu:0")
    assert_close(out.cpu(), x * 2 + y.sum())
    op(x.npu(), y.npu())
    assert torch.npu.fallback_counts()[name] == before + 2


def test_fallback_sees_queued_work():
    # The fallback synchronizes before copying to the host: inputs written by
    # still-queued kernels must be seen.
    name, lib, op = _define_cpu_only_op()
    x = torch.zeros(1000, device="npu")
    for _ in range(50):
        x.add_(1)
    out = op(x, torch.zeros(1, device="npu"))
    assert out.sum().item() == 1000 * 50 * 2
    # And its result feeds further npu work.
    assert (out + 1).sum().item() == 1000 * 101


def test_fallback_on_second_device():
    name, lib, op = _define_cpu_only_op()
    x = torch.ones(4, device="npu:2")
    out = op(x, x)
    assert out.device == torch.device("npu:2")
    assert_close(out.cpu(), torch.full((4,), 6.0))


_FALLBACK_SCRIPT = """
    import torch, torch_npu
    torch.library.define("vnpu_test::myop", "(Tensor x) -> Tensor")
    torch.library.impl("vnpu_test::myop", "CPU")(lambda x: x * 2 + 1)
    x = torch.arange(4.0).npu()
    {extra}
    for _ in range(3):
        y = torch.ops.vnpu_test.myop(x)
    print("result", y.device, y.cpu().tolist())
    print("count", torch.npu.fallback_counts()["vnpu_test::myop"])
"""


def test_fallback_warns_once():
    r = run_python(_FALLBACK_SCRIPT.format(extra=""))
    assert r.returncode == 0, r.stderr
    assert "result npu:0 [1.0, 3.0, 5.0, 7.0]" in r.stdout
    assert "count 3" in r.stdout
    # Whether it arrives as a Python warning or on C++'s stderr handler, the
    # CAUTION text appears exactly once for three calls.
    assert r.stderr.count(CAUTION.format(op="vnpu_test::myop")) == 1, r.stderr


def test_fallback_warns_once_in_process(capfd, recwarn):
    # Calls through torch.ops have no Python warning handler installed by
    # PyTorch, so the C++ warning goes to stderr; calls through Tensor methods
    # turn it into a UserWarning. Count both channels.
    name, lib, op = _define_cpu_only_op()
    x = torch.ones(2, device="npu")
    for _ in range(4):
        op(x, x)
    text = CAUTION.format(op=name)
    seen = capfd.readouterr().err.count(text) + sum(text in str(w.message) for w in recwarn)
    assert seen == 1


def test_fallback_enable_debug_reports_every_call():
    r = run_python(_FALLBACK_SCRIPT.format(extra='torch.npu.set_option("enable_debug", True)'))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(CAUTION.format(op="vnpu_test::myop")) == 1
    # The first call warns; the debug mode reports the other two.
    assert r.stderr.count("vnpu_test::myop") >= 3, r.stderr


def test_fallback_disabled_by_env():
    r = run_python(_FALLBACK_SCRIPT.format(extra=""), TORCH_NPU_FALLBACK_CPU_DISABLE="1")
    assert r.returncode != 0
    assert "vnpu_test::myop" in r.stderr
    assert "TORCH_NPU_FALLBACK_CPU_DISABLE" in r.stderr
    assert "result" not in r.stdout


def test_fallback_disabled_does_not_affect_native_ops():
    r = run_python("""
        import torch, torch_npu
        a = torch.randn(8, 8)
        assert torch.allclose((a.npu() @ a.npu()).cpu(), a @ a, atol=1e-5)
        print("ok", torch.npu.fallback_counts())
    """, TORCH_NPU_FALLBACK_CPU_DISABLE="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok {}"


def test_common_training_ops_do_not_fall_back():
    # The ops a small training step uses all have npu kernels.
    before = dict(torch.npu.fallback_counts())
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.randn(4, 8, device="npu"), torch.randint(0, 4, (4,), device="npu")
    for _ in range(2):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    torch.npu.synchronize()
    assert torch.npu.fallback_counts() == before


@pytest.fixture(scope="module")
def probe_lib():
    """CPU-only custom ops with mutation, out= and several outputs."""
    lib = torch.library.Library("vnpu_fallback_probe", "DEF")
    lib.define("mut(Tensor(a!) x) -> ()")

    def mut(x):
        x.add_(1)
    lib.impl("mut", mut, "CPU")
    lib.define("two(Tensor x) -> (Tensor, Tensor)")
    lib.impl("two", lambda x: (x * 2, x.sum()), "CPU")
    lib.define("outv(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")

    def outv(x, out):
        out.copy_(x + 10)
        return out
    lib.impl("outv", outv, "CPU")
    yield torch.ops.vnpu_fallback_probe
    lib._destroy()


def test_fallback_mutation_is_copied_back(probe_lib):
    x = torch.zeros(3, device="npu")
    probe_lib.mut(x)
    assert_close(x.cpu(), torch.ones(3))
    # Through a strided view: the base sees exactly the view's elements change.
    base = torch.zeros(6, device="npu")
    probe_lib.mut(base[::2])
    assert_close(base.cpu(), torch.tensor([1.0, 0, 1, 0, 1, 0]))


def test_fallback_multiple_outputs_on_input_device(probe_lib):
    a, b = probe_lib.two(torch.ones(3, device="npu:1"))
    assert a.device == b.device == torch.device("npu:1")
    assert_close(a.cpu(), torch.full((3,), 2.0))
    assert b.item() == 3.0


def test_fallback_out_argument(probe_lib):
    out = torch.empty(3, device="npu")
    r = probe_lib.outv(torch.ones(3, device="npu"), out=out)
    assert r is out
    assert_close(out.cpu(), torch.full((3,), 11.0))
