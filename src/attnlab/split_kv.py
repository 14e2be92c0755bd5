"""Split-KV decoding (FlashDecoding): one query over a long cache, in parallel chunks.

At decoding a step has one query per sequence and head, and a cache of ``S`` keys. Flash
attention parallelises over query blocks, batch and heads; with one query row there is
one block per (batch, head), too few to keep a GPU's hundred-odd cores busy however
long the cache. FlashDecoding (Dao, Haziza, Massa and Sizov, 2023) splits the *keys*
instead:

1. cut the cache into ``num_splits`` chunks of consecutive positions;
2. attend the query to every chunk at once (the chunks are one more batch dim), keeping
   each chunk's output and the log-sum-exp of its scores;
3. merge the partial outputs with the log-sum-exp rule that ring attention uses,
   [`merge_partials`][attnlab.ring.merge_partials], pairwise in ``log2(num_splits)``
   rounds.

Each chunk is computed by [`flash_attention`][attnlab.flash_attention]'s kernel and
merged by ring attention's rule: nothing here is new arithmetic, only a new order of
the work. The result equals ``scaled_dot_product_attention`` up to rounding, gradients
included.

Shape legend: ``query (N, ..., L, E)``, ``key (N, ..., S, E)``, ``value (N, ..., S, Ev)``,
output ``(N, ..., L, Ev)``; masks as in PyTorch's SDPA (boolean ``True`` = may attend,
float added to the scores).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ._validation import check_attention_args, check_positive_int
from .flash import flash_with_lse
from .functional import compute_dtype
from .ring import merge_partials

__all__ = ["split_kv_attention", "split_kv_partials"]


def split_kv_partials(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    scale: float | None = None,
    num_splits: int = 4,
    *,
    enable_gqa: bool = False,
) -> tuple[Tensor, Tensor]:
    """Every chunk's attention output and log-sum-exp, before the merge.

    The keys and values are cut into ``num_splits`` chunks of ``ceil(S / num_splits)``
    positions (the last one padded with hidden keys); the query attends to all of them
    in one call, the chunks being one more batch dim. A query row that sees no key of a
    chunk gets zeros and a log-sum-exp of ``-inf`` there.

    Args:
        query: The queries (usually one row per sequence and head).
        key: The cached keys.
        value: The cached values.
        attn_mask: Optional mask over the ``S`` keys, as SDPA's.
        scale: Multiplier of the scores; ``1 / sqrt(E)`` if ``None``.
        num_splits: Chunks of the keys (at most ``S``).
        enable_gqa: Query heads share key/value heads, as in SDPA.

    Returns:
        ``(outputs, lse)``: outputs ``(num_splits, N, ..., L, Ev)`` and log-sum-exps
        ``(num_splits, N, ..., L)``, in float32 for 16-bit inputs (the merge's
        precision).

    Raises:
        TypeError, ValueError: As ``scaled_dot_product_attention`` (see
            ``check_attention_args``), and ``num_splits`` not a positive int at most ``S``.
    """
    batch, group = check_attention_args(
        query, key, value, attn_mask, 0.0, False, scale, enable_gqa=enable_gqa
    )
    splits = check_positive_int("num_splits", num_splits)
    L, S = query.shape[-2], key.shape[-2]
    if splits > max(S, 1):
        raise ValueError(f"num_splits must be at most S = {S} (the keys); got {splits}")
    chunk = -(-S // splits)  # ceil(S / splits)
    pad = chunk * splits - S
    if attn_mask is None and pad:
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=query.device)
    if attn_mask is not None:
        # (..., L, S) -> (N, ..., L, S + pad) -> (splits, N, ..., L, chunk): padding hidden
        fill = False if attn_mask.dtype == torch.bool else float("-inf")
        mask = F.pad(attn_mask.expand(*batch, L, S), (0, pad), value=fill)
        attn_mask = mask.reshape(*mask.shape[:-1], splits, chunk).movedim(-2, 0)
    # 16-bit inputs: the partials stay in float32 until the merge is done
    compute = compute_dtype(query.dtype)
    # (N, ..., S, E) -> (N, ..., S + pad, E) -> (splits, N, ..., chunk, E)
    keys, values = (
        F.pad(x.to(compute), (0, 0, 0, pad))
        .reshape(*x.shape[:-2], splits, chunk, x.shape[-1])
        .movedim(-3, 0)
        for x in (key, value)
    )
    return flash_with_lse(
        query.to(compute).unsqueeze(0),  # (1, N, ..., L, E): the same query for every chunk
        keys,
        values,
        attn_mask,
        0.0,
        False,
        scale,
        (max(L, 1), max(chunk, 1)),  # one tile per chunk
        window=None,
        batch=(splits, *batch),
        group=group,
    )


def split_kv_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    scale: float | None = None,
    num_splits: int = 4,
    *,
    enable_gqa: bool = False,
) -> Tensor:
    """Attention computed over ``num_splits`` chunks of the keys, merged by log-sum-exp.

    Equal to ``scaled_dot_product_attention(query, key, value, attn_mask, scale=scale,
    enable_gqa=enable_gqa)`` up to rounding, for any number of query rows; built for
    decoding, where the query is one row and the keys are many. The chunks come from
    [`split_kv_partials`][attnlab.split_kv.split_kv_partials]; they are merged pairwise
    with [`merge_partials`][attnlab.ring.merge_partials], as a GPU's reduction would,
    in ``ceil(log2(num_splits))`` rounds.

    Args:
        query: The queries.
        key: The cached keys.
        value: The cached values.
        attn_mask: Optional mask over the keys, as SDPA's (no ``is_causal``: a decoding
            query sees the whole cache; pass a mask to hide some of it).
        scale: Multiplier of the scores; ``1 / sqrt(E)`` if ``None``.
        num_splits: Chunks of the keys (at most ``S``).
        enable_gqa: Query heads share key/value heads, as in SDPA.

    Returns:
        The attention output, in the query's dtype.

    Raises:
        TypeError, ValueError: As [`split_kv_partials`][attnlab.split_kv.split_kv_partials].

    Shape:
        query: ``(N, ..., L, E)``; key: ``(N, ..., S, E)``; value: ``(N, ..., S, Ev)``;
        output: ``(N, ..., L, Ev)``.
    """
    outputs, lse = split_kv_partials(
        query, key, value, attn_mask, scale, num_splits, enable_gqa=enable_gqa
    )
    while outputs.shape[0] > 1:  # one round: chunk i merged with chunk i + half
        half = outputs.shape[0] // 2
        merged = merge_partials(
            outputs[:half], lse[:half], outputs[half : 2 * half], lse[half : 2 * half]
        )
        # an odd chunk out waits for the next round
        outputs = torch.cat([merged[..., :-1], outputs[2 * half :]])
        lse = torch.cat([merged[..., -1], lse[2 * half :]])
    return outputs[0].to(query.dtype)
