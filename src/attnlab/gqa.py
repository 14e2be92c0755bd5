"""Grouped-query attention: the causal self-attention layer of Llama-style models.

``num_heads`` query heads share ``num_kv_heads`` key/value heads in groups of
``num_heads // num_kv_heads`` (``num_kv_heads = num_heads``: multi-head attention;
``1``: multi-query attention).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ._validation import check_positive_int
from .attention_heads import AttentionHeads, HeadProjections, MaskRule
from .backends import Backend
from .layer_parts import OutputGate, PartialRotary
from .positions import Positions
from .rope_scaling import ScaledRotaryEmbedding, rope_scaling_from_hf
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
        scale: Multiplier of the scores; ``None``: ``head_dim ** -0.5`` (Gemma 3:
            ``query_pre_attn_scalar ** -0.5``).
        output_gate: Optional [`OutputGate`][attnlab.OutputGate] (Qwen3-Next, Qwen3.5).
        sinks: Optional attention sinks ``(H,)``, one learned logit per head (gpt-oss).

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
        scale: float | None = None,
        output_gate: OutputGate | None = None,
        sinks: Tensor | None = None,
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
            scale=scale,
            backend=backend,
            output_gate=output_gate,
            sinks=sinks,
        )
        self.d_model = d_model

    @staticmethod
    def from_hf(attn: nn.Module, *, backend: Backend = "torch") -> GroupedQueryAttention:
        """Build a module equal to a Hugging Face transformers attention layer.

        Llama's ``LlamaAttention`` and the layers that recombine its parts, read from
        ``attn.config`` and ``attn.layer_idx`` (transformers 5):

        * the window: ``sliding_window`` where ``layer_types[layer_idx]`` is
          ``"sliding_attention"`` (gpt-oss, Gemma 3; SmolLM3 with ``use_sliding_window``);
        * the rotary part from ``rope_parameters`` (this layer type's, where the config
          keeps one per type, as Gemma 3 does): the base, linear/dynamic/YaRN/Llama 3
          scaling (gpt-oss: YaRN; Gemma 3's global layers: linear) and
          ``partial_rotary_factor`` (Qwen3-Next, Qwen3.5: a quarter, the first features);
          none where SmolLM3's ``no_rope_layers[layer_idx]`` is 0 (1 means rotary);
        * ``q_norm``/``k_norm``, RMSNorms over each head, whose weight is ``w`` (Qwen3) or
          ``1 + w`` (Gemma 3, Qwen3-Next, Qwen3.5: stored as ``1 + w`` here, as llama.cpp
          stores it), told apart by running the norm once;
        * the scale ``query_pre_attn_scalar ** -0.5`` (Gemma 3);
        * an output gate where ``q_proj`` is twice as wide, laid out per head as
          ``[q_h | gate_h]`` (Qwen3-Next, Qwen3.5), split into ``q_proj`` and the gate;
        * the ``sinks`` (gpt-oss).

        Qwen3.5's multimodal rotary (``mrope_section``) equals the plain one for text,
        where the three position ids agree.

        Args:
            attn: The transformers attention layer.
            backend: The backend of the new module.

        Returns:
            A new ``GroupedQueryAttention`` on the source's device and dtype.

        Raises:
            TypeError: ``attn`` lacks a config or the four projections; a norm that is
                not an RMSNorm over each head.
            ValueError: an unknown rotary scaling; logit soft-capping or bidirectional
                attention (Gemma), which this layer does not compute.
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
        for name in ("attn_logit_softcapping", "use_bidirectional_attention"):
            if getattr(config, name, None):
                raise ValueError(f"attn's config sets {name}; this layer does not compute it")
        H, Hkv = config.num_attention_heads, config.num_key_value_heads
        D = getattr(config, "head_dim", None) or config.hidden_size // H
        layer = getattr(attn, "layer_idx", None)
        layer_types = getattr(config, "layer_types", None)
        layer_type = None if layer is None or not layer_types else layer_types[layer]
        q_proj: nn.Linear = attn.get_submodule("q_proj")  # type: ignore[assignment]
        bias = q_proj.bias is not None
        gate = (
            OutputGate(config.hidden_size, H, D, bias) if q_proj.out_features == 2 * H * D else None
        )
        weight = next(attn.parameters())
        sinks = getattr(attn, "sinks", None)
        scalar = getattr(config, "query_pre_attn_scalar", None)
        module = GroupedQueryAttention(
            config.hidden_size,
            H,
            Hkv,
            head_dim=D,
            bias=bias,
            window=_window_from_hf(config, layer_type),
            backend=backend,
            positions=_positions_from_hf(config, layer_type, layer, D),
            out_bias=attn.get_submodule("o_proj").bias is not None,
            q_norm=_head_norm_from_hf(attn, "q_norm", D),
            k_norm=_head_norm_from_hf(attn, "k_norm", D),
            scale=None if scalar is None else float(scalar) ** -0.5,
            output_gate=gate,
            sinks=None if sinks is None else sinks.detach(),
        )
        module.to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            for name in ("k_proj", "v_proj", "o_proj"):
                module.get_submodule(name).load_state_dict(attn.get_submodule(name).state_dict())
            if gate is None:
                module.q_proj.load_state_dict(q_proj.state_dict())
                return module
            for key, param in q_proj.state_dict().items():  # rows (H, [q_h | gate_h], D)
                query_rows, gate_rows = OutputGate.split_rows(param, H, D)
                getattr(module.q_proj, key).copy_(query_rows)
                getattr(gate.gate_proj, key).copy_(gate_rows)
        return module

    def extra_repr(self) -> str:
        """Sizes, window and backend, shown by ``print(module)``."""
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, "
            f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
            f"window={self.window}, backend={self.backend!r}"
        )


