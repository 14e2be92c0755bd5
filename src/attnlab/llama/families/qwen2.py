"""The Qwen2 family in GGUF (``general.architecture = "qwen2"``): Qwen2 and Qwen2.5.

Llama's layout ([`llama`][attnlab.llama.families.llama]) with two differences: the
query, key and value projections carry a bias (``attn_q.bias``, ...; the output
projection none), and the rotary rows are stored as they are (llama.cpp's Qwen2 rotates
halves, as we do: nothing to un-permute).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from ..model import LlamaConfig
from .llama import LAYER_TENSORS, read_config, rename

__all__ = ["ARCHITECTURE", "config_from_gguf", "state_dict"]

ARCHITECTURE = "qwen2"

QKV_BIASES = {
    "attn_q.bias": "attn.q_proj.bias",
    "attn_k.bias": "attn.k_proj.bias",
    "attn_v.bias": "attn.v_proj.bias",
}


def config_from_gguf(metadata: Mapping[str, Any], tensors: Mapping[str, Tensor]) -> LlamaConfig:
    """A Qwen2 file's config, from its ``qwen2.*`` keys: biases on q, k and v."""
    return read_config(
        metadata, tensors, ARCHITECTURE, architecture=ARCHITECTURE, attention_bias=True
    )


def state_dict(config: LlamaConfig, tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A Qwen2 file's tensors as LlamaModel's parameters (no rotary reordering)."""
    return rename(config, tensors, {**LAYER_TENSORS, **QKV_BIASES})
