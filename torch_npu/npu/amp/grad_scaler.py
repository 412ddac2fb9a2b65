"""torch.npu.amp.GradScaler: torch.amp.GradScaler("npu") with torch_npu's
``dynamic`` switch (dynamic=False keeps the loss scale fixed) and its
iteration-wide overflow: once any optimizer's gradients held an inf or NaN,
every optimizer's step of that iteration is skipped (real torch_npu's
``_has_overflow``, which mirrors the chip's device-wide overflow flag), where
torch.amp's skips only the optimizer whose gradients overflowed."""

import torch
from torch.amp.grad_scaler import OptState
from torch.amp.grad_scaler import _refresh_per_optimizer_state


# Real torch_npu's module has torch's per-optimizer state factory too (its tests read it here).
_refresh_per_optimizer_state = _refresh_per_optimizer_state


class GradScaler(torch.amp.GradScaler):
    # dynamic before enabled: real torch_npu's positional order (torch.amp.GradScaler has no dynamic).
    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 dynamic=True, enabled=True):
        if not isinstance(dynamic, bool):
            raise TypeError(f"dynamic must be a bool, but got {type(dynamic).__name__}")
        super().__init__("npu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)
        self._dynamic = dynamic

    def _overflowed_this_iteration(self):
        """True when the gradients of any optimizer unscaled since the last
        update() held an inf or NaN."""
        for state in self._per_optimizer_states.values():
            if state["stage"] is not OptState.READY and any(
                    v.item() for v in state["found_inf_per_device"].values()):
                return True
        return False

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        if self._overflowed_this_iteration():
            print("Gradient overflow. Skipping step")  # real torch_npu's report of a skipped step
            return None
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Adjusts the scale after a step; a static scaler keeps it unless
        ``new_scale`` is given."""
        if not self._enabled:
            return
        if not self._dynamic and new_scale is None and self._scale is not None:
            new_scale = self._scale.clone()
        super().update(new_scale)

    def state_dict(self):
        state = super().state_dict()
        if self._enabled:
            state["dynamic"] = self._dynamic
        return state

    def load_state_dict(self, state_dict):
        self._dynamic = state_dict.pop("dynamic", self._dynamic) if self._enabled else self._dynamic
        super().load_state_dict(state_dict)