def _window_from_hf(config: Any, layer_type: str | None) -> int | None:
    """The layer's window: ``sliding_window`` on a ``"sliding_attention"`` layer, else none."""
    if layer_type != "sliding_attention" or not getattr(config, "use_sliding_window", True):
        return None
    window: int | None = getattr(config, "sliding_window", None)
    return window


def _positions_from_hf(
    config: Any, layer_type: str | None, layer: int | None, head_dim: int
) -> Positions:
    """The layer's positions part: none, rotary (scaled, partial) from ``rope_parameters``."""
    no_rope = getattr(config, "no_rope_layers", None)  # SmolLM3: 1 = this layer rotates
    if no_rope is not None and layer is not None and not no_rope[layer]:
        return Positions()
    params = getattr(config, "rope_parameters", None) or {}
    if layer_type is not None and isinstance(params.get(layer_type), Mapping):
        params = params[layer_type]  # one per layer type (Gemma 3)
    theta = theta_from_hf(params, config)
    fraction = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0))
    R = int(head_dim * fraction)
    max_length: int = getattr(config, "max_position_embeddings", 0)
    kind = params.get("rope_type", params.get("type", "default"))
    scaling = None if kind == "default" else rope_scaling_from_hf(params, max_length)
    rotary = (
        RotaryEmbedding(R, theta) if scaling is None else ScaledRotaryEmbedding(R, theta, scaling)
    )
    return rotary if head_dim == R else PartialRotary(rotary, head_dim)


def _head_norm_from_hf(attn: nn.Module, name: str, head_dim: int) -> nn.RMSNorm | None:
    """``attn.<name>`` as an ``nn.RMSNorm`` over each head, its weight ``w`` or ``1 + w``."""
    norm = getattr(attn, name, None)
    if norm is None:
        return None
    weight = getattr(norm, "weight", None)
    eps = getattr(norm, "eps", getattr(norm, "variance_epsilon", None))
    if not isinstance(weight, Tensor) or weight.shape != (head_dim,) or eps is None:
        raise TypeError(
            f"attn.{name} must be an RMSNorm over each head (weight ({head_dim},), eps); "
            f"got {type(norm).__name__}"
        )
    probe = torch.randn(3, head_dim, generator=torch.Generator().manual_seed(0))
    probe = probe.to(weight.device, weight.dtype)
    with torch.no_grad():
        expected = norm(probe)
        for stored in (weight, 1.0 + weight.float()):  # Qwen3's w, then Gemma's 1 + w
            ours = nn.RMSNorm(head_dim, eps=eps, device=weight.device, dtype=weight.dtype)
            ours.weight.copy_(stored)
            if torch.allclose(ours(probe), expected, rtol=1e-2, atol=1e-3):
                return ours
    raise TypeError(
        f"attn.{name} must compute w * x / rms(x) or (1 + w) * x / rms(x); "
        f"{type(norm).__name__} computes neither"
    )
