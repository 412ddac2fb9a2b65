"""fairseq's MultiheadAttention as torch_npu ships it: one fused attention
(the formula of npu_multi_head_attention) over flat, batch-major inputs.

Shapes: query (bsz * tgt_len, E); key and value (bsz * src_len, kdim / vdim);
N heads of D = E / N features each. The computation:

    q = (query W_q^T + b_q) * D^-0.5,   k = key W_k^T + b_k,   v = value W_v^T + b_v
    q, k, v seen as (bsz, N, len, D)
    p = softmax(q k^T + key_padding_mask)       the mask additive, (bsz, N, tgt_len, src_len)
    out = (dropout(p) v, back to (bsz * tgt_len, E)) W_o^T + b_o

Like the Ascend kernel, the projections run in the activations' dtype (a
float32 module is cast to float16 activations) and the softmax in float32
(its softmax_use_float). Training-mode dropout takes its masks from
NpuFairseqDropout's drawn-ahead queue (see ensemble_dropout).

torch_npu computes this only once ``MHAConfig.set_fussion()`` was called and
returns (None, None) otherwise (it has no unfused path); vNPU always
computes it, and ``set_fussion`` only records the request.

Also here, because torch_npu has them in this module: fairseq's Quant-Noise
(``_quant_noise``), the 2-D / 3-D ``_NpuLinear`` and ``Matmul_transpose``.
"""

import math

import torch
from torch import nn
import torch.nn.functional as F

from .ensemble_dropout import NpuFairseqDropout

__all__ = ["Matmul_transpose", "MultiheadAttention", "MHAConfig", "quant_noise"]


def Matmul_transpose(tensor1, tensor2):
    """tensor1 @ tensor2^T (last two dims) with gradients; torch_npu's name here
    for contrib.function.matmul_transpose."""
    from torch_npu.contrib.function.matmul_transpose import MatmulApply

    return MatmulApply.apply(tensor1, tensor2)


class MHAConfig:
    """Records whether a model asked for the fused attention (``set_fussion``)."""

    use_fussion_mha = False

    @classmethod
    def set_fussion(cls):
        cls.use_fussion_mha = True


_MHAConfig = MHAConfig  # torch_npu's tests import the private spelling


# ----------------------------------------------------------------------------
# Quant-Noise (Fan et al., https://arxiv.org/abs/2004.07320)
#
# While training, whole blocks of a weight are zeroed with probability p and
# the survivors scaled by 1 / (1 - p), so that the model learns to live with
# the blocks a later product quantisation will share. A block is
# ``block_size`` consecutive input features of one output row (Linear,
# Embedding, 1x1 Conv2d), or one whole k x k kernel (other Conv2d).


def _check_quant_noise_blocks(module, block_size):
    """Refuses a module whose weight does not split into blocks; the texts are fairseq's."""
    from torch_npu.utils._error_code import ErrCode, ops_error

    if not isinstance(module, (nn.Linear, nn.Embedding, nn.Conv2d)):
        raise TypeError("Expected isinstance(module, (nn.Linear, nn.Embedding, nn.Conv2d))" + ops_error(ErrCode.TYPE))
    if module.weight.ndim != 4:
        features, what = module.weight.size(1), "Input features must be a multiple of block sizes"
    elif module.kernel_size == (1, 1):
        features, what = module.in_channels, "Input channels must be a multiple of block sizes"
    else:
        features, what = math.prod(module.kernel_size), "Kernel size must be a multiple of block size"
    if features % block_size:
        raise ValueError(what + ops_error(ErrCode.VALUE))


