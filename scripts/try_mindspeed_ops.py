#!/usr/bin/env python3
"""Builds MindSpeed's own C++ operators against vNPU and checks them against
vNPU's operators and cpu autograd (docs/aclnn.md, "Measured").

    python scripts/try_mindspeed_ops.py --mindspeed /path/to/MindSpeed

Nothing of MindSpeed is vendored: point it at a checkout of Ascend/MindSpeed.
Each op is built by MindSpeed's own builder (torch.utils.cpp_extension.load,
cached under ~/.cache/torch_extensions). The builders are loaded one by
one, not through ``mindspeed.op_builder``'s ``__init__``, which also imports
torchair's GE converter API.
"""

import argparse
import importlib.util
import os
import sys
import time
import types

import torch

import torch_npu


def load_builder(root, module, cls):
    """MindSpeed's builder class `cls` from mindspeed/op_builder/<module>.py."""
    if "mindspeed.op_builder" not in sys.modules:
        pkg = types.ModuleType("mindspeed.op_builder")
        pkg.__path__ = [os.path.join(root, "mindspeed", "op_builder")]
        sys.modules["mindspeed.op_builder"] = pkg
    spec = importlib.util.spec_from_file_location(f"mindspeed.op_builder.{module}",
                                                  os.path.join(root, "mindspeed", "op_builder", f"{module}.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return getattr(mod, cls)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], -1)


def check_rope(root):
    start = time.time()
    ops = load_builder(root, "npu_rotary_position_embedding_builder", "RotaryPositionEmbeddingOpBuilder")().load(
        verbose=False)
    x = torch.randn(2, 8, 3, 16).npu().requires_grad_()
    cos = torch.randn(1, 8, 1, 16).npu().requires_grad_()
    sin = torch.randn(1, 8, 1, 16).npu().requires_grad_()
    y = ops.npu_rotary_position_embedding(x, cos, sin, 0)
    torch.npu.synchronize()
    elapsed = time.time() - start
    forward = (y - torch_npu.npu_rotary_mul(x.detach(), cos.detach(), sin.detach())).abs().max().item()
    y.sum().backward()
    xc, cc, sc = (t.detach().cpu().requires_grad_() for t in (x, cos, sin))
    (xc * cc + rotate_half(xc) * sc).sum().backward()
    grads = max((a.grad.cpu() - b.grad).abs().max().item() for a, b in ((x, xc), (cos, cc), (sin, sc)))
    print(f"npu_rotary_position_embedding: build + first call {elapsed:.1f} s; "
          f"forward vs npu_rotary_mul max |diff| {forward:g}; grads vs cpu autograd max |diff| {grads:g}")
    return forward == 0 and grads < 1e-5


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mindspeed", required=True, help="a checkout of Ascend/MindSpeed")
    root = os.path.abspath(parser.parse_args().mindspeed)
    sys.path.insert(0, root)
    ok = check_rope(root)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
