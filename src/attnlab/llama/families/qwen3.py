"""The Qwen3 family in GGUF (``general.architecture = "qwen3"``): Qwen3's dense models.

Llama's layout ([`llama`][attnlab.llama.families.llama]) with an RMSNorm on each query
and key head before the rotation (``attn_q_norm.weight``, ``attn_k_norm.weight``: one
weight of width ``D`` shared by the heads), no biases, a head width of its own
(``qwen3.attention.key_length``: 128 where ``d_model / H`` may differ), and the rotary
rows stored as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from ..model import LlamaConfig
from .llama import LAYER_TENSORS, read_config, rename

__all__ = ["ARCHITECTURE", "config_from_gguf", "state_dict"]

ARCHITECTURE = "qwen3"

QK_NORMS = {
    "attn_q_norm.weight": "attn.q_norm.weight",
    "attn_k_norm.weight": "attn.k_norm.weight",
}


def config_from_gguf(metadata: Mapping[str, Any], tensors: Mapping[str, Tensor]) -> LlamaConfig:
    """A Qwen3 file's config, from its ``qwen3.*`` keys: RMSNorm on q and k per head."""
    return read_config(metadata, tensors, ARCHITECTURE, architecture=ARCHITECTURE, qk_norm=True)


def state_dict(config: LlamaConfig, tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A Qwen3 file's tensors as LlamaModel's parameters (no rotary reordering)."""
    return rename(config, tensors, {**LAYER_TENSORS, **QK_NORMS})
