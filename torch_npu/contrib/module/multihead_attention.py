"""fairseq's MultiheadAttention, in real torch_npu's fused form (npu_multi_head_attention).

Inputs are flat: query (bsz * tgt_len, E), key and value (bsz * src_len, E).
With N heads of size D = E / N:

    q = (query W_q^T + b_q) * D^-0.5,  k = key W_k^T + b_k,  v = value W_v^T + b_v
    each reshaped (bsz, len, N, D) -> (bsz, N, len, D)
    p = softmax(q k^T + key_padding_mask)     mask (bsz, N, tgt_len, src_len), additive
    out = (dropout(p) v -> (bsz * tgt_len, E)) W_o^T + b_o

Projections run in the activations' dtype (weights cast to it); the softmax
is taken in float32 (the kernel's softmax_use_float), then cast back.
Dropout masks come from NpuFairseqDropout's pre-generated queue (see
ensemble_dropout), in training mode only. Real torch_npu computes this only
after ``MHAConfig.set_fussion()`` (its unfused path is elided and returns
(None, None)); vNPU always computes it, and ``set_fussion`` just records the
choice.
"""

import math

import torch
from torch import nn
import torch.nn.functional as F

from .ensemble_dropout import NpuFairseqDropout

__all__ = ["Matmul_transpose", "MultiheadAttention", "MHAConfig", "quant_noise"]


def Matmul_transpose(tensor1, tensor2):
    """``tensor1 @ tensor2.transpose(-2, -1)``, with its gradients: real torch_npu's
    name for contrib.function.matmul_transpose's autograd Function."""
    from torch_npu.contrib.function.matmul_transpose import MatmulApply

    return MatmulApply.apply(tensor1, tensor2)


class MHAConfig:
    """Whether the fused attention kernel was requested (``set_fussion``)."""

    use_fussion_mha = False

    @classmethod
    def set_fussion(cls):
        cls.use_fussion_mha = True


_MHAConfig = MHAConfig  # real torch_npu's (private) name


