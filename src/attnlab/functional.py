"""Functional attention: each piece of the math, once.

Shapes and masks follow the conventions of the package docstring. The public
functions check their arguments, then call the one unchecked computation,
``explicit_attention``, which the ``"explicit"`` backend and the modules also use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ._validation import (
    broadcast_shape,
    check_attention_args,
    check_floating,
    check_gqa_shapes,
    check_int,
    check_min_rank,
    check_same_device,
    check_sinks,
    format_shape,
)
from .masks import apply_mask, causal_mask, divide_rows, row_shift

__all__ = [
    "AttentionCall",
    "attention_scores",
    "attention_weights",
    "attention_with_weights",
    "causal_mask",  # defined in masks.py, re-exported for ``from attnlab.functional import``
    "check_gqa_heads",
    "context_vectors",
    "repeat_kv_heads",
    "scaled_dot_product_attention",
    "softmax",
    "softmax_naive",
]


@dataclass(frozen=True, kw_only=True)
class AttentionCall:
    """The settings of one attention call, already checked: all but query, key and value.

    Every kernel of the backend registry takes ``(query, key, value, call)``. The
    defaults are SDPA's.

    Attributes:
        attn_mask: ``None`` or a mask broadcastable to ``(N, ..., L, S)``.
        dropout_p: Dropout probability on the weights, applied whenever positive.
        is_causal: SDPA's causal flag; never with ``attn_mask``.
        scale: Multiplier of the scores; ``None`` means ``1 / sqrt(E)``.
        group: Query heads per key/value head (``1``: no grouped-query attention);
            query head ``h`` uses key/value head ``h // group``, heads at dim ``-3``.
        sinks: ``None`` or one logit per query head ``(H,)``: a column that joins each
            row's softmax and is dropped, so a row's weights sum to less than one.
    """

    attn_mask: Tensor | None = None
    dropout_p: float = 0.0
    is_causal: bool = False
    scale: float | None = None
    group: int = 1
    sinks: Tensor | None = None


def softmax_naive(x: Tensor, dim: int = -1) -> Tensor:
    """Softmax exactly as the textbook writes it: ``exp(x) / sum(exp(x))``.

    For teaching only: ``exp`` overflows to ``inf`` once a score passes about 88.7 in
    float32, and the result becomes ``nan``. Use [`softmax`][attnlab.softmax].
    """
    x = _check_softmax_args(x, dim)
    exp_x = torch.exp(x)
    return exp_x / exp_x.sum(dim=dim, keepdim=True)  # a 0-d x: exp(x) / exp(x) = 1


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """Numerically stable softmax.

    Subtracts each slice's maximum before ``exp``, which leaves the result unchanged
    but keeps every exponent at or below zero, so nothing overflows.

    Returns:
        Weights shaped like ``x``; each slice along ``dim`` sums to one, or is all zeros
        where ``x`` was all ``-inf`` (where ``torch.softmax`` gives NaN). A 0-d ``x``
        gives 1, an empty one an empty result, as with ``torch.softmax``.
    """
    return _softmax(_check_softmax_args(x, dim), dim)


def attention_scores(queries: Tensor, keys: Tensor) -> Tensor:
    """Unscaled scores ``queries @ keys.transpose(-2, -1)``, for any batch dims.

    Shape:
        queries: ``(N, ..., L, E)``; keys: ``(N, ..., S, E)``; output ``(N, ..., L, S)``.
    """
    queries = check_floating("queries", queries)
    keys = check_floating("keys", keys)
    check_min_rank("queries", queries, 2, "(N, ..., L, E)")
    check_min_rank("keys", keys, 2, "(N, ..., S, E)")
    if keys.shape[-1] != queries.shape[-1]:
        raise ValueError(
            f"keys must have shape (N, ..., S, E) with E = {queries.shape[-1]} to match "
            f"queries; got shape {format_shape(keys.shape)}"
        )
    _check_pair("queries", queries, "keys", keys, "(N, ..., S, E)")
    return queries @ keys.transpose(-2, -1)


def attention_weights(
    query: Tensor,
    key: Tensor,
    attn_mask: Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    sinks: Tensor | None = None,
) -> Tensor:
    """Attention weights ``softmax(query @ key^T * scale + mask)``, shaped ``(N, ..., L, S)``.

    The arguments mean what they mean in
    [`scaled_dot_product_attention`][attnlab.scaled_dot_product_attention].
    """
    batch, _ = check_attention_args(query, key, key, attn_mask, 0.0, is_causal, scale)
    sinks = check_sinks(sinks, batch, query)
    call = AttentionCall(attn_mask=attn_mask, is_causal=is_causal, scale=scale, sinks=sinks)
    return _masked_softmax(query, key, call).to(query.dtype)


def context_vectors(attn_weights: Tensor, values: Tensor) -> Tensor:
    """Context vectors ``attn_weights @ values``: each query's weighted sum of the values.

    Shape:
        attn_weights: ``(N, ..., L, S)``; values: ``(N, ..., S, Ev)``;
        output: ``(N, ..., L, Ev)``.
    """
    attn_weights = check_floating("attn_weights", attn_weights)
    values = check_floating("values", values)
    check_min_rank("attn_weights", attn_weights, 2, "(N, ..., L, S)")
    check_min_rank("values", values, 2, "(N, ..., S, Ev)")
    if values.shape[-2] != attn_weights.shape[-1]:
        raise ValueError(
            f"values must have shape (N, ..., S, Ev) with S = {attn_weights.shape[-1]} "
            f"to match attn_weights; got shape {format_shape(values.shape)}"
        )
    _check_pair("attn_weights", attn_weights, "values", values, "(N, ..., S, Ev)")
    return attn_weights @ values


def attention_with_weights(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    sinks: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention that also returns its attention weights.

    Same arguments as [`scaled_dot_product_attention`][attnlab.scaled_dot_product_attention]
    (without ``enable_gqa``).

    Returns:
        ``(output, attn_weights)``; the weights are those after dropout, the ones the
        output was computed with, shaped ``(N, ..., L, S)`` (without the sink's column).
    """
    batch, _ = check_attention_args(query, key, value, attn_mask, dropout_p, is_causal, scale)
    sinks = check_sinks(sinks, batch, query)
    call = AttentionCall(
        attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, sinks=sinks
    )
    return explicit_attention(query, key, value, call)


