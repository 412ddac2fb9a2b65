"""torch.ops.npu: communication-fused operators ("mc2": matmul fused with a
collective over an hccl group), with op-plugin's schemas:

- TP matmuls: npu_all_gather_base_mm, npu_mm_reduce_scatter_base,
  npu_mm_all_reduce_base, npu_all_gather_quant_mm, npu_quant_mm_reduce_scatter.
- all-to-all matmuls: npu_all_to_all_matmul, npu_matmul_all_to_all,
  npu_all_to_all_quant_matmul, npu_quant_matmul_all_to_all.
- MoE expert parallelism: npu_alltoallv_gmm, npu_gmm_alltoallv,
  npu_alltoallv_quant_gmm, npu_quant_gmm_alltoallv, npu_moe_distribute_dispatch
  (_v2), npu_moe_distribute_combine (_v2), npu_moe_distribute_combine_add_rms_norm,
  and _npu_distribute_barrier.

Emulation choices:

- Group names. ``hcom`` / ``group_ep`` / ``group`` is the string real code gets
  from ``pg._get_backend(torch.device("npu")).get_hccl_comm_name(rank)``
  ("hccl_comm_<group id>_<rank>" here; callers pass their global rank
  (MindSpeed) or their rank in the group (vllm-ascend), both are accepted). It
  is mapped back to its process group by asking every hccl backend of the
  groups torch.distributed knows (``_world.pg_map``) for its names; an unknown
  name raises RuntimeError naming the argument and the known names. The
  collective is then torch.distributed's own on that group
  (all_gather_single, reduce_scatter_single, all_reduce, all_to_all_single
  with split sizes), queued on the group's stream like any hccl collective:
  the fusion (overlap of communication with the matmul tiles) is a
  performance property the emulator does not reproduce. ``world_size`` /
  ``ep_world_size`` / ``ep_rank_id`` must match the group. comm_turn,
  comm_mode ("ai_cpu", "aiv", "ccu") and comm_alg only choose how the Ascend
  kernel communicates; the results do not depend on them.
- Numerics. Matmuls accumulate in float32 (int8 x int8 in float64, exact),
  the partial results are reduced (all_reduce / reduce_scatter) in float32 and
  rounded once to the output dtype. Dequantisation follows each op's documented
  formula; quantisation rounds half to even and saturates. Float8 tensors
  travel through the collectives as their bytes.
- Modes the emulator does not implement raise "... is not supported on vNPU":
  low-bit communication (comm_quant_scale_*, comm_quant_mode != 0), per-block
  and mx quantisation (group_sizes / block_size / mx quant modes, hifloat8 and
  float4 dtypes), TP domains of size 2 in the MoE dispatch / combine
  (op-plugin documents them as reserved), elastic_info.
- No backward: op-plugin registers none for these operators (MindSpeed wraps
  them in its own autograd.Function), so they run under no_grad and their
  outputs do not require grad.
- MoE dispatch / combine. The dispatch routes every (token, k) choice to the
  rank holding expert ``expert_ids[t, k]`` (shared-expert ranks first with
  expert_shard_type 0, then moe_expert_num / (ep_world_size -
  shared_expert_rank_num) experts per rank) and every active token to one
  replica of each shared expert (the replica ``rank % replicas``). A rank's
  ``expand_x`` holds its rows expert by expert, source rank by source rank,
  token order inside; the rows after the received ones (up to the documented
  A) are zeros. ``ep_recv_counts`` holds the prefix sums of that (expert,
  source rank) layout in its first ep_world_size * local_expert_num entries
  (zeros after), ``expand_idx`` / ``assist_info_for_combine`` the position of
  each (token, k) among this rank's tokens sent to the same expert (-1 for a
  choice not sent; zeros after the first BS * K entries). The combine sends
  each row back along the same path, recomputing the route from expert_ids
  and x_active_mask, and sums expert_scales * row per token, shared-expert rows
  with weight 1, the special experts of the v2 ops (zero / copy / const, from
  ori_x) with their expert_scales, and shared_expert_x; inactive tokens give 0.
  The routing is read back to the host (every rank's counts are all-gathered
  first, so that a receiver overflowing its A makes every rank raise instead
  of leaving the others waiting), so the dispatch / combine do not trace
  under FakeTensor; the matmul families do. Arguments op-plugin documents as
  reserved or as bookkeeping of the Ascend algorithm (group_tp with a TP size
  of 0 / 1, tp_send_counts, activation_scale, weight_scale, group_list,
  out_dtype, group_list_type, performance_info, _npu_distribute_barrier's
  time_out, the A2 expand_scales) are accepted, shape-checked where
  documented, and do not change the result.
"""

import torch
import torch.distributed as dist

from torch_npu import _dtypes
from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin.quant import _scale_value

_NPU = torch.device("npu")
_FLOATS = (torch.float16, torch.bfloat16, torch.float32)
_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_FP8_MAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}
_COMM_MODES = (None, "ai_cpu", "aiv", "ccu")
_COMM_ALGS = ("", "fullmesh", "fullmesh_v1", "fullmesh_v2", "hierarchy")

# int dtype arguments: torch's ScalarType numbers (a torch.dtype passed to an
# ``int?`` argument) and torch_npu's constants (ACL number + 256, torch_npu/_dtypes.py).
_INT_DTYPES = {
    1: torch.int8, 3: torch.int32, 5: torch.float16, 6: torch.float32, 15: torch.bfloat16,
    23: torch.float8_e5m2, 24: torch.float8_e4m3fn,
    _dtypes.DType.int8: torch.int8, _dtypes.DType.int32: torch.int32, _dtypes.DType.float16: torch.float16,
    _dtypes.DType.float32: torch.float32, _dtypes.DType.bfloat16: torch.bfloat16,
    _dtypes.DType.float8_e5m2: torch.float8_e5m2, _dtypes.DType.float8_e4m3fn: torch.float8_e4m3fn,
}


def _unsupported(fn, what, reason):
    raise RuntimeError(f"{fn}: {what} is not supported on vNPU: {reason}.")


def _dtype_arg(fn, name, value, allowed):
    """The torch dtype an ``int?`` dtype argument names, one of ``allowed``."""
    if value is None:
        return None
    dtype = _INT_DTYPES.get(value)
    if dtype is None or dtype not in allowed:
        shown = _dtypes.NAMES.get(value, dtype if dtype is not None else value)
        _unsupported(fn, f"{name}={shown}", "expected one of " + ", ".join(str(d) for d in allowed))
    return dtype


def _no_exotic_dtypes(fn, **dtype_args):
    """x1_dtype / x2_scale_dtype ... arguments: they only name dtypes torch has
    no type for (hifloat8, float4, float8_e8m0); the tensors' own dtypes are used."""
    for name, value in dtype_args.items():
        if value is not None:
            _unsupported(fn, f"{name}={_dtypes.NAMES.get(value, value)}",
                         "hifloat8 / float4 / float8_e8m0 (mx) data is not emulated; pass tensors of torch dtypes "
                         "and leave the *_dtype arguments None")


def _check_comm_mode(fn, comm_mode):
    check(comm_mode in _COMM_MODES, f"{fn}: comm_mode should be None, 'ai_cpu', 'aiv' or 'ccu', but got "
          f"{comm_mode!r}.")


def _check_comm_turn(fn, comm_turn):
    check(comm_turn == 0, f"{fn}: comm_turn should be 0 (the only value the kernel supports), but got {comm_turn}.")


def _check_2d(fn, name, t):
    check(t.dim() == 2, f"{fn}: {name} should be 2-dimensional, but got shape {list(t.shape)}.")


# --- process groups by hccl comm name ------------------------------------------------------------

def _hccl_groups():
    """[(process group, names)] for every hccl group of this process: the names its
    backend gives for each rank of the group (group and global numbering)."""
    if not dist.is_available() or not dist.is_initialized():
        return []
    groups = []
    for pg in list(dist.distributed_c10d._world.pg_map):
        try:
            backend = pg._get_backend(_NPU)
        except RuntimeError:  # no npu backend (a gloo-only group)
            continue
        name_of = getattr(backend, "get_hccl_comm_name", None)
        if name_of is None:
            continue
        ranks = set(range(pg.size()))
        ranks.update(dist.get_process_group_ranks(pg))
        groups.append((pg, {name_of(r) for r in ranks}, (name_of(pg.rank()), name_of(dist.get_rank()))))
    return groups


def _group(fn, arg, name):
    """The process group whose hccl comm name is ``name``."""
    check(isinstance(name, str) and name != "", f"{fn}: {arg} should be the name of an hccl communicator "
          f"(get_hccl_comm_name), but got {name!r}.")
    groups = _hccl_groups()
    check(dist.is_available() and dist.is_initialized(),
          f"{fn}: {arg} '{name}' names no hccl process group: torch.distributed is not initialized "
          "(call torch.distributed.init_process_group('hccl') first).")
    for pg, names, _ in groups:
        if name in names:
            return pg
    known = sorted({n for _, _, own in groups for n in own})
    raise RuntimeError(f"{fn}: {arg} '{name}' is not the hccl comm name of a process group of this process; "
                       f"known names: {known}.")


def _group_unless_shapes_only(fn, arg, name, t):
    """_group, except for fake or meta tensors outside a distributed job: those
    only propagate shapes (FakeTensorMode, as op-plugin's meta functions do,
    which never look the communicator up), and a reduction changes no shape."""
    from torch._subclasses.fake_tensor import is_fake
    if (is_fake(t) or t.device.type == "meta") and not (dist.is_available() and dist.is_initialized()):
        return None
    return _group(fn, arg, name)


def _check_world(fn, pg, name, world_size):
    check(world_size == pg.size(), f"{fn}: {name} {world_size} should equal the size {pg.size()} of the "
          "communicator's group.")


def _check_device(fn, pg, arg, t):
    try:
        pg._get_backend(t.device)
    except RuntimeError:
        raise RuntimeError(f"{fn}: the group of {arg} has no backend for {t.device.type} tensors; pass npu tensors "
                           "(or use a group with a backend for that device).") from None


# --- collectives --------------------------------------------------------------------------------

def _wire(t):
    """t as the collectives carry it: float8 as its bytes."""
    t = t.contiguous()
    return t.view(torch.uint8) if t.dtype in _FP8 else t


def _unwire(t, dtype):
    return t.view(dtype) if dtype in _FP8 else t


def _all_gather(t, pg):
    """Concatenation along dim 0 of t from every rank, in rank order."""
    src = _wire(t)
    out = src.new_empty((pg.size() * src.shape[0],) + tuple(src.shape[1:]))
    dist.all_gather_single(out, src, group=pg)
    return _unwire(out, t.dtype)


