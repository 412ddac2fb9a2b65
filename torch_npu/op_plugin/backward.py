"""torch.ops.npu: the backward operators real torch_npu exposes as ops of
their own (op-plugin's derivatives.yaml calls them; users call some of them
directly), plus the dropout-mask and small training helpers that go with them.

Each is defined with op-plugin's schema and computed with ATen: ATen's own
backward operator where there is one (gelu_backward, silu_backward,
convolution_backward, native_layer_norm_backward,
value_selecting_reduction_backward, gather_backward, _softmax_backward_data),
a closed form otherwise, and ``torch.autograd.grad`` over vNPU's forward for
the operators whose forward is a long composition (the IoU family, renorm,
PS-RoI pooling, RoIAlign, stft, matmul's double backward). The closed forms
are ATen compositions, so they are differentiable again; the autograd.grad
ones detach their inputs (no double backward through them).

Operators:

- activations: npu_gelu_backward, npu_silu_backward;
- dropout: npu_dropout_gen_mask, _npu_dropout_gen_mask.Tensor,
  npu_dropout_do_mask, _npu_dropout, npu_dropout_backward (packed bit masks),
  _dropout_with_byte_mask, _dropout_with_byte_mask_backward,
  dropout_with_byte_mask (one uint8 per element),
  npu_dropout_with_add_softmax_backward;
- reductions and indexing: npu_max_backward, npu_min_backward,
  npu_gather_backward, repeat_interleave_backward_int,
  repeat_interleave_backward_tensor, _npu_index_add, _npu_index_add_,
  npu_masked_fill_range;
- losses: l1_loss_backward, kl_div_backward, kl_div_target_backward,
  npu_binary_cross_entropy_with_logits_backward,
  npu_softmax_cross_entropy_with_logits_backward;
- matmul and layout: npu_linear_backward, npu_bmm_v2_mat1_backward,
  npu_bmm_v2_mat2_backward, matmul_double_backward,
  npu_confusion_transpose_backward;
- normalisation: npu_layernorm_grad, npu_renorm_backward, batch_norm_reduce,
  batch_norm_gather_stats_update, npu_normalize_batch;
- softmax and attention: npu_scaled_masked_softmax_backward,
  npu_attn_softmax_, npu_attn_softmax_backward_,
  npu_fused_attention_score_backward, npu_multi_head_attention_backward;
- convolutions: npu_conv2d_backward, npu_conv3d_backward,
  npu_conv_transpose2d_backward, npu_conv_transpose3d_backward,
  npu_convolution_backward, npu_convolution_transpose_backward,
  slow_conv_dilated2d_backward, slow_conv_transpose2d_backward,
  _conv_depthwise2d_backward;
- boxes: _npu_ciou, npu_ciou_backward, npu_diou_backward, npu_giou_backward,
  npu_ps_roi_pooling_backward, npu_roi_alignbk;
- recurrent: npu_lstm_backward, npu_lstm_cell_backward, npu_gru_backward
  (BPTT from the saved gates of vNPU's npu_lstm / npu_lstm_cell / npu_gru);
- FFT: fft_r2c_backward, fft_c2r_backward, stft_backward;
- misc: npu_sim_exponential_, _amp_foreach_non_finite_check.

Emulation choices:

- Packed dropout masks (npu_dropout_gen_mask, _npu_dropout, do_mask,
  npu_dropout_backward): uint8, one bit per element, element ``8 * b + k`` in
  bit k of byte b (little-endian, as real torch_npu's _npu_dropout doc example
  shows), length ``ceil(numel / 128) * 16`` bytes (op-plugin's meta); bytes
  past ``ceil(numel / 8)`` are zero. Bits are drawn from torch's generator on
  the target device (1 = keep, probability 1 - p); _npu_dropout_gen_mask
  draws from a CPU generator seeded with (seed, offset), so the same pair
  gives the same mask.
- Byte masks (_dropout_with_byte_mask): one uint8 0/1 per element, self's
  shape, like npu_dropout_with_add_softmax's mask.
- npu_dropout_with_add_softmax_backward returns (d self, d x1) =
  (alpha * g, g), g the softmax gradient of the dropped-out gradient (the
  Ascend kernel returns the incoming gradient unchanged as the second one).
- The LSTM / GRU backward ops read the last time step of gradh / gradc only,
  as the Ascend kernels do; sequences are time-major (batch_first=False).
- npu_roi_alignbk with roi_end_mode=None uses 1 (the kernel attribute's
  default when it is not passed).
"""

import math

import torch
import torch.nn.functional as F

from torch_npu._public_names import defined_in
from torch_npu.op_plugin._library import check, define
from torch_npu.op_plugin import boxes as _boxes

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _vjp(forward, inputs, grad_outputs):
    """Gradients of ``forward(*inputs)`` against ``grad_outputs`` (one tensor
    or a tuple), by autograd on detached copies; zeros where unused."""
    with torch.enable_grad():
        leaves = [t.detach().requires_grad_(True) for t in inputs]
        outs = forward(*leaves)
        if isinstance(outs, torch.Tensor):
            outs, grad_outputs = (outs,), (grad_outputs,)
        pairs = [(o, g) for o, g in zip(outs, grad_outputs) if g is not None and o.requires_grad]
        if not pairs:
            return tuple(torch.zeros_like(t) for t in leaves)
        grads = torch.autograd.grad([o for o, _ in pairs], leaves, [g.to(o.dtype) for o, g in pairs],
                                    allow_unused=True)
    return tuple(torch.zeros_like(t) if g is None else g for t, g in zip(leaves, grads))


def _wrap_dim(fn, dim, ndim):
    n = max(ndim, 1)
    check(-n <= dim < n, f"{fn}: dim {dim} is out of range for a {ndim}-dimensional tensor "
          f"(expected in [{-n}, {n - 1}]).")
    return dim % n


def _check_float(fn, name, t):
    check(t.dtype in _FLOATS, f"{fn}: {name} should be a floating-point tensor, but got {t.dtype}.")


def _check_reduction(fn, reduction):
    check(reduction in (0, 1, 2), f"{fn}: reduction should be 0 (none), 1 (mean) or 2 (sum), but got {reduction}.")


def _reduce_grad(g, grad_output, reduction, numel):
    """Scales the pointwise derivative g by grad_output as the reduction says."""
    g = g * grad_output  # none: grad_output has g's shape; mean / sum: a scalar
    return g / numel if reduction == 1 else g


# --- activations ------------------------------------------------------------------

def npu_gelu_backward(grad_output, self, approximate="none"):
    check(approximate in ("none", "tanh"),
          f"npu_gelu_backward: approximate should be 'none' or 'tanh', but got '{approximate}'.")
    return torch.ops.aten.gelu_backward(grad_output, self, approximate=approximate)


def npu_silu_backward(grad_output, x0, x1):
    """x0 is npu_silu's input, x1 its result (the kernel reads both; the
    derivative needs x0 only)."""
    check(x0.shape == x1.shape, f"npu_silu_backward: x0 {list(x0.shape)} and x1 {list(x1.shape)} (the forward's "
          "input and result) should have the same shape.")
    return torch.ops.aten.silu_backward(grad_output, x0)


# --- dropout ----------------------------------------------------------------------

_MASK_ALIGN_BITS = 128


def _mask_bytes(numel):
    return (numel + _MASK_ALIGN_BITS - 1) // _MASK_ALIGN_BITS * _MASK_ALIGN_BITS // 8


def _check_p(fn, p):
    check(0.0 <= p <= 1.0, f"{fn}: dropout probability has to be between 0 and 1, but got {p}.")


def _pack_keep(uniform, p, numel, device):
    """The packed mask of ``numel`` elements from ``ceil(numel / 8) * 8``
    uniform draws: bit set where the draw >= p (kept)."""
    used = (numel + 7) // 8
    bits = (uniform >= p).to(torch.uint8).view(used, 8)
    weights = torch.tensor([1, 2, 4, 8, 16, 32, 64, 128], dtype=torch.uint8, device=device)
    packed = (bits * weights).sum(dim=1, dtype=torch.uint8)
    return F.pad(packed, (0, _mask_bytes(numel) - used))


def _unpack_keep(fn, mask, shape, dtype):
    """Keep flags (0 / 1 in ``dtype``) of ``shape`` from a packed bit mask."""
    check(mask.dtype == torch.uint8, f"{fn}: mask should be torch.uint8, but got {mask.dtype}.")
    numel = math.prod(shape)
    check(mask.numel() * 8 >= numel, f"{fn}: mask has {mask.numel()} bytes, too few for {numel} elements "
          f"(expected {_mask_bytes(numel)}, one bit per element).")
    shifts = torch.arange(8, dtype=torch.uint8, device=mask.device)
    bits = torch.bitwise_and(torch.bitwise_right_shift(mask.reshape(-1, 1), shifts), 1)
    return bits.reshape(-1)[:numel].reshape(shape).to(dtype)


def _apply_packed(fn, x, mask, p):
    if p >= 1.0:
        return torch.zeros_like(x)
    return x * _unpack_keep(fn, mask, tuple(x.shape), x.dtype) * (1.0 / (1.0 - p))


