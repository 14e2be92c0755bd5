"""Rotary position embeddings (RoPE; Su et al., RoFormer), in Hugging Face's layout.

A query or key vector of width ``D`` is cut into ``D / 2`` pairs of coordinates, and
pair ``i`` is rotated by the angle ``position * theta_i``, with frequencies
``theta_i = theta ** (-2i / D)`` (``inv_freq``). Hugging Face's Llama pairs coordinate
``i`` with coordinate ``i + D / 2`` ("rotate half"; its checkpoint conversion permutes the
query and key weight rows to match), where RoFormer, Meta's reference code and llama.cpp
pair adjacent coordinates ``2i`` and ``2i + 1``. With ``x = [x1, x2]`` split in halves,

    rotated = x * cos + rotate_half(x) * sin,   rotate_half(x) = [-x2, x1]

where ``cos`` and ``sin`` repeat each pair's angle in both halves. Seen as complex
numbers ``z_i = x1_i + 1j * x2_i`` the same rotation is one multiplication,
``z_i * exp(1j * position * theta_i)``; ``RotaryEmbedding.rotate_complex`` computes it
that way. Because rotations compose, the dot product of a query rotated
to position ``m`` and a key rotated to position ``n`` depends only on ``m - n``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from ._validation import (
    check_floating,
    check_min_rank,
    check_positive_int,
    format_shape,
)
from .positions import Positions

__all__ = ["RotaryEmbedding", "rotate_half"]


def theta_from_hf(rope_parameters: Mapping[str, Any], config: Any) -> float:
    """The rotary base of a transformers config, read in one place for every ``from_hf``.

    ``rope_parameters`` (the config's, or one layer type's) ``rope_theta``, else the
    config's ``rope_theta`` (transformers 4), else 10000.
    """
    return float(rope_parameters.get("rope_theta", getattr(config, "rope_theta", 10000.0)))


def rotate_half(x: Tensor) -> Tensor:
    """``[x1, x2] -> [-x2, x1]`` along the last dim (even width): a quarter turn of every pair."""
    x1, x2 = x.chunk(2, dim=-1)  # (*, D / 2) each
    return torch.cat([-x2, x1], dim=-1)


class RotaryEmbedding(Positions):
    """Rotate queries and keys by their positions (Hugging Face's rotate-half pairing).

    As the positions part of a layer it turns the last ``head_dim`` features of every
    query and key head (all of them, or latent attention's decoupled rotary part).

    Args:
        head_dim: Width ``D`` of each head's vectors; must be even.
        theta: The base of the frequencies ``theta ** (-2i / D)`` (Llama 2: 10 000,
            Llama 3: 500 000).

    Shape:
        x: ``(..., T, D)``; positions: ``(T,)``; output: ``(..., T, D)``.
    """

    def __init__(self, head_dim: int, theta: float = 10000.0) -> None:
        super().__init__()
        self.head_dim = check_positive_int("head_dim", head_dim)
        if head_dim % 2:
            raise ValueError(f"head_dim must be even (pairs of coordinates); got {head_dim}")
        if isinstance(theta, bool) or not isinstance(theta, int | float) or theta <= 0:
            raise ValueError(f"theta must be a positive number; got {theta!r}")
        self.theta = float(theta)

    def frequencies(self, device: torch.device | str | None = None) -> Tensor:
        """Each pair's frequency ``theta ** (-2i / D)``, float32 ``(D / 2,)``.

        Computed on every call rather than stored: the module holds no tensor, so a
        model built on the ``meta`` device and loaded later needs no patching.
        """
        D = self.head_dim
        exponents = torch.arange(0, D, 2, dtype=torch.int64, device=device).float() / D
        return self.theta**-exponents  # (D/2,)

    @property
    def inv_freq(self) -> Tensor:
        """The frequencies on the CPU: [`frequencies`][attnlab.RotaryEmbedding.frequencies]."""
        return self.frequencies()

    def angles(self, positions: Tensor) -> Tensor:
        """Each position's angle for each pair, ``position * inv_freq``: ``(T,) -> (T, D / 2)``."""
        if not isinstance(positions, Tensor) or positions.dim() != 1:
            raise ValueError(
                "positions must be a tensor of shape (T,); got "
                + (
                    format_shape(positions.shape)
                    if isinstance(positions, Tensor)
                    else type(positions).__name__
                )
            )
        # (T, 1) * (D/2,) -> (T, D/2)
        return positions.float().unsqueeze(-1) * self.frequencies(positions.device)

    def cos_sin(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """``cos`` and ``sin`` of the angles, each pair's in both halves: ``(T,) -> (T, D)`` each.

        Float32, what transformers' ``LlamaRotaryEmbedding`` returns.
        """
        angles = self.angles(positions)  # (T, D/2)
        emb = torch.cat([angles, angles], dim=-1)  # (T, D)
        return emb.cos(), emb.sin()

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        """Rotate ``x`` ``(..., T, D)`` by the angles of ``positions`` ``(T,)``, in its dtype."""
        return self.rotate(self._check(x, positions), positions)

    def rotate(self, x: Tensor, positions: Tensor) -> Tensor:
        """``forward`` without its checks, for a caller that checked ``x`` already."""
        cos, sin = self.cos_sin(positions.to(x.device))  # (T, D) each
        return self.apply_cos_sin(x, cos, sin)

    @staticmethod
    def apply_cos_sin(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """Rotate ``x`` ``(..., T, D)`` by a ``cos_sin`` table ``(T, D)``, in its dtype."""
        rotated = x.float() * cos + rotate_half(x.float()) * sin
        return rotated.to(x.dtype)

    def queries_keys(
        self,
        queries: Tensor,
        keys: Tensor,
        offset: int,
        table: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Turn queries and keys to positions ``offset, offset + 1, ...``.

        ``table`` is a model's ``(cos, sin)`` for these positions, each ``(T, D)`` or
        ``(B, T, D)`` (one row of positions per sequence); without it the part computes
        its own. Queries and keys share the table: it is built once.

        Shape:
            queries: ``(B, H, T, Dq)``; keys: ``(B, Hkv, T, Dk)``, ``Dq, Dk >= head_dim``.
        """
        if table is None:
            positions = torch.arange(offset, offset + queries.shape[-2], device=queries.device)
            table = self.cos_sin(positions)  # (T, D) each
        cos, sin = table
        if cos.dim() == 3:  # (B, T, D) -> (B, 1, T, D): the same angles for every head
            cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)
        return self._turn_last(queries, cos, sin), self._turn_last(keys, cos, sin)

    def _turn_last(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """``apply_cos_sin`` on the last ``head_dim`` features of ``x``; the rest kept."""
        D = self.head_dim
        if x.shape[-1] == D:
            return self.apply_cos_sin(x, cos, sin)
        return torch.cat([x[..., :-D], self.apply_cos_sin(x[..., -D:], cos, sin)], dim=-1)

    def rotate_complex(self, x: Tensor, positions: Tensor) -> Tensor:
        """``forward`` in complex numbers: ``(x_i + 1j * x_{i+D/2}) * exp(1j * angle_i)``."""
        x = self._check(x, positions)
        x1, x2 = x.float().chunk(2, dim=-1)  # (..., T, D/2) each
        z = torch.complex(x1, x2)
        turns = torch.polar(torch.ones_like(self.angles(positions)), self.angles(positions))
        rotated = z * turns.to(x.device)  # (..., T, D/2), complex
        return torch.cat([rotated.real, rotated.imag], dim=-1).to(x.dtype)

    def _check(self, x: object, positions: Tensor) -> Tensor:
        """Check ``x``'s width and length against ``head_dim`` and ``positions``."""
        x = check_floating("x", x)
        check_min_rank("x", x, 2, "(..., T, D)")
        if (
            x.shape[-1] != self.head_dim
            or not isinstance(positions, Tensor)
            or (positions.dim() != 1 or positions.shape[0] != x.shape[-2])
        ):
            got = format_shape(positions.shape) if isinstance(positions, Tensor) else "?"
            raise ValueError(
                f"x must have shape (..., T, D) with D = {self.head_dim} and positions "
                f"shape (T,); got x {format_shape(x.shape)} and positions {got}"
            )
        return x

    def extra_repr(self) -> str:
        """Head width and base, shown by ``print(module)``."""
        return f"head_dim={self.head_dim}, theta={self.theta}"
