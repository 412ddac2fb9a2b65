"""An Ascend cost model: what an op would take on a real chip, by roofline.

Each op's time on the selected chip is estimated as

    seconds = max(flops / peak(unit, dtype), bytes / memory_bandwidth)

where the unit is the Cube (matrix multiplication: mm, addmm, bmm, baddbmm,
convolutions, attention) or the Vector unit (everything else), ``flops`` is
the op's arithmetic (2*M*N*K for a GEMM; PyTorch's flop formulas for
convolutions and attention; one per output element otherwise) and ``bytes``
what it reads and writes once. An op is compute-bound when the first term
is the larger. The chips' figures and their sources are in
docs/cost_model.md; they are peak figures, so estimates are lower bounds
(no launch overhead, no cache effects, perfect overlap).

``estimate(model, example_inputs, chip=...)`` runs the model on the meta
device (shapes only, no memory, any size) and reports the estimated step
time, the top ops and whether each is compute- or memory-bound. The
profiler's kernel_details.csv and op_statistic.csv carry the estimate of
each device task (from its op's recorded input shapes: record_shapes=True).
"""

import copy
import math
from collections import defaultdict
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

__all__ = ["ChipRoofline", "Estimate", "OpCost", "estimate", "op_cost", "roofline"]

TERA = 1e12
GIGA = 1e9


@dataclass(frozen=True)
class ChipRoofline:
    name: str
    cube_tflops: dict     # dtype name -> peak TFLOPS of the Cube (matrix) unit
    vector_tflops: dict   # dtype name -> peak TFLOPS of the Vector unit
    memory_gbps: float    # device memory bandwidth, GB/s (1e9 bytes)

    def peak(self, unit, dtype):
        table = self.cube_tflops if unit == "cube" else self.vector_tflops
        return table.get(dtype, table["float32"]) * TERA


def _davinci(name, cube_fp16, memory_gbps, fp32_gemm_share, int8_factor=2.0):
    # The Vector unit is 2048 bits wide (128 fp16 / 64 fp32 lanes, fused
    # multiply-add) next to a 16x16x16 Cube (4096 MACs) per core: the vector
    # peak is the Cube's times 128/4096 for fp16, 64/4096 for fp32.
    vector_fp16 = cube_fp16 * 128 / 4096
    return ChipRoofline(
        name=name,
        cube_tflops={"float16": cube_fp16, "bfloat16": cube_fp16 if fp32_gemm_share < 1 else 0.0,
                     "int8": cube_fp16 * int8_factor, "float32": cube_fp16 * fp32_gemm_share},
        vector_tflops={"float16": vector_fp16, "bfloat16": vector_fp16, "float32": vector_fp16 / 2,
                       "int8": vector_fp16 * 2, "int32": vector_fp16 / 2, "int64": vector_fp16 / 4,
                       "float64": vector_fp16 / 8, "bool": vector_fp16 * 2},
        memory_gbps=memory_gbps,
    )


# The figures (docs/cost_model.md gives each one's source):
# - Ascend910A: 256 TFLOPS FP16 Cube, 512 TOPS INT8; HBM2 1.2 TB/s. fp32 GEMMs
#   run on the Cube in fp16 (the default allow_fp32_to_fp16 precision mode).
# - Ascend910B*: 280 TFLOPS FP16 / BF16 Cube (910B2); HBM2e 1.6 TB/s. fp32
#   GEMMs keep their dtype (must_keep_origin_dtype): a quarter of the fp16 rate.
# - Ascend310P3: 140 TOPS INT8, 70 TFLOPS FP16 (half the INT8 rate); LPDDR4X
#   204 GB/s. No bf16. fp32 GEMMs in fp16, as on 910A.
_ROOFLINES = {
    "ascend910a": _davinci("Ascend910A", 256.0, 1200.0, fp32_gemm_share=1.0),
    "ascend910b": _davinci("Ascend910B", 280.0, 1600.0, fp32_gemm_share=0.25),
    "ascend310p": _davinci("Ascend310P3", 70.0, 204.0, fp32_gemm_share=1.0),
}
_ROOFLINES["ascend310p"].cube_tflops["bfloat16"] = 0.0  # 310P has no bf16 Cube