def _dropped_blocks(weight, block_size, p, whole_kernels):
    """A bool mask shaped like ``weight``, True on the entries of the blocks drawn for dropping."""
    rows, columns = weight.shape[:2]
    if whole_kernels:
        per_kernel = torch.zeros(rows, columns, device=weight.device).bernoulli_(p)
        return per_kernel[:, :, None, None].expand_as(weight).bool()
    per_block = torch.zeros(rows * (columns // block_size), device=weight.device).bernoulli_(p)
    return per_block.repeat_interleave(block_size).view(weight.shape).bool()


def _quant_noise(module, p, block_size):
    """Adds Quant-Noise to ``module`` (a forward pre-hook) and returns it; p <= 0 leaves it as it is."""
    if p <= 0:
        return module
    _check_quant_noise_blocks(module, block_size)
    whole_kernels = module.weight.ndim == 4 and module.kernel_size != (1, 1)

    def drop_blocks_when_training(mod, _inputs):
        if mod.training:
            dropped = _dropped_blocks(mod.weight, block_size, p, whole_kernels)
            mod.weight.data = mod.weight.masked_fill(dropped, 0) / (1 - p)

    module.register_forward_pre_hook(drop_blocks_when_training)
    return module


quant_noise = _quant_noise  # the public name vNPU exported first


class _NpuLinear(nn.Linear):
    """nn.Linear restricted to what the fused attention's projections take:
    (N, in) or (B, S, in) inputs."""

    def forward(self, input):
        if input.dim() in (2, 3):
            return F.linear(input, self.weight, self.bias)
        from torch_npu.utils._error_code import ErrCode, ops_error
        raise RuntimeError(f"_NpuLinear supports 2-D or 3-D inputs, got {input.dim()}-D"
                           + ops_error(ErrCode.NOT_SUPPORT))


def _in_activation_dtype(linear, x):
    # The fused kernel projects in the activations' precision, whatever the module's.
    bias = None if linear.bias is None else linear.bias.to(x.dtype)
    return F.linear(x, linear.weight.to(x.dtype), bias)


class MultiheadAttention(nn.Module):
    """MultiheadAttention(embed_dim, num_heads, kdim=None, vdim=None, dropout=0.0, bias=True,
    add_bias_kv=False, add_zero_attn=False, self_attention=False, encoder_decoder_attention=False,
    q_noise=0.0, qn_block_size=8).

    ``forward(query, key, value, bsz, tgt_len, s_len, key_padding_mask=None, ...)``
    returns (attention output, None). The module's attributes are fairseq's.
    What only fairseq's unfused path can do is refused: add_zero_attn at
    construction, and in forward the learned bias_k / bias_v of
    add_bias_kv (created, as torch_npu does, but the kernel has no input for
    them), incremental_state, attn_mask and before_softmax.
    """

    def __init__(self, embed_dim, num_heads, kdim=None, vdim=None, dropout=0.0, bias=True,
                 add_bias_kv=False, add_zero_attn=False, self_attention=False,
                 encoder_decoder_attention=False, q_noise=0.0, qn_block_size=8):
        super().__init__()
        if add_zero_attn:
            raise RuntimeError("MultiheadAttention: add_zero_attn is not supported on vNPU "
                               "(the fused attention kernel has no such input).")
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        kdim = embed_dim if kdim is None else kdim
        vdim = embed_dim if vdim is None else vdim
        qkv_same_dim = kdim == vdim == embed_dim
        if self_attention and not qkv_same_dim:
            raise ValueError("Self-attention requires query, key and value to be of the same size")

        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim, self.vdim, self.qkv_same_dim = kdim, vdim, qkv_same_dim
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.self_attention = self_attention
        self.encoder_decoder_attention = encoder_decoder_attention
        self.add_zero_attn = add_zero_attn
        self.dropout_prob = dropout
        self.dropout_module = NpuFairseqDropout(dropout, module_name=type(self).__name__)

        def projection(in_features):
            return _quant_noise(nn.Linear(in_features, embed_dim, bias=bias), q_noise, qn_block_size)

        # Created in fairseq's order, which fixes the state_dict's order and the random draws.
        self.k_proj = projection(kdim)
        self.v_proj = projection(vdim)
        self.q_proj = projection(embed_dim)
        self.out_proj = projection(embed_dim)
        # fairseq's learned key / value biases exist, but forward refuses them.
        self.bias_k = nn.Parameter(torch.empty(1, 1, embed_dim)) if add_bias_kv else None
        self.bias_v = nn.Parameter(torch.empty(1, 1, embed_dim)) if add_bias_kv else None
        self.reset_parameters()

    def reset_parameters(self):
        """fairseq's initialisation; the random draws come in its order."""
        # With q, k and v of one size fairseq scales their init by 1/sqrt(2): it converges better.
        input_gain = 1 / math.sqrt(2) if self.qkv_same_dim else 1.
        for linear, gain in ((self.k_proj, input_gain), (self.v_proj, input_gain), (self.q_proj, input_gain),
                             (self.out_proj, 1.)):
            nn.init.xavier_uniform_(linear.weight, gain=gain)
        if self.out_proj.bias is not None:
            nn.init.zeros_(self.out_proj.bias)
        for learned in (self.bias_k, self.bias_v):
            if learned is not None:
                nn.init.xavier_normal_(learned)

    def forward(self, query, key, value, bsz, tgt_len, s_len, key_padding_mask=None,
                incremental_state=None, need_weights=True, static_kv=False, attn_mask=None,
                before_softmax=False, need_head_weights=False):
        if self.bias_k is not None:
            raise RuntimeError("MultiheadAttention(add_bias_kv=True).forward is not supported on vNPU: the fused "
                               "attention kernel has no input for bias_k / bias_v.")
        if incremental_state is not None or attn_mask is not None or before_softmax:
            raise RuntimeError("MultiheadAttention: incremental_state / attn_mask / before_softmax are not "
                               "supported on vNPU; pass the additive mask as key_padding_mask.")
        # The kernel never returns attention weights, whatever need_weights asks.
        return self.multi_attn(query, key, value, key_padding_mask, bsz, tgt_len), None

    def _split_heads(self, flat, bsz):
        """(bsz * len, E) -> (bsz, heads, len, head_dim)."""
        return flat.view(bsz, -1, self.num_heads, self.head_dim).transpose(1, 2)

    def _attention_probs(self, q, k, key_padding_mask):
        """softmax(q k^T + mask) in float32, returned in q's dtype, with dropout in training."""
        logits = q.float() @ k.float().transpose(-2, -1)
        if key_padding_mask is not None:
            logits = logits + key_padding_mask.float()
        probs = logits.softmax(dim=-1).to(q.dtype)
        if not self.training or self.dropout_prob <= 0:
            return probs
        # Asked for the mask itself (None until the drawn-ahead queue has one).
        keep = self.dropout_module([probs.shape, probs.dtype, probs.device])
        if keep is None:
            return probs
        return probs * keep.to(probs.dtype) / (1 - self.dropout_prob)

    def multi_attn(self, query, key, value, key_padding_mask, bsz, tgt_len):
        """The fused attention on flat inputs; see the module docstring."""
        if query.dim() != 2 or query.shape[0] != bsz * tgt_len:
            raise ValueError(f"query should be (bsz * tgt_len, embed_dim) = ({bsz * tgt_len}, "
                             f"{self.embed_dim}), but got {tuple(query.shape)}")
        if key.shape[0] % bsz:
            raise ValueError(f"key rows ({key.shape[0]}) should be a multiple of bsz ({bsz})")
        q = self._split_heads(_in_activation_dtype(self.q_proj, query) * self.scaling, bsz)
        k = self._split_heads(_in_activation_dtype(self.k_proj, key), bsz)
        v = self._split_heads(_in_activation_dtype(self.v_proj, value), bsz)
        context = self._attention_probs(q, k, key_padding_mask) @ v
        merged = context.transpose(1, 2).reshape(bsz * tgt_len, self.embed_dim)
        return _in_activation_dtype(self.out_proj, merged)
