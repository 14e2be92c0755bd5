"""A decoder layer made of parts: norm, mixer, norms, feed-forward, each residual added.

A family (``attnlab.llama.families``) gives each layer its
[`LayerParts`][attnlab.llama.LayerParts]; the
[`DecoderBlock`][attnlab.llama.DecoderBlock] runs them in the one order every supported
family shares::

    x = x + post_attn_norm(attn(attn_norm(x)))     # post norm where the family has one
    x = x + post_ffn_norm(ffn(ffn_norm(x)))

The mixer ``attn`` is softmax attention
([`GroupedQueryAttention`][attnlab.GroupedQueryAttention], with this layer's positions,
window, norms and gate) or [`GatedDeltaNet`][attnlab.GatedDeltaNet].
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._validation import check_vectors
from ..attention_heads import PositionEmbeddings
from ..gated_deltanet import GatedDeltaNet, GatedDeltaNetCache
from ..gqa import GroupedQueryAttention
from ..kv_cache import Cache, KVCache
from ..layer_parts import PartialRotary
from ..positions import Positions
from ..rotary import RotaryEmbedding
from .config import LlamaConfig

__all__ = ["BlockOutput", "DecoderBlock", "GeGLU", "LayerParts", "RMSNorm", "SwiGLU"]

Mixer = GroupedQueryAttention | GatedDeltaNet


class RMSNorm(nn.Module):
    """Root-mean-square normalisation: ``weight * x / sqrt(mean(x**2) + eps)``.

    LayerNorm without the mean subtraction and the bias; computed in float32. Gemma's
    and Qwen3.5's ``(1 + w)`` is this with the weight stored as ``1 + w`` (as llama.cpp's
    converter stores it).
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        """Scale each vector to unit root mean square, then by ``weight``."""
        x = check_vectors("x", x, self.weight.shape[0], self.weight)
        x32 = x.float()
        mean_square = x32.pow(2).mean(-1, keepdim=True)  # (..., 1)
        return self.weight * (x32 * torch.rsqrt(mean_square + self.eps)).to(x.dtype)


class SwiGLU(nn.Module):
    """Llama's feed-forward: ``down(silu(gate(x)) * up(x))``, hidden width ``ffn_dim``."""

    def __init__(self, d_model: int, ffn_dim: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d_model, ffn_dim, bias=False)
        self.up_proj = nn.Linear(d_model, ffn_dim, bias=False)
        self.down_proj = nn.Linear(ffn_dim, d_model, bias=False)

    def activation(self, x: Tensor) -> Tensor:
        """The gate's nonlinearity: SiLU."""
        return F.silu(x)

    def forward(self, x: Tensor) -> Tensor:
        """The gated hidden layer, projected back to ``d_model``."""
        x = check_vectors("x", x, self.gate_proj.in_features, self.gate_proj.weight)
        hidden = self.activation(self.gate_proj(x)) * self.up_proj(x)  # (..., ffn_dim)
        output: Tensor = self.down_proj(hidden)  # (..., d_model)
        return output


class GeGLU(SwiGLU):
    """Gemma's feed-forward: SwiGLU with GELU's tanh approximation for SiLU."""

    def activation(self, x: Tensor) -> Tensor:
        """The gate's nonlinearity: ``gelu(x, approximate="tanh")``."""
        return F.gelu(x, approximate="tanh")


@dataclass
class LayerParts:
    """What one decoder layer is made of, as its family gives it.

    Attributes:
        kind: The layer's type (``"full_attention"``, ``"sliding_attention"``,
            ``"linear_attention"``).
        attn_norm: The norm before the mixer.
        attn: The mixer: softmax attention or Gated DeltaNet.
        ffn_norm: The norm before the feed-forward.
        ffn: The feed-forward.
        post_attn_norm: Optional norm of the mixer's output (Gemma's sandwich).
        post_ffn_norm: Optional norm of the feed-forward's output.
    """

    kind: str
    attn_norm: RMSNorm
    attn: Mixer
    ffn_norm: RMSNorm
    ffn: SwiGLU
    post_attn_norm: RMSNorm | None = None
    post_ffn_norm: RMSNorm | None = None

    @staticmethod
    def llama(
        config: LlamaConfig,
        rotary: Positions | None = None,
        *,
        kind: str | None = None,
        bias: bool = False,
        qk_norm: bool = False,
    ) -> LayerParts:
        """A Llama-layout layer: RMSNorm, grouped-query attention, RMSNorm, SwiGLU.

        Args:
            config: The sizes.
            rotary: The positions part (default: a rotary of ``rope_theta`` of its own).
            kind: The layer's type; a ``"sliding_attention"`` layer sees its last
                ``sliding_window`` positions (default: the config's uniform kind).
            bias: Biases on the query, key and value projections (Qwen2).
            qk_norm: An RMSNorm over each query and key head (Qwen3).
        """
        c = config
        kind = c.types()[0] if kind is None else kind
        attn = GroupedQueryAttention(
            c.d_model,
            c.num_heads,
            c.num_kv_heads,
            c.head_dim,
            bias=bias,
            window=c.sliding_window if kind == "sliding_attention" else None,
            positions=RotaryEmbedding(c.head_dim, c.rope_theta) if rotary is None else rotary,
            out_bias=False,
            q_norm=RMSNorm(c.head_dim, c.rms_eps) if qk_norm else None,
            k_norm=RMSNorm(c.head_dim, c.rms_eps) if qk_norm else None,
        )
        norms = RMSNorm(c.d_model, c.rms_eps), RMSNorm(c.d_model, c.rms_eps)
        return LayerParts(kind, norms[0], attn, norms[1], SwiGLU(c.d_model, c.ffn_dim))


