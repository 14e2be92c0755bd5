"""Positions parts of [`AttentionHeads`][attnlab.AttentionHeads]: where order enters.

[`RotaryEmbedding`][attnlab.RotaryEmbedding] turns queries and keys;
[`ALiBi`][attnlab.ALiBi] (Press et al., 2022) adds to each head's scores a penalty
growing with the distance between query and key.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ._validation import check_positive_int

__all__ = ["ALiBi", "Positions", "alibi_slopes"]


class Positions(nn.Module):
    """The base of positions parts, adding none: a part overrides one method or both.

    The layer calls ``queries_keys`` before the cache (which keeps rotated keys) and
    ``score_bias`` when it builds the mask.
    """

    def queries_keys(
        self,
        queries: Tensor,
        keys: Tensor,
        offset: int,
        table: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Queries and new keys at positions ``offset, ...`` (``table``: a model's rotary)."""
        return queries, keys

    def score_bias(self, L: int, S: int, device: torch.device) -> Tensor | None:
        """A float added to the scores, queries being the last ``L`` of ``S``: none."""
        return None


def alibi_slopes(num_heads: int) -> Tensor:
    """ALiBi's slope for each head, float32 ``(H,)``.

    ``2 ** (-8 h / H)``, ``h = 1 .. H``, for ``H`` a power of two. Otherwise (the ALiBi
    repository's and BLOOM's rule) the slopes of ``n``, the power of two below ``H``,
    then every other slope of ``2n`` (falling between the first ones) for the rest.
    """
    H = check_positive_int("num_heads", num_heads)
    n = 2 ** math.floor(math.log2(H))
    slopes = [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]
    slopes += [2.0 ** (-8.0 * h / (2 * n)) for h in range(1, 2 * (H - n), 2)]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBi(Positions):
    """Attention with linear biases: head ``h`` adds ``-slope_h * |i - j|`` to its scores.

    ``i``, ``j``: the positions of query and key (queries are the last ``L`` of ``S``).
    Under a causal mask, Press et al.'s bias; without one, the same penalty both ways.
    No table: it works at any length. ``num_heads``: the layer's query heads.
    """

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.num_heads = check_positive_int("num_heads", num_heads)

    def score_bias(self, L: int, S: int, device: torch.device) -> Tensor:
        """The bias of every head, ``(H, L, S)``, float32."""
        query_pos = torch.arange(S - L, S, device=device)[:, None]  # (L, 1)
        distance = (query_pos - torch.arange(S, device=device)).abs()  # (L, S)
        return -distance * alibi_slopes(self.num_heads).to(device)[:, None, None]

    def extra_repr(self) -> str:
        """``num_heads``, for ``print(module)``."""
        return f"num_heads={self.num_heads}"
