"""prof_view: steps of the profile analysis (loaded on demand, never by import torch_npu)."""
