"""Names that client libraries look up on torch, torch.npu and torch_npu.

accelerate's ``accelerate env`` reads ``torch.version.cann``; DeepSpeed's NPU
accelerator reads ``os.environ["ASCEND_HOME_PATH"]`` and looks there for an
``ascend_*_install.info`` with the CANN version; DeepSpeed's activation
checkpointing calls ``torch.npu._lazy_call``; trl's activation offloading
calls ``torch_npu._C._storage_Use_Count``. Real torch_npu has each because
CANN is installed next to it; vNPU ships a folder with CANN-like version
files only (``torch_npu/_cann``) and points the variables at it when the user
has not set them.

Code written for Ascend finds CANN's aclnn operators with
``dlopen("libopapi.so")`` (op-plugin's EXEC_NPU_CMD, MindSpeed's ACLNN_CMD):
vNPU loads its ``_cann/lib64/libopapi.so`` here, so that the bare name
finds it (Note [The aclnn operator API] in csrc/CMakeLists.txt).
"""

import ctypes

import os

import torch

_CANN_FOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_cann")
_OPAPI = os.path.join(_CANN_FOLDER, "lib64", "libopapi.so")
_opapi_library = None  # kept loaded for the life of the process


def _lazy_call(callable, **kwargs):
    """torch.cuda._lazy_call's contract: run now if the device is initialised,
    else when it is. The virtual NPU initialises on first use, so a deferred
    call would run at the next device use; running it now is equivalent, and
    initialising here is cheap."""
    callable()


def _add_pyacl():
    """CANN's environment script puts pyACL (``import acl``) on the path; vNPU's CANN has a small one,
    appended when ASCEND_HOME_PATH is vNPU's and no other pyACL is importable."""
    import importlib.util
    import sys
    if os.environ.get("ASCEND_HOME_PATH") != _CANN_FOLDER or importlib.util.find_spec("acl") is not None:
        return
    sys.path.append(os.path.join(_CANN_FOLDER, "python", "site-packages"))


def install():
    from torch_npu import _C
    from torch_npu.npu.utils import get_cann_version

    torch.version.cann = get_cann_version()
    for name in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        os.environ.setdefault(name, _CANN_FOLDER)
    os.environ.setdefault("ATB_HOME_PATH", os.path.join(_CANN_FOLDER, "nnal", "atb"))
    _add_pyacl()
    global _opapi_library
    if _opapi_library is None and os.path.exists(_OPAPI):
        _opapi_library = ctypes.CDLL(_OPAPI)
    torch.npu._lazy_call = _lazy_call
    _C._storage_Use_Count = torch._C._storage_Use_Count
