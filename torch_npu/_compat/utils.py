"""Torch-version shims for torch_npu's configuration modules."""

__all__ = ["make_config_entry"]


def make_config_entry(config, *, name: str):
    """A ``torch.utils._config_module._ConfigEntry`` for ``config`` named
    ``name`` (the form torch 2.12 and later take)."""
    from torch.utils._config_module import _ConfigEntry

    return _ConfigEntry(config, name=name)