def roofline(chip=None) -> ChipRoofline:
    """The roofline of ``chip`` (a name as VNPU_CHIP takes; default: the
    virtual device's chip)."""
    if chip is None:
        from torch_npu.npu.device import get_device_name, is_available
        chip = get_device_name() if is_available() else "Ascend910B2"
    key = str(chip).lower()
    if not key.startswith("ascend"):
        key = "ascend" + key
    for prefix, line in (("ascend910_93", "ascend910b"), ("ascend910b", "ascend910b"),
                         ("ascend910a", "ascend910a"), ("ascend910", "ascend910a"), ("ascend310p", "ascend310p")):
        if key.startswith(prefix):
            profile = _ROOFLINES[line]
            name = str(chip) if str(chip).lower().startswith("ascend") else "Ascend" + str(chip)
            return ChipRoofline(name, profile.cube_tflops, profile.vector_tflops, profile.memory_gbps)
    raise ValueError(f"the cost model has no roofline for chip '{chip}'; known: Ascend910A, Ascend910B1-B4, "
                     f"Ascend910_93xx, Ascend310P3")


@dataclass
class OpCost:
    name: str
    flops: float
    bytes: float
    seconds: float
    unit: str    # "cube" or "vector"
    bound: str   # "compute" or "memory"


CUBE_OPS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "convolution", "_convolution",
            "convolution_backward", "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_flash_attention_for_cpu_backward", "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_attention_math", "npu_fusion_attention", "npu_fusion_attention_grad"}
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "bool": 1,
                "int16": 2, "int32": 4, "int64": 8, "complex64": 8, "complex128": 16}
_TRACE_DTYPES = {"float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
                 "long int": "int64", "int": "int32", "bool": "bool", "signed char": "int8",
                 "unsigned char": "uint8", "short int": "int16"}


def _gemm_flops(name, shapes):
    """2*M*N*K from the inputs' shapes, or None when they are not a GEMM's."""
    try:
        if name == "mm":
            (m, k), (_, n) = shapes[0], shapes[1]
            return 2.0 * m * n * k
        if name == "addmm":
            (m, k), (_, n) = shapes[1], shapes[2]
            return 2.0 * m * n * k
        if name == "bmm":
            (b, m, k), (_, _, n) = shapes[0], shapes[1]
            return 2.0 * b * m * n * k
        if name == "baddbmm":
            (b, m, k), (_, _, n) = shapes[1], shapes[2]
            return 2.0 * b * m * n * k
    except (TypeError, ValueError, IndexError):
        return None
    return None


def _gemm_output_elements(name, shapes):
    a, b = (shapes[0], shapes[1]) if name in ("mm", "bmm") else (shapes[1], shapes[2])
    return math.prod(a[:-1]) * b[-1]


def _roof(name, flops, nbytes, unit, dtype, line):
    compute = flops / line.peak(unit, dtype) if line.peak(unit, dtype) > 0 else math.inf
    memory = nbytes / (line.memory_gbps * GIGA)
    return OpCost(name, flops, nbytes, max(compute, memory), unit, "compute" if compute >= memory else "memory")


def op_cost(name, input_shapes, input_dtypes, output_bytes=None, flops=None, chip=None, line=None):
    """The roofline estimate of one op call from its inputs' shapes and dtypes
    (torch dtype names, e.g. "float16"). ``name`` is the aten op (with or
    without "aten::"). Without ``output_bytes`` the output is taken as large
    as the largest input (a GEMM's as M x N)."""
    line = line or roofline(chip)
    name = name.split("::", 1)[-1]
    shapes = [list(s) if isinstance(s, (list, tuple)) else [] for s in input_shapes]
    dtypes = [_TRACE_DTYPES.get(d, d) for d in input_dtypes]
    tensor_inputs = [(s, d) for s, d in zip(shapes, dtypes) if d in _DTYPE_BYTES]
    dtype = tensor_inputs[0][1] if tensor_inputs else "float32"
    in_bytes = sum(math.prod(s) * _DTYPE_BYTES[d] for s, d in tensor_inputs)
    gemm = _gemm_flops(name, shapes)
    if output_bytes is None:
        if gemm is not None:
            output_bytes = _gemm_output_elements(name, shapes) * _DTYPE_BYTES.get(dtype, 4)
        else:
            output_bytes = max((math.prod(s) * _DTYPE_BYTES[d] for s, d in tensor_inputs), default=0)
    if flops is None:
        if gemm is not None:
            flops = gemm
        else:
            flops = float(max((math.prod(s) for s, _ in tensor_inputs), default=0))
    unit = "cube" if name in CUBE_OPS else "vector"
    return _roof(name, float(flops), float(in_bytes + output_bytes), unit, dtype, line)


