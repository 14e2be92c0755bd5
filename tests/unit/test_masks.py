"""sliding_window_mask: a causal band of ``window`` keys, aligned to the end of the keys."""

from __future__ import annotations

import pytest
import torch

from attnlab import sliding_window_mask


def test_sliding_window_mask_by_hand() -> None:
    mask = sliding_window_mask(4, 4, 2)
    assert mask.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    # two new queries after three cached keys: positions 3 and 4, aligned to the end
    assert sliding_window_mask(2, 5, 3).int().tolist() == [[0, 1, 1, 1, 0], [0, 0, 1, 1, 1]]
    assert torch.equal(sliding_window_mask(5, 5, 99), torch.ones(5, 5, dtype=torch.bool).tril())
    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(3, 3, 0)
