"""NpuFusedOptimizerBase: the base class of torch_npu's fused optimizers.

On Ascend, torch_npu's fused optimizers move every parameter, gradient and
state tensor of a parameter group into one flat buffer per dtype (float32,
float16) and update each buffer with a few kernels. vNPU keeps the tensors
where they are and computes the same math over the lists of tensors of each
(group, dtype) bucket with torch's multi-tensor (``torch._foreach_*``) ops and
plain torch ops, so results are those of the per-tensor algorithm and the
optimizers work on cpu tensors as well as npu ones.

What a subclass provides:
- ``_init_param_state(p, ...)``: creates ``self.state[p]`` (real torch_npu's
  hook, same signature per optimizer);
- ``_group_step(group_index)``: updates one parameter group, walking its
  buckets with ``self._buckets(group_index)``.

The attributes real torch_npu's code and tests look at exist with vNPU's
meaning: ``params_lists_indexed_by_group[g]`` is ``[float32 params, float16
params]`` of group g (those with a gradient), ``combined_param_states_indexed_by_group[g]``
holds per dtype a dict from state name to the list of per-parameter state
tensors (the foreach operands, not one buffer). They are rebuilt on every
step, so parameters that get a gradient later join the update (real torch_npu
fixes the set at the first step). ``get_combined_params``/``get_combined_grads``
(real's flat buffers) are not provided: there are no flat buffers.
"""

import math

import torch
from torch.optim.optimizer import Optimizer

from torch_npu.utils._error_code import ErrCode, pta_error


def _refuse_invalid(*checks):
    """Raises torch_npu's ValueError ("Invalid <what>: <value>") for the first
    (invalid, what, value) whose condition holds: the optimizers' argument checks."""
    for invalid, what, value in checks:
        if invalid:
            raise ValueError(f"Invalid {what}: {value}" + pta_error(ErrCode.VALUE))

__all__ = ["NpuFusedOptimizerBase"]

_BUCKET_DTYPES = (torch.float32, torch.float16)


def _grads_of(optimizer):
    return [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]


def _total_norm(grads, norm_type):
    """The norm of all gradients together, computed in float32 (as the fused
    kernels do), as a 0-d float32 tensor on the first gradient's device."""
    device = grads[0].device
    floats = [g.float() for g in grads]
    if math.isinf(norm_type):
        return torch.stack([f.abs().max().to(device) for f in floats]).max()
    parts = [f.abs().pow(norm_type).sum().to(device) for f in floats]
    return torch.stack(parts).sum().pow(1.0 / norm_type)


class _FusedOptimizerMixin:
    """What every torch_npu fused optimizer has on top of torch.optim.Optimizer."""

    is_fused_optimizer = True

    def clip_grad_norm_fused_(self, max_norm, norm_type=2):
        """Clips the gradients of all parameter groups together so that their
        total ``norm_type`` norm is at most ``max_norm`` (the gradients are
        scaled in place by max_norm / (norm + 1e-6) when that is below 1), as
        torch.nn.utils.clip_grad_norm_ does; returns the total norm (float32)."""
        grads = _grads_of(self)
        if len(grads) == 0:
            return torch.tensor(0.)
        max_norm = float(max_norm)
        norm_type = float(norm_type)
        total_norm = _total_norm(grads, norm_type)
        clip_coef = max_norm / (total_norm + 1e-6)
        if clip_coef < 1:
            with torch.no_grad():
                for g in grads:
                    g.mul_(clip_coef.to(g.device))
        return total_norm


