"""Masks: the one home of every mask and of the rule that applies one to scores.

The package's mask convention (PyTorch's SDPA's) is stated once, in the package
docstring; a key padding mask follows it too (``True`` marks a real token).
``torch.nn.MultiheadAttention`` uses the opposite boolean polarity (``True`` = ignore)
for its ``attn_mask`` and ``key_padding_mask``: [`mask_from_torch`][attnlab.mask_from_torch]
and [`mask_to_torch`][attnlab.mask_to_torch] translate; float masks mean the same in both.
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
    """Boolean causal mask ``(L, S)``: query ``i`` sees keys ``j <= i``.

    Aligned top-left, as SDPA's ``is_causal``: with ``L < S`` the last keys are hidden
    from every query; with ``L > S`` every query sees at least key 0. ``S`` defaults to ``L``.
    """
    S = L if S is None else S
    check_length("L", L)  # 0 queries or keys: an empty mask, as torch.ones(0, S).tril()
    check_length("S", S)
    return torch.ones(L, S, dtype=torch.bool, device=device).tril()


def apply_mask(attn_scores: Tensor, attn_mask: Tensor | None, *, inplace: bool = False) -> Tensor:
    """Masked scores: a bool mask's ``False`` becomes ``-inf``, a float mask is added.

    The one place this rule is written. ``inplace`` writes into ``attn_scores`` (which
    must not need autograd's record).
    """
    if attn_mask is None:
        return attn_scores
    if attn_mask.dtype == torch.bool:
        if inplace:
            return attn_scores.masked_fill_(~attn_mask, float("-inf"))
        return attn_scores.masked_fill(~attn_mask, float("-inf"))
    return attn_scores.add_(attn_mask) if inplace else attn_scores + attn_mask


def row_shift(row_max: Tensor) -> Tensor:
    """What to subtract from a row of scores before ``exp``: its maximum, or 0 if ``-inf``.

    A fully masked row shifted by 0 gives ``exp(-inf) = 0`` rather than
    ``exp(-inf - (-inf)) = nan``: the first half of the fully-masked-row rule.
    """
    return torch.where(torch.isneginf(row_max), torch.zeros_like(row_max), row_max)


def divide_rows(numerator: Tensor, total: Tensor) -> Tensor:
    """``numerator / total``, with 0 where ``total`` is 0: a fully masked row stays zeros.

    The second half of the fully-masked-row rule (SDPA outputs zeros there, not NaN).
    """
    return numerator / torch.where(total == 0, torch.ones_like(total), total)


def mask_from_torch(mask: Tensor) -> Tensor:
    """Translate an ``nn.MultiheadAttention`` mask (``attn_mask`` or ``key_padding_mask``).

    A boolean mask is inverted (there ``True`` = ignore); a float mask is returned as it is.
    """
    mask = check_tensor("mask", mask)
    return ~mask if mask.dtype == torch.bool else mask


def mask_to_torch(mask: Tensor) -> Tensor:
    """Translate a mask into ``nn.MultiheadAttention``'s convention.

    The inverse of [`mask_from_torch`][attnlab.mask_from_torch] (and the same function).
    """
    return mask_from_torch(mask)  # inverting a boolean mask is its own inverse


def padding_to_attn_mask(key_padding_mask: Tensor, num_heads_dims: int = 0) -> Tensor:
    """A key padding mask ``(..., S)`` as ``(..., 1, S)``, to broadcast against the scores.

    ``num_heads_dims`` more axes of size one sit before it: ``(..., 1, 1, S)`` for
    multi-head scores ``(B, H, L, S)``.
    """
    key_padding_mask = check_tensor("key_padding_mask", key_padding_mask)
    mask = key_padding_mask.unsqueeze(-2)  # (..., S) -> (..., 1, S)
    for _ in range(num_heads_dims):
        mask = mask.unsqueeze(-3)  # (..., 1, S) -> (..., 1, 1, S)
    return mask


def combine_masks(*masks: Tensor | None, dtype: torch.dtype = torch.float32) -> Tensor | None:
    """One mask that allows a key only where every given mask does (``None`` skipped).

    All boolean: their AND. Any float: the boolean ones become ``0``/``-inf`` and all are
    added, in ``dtype``. ``None`` if no mask was given.
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
    """A module call's causal flag, ``attn_mask`` and key padding as ``(attn_mask, is_causal)``.

    With no mask tensor the causal flag is passed on as SDPA's ``is_causal`` (no mask is
    built); otherwise the causal mask, ``attn_mask`` and the padding are combined. The
    masks are already checked by the caller.
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
    """Boolean causal sliding-window mask ``(L, S)``: each query sees its last ``window`` keys.

    The queries are the **last** ``L`` of the ``S`` positions (end-aligned, as new tokens
    after a KV cache): query ``i`` stands at ``p = i + S - L`` and sees keys
    ``p - window < j <= p``, itself included. ``window >= S`` gives the end-aligned causal mask.
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

    [`sliding_window_mask`][attnlab.sliding_window_mask]'s rule (without a window, all
    earlier keys), as ``(attn_mask, is_causal)`` in its cheapest form for SDPA:

    * ``(None, True)`` when SDPA's top-left causal flag is the same mask (no window,
      ``L == S``: the whole sequence at once);
    * ``(None, False)`` when nothing is hidden (one new query and no window that cuts:
      each step of decoding);
    * else a bool ``(L, S)`` mask.
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
