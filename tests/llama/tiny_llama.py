"""A tiny random Llama (nothing loaded) shared by the llama tests that need no weights file."""

from __future__ import annotations

import torch

from attnlab.llama import LlamaConfig, LlamaModel

TINY = LlamaConfig(
    vocab_size=64,
    d_model=32,
    num_layers=3,
    num_heads=4,
    num_kv_heads=2,
    head_dim=8,
    ffn_dim=48,
    context_length=64,
)


def tiny_model(config: LlamaConfig = TINY) -> LlamaModel:
    """``LlamaModel(config)`` seeded with 0, frozen, in eval mode (the global RNG untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaModel(config)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model.eval()
