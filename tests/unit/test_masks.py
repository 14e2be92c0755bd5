"""sliding_window_mask and decoder_mask: a causal band of ``window`` keys, aligned to the end
of the keys."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab import decoder_mask, sliding_window_mask
from attnlab.masks import apply_mask, combine_masks, module_attn_mask


def test_sliding_window_mask_by_hand() -> None:
    mask = sliding_window_mask(4, 4, 2)
    assert mask.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    # two new queries after three cached keys: positions 3 and 4, aligned to the end
    assert sliding_window_mask(2, 5, 3).int().tolist() == [[0, 1, 1, 1, 0], [0, 0, 1, 1, 1]]
    assert torch.equal(sliding_window_mask(5, 5, 99), torch.ones(5, 5, dtype=torch.bool).tril())
    with pytest.raises(ValueError, match="window must be a positive int; got 0"):
        sliding_window_mask(3, 3, 0)


@pytest.mark.parametrize(
    ("L", "S", "window"),
    [(5, 5, None), (1, 6, None), (2, 6, None), (5, 5, 2), (1, 6, 3), (1, 6, 6), (3, 7, 4)],
)
def test_decoder_mask_is_the_end_aligned_band_in_its_cheapest_form(
    L: int, S: int, window: int | None
) -> None:
    """decoder_mask(L, S, window) means query i (position p = i + S - L) sees keys
    p - window < j <= p, whether it returns SDPA's flag, nothing or a bool mask."""
    p = torch.arange(L)[:, None] + (S - L)  # (L, 1)
    j = torch.arange(S)  # (S,)
    band = (j <= p) & (j > p - (S if window is None else window))  # written out: (L, S)
    mask, is_causal = decoder_mask(L, S, window)
    if is_causal:
        meant = torch.ones(L, S, dtype=torch.bool).tril()  # SDPA's flag: top-left
    else:
        meant = torch.ones(L, S, dtype=torch.bool) if mask is None else mask
    assert torch.equal(meant, band)
    whole = window is None and L == S  # SDPA's flag
    step = L == 1 and (window is None or window >= S)  # one query that sees every key
    assert (mask is None) == (whole or step) and is_causal == whole


@pytest.mark.parametrize("mask", [torch.tensor([[True, False], [True, True]]), torch.eye(2)])
def test_apply_mask_leaves_the_scores_alone_unless_told(mask: torch.Tensor) -> None:
    """apply_mask returns new scores by default; inplace=True writes into the ones given."""
    scores = torch.arange(4.0).reshape(2, 2)
    if mask.dtype == torch.bool:
        expected = scores.masked_fill(~mask, float("-inf"))
    else:
        expected = scores + mask
    assert torch.equal(apply_mask(scores, mask), expected)
    assert torch.equal(scores, torch.arange(4.0).reshape(2, 2))
    assert apply_mask(scores, mask, inplace=True) is scores
    assert torch.equal(scores, expected)


def test_combine_masks_adds_in_the_dtype_asked_for() -> None:
    """A float total is built in ``dtype`` (here float16), not in the masks' float32."""
    allowed = torch.tensor([[True, False], [True, True]])
    bias = torch.tensor([[0.5, 0.25], [-1.0, 2.0]])
    total = combine_masks(allowed, bias, dtype=torch.float16)
    assert total is not None and total.dtype == torch.float16
    expected = bias.masked_fill(~allowed, float("-inf")).half()
    assert torch.equal(total, expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float64])
def test_module_attn_mask_combines_a_rectangular_causal_mask_with_padding(
    dtype: torch.dtype,
) -> None:
    """With L != S the causal part is causal_mask(L, S) (top-left), ANDed with the padding;
    a float padding mask makes the whole mask float in the module's dtype."""
    L, S = 2, 4
    real = torch.tensor([[True, True, False, True]])  # (B, S)
    mask, is_causal = module_attn_mask(
        L, S, True, None, real, num_heads_dims=0, dtype=dtype, device=torch.device("cpu")
    )
    written = torch.tensor([[True, False, False, False], [True, True, False, False]])
    assert not is_causal and torch.equal(mask, (written & real[:, None, :]))
    float_real = torch.zeros(1, S, dtype=torch.float32).masked_fill(~real, float("-inf"))
    mask, _ = module_attn_mask(
        L, S, True, None, float_real, num_heads_dims=0, dtype=dtype, device=torch.device("cpu")
    )
    assert mask is not None and mask.dtype == dtype
    expected = torch.zeros(1, L, S, dtype=dtype).masked_fill(~(written & real[:, None]), -math.inf)
    assert torch.equal(mask, expected)
