"""Flash attention's tiles: block sizes, which blocks a query block visits, their scores.

The bookkeeping that [`flash_attention`][attnlab.flash_attention]'s forward pass, its
backward pass and [`flash_visited_blocks`][attnlab.flash_visited_blocks] share: the
``(Bq, Bk)`` block sizes, the range of key blocks each query block may see (causal
blocks in the future and blocks outside a sliding window are never visited), the bias
that hides what the causal rule or the window hides inside a block, and one block's
scaled, masked scores.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._validation import check_positive_int
from .masks import apply_mask

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "block_bias",
    "block_scores",
    "check_block_size",
    "flash_visited_blocks",
    "key_range",
]

DEFAULT_BLOCK_SIZE: tuple[int, int] = (256, 512)
"""Default ``(query block, key block)`` sizes, chosen by measuring on a 2-core CPU."""


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


def block_bias(
    i0: int,
    i1: int,
    j0: int,
    j1: int,
    is_causal: bool,
    window: int | None,
    offset: int,
    like: Tensor,
    cache: dict[tuple[int, ...], Tensor] | None = None,
) -> Tensor | None:
    """``(Bq, Bk)``: ``-inf`` where the causal rule or the window hides a key, else 0.

    In ``like``'s dtype and on its device; ``None`` when the block hides nothing (no
    causal mask or window, or a causal block on or below the diagonal). Added to the
    scores, it masks them: the result of ``masked_fill`` with ``-inf``, about ten times
    faster on a CPU. A block's bias depends only on its shape and on where it sits
    relative to the diagonal, so ``cache`` keeps one per such key.
    """
    rows, cols = i1 - i0, j1 - j0
    # Key c of the block is hidden from row r when c > r + d, with d the diagonal's
    # offset; a window also hides c <= r + d - window.
    if window is not None:  # row i stands at position i + offset (end-aligned)
        if j1 - 1 <= i0 + offset and j0 > i1 - 1 + offset - window:
            return None  # every key of the block is inside every row's window
        key: tuple[int, ...] = (rows, cols, i0 + offset - j0, window)
    elif is_causal and j1 - 1 > i0:  # the block reaches above the diagonal
        key = (rows, cols, i0 - j0)
    else:
        return None
    bias = None if cache is None else cache.get(key)
    if bias is None:
        positions = torch.arange(rows, device=like.device).unsqueeze(-1) + key[2]  # r + d
        keys = torch.arange(cols, device=like.device)  # c
        hidden = keys > positions
        if window is not None:
            hidden |= keys <= positions - window
        bias = like.new_zeros(rows, cols).masked_fill_(hidden, float("-inf"))
        if cache is not None:
            cache[key] = bias
    return bias


def block_scores(
    queries: Tensor,
    k: Tensor,
    mask: Tensor | None,
    is_causal: bool,
    i0: int,
    i1: int,
    j0: int,
    j1: int,
    window: int | None = None,
    offset: int = 0,
    *,
    out: Tensor | None = None,
    cache: dict[tuple[int, ...], Tensor] | None = None,
) -> Tensor:
    """Scaled, masked scores of query rows ``i0:i1`` against key rows ``j0:j1``.

    ``queries`` are the block's queries already multiplied by the scale; the one home
    of the mask rule for the forward and the backward pass. With a ``window``, row
    ``i`` stands at position ``i + offset`` (``offset = S - L``, end-aligned).
    With ``out`` (no autograd), the scores are written into it and masked in place,
    by the rule of [`apply_mask`][attnlab.apply_mask].

    Shapes: ``queries (n, Bq, E)``, ``k (n, S, E)``, ``mask (N, ..., L, S)``,
    ``out (n, Bq, Bk)``; returns ``(n, Bq, Bk)``.
    """
    n = queries.shape[0]
    keys = k[:, j0:j1].transpose(-2, -1)
    attn_scores = queries @ keys if out is None else torch.bmm(queries, keys, out=out)
    bias = block_bias(i0, i1, j0, j1, is_causal, window, offset, attn_scores, cache)
    if bias is not None:
        return attn_scores + bias if out is None else attn_scores.add_(bias)
    if mask is not None:
        # (N, ..., Bq, Bk) -> (n, Bq, Bk): a copy of one block only
        mask_block = mask[..., i0:i1, j0:j1].reshape(n, i1 - i0, j1 - j0)
        return apply_mask(attn_scores, mask_block, inplace=out is not None)
    return attn_scores
