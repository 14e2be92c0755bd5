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

import torch
from torch import Tensor, nn

from ._validation import (
    check_floating,
    check_min_rank,
    check_positive_int,
    format_shape,
)

__all__ = ["RotaryEmbedding", "rotate_half"]


def rotate_half(x: Tensor) -> Tensor:
    """``[x1, x2] -> [-x2, x1]`` along the last dim: a quarter turn of every pair.

    Args:
        x: Vectors of even width ``D``.

    Returns:
        The turned vectors.

    Shape:
        x: ``(*, D)``; output: ``(*, D)``.
    """
    x1, x2 = x.chunk(2, dim=-1)  # (*, D / 2) each
    return torch.cat([-x2, x1], dim=-1)


class RotaryEmbedding(nn.Module):
    """Rotate queries and keys by their positions (Hugging Face's rotate-half pairing).

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
        """Each pair's frequency ``theta ** (-2i / D)``, float32, computed where asked.

        Computed on every call (``D / 2`` numbers) rather than stored: the module holds
        no tensor, so a model built on the ``meta`` device and loaded later needs no
        patching, and one model-level table serves every layer.

        Shape:
            output: ``(D / 2,)``.
        """
        D = self.head_dim
        exponents = torch.arange(0, D, 2, dtype=torch.int64, device=device).float() / D
        return self.theta**-exponents  # (D/2,)

    @property
    def inv_freq(self) -> Tensor:
        """The frequencies on the CPU: [`frequencies`][attnlab.RotaryEmbedding.frequencies]."""
        return self.frequencies()

    def angles(self, positions: Tensor) -> Tensor:
        """Each position's angle for each pair: ``position * inv_freq``.

        Args:
            positions: Integer (or float) positions.

        Returns:
            Angles in radians, float32.

        Shape:
            positions: ``(T,)``; output: ``(T, D / 2)``.
        """
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
        """``cos`` and ``sin`` of the angles, each pair's angle in both halves.

        Args:
            positions: Positions.

        Returns:
            ``(cos, sin)``, float32 (what ``LlamaRotaryEmbedding`` returns).

        Shape:
            positions: ``(T,)``; each output: ``(T, D)``.
        """
        angles = self.angles(positions)  # (T, D/2)
        emb = torch.cat([angles, angles], dim=-1)  # (T, D)
        return emb.cos(), emb.sin()

    def forward(self, x: Tensor, positions: Tensor) -> Tensor:
        """Rotate ``x`` (queries or keys) by the angles of ``positions``.

        Args:
            x: Vectors, one per position, last dim ``D``.
            positions: The position of each of the ``T`` vectors.

        Returns:
            The rotated vectors, in ``x``'s dtype.

        Shape:
            x: ``(..., T, D)``; positions: ``(T,)``; output: ``(..., T, D)``.
        """
        return self.rotate(self._check(x, positions), positions)

    def rotate(self, x: Tensor, positions: Tensor) -> Tensor:
        """``forward`` without its checks, for a caller that checked ``x`` already.

        [`GroupedQueryAttention`][attnlab.GroupedQueryAttention] checks its input once
        and rotates its queries and keys with this.

        Args:
            x: Vectors, one per position, last dim ``D``, on this module's device.
            positions: The position of each of the ``T`` vectors.

        Returns:
            The rotated vectors, in ``x``'s dtype.

        Shape:
            x: ``(..., T, D)``; positions: ``(T,)``; output: ``(..., T, D)``.
        """
        cos, sin = self.cos_sin(positions.to(x.device))  # (T, D) each
        return self.apply_cos_sin(x, cos, sin)

    @staticmethod
    def apply_cos_sin(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """Rotate ``x`` by angles already turned into ``cos`` and ``sin`` (``cos_sin``).

        Queries and keys at the same positions share one ``cos_sin``: computed once,
        applied to both.

        Args:
            x: Vectors, one per position, last dim ``D``.
            cos: ``cos_sin(positions)[0]``.
            sin: ``cos_sin(positions)[1]``.

        Returns:
            The rotated vectors, in ``x``'s dtype.

        Shape:
            x: ``(..., T, D)``; cos, sin: ``(T, D)``; output: ``(..., T, D)``.
        """
        rotated = x.float() * cos + rotate_half(x.float()) * sin
        return rotated.to(x.dtype)

    def rotate_complex(self, x: Tensor, positions: Tensor) -> Tensor:
        """The same rotation as ``forward``, computed with complex numbers.

        Pair ``i`` (coordinates ``i`` and ``i + D/2``) becomes ``z = x_i + 1j * x_{i+D/2}``,
        which is multiplied by ``exp(1j * angle_i)``: a rotation in the plane.

        Args:
            x: Vectors, last dim ``D``.
            positions: Positions.

        Returns:
            The rotated vectors.

        Shape:
            x: ``(..., T, D)``; positions: ``(T,)``; output: ``(..., T, D)``.
        """
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
