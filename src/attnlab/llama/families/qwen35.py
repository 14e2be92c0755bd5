"""Qwen3.5 in GGUF (``general.architecture = "qwen35"``): Gated DeltaNet and gated attention.

What ``qwen35.json`` states, built here: every ``full_attention_interval``-th layer is
softmax attention with an output gate, an RMSNorm on each query and key head and rotary
positions on the first quarter of each head; the others are
[`GatedDeltaNet`][attnlab.GatedDeltaNet] layers. llama.cpp's converter stores
``-exp(A_log)`` (``ssm_a``), the ``dt_bias`` as ``ssm_dt.bias``, the convolution squeezed,
the query and gate rows of the attention interleaved per head, and the linear layers'
value heads *tiled* (``[v0 of k0, v0 of k1, ..., v1 of k0, ...]``) where transformers
groups them by key head: each is undone here, the converter's steps inverted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from ...gated_deltanet import GatedDeltaNet
from ...gqa import GroupedQueryAttention
from ...layer_parts import OutputGate
from ..blocks import LayerParts, Mixer, RMSNorm, SwiGLU
from ..config import LlamaConfig
from ..gguf_file import GGUFError
from .description import describe, read_metadata, rename
from .llama import Rotaries, read_config

__all__ = [
    "ARCHITECTURE",
    "LAYER_KINDS",
    "config_from_gguf",
    "layer_parts",
    "state_dict",
    "untile_value_heads",
]

ARCHITECTURE = "qwen35"
BLOCK = re.compile(r"blk\.([0-9]+)\.")  # a block's tensor: its number, ASCII digits only
LAYER_KINDS = ("linear_attention", "full_attention")  # the layer kinds this family builds


def config_from_gguf(metadata: Mapping[str, Any], tensors: Mapping[str, Tensor]) -> LlamaConfig:
    """A Qwen3.5 file's config: the ``qwen35.*`` keys, Gated DeltaNet's sizes, layer_types."""
    config = read_config(metadata, tensors, ARCHITECTURE)
    values = read_metadata(describe(ARCHITECTURE), metadata, tensors)
    Hk, Hv = config.linear_num_key_heads, config.linear_num_value_heads
    assert Hk is not None and Hv is not None  # required keys
    if Hv % Hk:
        raise GGUFError(
            f"the GGUF's {values['key:linear_num_value_heads']} ({Hv}) must be a multiple of "
            f"{values['key:linear_num_key_heads']} ({Hk})"
        )
    if values["inner_size"] % Hv:
        raise GGUFError(
            f"the GGUF's {values['key:inner_size']} ({values['inner_size']}) must be a "
            f"multiple of {values['key:linear_num_value_heads']} ({Hv})"
        )
    interval = values["interval"]
    types = tuple(
        "full_attention" if (i + 1) % interval == 0 else "linear_attention"
        for i in range(config.num_layers)
    )
    return replace(config, layer_types=types, linear_value_head_dim=values["inner_size"] // Hv)


def layer_parts(config: LlamaConfig, index: int, rotaries: Rotaries) -> LayerParts:
    """Layer ``index``: norm, gated attention or Gated DeltaNet, norm, SwiGLU."""
    c = config
    kind = c.types()[index]
    mixer: Mixer
    if kind == "linear_attention":
        Hk, Hv, Dk, Dv, K = (
            _size(value)
            for value in (
                c.linear_num_key_heads,
                c.linear_num_value_heads,
                c.linear_key_head_dim,
                c.linear_value_head_dim,
                c.linear_conv_kernel_dim,
            )
        )
        mixer = GatedDeltaNet(c.d_model, Hk, Hv, Dk, Dv, conv_kernel_size=K, eps=c.rms_eps)
    else:
        mixer = GroupedQueryAttention(
            c.d_model,
            c.num_heads,
            c.num_kv_heads,
            c.head_dim,
            positions=rotaries.positions(rotaries.main, c.head_dim),
            out_bias=False,
            q_norm=RMSNorm(c.head_dim, c.rms_eps),
            k_norm=RMSNorm(c.head_dim, c.rms_eps),
            output_gate=OutputGate(c.d_model, c.num_heads, c.head_dim),
        )
    norms = RMSNorm(c.d_model, c.rms_eps), RMSNorm(c.d_model, c.rms_eps)
    return LayerParts(kind, norms[0], mixer, norms[1], SwiGLU(c.d_model, c.ffn_dim))


def _size(value: int | None) -> int:
    """A Gated DeltaNet size of a Qwen3.5 config (set by ``config_from_gguf``)."""
    if value is None:
        raise ValueError("a qwen35 config needs every linear_* size for its linear layers")
    return value


def untile_value_heads(tensor: Tensor, dim: int, key_heads: int, width: int) -> Tensor:
    """Undo the converter's value-head reorder along ``dim``: tiled -> grouped by key head.

    llama.cpp's ``_reorder_v_heads`` views the axis as ``(Hk, r, width)`` (grouped, as
    transformers) and swaps the first two; this views it as ``(r, Hk, width)`` and swaps
    them back.

    Shape:
        tensor: any, with ``Hv * width`` along ``dim``; output: the same.
    """
    shape = list(tensor.shape)
    dim %= len(shape)
    r = shape[dim] // (key_heads * width)
    tiled = tensor.reshape(*shape[:dim], r, key_heads, width, *shape[dim + 1 :])
    return tiled.transpose(dim, dim + 1).reshape(shape)


def state_dict(config: LlamaConfig, tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A Qwen3.5 file's tensors as the model's parameters, the converter's steps undone.

    Raises:
        GGUFError: an ``ssm_a`` entry that is not negative (it holds ``-exp(A_log)``).
    """
    c = config
    Hk, Dk, Dv = (
        _size(v) for v in (c.linear_num_key_heads, c.linear_key_head_dim, c.linear_value_head_dim)
    )
    qk = 2 * Hk * Dk  # the query and key rows before the value rows

    def untile(t: Tensor, dim: int, width: int) -> Tensor:
        return untile_value_heads(t, dim, Hk, width)

    steps: dict[str, Callable[[Tensor], Tensor]] = {
        "untile_value_rows_after_qk": lambda t: torch.cat([t[:qk], untile(t[qk:], 0, Dv)]),
        "untile_value_rows": lambda t: untile(t, 0, Dv),
        "untile_value_heads": lambda t: untile(t, 0, 1),
        "untile_value_columns": lambda t: untile(t, 1, Dv),
        "log_of_negated": lambda t: torch.log(-t),
        "unsqueeze(1)": lambda t: t.unsqueeze(1),
    }

    def transform(row: dict[str, Any], tensor: Tensor) -> dict[str, Tensor]:
        names = row.get("transform", "")
        C = qk + _size(c.linear_num_value_heads) * Dv  # query, key and value channels
        if "unsqueeze(1)" in names and tuple(tensor.shape) != (C, c.linear_conv_kernel_dim):
            raise GGUFError(  # the convolution, stored (C, K): its shape as stored
                f"the GGUF file's tensor {row['name']!r} has shape {tuple(tensor.shape)}; "
                f"the file's {c.architecture}.* keys imply {(C, c.linear_conv_kernel_dim)}"
            )
        if names == "split_query_gate":  # rows (H, [q_h | gate_h], D, d_model)
            query, gate = OutputGate.split_rows(tensor, c.num_heads, c.head_dim)
            parts = row["part"].split(" + ")
            return {parts[0]: query, parts[1]: gate}
        if "log_of_negated" in names and tensor.device.type != "meta" and not (tensor < 0).all():
            raise GGUFError(
                f"the GGUF file's tensor {row['name']!r} must be negative (-exp(A_log)); "
                f"got a largest entry of {float(tensor.max())}"
            )
        for name in filter(None, names.split(", ")):
            tensor = steps[name](tensor)
        return {row["part"]: tensor}

    mtp = frozenset(  # the prediction layers' blocks, after the model's: not read
        name  # (read_config checked each holds its tensors, and none past block_count)
        for name in tensors
        if (block := BLOCK.match(name)) is not None and int(block[1]) >= config.num_layers
    )
    return rename(config, tensors, transform, mtp)
