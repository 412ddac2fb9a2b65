"""``python -m torch_npu.utils.collect_env``: PyTorch's environment report plus
the torch_npu, CANN and device lines real torch_npu's report adds."""

import torch
from torch.utils import collect_env as _torch_collect_env

import torch_npu


def get_cann_version():
    """The CANN toolkit version, read from the toolkit folder's install info
    (torch_npu/_cann, vNPU's stand-in for ASCEND_HOME_PATH)."""
    import os
    info = os.path.join(os.path.dirname(torch_npu.__file__), "_cann", "ascend_toolkit_install.info")
    with open(info) as f:
        for line in f:
            if line.startswith("version="):
                return line.split("=", 1)[1].strip()
    return ""


def get_npu_env_lines():
    lines = [f"torch_npu version: {torch_npu.__version__} (vNPU, an emulator)",
             f"CANN version: {torch.version.cann}",
             f"NPU count: {torch.npu.device_count()}"]
    if torch.npu.device_count():
        lines.append(f"NPU 0: {torch.npu.get_device_name(0)} (SoC version {torch_npu.npu.get_soc_version()})")
    return lines


def get_pretty_env_info():
    return _torch_collect_env.get_pretty_env_info() + "\n" + "\n".join(get_npu_env_lines()) + "\n"


def main():
    print("Collecting environment information...")
    print(get_pretty_env_info())


if __name__ == "__main__":
    main()
