"""Grouped-query attention: the causal self-attention layer of Llama-style models.

``num_heads`` query heads share ``num_kv_heads`` key/value heads in groups of
``num_heads // num_kv_heads`` (``num_kv_heads = num_heads``: multi-head attention;
``1``: multi-query attention).
"""

from __future__ import annotations

import torch
from torch import nn

from ._validation import check_positive_int
from .attention_heads import AttentionHeads, HeadProjections, MaskRule
from .backends import Backend
from .positions import Positions
from .rotary import RotaryEmbedding, theta_from_hf

__all__ = ["GroupedQueryAttention"]


class GroupedQueryAttention(AttentionHeads):
    """Causal self-attention with grouped key/value heads and rotary positions.

    A configuration of [`AttentionHeads`][attnlab.AttentionHeads]: projections
    ``q_proj``/``k_proj``/``v_proj``/``o_proj`` (Hugging Face's names), a
    [`RotaryEmbedding`][attnlab.RotaryEmbedding] (or the ``positions`` given), and the
    causal rule, end-aligned after a [`KVCache`][attnlab.KVCache] and within
    ``window``. ``module(x, cache=cache)`` treats ``x`` as the positions after the
    ``len(cache)`` cached ones: feeding a sequence chunk by chunk gives the full
    forward's output. No dropout, as in Llama's inference; ``need_weights`` returns
    every query head's weights.

    Args:
        d_model: Width of each token (``hidden_size``).
        num_heads: Query heads ``H``.
        num_kv_heads: Key/value heads ``Hkv``, dividing ``H``; defaults to ``H``.
        head_dim: Width ``D`` of a head; defaults to ``d_model // num_heads``.
        rope_theta: Base of the rotary frequencies.
        bias: Give the projections a bias (``attention_bias`` in Llama's config).
        window: Optional sliding window: each query sees only its last ``window``
            positions (see [`sliding_window_mask`][attnlab.sliding_window_mask]).
        backend: How to compute attention: any name in ``attnlab.BACKENDS``.
        positions: A positions part instead of the layer's own rotary (a model's one
            [`RotaryEmbedding`][attnlab.RotaryEmbedding], or [`ALiBi`][attnlab.ALiBi]).
        out_bias: Give ``o_proj`` a bias; defaults to ``bias`` (Qwen2: ``False``).
        q_norm: Optional module on each query head before the rotation (Qwen3).
        k_norm: Optional module on each key head before the rotation (Qwen3).

    Shape:
        x: ``(T, d_model)`` or ``(B, T, d_model)``; output: the same.
    """

    q_proj: nn.Linear
    k_proj: nn.Linear
    v_proj: nn.Linear
    o_proj: nn.Linear

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        rope_theta: float = 10000.0,
        bias: bool = False,
        window: int | None = None,
        backend: Backend = "torch",
        *,
        positions: Positions | None = None,
        out_bias: bool | None = None,
        q_norm: nn.Module | None = None,
        k_norm: nn.Module | None = None,
    ) -> None:
        check_positive_int("d_model", d_model)
        check_positive_int("num_heads", num_heads)
        kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        check_positive_int("num_kv_heads", kv_heads)
        if num_heads % kv_heads:
            raise ValueError(f"num_kv_heads must divide num_heads = {num_heads}; got {kv_heads}")
        if head_dim is None and d_model % num_heads:
            raise ValueError(
                f"num_heads must divide d_model = {d_model} unless head_dim is given; "
                f"got {num_heads}"
            )
        D = check_positive_int("head_dim", d_model // num_heads if head_dim is None else head_dim)
        window = None if window is None else check_positive_int("window", window)
        H, Hkv = num_heads, kv_heads
        projections = HeadProjections(
            nn.Linear(d_model, H * D, bias=bias),
            nn.Linear(d_model, Hkv * D, bias=bias),
            nn.Linear(d_model, Hkv * D, bias=bias),
            nn.Linear(H * D, d_model, bias=bias if out_bias is None else out_bias),
            head_dim=D,
            d_in=d_model,
            width_name="d_model",
            q_norm=q_norm,
            k_norm=k_norm,
        )
        super().__init__(
            projections=projections,
            positions=RotaryEmbedding(D, rope_theta) if positions is None else positions,
            mask=MaskRule(causal=True, window=window),
            num_heads=H,
            num_kv_heads=Hkv,
            head_dim=D,
            backend=backend,
        )
        self.d_model = d_model

    @staticmethod
    def from_hf(attn: nn.Module, *, backend: Backend = "torch") -> GroupedQueryAttention:
        """Build a module equal to a Hugging Face transformers ``LlamaAttention``.

        Reads ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``,
        ``head_dim``, ``attention_bias`` and the rotary base (``rope_theta``, in
        ``rope_parameters`` in transformers 5) from ``attn.config`` and copies the
        ``q_proj``/``k_proj``/``v_proj``/``o_proj`` weights. Only Llama's default
        rotary embedding (no scaling) is supported.

        Args:
            attn: The ``LlamaAttention`` (or a module of the same layout).
            backend: The backend of the new module.

        Returns:
            A new ``GroupedQueryAttention`` on the source's device and dtype.
        """
        config = getattr(attn, "config", None)
        if config is None or not all(
            isinstance(getattr(attn, name, None), nn.Linear)
            for name in ("q_proj", "k_proj", "v_proj", "o_proj")
        ):
            raise TypeError(
                f"attn must be a transformers LlamaAttention (config and q/k/v/o_proj); "
                f"got {type(attn).__name__}"
            )
        theta = theta_from_hf(config)
        module = GroupedQueryAttention(
            config.hidden_size,
            config.num_attention_heads,
            config.num_key_value_heads,
            head_dim=getattr(config, "head_dim", None),
            rope_theta=theta,
            bias=bool(getattr(config, "attention_bias", False)),
            backend=backend,
        )
        weight = next(attn.parameters())
        module.to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                module.get_submodule(name).load_state_dict(attn.get_submodule(name).state_dict())
        return module

    def extra_repr(self) -> str:
        """Sizes, window and backend, shown by ``print(module)``."""
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, "
            f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
            f"window={self.window}, backend={self.backend!r}"
        )
