"""The figure of "FlexAttention": which blocks a block mask computes, and which it skips.

Registered with ``@figure`` (``hooks/figure_registry.py``) and drawn by the figures hook
(``hooks/figures.py``) in the role colours of ``hooks/diagrams.py``. The masks and sizes
are the page's: 1,024 tokens in FlexAttention's default blocks of 128 x 128.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import Tensor

from hooks import diagrams
from hooks.figure_registry import figure

T = 1024  # tokens
BLOCK = 128  # FlexAttention's default block size
WINDOW = 256
DOCUMENT_LENGTHS = (300, 200, 400, 124)
SUB = 16  # tokens per sub-cell drawn inside a partial block
FONT = 17  # points: about 13 px when the figure is shrunk to a 390-px phone

MaskMod = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]
SKIPPED, PARTIAL, FULL = 0, 1, 2
#: Each kind of block's fill (called under the active colour scheme).
KIND_FILLS: dict[int, Callable[[], object]] = {
    SKIPPED: lambda: diagrams.tint("masked", diagrams.MASKED_TINT),
    PARTIAL: lambda: diagrams.tint("weights"),
    FULL: lambda: diagrams.ROLE_COLOURS["weights"],
}


def flex_rules() -> dict[str, MaskMod]:
    """The page's three mask_mods by panel title: causal, a window of 256, four documents."""
    document = torch.repeat_interleave(
        torch.arange(len(DOCUMENT_LENGTHS)), torch.tensor(DOCUMENT_LENGTHS)
    )  # (T,)

    def causal(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return q_idx >= kv_idx

    def sliding_window(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)

    def document_causal(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return (document[q_idx] == document[kv_idx]) & (q_idx >= kv_idx)

    return {
        "causal": causal,
        f"window {WINDOW}": sliding_window,
        f"{len(DOCUMENT_LENGTHS)} documents": document_causal,
    }


def block_kinds(mask_mod: MaskMod) -> Tensor:
    """Each block of ``create_block_mask(mask_mod)``: ``FULL``, ``PARTIAL`` or ``SKIPPED``.

    Read from the BlockMask's own lists (``full_kv_indices``, ``kv_indices``), the ones
    the compiled kernel walks.

    Shape:
        output: ``(T // BLOCK, T // BLOCK)``, query blocks down, key blocks across.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    block_mask = create_block_mask(mask_mod, None, None, T, T, device="cpu", BLOCK_SIZE=BLOCK)
    n = T // BLOCK
    kinds = torch.full((n, n), SKIPPED)
    assert block_mask.full_kv_num_blocks is not None and block_mask.full_kv_indices is not None
    lists = (
        (block_mask.kv_num_blocks, block_mask.kv_indices, PARTIAL),
        (block_mask.full_kv_num_blocks, block_mask.full_kv_indices, FULL),
    )
    for counts, indices, kind in lists:
        for row in range(n):
            for col in indices[0, 0, row, : int(counts[0, 0, row])].tolist():
                kinds[row, col] = kind
    return kinds


def _panel(ax: Axes, mask_mod: MaskMod, kinds: Tensor, x0: float) -> None:
    """Draw one block mask with its top-left corner at ``(x0, 0)``; one block is 1 x 1."""
    n = kinds.shape[0]
    per_block = BLOCK // SUB
    solid = diagrams.ROLE_COLOURS["weights"]
    rows = torch.arange(0, T, SUB)[:, None] + SUB // 2  # a sub-cell's middle token
    allowed = mask_mod(torch.tensor(0), torch.tensor(0), rows, rows.T)  # (T/SUB, T/SUB)
    ink = diagrams.text_colour()
    for row in range(n):
        for col in range(n):
            kind = int(kinds[row, col])
            x, y = x0 + col, -row - 1
            ax.add_patch(Rectangle((x, y), 1, 1, facecolor=KIND_FILLS[kind](), edgecolor=ink,
                                   linewidth=0.6))  # fmt: skip
            if kind != PARTIAL:
                continue
            for i in range(per_block):  # the allowed part of a partial block, run by run
                line = allowed[row * per_block + i, col * per_block : (col + 1) * per_block]
                for start, stop in _runs(line.tolist()):
                    ax.add_patch(Rectangle((x + start / per_block, y + 1 - (i + 1) / per_block),
                                           (stop - start) / per_block, 1 / per_block,
                                           facecolor=solid, edgecolor="none"))  # fmt: skip
            ax.add_patch(Rectangle((x, y), 1, 1, fill=False, edgecolor=ink, linewidth=2.2))


def _runs(flags: list[bool]) -> list[tuple[int, int]]:
    """The ``[start, stop)`` ranges of consecutive ``True`` entries."""
    runs, start = [], None
    for i, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            runs.append((start, i))
            start = None
    return runs


@figure("flex-block-masks", diagram=True)
def flex_block_masks() -> Figure:
    """Three block masks of 1,024 tokens in 8 x 8 blocks: full, partial and skipped blocks.

    Full blocks are solid, skipped ones faint; a partial block is light, with the part its
    mask_mod allows drawn solid (16 x 16 tokens to a square). Under each panel, how many of
    the 64 blocks the kernel computes.
    """
    fig, ax = diagrams.canvas(7.0, 3.9)
    n, gap = T // BLOCK, 2.2
    for p, (name, mask_mod) in enumerate(flex_rules().items()):
        kinds = block_kinds(mask_mod)
        x0 = p * (n + gap)
        _panel(ax, mask_mod, kinds, x0)
        diagrams.label(ax, (x0 + n / 2, 0.9), name, fontsize=FONT)
        computed = int((kinds != SKIPPED).sum())
        diagrams.label(ax, (x0 + n / 2, -n - 0.9), f"{computed} of {n * n}", fontsize=FONT)
    ink = diagrams.text_colour()
    for i, (text, kind) in enumerate((("full", FULL), ("partial", PARTIAL), ("skipped", SKIPPED))):
        x = 1.0 + i * 9.0
        ax.add_patch(Rectangle((x, -n - 3.3), 1.1, 1.1, facecolor=KIND_FILLS[kind](), edgecolor=ink,
                               linewidth=2.2 if kind == PARTIAL else 0.6))  # fmt: skip
        diagrams.label(ax, (x + 1.5, -n - 2.75), text, ha="left", fontsize=FONT)
    width = 3 * n + 2 * gap
    diagrams.fit(ax, diagrams.Bounds(0, -n - 3.4, width, 1.5), margin=0.2)
    return fig
