"""torch_npu's shims over the PyTorch versions it supports (real torch_npu's
``torch_npu._compat``): code written for torch_npu imports these names
instead of the torch module that holds them in one version or another."""
