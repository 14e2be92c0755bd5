"""sliding_window_mask and decoder_mask: a causal band of ``window`` keys, aligned to the end
of the keys."""

from __future__ import annotations

import pytest
import torch

from attnlab import decoder_mask, sliding_window_mask


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