# --- estimate(model, inputs) ----------------------------------------------------

_FREE = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "detach", "lift_fresh", "_unsafe_view",
         "_to_copy_meta", "set_", "resize_", "zero_size"}


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


class _CostMode(TorchDispatchMode):
    def __init__(self, line):
        super().__init__()
        self.line = line
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if getattr(func, "is_view", False) or name in _FREE:
            return out
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if not inputs and not outputs:
            return out
        from torch.utils.flop_counter import flop_registry
        flops = None
        if func.overloadpacket in flop_registry:
            try:
                flops = float(flop_registry[func.overloadpacket](*args, **kwargs, out_val=out))
            except Exception:  # a formula that does not take this overload's arguments
                flops = None
        out_bytes = sum(t.numel() * t.element_size() for t in outputs)
        if flops is None:
            flops = float(max((t.numel() for t in outputs), default=0))
        cost = op_cost(name, [list(t.shape) for t in inputs], [_dtype_name(t) for t in inputs], out_bytes, flops,
                       line=self.line)
        self.calls.append(cost)
        return out


@dataclass
class Estimate:
    chip: str
    seconds: float
    ops: list = field(default_factory=list)  # per op name: dict(name, count, seconds, flops, bytes, bound)

    def table(self, top=10):
        lines = [f"estimated step time on {self.chip}: {self.seconds * 1e3:.3f} ms (roofline lower bound)",
                 f"{'op':<40} {'calls':>6} {'time ms':>10} {'share':>7} {'GFLOP':>10} {'MB':>10} bound"]
        for op in self.ops[:top]:
            share = op["seconds"] / self.seconds * 100 if self.seconds else 0.0
            lines.append(f"{op['name']:<40} {op['count']:>6} {op['seconds'] * 1e3:>10.4f} {share:>6.1f}%"
                         f" {op['flops'] / 1e9:>10.3f} {op['bytes'] / 1e6:>10.3f} {op['bound']}")
        return "\n".join(lines)

    def __str__(self):
        return self.table()


def estimate(model, example_inputs, chip=None, train=False):
    """The estimated time of ``model(*example_inputs)`` (and of its backward
    when ``train``) on ``chip``, op by op. Runs on the meta device: the model
    and inputs are copied there, nothing is computed."""
    line = roofline(chip)
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    to_meta = lambda t: t.detach().to("meta").requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t  # noqa: E731
    meta_model = copy.deepcopy(model).to("meta") if isinstance(model, torch.nn.Module) else model
    inputs = tree_map(to_meta, tuple(example_inputs))
    mode = _CostMode(line)
    with torch.set_grad_enabled(train), mode:
        out = meta_model(*inputs)
        if train:
            losses = [o.float().sum() for o in tree_leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad]
            if not losses:
                raise ValueError("estimate(train=True): the model's outputs do not require grad")
            sum(losses).backward()
    groups = defaultdict(lambda: {"count": 0, "seconds": 0.0, "flops": 0.0, "bytes": 0.0, "compute": 0.0})
    for call in mode.calls:
        g = groups[call.name]
        g["count"] += 1
        g["seconds"] += call.seconds
        g["flops"] += call.flops
        g["bytes"] += call.bytes
        if call.bound == "compute":
            g["compute"] += call.seconds
    ops = [{"name": name, "count": g["count"], "seconds": g["seconds"], "flops": g["flops"], "bytes": g["bytes"],
            "bound": "compute" if g["compute"] * 2 >= g["seconds"] else "memory"} for name, g in groups.items()]
    ops.sort(key=lambda o: -o["seconds"])
    return Estimate(chip=line.name, seconds=sum(o["seconds"] for o in ops), ops=ops)
