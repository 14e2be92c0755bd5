"""Flash attention's tiles: block sizes, which blocks a query block visits, their scores.

The bookkeeping that [`flash_attention`][attnlab.flash_attention]'s forward pass, its
backward pass and [`flash_visited_blocks`][attnlab.flash_visited_blocks] share: the
``(Bq, Bk)`` block sizes, the range of key blocks each query block may see (causal
blocks in the future and blocks outside a sliding window are never visited), the bias
that hides what the causal rule or the window hides inside a block, and one block's
scaled, masked scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from ._validation import check_positive_int
from .masks import apply_mask

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "Tile",
    "TileRule",
    "block_bias",
    "block_scores",
    "check_block_size",
    "flash_visited_blocks",
    "key_range",
]

DEFAULT_BLOCK_SIZE: tuple[int, int] = (512, 1024)
"""Default ``(query block, key block)`` sizes, chosen by measuring on a 2-core CPU.

Large enough that each tile is a few large operations (12 heads of a ``(512, 1024)``
tile are 24 MiB of scores, which fits a 32 MiB L3 cache), so that a busy neighbour
process, which makes every parallel region wait, costs little; small enough that a
causal pass wastes little on the diagonal tiles' hidden half."""


def check_block_size(block_size: object) -> tuple[int, int]:
    """Return ``(Bq, Bk)`` from an int or a pair of positive ints."""
    if isinstance(block_size, tuple) and len(block_size) == 2:
        return (
            check_positive_int("block_size[0]", block_size[0]),
            check_positive_int("block_size[1]", block_size[1]),
        )
    if isinstance(block_size, tuple):
        raise ValueError(
            f"block_size must be an int or a pair (Bq, Bk); got a tuple of {len(block_size)}"
        )
    size = check_positive_int("block_size", block_size)
    return size, size


def key_range(
    i0: int, i1: int, L: int, S: int, is_causal: bool, window: int | None, block_k: int
) -> tuple[int, int]:
    """Keys ``[start, end)`` that query rows ``i0:i1`` may see; ``start`` on a block edge.

    Causal (top-left): keys before ``i1``. A window (end-aligned, row ``i`` at position
    ``i + S - L``): keys after ``i0 + S - L - window`` up to ``i1 - 1 + S - L``.
    """
    if window is not None:
        offset = S - L
        start = max(0, i0 + offset - window + 1) // block_k * block_k
        end = min(S, i1 + offset)
        return start, max(start, end)
    return 0, (min(S, i1) if is_causal else S)


def flash_visited_blocks(
    L: int,
    S: int,
    block_size: int | tuple[int, int] = DEFAULT_BLOCK_SIZE,
    is_causal: bool = False,
    window: int | None = None,
) -> list[tuple[int, int]]:
    """The ``(query block start, key block start)`` pairs flash attention computes.

    The same bounds the loops of [`flash_attention`][attnlab.flash_attention] use:
    every other block is skipped, never computed.

    Args:
        L: Number of queries.
        S: Number of keys.
        block_size: Rows per block, as for ``flash_attention``.
        is_causal: Causal masking (top-left).
        window: A causal sliding window (end-aligned).

    Returns:
        The visited block pairs, in loop order.
    """
    block_q, block_k = check_block_size(block_size)
    visited: list[tuple[int, int]] = []
    for i0 in range(0, L, block_q):
        start, end = key_range(i0, min(i0 + block_q, L), L, S, is_causal, window, block_k)
        visited.extend((i0, j0) for j0 in range(start, end, block_k))
    return visited


@dataclass(frozen=True)
class Tile:
    """One tile: query positions ``i0:i1`` against key rows ``j0:j1``."""

    i0: int
    i1: int
    j0: int
    j1: int


@dataclass(frozen=True, eq=False)
class TileRule:
    """What hides keys from queries inside a tile: the same for every tile of one call.

    The tiles hold the query rows of ``group`` heads interleaved (see
    [`flash_attention`][attnlab.flash_attention]'s kernel layout): row ``r`` of a tile
    is query position ``i0 + r // group``.

    Attributes:
        is_causal: Causal masking, aligned top-left.
        window: A causal sliding window, end-aligned: query ``i`` stands at key
            position ``i + offset``.
        offset: ``S - L``, where the window aligns the queries.
        group: Query rows per position (the query heads that share a key/value head).
        mask: The caller's mask as a view shaped ``(..., L, group, S)``: bool (``True`` =
            may attend) or float (added to the scaled scores), by the rule of
            [`apply_mask`][attnlab.apply_mask]; ``None`` for none.
        biases: A cache of causal or window biases, one per block shape and place.
    """

    is_causal: bool = False
    window: int | None = None
    offset: int = 0
    group: int = 1
    mask: Tensor | None = None
    biases: dict[tuple[int, ...], Tensor] = field(default_factory=dict, compare=False)


