"""torch_npu.contrib: add-ons real torch_npu ships next to the core API.

``transfer_to_npu`` (import it to run an unchanged CUDA script on npu).
"""