def _quant_noise(module, p, block_size):
    """Quant-Noise (https://arxiv.org/abs/2004.07320): in training, blocks of a
    Linear's / Embedding's weight (``block_size`` input features) or of a
    Conv2d's (``block_size`` input channels of a 1x1 kernel, or whole k x k
    kernels, whose k*k must be a multiple of ``block_size``) are dropped with
    probability ``p`` and the rest scaled by 1 / (1 - p). p <= 0 returns the
    module untouched."""
    from torch_npu.utils._error_code import ErrCode, ops_error
    if p <= 0:
        return module
    if not isinstance(module, (nn.Linear, nn.Embedding, nn.Conv2d)):
        raise TypeError("Expected isinstance(module, (nn.Linear, nn.Embedding, nn.Conv2d))" + ops_error(ErrCode.TYPE))
    is_conv = module.weight.ndim == 4
    if not is_conv:
        if module.weight.size(1) % block_size != 0:
            raise ValueError("Input features must be a multiple of block sizes" + ops_error(ErrCode.VALUE))
    elif module.kernel_size == (1, 1):
        if module.in_channels % block_size != 0:
            raise ValueError("Input channels must be a multiple of block sizes" + ops_error(ErrCode.VALUE))
    elif (module.kernel_size[0] * module.kernel_size[1]) % block_size != 0:
        raise ValueError("Kernel size must be a multiple of block size" + ops_error(ErrCode.VALUE))

    def drop_blocks(mod, inputs):
        if not mod.training:
            return
        weight = mod.weight
        if not is_conv or mod.kernel_size == (1, 1):
            rows, features = weight.size(0), weight.size(1)
            mask = torch.zeros(features // block_size * rows, device=weight.device)
            mask.bernoulli_(p)
            mask = mask.repeat_interleave(block_size, -1).view(rows, features)
            if is_conv:
                mask = mask.view(rows, features, 1, 1)
        else:  # whole kernels
            mask = torch.zeros(weight.size(0), weight.size(1), device=weight.device)
            mask.bernoulli_(p)
            mask = mask[:, :, None, None].expand_as(weight)
        mod.weight.data = weight.masked_fill(mask.bool(), 0) / (1 - p)

    module.register_forward_pre_hook(drop_blocks)
    return module


quant_noise = _quant_noise  # the name vNPU exported first


class _NpuLinear(nn.Linear):
    """A Linear over 2-D (N, in) or 3-D (B, S, in) inputs, as the fused
    attention's projections take them; other ranks raise."""

    def forward(self, input):
        from torch_npu.utils._error_code import ErrCode, ops_error
        if input.dim() not in (2, 3):
            raise RuntimeError(f"_NpuLinear supports 2-D or 3-D inputs, got {input.dim()}-D"
                               + ops_error(ErrCode.NOT_SUPPORT))
        return F.linear(input, self.weight, self.bias)


class MultiheadAttention(nn.Module):
    """MultiheadAttention(embed_dim, num_heads, kdim=None, vdim=None, dropout=0.0, bias=True,
    add_bias_kv=False, add_zero_attn=False, self_attention=False, encoder_decoder_attention=False,
    q_noise=0.0, qn_block_size=8).

    forward(query, key, value, bsz, tgt_len, s_len, key_padding_mask=None, ...) -> (attn, None).
    add_bias_kv / add_zero_attn and the incremental-decoding arguments
    (incremental_state, attn_mask, before_softmax) belong to fairseq's unfused
    path and are not supported on vNPU.
    """

    def __init__(self, embed_dim, num_heads, kdim=None, vdim=None, dropout=0.0, bias=True,
                 add_bias_kv=False, add_zero_attn=False, self_attention=False,
                 encoder_decoder_attention=False, q_noise=0.0, qn_block_size=8):
        super().__init__()
        if add_zero_attn:
            raise RuntimeError("MultiheadAttention: add_zero_attn is not supported on vNPU "
                               "(the fused attention kernel has no such input).")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self.qkv_same_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout_module = NpuFairseqDropout(dropout, module_name=self.__class__.__name__)
        self.dropout_prob = dropout
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.scaling = self.head_dim ** -0.5
        self.self_attention = self_attention
        self.encoder_decoder_attention = encoder_decoder_attention
        if self_attention and not self.qkv_same_dim:
            raise ValueError("Self-attention requires query, key and value to be of the same size")
        self.k_proj = _quant_noise(nn.Linear(self.kdim, embed_dim, bias=bias), q_noise, qn_block_size)
        self.v_proj = _quant_noise(nn.Linear(self.vdim, embed_dim, bias=bias), q_noise, qn_block_size)
        self.q_proj = _quant_noise(nn.Linear(embed_dim, embed_dim, bias=bias), q_noise, qn_block_size)
        self.out_proj = _quant_noise(nn.Linear(embed_dim, embed_dim, bias=bias), q_noise, qn_block_size)
        # fairseq's learned key/value biases: created and initialised as there,
        # but the fused kernel has no input for them, so forward refuses them.
        if add_bias_kv:
            self.bias_k = nn.Parameter(torch.empty(1, 1, embed_dim))
            self.bias_v = nn.Parameter(torch.empty(1, 1, embed_dim))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self.reset_parameters()

    def reset_parameters(self):
        # fairseq: the scaled init converges better when q, k, v share a size.
        gain = 1 / math.sqrt(2) if self.qkv_same_dim else 1.
        for proj in (self.k_proj, self.v_proj, self.q_proj):
            nn.init.xavier_uniform_(proj.weight, gain=gain)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            nn.init.xavier_normal_(self.bias_k)
            nn.init.xavier_normal_(self.bias_v)

    def forward(self, query, key, value, bsz, tgt_len, s_len, key_padding_mask=None,
                incremental_state=None, need_weights=True, static_kv=False, attn_mask=None,
                before_softmax=False, need_head_weights=False):
        if self.bias_k is not None:
            raise RuntimeError("MultiheadAttention(add_bias_kv=True).forward is not supported on vNPU: the fused "
                               "attention kernel has no input for bias_k / bias_v.")
        if incremental_state is not None or attn_mask is not None or before_softmax:
            raise RuntimeError("MultiheadAttention: incremental_state / attn_mask / before_softmax are not "
                               "supported on vNPU; pass the additive mask as key_padding_mask.")
        return self.multi_attn(query, key, value, key_padding_mask, bsz, tgt_len), None

    def multi_attn(self, query, key, value, key_padding_mask, bsz, tgt_len):
        if query.dim() != 2 or query.shape[0] != bsz * tgt_len:
            raise ValueError(f"query should be (bsz * tgt_len, embed_dim) = ({bsz * tgt_len}, "
                             f"{self.embed_dim}), but got {tuple(query.shape)}")
        if key.shape[0] % bsz:
            raise ValueError(f"key rows ({key.shape[0]}) should be a multiple of bsz ({bsz})")
        src_len = key.size(0) // bsz
        heads, dim = self.num_heads, self.head_dim

        def split(t, length):
            return t.reshape(bsz, length, heads, dim).permute(0, 2, 1, 3)

        def project(proj, x):
            # The fused kernel computes in the activations' dtype (float16
            # activations with a float32 module are its usual inputs).
            bias = None if proj.bias is None else proj.bias.to(x.dtype)
            return F.linear(x, proj.weight.to(x.dtype), bias)

        q = split(project(self.q_proj, query) * self.scaling, tgt_len)
        k = split(project(self.k_proj, key), src_len)
        v = split(project(self.v_proj, value), src_len)
        scores = torch.matmul(q.float(), k.float().transpose(-2, -1))
        if key_padding_mask is not None:
            scores = scores + key_padding_mask.float()
        probs = torch.softmax(scores, dim=-1).to(q.dtype)
        if self.training and self.dropout_prob > 0:
            keep = self.dropout_module([(bsz, heads, tgt_len, src_len), query.dtype, query.device])
            if keep is not None:
                probs = probs * keep.to(probs.dtype) / (1 - self.dropout_prob)
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(bsz * tgt_len, self.embed_dim)
        return project(self.out_proj, context)
