"""The Qwen2 family in GGUF (``general.architecture = "qwen2"``): Qwen2 and Qwen2.5.

Llama's layout ([`llama`][attnlab.llama.families.llama]) with two differences, both in
``qwen2.json``: the query, key and value projections carry a bias (the output projection
none), and the rotary rows are stored as they are (llama.cpp's Qwen2 rotates halves, as
we do: nothing to un-permute).
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

ARCHITECTURE = "qwen2"


def config_from_gguf(metadata: Mapping[str, Any], tensors: Mapping[str, Tensor]) -> LlamaConfig:
    """A Qwen2 file's config, from its ``qwen2.*`` keys."""
    return read_config(metadata, tensors, ARCHITECTURE)  # layer_types None: all full


def layer_parts(config: LlamaConfig, index: int, rotaries: Rotaries) -> LayerParts:
    """Layer ``index``: Llama's, with biases on the query, key and value projections."""
    return softmax_layer(config, index, rotaries, bias=True)


def state_dict(config: LlamaConfig, tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A Qwen2 file's tensors as the model's parameters (no rotary reordering)."""
    return rename(config, tensors)
