"""Shared pieces of the client-library tests: tiny random-weight models (no
downloads) built identically for cpu and npu, and the library fixtures.
scripts/test.sh installs the pinned libraries (tests/clients/requirements.txt)
before pytest runs. (Not a conftest.py: tests/conftest.py's helpers are
imported as `conftest`, and a second one would shadow them.)"""

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the network
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def _require(module):
    # A missing library fails the test (scripts/setup_clients.sh installs it).
    return pytest.importorskip(module, reason=f"{module} missing: run scripts/setup_clients.sh")


@pytest.fixture
def transformers():
    return _require("transformers")


def tiny_llama_config(**overrides):
    from transformers import LlamaConfig

    args = dict(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0)
    args.update(overrides)
    return LlamaConfig(**args)


def tiny_llama(seed=0, **overrides):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_llama_config(**overrides))


def left_padded_batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 97, (2, 12), generator=g)
    mask = torch.ones_like(ids)
    ids[0, :4], mask[0, :4] = 0, 0
    return ids, mask
