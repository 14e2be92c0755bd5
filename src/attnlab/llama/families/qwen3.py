"""The Qwen3 family in GGUF (``general.architecture = "qwen3"``): Qwen3's dense models.

Llama's layout ([`llama`][attnlab.llama.families.llama]) with an RMSNorm on each query
and key head before the rotation (``attn_q_norm.weight``, ``attn_k_norm.weight``: one
weight of width ``D`` shared by the heads), no biases, a head width of its own
(``qwen3.attention.key_length``: 128 where ``d_model / H`` may differ), and the rotary
rows stored as they are (all in ``qwen3.json``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from ..blocks import LayerParts
from ..config import LlamaConfig
from .description import rename
from .llama import LAYER_KINDS, Rotaries, read_config, softmax_layer

__all__ = ["ARCHITECTURE", "LAYER_KINDS", "config_from_gguf", "layer_parts", "state_dict"]

ARCHITECTURE = "qwen3"


def config_from_gguf(metadata: Mapping[str, Any], tensors: Mapping[str, Tensor]) -> LlamaConfig:
    """A Qwen3 file's config, from its ``qwen3.*`` keys."""
    return read_config(metadata, tensors, ARCHITECTURE)  # layer_types None: all full


def layer_parts(config: LlamaConfig, index: int, rotaries: Rotaries) -> LayerParts:
    """Layer ``index``: Llama's, with an RMSNorm on each query and key head."""
    return softmax_layer(config, index, rotaries, qk_norm=True)


def state_dict(config: LlamaConfig, tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A Qwen3 file's tensors as the model's parameters (no rotary reordering)."""
    return rename(config, tensors)
