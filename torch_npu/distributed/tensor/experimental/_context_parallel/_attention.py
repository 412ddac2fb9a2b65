"""The npu attention kernels in torch's context-parallel ring attention.

On npu, ``F.scaled_dot_product_attention`` runs
``aten._scaled_dot_product_fused_attention_overrideable`` and its backward
(csrc/ops/attention.cpp). torch's context parallelism rings only CUDA's
kernels (flash, efficient, cudnn), so this module adds the overrideable pair:

- DTensor handlers for the pair, put in torch's table of context-parallel
  handlers (``custom_ops``, which ``_enable_context_parallel_dispatcher``
  installs and removes). Each runs torch's own ring loops
  (``_templated_ring_attention`` and its backward: key/value rotation,
  causal block skipping, head-tail load balancing) with the npu kernel on
  every block.
- The pair's sharding strategies with the sequence dimension added
  (_sdpa_rules has the others), registered and removed with torch's
  context-parallel strategies.
- The merge of the blocks' results runs ``torch_npu.npu_ring_attention_update``,
  the npu kernel that merges attention blocks by their softmax statistics, as
  real torch_npu's ring does. torch's merger keeps tensors of other devices.

Note [A logsumexp as ring-update statistics]
npu_ring_attention_update merges two blocks given each one's row maximum m
and row sum l of exp(scores - m). A block's logsumexp is such a pair with
m = logsumexp and l = 1, and the merged pair gives the merged logsumexp
m + log(l). So the merge is exact in that form, whatever the kernel keeps.
"""

import torch
import torch.distributed.tensor.experimental._context_parallel._attention as _torch_cp
import torch.distributed.tensor.experimental._context_parallel._sharding_rules as _torch_cp_rules
from torch.distributed.tensor import DTensor
from torch.distributed.tensor._op_schema import OpSchema, OpStrategy

import torch_npu
from torch_npu.distributed.tensor import _sdpa_rules

aten = torch.ops.aten
_FORWARD = _sdpa_rules.FORWARD
_BACKWARD = _sdpa_rules.BACKWARD
_SEQ_DIM = _sdpa_rules.SEQ_DIM  # BNSD, as torch's ring assumes
_SOFTMAX_COPIES = 8  # npu_ring_attention_update's statistics repeat each row's value 8 times


# --- the ring ---------------------------------------------------------------------------------

_NO_MASK = ("context parallel attention on npu takes no attn_mask (use is_causal), as torch's flash ring takes "
            "none.")


def _ring_forward(mesh, query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False,
                  *, scale=None):
    if attn_bias is not None:
        raise RuntimeError(_NO_MASK)
    if return_debug_mask:
        raise RuntimeError("context parallel attention on npu does not return the debug attention mask.")
    return _torch_cp._templated_ring_attention(
        mesh.get_group(), _SEQ_DIM, _FORWARD, query=query, key=key, value=value, is_causal=is_causal,
        dropout_p=dropout_p, scale=scale)


def _ring_backward(mesh, grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q,
                   cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, *, scale=None):
    # Each block's backward recomputes its probabilities from the merged
    # logsumexp and output, so the ring's gradients are the whole attention's.
    # With convert_to_f32 (torch's default) the blocks run in float32 too, so
    # a half-precision gradient is rounded once, after the ring's sum, as the
    # whole attention's is; else the blocks' roundings add up.
    dtype = query.dtype
    if _torch_cp._cp_options.convert_to_f32 and dtype in (torch.float16, torch.bfloat16):
        grad_out, query, key, value, out = (t.float() for t in (grad_out, query, key, value, out))
    grads = _torch_cp._templated_ring_attention_backward(
        mesh.get_group(), _SEQ_DIM, _BACKWARD, grad_out=grad_out, grad_out_name="grad_out", query=query, key=key,
        value=value, out=out, logsumexp=logsumexp, is_causal=is_causal, attn_bias=attn_bias,
        grad_input_mask=grad_input_mask, cum_seq_q=cum_seq_q, cum_seq_k=cum_seq_k, max_q=max_q, max_k=max_k,
        dropout_p=dropout_p, philox_seed=philox_seed, philox_offset=philox_offset, scale=scale)
    return (*(g.to(dtype) for g in grads[:3]), *grads[3:])


_RINGS = {_FORWARD: _ring_forward, _BACKWARD: _ring_backward}