def _reduce_scatter(t, pg):
    """This rank's block (dim 0) of the sum of t over the ranks."""
    t = t.contiguous()
    out = t.new_empty((t.shape[0] // pg.size(),) + tuple(t.shape[1:]))
    dist.reduce_scatter_single(out, t, group=pg)
    return out


def _all_reduce(t, pg):
    t = t.clone(memory_format=torch.contiguous_format)
    dist.all_reduce(t, group=pg)
    return t


def _all_to_all(t, pg, out_rows, in_splits=None, out_splits=None):
    src = _wire(t)
    out = src.new_empty((out_rows,) + tuple(src.shape[1:]))
    dist.all_to_all_single(out, src, out_splits, in_splits, group=pg)
    return _unwire(out, t.dtype)


# --- quantisation helpers -----------------------------------------------------------------------

def _quant_rows(x32, target):
    """Per-row dynamic quantisation of float32 rows to int8 or a float8 type:
    (q, scale) with scale = amax / qmax (1 for an all-zero row) and q = x / scale
    (int8: rounded half to even, saturated)."""
    qmax = 127.0 if target == torch.int8 else _FP8_MAX[target]
    amax = x32.abs().amax(-1, keepdim=True)
    scale = torch.where(amax > 0, amax / qmax, torch.ones_like(amax))
    y = x32 / scale
    if target == torch.int8:
        return torch.round(y).clamp(-128, 127).to(torch.int8), scale.squeeze(-1)
    return y.clamp(-qmax, qmax).to(target), scale.squeeze(-1)


def _scale_tensor(fn, name, scale, shapes):
    """A dequantisation scale as float32 (int64 / uint64 scales carry float32 bits, as
    npu_trans_quant_param makes them), of one of ``shapes`` (tuples)."""
    check(tuple(scale.shape) in shapes, f"{fn}: {name} should have shape "
          f"{' or '.join(str(list(s)) for s in shapes)}, but got {list(scale.shape)}.")
    if scale.dtype == torch.uint64:
        scale = scale.view(torch.int64)
    check(scale.dtype in (torch.float32, torch.int64, torch.bfloat16, torch.float16),
          f"{fn}: {name} should be float32, bfloat16, int64 or uint64, but got {scale.dtype}.")
    return _scale_value(scale)


def _int_or_float_matmul(a, b):
    """a @ b in float64 for integer / float8 operands (exact for int8), float32 otherwise."""
    if a.dtype in _FLOATS:
        return a.float() @ b.float()
    return (a.double() @ b.double()).float()


# --- TP: all-gather / reduce-scatter / all-reduce matmuls -----------------------------------------

def _tp_quant_parts(fn, x1, x2, x1_scale, x2_scale, bias, m, n):
    """(int8 | fp8 path?) checks; returns float32 (m, 1) and (1, n) scales (or None)."""
    quant = x1.dtype not in _FLOATS
    if not quant:
        check(x1_scale is None and x2_scale is None,
              f"{fn}: x1_scale / x2_scale are only for int8 (quantised) inputs, but the inputs are {x1.dtype}.")
        check(x2.dtype == x1.dtype, f"{fn}: x2 should have the dtype of the first input ({x1.dtype}), but got "
              f"{x2.dtype}.")
        if bias is not None:
            check(bias.dim() == 1 and bias.shape[0] == n, f"{fn}: bias should have shape [{n}], but got "
                  f"{list(bias.shape)}.")
        return None, None
    check(x1.dtype in (torch.int8,) + _FP8 and x2.dtype in (torch.int8,) + _FP8
          and (x1.dtype == torch.int8) == (x2.dtype == torch.int8),
          f"{fn}: the inputs should be float16 / bfloat16, or both int8 (or float8) for the quantised path, but "
          f"got {x1.dtype} and {x2.dtype}.")
    check(x2_scale is not None, f"{fn}: the quantised path (int8 inputs) needs x2_scale.")
    s2 = _scale_tensor(fn, "x2_scale", x2_scale, ((1, n), (n,), (1,))).reshape(1, -1)
    s1 = None
    if x1_scale is not None:
        check(x1_scale.dtype == torch.float32, f"{fn}: x1_scale should be float32, but got {x1_scale.dtype}.")
        s1 = _scale_tensor(fn, "x1_scale", x1_scale, ((m, 1), (m,), (1,))).reshape(-1, 1)
        per_token = x1_scale.dim() == 2 or m > 1 and x1_scale.shape[0] == m
        s1 = (s1, per_token)
    if bias is not None:
        check(bias.dim() == 1 and bias.shape[0] == n, f"{fn}: bias should have shape [{n}], but got "
              f"{list(bias.shape)}.")
    return s1, s2


def _tp_out_dtype(fn, x1, x2_scale, output_dtype):
    if x1.dtype in _FLOATS:
        check(output_dtype is None or output_dtype == x1.dtype, f"{fn}: output_dtype is only for the quantised "
              f"path; with {x1.dtype} inputs the output is {x1.dtype}, but got {output_dtype}.")
        return x1.dtype
    if x2_scale.dtype in (torch.int64, torch.uint64):
        return torch.float16
    check(output_dtype in (None, torch.bfloat16, torch.float16),
          f"{fn}: output_dtype should be torch.bfloat16 or torch.float16, but got {output_dtype}.")
    return output_dtype or torch.bfloat16


def _dequant_matmul(a, b, s1, s2, bias):
    """(s1 * s2) * (a @ b + bias) in float32 (no scales: a @ b + bias)."""
    y = _int_or_float_matmul(a, b)
    if bias is not None:
        y = y + bias.float()
    if s2 is not None:
        y = y * s2
    if s1 is not None:
        y = y * s1[0]
    return y


def npu_all_gather_base_mm(self, x2, hcom, world_size, *, bias=None, x1_scale=None, x2_scale=None, gather_index=0,
                           gather_output=True, comm_turn=0, output_dtype=None, comm_mode=None):
    """output = allgather(x1) @ x2 + bias (gather_index 0) or x1 @ allgather(x2)
    (gather_index 1); quantised: (allgather(x1_scale) * x2_scale) * (... + bias).
    gather_out is the gathered tensor (empty with gather_output=False)."""
    fn = "npu_all_gather_base_mm"
    return _all_gather_mm(fn, self, x2, hcom, world_size, bias, x1_scale, x2_scale, gather_index, gather_output,
                          comm_turn, _tp_out_dtype_arg(fn, self, x2_scale, output_dtype), comm_mode)[:2]


def _tp_out_dtype_arg(fn, x1, x2_scale, output_dtype):
    if x1.dtype not in _FLOATS and x2_scale is None:
        return None  # reported by the quant checks
    return _tp_out_dtype(fn, x1, x2_scale, output_dtype)


def _all_gather_mm(fn, x1, x2, hcom, world_size, bias, x1_scale, x2_scale, gather_index, gather_output, comm_turn,
                   out_dtype, comm_mode):
    _check_2d(fn, "x1", x1)
    _check_2d(fn, "x2", x2)
    _check_comm_turn(fn, comm_turn)
    _check_comm_mode(fn, comm_mode)
    check(gather_index in (0, 1), f"{fn}: gather_index should be 0 (gather x1) or 1 (gather x2), but got "
          f"{gather_index}.")
    m, k = x1.shape
    n = x2.shape[1]
    k2 = x2.shape[0] * (world_size if gather_index == 1 else 1)
    check(k == k2, f"{fn}: the k dimension of x1 ({k}) and of "
          f"{'allgather(x2)' if gather_index == 1 else 'x2'} ({k2}) should be equal.")
    rows = m * world_size if gather_index == 0 else m
    s1, s2 = _tp_quant_parts(fn, x1, x2, x1_scale, x2_scale, bias, m, n)
    pg = _group(fn, "hcom", hcom)
    _check_world(fn, pg, "world_size", world_size)
    _check_device(fn, pg, "hcom", x1)
    with torch.no_grad():
        if gather_index == 0:
            gathered = _all_gather(x1, pg)
            if s1 is not None and s1[1]:  # per-token scales travel with their rows
                s1 = (_all_gather(s1[0], pg), True)
            y = _dequant_matmul(gathered, x2, s1, s2, bias)
        else:
            gathered = _all_gather(x2, pg)
            y = _dequant_matmul(x1, gathered, s1, s2, bias)
        out = y.reshape(rows, n).to(out_dtype)
        gather_out = gathered if gather_output else x1.new_empty((0,))
        amax = x1.new_empty((0,), dtype=torch.float32)
    return out, gather_out, amax


def npu_mm_reduce_scatter_base(self, x2, hcom, world_size, *, reduce_op="sum", bias=None, x1_scale=None,
                               x2_scale=None, comm_turn=0, output_dtype=None, comm_mode=None):
    """output = reducescatter(x1 @ x2 + bias) (rows split in rank order);
    quantised: reducescatter((x1_scale * x2_scale) * (x1 @ x2 + bias))."""
    fn = "npu_mm_reduce_scatter_base"
    return _mm_reduce_scatter(fn, self, x2, hcom, world_size, reduce_op, bias, x1_scale, x2_scale, comm_turn,
                              _tp_out_dtype_arg(fn, self, x2_scale, output_dtype), comm_mode)[0]


def _mm_reduce_scatter(fn, x1, x2, hcom, world_size, reduce_op, bias, x1_scale, x2_scale, comm_turn, out_dtype,
                       comm_mode):
    _check_2d(fn, "x1", x1)
    _check_2d(fn, "x2", x2)
    check(reduce_op == "sum", f"{fn}: reduce_op should be 'sum' (the only one supported), but got {reduce_op!r}.")
    _check_comm_turn(fn, comm_turn)
    _check_comm_mode(fn, comm_mode)
    m, k = x1.shape
    n = x2.shape[1]
    check(x2.shape[0] == k, f"{fn}: the k dimension of x1 ({k}) and x2 ({x2.shape[0]}) should be equal.")
    s1, s2 = _tp_quant_parts(fn, x1, x2, x1_scale, x2_scale, bias, m, n)
    pg = _group(fn, "hcom", hcom)
    _check_world(fn, pg, "world_size", world_size)
    _check_device(fn, pg, "hcom", x1)
    check(m % world_size == 0, f"{fn}: the m dimension of x1 ({m}) should be divisible by world_size "
          f"{world_size}.")
    with torch.no_grad():
        y = _reduce_scatter(_dequant_matmul(x1, x2, s1, s2, bias), pg).to(out_dtype)
        amax = x1.new_empty((0,), dtype=torch.float32)
    return y, amax


def _v2_quant_args(fn, group_sizes, block_size, amax_output, quant_scale, **dtype_args):
    check(group_sizes is None or all(g == 0 for g in group_sizes),
          f"{fn}: group_sizes {list(group_sizes or [])}: per-block quantisation is not supported on vNPU; pass "
          "None (per-tensor / per-token / per-channel scales).")
    check(block_size == 0, f"{fn}: block_size {block_size}: output re-quantisation is not supported on vNPU; "
          "pass 0.")
    check(quant_scale is None, f"{fn}: quant_scale (output quantisation) is not supported on vNPU.")
    check(not amax_output, f"{fn}: amax_output=True is not supported on vNPU (the kernel documents only an "
          "empty amax).")
    _no_exotic_dtypes(fn, **dtype_args)


def _v2_out_dtype(fn, x1, y_dtype):
    if x1.dtype in _FLOATS:
        wanted = _dtype_arg(fn, "y_dtype", y_dtype, _FLOATS)
        check(wanted in (None, x1.dtype), f"{fn}: with {x1.dtype} inputs the output is {x1.dtype}, but y_dtype "
              f"is {wanted}.")
        return x1.dtype
    check(y_dtype is not None, f"{fn}: y_dtype should be given when the inputs are not float16 / bfloat16.")
    return _dtype_arg(fn, "y_dtype", y_dtype, _FLOATS)


def npu_all_gather_quant_mm(self, x2, hcom, world_size, *, bias=None, x1_scale=None, x2_scale=None,
                            quant_scale=None, block_size=0, gather_index=0, gather_output=True, comm_turn=0,
                            group_sizes=None, amax_output=False, y_dtype=None, x1_dtype=None, x2_dtype=None,
                            x1_scale_dtype=None, x2_scale_dtype=None, comm_mode=None):
    """AllGatherMatmulV2: as npu_all_gather_base_mm (float16 / bfloat16 inputs, or
    int8 / float8 with per-token / per-tensor x1_scale and per-channel / per-tensor
    x2_scale), output dtype y_dtype; the third output (amax) is empty."""
    fn = "npu_all_gather_quant_mm"
    _v2_quant_args(fn, group_sizes, block_size, amax_output, quant_scale, x1_dtype=x1_dtype, x2_dtype=x2_dtype,
                   x1_scale_dtype=x1_scale_dtype, x2_scale_dtype=x2_scale_dtype)
    out_dtype = _v2_out_dtype(fn, self, y_dtype)
    return _all_gather_mm(fn, self, x2, hcom, world_size, bias, x1_scale, x2_scale, gather_index, gather_output,
                          comm_turn, out_dtype, comm_mode)


def npu_quant_mm_reduce_scatter(self, x2, hcom, world_size, *, reduce_op="sum", bias=None, x1_scale=None,
                                x2_scale=None, quant_scale=None, block_size=0, comm_turn=0, group_sizes=None,
                                amax_output=False, y_dtype=None, x1_dtype=None, x2_dtype=None, x1_scale_dtype=None,
                                x2_scale_dtype=None, comm_mode=None):
    """MatmulReduceScatterV2: as npu_mm_reduce_scatter_base, output dtype y_dtype;
    the second output (amax) is empty."""
    fn = "npu_quant_mm_reduce_scatter"
    _v2_quant_args(fn, group_sizes, block_size, amax_output, quant_scale, x1_dtype=x1_dtype, x2_dtype=x2_dtype,
                   x1_scale_dtype=x1_scale_dtype, x2_scale_dtype=x2_scale_dtype)
    out_dtype = _v2_out_dtype(fn, self, y_dtype)
    return _mm_reduce_scatter(fn, self, x2, hcom, world_size, reduce_op, bias, x1_scale, x2_scale, comm_turn,
                              out_dtype, comm_mode)


def _antiquant_weight(fn, x2, scale, offset, group_size, dtype):
    """(x2 + offset) * scale in float32, per tensor ([1]), per channel ([n] / [1, n]) or
    per group of ``group_size`` rows of k ([ceil(k / group_size), n])."""
    k, n = x2.shape
    check(scale.dtype == dtype, f"{fn}: antiquant_scale should have x1's dtype {dtype}, but got {scale.dtype}.")
    if offset is not None:
        check(offset.dtype == scale.dtype and offset.shape == scale.shape,
              f"{fn}: antiquant_offset should have antiquant_scale's dtype and shape ({scale.dtype}, "
              f"{list(scale.shape)}), but got {offset.dtype}, {list(offset.shape)}.")
    if group_size:
        check(group_size > 0, f"{fn}: antiquant_group_size should be positive, but got {group_size}.")
        groups = (k + group_size - 1) // group_size
        check(tuple(scale.shape) == (groups, n), f"{fn}: with antiquant_group_size {group_size}, antiquant_scale "
              f"should have shape [{groups}, {n}], but got {list(scale.shape)}.")

        def expand(p):
            return p.float().repeat_interleave(group_size, 0)[:k]
    else:
        check(tuple(scale.shape) in ((1,), (n,), (1, n)), f"{fn}: antiquant_scale should have shape [1], [{n}] "
              f"or [1, {n}], but got {list(scale.shape)}.")

        def expand(p):
            return p.float().reshape(1, -1)
    w = x2.float()
    if offset is not None:
        w = w + expand(offset)
    return w * expand(scale)


def npu_mm_all_reduce_base(x1, x2, hcom, *, reduce_op="sum", bias=None, antiquant_scale=None,
                           antiquant_offset=None, x3=None, dequant_scale=None, pertoken_scale=None,
                           comm_quant_scale_1=None, comm_quant_scale_2=None, antiquant_group_size=0, comm_turn=0,
                           group_sizes=None, y_dtype=None, x1_dtype=None, x2_dtype=None, dequant_scale_dtype=None,
                           pertoken_scale_dtype=None, comm_quant_mode=0, comm_mode=None):
    """output = allreduce(x1 @ W + bias + x3) with W = x2 (float), (x2 + antiquant_offset)
    * antiquant_scale (int8 x2: weight quantisation), or, int8 x1 and x2,
    allreduce(dequant_scale * pertoken_scale * (x1 @ x2 + bias) + x3)."""
    fn = "npu_mm_all_reduce_base"
    check(reduce_op == "sum", f"{fn}: reduce_op should be 'sum' (the only one supported), but got {reduce_op!r}.")
    _check_comm_turn(fn, comm_turn)
    _check_comm_mode(fn, comm_mode)
    if comm_quant_scale_1 is not None or comm_quant_scale_2 is not None or comm_quant_mode != 0:
        _unsupported(fn, "low-bit communication (comm_quant_scale_1 / comm_quant_scale_2 / comm_quant_mode)",
                     "the partial results are reduced in float32")
    check(group_sizes is None or all(g == 0 for g in group_sizes),
          f"{fn}: group_sizes {list(group_sizes or [])}: per-block quantisation is not supported on vNPU.")
    _no_exotic_dtypes(fn, x1_dtype=x1_dtype, x2_dtype=x2_dtype, dequant_scale_dtype=dequant_scale_dtype,
                      pertoken_scale_dtype=pertoken_scale_dtype)
    check(x1.dim() in (2, 3), f"{fn}: x1 should be 2- or 3-dimensional, but got shape {list(x1.shape)}.")
    _check_2d(fn, "x2", x2)
    k, n = x2.shape
    check(x1.shape[-1] == k, f"{fn}: the last dimension of x1 ({x1.shape[-1]}) should equal the first of x2 "
          f"({k}).")
    out_shape = tuple(x1.shape[:-1]) + (n,)
    a = x1.reshape(-1, k)
    m = a.shape[0]
    full_quant = x1.dtype == torch.int8
    if full_quant:
        check(x2.dtype == torch.int8, f"{fn}: with int8 x1, x2 should be int8, but got {x2.dtype}.")
        check(dequant_scale is not None, f"{fn}: int8 x1 and x2 need dequant_scale.")
        check(antiquant_scale is None, f"{fn}: antiquant_scale is for float x1 with int8 x2.")
        scale = _scale_tensor(fn, "dequant_scale", dequant_scale, ((1,), (n,), (1, n))).reshape(1, -1)
        if y_dtype is None:
            out_dtype = torch.bfloat16 if dequant_scale.dtype == torch.bfloat16 else torch.float16
        else:
            out_dtype = _dtype_arg(fn, "y_dtype", y_dtype, (torch.float16, torch.bfloat16))
        if pertoken_scale is not None:
            check(pertoken_scale.dtype == torch.float32 and tuple(pertoken_scale.shape) == (m,),
                  f"{fn}: pertoken_scale should be float32 of shape [{m}], but got {pertoken_scale.dtype} "
                  f"{list(pertoken_scale.shape)}.")
        if bias is not None:
            check(bias.dtype == torch.int32 and tuple(bias.shape) == (n,),
                  f"{fn}: with int8 inputs bias should be int32 of shape [{n}], but got {bias.dtype} "
                  f"{list(bias.shape)}.")
    else:
        check(x1.dtype in _FLOATS, f"{fn}: x1 should be float16, bfloat16 or int8, but got {x1.dtype}.")
        check(dequant_scale is None and pertoken_scale is None,
              f"{fn}: dequant_scale / pertoken_scale are for int8 x1 and x2.")
        if x2.dtype == torch.int8:
            check(antiquant_scale is not None, f"{fn}: float x1 with int8 x2 (weight quantisation) needs "
                  "antiquant_scale.")
            with torch.no_grad():
                weight = _antiquant_weight(fn, x2, antiquant_scale, antiquant_offset, antiquant_group_size, x1.dtype)
        else:
            weight = x2
            check(x2.dtype == x1.dtype, f"{fn}: x2 should have x1's dtype {x1.dtype} (or be int8 with "
                  f"antiquant_scale), but got {x2.dtype}.")
            check(antiquant_scale is None and antiquant_offset is None,
                  f"{fn}: antiquant_scale / antiquant_offset are for int8 x2.")
        wanted = _dtype_arg(fn, "y_dtype", y_dtype, _FLOATS)
        check(wanted in (None, x1.dtype), f"{fn}: the output has x1's dtype {x1.dtype}, but y_dtype is {wanted}.")
        out_dtype = x1.dtype
        if bias is not None:
            check(tuple(bias.shape) == (n,), f"{fn}: bias should have shape [{n}], but got {list(bias.shape)}.")
    if x3 is not None:
        check(tuple(x3.shape) == out_shape, f"{fn}: x3 should have the output's shape {list(out_shape)}, but got "
              f"{list(x3.shape)}.")
    pg = _group_unless_shapes_only(fn, "hcom", hcom, x1)
    if pg is not None:
        _check_device(fn, pg, "hcom", x1)
    with torch.no_grad():
        if full_quant:
            acc = _int_or_float_matmul(a, x2)
            if bias is not None:
                acc = acc + bias.float()
            y = acc * scale
            if pertoken_scale is not None:
                y = y * pertoken_scale.float().unsqueeze(-1)
        else:
            y = a.float() @ weight.float()
            if bias is not None:
                y = y + bias.float()
        if x3 is not None:
            y = y + x3.reshape(m, n).float()
        return (y if pg is None else _all_reduce(y, pg)).to(out_dtype).reshape(out_shape)


# --- all-to-all matmuls --------------------------------------------------------------------------

def _check_axes(fn, axes, allowed):
    check(axes is None or len(axes) == 0 or list(axes) == allowed,
          f"{fn}: all2all_axes should be None or {allowed}, but got {axes}.")


def _a2a_in(fn, x1, hcom, world_size, comm_mode):
    """commOut = AlltoAll(x1.view(W, BS/W, H)), permuted to (BS/W, W*H)."""
    _check_2d(fn, "x1", x1)
    _check_comm_mode(fn, comm_mode)
    pg = _group(fn, "hcom", hcom)
    _check_world(fn, pg, "world_size", world_size)
    _check_device(fn, pg, "hcom", x1)
    bs, h = x1.shape
    check(bs % world_size == 0, f"{fn}: the first dimension of x1 ({bs}) should be divisible by world_size "
          f"{world_size}.")
    recv = _all_to_all(x1, pg, bs)
    return recv.view(world_size, bs // world_size, h).permute(1, 0, 2).reshape(bs // world_size, world_size * h)


def _a2a_out(y, pg, world_size):
    """AlltoAll(y.view(BS, W, H2/W).permute(1, 0, 2)).view(W*BS, H2/W)."""
    bs, h2 = y.shape
    blocks = y.view(bs, world_size, h2 // world_size).permute(1, 0, 2).reshape(world_size * bs, h2 // world_size)
    return _all_to_all(blocks, pg, world_size * bs)


def npu_all_to_all_matmul(x1, x2, hcom, world_size, bias=None, all2all_axes=None, all2all_out_flag=True,
                          comm_mode=None):
    """(permuted @ x2 + bias, permuted) with permuted = the all-to-all of x1's row
    blocks laid side by side, (BS/W, W*H)."""
    fn = "npu_all_to_all_matmul"
    _check_axes(fn, all2all_axes, [-2, -1])
    check(x1.dtype in _FLOATS and x2.dtype == x1.dtype, f"{fn}: x1 and x2 should be float16 / bfloat16 of the same "
          f"dtype, but got {x1.dtype} and {x2.dtype}.")
    _check_2d(fn, "x2", x2)
    check(x1.dim() != 2 or x2.shape[0] == x1.shape[1] * world_size,
          f"{fn}: x2 should have H * world_size = {x1.shape[-1] * world_size} rows, but got {x2.shape[0]}.")
    n = x2.shape[1]
    check(bias is None or tuple(bias.shape) == (n,), f"{fn}: bias should have shape [{n}], but got "
          f"{list(bias.shape) if bias is not None else None}.")
    with torch.no_grad():
        permuted = _a2a_in(fn, x1, hcom, world_size, comm_mode)
        y = permuted.float() @ x2.float()
        if bias is not None:
            y = y + bias.float()
        return y.to(x1.dtype), (permuted if all2all_out_flag else None)


def npu_matmul_all_to_all(x1, x2, hcom, world_size, bias=None, all2all_axes=None, comm_mode=None):
    """AlltoAll((x1 @ x2 + bias) column blocks): (BS*W, H2/W)."""
    fn = "npu_matmul_all_to_all"
    _check_axes(fn, all2all_axes, [-1, -2])
    _check_2d(fn, "x1", x1)
    _check_2d(fn, "x2", x2)
    check(x1.dtype in _FLOATS and x2.dtype == x1.dtype, f"{fn}: x1 and x2 should be float16 / bfloat16 of the same "
          f"dtype, but got {x1.dtype} and {x2.dtype}.")
    check(x2.shape[0] == x1.shape[1], f"{fn}: the second dimension of x1 ({x1.shape[1]}) and the first of x2 "
          f"({x2.shape[0]}) should be equal.")
    h2 = x2.shape[1]
    check(bias is None or tuple(bias.shape) == (h2,), f"{fn}: bias should have shape [{h2}], but got "
          f"{list(bias.shape) if bias is not None else None}.")
    _check_comm_mode(fn, comm_mode)
    pg = _group(fn, "hcom", hcom)
    _check_world(fn, pg, "world_size", world_size)
    _check_device(fn, pg, "hcom", x1)
    check(h2 % world_size == 0, f"{fn}: the second dimension of x2 ({h2}) should be divisible by world_size "
          f"{world_size}.")
    with torch.no_grad():
        y = x1.float() @ x2.float()
        if bias is not None:
            y = y + bias.float()
        return _a2a_out(y.to(x1.dtype), pg, world_size)


def _a2a_quant_common(fn, x1_offset, x2_offset, common_scale, common_quant_mode, comm_quant_dtype, group_sizes,
                      **dtype_args):
    check(x1_offset is None and x2_offset is None, f"{fn}: x1_offset / x2_offset are reserved (the kernel supports "
          "none); pass None.")
    if common_scale is not None or common_quant_mode not in (None, 0) or comm_quant_dtype not in (None, -1):
        _unsupported(fn, "low-bit communication (common_scale / common_quant_mode / comm_quant_dtype)",
                     "the kernel documents it as reserved")
    check(group_sizes is None or all(g == 0 for g in group_sizes),
          f"{fn}: group_sizes {list(group_sizes or [])}: mx quantisation is not supported on vNPU.")
    _no_exotic_dtypes(fn, **dtype_args)


def _kc_scale(fn, name, scale, size):
    check(scale is not None, f"{fn}: {name} is required.")
    check(scale.dtype == torch.float32 and tuple(scale.shape) == (size,),
          f"{fn}: {name} should be float32 of shape [{size}], but got {scale.dtype} {list(scale.shape)}.")
    return scale.float()


def _kc_matmul(xq, x2, s1, s2, bias, bias_first):
    """K-C dequantised matmul: (xq @ x2 [+ bias]) * s1 * s2 [+ bias]."""
    y = _int_or_float_matmul(xq, x2)
    if bias is not None and bias_first:
        y = y + bias.float()
    y = y * s1.reshape(-1, 1) * s2.reshape(1, -1)
    if bias is not None and not bias_first:
        y = y + bias.float()
    return y


def npu_all_to_all_quant_matmul(x1, x2, hcom, world_size, *, all2all_out_flag=True, bias=None, x1_scale=None,
                                x2_scale=None, common_scale=None, x1_offset=None, x2_offset=None,
                                x1_quant_mode=None, x2_quant_mode=None, common_quant_mode=None, group_sizes=None,
                                all2all_axes=None, comm_quant_dtype=None, x1_quant_dtype=None, x1_dtype=None,
                                x2_dtype=None, x1_scale_dtype=None, x2_scale_dtype=None, output_scale_dtype=None,
                                comm_scale_dtype=None, y_dtype=None, comm_mode=None):
    """K-C dynamic quantisation: permuted = all-to-all of x1 as npu_all_to_all_matmul;
    each row (times x1_scale, a smooth scale, when given) quantised to x1_quant_dtype
    (float8_e5m2 by default; int8 for an int8 x2), then (q @ x2 + bias) * x1s * x2_scale
    (float8 x2) or q @ x2 * x1s * x2_scale + bias (int8 x2), output y_dtype (float32)."""
    fn = "npu_all_to_all_quant_matmul"
    _check_axes(fn, all2all_axes, [-2, -1])
    _a2a_quant_common(fn, x1_offset, x2_offset, common_scale, common_quant_mode, comm_quant_dtype, group_sizes,
                      x1_dtype=x1_dtype, x2_dtype=x2_dtype, x1_scale_dtype=x1_scale_dtype,
                      x2_scale_dtype=x2_scale_dtype, output_scale_dtype=output_scale_dtype,
                      comm_scale_dtype=comm_scale_dtype)
    check(x1_quant_mode in (None, 7), f"{fn}: x1_quant_mode {x1_quant_mode} is not supported on vNPU; only 7 "
          "(per-token dynamic quantisation).")
    check(x2_quant_mode in (None, 2), f"{fn}: x2_quant_mode {x2_quant_mode} is not supported on vNPU; only 2 "
          "(per-channel).")
    _check_2d(fn, "x1", x1)
    _check_2d(fn, "x2", x2)
    check(x1.dtype in (torch.float16, torch.bfloat16), f"{fn}: x1 should be float16 or bfloat16, but got "
          f"{x1.dtype}.")
    check(x2.dtype in (torch.int8,) + _FP8, f"{fn}: x2 should be int8, float8_e4m3fn or float8_e5m2, but got "
          f"{x2.dtype}.")
    check(x2.shape[0] == x1.shape[1] * world_size, f"{fn}: x2 should have H * world_size = "
          f"{x1.shape[1] * world_size} rows, but got {x2.shape[0]}.")
    n = x2.shape[1]
    s2 = _kc_scale(fn, "x2_scale", x2_scale, n)
    if x2.dtype == torch.int8:
        target = _dtype_arg(fn, "x1_quant_dtype", x1_quant_dtype, (torch.int8,)) or torch.int8
    else:
        target = _dtype_arg(fn, "x1_quant_dtype", x1_quant_dtype, _FP8) or torch.float8_e5m2
    out_dtype = _dtype_arg(fn, "y_dtype", y_dtype, _FLOATS) or torch.float32
    check(bias is None or tuple(bias.shape) == (n,), f"{fn}: bias should have shape [{n}], but got "
          f"{list(bias.shape) if bias is not None else None}.")
    if x1_scale is not None:
        hw = x1.shape[1] * world_size
        check(x1_scale.dtype == x1.dtype and tuple(x1_scale.shape) == (hw,),
              f"{fn}: x1_scale (the smooth scale) should be {x1.dtype} of shape [{hw}], but got {x1_scale.dtype} "
              f"{list(x1_scale.shape)}.")
    with torch.no_grad():
        permuted = _a2a_in(fn, x1, hcom, world_size, comm_mode)
        rows = permuted.float()
        if x1_scale is not None:
            rows = rows * x1_scale.float()
        q, s1 = _quant_rows(rows, target)
        y = _kc_matmul(q, x2, s1, s2, bias, bias_first=x2.dtype != torch.int8)
        return y.to(out_dtype), (permuted if all2all_out_flag else None)


def npu_quant_matmul_all_to_all(x1, x2, hcom, world_size, bias=None, x1_scale=None, x2_scale=None,
                                common_scale=None, x1_offset=None, x2_offset=None, x1_quant_mode=None,
                                x2_quant_mode=None, common_quant_mode=None, group_sizes=None, all2all_axes=None,
                                comm_quant_dtype=None, x1_dtype=None, x2_dtype=None, x1_scale_dtype=None,
                                x2_scale_dtype=None, output_scale_dtype=None, comm_scale_dtype=None, y_dtype=None,
                                comm_mode=None):
    """K-C quantisation: computeOut = x1 @ x2 * x1_scale * x2_scale + bias (int8) or
    (x1 @ x2 + bias) * x1_scale * x2_scale (float8), output y_dtype (float32), then
    the all-to-all of its column blocks as npu_matmul_all_to_all."""
    fn = "npu_quant_matmul_all_to_all"
    _check_axes(fn, all2all_axes, [-1, -2])
    _a2a_quant_common(fn, x1_offset, x2_offset, common_scale, common_quant_mode, comm_quant_dtype, group_sizes,
                      x1_dtype=x1_dtype, x2_dtype=x2_dtype, x1_scale_dtype=x1_scale_dtype,
                      x2_scale_dtype=x2_scale_dtype, output_scale_dtype=output_scale_dtype,
                      comm_scale_dtype=comm_scale_dtype)
    check(x1_quant_mode in (None, 3), f"{fn}: x1_quant_mode {x1_quant_mode} is not supported on vNPU; only 3 "
          "(per-token).")
    check(x2_quant_mode in (None, 2), f"{fn}: x2_quant_mode {x2_quant_mode} is not supported on vNPU; only 2 "
          "(per-channel).")
    _check_2d(fn, "x1", x1)
    _check_2d(fn, "x2", x2)
    check(x1.dtype in (torch.int8,) + _FP8 and x2.dtype in (torch.int8,) + _FP8
          and (x1.dtype == torch.int8) == (x2.dtype == torch.int8),
          f"{fn}: x1 and x2 should be both int8 or both float8, but got {x1.dtype} and {x2.dtype}.")
    check(x2.shape[0] == x1.shape[1], f"{fn}: the second dimension of x1 ({x1.shape[1]}) and the first of x2 "
          f"({x2.shape[0]}) should be equal.")
    bs, h2 = x1.shape[0], x2.shape[1]
    s1 = _kc_scale(fn, "x1_scale", x1_scale, bs)
    s2 = _kc_scale(fn, "x2_scale", x2_scale, h2)
    out_dtype = _dtype_arg(fn, "y_dtype", y_dtype, _FLOATS) or torch.float32
    check(bias is None or tuple(bias.shape) == (h2,), f"{fn}: bias should have shape [{h2}], but got "
          f"{list(bias.shape) if bias is not None else None}.")
    _check_comm_mode(fn, comm_mode)
    pg = _group(fn, "hcom", hcom)
    _check_world(fn, pg, "world_size", world_size)
    _check_device(fn, pg, "hcom", x1)
    check(h2 % world_size == 0, f"{fn}: the second dimension of x2 ({h2}) should be divisible by world_size "
          f"{world_size}.")
    with torch.no_grad():
        y = _kc_matmul(x1, x2, s1, s2, bias, bias_first=x1.dtype != torch.int8)
        return _a2a_out(y.to(out_dtype), pg, world_size)


# --- MoE: all-to-all-v + grouped matmul ----------------------------------------------------------

def _ep_counts(fn, gmm_weight, ep_world_size, send_counts, recv_counts, send_counts_tensor, recv_counts_tensor):
    check(gmm_weight.dim() == 3, f"{fn}: gmm_weight should be 3-dimensional (e, H, N), but got shape "
          f"{list(gmm_weight.shape)}.")
    check(send_counts_tensor is None and recv_counts_tensor is None,
          f"{fn}: send_counts_tensor / recv_counts_tensor are not supported (the kernel documents them as "
          "reserved); pass the counts as lists.")
    e = gmm_weight.shape[0]
    for name, counts in (("send_counts", send_counts), ("recv_counts", recv_counts)):
        check(len(counts) == e * ep_world_size, f"{fn}: {name} should have e * ep_world_size = "
              f"{e} * {ep_world_size} entries, but got {len(counts)}.")
        check(all(int(c) >= 0 for c in counts), f"{fn}: {name} should be non-negative, but got {list(counts)}.")
    return e, [int(c) for c in send_counts], [int(c) for c in recv_counts]


def _rank_major_to_expert_major(counts, world, e):
    """Row order: blocks (rank r, expert j) laid rank-major -> expert-major."""
    starts, pos = {}, 0
    for r in range(world):
        for j in range(e):
            starts[r, j] = pos
            pos += counts[r * e + j]
    return [i for j in range(e) for r in range(world) for i in range(starts[r, j], starts[r, j] + counts[r * e + j])]


def _expert_major_to_rank_major(counts, world, e):
    starts, pos = {}, 0
    for j in range(e):
        for r in range(world):
            starts[r, j] = pos
            pos += counts[r * e + j]
    return [i for r in range(world) for j in range(e) for i in range(starts[r, j], starts[r, j] + counts[r * e + j])]


def _take(x, order):
    return x.index_select(0, torch.tensor(order, dtype=torch.long, device=x.device))


def _expert_weights(w, transpose):
    return [w[j].t() if transpose else w[j] for j in range(w.shape[0])]


def _shared_mm(fn, mm_x, mm_weight, transpose):
    if mm_x is None and mm_weight is None:
        return None
    check(mm_x is not None and mm_weight is not None, f"{fn}: mm_x and mm_weight should be given together.")
    _check_2d(fn, "mm_x", mm_x)
    _check_2d(fn, "mm_weight", mm_weight)
    w = mm_weight.t() if transpose else mm_weight
    check(mm_x.shape[1] == w.shape[0], f"{fn}: mm_x of shape {list(mm_x.shape)} cannot multiply mm_weight of shape "
          f"{list(w.shape)}.")
    return w


def _gmm_float(x, weights, sizes):
    group_list = torch.tensor(sizes, dtype=torch.int64, device=x.device)
    return torch.ops.npu.npu_grouped_matmul([x], weights, group_list=group_list, group_list_type=1, split_item=3)[0]


def _float_gmm_setup(fn, a):
    """The argument checks and derived values npu_alltoallv_gmm and
    npu_gmm_alltoallv share; ``a`` is the op's arguments by name. Returns
    (experts per rank, send counts, receive counts, the expert weights, the
    shared expert's weight or None, the process group)."""
    gmm_x, gmm_weight, ep_world_size = a["gmm_x"], a["gmm_weight"], a["ep_world_size"]
    _check_2d(fn, "gmm_x", gmm_x)
    e, send, recv = _ep_counts(fn, gmm_weight, ep_world_size, a["send_counts"], a["recv_counts"],
                               a["send_counts_tensor"], a["recv_counts_tensor"])
    check(gmm_x.dtype in _FLOATS and gmm_weight.dtype == gmm_x.dtype,
          f"{fn}: gmm_x and gmm_weight should be float16 / bfloat16 of the same dtype, but got {gmm_x.dtype} and "
          f"{gmm_weight.dtype}.")
    check(sum(send) == gmm_x.shape[0], f"{fn}: send_counts add up to {sum(send)}, but gmm_x has "
          f"{gmm_x.shape[0]} rows.")
    weights = _expert_weights(gmm_weight, a["trans_gmm_weight"])
    check(weights[0].shape[0] == gmm_x.shape[1], f"{fn}: gmm_x has {gmm_x.shape[1]} columns but gmm_weight's "
          f"experts are {list(weights[0].shape)}{' (transposed)' if a['trans_gmm_weight'] else ''}.")
    mm_w = _shared_mm(fn, a["mm_x"], a["mm_weight"], a["trans_mm_weight"])
    _check_comm_mode(fn, a["comm_mode"])
    pg = _group(fn, "hcom", a["hcom"])
    _check_world(fn, pg, "ep_world_size", ep_world_size)
    _check_device(fn, pg, "hcom", gmm_x)
    return e, send, recv, weights, mm_w, pg


def npu_alltoallv_gmm(gmm_x, gmm_weight, hcom, ep_world_size, send_counts, recv_counts, *, send_counts_tensor=None,
                      recv_counts_tensor=None, mm_x=None, mm_weight=None, trans_gmm_weight=False,
                      trans_mm_weight=False, permute_out_flag=False, comm_mode=None):
    """permute_out = the rows received by all-to-all-v (send_counts[r*e+j]: rows for
    expert j of rank r; recv_counts[r*e+j]: rows from rank r for local expert j),
    reordered expert by expert; gmm_y = npu_grouped_matmul of them with gmm_weight;
    mm_y = mm_x @ mm_weight (the shared expert)."""
    fn = "npu_alltoallv_gmm"
    e, send, recv, weights, mm_w, pg = _float_gmm_setup(fn, locals())
    with torch.no_grad():
        in_splits = [sum(send[r * e:(r + 1) * e]) for r in range(ep_world_size)]
        out_splits = [sum(recv[r * e:(r + 1) * e]) for r in range(ep_world_size)]
        received = _all_to_all(gmm_x, pg, sum(recv), in_splits, out_splits)
        permuted = _take(received, _rank_major_to_expert_major(recv, ep_world_size, e))
        sizes = [sum(recv[r * e + j] for r in range(ep_world_size)) for j in range(e)]
        gmm_y = _gmm_float(permuted, weights, sizes)
        mm_y = mm_x @ mm_w if mm_w is not None else None
        return gmm_y, mm_y, (permuted if permute_out_flag else None)


def npu_gmm_alltoallv(gmm_x, gmm_weight, hcom, ep_world_size, send_counts, recv_counts, *, send_counts_tensor=None,
                      recv_counts_tensor=None, mm_x=None, mm_weight=None, trans_gmm_weight=False,
                      trans_mm_weight=False, comm_mode=None):
    """The way back: gmm_x holds the rows expert by expert (send_counts[r*e+j]: rows of
    local expert j for rank r); y = all-to-all-v of npu_grouped_matmul(gmm_x,
    gmm_weight) reordered rank by rank (recv_counts[r*e+j]: rows from expert j of
    rank r); mm_y = mm_x @ mm_weight."""
    fn = "npu_gmm_alltoallv"
    e, send, recv, weights, mm_w, pg = _float_gmm_setup(fn, locals())
    with torch.no_grad():
        sizes = [sum(send[r * e + j] for r in range(ep_world_size)) for j in range(e)]
        gmm_y = _gmm_float(gmm_x, weights, sizes)
        outgoing = _take(gmm_y, _expert_major_to_rank_major(send, ep_world_size, e))
        in_splits = [sum(send[r * e:(r + 1) * e]) for r in range(ep_world_size)]
        out_splits = [sum(recv[r * e:(r + 1) * e]) for r in range(ep_world_size)]
        y = _all_to_all(outgoing, pg, sum(recv), in_splits, out_splits)
        mm_y = mm_x @ mm_w if mm_w is not None else None
        return y, mm_y


def _pertensor(fn, name, scale):
    check(scale is not None, f"{fn}: {name} is required.")
    check(scale.dtype == torch.float32 and tuple(scale.shape) == (1,),
          f"{fn}: {name} should be float32 of shape [1] (per-tensor quantisation), but got {scale.dtype} "
          f"{list(scale.shape)}.")
    return scale.float()


def _quant_gmm_args(fn, gmm_x, gmm_weight, gmm_y_dtype, modes, group_size, dtype_args):
    _check_2d(fn, "gmm_x", gmm_x)
    for name, mode in modes.items():
        if mode == 6:
            _unsupported(fn, f"{name}=6 (mx quantisation)", "float8_e8m0 block scales are not emulated")
        check(mode in (None, 1), f"{fn}: {name} should be 1 (per-tensor), but got {mode}.")
    check(group_size is None or all(g == 0 for g in group_size),
          f"{fn}: group_size {list(group_size or [])} is only for mx quantisation, which is not supported on vNPU.")
    _no_exotic_dtypes(fn, **dtype_args)
    quant = (torch.int8,) + _FP8
    check(gmm_x.dtype in quant and gmm_weight.dtype in quant,
          f"{fn}: gmm_x and gmm_weight should be float8_e4m3fn / float8_e5m2 (or int8), but got {gmm_x.dtype} and "
          f"{gmm_weight.dtype}.")
    return _dtype_arg(fn, "gmm_y_dtype", gmm_y_dtype, (torch.float16, torch.bfloat16))


def _quant_shared(fn, mm_x, mm_weight, mm_x_scale, mm_weight_scale, mm_y_dtype):
    w = _shared_mm(fn, mm_x, mm_weight, False)
    if w is None:
        return None
    sx = _pertensor(fn, "mm_x_scale", mm_x_scale)
    sw = _pertensor(fn, "mm_weight_scale", mm_weight_scale)
    check(mm_y_dtype is not None, f"{fn}: mm_y_dtype is required with mm_x / mm_weight.")
    out = _dtype_arg(fn, "mm_y_dtype", mm_y_dtype, (torch.float16, torch.bfloat16))
    return lambda: (_int_or_float_matmul(mm_x, w) * sx * sw).to(out)


def _gmm_quant(x, weights, sizes, scale, out_dtype):
    parts = [_int_or_float_matmul(xi, wi) for xi, wi in zip(x[:sum(sizes)].split(sizes, 0), weights)]
    y = torch.cat(parts, 0) if parts else x.new_empty((0, weights[0].shape[1]), dtype=torch.float32)
    return (y * scale).to(out_dtype)


def _quant_gmm_setup(fn, a):
    """The argument checks and derived values the two quantised gmm / all-to-allv
    ops share; ``a`` is the op's arguments by name. Returns (out_dtype, experts
    per rank, send counts, receive counts, the per-tensor scale, the shared
    expert's closure or None, the process group)."""
    gmm_x, gmm_weight = a["gmm_x"], a["gmm_weight"]
    out_dtype = _quant_gmm_args(
        fn, gmm_x, gmm_weight, a["gmm_y_dtype"],
        {k: a[k] for k in ("gmm_x_quant_mode", "gmm_weight_quant_mode", "mm_x_quant_mode", "mm_weight_quant_mode")},
        a["group_size"],
        {k: a[k] for k in ("gmm_x_dtype", "gmm_weight_dtype", "gmm_x_scale_dtype", "gmm_weight_scale_dtype",
                           "mm_x_dtype", "mm_weight_dtype", "mm_x_scale_dtype", "mm_weight_scale_dtype")})
    e, send, recv = _ep_counts(fn, gmm_weight, a["ep_world_size"], a["send_counts"], a["recv_counts"],
                               a["send_counts_tensor"], a["recv_counts_tensor"])
    scale = _pertensor(fn, "gmm_x_scale", a["gmm_x_scale"]) * _pertensor(fn, "gmm_weight_scale", a["gmm_weight_scale"])
    check(sum(send) == gmm_x.shape[0], f"{fn}: send_counts add up to {sum(send)}, but gmm_x has "
          f"{gmm_x.shape[0]} rows.")
    check(gmm_weight.shape[1] == gmm_x.shape[1], f"{fn}: gmm_x has {gmm_x.shape[1]} columns but gmm_weight's "
          f"experts are {list(gmm_weight.shape[1:])}.")
    shared = _quant_shared(fn, a["mm_x"], a["mm_weight"], a["mm_x_scale"], a["mm_weight_scale"], a["mm_y_dtype"])
    _check_comm_mode(fn, a["comm_mode"])
    pg = _group(fn, "hcom", a["hcom"])
    _check_world(fn, pg, "ep_world_size", a["ep_world_size"])
    _check_device(fn, pg, "hcom", gmm_x)
    return out_dtype, e, send, recv, scale, shared, pg


def npu_alltoallv_quant_gmm(gmm_x, gmm_weight, gmm_x_scale, gmm_weight_scale, hcom, ep_world_size, send_counts,
                            recv_counts, gmm_y_dtype, *, send_counts_tensor=None, recv_counts_tensor=None, mm_x=None,
                            mm_weight=None, mm_x_scale=None, mm_weight_scale=None, gmm_x_quant_mode=None,
                            gmm_weight_quant_mode=None, mm_x_quant_mode=None, mm_weight_quant_mode=None,
                            permute_out_flag=False, group_size=None, gmm_x_dtype=None, gmm_weight_dtype=None,
                            gmm_x_scale_dtype=None, gmm_weight_scale_dtype=None, mm_x_dtype=None,
                            mm_weight_dtype=None, mm_x_scale_dtype=None, mm_weight_scale_dtype=None, mm_y_dtype=None,
                            comm_mode=None):
    """Per-tensor quantised npu_alltoallv_gmm: gmm_y = gmm_x_scale * gmm_weight_scale *
    (permute_out @ gmm_weight[j]) in gmm_y_dtype; mm_y likewise with the mm_* scales."""
    fn = "npu_alltoallv_quant_gmm"
    out_dtype, e, send, recv, scale, shared, pg = _quant_gmm_setup(fn, locals())
    with torch.no_grad():
        in_splits = [sum(send[r * e:(r + 1) * e]) for r in range(ep_world_size)]
        out_splits = [sum(recv[r * e:(r + 1) * e]) for r in range(ep_world_size)]
        received = _all_to_all(gmm_x, pg, sum(recv), in_splits, out_splits)
        permuted = _take(received, _rank_major_to_expert_major(recv, ep_world_size, e))
        sizes = [sum(recv[r * e + j] for r in range(ep_world_size)) for j in range(e)]
        gmm_y = _gmm_quant(permuted, _expert_weights(gmm_weight, False), sizes, scale, out_dtype)
        return gmm_y, (shared() if shared else None), (permuted if permute_out_flag else None)


def npu_quant_gmm_alltoallv(gmm_x, gmm_weight, gmm_x_scale, gmm_weight_scale, hcom, ep_world_size, send_counts,
                            recv_counts, gmm_y_dtype, *, send_counts_tensor=None, recv_counts_tensor=None, mm_x=None,
                            mm_weight=None, mm_x_scale=None, mm_weight_scale=None, comm_quant_scale=None,
                            gmm_x_quant_mode=None, gmm_weight_quant_mode=None, mm_x_quant_mode=None,
                            mm_weight_quant_mode=None, comm_quant_mode=None, group_size=None, gmm_x_dtype=None,
                            gmm_weight_dtype=None, gmm_x_scale_dtype=None, gmm_weight_scale_dtype=None,
                            mm_x_dtype=None, mm_weight_dtype=None, mm_x_scale_dtype=None, mm_weight_scale_dtype=None,
                            comm_quant_dtype=None, mm_y_dtype=None, comm_mode=None):
    """Per-tensor quantised npu_gmm_alltoallv: the grouped matmul dequantised by
    gmm_x_scale * gmm_weight_scale into gmm_y_dtype, then sent back."""
    fn = "npu_quant_gmm_alltoallv"
    if comm_quant_scale is not None or comm_quant_mode not in (None, 0) or comm_quant_dtype is not None:
        _unsupported(fn, "low-bit communication (comm_quant_scale / comm_quant_mode / comm_quant_dtype)",
                     "the rows travel in gmm_y_dtype")
    out_dtype, e, send, recv, scale, shared, pg = _quant_gmm_setup(fn, locals())
    with torch.no_grad():
        sizes = [sum(send[r * e + j] for r in range(ep_world_size)) for j in range(e)]
        gmm_y = _gmm_quant(gmm_x, _expert_weights(gmm_weight, False), sizes, scale, out_dtype)
        outgoing = _take(gmm_y, _expert_major_to_rank_major(send, ep_world_size, e))
        in_splits = [sum(send[r * e:(r + 1) * e]) for r in range(ep_world_size)]
        out_splits = [sum(recv[r * e:(r + 1) * e]) for r in range(ep_world_size)]
        y = _all_to_all(outgoing, pg, sum(recv), in_splits, out_splits)
        return y, (shared() if shared else None)


# --- MoE: distribute dispatch / combine ----------------------------------------------------------

class _Layout:
    """Where the experts of an EP group live (see the module docstring)."""

    def __init__(self, fn, world, rank, experts, shared_num, shared_ranks, shard_type, v2):
        check(0 <= rank < world, f"{fn}: ep_rank_id should be in [0, ep_world_size={world}), but got {rank}.")
        check(0 <= shared_ranks < world, f"{fn}: shared_expert_rank_num should be in [0, ep_world_size={world}), "
              f"but got {shared_ranks}.")
        check(shard_type in (0, 1), f"{fn}: expert_shard_type should be 0 (shared-expert ranks first) or 1, but "
              f"got {shard_type}.")
        if shared_ranks == 0:
            check(shared_num in (0, 1), f"{fn}: shared_expert_num {shared_num} needs shared_expert_rank_num > 0.")
            shared_num = 0
        elif v2:
            check(0 < shared_num <= 4 and shared_ranks % shared_num == 0,
                  f"{fn}: shared_expert_rank_num ({shared_ranks}) should be a positive multiple of "
                  f"shared_expert_num ({shared_num}, in [1, 4]).")
        else:
            check(shared_num == 1, f"{fn}: shared_expert_num should be 1, but got {shared_num}.")
        moe_ranks = world - shared_ranks
        check(experts >= 1 and experts % moe_ranks == 0,
              f"{fn}: moe_expert_num ({experts}) should be a positive multiple of ep_world_size - "
              f"shared_expert_rank_num = {moe_ranks}.")
        self.world, self.rank, self.experts = world, rank, experts
        self.shared_num, self.shared_ranks = shared_num, shared_ranks
        self.per_rank = experts // moe_ranks
        self.replicas = shared_ranks // shared_num if shared_num else 0
        self.shared_first = 0 if shard_type == 0 else moe_ranks
        self.moe_first = shared_ranks if shard_type == 0 else 0

    def is_shared(self, q):
        return self.shared_first <= q < self.shared_first + self.shared_ranks

    def local_experts(self, q):
        return 1 if self.is_shared(q) else self.per_rank

    def capacity(self, global_bs, k, v2):
        """A: the rows this rank's expand_x holds."""
        if self.is_shared(self.rank):
            if v2:
                return global_bs // self.world * -(-self.world // self.replicas)
            return global_bs // self.shared_ranks
        return global_bs * min(self.per_rank, k)


def _active(fn, mask, bs, k):
    """(pair_active[t][k], token_active[t]) from x_active_mask (None, (BS,) or (BS, K) bool)."""
    if mask is None:
        return [[True] * k for _ in range(bs)], [True] * bs
    check(mask.dtype == torch.bool, f"{fn}: x_active_mask should be bool, but got {mask.dtype}.")
    if mask.dim() == 1:
        check(mask.shape[0] == bs, f"{fn}: x_active_mask should have shape [{bs}] or [{bs}, {k}], but got "
              f"{list(mask.shape)}.")
        tokens = [bool(v) for v in mask.tolist()]
        return [[a] * k for a in tokens], tokens
    check(tuple(mask.shape) == (bs, k), f"{fn}: x_active_mask should have shape [{bs}] or [{bs}, {k}], but got "
          f"{list(mask.shape)}.")
    pairs = [[bool(v) for v in row] for row in mask.tolist()]
    return pairs, [any(row) for row in pairs]


def _route(fn, layout, expert_ids, mask, special):
    """Where this rank sends its tokens: per destination rank, the ordered rows
    [(local expert, token, pair t*K+k or -1 for a shared expert, scales row)], and
    expand_idx (per pair: its position among this rank's tokens for that expert)."""
    bs, k = expert_ids.shape
    ids = expert_ids.tolist()
    limit = layout.experts + special
    pairs_on, tokens_on = _active(fn, mask, bs, k)
    dest = [[] for _ in range(layout.world)]
    seen, expand_idx = {}, [-1] * (bs * k)
    shared_row0 = layout.shared_num
    for t in range(bs):
        for j in range(k):
            e = ids[t][j]
            check(0 <= e < limit, f"{fn}: expert_ids[{t}][{j}] = {e} is out of range [0, {limit}).")
            if not pairs_on[t][j] or e >= layout.experts:
                continue
            q = layout.moe_first + e // layout.per_rank
            local = e % layout.per_rank
            expand_idx[t * k + j] = seen.get((q, local), 0)
            seen[q, local] = expand_idx[t * k + j] + 1
            dest[q].append((local, t, t * k + j, shared_row0 + e))
        if layout.shared_num and tokens_on[t]:
            for s in range(layout.shared_num):
                q = layout.shared_first + s * layout.replicas + layout.rank % layout.replicas
                dest[q].append((0, t, -1, s))
    for rows in dest:
        rows.sort(key=lambda r: (r[0], r[1]))
    return dest, expand_idx


def _moe_common(fn, group_ep, ep_world_size, ep_rank_id, tp_world_size, comm_alg, elastic_info, t):
    check(tp_world_size in (0, 1) or tp_world_size == 2, f"{fn}: tp_world_size should be 0, 1 or 2, but got "
          f"{tp_world_size}.")
    if tp_world_size == 2:
        _unsupported(fn, "tp_world_size=2", "op-plugin documents the TP domain of the MoE dispatch / combine as "
                     "reserved; use tp_world_size 0 or 1")
    if elastic_info is not None:
        _unsupported(fn, "elastic_info", "elastic scaling is reserved in the kernel's documentation")
    check(comm_alg in _COMM_ALGS, f"{fn}: comm_alg should be one of {list(_COMM_ALGS)}, but got {comm_alg!r}.")
    pg = _group(fn, "group_ep", group_ep)
    _check_world(fn, pg, "ep_world_size", ep_world_size)
    check(ep_rank_id == pg.rank(), f"{fn}: ep_rank_id {ep_rank_id} should be this process's rank {pg.rank()} in "
          "the group of group_ep.")
    _check_device(fn, pg, "group_ep", t)
    return pg


def _dispatch(fn, v2, x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, scales, x_active_mask,
              expert_scales, tp_world_size, expert_shard_type, shared_expert_num, shared_expert_rank_num, quant_mode,
              global_bs, expert_token_nums_type, comm_alg="", elastic_info=None, special=0, y_dtype=None):
    _check_2d(fn, "x", x)
    _check_2d(fn, "expert_ids", expert_ids)
    bs, h = x.shape
    k = expert_ids.shape[1]
    check(expert_ids.shape[0] == bs, f"{fn}: expert_ids should have x's {bs} rows, but got shape "
          f"{list(expert_ids.shape)}.")
    check(expert_ids.dtype in (torch.int32, torch.int64), f"{fn}: expert_ids should be int32, but got "
          f"{expert_ids.dtype}.")
    check(expert_token_nums_type in (0, 1), f"{fn}: expert_token_nums_type should be 0 (prefix sums) or 1 "
          f"(counts), but got {expert_token_nums_type}.")
    check(quant_mode in (0, 2), f"{fn}: quant_mode {quant_mode} is not supported on vNPU; supported: 0 (none), 2 "
          "(dynamic per-token int8).")
    packed = x.dtype == torch.int32
    if packed:
        check(v2 and quant_mode == 0, f"{fn}: int32 x (packed int4) is passed through with quant_mode 0 by "
              "npu_moe_distribute_dispatch_v2 only.")
        check(scales is not None and scales.dtype == torch.float32 and tuple(scales.shape) == (bs,),
              f"{fn}: int32 x needs scales: float32 of shape [{bs}] (one per token, sent along), but got "
              f"{None if scales is None else (scales.dtype, list(scales.shape))}.")
    else:
        check(x.dtype in _FLOATS, f"{fn}: x should be float16 or bfloat16, but got {x.dtype}.")
    layout = _Layout(fn, ep_world_size, ep_rank_id, moe_expert_num, shared_expert_num, shared_expert_rank_num,
                     expert_shard_type, v2)
    if scales is not None and not packed:
        check(quant_mode == 2, f"{fn}: scales (smooth scales per expert) are only used with quant_mode 2, but "
              f"quant_mode is {quant_mode}.")
        rows = moe_expert_num + layout.shared_num
        check(scales.dtype == torch.float32 and tuple(scales.shape) == (rows, h),
              f"{fn}: scales should be float32 of shape [{rows}, {h}] ((shared +) moe experts, H), but got "
              f"{scales.dtype} {list(scales.shape)}.")
    if expert_scales is not None:
        check(expert_scales.dtype == torch.float32 and tuple(expert_scales.shape) == (bs, k),
              f"{fn}: expert_scales should be float32 of shape [{bs}, {k}], but got {expert_scales.dtype} "
              f"{list(expert_scales.shape)}.")
    out_dtype = torch.int8 if quant_mode == 2 else x.dtype
    if y_dtype is not None:
        wanted = _INT_DTYPES.get(y_dtype)
        check(wanted == out_dtype, f"{fn}: y_dtype {_dtypes.NAMES.get(y_dtype, wanted or y_dtype)} is not supported "
              f"on vNPU with quant_mode {quant_mode}; the output is {out_dtype}.")
    pg = _moe_common(fn, group_ep, ep_world_size, ep_rank_id, tp_world_size, comm_alg, elastic_info, x)
    global_bs_real = global_bs if global_bs else bs * ep_world_size
    a = layout.capacity(global_bs_real, k, v2)
    local = layout.local_experts(ep_rank_id)
    width = max(layout.per_rank, 1)
    dev = x.device
    with torch.no_grad():
        dest, expand_idx = _route(fn, layout, expert_ids, x_active_mask, special)
        order = [row for rows in dest for row in rows]
        tokens = torch.tensor([r[1] for r in order], dtype=torch.long, device=dev)
        counts = [[0] * width for _ in range(ep_world_size)]
        for q, rows in enumerate(dest):
            for r in rows:
                counts[q][r[0]] += 1
        # Every rank learns every rank's counts, so that all of them see an overflow and raise together.
        counts = torch.tensor(counts, dtype=torch.int64, device=dev).reshape(1, -1)
        table = _all_gather(counts, pg).reshape(ep_world_size, ep_world_size, width).tolist()  # [src][dst][l]
        for q in range(ep_world_size):
            n_q = sum(sum(table[src][q]) for src in range(ep_world_size))
            cap = _Layout(fn, ep_world_size, q, moe_expert_num, shared_expert_num, shared_expert_rank_num,
                          expert_shard_type, v2).capacity(global_bs_real, k, v2)
            check(n_q <= cap, f"{fn}: rank {q} of the EP group receives {n_q} rows but its expand_x holds A = {cap} "
                  f"(global_bs {global_bs}); pass global_bs = max BS over the ranks * ep_world_size.")
        got = [table[src][ep_rank_id] for src in range(ep_world_size)]  # got[src][l]: rows from src for expert l
        in_splits = [len(rows) for rows in dest]
        out_splits = [sum(row[:local]) for row in got]
        n = sum(out_splits)
        # Received rows come source by source, expert by expert inside; lay them out expert-major.
        start, pos = {}, 0
        for src in range(ep_world_size):
            for l in range(local):
                start[src, l] = pos
                pos += got[src][l]
        regroup = [i for l in range(local) for src in range(ep_world_size)
                   for i in range(start[src, l], start[src, l] + got[src][l])]

        def exchange(rows_out):
            return _take(_all_to_all(rows_out, pg, n, in_splits, out_splits), regroup)

        sent = x.index_select(0, tokens)
        dynamic = x.new_zeros((a,), dtype=torch.float32)
        if quant_mode == 2:
            x32 = sent.float()
            if scales is not None:
                x32 = x32 * scales.index_select(0, torch.tensor([r[3] for r in order], dtype=torch.long, device=dev))
            amax = x32.abs().amax(-1, keepdim=True)
            value = 127.0 / amax
            sent = torch.where(amax > 0, x32 * value, 0.0).round().clamp(-128, 127).to(torch.int8)
            dynamic[:n] = exchange(torch.where(amax > 0, 1.0 / value, 0.0).squeeze(-1))
        elif packed:
            dynamic[:n] = exchange(scales.index_select(0, tokens))
        expand_x = x.new_zeros((a, h), dtype=out_dtype)
        expand_x[:n] = exchange(sent)
        expand_scales = x.new_empty((0,), dtype=torch.float32)
        recv_len = ep_world_size * local
        if expert_scales is not None:
            # As on Atlas A2 / A3: room for the hierarchical combine's bookkeeping after the counts.
            recv_len += global_bs_real * 2 * k * (ep_world_size // 8)
            pair = torch.tensor([max(r[2], 0) for r in order], dtype=torch.long, device=dev)
            shared_rows = torch.tensor([r[2] < 0 for r in order], dtype=torch.bool, device=dev)
            sent_w = torch.where(shared_rows, 1.0, expert_scales.reshape(-1).index_select(0, pair))
            expand_scales = x.new_zeros((a,), dtype=torch.float32)
            expand_scales[:n] = exchange(sent_w)
        per_expert = [sum(got[src][l] for src in range(ep_world_size)) for l in range(local)]
        prefix = torch.tensor([got[src][l] for l in range(local) for src in range(ep_world_size)],
                              dtype=torch.int64).cumsum(0)
        ep_recv_counts = torch.zeros(recv_len, dtype=torch.int32)
        ep_recv_counts[:prefix.numel()] = prefix.to(torch.int32)
        token_nums = torch.tensor(per_expert, dtype=torch.int64)
        if expert_token_nums_type == 0:
            token_nums = token_nums.cumsum(0)
        idx_len = max(bs * k, a * 128) if v2 else bs * k
        idx = torch.zeros(idx_len, dtype=torch.int32)
        idx[:bs * k] = torch.tensor(expand_idx, dtype=torch.int32)
        tp_recv = torch.full((tp_world_size,), n, dtype=torch.int32)
        return (expand_x, dynamic, idx.to(dev), token_nums.to(dev), ep_recv_counts.to(dev), tp_recv.to(dev),
                expand_scales)


def npu_moe_distribute_dispatch(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, scales=None,
                                x_active_mask=None, expert_scales=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, quant_mode=0,
                                global_bs=0, expert_token_nums_type=1):
    """(expand_x, dynamic_scales, expand_idx, expert_token_nums, ep_recv_counts,
    tp_recv_counts, expand_scales): this rank's tokens sent to their experts'
    ranks (quant_mode 2: per-row int8 after the expert's smooth scales)."""
    return _dispatch("npu_moe_distribute_dispatch", False, x, expert_ids, group_ep, ep_world_size, ep_rank_id,
                     moe_expert_num, scales, x_active_mask, expert_scales, tp_world_size, expert_shard_type,
                     shared_expert_num, shared_expert_rank_num, quant_mode, global_bs, expert_token_nums_type)


def npu_moe_distribute_dispatch_v2(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *,
                                   scales=None, x_active_mask=None, expert_scales=None, elastic_info=None,
                                   performance_info=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                   expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, quant_mode=0,
                                   global_bs=0, expert_token_nums_type=1, comm_alg="", zero_expert_num=0,
                                   copy_expert_num=0, const_expert_num=0, y_dtype=None, x_dtype=None,
                                   scales_dtype=None):
    """As npu_moe_distribute_dispatch; the third output is assist_info_for_combine,
    expert ids past moe_expert_num name the zero / copy / const experts (not sent:
    the combine computes them), and int32 x (packed int4) travels with its per-token
    scales."""
    fn = "npu_moe_distribute_dispatch_v2"
    _no_exotic_dtypes(fn, x_dtype=x_dtype, scales_dtype=scales_dtype)
    special = zero_expert_num + copy_expert_num + const_expert_num
    check(min(zero_expert_num, copy_expert_num, const_expert_num) >= 0,
          f"{fn}: zero_expert_num / copy_expert_num / const_expert_num should be non-negative.")
    return _dispatch(fn, True, x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, scales,
                     x_active_mask, expert_scales, tp_world_size, expert_shard_type, shared_expert_num,
                     shared_expert_rank_num, quant_mode, global_bs, expert_token_nums_type, comm_alg, elastic_info,
                     special, y_dtype)


def _combine(fn, v2, expand_x, expert_ids, assist, ep_send_counts, expert_scales, group_ep, ep_world_size,
             ep_rank_id, moe_expert_num, x_active_mask, expand_scales, shared_expert_x, tp_world_size,
             expert_shard_type, shared_expert_num, shared_expert_rank_num, global_bs, comm_quant_mode, comm_alg="",
             elastic_info=None, ori_x=None, alpha_1=None, alpha_2=None, const_v=None, zero_num=0, copy_num=0,
             const_num=0):
    _check_2d(fn, "expand_x", expand_x)
    _check_2d(fn, "expert_ids", expert_ids)
    a, h = expand_x.shape
    bs, k = expert_ids.shape
    check(expand_x.dtype in _FLOATS, f"{fn}: expand_x should be float16 or bfloat16, but got {expand_x.dtype}.")
    check(expert_ids.dtype in (torch.int32, torch.int64), f"{fn}: expert_ids should be int32, but got "
          f"{expert_ids.dtype}.")
    check(expert_scales.dtype == torch.float32 and tuple(expert_scales.shape) == (bs, k),
          f"{fn}: expert_scales should be float32 of shape [{bs}, {k}], but got {expert_scales.dtype} "
          f"{list(expert_scales.shape)}.")
    check(assist.dim() == 1 and assist.numel() >= bs * k,
          f"{fn}: the expand_idx / assist_info_for_combine of the dispatch should be 1-D with at least BS * K = "
          f"{bs * k} entries, but got shape {list(assist.shape)}.")
    check(ep_send_counts.dim() == 1, f"{fn}: ep_send_counts should be 1-D (the dispatch's ep_recv_counts), but got "
          f"shape {list(ep_send_counts.shape)}.")
    if comm_quant_mode != 0:
        _unsupported(fn, f"comm_quant_mode={comm_quant_mode}", "int8 communication of the expert outputs is not "
                     "emulated; the rows travel in expand_x's dtype")
    if expand_scales is not None:
        check(tuple(expand_scales.shape) == (a,), f"{fn}: expand_scales should have shape [{a}], but got "
              f"{list(expand_scales.shape)}.")
    if shared_expert_x is not None:
        check(shared_expert_x.dim() in (2, 3) and shared_expert_x.numel() == bs * h
              and shared_expert_x.shape[-1] == h and shared_expert_x.dtype == expand_x.dtype,
              f"{fn}: shared_expert_x should be {expand_x.dtype} of shape [{bs}, {h}] (or 3-D with BS tokens), but got "
              f"{shared_expert_x.dtype} {list(shared_expert_x.shape)}.")
    for name, num in (("zero_expert_num", zero_num), ("copy_expert_num", copy_num),
                      ("const_expert_num", const_num)):
        check(num >= 0, f"{fn}: {name} should be non-negative, but got {num}.")
    if copy_num or const_num:
        check(ori_x is not None and tuple(ori_x.shape) == (bs, h) and ori_x.dtype == expand_x.dtype,
              f"{fn}: copy / const experts need ori_x: {expand_x.dtype} of shape [{bs}, {h}].")
    if const_num:
        for name, p in (("const_expert_alpha_1", alpha_1), ("const_expert_alpha_2", alpha_2),
                        ("const_expert_v", const_v)):
            check(p is not None and tuple(p.shape) == (const_num, h),
                  f"{fn}: const experts need {name} of shape [{const_num}, {h}], but got "
                  f"{None if p is None else list(p.shape)}.")
    layout = _Layout(fn, ep_world_size, ep_rank_id, moe_expert_num, shared_expert_num, shared_expert_rank_num,
                     expert_shard_type, v2)
    pg = _moe_common(fn, group_ep, ep_world_size, ep_rank_id, tp_world_size, comm_alg, elastic_info, expand_x)
    local = layout.local_experts(ep_rank_id)
    check(ep_send_counts.numel() >= ep_world_size * local,
          f"{fn}: ep_send_counts should have at least ep_world_size * local experts = {ep_world_size * local} "
          f"entries, but got {ep_send_counts.numel()}.")
    dev = expand_x.device
    with torch.no_grad():
        dest, _ = _route(fn, layout, expert_ids, x_active_mask, zero_num + copy_num + const_num)
        prefix = ep_send_counts[:ep_world_size * local].to(torch.int64).tolist()
        blocks = [b - p for p, b in zip([0] + prefix, prefix)]  # (expert l, source src), expert-major
        check(all(b >= 0 for b in blocks) and (not prefix or prefix[-1] <= a),
              f"{fn}: ep_send_counts {prefix} are not the dispatch's prefix sums for expand_x of {a} rows.")
        start = {}
        for i, b in enumerate(blocks):
            start[i // ep_world_size, i % ep_world_size] = sum(blocks[:i])
        back_order = [i for src in range(ep_world_size) for l in range(local)
                      for i in range(start[l, src], start[l, src] + blocks[l * ep_world_size + src])]
        in_splits = [sum(blocks[l * ep_world_size + src] for l in range(local)) for src in range(ep_world_size)]
        out_splits = [len(rows) for rows in dest]
        back = _all_to_all(_take(expand_x, back_order), pg, sum(out_splits), in_splits, out_splits)
        order = [row for rows in dest for row in rows]
        tokens = torch.tensor([r[1] for r in order], dtype=torch.long, device=dev)
        pair = torch.tensor([max(r[2], 0) for r in order], dtype=torch.long, device=dev)
        shared_rows = torch.tensor([r[2] < 0 for r in order], dtype=torch.bool, device=dev)
        flat_scales = expert_scales.reshape(-1).float()
        weight = torch.where(shared_rows, 1.0, flat_scales.index_select(0, pair))
        out = torch.zeros(bs, h, dtype=torch.float32, device=dev)
        out.index_add_(0, tokens, back.float() * weight.unsqueeze(-1))
        if zero_num + copy_num + const_num:
            ids = expert_ids.to(torch.int64)
            pairs_on, _ = _active(fn, x_active_mask, bs, k)
            on = torch.tensor(pairs_on, dtype=torch.bool, device=dev).reshape(bs, k)
            first_copy = moe_expert_num + zero_num
            first_const = first_copy + copy_num
            w = expert_scales.float() * on
            if copy_num:
                is_copy = (ids >= first_copy) & (ids < first_const)
                out += (w * is_copy).sum(-1, keepdim=True) * ori_x.float()
            if const_num:
                is_const = ids >= first_const
                c = (ids - first_const).clamp(0, const_num - 1)
                value = (alpha_1.float()[c] * ori_x.float().unsqueeze(1) + alpha_2.float()[c] * const_v.float()[c])
                out += ((w * is_const).unsqueeze(-1) * value).sum(1)
        if shared_expert_x is not None:
            out += shared_expert_x.reshape(bs, h).float()
        return out.to(expand_x.dtype)


def npu_moe_distribute_combine(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, group_ep,
                               ep_world_size, ep_rank_id, moe_expert_num, *, tp_send_counts=None, x_active_mask=None,
                               activation_scale=None, weight_scale=None, group_list=None, expand_scales=None,
                               shared_expert_x=None, group_tp="", tp_world_size=0, tp_rank_id=0, expert_shard_type=0,
                               shared_expert_num=1, shared_expert_rank_num=0, global_bs=0, out_dtype=0,
                               comm_quant_mode=0, group_list_type=0):
    """(BS, H): the expert outputs sent back along the dispatch's path and summed per
    token, weighted by expert_scales (shared experts unweighted)."""
    return _combine("npu_moe_distribute_combine", False, expand_x, expert_ids, expand_idx, ep_send_counts,
                    expert_scales, group_ep, ep_world_size, ep_rank_id, moe_expert_num, x_active_mask, expand_scales,
                    shared_expert_x, tp_world_size, expert_shard_type, shared_expert_num, shared_expert_rank_num,
                    global_bs, comm_quant_mode)


def npu_moe_distribute_combine_v2(expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales,
                                  group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, tp_send_counts=None,
                                  x_active_mask=None, expand_scales=None, shared_expert_x=None, elastic_info=None,
                                  ori_x=None, const_expert_alpha_1=None, const_expert_alpha_2=None,
                                  const_expert_v=None, performance_info=None, group_tp="", tp_world_size=0,
                                  tp_rank_id=0, expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0,
                                  global_bs=0, comm_quant_mode=0, comm_alg="", zero_expert_num=0, copy_expert_num=0,
                                  const_expert_num=0):
    """As npu_moe_distribute_combine, plus shared_expert_x and the special experts:
    zero (0), copy (ori_x), const (alpha_1 * ori_x + alpha_2 * v), weighted by
    expert_scales."""
    return _combine("npu_moe_distribute_combine_v2", True, expand_x, expert_ids, assist_info_for_combine,
                    ep_send_counts, expert_scales, group_ep, ep_world_size, ep_rank_id, moe_expert_num, x_active_mask,
                    expand_scales, shared_expert_x, tp_world_size, expert_shard_type, shared_expert_num,
                    shared_expert_rank_num, global_bs, comm_quant_mode, comm_alg, elastic_info, ori_x,
                    const_expert_alpha_1, const_expert_alpha_2, const_expert_v, zero_expert_num, copy_expert_num,
                    const_expert_num)


def npu_moe_distribute_combine_add_rms_norm(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales,
                                            residual_x, gamma, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *,
                                            tp_send_counts=None, x_active_mask=None, activation_scale=None,
                                            weight_scale=None, group_list=None, expand_scales=None,
                                            shared_expert_x=None, elastic_info=None, ori_x=None,
                                            const_expert_alpha_1=None, const_expert_alpha_2=None,
                                            const_expert_v=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                            expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0,
                                            global_bs=0, out_dtype=0, comm_quant_mode=0, group_list_type=0,
                                            comm_alg="", norm_eps=1e-06, zero_expert_num=0, copy_expert_num=0,
                                            const_expert_num=0):
    """(y, rstd, x): x = combine_v2(...) (rounded to expand_x's dtype) + residual_x,
    rstd = 1 / sqrt(mean(x^2) + norm_eps), y = x * rstd * gamma; x and y (BS, 1, H) in
    residual_x's dtype, rstd (BS, 1, 1) float32."""
    fn = "npu_moe_distribute_combine_add_rms_norm"
    bs, h = expert_ids.shape[0], expand_x.shape[-1]
    check(tuple(residual_x.shape) == (bs, 1, h), f"{fn}: residual_x should have shape [{bs}, 1, {h}], but got "
          f"{list(residual_x.shape)}.")
    check(tuple(gamma.shape) == (h,), f"{fn}: gamma should have shape [{h}], but got {list(gamma.shape)}.")
    combined = _combine(fn, True, expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, group_ep,
                        ep_world_size, ep_rank_id, moe_expert_num, x_active_mask, expand_scales, shared_expert_x,
                        tp_world_size, expert_shard_type, shared_expert_num, shared_expert_rank_num, global_bs,
                        comm_quant_mode, comm_alg, elastic_info, ori_x, const_expert_alpha_1, const_expert_alpha_2,
                        const_expert_v, zero_expert_num, copy_expert_num, const_expert_num)
    with torch.no_grad():
        x = combined.float().unsqueeze(1) + residual_x.float()
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm_eps)
        y = x * rstd * gamma.float()
        return y.to(residual_x.dtype), rstd, x.to(residual_x.dtype)


def _npu_distribute_barrier(x_ref, group, world_size, *, time_out=None, elastic_info=None):
    """A barrier of the group queued on the stream: every rank's later work waits for
    all ranks to reach it. Returns x_ref's values (a new tensor)."""
    fn = "_npu_distribute_barrier"
    if elastic_info is not None:
        _unsupported(fn, "elastic_info", "elastic scaling is reserved in the kernel's documentation")
    pg = _group(fn, "group", group)
    _check_world(fn, pg, "world_size", world_size)
    _check_device(fn, pg, "group", x_ref)
    with torch.no_grad():
        _all_reduce(torch.zeros(1, dtype=torch.int32, device=x_ref.device), pg)
        return x_ref.clone()


define("npu_all_gather_base_mm(Tensor self, Tensor x2, str hcom, int world_size, *, Tensor? bias=None, "
       "Tensor? x1_scale=None, Tensor? x2_scale=None, int gather_index=0, bool gather_output=True, int comm_turn=0, "
       "ScalarType? output_dtype=None, str? comm_mode=None) -> (Tensor, Tensor)", npu_all_gather_base_mm)
define("npu_mm_reduce_scatter_base(Tensor self, Tensor x2, str hcom, int world_size, *, str reduce_op='sum', "
       "Tensor? bias=None, Tensor? x1_scale=None, Tensor? x2_scale=None, int comm_turn=0, "
       "ScalarType? output_dtype=None, str? comm_mode=None) -> Tensor", npu_mm_reduce_scatter_base)
define("npu_mm_all_reduce_base(Tensor x1, Tensor x2, str hcom, *, str reduce_op='sum', Tensor? bias=None, "
       "Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, Tensor? x3=None, Tensor? dequant_scale=None, "
       "Tensor? pertoken_scale=None, Tensor? comm_quant_scale_1=None, Tensor? comm_quant_scale_2=None, "
       "int antiquant_group_size=0, int comm_turn=0, int[]? group_sizes=None, int? y_dtype=None, int? x1_dtype=None, "
       "int? x2_dtype=None, int? dequant_scale_dtype=None, int? pertoken_scale_dtype=None, int comm_quant_mode=0, "
       "str? comm_mode=None) -> Tensor", npu_mm_all_reduce_base)
define("npu_all_gather_quant_mm(Tensor self, Tensor x2, str hcom, int world_size, *, Tensor? bias=None, "
       "Tensor? x1_scale=None, Tensor? x2_scale=None, Tensor? quant_scale=None, int block_size=0, int gather_index=0, "
       "bool gather_output=True, int comm_turn=0, int[]? group_sizes=None, bool amax_output=False, int? y_dtype=None, "
       "int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None, "
       "str? comm_mode=None) -> (Tensor, Tensor, Tensor)", npu_all_gather_quant_mm)
define("npu_quant_mm_reduce_scatter(Tensor self, Tensor x2, str hcom, int world_size, *, str reduce_op='sum', "
       "Tensor? bias=None, Tensor? x1_scale=None, Tensor? x2_scale=None, Tensor? quant_scale=None, int block_size=0, "
       "int comm_turn=0, int[]? group_sizes=None, bool amax_output=False, int? y_dtype=None, int? x1_dtype=None, "
       "int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None, str? comm_mode=None) "
       "-> (Tensor, Tensor)", npu_quant_mm_reduce_scatter)
define("npu_all_to_all_matmul(Tensor x1, Tensor x2, str hcom, int world_size, Tensor? bias=None, "
       "int[]? all2all_axes=None, bool all2all_out_flag=True, str? comm_mode=None) -> (Tensor, Tensor)",
       npu_all_to_all_matmul)
define("npu_matmul_all_to_all(Tensor x1, Tensor x2, str hcom, int world_size, Tensor? bias=None, "
       "int[]? all2all_axes=None, str? comm_mode=None) -> Tensor", npu_matmul_all_to_all)
define("npu_all_to_all_quant_matmul(Tensor x1, Tensor x2, str hcom, int world_size, *, bool all2all_out_flag=True, "
       "Tensor? bias=None, Tensor? x1_scale=None, Tensor? x2_scale=None, Tensor? common_scale=None, "
       "Tensor? x1_offset=None, Tensor? x2_offset=None, int? x1_quant_mode=None, int? x2_quant_mode=None, "
       "int? common_quant_mode=None, int[]? group_sizes=None, int[]? all2all_axes=None, int? comm_quant_dtype=None, "
       "int? x1_quant_dtype=None, int? x1_dtype=None, int? x2_dtype=None, int? x1_scale_dtype=None, "
       "int? x2_scale_dtype=None, int? output_scale_dtype=None, int? comm_scale_dtype=None, int? y_dtype=None, "
       "str? comm_mode=None) -> (Tensor, Tensor)", npu_all_to_all_quant_matmul)
define("npu_quant_matmul_all_to_all(Tensor x1, Tensor x2, str hcom, int world_size, Tensor? bias=None, "
       "Tensor? x1_scale=None, Tensor? x2_scale=None, Tensor? common_scale=None, Tensor? x1_offset=None, "
       "Tensor? x2_offset=None, int? x1_quant_mode=None, int? x2_quant_mode=None, int? common_quant_mode=None, "
       "int[]? group_sizes=None, int[]? all2all_axes=None, int? comm_quant_dtype=None, int? x1_dtype=None, "
       "int? x2_dtype=None, int? x1_scale_dtype=None, int? x2_scale_dtype=None, int? output_scale_dtype=None, "
       "int? comm_scale_dtype=None, int? y_dtype=None, str? comm_mode=None) -> Tensor", npu_quant_matmul_all_to_all)
define("npu_alltoallv_gmm(Tensor gmm_x, Tensor gmm_weight, str hcom, int ep_world_size, int[] send_counts, "
       "int[] recv_counts, *, Tensor? send_counts_tensor=None, Tensor? recv_counts_tensor=None, Tensor? mm_x=None, "
       "Tensor? mm_weight=None, bool trans_gmm_weight=False, bool trans_mm_weight=False, bool permute_out_flag=False, "
       "str? comm_mode=None) -> (Tensor, Tensor, Tensor)", npu_alltoallv_gmm)
define("npu_gmm_alltoallv(Tensor gmm_x, Tensor gmm_weight, str hcom, int ep_world_size, int[] send_counts, "
       "int[] recv_counts, *, Tensor? send_counts_tensor=None, Tensor? recv_counts_tensor=None, Tensor? mm_x=None, "
       "Tensor? mm_weight=None, bool trans_gmm_weight=False, bool trans_mm_weight=False, str? comm_mode=None) "
       "-> (Tensor, Tensor)", npu_gmm_alltoallv)
define("npu_alltoallv_quant_gmm(Tensor gmm_x, Tensor gmm_weight, Tensor gmm_x_scale, Tensor gmm_weight_scale, "
       "str hcom, int ep_world_size, int[] send_counts, int[] recv_counts, int gmm_y_dtype, *, "
       "Tensor? send_counts_tensor=None, Tensor? recv_counts_tensor=None, Tensor? mm_x=None, Tensor? mm_weight=None, "
       "Tensor? mm_x_scale=None, Tensor? mm_weight_scale=None, int? gmm_x_quant_mode=None, "
       "int? gmm_weight_quant_mode=None, int? mm_x_quant_mode=None, int? mm_weight_quant_mode=None, "
       "bool permute_out_flag=False, int[]? group_size=None, int? gmm_x_dtype=None, int? gmm_weight_dtype=None, "
       "int? gmm_x_scale_dtype=None, int? gmm_weight_scale_dtype=None, int? mm_x_dtype=None, "
       "int? mm_weight_dtype=None, int? mm_x_scale_dtype=None, int? mm_weight_scale_dtype=None, "
       "int? mm_y_dtype=None, str? comm_mode=None) -> (Tensor, Tensor, Tensor)", npu_alltoallv_quant_gmm)
define("npu_quant_gmm_alltoallv(Tensor gmm_x, Tensor gmm_weight, Tensor gmm_x_scale, Tensor gmm_weight_scale, "
       "str hcom, int ep_world_size, int[] send_counts, int[] recv_counts, int gmm_y_dtype, *, "
       "Tensor? send_counts_tensor=None, Tensor? recv_counts_tensor=None, Tensor? mm_x=None, Tensor? mm_weight=None, "
       "Tensor? mm_x_scale=None, Tensor? mm_weight_scale=None, Tensor? comm_quant_scale=None, "
       "int? gmm_x_quant_mode=None, int? gmm_weight_quant_mode=None, int? mm_x_quant_mode=None, "
       "int? mm_weight_quant_mode=None, int? comm_quant_mode=None, int[]? group_size=None, int? gmm_x_dtype=None, "
       "int? gmm_weight_dtype=None, int? gmm_x_scale_dtype=None, int? gmm_weight_scale_dtype=None, "
       "int? mm_x_dtype=None, int? mm_weight_dtype=None, int? mm_x_scale_dtype=None, int? mm_weight_scale_dtype=None, "
       "int? comm_quant_dtype=None, int? mm_y_dtype=None, str? comm_mode=None) -> (Tensor, Tensor)",
       npu_quant_gmm_alltoallv)
define("npu_moe_distribute_dispatch(Tensor x, Tensor expert_ids, str group_ep, int ep_world_size, int ep_rank_id, "
       "int moe_expert_num, *, Tensor? scales=None, Tensor? x_active_mask=None, Tensor? expert_scales=None, "
       "str group_tp=\"\", int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, "
       "int shared_expert_rank_num=0, int quant_mode=0, int global_bs=0, int expert_token_nums_type=1) "
       "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", npu_moe_distribute_dispatch)
define("npu_moe_distribute_dispatch_v2(Tensor x, Tensor expert_ids, str group_ep, int ep_world_size, "
       "int ep_rank_id, int moe_expert_num, *, Tensor? scales=None, Tensor? x_active_mask=None, "
       "Tensor? expert_scales=None, Tensor? elastic_info=None, Tensor? performance_info=None, str group_tp=\"\", "
       "int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, "
       "int shared_expert_rank_num=0, int quant_mode=0, int global_bs=0, int expert_token_nums_type=1, "
       "str comm_alg=\"\", int zero_expert_num=0, int copy_expert_num=0, int const_expert_num=0, "
       "int? y_dtype=None, int? x_dtype=None, int? scales_dtype=None) "
       "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", npu_moe_distribute_dispatch_v2)
define("npu_moe_distribute_combine(Tensor expand_x, Tensor expert_ids, Tensor expand_idx, Tensor ep_send_counts, "
       "Tensor expert_scales, str group_ep, int ep_world_size, int ep_rank_id, int moe_expert_num, *, "
       "Tensor? tp_send_counts=None, Tensor? x_active_mask=None, Tensor? activation_scale=None, "
       "Tensor? weight_scale=None, Tensor? group_list=None, Tensor? expand_scales=None, Tensor? shared_expert_x=None, "
       "str group_tp=\"\", int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, "
       "int shared_expert_rank_num=0, int global_bs=0, int out_dtype=0, int comm_quant_mode=0, "
       "int group_list_type=0) -> Tensor", npu_moe_distribute_combine)
define("npu_moe_distribute_combine_v2(Tensor expand_x, Tensor expert_ids, Tensor assist_info_for_combine, "
       "Tensor ep_send_counts, Tensor expert_scales, str group_ep, int ep_world_size, int ep_rank_id, "
       "int moe_expert_num, *, Tensor? tp_send_counts=None, Tensor? x_active_mask=None, Tensor? expand_scales=None, "
       "Tensor? shared_expert_x=None, Tensor? elastic_info=None, Tensor? ori_x=None, "
       "Tensor? const_expert_alpha_1=None, Tensor? const_expert_alpha_2=None, Tensor? const_expert_v=None, "
       "Tensor? performance_info=None, str group_tp=\"\", int tp_world_size=0, int tp_rank_id=0, "
       "int expert_shard_type=0, int shared_expert_num=1, int shared_expert_rank_num=0, int global_bs=0, "
       "int comm_quant_mode=0, str comm_alg=\"\", int zero_expert_num=0, int copy_expert_num=0, "
       "int const_expert_num=0) -> Tensor", npu_moe_distribute_combine_v2)
define("npu_moe_distribute_combine_add_rms_norm(Tensor expand_x, Tensor expert_ids, Tensor expand_idx, "
       "Tensor ep_send_counts, Tensor expert_scales, Tensor residual_x, Tensor gamma, str group_ep, "
       "int ep_world_size, int ep_rank_id, int moe_expert_num, *, Tensor? tp_send_counts=None, "
       "Tensor? x_active_mask=None, Tensor? activation_scale=None, Tensor? weight_scale=None, "
       "Tensor? group_list=None, Tensor? expand_scales=None, Tensor? shared_expert_x=None, Tensor? elastic_info=None, "
       "Tensor? ori_x=None, Tensor? const_expert_alpha_1=None, Tensor? const_expert_alpha_2=None, "
       "Tensor? const_expert_v=None, str group_tp=\"\", int tp_world_size=0, int tp_rank_id=0, "
       "int expert_shard_type=0, int shared_expert_num=1, int shared_expert_rank_num=0, int global_bs=0, "
       "int out_dtype=0, int comm_quant_mode=0, int group_list_type=0, str comm_alg=\"\", float norm_eps=1e-06, "
       "int zero_expert_num=0, int copy_expert_num=0, int const_expert_num=0) -> (Tensor, Tensor, Tensor)",
       npu_moe_distribute_combine_add_rms_norm)
define("_npu_distribute_barrier(Tensor x_ref, str group, int world_size, *, Tensor? time_out=None, "
       "Tensor? elastic_info=None) -> Tensor", _npu_distribute_barrier)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