def block_bias(tile: Tile, rule: TileRule, like: Tensor) -> Tensor | None:
    """``(Bq * group, w)``: ``-inf`` where the causal rule or the window hides a key, else 0.

    The bias covers the tile's last ``w`` columns: with the causal rule, the keys after
    the block's first query (every row sees the keys before it, so a wide tile's bias
    stays one ``Bq``-wide triangle); with a window, every column. In ``like``'s dtype
    and on its device; ``None`` when the tile hides nothing (no causal mask or window,
    or a causal tile on or below the diagonal). Added to the scores, it masks them: the
    result of ``masked_fill`` with ``-inf``, about ten times faster on a CPU. A bias
    depends only on its shape and on where it sits relative to the diagonal, so
    ``rule.biases`` keeps one per such key.
    """
    i0, i1, j0, j1 = tile.i0, tile.i1, tile.j0, tile.j1
    window, offset = rule.window, rule.offset
    # Key c of the covered columns is hidden from row r (position p = r // group) when
    # c > p + d, with d the diagonal's offset; a window also hides c <= p + d - window.
    if window is not None:  # row i stands at position i + offset (end-aligned)
        if j1 - 1 <= i0 + offset and j0 > i1 - 1 + offset - window:
            return None  # every key of the tile is inside every row's window
        key: tuple[int, ...] = (i1 - i0, j1 - j0, rule.group, i0 + offset - j0, window)
    elif rule.is_causal and j1 - 1 > i0:  # the tile reaches above the diagonal
        first = max(j0, i0 + 1)  # the first key that some row of the block cannot see
        key = (i1 - i0, j1 - first, rule.group, i0 - first)
    else:
        return None
    bias = rule.biases.get(key)
    if bias is None:
        bias = _hiding_bias(key, window, like)
        rule.biases[key] = bias
    return bias


def _hiding_bias(key: tuple[int, ...], window: int | None, like: Tensor) -> Tensor:
    """The bias of ``block_bias``'s cache ``key``: (rows, cols, group, diagonal, ...)."""
    rows, cols, group, diagonal = key[:4]
    # (rows * group, 1): each position once per head of the group, as the tile's rows
    positions = torch.arange(rows, device=like.device).repeat_interleave(group) + diagonal
    positions = positions.unsqueeze(-1)
    keys = torch.arange(cols, device=like.device)  # c
    hidden = keys > positions
    if window is not None:
        hidden |= keys <= positions - window
    return like.new_zeros(rows * group, cols).masked_fill_(hidden, float("-inf"))


def _add_bias(attn_scores: Tensor, bias: Tensor, inplace: bool) -> Tensor:
    """The scores with ``bias`` added to their last ``bias.shape[-1]`` columns."""
    first = attn_scores.shape[-1] - bias.shape[-1]
    if inplace:
        attn_scores[..., first:].add_(bias)
        return attn_scores
    return torch.cat([attn_scores[..., :first], attn_scores[..., first:] + bias], dim=-1)


def block_scores(
    queries: Tensor, keys: Tensor, tile: Tile, rule: TileRule, *, out: Tensor | None = None
) -> Tensor:
    """Scaled, masked scores of the tile's query rows against its key rows.

    ``queries`` are the tile's query rows already multiplied by the scale; ``keys``
    are all the keys (the tile picks rows ``j0:j1``). The one home of the mask rule
    for the forward and the backward pass. With ``out`` (no autograd), the scores are
    written into it and masked in place, by the rule of
    [`apply_mask`][attnlab.apply_mask].

    Shapes: ``queries (n, Bq * group, E)``, ``keys (n, S, E)``,
    ``out (n, Bq * group, Bk)``; returns ``(n, Bq * group, Bk)``.
    """
    block_keys = keys[:, tile.j0 : tile.j1].transpose(-2, -1)  # (n, E, Bk)
    attn_scores = queries @ block_keys if out is None else torch.bmm(queries, block_keys, out=out)
    bias = block_bias(tile, rule, attn_scores)
    if bias is not None:
        return _add_bias(attn_scores, bias, inplace=out is not None)
    if rule.mask is not None:
        # (..., Bq, group, Bk) -> (n, Bq * group, Bk): a copy of one block only
        mask_block = rule.mask[..., tile.i0 : tile.i1, :, tile.j0 : tile.j1]
        mask_block = mask_block.reshape(attn_scores.shape)
        return apply_mask(attn_scores, mask_block, inplace=out is not None)
    return attn_scores