def explicit_attention(
    query: Tensor, key: Tensor, value: Tensor, call: AttentionCall
) -> tuple[Tensor, Tensor]:
    """The explicit computation, ``(output, attn_weights)``, on arguments already checked.

    The one home of the maths behind the functions above, the ``"explicit"`` backend and
    the modules' weights; it checks nothing.
    """
    if call.group > 1:  # (N, ..., Hkv, S, E) -> (N, ..., Hkv * group, S, E)
        key, value = repeat_kv_heads(key, call.group), repeat_kv_heads(value, call.group)
    attn_weights = _masked_softmax(query, key, call)  # (N, ..., L, S)
    if call.dropout_p > 0.0:
        attn_weights = F.dropout(attn_weights, p=call.dropout_p, training=True)
    context_vecs = attn_weights @ value.to(attn_weights.dtype)  # (N, ..., L, Ev)
    return context_vecs.to(query.dtype), attn_weights.to(query.dtype)


def check_gqa_heads(query: object, key: object, value: object) -> int:
    """Check grouped-query heads (``enable_gqa``); return the group size ``Hq // Hkv``.

    As in PyTorch's SDPA with ``enable_gqa=True``: the heads sit at dim ``-3``; key and
    value have the same number ``Hkv`` of heads, which divides the query's ``Hq``.

    Raises:
        ValueError: A rank below 3, or head counts that do not group.
    """
    return check_gqa_shapes(
        check_floating("query", query), check_floating("key", key), check_floating("value", value)
    )


