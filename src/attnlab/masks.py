"""Masks: the one home of every mask and of the rule that applies one to scores.

The causal mask, key padding, combining masks, merging a module call's masks, the rule
"a bool mask becomes ``-inf``, a float mask is added", the rule for a query row with
nothing left to attend to (zeros, never NaN: [`row_shift`][attnlab.masks.row_shift] and
[`divide_rows`][attnlab.masks.divide_rows]) and translating PyTorch's module masks all
live here; the functional path, flash attention, ring attention and the modules use them.

The package has one mask convention, that of PyTorch's
``scaled_dot_product_attention``: a boolean mask's ``True`` means *may attend*, a float
mask is *added* to the scaled scores. A key padding mask follows it too: ``True`` marks
a real token that may be attended to.

``torch.nn.MultiheadAttention`` uses the **opposite** boolean polarity for both its
``attn_mask`` and its ``key_padding_mask`` (``True`` = *ignore*).
[`mask_from_torch`][attnlab.mask_from_torch] and
[`mask_to_torch`][attnlab.mask_to_torch] translate between the two; float masks
mean the same in both and pass through unchanged.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._validation import check_length, check_positive_int, check_tensor

__all__ = [
    "apply_mask",
    "causal_mask",
    "combine_masks",
    "decoder_mask",
    "divide_rows",
    "mask_from_torch",
    "mask_to_torch",
    "module_attn_mask",
    "padding_to_attn_mask",
    "row_shift",
    "sliding_window_mask",
]


def causal_mask(L: int, S: int | None = None, device: torch.device | str | None = None) -> Tensor:
    """Boolean causal mask, ``True`` where query ``i`` may attend to key ``j <= i``.

    Aligned top-left, as ``is_causal=True`` in PyTorch's SDPA: with ``L < S`` the last
    keys are hidden from every query; with ``L > S`` every query sees at least key 0.

    Args:
        L: Number of queries.
        S: Number of keys; defaults to ``L``.
        device: Where to create the mask.

    Returns:
        A lower-triangular bool tensor.

    Shape:
        output: ``(L, S)``.
    """
    S = L if S is None else S
    check_length("L", L)  # 0 queries or keys: an empty mask, as torch.ones(0, S).tril()
    check_length("S", S)
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()


def apply_mask(attn_scores: Tensor, attn_mask: Tensor | None, *, inplace: bool = False) -> Tensor:
    """Apply a mask to scaled scores: bool ``False`` becomes ``-inf``, a float mask is added.

    The one place this rule is written; the explicit path, flash attention's blocks and
    [`combine_masks`][attnlab.masks.combine_masks] all use it.

    Args:
        attn_scores: Scaled attention scores.
        attn_mask: ``None`` (scores returned as they are), bool (``True`` = may attend)
            or float (added), broadcastable to the scores.
        inplace: Write into ``attn_scores`` (which must not need autograd's record)
            instead of returning a new tensor.

    Returns:
        The masked scores.

    Shape:
        attn_scores: ``(N, ..., L, S)``; attn_mask: broadcastable to it; output: ``(N, ..., L, S)``.
    """
    if attn_mask is None:
        return attn_scores
    if attn_mask.dtype == torch.bool:
        if inplace:
            return attn_scores.masked_fill_(~attn_mask, float("-inf"))
        return attn_scores.masked_fill(~attn_mask, float("-inf"))
    return attn_scores.add_(attn_mask) if inplace else attn_scores + attn_mask


def row_shift(row_max: Tensor) -> Tensor:
    """The amount to subtract from a row of scores before ``exp``: its maximum, or 0.

    A fully masked row's maximum is ``-inf``; subtracting it would give
    ``exp(-inf - (-inf)) = exp(nan)``. Shifting such a row by 0 instead gives
    ``exp(-inf) = 0`` everywhere: the first half of the fully-masked-row rule.

    Args:
        row_max: Each row's largest score (or its log-sum-exp).

    Returns:
        ``row_max`` with ``-inf`` replaced by 0.

    Shape:
        row_max: any; output: the same.
    """
    return torch.where(torch.isneginf(row_max), torch.zeros_like(row_max), row_max)


def divide_rows(numerator: Tensor, total: Tensor) -> Tensor:
    """Normalise rows by their ``total``; a row whose total is 0 stays all zeros.

    A fully masked row sums to 0 after [`row_shift`][attnlab.masks.row_shift]; dividing
    by 1 there instead of 0 gives zeros (as PyTorch's SDPA outputs), not ``0 / 0 = nan``:
    the second half of the fully-masked-row rule.

    Args:
        numerator: Unnormalised weights, or their weighted sums of values.
        total: Each row's sum of unnormalised weights.

    Returns:
        ``numerator / total``, with 0 where ``total`` is 0.

    Shape:
        numerator: ``(..., n)``; total: ``(..., 1)``; output: ``(..., n)``.
    """
    return numerator / torch.where(total == 0, torch.ones_like(total), total)


def mask_from_torch(mask: Tensor) -> Tensor:
    """Translate an ``nn.MultiheadAttention`` mask into this package's convention.

    Works for both its ``attn_mask`` and its ``key_padding_mask``: a boolean mask is
    inverted (PyTorch's module: ``True`` = ignore; here: ``True`` = may attend), a float
    mask is returned as it is (added to the scores in both).

    Args:
        mask: A bool or float mask in ``nn.MultiheadAttention``'s convention.

    Returns:
        The same mask in SDPA's convention.

    Shape:
        mask: any; output: the same.
    """
    mask = check_tensor("mask", mask)
    return ~mask if mask.dtype == torch.bool else mask


def mask_to_torch(mask: Tensor) -> Tensor:
    """Translate a mask of this package into ``nn.MultiheadAttention``'s convention.

    The inverse of [`mask_from_torch`][attnlab.mask_from_torch]: a boolean mask
    is inverted (here ``True`` = may attend; there ``True`` = ignore), a float mask is
    returned as it is.

    Args:
        mask: A bool or float mask in SDPA's convention.

    Returns:
        The same mask in ``nn.MultiheadAttention``'s convention.

    Shape:
        mask: any; output: the same.
    """
    return mask_from_torch(mask)  # inverting a boolean mask is its own inverse


def padding_to_attn_mask(key_padding_mask: Tensor, num_heads_dims: int = 0) -> Tensor:
    """Reshape a key padding mask so that it broadcasts against the scores.

    A key padding mask says, for each key, whether it is a real token (``True``) or
    padding (``False``); every query row sees the same answer. Inserting a length-one
    query axis (and one axis per head dimension) lets it broadcast to the scores.

    Args:
        key_padding_mask: Bool (``True`` = real token, may attend) or float (added to
            the scores), one entry per key.
        num_heads_dims: How many head axes sit between the batch and ``(L, S)`` in the
            scores: 0 for a single head, 1 for ``(B, H, L, S)``.

    Returns:
        A view of the mask with ``1 + num_heads_dims`` axes of size one inserted.

    Shape:
        key_padding_mask: ``(..., S)``; output: ``(..., 1, S)`` (``num_heads_dims=0``)
        or ``(..., 1, 1, S)`` (``num_heads_dims=1``).
    """
    key_padding_mask = check_tensor("key_padding_mask", key_padding_mask)
    mask = key_padding_mask.unsqueeze(-2)  # (..., S) -> (..., 1, S)
    for _ in range(num_heads_dims):
        mask = mask.unsqueeze(-3)  # (..., 1, S) -> (..., 1, 1, S)
    return mask


def combine_masks(*masks: Tensor | None, dtype: torch.dtype = torch.float32) -> Tensor | None:
    """Combine masks into one: a query may attend to a key only if every mask allows it.

    ``None`` entries are skipped. If every mask is boolean the result is their logical
    AND (``True`` = may attend). If any is float, the boolean ones become ``0`` where
    allowed and ``-inf`` where not, and all are added, giving a float mask of ``dtype``.

    Args:
        *masks: Masks that broadcast against one another, or ``None``.
        dtype: The float dtype of the result when a float mask is involved.

    Returns:
        The combined mask, or ``None`` if no mask was given.

    Shape:
        masks: broadcastable shapes; output: their broadcast shape.
    """
    given = [check_tensor("mask", mask) for mask in masks if mask is not None]
    if not given:
        return None
    if all(mask.dtype == torch.bool for mask in given):
        combined = given[0]
        for mask in given[1:]:
            combined = combined & mask
        return combined
    total: Tensor | None = None
    for mask in given:
        zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
        additive = apply_mask(zeros, mask if mask.dtype == torch.bool else mask.to(dtype))
        total = additive if total is None else total + additive
    return total


def module_attn_mask(
    L: int,
    S: int,
    causal: bool,
    attn_mask: Tensor | None,
    key_padding_mask: Tensor | None,
    *,
    num_heads_dims: int,
    dtype: torch.dtype,
    device: torch.device,
) -> tuple[Tensor | None, bool]:
    """Merge a module call's causal flag, ``attn_mask`` and key padding into one mask.

    With no mask tensor the causal flag is passed on as SDPA's ``is_causal`` (no mask is
    built); otherwise the causal mask (when ``causal``), ``attn_mask`` and the padding
    (reshaped by [`padding_to_attn_mask`][attnlab.masks.padding_to_attn_mask]) are
    combined by [`combine_masks`][attnlab.masks.combine_masks]. The masks are already
    checked by the caller.

    Args:
        L: Number of queries.
        S: Number of keys.
        causal: The module's causal flag.
        attn_mask: Optional mask broadcastable to the scores.
        key_padding_mask: Optional, one entry per key: bool ``True`` = real token, or float.
        num_heads_dims: Head axes between batch and ``(L, S)``: 0 single head, 1 multi-head.
        dtype: The float dtype of a combined mask that involves a float mask.
        device: Where to build the causal mask.

    Returns:
        ``(attn_mask, is_causal)`` to pass to [`attend`][attnlab.attend].

    Shape:
        attn_mask: broadcastable to ``(..., L, S)``; key_padding_mask: ``(..., S)``;
        output mask: broadcastable to ``(..., L, S)``.
    """
    if attn_mask is None and key_padding_mask is None:
        return None, causal
    padding = None
    if key_padding_mask is not None:
        # (..., S) -> (..., 1, S) or (..., 1, 1, S): the same keys hidden from every query
        padding = padding_to_attn_mask(key_padding_mask, num_heads_dims=num_heads_dims)
    # (L, S); an empty sequence needs no causal mask (nothing to hide)
    allowed = causal_mask(L, S, device=device) if causal and L > 0 and S > 0 else None
    return combine_masks(allowed, attn_mask, padding, dtype=dtype), False


def sliding_window_mask(
    L: int, S: int, window: int, device: torch.device | str | None = None
) -> Tensor:
    """Boolean causal sliding-window mask: each query sees its last ``window`` keys.

    With ``L == S``, query ``i`` may attend to key ``j`` iff ``i - window < j <= i``: itself
    and the ``window - 1`` keys before it. When ``L != S`` the queries are the **last**
    ``L`` of the ``S`` positions (aligned to the end, as when new tokens meet a KV cache
    holding ``S - L`` earlier ones): query ``i`` stands at position ``p = i + S - L`` and
    sees keys ``p - window < j <= p``. ``window >= S`` gives the plain end-aligned causal
    mask.

    Args:
        L: Number of queries.
        S: Number of keys.
        window: How many keys (the query's own included) each query may see.
        device: Where to create the mask.

    Returns:
        ``True`` where a query may attend.

    Shape:
        output: ``(L, S)``.
    """
    check_length("L", L)
    check_length("S", S)
    check_positive_int("window", window)
    positions = torch.arange(L, device=device).unsqueeze(-1) + (S - L)  # (L, 1)
    keys = torch.arange(S, device=device)  # (S,)
    return (keys <= positions) & (keys > positions - window)  # (L, S)


def decoder_mask(
    L: int, S: int, window: int | None = None, device: torch.device | str | None = None
) -> tuple[Tensor | None, bool]:
    """A decoder's causal (and window) rule for ``L`` new queries over ``S`` keys, end-aligned.

    The queries are the **last** ``L`` of ``S`` positions (after ``S - L`` cached ones),
    so query ``i`` stands at position ``p = i + S - L`` and sees keys ``j <= p`` (and
    ``j > p - window`` with a window): [`sliding_window_mask`][attnlab.sliding_window_mask]'s
    rule. Returned in its cheapest form, as ``(attn_mask, is_causal)`` for SDPA:

    * ``(None, True)`` when SDPA's top-left causal flag is the same mask (no window,
      ``L == S``: the whole sequence at once);
    * ``(None, False)`` when nothing is hidden (one new query, the last position, and no
      window that cuts: each step of decoding);
    * else a bool ``(L, S)`` mask, ``True`` = may attend.

    Args:
        L: New queries.
        S: Keys, cached ones included (``S >= L``).
        window: Optional: how many keys (its own included) each query may see.
        device: Where to build a mask.

    Returns:
        ``(attn_mask, is_causal)``.

    Shape:
        attn_mask: ``(L, S)`` or ``None``.
    """
    check_length("L", L)
    check_length("S", S)
    if window is not None:
        check_positive_int("window", window)
    if window is None and L == S:
        return None, True
    if (window is None or window >= S) and L == 1:
        return None, False
    return sliding_window_mask(L, S, S if window is None else window, device=device), False