def _ring_handler(op_call, args, kwargs):
    """DTensor's handler for the pair while context parallelism is on: the
    ring on the local shards, wrapped with the propagated placements."""
    bias = args[3] if op_call is _FORWARD and len(args) > 3 else kwargs.get("attn_bias")
    if op_call is _FORWARD and bias is not None:
        raise RuntimeError(_NO_MASK)
    dispatcher = DTensor._op_dispatcher
    op_info = dispatcher.unwrap_to_op_info(op_call, args, kwargs)
    dispatcher.sharding_propagator.propagate(op_info)
    sharding = op_info.output_sharding
    if sharding is None or sharding.needs_redistribute:
        raise RuntimeError(f"context parallel attention on npu: {op_call} needs q, k and v sharded on the sequence "
                           "dimension (2) of one mesh dimension, as context_parallel shards them.")
    local = _RINGS[op_call](op_info.compute_mesh, *op_info.local_args, **op_info.local_kwargs)
    return dispatcher.wrap(local, sharding.output_spec)


# --- the merge --------------------------------------------------------------------------------

def _ring_update(out, lse, block_out, block_lse):
    """(out, lse) of two BNSD blocks merged by npu_ring_attention_update
    (Note [A logsumexp as ring-update statistics]); lse is BNS1."""
    b, n, s, d = out.shape

    def sbh(t):
        return t.permute(2, 0, 1, 3).reshape(s, b, n * d)

    def stats(t):
        return t.expand(b, n, s, _SOFTMAX_COPIES).contiguous()

    ones = torch.ones(b, n, s, _SOFTMAX_COPIES, dtype=lse.dtype, device=lse.device)
    # Looked up on the module at each call, as real torch_npu's ring calls it.
    merged, row_max, row_sum = torch_npu.npu_ring_attention_update(
        sbh(out), stats(lse), ones, sbh(block_out.to(out.dtype)), stats(block_lse.to(lse.dtype)), ones)
    merged_lse = row_max[..., :1] + torch.log(row_sum[..., :1])
    return merged.reshape(s, b, n, d).permute(1, 2, 0, 3), merged_lse


class _NpuSDPAMerger(_torch_cp._SDPAMerger):
    """torch's ring merger, merging npu blocks with npu_ring_attention_update."""

    def _merge_one(self, block_out, block_lse, partial):
        if (block_out.device.type != "npu" or block_out.dim() != 4 or self._seq_dim != _SEQ_DIM
                or self._lse is None):
            return super()._merge_one(block_out, block_lse, partial)
        if block_lse.dim() < block_out.dim():
            block_lse = block_lse.unsqueeze(-1)
            self._should_lse_squeeze = True
        if not partial:
            self._out, self._lse = _ring_update(self._out, self._lse, block_out, block_lse)
            return
        # Load balancing: the block covers the second half of this rank's queries.
        half = self._out.size(_SEQ_DIM) // 2
        out, lse = self._out.clone(), self._lse.clone()
        merged_out, merged_lse = _ring_update(out.narrow(_SEQ_DIM, half, half), lse.narrow(_SEQ_DIM, half, half),
                                              block_out, block_lse)
        out.narrow(_SEQ_DIM, half, half).copy_(merged_out)
        lse.narrow(_SEQ_DIM, half, half).copy_(merged_lse)
        self._out, self._lse = out, lse


# --- sharding strategies ----------------------------------------------------------------------

_RING_DIMS = (*_sdpa_rules.BASE_DIMS, _SEQ_DIM)


def _forward_strategy(op_schema: OpSchema) -> OpStrategy:
    return _sdpa_rules.forward_strategy(op_schema, _RING_DIMS)


def _backward_strategy(op_schema: OpSchema) -> OpStrategy:
    return _sdpa_rules.backward_strategy(op_schema, _RING_DIMS)


def _register_strategies():
    """The pair's strategies, installed with torch's context-parallel ones."""
    torch_register = _torch_cp_rules.register_cp_sharding_rules

    def register_cp_sharding_rules():
        already = bool(_torch_cp_rules._cp_strategy_contexts)
        torch_register()
        if already:
            return
        for op, strategy, schema_info in ((_FORWARD, _forward_strategy, _sdpa_rules.FORWARD_SCHEMA_INFO),
                                          (_BACKWARD, _backward_strategy, None)):
            context = _torch_cp_rules._op_strategy_context(op, strategy, schema_info)
            _torch_cp_rules._original_strategies[op] = context.__enter__()
            _torch_cp_rules._cp_strategy_contexts[op] = context

    _torch_cp_rules.register_cp_sharding_rules = register_cp_sharding_rules


if not getattr(_torch_cp, "_npu_ring_installed", False):
    _torch_cp.custom_ops[_FORWARD] = _ring_handler
    _torch_cp.custom_ops[_BACKWARD] = _ring_handler
    _torch_cp._SDPAMerger = _NpuSDPAMerger
    _register_strategies()
    _torch_cp._npu_ring_installed = True
