"""Helpers of the profile analysis shared by its parts (real torch_npu's package layout)."""
