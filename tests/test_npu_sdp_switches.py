"""torch.npu's SDP switches (torch_npu/npu/_backends.py): PyTorch's global flags, with a warning on every access."""

import warnings

import pytest
import torch

import torch_npu  # noqa: F401

SWITCHES = [  # (kind in the warning, torch.npu getter, torch.npu setter, torch.backends.cuda getter)
    ("flash", "flash_sdp_enabled", "enable_flash_sdp", torch.backends.cuda.flash_sdp_enabled),
    ("mem_efficient", "mem_efficient_sdp_enabled", "enable_mem_efficient_sdp",
     torch.backends.cuda.mem_efficient_sdp_enabled),
    ("math", "math_sdp_enabled", "enable_math_sdp", torch.backends.cuda.math_sdp_enabled),
]


def _message(kind):
    return f"Currently, the device operator does not support {kind} sdp and only sets the global variable!"


@pytest.fixture(autouse=True)
def _restore_flags():
    saved = [cuda_get() for _, _, _, cuda_get in SWITCHES]
    yield
    torch.backends.cuda.enable_flash_sdp(saved[0])
    torch.backends.cuda.enable_mem_efficient_sdp(saved[1])
    torch.backends.cuda.enable_math_sdp(saved[2])


@pytest.mark.parametrize("kind,getter,setter,cuda_get", SWITCHES)
def test_each_switch_is_the_global_flag_and_warns(kind, getter, setter, cuda_get):
    for value in (False, True, False):
        with pytest.warns(UserWarning) as record:
            getattr(torch.npu, setter)(value)
            assert getattr(torch.npu, getter)() is value
        assert [str(w.message) for w in record] == [_message(kind)] * 2
        assert cuda_get() is value  # the same flag torch.backends.cuda reads


def test_sdp_kernel_sets_the_three_for_the_block_and_restores_them():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.npu.enable_flash_sdp(True)
        torch.npu.enable_mem_efficient_sdp(False)
        torch.npu.enable_math_sdp(True)
        with torch.npu.sdp_kernel(enable_flash=False, enable_math=False, enable_mem_efficient=True) as info:
            assert info == {}
            assert [cuda_get() for *_, cuda_get in SWITCHES] == [False, True, False]
        assert [cuda_get() for *_, cuda_get in SWITCHES] == [True, False, True]
        with pytest.raises(KeyError):
            with torch.npu.sdp_kernel(enable_flash=False):
                raise KeyError("the block failed")
        assert [cuda_get() for *_, cuda_get in SWITCHES] == [True, False, True]
    with pytest.warns(UserWarning, match="only sets the global variable"):
        with torch.npu.sdp_kernel():
            pass


def test_preferred_linalg_library_warns_and_reports_the_default():
    for backend in (None, "Cusolver", torch._C._LinalgBackend.Magma):
        with pytest.warns(UserWarning, match="torch.npu.preferred_linalg_library isn't implemented!"):
            assert torch.npu.preferred_linalg_library(backend) == torch._C._LinalgBackend.Default
