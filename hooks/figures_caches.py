"""Figures of the chapters on paged and split caches and on quantised caches (llm/).

Each is registered with ``@figure`` (``hooks/figure_registry.py``) and drawn by the
figures hook (``hooks/figures.py``).
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from hooks import diagrams
from hooks.figure_registry import figure

#: The block formats of the recorded run, densest first.
FORMATS = ("q8_0", "q4_1", "q4_0")


@figure("cache-formats")
def cache_formats() -> Figure:
    """SmolLM2's loss change with keys only, values only or both quantised, per format.

    From the recorded run (``attnlab.bench.load_results("cache_formats")``): the mean
    loss on tokens 256..1023 of the long text against the float32 cache's.
    """
    from attnlab.bench import load_results

    results = load_results("cache_formats")
    rows = {(r["keys"], r["values"]): r["mean_loss"] for r in results["rows"]}
    base = rows[None, None]
    fig = Figure(figsize=(8.0, 3.8), layout="constrained")
    ax = fig.add_subplot()
    settings = [  # (label, keys quantised, values quantised, hatch)
        ("keys only", True, False, "//"),
        ("values only", False, True, ""),
        ("keys and values", True, True, ".."),
    ]
    height = 0.26
    for i, (name, on_keys, on_values, hatch) in enumerate(settings):
        pairs = [(fmt if on_keys else None, fmt if on_values else None) for fmt in FORMATS]
        changes = [rows[pair] - base for pair in pairs]
        ys = [k + (i - 1) * height for k in range(len(FORMATS))]
        ax.barh(ys, changes, height=height * 0.9, label=name, hatch=hatch)
        for y, change in zip(ys, changes, strict=True):  # labels right of the bar or of 0
            ax.text(max(change, 0) + 0.001, y, f"{change:+.3f}", va="center")
    ax.set_yticks(range(len(FORMATS)), [f"{fmt} cache" for fmt in FORMATS])
    ax.invert_yaxis()
    ax.set_xlabel("loss change against the float32 cache (nats)")
    ax.set_xlim(-0.004, max(rows.values()) - base + 0.025)
    ax.axvline(0, color=diagrams.text_colour(), linewidth=0.8)
    ax.legend(loc="upper right")
    return fig


@figure("paged-cache", diagram=True)
def paged_cache() -> Figure:
    """Two sequences sharing a prefix in a pool of blocks of 4 positions, as the chapter's run.

    A 7-token prefix, then " lit the lamp." (4 tokens) for the first sequence and
    " fell asleep" (2 tokens) for the second: block 0 is shared, block 1 (the prefix's
    part-filled block) was copied to block 2 before the first sequence wrote into it.
    """
    fig, ax = diagrams.canvas(8.0, 4.4)
    ink = diagrams.text_colour()
    size = 4  # positions per block
    # block id -> (owner, label of each position; "" = empty)
    pool = {
        0: ("shared", ["P0", "P1", "P2", "P3"]),
        1: ("second", ["P4", "P5", "P6", "b0"]),
        2: ("first", ["P4", "P5", "P6", "a0"]),
        3: ("first", ["a1", "a2", "a3", ""]),
        4: ("second", ["b1", "", "", ""]),
    }
    roles = {"shared": "weights", "first": "keys", "second": "values"}
    x0, y0, cell = 0.4, 0.4, 0.9
    for block, (owner, labels) in pool.items():
        y = y0 + (len(pool) - 1 - block) * 1.1
        ax.text(
            x0 - 0.1,
            y + cell / 2,
            f"block {block}",
            ha="right",
            va="center",
            color=ink,
            fontsize=13,
        )
        for j in range(size):
            filled = bool(labels[j])
            colour = diagrams.tint(roles[owner]) if filled else "none"
            ax.add_patch(
                Rectangle((x0 + j * cell, y), cell, cell, facecolor=colour, edgecolor=ink, lw=1.0)
            )
            ax.text(
                x0 + (j + 0.5) * cell,
                y + cell / 2,
                labels[j],
                ha="center",
                va="center",
                color=ink,
                fontsize=13,
            )
    key = [
        ("shared", "prefix (P), 2 references", None, 5.0),
        ("first", "first: + ' lit the lamp.' (a)", "[0, 2, 3]", 3.7),
        ("second", "second: + ' fell asleep' (b)", "[0, 1, 4]", 2.3),
    ]
    for owner, name, table, y in key:
        ax.add_patch(
            Rectangle(
                (4.6, y - 0.25), 0.5, 0.5, facecolor=diagrams.tint(roles[owner]), edgecolor=ink
            )
        )
        ax.text(5.3, y, name, ha="left", va="center", color=ink, fontsize=13)
        if table is not None:
            ax.text(
                5.3,
                y - 0.7,
                f"block table {table}",
                ha="left",
                va="center",
                color=ink,
                fontsize=13,
                family="monospace",
            )
    ax.text(
        4.6,
        0.5,
        "block 1 was copied to block 2\nbefore the first wrote into it",
        ha="left",
        va="center",
        color=ink,
        fontsize=12,
    )
    ax.set_xlim(-1.4, 10.6)
    ax.set_ylim(0.0, y0 + len(pool) * 1.1 + 0.2)
    return fig


@figure("q4-block", diagram=True)
def q4_block() -> Figure:
    """One ``q4_0`` block, shortened to 8 numbers: scale, 4-bit codes, numbers read back.

    ``d = m / -8`` with ``m`` the block's signed largest-magnitude number; each code is
    ``floor(x / d + 8.5)`` clamped to 0..15, read back as ``(q - 8) * d``: the formula of
    the chapter (GGUF's blocks hold 32 numbers).
    """
    import torch

    x = torch.tensor([0.9, -0.3, 0.1, -1.6, 0.4, 0.7, -0.8, 0.2])
    m = x[x.abs().argmax()]
    d = m / -8
    codes = torch.clamp(torch.floor(x / d + 8.5), 0, 15)
    back = (codes - 8) * d
    fig, ax = diagrams.canvas(6.4, 5.2)
    top = diagrams.matrix(ax, x, (0, 6), role="keys", title="one block of a key", decimals=1)
    mid = diagrams.matrix(
        ax, codes, (0, 3), role="weights", title=f"4-bit codes, scale d = {d:.1f}"
    )
    low = diagrams.matrix(
        ax, back, (0, 0), role="output", title="read back: (code − 8) × d", decimals=1
    )
    diagrams.side_arrow(ax, top, mid)
    diagrams.side_arrow(ax, mid, low)
    diagrams.fit(ax, top, mid, low, diagrams.Bounds(0, 0, top.right + 1.2, top.top + 1.2))
    return fig
