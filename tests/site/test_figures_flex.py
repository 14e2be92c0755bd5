"""The FlexAttention diagram draws each block as the BlockMask lists it, with the page's counts.

The builder reads full, partial and skipped blocks from ``create_block_mask``'s own lists;
here they are checked against the BlockMask's dense form and an independent count on
the element mask, and the counts written under the panels against the page's table.
"""

from __future__ import annotations

import importlib

import matplotlib.style
import torch

from hooks import figures as hook


def _flex() -> object:
    return importlib.import_module("hooks.figures_flex")  # loaded by the figures hook


def test_block_kinds_are_the_block_masks_lists_and_agree_with_the_element_mask() -> None:
    """Full: every pair allowed; partial: some; skipped: none (counted on the T x T mask)."""
    flex = _flex()
    n, block = flex.T // flex.BLOCK, flex.BLOCK
    positions = torch.arange(flex.T)
    for mask_mod in flex.flex_rules().values():
        kinds = flex.block_kinds(mask_mod)
        allowed = mask_mod(torch.tensor(0), torch.tensor(0), positions[:, None], positions)
        per_block = allowed.reshape(n, block, n, block).sum(dim=(1, 3))  # (n, n) pairs allowed
        expected = torch.where(per_block == block * block, flex.FULL, flex.PARTIAL)
        assert torch.equal(kinds, torch.where(per_block == 0, flex.SKIPPED, expected))


def test_panels_count_the_computed_blocks_of_the_pages_table() -> None:
    """Causal 28 + 8, window 256 7 + 14, four documents 4 + 18 of 64 (the page's table)."""
    with matplotlib.style.context("default"):
        fig = hook.FIGURES["flex-block-masks"]()
    texts = [text.get_text() for ax in fig.axes for text in ax.texts]
    assert [t for t in texts if t.endswith("of 64")] == ["36 of 64", "21 of 64", "22 of 64"]
    assert {"causal", "window 256", "4 documents", "full", "partial", "skipped"} <= set(texts)