def repeat_kv_heads(tensor: Tensor, group: int) -> Tensor:
    """Repeat each key/value head ``group`` times, next to itself (``repeat_interleave``).

    Query head ``h`` then meets key/value head ``h // group``: PyTorch's ``enable_gqa``.

    Shape:
        tensor: ``(N, ..., Hkv, S, E)``; output: ``(N, ..., Hkv * group, S, E)``.
    """
    return tensor.repeat_interleave(group, dim=-3)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    sinks: Tensor | None = None,
) -> Tensor:
    """Scaled dot-product attention, written out, with PyTorch's semantics.

    ``softmax(query @ key^T * scale + mask) @ value``, behaving exactly as
    ``torch.nn.functional.scaled_dot_product_attention``: any broadcasting batch dims,
    ``L != S`` allowed, a fully masked query row outputs zeros.

    Args:
        query: ``(N, ..., L, E)``, or ``(N, ..., Hq, L, E)`` with ``enable_gqa``.
        key: ``(N, ..., S, E)``, or ``(N, ..., Hkv, S, E)``.
        value: ``(N, ..., S, Ev)``, or ``(N, ..., Hkv, S, Ev)``.
        attn_mask: Optional mask broadcastable to ``(N, ..., L, S)``; a float mask has
            the query's dtype.
        dropout_p: Dropout probability on the weights, in ``[0, 1]``; applied whenever
            positive, survivors scaled by ``1 / (1 - dropout_p)``.
        is_causal: Causal masking, aligned top-left; not together with ``attn_mask``.
        scale: Multiplier of the scores; defaults to ``1 / sqrt(E)``.
        enable_gqa: Grouped-query attention: query head ``h`` uses key/value head
            ``h // (Hq // Hkv)``. This explicit path repeats them.
        sinks: Optional attention sinks (gpt-oss), one logit ``s_h`` per query head,
            ``(H,)`` with the heads at dim ``-3``: each row's softmax runs over its
            scores and ``s_h``, and the sink's share is dropped, as a key whose value is
            zero. A row's weights then sum to ``1 - exp(s_h - lse)`` (``lse`` over the
            scores and ``s_h``); a fully masked row outputs zeros.

    Returns:
        The attention output, ``(N, ..., L, Ev)``.

    Raises:
        TypeError: A non-tensor, a non-floating or mismatched dtype, a bad mask dtype.
        ValueError: Wrong rank, mismatched ``E`` or ``S``, a mask that does not broadcast,
            both ``attn_mask`` and ``is_causal``, ``dropout_p`` outside ``[0, 1]``, head
            counts that do not group (``enable_gqa``), ``sinks`` not ``(H,)``.
    """
    batch, group = check_attention_args(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa=enable_gqa
    )
    call = AttentionCall(
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        is_causal=is_causal,
        scale=scale,
        group=group,
        sinks=check_sinks(sinks, batch, query),
    )
    output, _ = explicit_attention(query, key, value, call)
    return output


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of scores, softmax and sums: float32 for half input, as PyTorch's kernels.

    The one home of this rule; the explicit path and flash attention both use it.
    """
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _check_softmax_args(x: object, dim: object) -> Tensor:
    """Check softmax's input (a floating tensor) and its ``dim`` (0 or -1 for a 0-d one)."""
    tensor = check_floating("x", x)
    dim = check_int("dim", dim)
    rank = max(tensor.dim(), 1)  # a 0-d tensor takes dim 0 or -1, as in torch.softmax
    if not -rank <= dim < rank:
        raise ValueError(
            f"dim must be in [{-rank}, {rank - 1}] for x of shape "
            f"{format_shape(tensor.shape)}; got {dim}"
        )
    return tensor


def _check_pair(first_name: str, first: Tensor, name: str, tensor: Tensor, wanted: str) -> None:
    """Check that ``tensor`` shares ``first``'s dtype and device and broadcasts with its batch."""
    if tensor.dtype != first.dtype:
        raise TypeError(
            f"{first_name} and {name} must share one dtype; got {first.dtype} and {tensor.dtype}"
        )
    check_same_device(name, tensor, first, first_name)
    if broadcast_shape(first.shape[:-2], tensor.shape[:-2]) is None:
        raise ValueError(
            f"{name} must have shape {wanted} with batch dims that broadcast with "
            f"{first_name}'s {format_shape(first.shape[:-2])}; "
            f"got shape {format_shape(tensor.shape)}"
        )


def _softmax(x: Tensor, dim: int) -> Tensor:
    """``softmax``'s maths, on arguments already checked."""
    if x.dim() == 0:  # a single score: its weight is 1, as torch.softmax gives
        return torch.ones_like(x)
    if x.shape[dim] == 0:  # nothing to normalise (no keys): an empty result, as torch gives
        return x.clone()
    x_max = row_shift(x.amax(dim=dim, keepdim=True))  # a fully masked slice: shifted by 0
    exp_x = torch.exp(x - x_max)
    return divide_rows(exp_x, exp_x.sum(dim=dim, keepdim=True))


def _masked_softmax(query: Tensor, key: Tensor, call: AttentionCall) -> Tensor:
    """PyTorch's reference ``softmax(query @ key.T * scale + attn_bias)``, in ``compute_dtype``."""
    compute = compute_dtype(query.dtype)
    query, key = query.to(compute), key.to(compute)
    scale = call.scale
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    attn_scores = (query @ key.transpose(-2, -1)) * scale  # (N, ..., L, S)
    L, S = query.shape[-2], key.shape[-2]
    attn_mask = call.attn_mask
    if call.is_causal and L > 0 and S > 0:
        attn_mask = causal_mask(L, S, device=query.device)  # (L, S)
    elif attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask.to(compute)
    attn_scores = apply_mask(attn_scores, attn_mask)
    if call.sinks is None:
        return _softmax(attn_scores, dim=-1)
    # the sink: one more column per row, logit s_h, softmaxed with the scores, then dropped
    sink_column = call.sinks.to(compute).view(-1, 1, 1).expand(*attn_scores.shape[:-1], 1)
    return _softmax(torch.cat([attn_scores, sink_column], dim=-1), dim=-1)[..., :-1]
