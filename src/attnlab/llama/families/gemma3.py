"""Gemma 3 in GGUF (``general.architecture = "gemma3"``): 270M, 1B and the larger models' text.

What ``gemma3.json`` states, built here: five sliding-window layers to one global (the
pattern is in no GGUF key: llama.cpp and transformers both hard-code it); an RMSNorm on
each query and key head; a norm after the attention and after the feed-forward too
(sandwich norms); embeddings scaled by ``sqrt(d_model)``; a GELU-tanh gated
feed-forward; two rotary bases, ``rope_local_theta`` on the sliding layers and
``rope_theta`` (with the larger models' linear scaling) on the global ones; the scores
scaled by ``query_pre_attn_scalar ** -0.5``. Every norm weight is stored as ``1 + w`` by
the converter, which is what the plain RMSNorm multiplies by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from torch import Tensor

from ...gqa import GroupedQueryAttention
from ..blocks import GeGLU, LayerParts, RMSNorm
from ..config import LlamaConfig
from .description import describe, rename
from .llama import Rotaries, read_config

__all__ = [
    "ARCHITECTURE",
    "LAYER_KINDS",
    "config_from_gguf",
    "gemma3_layer_types",
    "layer_parts",
    "state_dict",
]

ARCHITECTURE = "gemma3"
LAYER_KINDS = ("sliding_attention", "full_attention")  # the layer kinds this family builds
GEMMA3_27B_LAYERS = 62  # llama.cpp scales that model's scores by (d_model / H) ** -0.5


def gemma3_layer_types(num_layers: int, sliding: bool = True) -> tuple[str, ...]:
    """Five ``"sliding_attention"`` layers to one ``"full_attention"``, as llama.cpp's pattern.

    Layer ``i`` is global when ``(i + 1) % 6 == 0``; without a window every layer is.
    """
    pattern = describe(ARCHITECTURE)["layer_types"]["pattern"]
    return tuple(
        "full_attention" if not sliding or (i + 1) % pattern == 0 else "sliding_attention"
        for i in range(num_layers)
    )


def config_from_gguf(metadata: Mapping[str, Any], tensors: Mapping[str, Tensor]) -> LlamaConfig:
    """A Gemma 3 file's config, from its ``gemma3.*`` keys and the family's rules."""
    config = read_config(metadata, tensors, ARCHITECTURE)
    scalar = (
        config.d_model // config.num_heads
        if config.num_layers == GEMMA3_27B_LAYERS
        else config.head_dim
    )
    return replace(
        config,
        layer_types=gemma3_layer_types(config.num_layers, config.sliding_window is not None),
        query_pre_attn_scalar=float(scalar),
    )


def layer_parts(config: LlamaConfig, index: int, rotaries: Rotaries) -> LayerParts:
    """Layer ``index``: norm, attention with q/k norms, norm, norm, GELU-tanh FFN, norm.

    A sliding layer turns with ``rope_local_theta`` (unscaled) within its window; a
    global layer with ``rope_theta`` and the model's scaling, over every position.
    """
    c = config
    kind = c.types()[index]
    sliding = kind == "sliding_attention"
    rotary = rotaries.local if sliding and rotaries.local is not None else rotaries.main
    scalar = c.head_dim if c.query_pre_attn_scalar is None else c.query_pre_attn_scalar
    attn = GroupedQueryAttention(
        c.d_model,
        c.num_heads,
        c.num_kv_heads,
        c.head_dim,
        window=c.sliding_window if sliding else None,
        positions=rotaries.positions(rotary, c.head_dim),
        out_bias=False,
        q_norm=RMSNorm(c.head_dim, c.rms_eps),
        k_norm=RMSNorm(c.head_dim, c.rms_eps),
        scale=float(scalar) ** -0.5,
    )

    def norm() -> RMSNorm:
        return RMSNorm(c.d_model, c.rms_eps)

    ffn = GeGLU(c.d_model, c.ffn_dim)
    return LayerParts(kind, norm(), attn, norm(), ffn, post_attn_norm=norm(), post_ffn_norm=norm())


def state_dict(config: LlamaConfig, tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A Gemma 3 file's tensors as the model's parameters (as stored: norms are ``1 + w``)."""
    return rename(config, tensors)