def npu_dropout_gen_mask(size, p, dtype=None, layout=None, device=None, pin_memory=None):
    fn = "npu_dropout_gen_mask"
    _check_p(fn, p)
    check(layout in (None, torch.strided), f"{fn}: layout should be torch.strided, but got {layout}.")
    if device is None:
        device = torch.device("npu", torch.npu.current_device())
    numel = math.prod(size)
    uniform = torch.rand((numel + 7) // 8 * 8, device=device)
    return _pack_keep(uniform, p, numel, device)


def _npu_dropout_gen_mask(self, size, p, seed, offset, parallel=True, sync=None):
    fn = "_npu_dropout_gen_mask"
    _check_p(fn, p)
    numel = math.prod(size)
    gen = torch.Generator(device="cpu")
    gen.manual_seed((int(seed) * 0x9E3779B1 + int(offset)) % (1 << 63))
    uniform = torch.rand((numel + 7) // 8 * 8, generator=gen).to(self.device)
    return _pack_keep(uniform, p, numel, self.device)


def npu_dropout_do_mask(self, mask, p):
    fn = "npu_dropout_do_mask"
    _check_p(fn, p)
    return _apply_packed(fn, self, mask, p), mask.clone()


def _npu_dropout(self, p):
    fn = "_npu_dropout"
    _check_p(fn, p)
    _check_float(fn, "self", self)
    mask = npu_dropout_gen_mask(tuple(self.shape), p, device=self.device)
    return _apply_packed(fn, self, mask, p), mask


def npu_dropout_backward(grad_output, mask, p):
    fn = "npu_dropout_backward"
    _check_float(fn, "grad_output", grad_output)
    _check_p(fn, p)
    if mask.numel() == 0:
        return grad_output.new_empty(mask.shape)
    return _apply_packed(fn, grad_output, mask, p)


def _byte_mask_apply(fn, x, mask, p):
    check(mask.dtype == torch.uint8, f"{fn}: mask should be torch.uint8, but got {mask.dtype}.")
    check(mask.numel() == x.numel(), f"{fn}: mask should hold one byte per element ({x.numel()}), but has "
          f"{mask.numel()}.")
    if p >= 1.0:
        return torch.zeros_like(x)
    return x * mask.reshape(x.shape).to(x.dtype) * (1.0 / (1.0 - p))


def _dropout_with_byte_mask(self, p):
    fn = "_dropout_with_byte_mask"
    _check_p(fn, p)
    _check_float(fn, "self", self)
    mask = (torch.rand(self.shape, device=self.device) >= p).to(torch.uint8)
    return _byte_mask_apply(fn, self, mask, p), mask


def _dropout_with_byte_mask_backward(grad_output, mask, p):
    fn = "_dropout_with_byte_mask_backward"
    _check_float(fn, "grad_output", grad_output)
    _check_p(fn, p)
    return _byte_mask_apply(fn, grad_output, mask, p)


def dropout_with_byte_mask(self, p, train):
    _check_p("dropout_with_byte_mask", p)
    if p == 0 or not train or self.numel() == 0:
        return self.clone()
    if p == 1:
        return self * 0
    return _dropout_with_byte_mask(self, p)[0]


def npu_dropout_with_add_softmax_backward(grad, mask, softmax_out, alpha, prob, dim):
    """(d self, d x1) of npu_dropout_with_add_softmax's dropped-out result:
    out = dropout(softmax(self * alpha + x1)) with the uint8 keep mask."""
    fn = "npu_dropout_with_add_softmax_backward"
    check(0.0 <= prob < 1.0, f"{fn}: prob should be in [0, 1), but got {prob}.")
    check(grad.shape == softmax_out.shape, f"{fn}: grad {list(grad.shape)} and softmax_out "
          f"{list(softmax_out.shape)} should have the same shape.")
    d_soft = _byte_mask_apply(fn, grad, mask, prob)
    d_logits = torch.ops.aten._softmax_backward_data(d_soft, softmax_out, _wrap_dim(fn, dim, grad.dim()),
                                                     softmax_out.dtype)
    return d_logits * float(alpha), d_logits


# --- reductions and indexing ----------------------------------------------------------

def _extreme_backward(fn):
    def backward(grad, dim, indices, sizes, keepdim):
        check(indices.dtype in (torch.int32, torch.int64), f"{fn}: indices should be int32 or int64, but got "
              f"{indices.dtype}.")
        check(grad.shape == indices.shape, f"{fn}: grad {list(grad.shape)} and indices {list(indices.shape)} "
              "should have the same shape.")
        d = _wrap_dim(fn, dim, len(sizes))
        return torch.ops.aten.value_selecting_reduction_backward(grad, d, indices.long(), list(sizes), keepdim)
    backward.__name__ = backward.__qualname__ = fn
    return backward


npu_max_backward = _extreme_backward("npu_max_backward")
npu_min_backward = _extreme_backward("npu_min_backward")


def npu_gather_backward(grad, self_size, dim, index, sparse_grad):
    fn = "npu_gather_backward"
    check(index.dtype in (torch.int32, torch.int64), f"{fn}: index should be int32 or int64, got {index.dtype}.")
    check(grad.shape == index.shape, f"{fn}: grad {list(grad.shape)} and index {list(index.shape)} should have "
          "the same shape.")
    d = _wrap_dim(fn, dim, len(self_size))
    shape_only = grad.new_zeros(()).expand(list(self_size))  # aten reads only its sizes
    return torch.ops.aten.gather_backward(grad, shape_only, d, index.long(), sparse_grad)


def repeat_interleave_backward_int(grad, self, repeats, dim=None):
    fn = "repeat_interleave_backward_int"
    check(repeats >= 0, f"{fn}: repeats should be non-negative, but got {repeats}.")
    if dim is None:
        check(grad.numel() == self.numel() * repeats, f"{fn}: grad has {grad.numel()} elements, expected "
              f"self.numel() * repeats = {self.numel() * repeats}.")
        return grad.reshape(self.numel(), repeats).sum(1).reshape(self.shape)
    d = _wrap_dim(fn, dim, self.dim())
    expected = list(self.shape)
    expected[d] *= repeats
    check(list(grad.shape) == expected, f"{fn}: grad should have shape {expected}, but got {list(grad.shape)}.")
    split = list(self.shape[:d]) + [self.shape[d], repeats] + list(self.shape[d + 1:])
    return grad.reshape(split).sum(d + 1)


def repeat_interleave_backward_tensor(grad, self, repeats, dim=None):
    fn = "repeat_interleave_backward_tensor"
    check(repeats.dtype in (torch.int32, torch.int64), f"{fn}: repeats should be int32 or int64, got "
          f"{repeats.dtype}.")
    check(repeats.dim() <= 1, f"{fn}: repeats should be 0- or 1-dimensional, got shape {list(repeats.shape)}.")
    src = self.reshape(-1) if dim is None else self
    d = 0 if dim is None else _wrap_dim(fn, dim, self.dim())
    n = src.shape[d] if src.dim() > 0 else 1
    reps = repeats.reshape(-1).long()
    check(reps.numel() in (1, n), f"{fn}: repeats should have one entry or {n} (the size of dimension {d}), got "
          f"{reps.numel()}.")
    reps = reps.expand(n)
    owner = torch.repeat_interleave(torch.arange(n, device=grad.device), reps.to(grad.device),
                                    output_size=grad.shape[d] if grad.dim() > 0 else None)
    out = grad.new_zeros(src.shape).index_add(d, owner, grad)
    return out.reshape(self.shape)


def _npu_index_add(self, index, source, alpha=1):
    return torch.index_add(self, 0, index, source, alpha=alpha)


def _npu_index_add_(self, index, source, alpha=1):
    return self.index_add_(0, index, source, alpha=alpha)


def npu_masked_fill_range(self, start, end, value, axis=-1):
    """Fills ranges along ``axis`` with value[i], for i over start's rows:
    positions start[i, j] <= k < end[i, j]. When axis is the last dimension
    of a 2-D or larger tensor, range j applies to row j of dimension 0 only;
    otherwise to the whole slice (real torch_npu's test_masked_fill_range)."""
    fn = "npu_masked_fill_range"
    ax = _wrap_dim(fn, axis, self.dim())
    check(start.dim() == 2 and start.shape == end.shape,
          f"{fn}: start and end should be 2-D tensors of one shape, got {list(start.shape)} and {list(end.shape)}.")
    check(start.dtype == torch.int32 and end.dtype == torch.int32,
          f"{fn}: start and end should be int32, got {start.dtype} and {end.dtype}.")
    check(value.dim() >= 1 and value.shape[0] == start.shape[0],
          f"{fn}: value should have one entry per row of start ({start.shape[0]}), got shape {list(value.shape)}.")
    check(value.dtype == self.dtype, f"{fn}: value dtype should be equal self dtype, but value dtype is "
          f"{value.dtype} and self dtype is {self.dtype}.")
    size = self.shape[ax]
    pos = torch.arange(size, device=self.device)
    per_row = self.dim() >= 2 and ax == self.dim() - 1
    if per_row:
        check(start.shape[1] <= self.shape[0], f"{fn}: start has {start.shape[1]} columns, more than the "
              f"{self.shape[0]} rows of self.")
    out = self
    for i in range(start.shape[0]):
        s, e = start[i].long().unsqueeze(1), end[i].long().unsqueeze(1)
        hit = (pos >= s) & (pos < e)  # (J, size)
        if per_row:
            rows = F.pad(hit, (0, 0, 0, self.shape[0] - hit.shape[0]))  # (dim 0, size)
            shape = [self.shape[0]] + [1] * (self.dim() - 2) + [size]
            m = rows.reshape(shape)
        else:
            shape = [1] * self.dim()
            shape[ax] = size
            m = hit.any(0).reshape(shape)
        out = torch.where(m, value[i].to(self.device), out)
    return out.clone() if out is self else out


# --- losses -----------------------------------------------------------------------

def l1_loss_backward(grad_output, self, target, reduction):
    fn = "l1_loss_backward"
    _check_reduction(fn, reduction)
    return _reduce_grad(torch.sign(self - target), grad_output, reduction, self.numel())


def _kl_checks(fn, self, target, reduction):
    _check_reduction(fn, reduction)
    check(self.shape == target.shape, f"{fn}: self {list(self.shape)} and target {list(target.shape)} should "
          "have the same shape.")


def kl_div_backward(grad_output, self, target, reduction=1, log_target=False):
    """d/d self of kl_div(self, target): -target (exp(target) when log_target)."""
    fn = "kl_div_backward"
    _kl_checks(fn, self, target, reduction)
    g = -torch.exp(target) if log_target else -target
    return _reduce_grad(g, grad_output, reduction, self.numel()).to(self.dtype)


def kl_div_target_backward(grad_output, self, target, reduction=1, log_target=False):
    """d/d target of kl_div: log(target) + 1 - self where target > 0 (else 0),
    or exp(target) (target - self + 1) when log_target."""
    fn = "kl_div_target_backward"
    _kl_checks(fn, self, target, reduction)
    if log_target:
        g = torch.exp(target) * (target - self + 1)
    else:
        g = torch.where(target > 0, torch.log(target) + 1 - self, torch.zeros_like(target))
    return _reduce_grad(g, grad_output, reduction, self.numel()).to(target.dtype)


def npu_binary_cross_entropy_with_logits_backward(grad_output, self, target, weight_opt=None, pos_weight_opt=None,
                                                  reduction=1):
    fn = "npu_binary_cross_entropy_with_logits_backward"
    _check_reduction(fn, reduction)
    check(self.shape == target.shape, f"{fn}: self {list(self.shape)} and target {list(target.shape)} should "
          "have the same shape.")
    sig = torch.sigmoid(self)
    if pos_weight_opt is not None:
        pw_t = pos_weight_opt * target
        g = (pw_t + 1 - target) * sig - pw_t
    else:
        g = sig - target
    if weight_opt is not None:
        g = g * weight_opt
    return _reduce_grad(g, grad_output, reduction, self.numel()).expand(self.shape).to(self.dtype)


def npu_softmax_cross_entropy_with_logits_backward(grad, self, labels):
    """grad (N,) times d/d logits of -sum(labels * log_softmax(logits), 1)."""
    fn = "npu_softmax_cross_entropy_with_logits_backward"
    check(self.dim() == 2 and self.shape == labels.shape, f"{fn}: self and labels should be (N, C) of one shape, "
          f"got {list(self.shape)} and {list(labels.shape)}.")
    check(grad.numel() == self.shape[0], f"{fn}: grad should hold one value per row ({self.shape[0]}), got shape "
          f"{list(grad.shape)}.")
    soft = torch.softmax(self, dim=1)
    d = soft * labels.sum(1, keepdim=True) - labels
    return (grad.reshape(-1, 1) * d).to(self.dtype)


# --- matmul and layout ---------------------------------------------------------------

def npu_linear_backward(grad, input, weight):
    """(d input, d weight) of input @ weight^T."""
    fn = "npu_linear_backward"
    check(weight.dim() == 2, f"{fn}: weight should be 2-D (out, in), got shape {list(weight.shape)}.")
    check(input.dim() >= 1 and input.shape[-1] == weight.shape[1] and grad.shape[-1] == weight.shape[0],
          f"{fn}: input {list(input.shape)}, weight {list(weight.shape)} and grad {list(grad.shape)} do not match "
          "input @ weight^T.")
    d_input = torch.matmul(grad, weight)
    d_weight = torch.matmul(grad.reshape(-1, weight.shape[0]).t(), input.reshape(-1, weight.shape[1]))
    return d_input, d_weight


def _check_bmm(fn, grad, mat1, mat2):
    check(mat1.dim() >= 1 and mat2.dim() >= 1, f"{fn}: mat1 and mat2 should have at least 1 dimension.")
    check(mat1.shape[-1] == (mat2.shape[0] if mat2.dim() == 1 else mat2.shape[-2]),
          f"{fn}: mat1 {list(mat1.shape)} and mat2 {list(mat2.shape)} cannot be multiplied.")


def _grad_matrix(grad, mat1, mat2):
    """grad with the dimensions a 1-D operand dropped put back as size 1."""
    if mat1.dim() == 1:
        return grad.unsqueeze(-2)
    if mat2.dim() == 1:
        return grad.unsqueeze(-1)
    return grad


def npu_bmm_v2_mat1_backward(grad, mat1, mat2, size):
    """grad @ mat2^T, summed over the batch dimensions broadcast in the
    forward, of shape ``size`` (mat1's)."""
    fn = "npu_bmm_v2_mat1_backward"
    _check_bmm(fn, grad, mat1, mat2)
    g = _grad_matrix(grad, mat1, mat2)
    m2 = mat2.unsqueeze(0) if mat2.dim() == 1 else mat2.transpose(-2, -1)
    out = torch.matmul(g, m2)
    if mat1.dim() == 1:
        out = out.squeeze(-2)
    return out.sum_to_size(list(size))


def npu_bmm_v2_mat2_backward(grad, mat1, mat2, size):
    """mat1^T @ grad, summed over the broadcast batch dimensions, of shape
    ``size`` (mat2's)."""
    fn = "npu_bmm_v2_mat2_backward"
    _check_bmm(fn, grad, mat1, mat2)
    g = _grad_matrix(grad, mat1, mat2)
    m1 = mat1.unsqueeze(-1) if mat1.dim() == 1 else mat1.transpose(-2, -1)
    out = torch.matmul(m1, g)
    if mat2.dim() == 1:
        out = out.squeeze(-1)
    return out.sum_to_size(list(size))


def matmul_double_backward(grad_self, grad_other, grad_out, self, other, mask):
    """Second-order terms of matmul: for matmul_backward's (d self, d other)
    = (g other^T, self^T g), the gradients of <grad_self, d self> +
    <grad_other, d other> with respect to (grad_out, self, other)."""
    if grad_self is None and grad_other is None:
        return None, None, None

    def first(g, a, b):
        out = torch.matmul(a, b)
        return torch.autograd.grad(out, (a, b), g, create_graph=True)

    with torch.enable_grad():
        g, a, b = (t.detach().requires_grad_(True) for t in (grad_out, self, other))
        ga, gb = first(g, a, b)
        outs, grads = [], []
        for o, gg in ((ga, grad_self), (gb, grad_other)):
            if gg is not None:
                outs.append(o)
                grads.append(gg)
        res = torch.autograd.grad(outs, (g, a, b), grads, allow_unused=True)
    res = [torch.zeros_like(t) if r is None else r for t, r in zip((grad_out, self, other), res)]
    return tuple(r if keep else None for r, keep in zip(res, mask))


def npu_confusion_transpose_backward(grad, perm, shape, transpose_first):
    """Undoes npu_confusion_transpose: ``shape`` is the forward input's shape
    and ``transpose_first`` the negation of the forward's flag (as
    op-plugin's derivatives.yaml passes them)."""
    fn = "npu_confusion_transpose_backward"
    perm = [int(p) for p in perm]
    check(sorted(perm) == list(range(len(perm))), f"{fn}: perm {perm} should be a permutation of "
          f"0..{len(perm) - 1}.")
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    check(grad.numel() == math.prod(shape), f"{fn}: grad has {grad.numel()} elements but shape {list(shape)} "
          f"holds {math.prod(shape)}.")
    if transpose_first:  # the forward was reshape, then permute
        check(grad.dim() == len(perm), f"{fn}: grad should have {len(perm)} dimensions, got {grad.dim()}.")
        return grad.permute(inverse).reshape(list(shape))
    check(len(shape) == len(perm), f"{fn}: the length of perm should be the same as shape.")
    return grad.reshape([shape[p] for p in perm]).permute(inverse).contiguous()


# --- normalisation -------------------------------------------------------------------

def npu_layernorm_grad(grad_out, input, normalized_shape, mean, rstd, weight, bias):
    fn = "npu_layernorm_grad"
    k = len(normalized_shape)
    check(k >= 1 and list(input.shape[input.dim() - k:]) == list(normalized_shape),
          f"{fn}: normalized_shape {list(normalized_shape)} should match the last dimensions of input "
          f"{list(input.shape)}.")
    stat_shape = list(input.shape[:input.dim() - k]) + [1] * k
    rows = math.prod(stat_shape)
    check(mean.numel() == rows and rstd.numel() == rows,
          f"{fn}: mean and rstd should hold one value per normalised row ({rows}), got {mean.numel()} and "
          f"{rstd.numel()}.")
    w = weight if weight is not None else input.new_ones(list(normalized_shape))
    b = bias if bias is not None else input.new_zeros(list(normalized_shape))
    dx, dw, db = torch.ops.aten.native_layer_norm_backward(
        grad_out, input, list(normalized_shape), mean.reshape(stat_shape), rstd.reshape(stat_shape), w, b,
        [True, True, True])
    return dx, dw, db


def npu_renorm_backward(grad, self, p, dim, maxnorm):
    d = _wrap_dim("npu_renorm_backward", dim, self.dim())
    return _vjp(lambda x: torch.renorm(x, p, d, maxnorm), (self,), grad)[0]


def batch_norm_reduce(input, eps):
    """(sum, square sum) per channel (dimension 1), in float32."""
    check(input.dim() > 1, "batch_norm_reduce: The dim input tensor [self] must more than 1.")
    x = input.float()
    dims = [0] + list(range(2, x.dim()))
    return x.sum(dims), (x * x).sum(dims)


def batch_norm_gather_stats_update(input, mean, invstd, running_mean, running_var, momentum, eps, counts):
    """The global (mean, invstd) from every rank's per-channel sums: ``mean``
    and ``invstd`` hold the gathered sums and square sums (world, C), as
    torch_npu's SyncBatchNorm passes them; running_mean / running_var (when
    given) are updated in place, the variance unbiased."""
    fn = "batch_norm_gather_stats_update"
    check(input.dim() > 1, f"{fn}: The dim input tensor [self] must more than 1.")
    channels = input.shape[1]
    sums, squares = mean.reshape(-1, channels), invstd.reshape(-1, channels)
    check(sums.shape == squares.shape, f"{fn}: the sums {list(mean.shape)} and square sums {list(invstd.shape)} "
          "should have the same shape.")
    total = counts.to(sums.dtype).sum()
    batch_mean = sums.sum(0) / total
    var = squares.sum(0) / total - batch_mean * batch_mean
    batch_invstd = torch.rsqrt(var + eps)
    with torch.no_grad():
        if running_mean is not None:
            running_mean.copy_(running_mean * (1 - momentum) + batch_mean.to(running_mean.dtype) * momentum)
        if running_var is not None:
            unbiased = var * total / (total - 1)
            running_var.copy_(running_var * (1 - momentum) + unbiased.to(running_var.dtype) * momentum)
    return batch_mean, batch_invstd


def npu_normalize_batch(self, seq_len, normalize_type=0):
    """(x - mean) / (std + 1e-5) over the first seq_len[b] steps of each batch
    entry (x (B, C, T)): per feature (type 0) or over all features (type 1);
    std unbiased."""
    fn = "npu_normalize_batch"
    check(self.dim() == 3, f"{fn}: self should be (batch, features, time), got shape {list(self.shape)}.")
    check(seq_len.dim() == 1, f"{fn}: Non-empty 1D seq_len tensor expected but got a tensor with sizes "
          f"{list(seq_len.shape)}.")
    check(seq_len.shape[0] == self.shape[0], f"{fn}: seq_len's length should be equal self' num, but got seq_len "
          f"length {seq_len.shape[0]} self num {self.shape[0]}.")
    check(normalize_type in (0, 1), f"{fn}: normalize_type expected to be in range [0, 1], but got "
          f"{normalize_type}.")
    x = self.float()
    steps = self.shape[2]
    valid = (torch.arange(steps, device=self.device) < seq_len.to(self.device).reshape(-1, 1)).unsqueeze(1)
    valid = valid.to(x.dtype)  # (B, 1, T)
    dims = (2,) if normalize_type == 0 else (1, 2)
    count = valid.sum(dims, keepdim=True) * (1 if normalize_type == 0 else self.shape[1])
    mean = (x * valid).sum(dims, keepdim=True) / count
    var = (((x - mean) ** 2) * valid).sum(dims, keepdim=True) / (count - 1)
    return ((x - mean) / (var.sqrt() + 1e-5)).to(self.dtype)


# --- softmax and attention -------------------------------------------------------------

def npu_scaled_masked_softmax_backward(y_grad, y, mask, scale, fixed_triu_mask):
    """d x of softmax(x * scale) with masked positions filled: zero where masked."""
    fn = "npu_scaled_masked_softmax_backward"
    check(y_grad.shape == y.shape, f"{fn}: y_grad {list(y_grad.shape)} and y {list(y.shape)} should have the same "
          "shape.")
    if fixed_triu_mask:
        masked = torch.ones(y.shape[-2], y.shape[-1], dtype=torch.bool, device=y.device).triu_(1)
    else:
        check(mask.dtype in (torch.bool, torch.uint8), f"{fn}: mask should be bool or uint8, but got {mask.dtype}.")
        masked = mask.bool()
    yf, gf = y.float(), y_grad.float()
    dx = yf * (gf - (gf * yf).sum(-1, keepdim=True)) * float(scale)
    return dx.masked_fill(masked, 0.0).to(y_grad.dtype)


def npu_attn_softmax_(self):
    return self.copy_(torch.softmax(self, dim=-1))


def npu_attn_softmax_backward_(self, grad_output, values):
    """self holds softmax(logits) and becomes d logits of softmax(logits) @ values."""
    fn = "npu_attn_softmax_backward_"
    check(values.shape[-2] == self.shape[-1] and grad_output.shape[-1] == values.shape[-1],
          f"{fn}: self {list(self.shape)}, grad_output {list(grad_output.shape)} and values "
          f"{list(values.shape)} do not match softmax(self) @ values.")
    d_probs = torch.matmul(grad_output, values.transpose(-2, -1))
    return self.copy_(torch.ops.aten._softmax_backward_data(d_probs, self, -1, self.dtype))


def npu_fused_attention_score_backward(grad_output, softmax_output, query_layer, key_layer, value_layer, mask,
                                       scale, keep_prob, query_transpose=False, key_transpose=False,
                                       value_transpose=False, dx_transpose=False):
    """(dq, dk, dv) of npu_fused_attention_score_fwd: probs (softmax_output,
    before dropout) dropped with ``mask`` (its uint8 keep flags) and
    keep_prob, times v, as (B * S, N * D)."""
    fn = "npu_fused_attention_score_backward"
    for name, flag in (("query_transpose", query_transpose), ("key_transpose", key_transpose),
                       ("value_transpose", value_transpose), ("dx_transpose", dx_transpose)):
        if flag:
            raise RuntimeError(f"{fn}: {name}=True is not supported on vNPU (the Ascend kernel's pre-transposed "
                               "operand layouts are not documented); pass untransposed (B, N, S, D) tensors.")
    q, k, v = query_layer, key_layer, value_layer
    check(q.dim() == 4 and k.shape == q.shape and v.shape == q.shape,
          f"{fn}: query, key and value should be (B, N, S, D) of one shape, got {list(q.shape)}, {list(k.shape)}, "
          f"{list(v.shape)}.")
    b, n, s, d = q.shape
    check(list(softmax_output.shape) == [b, n, s, s], f"{fn}: softmax_output should be {[b, n, s, s]}, got "
          f"{list(softmax_output.shape)}.")
    check(grad_output.numel() == b * s * n * d, f"{fn}: grad_output should be (B * S, N * D) = "
          f"({b * s}, {n * d}), got {list(grad_output.shape)}.")
    check(0 <= keep_prob <= 1, f"{fn}: keep_prob should be in [0, 1], got {keep_prob}.")
    g = grad_output.reshape(b, s, n, d).permute(0, 2, 1, 3)
    probs = softmax_output
    if keep_prob < 1:
        check(mask.numel() == probs.numel(), f"{fn}: mask should hold one keep flag per score ({probs.numel()}), "
              f"got {mask.numel()}.")
        keep = mask.reshape(probs.shape).to(probs.dtype)
        factor = keep / keep_prob if keep_prob > 0 else keep * 0
    else:
        factor = None
    dropped = probs * factor if factor is not None else probs
    dv = torch.matmul(dropped.transpose(-1, -2), g)
    d_probs = torch.matmul(g, v.transpose(-1, -2))
    if factor is not None:
        d_probs = d_probs * factor
    d_scores = torch.ops.aten._softmax_backward_data(d_probs, probs, -1, probs.dtype) * float(scale)
    dq = torch.matmul(d_scores, k)
    dk = torch.matmul(d_scores.transpose(-1, -2), q)
    return dq, dk, dv


def npu_multi_head_attention_backward(query, key, value, query_weight, key_weight, value_weight, out_proj_weight,
                                      query_bias, key_bias, value_bias, out_proj_bias, query_res, key_res,
                                      value_res, attn_scores, attn_res, context, y_grad, dropout_mask,
                                      attn_head_num, attn_dim_per_head, src_len, tgt_len, dropout_prob,
                                      softmax_use_float):
    """The 11 gradients of npu_multi_head_attention, in op-plugin's order
    (query_weight, key_weight, value_weight, out_proj_weight, query, key,
    value, query_bias, key_bias, value_bias, out_proj_bias), from its saved
    q, k, v (B, N, len, D), softmax scores, dropped probabilities and
    context; dropout_mask is vNPU's element-wise keep mask."""
    fn = "npu_multi_head_attention_backward"
    heads, dim = attn_head_num, attn_dim_per_head
    check(tgt_len > 0 and src_len > 0 and query.dim() == 2 and query.shape[0] % tgt_len == 0,
          f"{fn}: query should be (batch * tgt_len, embed_dim) with tgt_len {tgt_len}, got {list(query.shape)}.")
    batch = query.shape[0] // tgt_len
    check(0.0 <= dropout_prob < 1.0, f"{fn}: dropout_prob should be in [0, 1), got {dropout_prob}.")
    shape = (batch, heads, tgt_len, src_len)
    for name, t in (("attn_scores", attn_scores), ("attn_res", attn_res)):
        check(t.numel() == math.prod(shape), f"{fn}: {name} should have shape {list(shape)}, got {list(t.shape)}.")
    dtype = query.dtype
    q = query_res.reshape(batch, heads, tgt_len, dim)
    k = key_res.reshape(batch, heads, src_len, dim)
    v = value_res.reshape(batch, heads, src_len, dim)
    scores, probs = attn_scores.reshape(shape), attn_res.reshape(shape)
    dy = y_grad.reshape(batch * tgt_len, -1)
    d_out_w = dy.t().matmul(context.reshape(batch * tgt_len, heads * dim))
    d_out_b = dy.sum(0)
    d_ctx = dy.matmul(out_proj_weight.to(dtype)).reshape(batch, tgt_len, heads, dim).transpose(1, 2)
    d_probs = torch.matmul(d_ctx, v.transpose(-2, -1))
    d_v = torch.matmul(probs.transpose(-2, -1), d_ctx)
    if dropout_mask.numel() > 0:
        check(dropout_mask.numel() == math.prod(shape), f"{fn}: dropout_mask should hold one keep flag per score, "
              f"{math.prod(shape)} elements, got {dropout_mask.numel()} (vNPU does not take packed bit masks).")
        d_probs = d_probs * dropout_mask.reshape(shape).to(dtype) / (1.0 - dropout_prob)
    d_logits = torch.ops.aten._softmax_backward_data(d_probs.to(scores.dtype), scores, -1, scores.dtype).to(dtype)
    d_q = torch.matmul(d_logits, k) * (dim ** -0.5)
    d_k = torch.matmul(d_logits.transpose(-2, -1), q)

    def flat(t, length):
        return t.transpose(1, 2).reshape(batch * length, heads * dim)

    res = []
    for d, x, w, length in ((d_q, query, query_weight, tgt_len), (d_k, key, key_weight, src_len),
                            (d_v, value, value_weight, src_len)):
        d2 = flat(d, length)
        res.append((d2.t().matmul(x), d2.matmul(w.to(dtype)), d2.sum(0)))
    (dwq, dq, dbq), (dwk, dk, dbk), (dwv, dv, dbv) = res
    return dwq, dwk, dwv, d_out_w, dq, dk, dv, dbq, dbk, dbv, d_out_b


# --- convolutions --------------------------------------------------------------------

def _spatial(fn, name, values, n):
    values = [int(v) for v in values]
    if len(values) == 1:
        values = values * n
    check(len(values) == n, f"{fn}: {name} should have {n} entries (or 1), got {values}.")
    return values


def _conv_backward(fn, x, grad, weight, stride, padding, dilation, groups, mask, transposed=False,
                   output_padding=None, spatial=None):
    n = x.dim() - 2
    check(n in (1, 2, 3) and weight.dim() == x.dim() and grad.dim() == x.dim(),
          f"{fn}: input, grad and weight should all be 3-, 4- or 5-dimensional (with spatial={spatial}), got "
          f"{x.dim()}, {grad.dim()} and {weight.dim()}.")
    if spatial is not None:
        check(n == spatial, f"{fn}: input should have {spatial} spatial dimensions, got {n}.")
    check(groups >= 1, f"{fn}: groups should be positive, got {groups}.")
    mask = [bool(m) for m in mask]
    bias_size = [weight.shape[1] * groups] if transposed else [weight.shape[0]]
    out_pad = _spatial(fn, "output_padding", output_padding, n) if transposed else [0] * n
    return torch.ops.aten.convolution_backward(
        grad, x, weight, bias_size, _spatial(fn, "stride", stride, n), _spatial(fn, "padding", padding, n),
        _spatial(fn, "dilation", dilation, n), transposed, out_pad, groups, mask)


def npu_conv2d_backward(input, grad_output, weight, stride, padding, dilation, groups, output_mask):
    return _conv_backward("npu_conv2d_backward", input, grad_output, weight, stride, padding, dilation, groups,
                          output_mask, spatial=2)


def npu_conv3d_backward(input, grad, weight, stride, padding, dilation, groups, output_mask):
    return _conv_backward("npu_conv3d_backward", input, grad, weight, stride, padding, dilation, groups,
                          output_mask, spatial=3)


def npu_convolution_backward(input, grad_output, weight, stride, padding, dilation, groups, output_mask):
    return _conv_backward("npu_convolution_backward", input, grad_output, weight, stride, padding, dilation, groups,
                          output_mask)


def npu_conv_transpose2d_backward(input, grad_output, weight, padding, output_padding, stride, dilation, groups,
                                  output_mask):
    return _conv_backward("npu_conv_transpose2d_backward", input, grad_output, weight, stride, padding, dilation,
                          groups, output_mask, transposed=True, output_padding=output_padding, spatial=2)


def npu_conv_transpose3d_backward(input, grad_output, weight, padding, output_padding, stride, dilation, groups,
                                  output_mask):
    return _conv_backward("npu_conv_transpose3d_backward", input, grad_output, weight, stride, padding, dilation,
                          groups, output_mask, transposed=True, output_padding=output_padding, spatial=3)


def npu_convolution_transpose_backward(input, grad, weight, padding, output_padding, stride, dilation, groups,
                                       grad_input_mask):
    return _conv_backward("npu_convolution_transpose_backward", input, grad, weight, stride, padding, dilation,
                          groups, grad_input_mask, transposed=True, output_padding=output_padding)


def _check_kernel(fn, weight, kernel_size):
    check(list(weight.shape[2:]) == _spatial(fn, "kernel_size", kernel_size, weight.dim() - 2),
          f"{fn}: kernel_size {list(kernel_size)} does not match weight {list(weight.shape)}.")


def slow_conv_dilated2d_backward(grad_output, self, weight, kernel_size, stride, padding, dilation, output_mask):
    fn = "slow_conv_dilated2d_backward"
    _check_kernel(fn, weight, kernel_size)
    return _conv_backward(fn, self, grad_output, weight, stride, padding, dilation, 1, output_mask, spatial=2)


def slow_conv_transpose2d_backward(grad_output, self, weight, kernel_size, stride, padding, output_padding, dilation,
                                   output_mask):
    fn = "slow_conv_transpose2d_backward"
    _check_kernel(fn, weight, kernel_size)
    return _conv_backward(fn, self, grad_output, weight, stride, padding, dilation, 1, output_mask,
                          transposed=True, output_padding=output_padding, spatial=2)


def _conv_depthwise2d_backward(grad_output, self, weight, kernel_size, stride, padding, dilation, output_mask):
    fn = "_conv_depthwise2d_backward"
    _check_kernel(fn, weight, kernel_size)
    check(self.dim() == 4, f"{fn}: self should be NCHW, got {self.dim()} dimensions.")
    d_input, d_weight, _ = _conv_backward(fn, self, grad_output, weight, stride, padding, dilation, self.shape[1],
                                          list(output_mask) + [False], spatial=2)
    return d_input, d_weight


# --- boxes -----------------------------------------------------------------------------

def _npu_ciou(self, gtboxes, trans=False, is_cross=True, mode=0, atan_sub_flag=False):
    """(CIoU, atan(w_gt / h_gt) - atan(w / h)) of (4, N) boxes; the second
    is what npu_ciou_backward's atan_sub takes (float32 for float16 boxes)."""
    overlap = _boxes.npu_ciou(self, gtboxes, trans, is_cross, mode, atan_sub_flag)
    work = torch.float32 if self.dtype == torch.float16 else self.dtype
    p, g = self.to(work).unsqueeze(1), gtboxes.to(work).unsqueeze(1 if not is_cross else 2)
    px1, py1, px2, py2 = _boxes._corners(p, trans)
    gx1, gy1, gx2, gy2 = _boxes._corners(g, trans)
    atan_sub = torch.atan((gx2 - gx1) / (gy2 - gy1)) - torch.atan((px2 - px1) / (py2 - py1))
    return overlap, atan_sub.expand(overlap.shape).contiguous()


def _xiou_backward(fn, forward, grad, bboxes, gtboxes, trans, is_cross, mode):
    out_shape = forward(bboxes, gtboxes).shape
    check(grad.numel() == math.prod(out_shape), f"{fn}: grad should have the forward's {math.prod(out_shape)} "
          f"elements (shape {list(out_shape)}), got shape {list(grad.shape)}.")
    return _vjp(forward, (bboxes, gtboxes), grad.reshape(out_shape))


def npu_ciou_backward(grad, bboxes, gtboxes, atan_sub=None, trans=False, is_cross=True, mode=0):
    return _xiou_backward("npu_ciou_backward",
                          lambda b, g: _boxes.npu_ciou(b, g, trans, is_cross, mode, False),
                          grad, bboxes, gtboxes, trans, is_cross, mode)


def npu_diou_backward(grad, bboxes, gtboxes, trans=False, is_cross=False, mode=0):
    return _xiou_backward("npu_diou_backward", lambda b, g: _boxes.npu_diou(b, g, trans, is_cross, mode),
                          grad, bboxes, gtboxes, trans, is_cross, mode)


def npu_giou_backward(grad, bboxes, gtboxes, trans=False, is_cross=False, mode=0):
    return _xiou_backward("npu_giou_backward", lambda b, g: _boxes.npu_giou(b, g, trans, is_cross, mode),
                          grad, bboxes, gtboxes, trans, is_cross, mode)


def npu_ps_roi_pooling_backward(output_grad, rois, spatial_scale, group_size, output_dim, input_size):
    """d x of npu_ps_roi_pooling for x (rois.size(0), output_dim *
    group_size^2, input_size[0], input_size[1])."""
    fn = "npu_ps_roi_pooling_backward"
    check(len(input_size) >= 2, f"{fn}: The length of param 'input_size' must be greater than or equal to 2.")
    check(rois.dim() == 3 and rois.shape[1] == 5, f"{fn}: rois should have shape (B, 5, R), got "
          f"{list(rois.shape)}.")
    shape = [rois.shape[0], output_dim * group_size * group_size, int(input_size[0]), int(input_size[1])]
    expected = [rois.shape[0] * rois.shape[2], output_dim, group_size, group_size]
    check(list(output_grad.shape) == expected, f"{fn}: output_grad should have shape {expected}, got "
          f"{list(output_grad.shape)}.")
    x = output_grad.new_zeros(shape)
    return _vjp(lambda t: _boxes.npu_ps_roi_pooling(t, rois, spatial_scale, group_size, output_dim), (x,),
                output_grad)[0]


def npu_roi_alignbk(self, rois, xdiff_shape, pooled_width, pooled_height, spatial_scale, sample_num,
                    roi_end_mode=None):
    """d features (of shape xdiff_shape) of npu_roi_align given its output gradient ``self``."""
    fn = "npu_roi_alignbk"
    check(len(xdiff_shape) == 4, f"{fn}: xdiff_shape should be (N, C, H, W), got {list(xdiff_shape)}.")
    expected = [rois.shape[0], xdiff_shape[1], pooled_height, pooled_width]
    check(list(self.shape) == expected, f"{fn}: the gradient should have shape {expected}, got {list(self.shape)}.")
    mode = 1 if roi_end_mode is None else roi_end_mode
    x = self.new_zeros(list(xdiff_shape))
    return _vjp(lambda t: _boxes.npu_roi_align(t, rois, spatial_scale, pooled_height, pooled_width, sample_num, mode),
                (x,), self)[0]


# --- recurrent ---------------------------------------------------------------------------

def _last_step(g, like):
    """The real kernels read only the last time step of gradh / gradc."""
    if g is None:
        return torch.zeros_like(like)
    return g[-1].reshape(like.shape) if g.dim() == 3 else g.reshape(like.shape)


def _lstm_cell_grads(dh, dc, c_prev, i, j, f, o, tanhc):
    """(d gates in (i, f, g, o) order, d c_prev) of one LSTM step from its saved gates."""
    d_o = dh * tanhc
    dc = dc + dh * o * (1 - tanhc * tanhc)
    d_i, d_j, d_f = dc * j, dc * i, dc * c_prev
    gates = torch.cat((d_i * i * (1 - i), d_f * f * (1 - f), d_j * (1 - j * j), d_o * o * (1 - o)), dim=-1)
    return gates, dc * f


def npu_lstm_backward(grady, gradh, gradc, input, weight, bias, hx, cx, y_output, h_output, c_output, i, j, f, o,
                      tanhc):
    """(d input, d weight, d bias, d hx, d cx) of vNPU's npu_lstm (time-major)."""
    fn = "npu_lstm_backward"
    check(input.dim() == 3, f"{fn}: input should be (seq_len, batch, input_size), got {list(input.shape)}.")
    steps, batch, in_size = input.shape
    hidden = weight.shape[1] // 4
    check(list(weight.shape) == [in_size + hidden, 4 * hidden], f"{fn}: weight should be "
          f"(input_size + hidden, 4 * hidden) = {[in_size + hidden, 4 * hidden]}, got {list(weight.shape)}.")
    state = (steps, batch, hidden)
    for name, t in (("c_output", c_output), ("i", i), ("j", j), ("f", f), ("o", o), ("tanhc", tanhc)):
        check(t.numel() == math.prod(state), f"{fn}: {name} should have shape {list(state)}, got {list(t.shape)}.")
    h0, c0 = hx.reshape(batch, hidden), cx.reshape(batch, hidden)
    c_all, h_all = c_output.reshape(state), h_output.reshape(state)
    gy = torch.zeros(state, dtype=input.dtype, device=input.device) if grady is None else grady.reshape(state)
    dh, dc = _last_step(gradh, h0), _last_step(gradc, c0)
    w_hh = weight[in_size:]
    d_gates = []
    for t in range(steps - 1, -1, -1):
        c_prev = c_all[t - 1] if t > 0 else c0
        gates, dc = _lstm_cell_grads(dh + gy[t], dc, c_prev, i.reshape(state)[t], j.reshape(state)[t],
                                     f.reshape(state)[t], o.reshape(state)[t], tanhc.reshape(state)[t])
        d_gates.append(gates)
        dh = torch.matmul(gates, w_hh.t())
    d_gates = torch.stack(d_gates[::-1])  # (T, B, 4H)
    h_prev = torch.cat((h0.unsqueeze(0), h_all[:-1]), dim=0)
    d_x = torch.matmul(d_gates, weight[:in_size].t())
    d_w = torch.cat((input, h_prev), dim=-1).reshape(-1, in_size + hidden).t().matmul(d_gates.reshape(-1, 4 * hidden))
    d_b = d_gates.sum((0, 1))
    return d_x, d_w, d_b.reshape(bias.shape), dh.reshape(hx.shape), dc.reshape(cx.shape)


def npu_lstm_cell_backward(grady, gradh, gradc, input, w_ih, w_hh, h, c, y_output, h_output, c_output, i, j, f, o,
                           tanhc):
    """(d input, d w_ih, d w_hh, d b_ih, d b_hh, d h, d c) of npu_lstm_cell."""
    fn = "npu_lstm_cell_backward"
    check(input.dim() == 2, f"{fn}: input should be (batch, input_size), got {list(input.shape)}.")
    hidden = w_hh.shape[0]
    check(list(w_hh.shape) == [hidden, 4 * hidden] and list(w_ih.shape) == [input.shape[1], 4 * hidden],
          f"{fn}: w_ih {list(w_ih.shape)} and w_hh {list(w_hh.shape)} should be (input_size, 4 * hidden) and "
          "(hidden, 4 * hidden).")
    shape = (input.shape[0], hidden)
    dh = torch.zeros(shape, dtype=input.dtype, device=input.device)
    for g in (grady, gradh):
        if g is not None:
            dh = dh + g.reshape(shape)
    dc = torch.zeros(shape, dtype=input.dtype, device=input.device) if gradc is None else gradc.reshape(shape)
    gates, dc_prev = _lstm_cell_grads(dh, dc, c.reshape(shape), i.reshape(shape), j.reshape(shape),
                                      f.reshape(shape), o.reshape(shape), tanhc.reshape(shape))
    d_b = gates.sum(0)
    return (torch.matmul(gates, w_ih.t()), torch.matmul(input.t(), gates), torch.matmul(h.reshape(shape).t(), gates),
            d_b, d_b.clone(), torch.matmul(gates, w_hh.t()).reshape(h.shape), dc_prev.reshape(c.shape))


def npu_gru_backward(grady, gradh, input, weight_input, weight_hidden, bias_input, bias_hidden, seq_length, hx,
                     y_output, h_output, output_updata, output_reset, output_new, hidden_new):
    """(d weight_input, d weight_hidden, d input, d bias_input, d bias_hidden,
    d hx) of vNPU's npu_gru (time-major), from its saved z, r, n, W_hn h + b_hn."""
    fn = "npu_gru_backward"
    check(input.dim() == 3, f"{fn}: input should be (seq_len, batch, input_size), got {list(input.shape)}.")
    steps, batch, in_size = input.shape
    hidden = weight_hidden.shape[0]
    check(list(weight_hidden.shape) == [hidden, 3 * hidden] and list(weight_input.shape) == [in_size, 3 * hidden],
          f"{fn}: weight_input {list(weight_input.shape)} and weight_hidden {list(weight_hidden.shape)} should be "
          "(input_size, 3 * hidden) and (hidden, 3 * hidden).")
    state = (steps, batch, hidden)
    z, r, n, hn = (t.reshape(state) for t in (output_updata, output_reset, output_new, hidden_new))
    h_all = h_output.reshape(state)
    h0 = hx.reshape(batch, hidden)
    gy = torch.zeros(state, dtype=input.dtype, device=input.device) if grady is None else grady.reshape(state)
    dh = _last_step(gradh, h0)
    dxg, dhg = [], []
    for t in range(steps - 1, -1, -1):
        h_prev = h_all[t - 1] if t > 0 else h0
        d = dh + gy[t]
        dz = d * (h_prev - n[t]) * z[t] * (1 - z[t])
        dn = d * (1 - z[t]) * (1 - n[t] * n[t])
        dr = dn * hn[t] * r[t] * (1 - r[t])
        x_gates = torch.cat((dr, dz, dn), dim=-1)
        h_gates = torch.cat((dr, dz, dn * r[t]), dim=-1)
        dxg.append(x_gates)
        dhg.append(h_gates)
        dh = d * z[t] + torch.matmul(h_gates, weight_hidden.t())
    dxg, dhg = torch.stack(dxg[::-1]), torch.stack(dhg[::-1])
    h_prev = torch.cat((h0.unsqueeze(0), h_all[:-1]), dim=0)
    d_wi = input.reshape(-1, in_size).t().matmul(dxg.reshape(-1, 3 * hidden))
    d_wh = h_prev.reshape(-1, hidden).t().matmul(dhg.reshape(-1, 3 * hidden))
    d_x = torch.matmul(dxg, weight_input.t())
    return (d_wi, d_wh, d_x, dxg.sum((0, 1)).reshape(bias_input.shape), dhg.sum((0, 1)).reshape(bias_hidden.shape),
            dh.reshape(hx.shape))


# --- FFT -------------------------------------------------------------------------------

def fft_r2c_backward(grad, dim, normalization, onesided, last_dim_size):
    """Real gradient of _fft_r2c: the inverse complex transform of the
    gradient, the one-sided half padded back to last_dim_size with zeros."""
    fn = "fft_r2c_backward"
    check(grad.is_complex(), f"{fn}: grad should be complex, got {grad.dtype}.")
    check(len(dim) >= 1, f"{fn}: dim should not be empty.")
    full = grad
    if onesided:
        last = _wrap_dim(fn, dim[-1], grad.dim())
        missing = last_dim_size - grad.shape[last]
        check(missing >= 0, f"{fn}: last_dim_size {last_dim_size} is smaller than the gradient's "
              f"{grad.shape[last]} entries along dimension {last}.")
        if missing > 0:
            zeros_shape = list(grad.shape)
            zeros_shape[last] = missing
            full = torch.cat((grad, grad.new_zeros(zeros_shape)), dim=last)
    return torch.real(torch.ops.aten._fft_c2c(full, list(dim), normalization, False))


def fft_c2r_backward(grad, dim, normalization):
    """Complex gradient of the one-sided _fft_c2r: the one-sided forward
    transform of the gradient, entries whose mirror image lies outside the
    one-sided half counted twice."""
    fn = "fft_c2r_backward"
    check(not grad.is_complex(), f"{fn}: grad should be real, got {grad.dtype}.")
    check(len(dim) >= 1, f"{fn}: dim should not be empty.")
    out = torch.ops.aten._fft_r2c(grad, list(dim), normalization, True)
    last = _wrap_dim(fn, dim[-1], grad.dim())
    length, half = grad.shape[last], out.shape[last]
    twice = length - half
    if twice > 0:
        scale = torch.ones(half, dtype=grad.dtype, device=grad.device)
        scale[1:1 + twice] = 2
        shape = [1] * out.dim()
        shape[last] = half
        out = out * scale.reshape(shape)
    return out


def stft_backward(grad_output, self, n_fft, hop_length=None, win_length=None, window=None, normalized=False,
                  onesided=None, return_complex=None):
    grad = grad_output if grad_output.is_complex() else torch.view_as_complex(grad_output.contiguous())
    return _vjp(lambda x: torch.stft(x, n_fft, hop_length, win_length, window, normalized=normalized,
                                     onesided=onesided, return_complex=True), (self,), grad)[0]


# --- misc -------------------------------------------------------------------------------

def npu_sim_exponential_(self, lambd=1, generator=None):
    fn = "npu_sim_exponential_"
    check(lambd > 0.0, f"{fn} expects lambd > 0.0, but found lambd={lambd}")
    check(self.dtype in (torch.float16, torch.bfloat16, torch.float32),
          f"{fn}: input should be float16, bfloat16 or float32, but got {self.dtype}.")
    if math.isinf(lambd):
        return self.zero_()
    return self.exponential_(lambd, generator=generator)


def _amp_foreach_non_finite_check(scaled_grads):
    """True when any of the tensors holds an inf or a NaN (one host sync)."""
    if len(scaled_grads) == 0:
        return False
    flags = [torch.isfinite(t).all().to(torch.device("cpu")) if t.numel() else torch.tensor(True)
             for t in scaled_grads]
    return not bool(torch.stack(flags).all())


# --- definitions ---------------------------------------------------------------------------

define("npu_gelu_backward(Tensor grad_output, Tensor self, *, str approximate='none') -> Tensor", npu_gelu_backward)
define("npu_silu_backward(Tensor grad_output, Tensor x0, Tensor x1) -> Tensor", npu_silu_backward)

define("npu_dropout_gen_mask(int[] size, float p, *, ScalarType? dtype=None, Layout? layout=None, "
       "Device? device=None, bool? pin_memory=None) -> Tensor", npu_dropout_gen_mask)
define("_npu_dropout_gen_mask.Tensor(Tensor self, int[] size, float p, int seed, int offset, *, "
       "bool? parallel=True, bool? sync=None) -> Tensor", _npu_dropout_gen_mask)
define("npu_dropout_do_mask(Tensor self, Tensor mask, float p) -> (Tensor, Tensor)", npu_dropout_do_mask)
define("_npu_dropout(Tensor self, float p) -> (Tensor, Tensor)", _npu_dropout)
define("npu_dropout_backward(Tensor grad_output, Tensor mask, float p) -> Tensor", npu_dropout_backward)
define("_dropout_with_byte_mask(Tensor self, float p) -> (Tensor, Tensor)", _dropout_with_byte_mask)
define("_dropout_with_byte_mask_backward(Tensor grad_output, Tensor mask, float p) -> Tensor",
       _dropout_with_byte_mask_backward)
define("dropout_with_byte_mask(Tensor self, float p, bool train) -> Tensor", dropout_with_byte_mask)
define("npu_dropout_with_add_softmax_backward(Tensor grad, Tensor mask, Tensor softmax_out, Scalar alpha, "
       "float prob, int dim) -> (Tensor, Tensor)", npu_dropout_with_add_softmax_backward)

define("npu_max_backward(Tensor grad, int dim, Tensor indices, SymInt[] sizes, bool keepdim) -> Tensor",
       npu_max_backward)
define("npu_min_backward(Tensor grad, int dim, Tensor indices, SymInt[] sizes, bool keepdim) -> Tensor",
       npu_min_backward)
define("npu_gather_backward(Tensor grad, SymInt[] self_size, int dim, Tensor index, bool sparse_grad) -> Tensor",
       npu_gather_backward)
define("repeat_interleave_backward_int(Tensor grad, Tensor self, SymInt repeats, int? dim=None) -> Tensor",
       repeat_interleave_backward_int)
define("repeat_interleave_backward_tensor(Tensor grad, Tensor self, Tensor repeats, int? dim=None) -> Tensor",
       repeat_interleave_backward_tensor)
define("_npu_index_add(Tensor self, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor", _npu_index_add)
define("_npu_index_add_(Tensor(a!) self, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor(a!)",
       _npu_index_add_)
define("npu_masked_fill_range(Tensor self, Tensor start, Tensor end, Tensor value, int axis=-1) -> Tensor",
       npu_masked_fill_range)

define("l1_loss_backward(Tensor grad_output, Tensor self, Tensor target, int reduction) -> Tensor",
       l1_loss_backward)
define("kl_div_backward(Tensor grad_output, Tensor self, Tensor target, int reduction=Mean, *, "
       "bool log_target=False) -> Tensor", kl_div_backward)
define("kl_div_target_backward(Tensor grad_output, Tensor self, Tensor target, int reduction=Mean, *, "
       "bool log_target=False) -> Tensor", kl_div_target_backward)
define("npu_binary_cross_entropy_with_logits_backward(Tensor grad_output, Tensor self, Tensor target, "
       "Tensor? weight_opt, Tensor? pos_weight_opt, int reduction) -> Tensor",
       npu_binary_cross_entropy_with_logits_backward)
define("npu_softmax_cross_entropy_with_logits_backward(Tensor grad, Tensor self, Tensor labels) -> Tensor",
       npu_softmax_cross_entropy_with_logits_backward)

define("npu_linear_backward(Tensor grad, Tensor input, Tensor weight) -> (Tensor, Tensor)", npu_linear_backward)
define("npu_bmm_v2_mat1_backward(Tensor grad, Tensor mat1, Tensor mat2, SymInt[] size) -> Tensor",
       npu_bmm_v2_mat1_backward)
define("npu_bmm_v2_mat2_backward(Tensor grad, Tensor mat1, Tensor mat2, SymInt[] size) -> Tensor",
       npu_bmm_v2_mat2_backward)
define("matmul_double_backward(Tensor? grad_self, Tensor? grad_other, Tensor grad_out, Tensor self, Tensor other, "
       "bool[3] mask) -> (Tensor, Tensor, Tensor)", matmul_double_backward)
define("npu_confusion_transpose_backward(Tensor grad, int[] perm, SymInt[] shape, bool transpose_first) -> Tensor",
       npu_confusion_transpose_backward)

define("npu_layernorm_grad(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor mean, Tensor rstd, "
       "Tensor? weight, Tensor? bias) -> (Tensor, Tensor, Tensor)", npu_layernorm_grad)
define("npu_renorm_backward(Tensor grad, Tensor self, Scalar p, int dim, Scalar maxnorm) -> Tensor",
       npu_renorm_backward)
define("batch_norm_reduce(Tensor input, float eps) -> (Tensor, Tensor)", batch_norm_reduce)
define("batch_norm_gather_stats_update(Tensor input, Tensor mean, Tensor invstd, Tensor? running_mean, "
       "Tensor? running_var, float momentum, float eps, Tensor counts) -> (Tensor, Tensor)",
       batch_norm_gather_stats_update)
define("npu_normalize_batch(Tensor self, Tensor seq_len, int normalize_type=0) -> Tensor", npu_normalize_batch)

define("npu_scaled_masked_softmax_backward(Tensor y_grad, Tensor y, Tensor mask, Scalar scale, "
       "bool fixed_triu_mask) -> Tensor", npu_scaled_masked_softmax_backward)
define("npu_attn_softmax_(Tensor(a!) self) -> Tensor(a!)", npu_attn_softmax_)
define("npu_attn_softmax_backward_(Tensor(a!) self, Tensor grad_output, Tensor values) -> Tensor(a!)",
       npu_attn_softmax_backward_)
define("npu_fused_attention_score_backward(Tensor grad_output, Tensor softmax_output, Tensor query_layer, "
       "Tensor key_layer, Tensor value_layer, Tensor mask, Scalar scale, float keep_prob, "
       "bool query_transpose=False, bool key_transpose=False, bool value_transpose=False, "
       "bool dx_transpose=False) -> (Tensor, Tensor, Tensor)", npu_fused_attention_score_backward)
define("npu_multi_head_attention_backward(Tensor query, Tensor key, Tensor value, Tensor query_weight, "
       "Tensor key_weight, Tensor value_weight, Tensor out_proj_weight, Tensor? query_bias, Tensor? key_bias, "
       "Tensor? value_bias, Tensor? out_proj_bias, Tensor query_res, Tensor key_res, Tensor value_res, "
       "Tensor attn_scores, Tensor attn_res, Tensor context, Tensor y_grad, Tensor dropout_mask, "
       "int attn_head_num, int attn_dim_per_head, int src_len, int tgt_len, float dropout_prob, "
       "bool softmax_use_float) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, "
       "Tensor, Tensor)", npu_multi_head_attention_backward)


_CONV_ARGS = "int[] stride, int[] padding, int[] dilation, int groups"
_TCONV_ARGS = "int[] padding, int[] output_padding, int[] stride, int[] dilation, int groups"
_THREE = "(Tensor, Tensor, Tensor)"
define(f"npu_conv2d_backward(Tensor input, Tensor grad_output, Tensor weight, {_CONV_ARGS}, bool[3] output_mask) "
       f"-> {_THREE}", npu_conv2d_backward)
define(f"npu_conv3d_backward(Tensor input, Tensor grad, Tensor weight, {_CONV_ARGS}, bool[3] output_mask) "
       f"-> {_THREE}", npu_conv3d_backward)
define(f"npu_conv_transpose2d_backward(Tensor input, Tensor grad_output, Tensor weight, {_TCONV_ARGS}, "
       f"bool[3] output_mask) -> {_THREE}", npu_conv_transpose2d_backward)
define(f"npu_conv_transpose3d_backward(Tensor input, Tensor grad_output, Tensor weight, {_TCONV_ARGS}, "
       f"bool[3] output_mask) -> {_THREE}", npu_conv_transpose3d_backward)
define(f"npu_convolution_backward(Tensor input, Tensor grad_output, Tensor weight, {_CONV_ARGS}, "
       f"bool[3] output_mask) -> {_THREE}", npu_convolution_backward)
define(f"npu_convolution_transpose_backward(Tensor input, Tensor grad, Tensor weight, {_TCONV_ARGS}, "
       f"bool[3] grad_input_mask) -> {_THREE}", npu_convolution_transpose_backward)
define("slow_conv_dilated2d_backward(Tensor grad_output, Tensor self, Tensor weight, int[2] kernel_size, "
       "int[2] stride, int[2] padding, int[2] dilation, bool[3] output_mask) "
       "-> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)", slow_conv_dilated2d_backward)
define("slow_conv_transpose2d_backward(Tensor grad_output, Tensor self, Tensor weight, int[2] kernel_size, "
       "int[2] stride, int[2] padding, int[2] output_padding, int[2] dilation, bool[3] output_mask) "
       "-> (Tensor grad_input, Tensor grad_weight, Tensor grad_bias)", slow_conv_transpose2d_backward)
define("_conv_depthwise2d_backward(Tensor grad_output, Tensor self, Tensor weight, int[2] kernel_size, "
       "int[2] stride, int[2] padding, int[2] dilation, bool[2] output_mask) "
       "-> (Tensor grad_input, Tensor grad_weight)", _conv_depthwise2d_backward)

define("_npu_ciou(Tensor self, Tensor gtboxes, bool trans=False, bool is_cross=True, int mode=0, "
       "bool atan_sub_flag=False) -> (Tensor, Tensor)", _npu_ciou)
define("npu_ciou_backward(Tensor grad, Tensor bboxes, Tensor gtboxes, Tensor? atan_sub, bool trans=False, "
       "bool is_cross=True, int mode=0) -> (Tensor, Tensor)", npu_ciou_backward)
define("npu_diou_backward(Tensor grad, Tensor bboxes, Tensor gtboxes, bool trans=False, bool is_cross=False, "
       "int mode=0) -> (Tensor, Tensor)", npu_diou_backward)
define("npu_giou_backward(Tensor grad, Tensor bboxes, Tensor gtboxes, bool trans=False, bool is_cross=False, "
       "int mode=0) -> (Tensor, Tensor)", npu_giou_backward)
define("npu_ps_roi_pooling_backward(Tensor output_grad, Tensor rois, float spatial_scale, int group_size, "
       "int output_dim, SymInt[] input_size) -> Tensor", npu_ps_roi_pooling_backward)
define("npu_roi_alignbk(Tensor self, Tensor rois, int[] xdiff_shape, int pooled_width, int pooled_height, "
       "float spatial_scale, int sample_num, int? roi_end_mode=None) -> Tensor", npu_roi_alignbk)

define("npu_lstm_backward(Tensor? grady, Tensor? gradh, Tensor? gradc, Tensor input, Tensor weight, Tensor bias, "
       "Tensor hx, Tensor cx, Tensor y_output, Tensor h_output, Tensor c_output, Tensor i, Tensor j, Tensor f, "
       "Tensor o, Tensor tanhc) -> (Tensor, Tensor, Tensor, Tensor, Tensor)", npu_lstm_backward)
define("npu_lstm_cell_backward(Tensor? grady, Tensor? gradh, Tensor? gradc, Tensor input, Tensor w_ih, "
       "Tensor w_hh, Tensor h, Tensor c, Tensor y_output, Tensor h_output, Tensor c_output, Tensor i, Tensor j, "
       "Tensor f, Tensor o, Tensor tanhc) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
       npu_lstm_cell_backward)
define("npu_gru_backward(Tensor? grady, Tensor? gradh, Tensor input, Tensor weight_input, Tensor weight_hidden, "
       "Tensor bias_input, Tensor bias_hidden, Tensor seq_length, Tensor hx, Tensor y_output, Tensor h_output, "
       "Tensor output_updata, Tensor output_reset, Tensor output_new, Tensor hidden_new) "
       "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)", npu_gru_backward)

define("fft_r2c_backward(Tensor grad, int[] dim, int normalization, bool onesided, int last_dim_size) -> Tensor",
       fft_r2c_backward)
define("fft_c2r_backward(Tensor grad, int[] dim, int normalization) -> Tensor", fft_c2r_backward)
define("stft_backward(Tensor grad_output, Tensor self, int n_fft, int? hop_length=None, int? win_length=None, "
       "Tensor? window=None, bool normalized=False, bool? onesided=None, bool? return_complex=None) -> Tensor",
       stft_backward)

define("npu_sim_exponential_(Tensor(a!) self, float lambd=1, *, Generator? generator=None) -> Tensor(a!)",
       npu_sim_exponential_)
define("_amp_foreach_non_finite_check(Tensor[] scaled_grads) -> bool", _amp_foreach_non_finite_check)

__all__ = defined_in(globals())  # the operators' implementations (torch_npu/_public_names.py)
