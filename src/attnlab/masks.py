"""Mask helpers: padding, combining masks, and translating PyTorch's module masks.

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

from ._validation import check_positive_int, check_tensor

__all__ = [
    "combine_masks",
    "mask_from_torch",
    "mask_to_torch",
    "padding_to_attn_mask",
    "sliding_window_mask",
]


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
        if mask.dtype == torch.bool:
            additive = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
            additive = additive.masked_fill(~mask, float("-inf"))
        else:
            additive = mask.to(dtype)
        total = additive if total is None else total + additive
    return total


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
    check_positive_int("L", L)
    check_positive_int("S", S)
    check_positive_int("window", window)
    positions = torch.arange(L, device=device).unsqueeze(-1) + (S - L)  # (L, 1)
    keys = torch.arange(S, device=device)  # (S,)
    return (keys <= positions) & (keys > positions - window)  # (L, S)