class NpuFusedOptimizerBase(_FusedOptimizerMixin, Optimizer):
    """Base class of the fused optimizers: collects each group's parameters
    that have a gradient into float32 and float16 buckets, creates their
    state, and calls the subclass's ``_group_step`` per group.

    Parameters must be float32 or float16 (TypeError otherwise), gradients
    dense (RuntimeError otherwise). ``zero_grad`` zeroes gradients in place;
    ``set_to_none=True`` is refused as on torch_npu (its gradients live in a
    shared buffer there).
    """

    def __init__(self, params, default):
        super().__init__(params, default)
        self._reset_buckets()

    def _reset_buckets(self):
        self.params_lists_indexed_by_group = []
        self.combined_params_indexed_by_group = None
        self.combined_grads_indexed_by_group = None
        self.combined_param_states_indexed_by_group = None
        self.is_params_grads_combined = False
        self.is_states_combined = False

    # Instance attributes (beyond defaults, state and param_groups, which
    # torch.optim pickles) that a copy or pickle of the optimizer must keep.
    _pickled_attributes = ()

    def __getstate__(self):
        state = super().__getstate__()
        for name in self._pickled_attributes:
            state[name] = getattr(self, name)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "params_lists_indexed_by_group" not in self.__dict__:
            self._reset_buckets()

    def _sparse_grad_message(self):
        return f"{type(self).__name__} does not support sparse gradients"

    # ---- buckets -----------------------------------------------------------

    def _maybe_init_combined_params_and_grads(self):
        """(Re)builds the per-group [float32, float16] lists of parameters
        with a gradient, and of their gradients. vNPU holds no flat buffer,
        so this is redone on every step."""
        params_lists, grads_lists = [], []
        for group in self.param_groups:
            params_by_dtype, grads_by_dtype = [[], []], [[], []]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError(self._sparse_grad_message() + pta_error(ErrCode.NOT_SUPPORT))
                if p.dtype not in _BUCKET_DTYPES:
                    raise TypeError("Fused optimizer's parameters must be either float32 or float16, "
                                    "but received {}".format(p.dtype) + pta_error(ErrCode.TYPE))
                index = _BUCKET_DTYPES.index(p.dtype)
                params_by_dtype[index].append(p)
                grads_by_dtype[index].append(p.grad)
            params_lists.append(params_by_dtype)
            grads_lists.append(grads_by_dtype)
        self.params_lists_indexed_by_group = params_lists
        self.combined_params_indexed_by_group = params_lists
        self.combined_grads_indexed_by_group = grads_lists
        self.is_params_grads_combined = any(len(lst) > 0 for by_dtype in params_lists for lst in by_dtype)

    def _init_group_param_state(self, p, group):
        """Creates the state of parameter p of ``group``; subclasses whose
        ``_init_param_state`` takes group options override this."""
        self._init_param_state(p)

    def _init_adam_moments(self, p):
        """The state of Adam-style optimizers (LAMB, AdamP, BertAdam): a step
        count and zeroed first and second moments, kept when already there."""
        state = self.state[p]
        state.setdefault("step", 0)
        if "exp_avg" not in state:
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        if "exp_avg_sq" not in state:
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)

    def _init_param_state(self, p):
        raise NotImplementedError(pta_error(ErrCode.NOT_SUPPORT))

    def _combine_states(self):
        combined = []
        for group, by_dtype in zip(self.param_groups, self.params_lists_indexed_by_group):
            group_states = []
            for params in by_dtype:
                states = {}
                for p in params:
                    if p.grad is None:
                        continue
                    self._init_group_param_state(p, group)
                    for name, value in self.state[p].items():
                        states.setdefault(name, []).append(value)
                group_states.append(states)
            combined.append(group_states)
        self.combined_param_states_indexed_by_group = combined
        self.is_states_combined = True

    def _maybe_init_combined_states(self):
        """Creates the state of every parameter with a gradient, once (the
        step redoes it every time, see the module docstring)."""
        if self.is_states_combined:
            return
        self._combine_states()

    def _buckets(self, group_index):
        """(params, grads, states) of each non-empty dtype bucket of a group;
        states maps each state name to the list of the params' tensors."""
        params_by_dtype = self.params_lists_indexed_by_group[group_index]
        states_by_dtype = self.combined_param_states_indexed_by_group[group_index]
        for params, states in zip(params_by_dtype, states_by_dtype):
            if len(params) == 0:
                continue
            yield params, [p.grad for p in params], states

    def _group_step(self, group_index):
        raise NotImplementedError(pta_error(ErrCode.NOT_SUPPORT))

    def _before_group_steps(self):
        """Hook run after the buckets are built and before the group updates."""

    # ---- public API --------------------------------------------------------

    @torch.no_grad()
    def step(self, closure=None):
        """Performs one optimisation step; ``closure`` re-evaluates the model
        and returns the loss (run with gradients enabled)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._maybe_init_combined_params_and_grads()
        self._combine_states()
        self._before_group_steps()
        for group_index in range(len(self.param_groups)):
            self._group_step(group_index)
        return loss

    @torch.no_grad()
    def zero_grad(self, set_to_none=False):
        """Zeroes the gradients in place (set_to_none=True is not supported
        by torch_npu's fused optimizers)."""
        if set_to_none:
            raise ValueError("set_to_none is not supported in fused optimizers" + pta_error(ErrCode.VALUE))
        super().zero_grad(set_to_none=False)