class BlockOutput(NamedTuple):
    """A block's output and its attention weights (``None`` unless asked for).

    Attributes:
        hidden: ``(B, T, d_model)``.
        attn_weights: ``(B, H, T, S)`` (Gated DeltaNet: ``(B, Hv, T, T)``, the implicit
            attention) or ``None``.
    """

    hidden: Tensor
    attn_weights: Tensor | None


class DecoderBlock(nn.Module):
    """One decoder layer: each part its family gave it, the residuals added.

    Args:
        parts: The layer's [`LayerParts`][attnlab.llama.LayerParts]; a
            [`LlamaConfig`][attnlab.llama.LlamaConfig]: a Llama layer of those sizes
            (``LayerParts.llama``).
        rotary: With a config: the model's shared rotary part (default: the block's own).

    Shape:
        x: ``(B, T, d_model)``; output: the same.
    """

    attn_norm: RMSNorm
    attn: Mixer
    ffn_norm: RMSNorm
    ffn: SwiGLU

    def __init__(
        self, parts: LayerParts | LlamaConfig, rotary: RotaryEmbedding | None = None
    ) -> None:
        super().__init__()
        if isinstance(parts, LlamaConfig):
            parts = LayerParts.llama(parts, rotary)
        if not isinstance(parts, LayerParts):
            raise TypeError(
                f"parts must be LayerParts or a LlamaConfig; got {type(parts).__name__}"
            )
        self.kind = parts.kind
        self.attn_norm = parts.attn_norm
        self.attn = parts.attn
        if parts.post_attn_norm is not None:
            self.post_attn_norm = parts.post_attn_norm
        self.ffn_norm = parts.ffn_norm
        self.ffn = parts.ffn
        if parts.post_ffn_norm is not None:
            self.post_ffn_norm = parts.post_ffn_norm

    @property
    def rotary(self) -> RotaryEmbedding | None:
        """The rotary part whose ``(cos, sin)`` table this layer reads (``None``: none).

        Layers sharing one part share one table, computed once per forward by the model.
        """
        positions = self.attn.positions if isinstance(self.attn, GroupedQueryAttention) else None
        if isinstance(positions, PartialRotary):
            positions = positions.rotary
        return positions if isinstance(positions, RotaryEmbedding) else None

    def new_cache(self) -> Cache | GatedDeltaNetCache:
        """An empty cache of this layer's kind (a KVCache, or Gated DeltaNet's state)."""
        if isinstance(self.attn, GatedDeltaNet):
            return self.attn.new_cache()
        return KVCache()

    def forward(
        self,
        x: Tensor,
        cache: Cache | GatedDeltaNetCache | None = None,
        ablate_heads: Iterable[int] = (),
        need_weights: bool = False,
        *,
        attn_mask: Tensor | None = None,
        position_embeddings: PositionEmbeddings | None = None,
    ) -> BlockOutput:
        """The block's output and (with ``need_weights``) its attention weights.

        ``attn_mask`` is combined with the causal rule (e.g. to hide padding keys);
        ``position_embeddings`` is the model's rotary ``(cos, sin)`` for these positions.
        A Gated DeltaNet layer takes neither, nor ``ablate_heads``.
        """
        h = self.attn_norm(x)
        if isinstance(self.attn, GatedDeltaNet):
            heads = list(ablate_heads)
            if heads or attn_mask is not None:
                raise ValueError(
                    "a linear_attention (Gated DeltaNet) layer takes no "
                    + ("ablate_heads" if heads else "attn_mask (padding)")
                )
            if cache is not None and not isinstance(cache, GatedDeltaNetCache):
                raise TypeError(f"cache must be a GatedDeltaNetCache; got {type(cache).__name__}")
            out, weights = self.attn(h, cache=cache, need_weights=need_weights)
        else:
            if isinstance(cache, GatedDeltaNetCache):
                raise TypeError(
                    "cache must be a KVCache for a softmax layer; got GatedDeltaNetCache"
                )
            out, weights = self.attn(
                h,
                cache=cache,
                attn_mask=attn_mask,
                position_embeddings=position_embeddings,
                ablate_heads=ablate_heads,
                need_weights=need_weights,
            )
        post_attn: RMSNorm | None = getattr(self, "post_attn_norm", None)
        x = x + (out if post_attn is None else post_attn(out))  # residual: (B, T, d_model)
        h = self.ffn(self.ffn_norm(x))
        post_ffn: RMSNorm | None = getattr(self, "post_ffn_norm", None)
        x = x + (h if post_ffn is None else post_ffn(h))  # residual: (B, T, d_model)
        return BlockOutput(x, weights)
