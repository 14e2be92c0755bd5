"""The figures of "Efficient attention": tiles, blocks, the ring, and the recorded benchmarks.

Each figure is registered with ``@figure`` (``hooks/figure_registry.py``) and drawn
by the figures hook (``hooks/figures.py``); ``diagram=True`` marks a conceptual diagram
in the role colours of ``hooks/diagrams.py``.
"""

from __future__ import annotations

import math

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

import attnlab
from hooks import diagrams
from hooks.figure_registry import figure


@figure("bench-time")
def bench_time() -> Figure:
    """Forward time against T, log-log, from the benchmark's recorded results."""
    from attnlab.bench import load_results
    from attnlab.plot import plot_sweep

    fig: Figure = plot_sweep(load_results(), "median_ms")
    return fig


@figure("bench-memory")
def bench_memory() -> Figure:
    """Peak extra memory against T, log-log, from the benchmark's recorded results."""
    from attnlab.bench import load_results
    from attnlab.plot import plot_sweep

    fig: Figure = plot_sweep(load_results(), "peak_mib")
    return fig


@figure("flash-tiles", diagram=True)
def flash_tiles() -> Figure:
    """Causal FlashAttention in 2 x 2 tiles: visit order, skipped tiles, a row rescaled.

    The scores are the chapter's tiled example (seed 123, six queries and keys of width
    4, scale 1/2); its last row's maximum rises in the last tile, so the table shows
    the correction ``c = exp(m_old - m_new)`` below 1 there.
    """
    torch.manual_seed(123)
    queries, keys = torch.randn(6, 4), torch.randn(6, 4)  # (L, E), (S, E)
    scores = queries @ keys.T / 2  # (6, 6), scaled by 1 / sqrt(4)
    block = 2
    mask = ~attnlab.causal_mask(6)  # True = masked
    fig, ax = diagrams.canvas(8.0, 4.6)
    cell = (1.3, 0.8)
    grid = diagrams.matrix(
        ax,
        scores,
        (0, 0),
        role="weights",
        decimals=2,
        cell=cell,
        fontsize="small",
        masked=mask,
        masked_text="",
        highlight_rows=[5],
        row_labels=[f"q{i}" for i in range(6)],
    )
    _tile_frames(ax, cell, block)
    table = diagrams.matrix(
        ax,
        _running_stats(scores[5], block),
        (9.6, -3.6),
        role="weights",
        decimals=2,
        cell=cell,
        fontsize="small",
        row_labels=["max m", "rescale c", "sum l"],
        col_labels=["tile 4", "tile 5", "tile 6"],
        title="row q5, running",
    )
    diagrams.fit(ax, grid, table, diagrams.Bounds(-1.8, -3.8, 14.0, 5.6), margin=0.3)
    return fig


def _tile_frames(ax: Axes, cell: tuple[float, float], block: int) -> None:
    """Frame the 3 x 3 tiles of a 6 x 6 grid: causal visit order, or "skipped"."""
    ink = diagrams.text_colour()
    order = 0
    for qi in range(3):
        for kj in range(3):
            x, y = kj * block * cell[0], (2 - qi) * block * cell[1]
            width, height = block * cell[0], block * cell[1]
            ax.add_patch(Rectangle((x, y), width, height, fill=False, edgecolor=ink, linewidth=2.0))
            if kj <= qi:
                order += 1
                ax.text(x + 0.12, y + height - 0.1, str(order), ha="left", va="top",
                        color=ink, fontsize="x-small", fontweight="bold")  # fmt: skip
            else:
                ax.text(x + width / 2, y + height / 2, "skipped", ha="center", va="center",
                        color=ink, fontsize="small")  # fmt: skip


def _running_stats(row: torch.Tensor, block: int) -> torch.Tensor:
    """The online softmax over ``row`` in tiles: ``m``, the rescale ``c`` and ``l`` after each.

    Shape:
        row: ``(S,)``; output: ``(3, S // block)``.
    """
    m, l_sum = float("-inf"), 0.0
    columns = []
    for j0 in range(0, row.shape[0], block):
        tile = row[j0 : j0 + block]
        new_m = max(m, float(tile.max()))
        rescale = math.exp(m - new_m)  # exp(-inf) = 0 on the first tile: nothing to rescale
        l_sum = l_sum * rescale + float((tile - new_m).exp().sum())
        m = new_m
        columns.append([m, rescale, l_sum])
    return torch.tensor(columns).T  # (3, tiles)


@figure("gpu-memory", diagram=True)
def gpu_memory() -> Figure:
    """An A100's memory hierarchy (FlashAttention paper, figure 1) and where each method works.

    Three levels, small and fast on top: on-chip SRAM, the GPU's high-bandwidth memory
    (HBM) and the CPU's DRAM, each with its size and bandwidth, and which attention
    keeps its scores there.
    """
    levels = [  # name, size and bandwidth, who keeps scores there, role, bar width
        ("SRAM (on chip)", "20 MB, 19 TB/s", "tiled: one block of scores", "queries", 7.0),
        ("HBM (GPU memory)", "40 GB, 1.5 TB/s", "explicit: all T × T scores", "weights", 8.5),
        ("CPU DRAM", "> 1 TB, 12.8 GB/s", "", "input", 10.0),
    ]
    fig, ax = diagrams.canvas(5.0, 4.2)
    for row, (name, numbers, note, role, width) in enumerate(levels):
        y = -2.2 * row
        ax.add_patch(Rectangle((-width / 2, y), width, 1.9, facecolor=diagrams.tint(role),
                               edgecolor=diagrams.text_colour(), linewidth=1.2))  # fmt: skip
        diagrams.label(ax, (0, y + 1.45), name, role=role, fontsize="medium")
        diagrams.label(ax, (0, y + 0.9), numbers, fontsize="medium")
        if note:
            diagrams.label(ax, (0, y + 0.35), note, fontsize="medium")
    diagrams.fit(ax, diagrams.Bounds(-5.0, -4.4, 5.0, 1.9), margin=0.2)
    return fig


@figure("ring-schedule", diagram=True)
def ring_schedule() -> Figure:
    """Causal ring attention on 4 ranks: work per rank and step, contiguous vs zig-zag."""
    from attnlab import ring
    from hooks import diagrams

    fig, ax = diagrams.canvas(8.0, 2.8)
    bounds = []
    layouts: tuple[tuple[float, ring.Layout], ...] = ((0.0, "contiguous"), (13.0, "zigzag"))
    for x0, layout in layouts:
        schedule = ring.ring_schedule(4, is_causal=True, layout=layout)
        work = torch.tensor([[step[r]["work"] for step in schedule] for r in range(4)])
        chunks = [str(ring.chunk_ids(r, 4, layout)).strip("[]") for r in range(4)]
        bounds.append(
            diagrams.matrix(
                ax,
                work,
                (x0, 0.0),
                role="weights",
                title=layout,
                decimals=1,
                row_labels=[f"rank {r}: chunk {c}" for r, c in enumerate(chunks)],
                col_labels=[f"s{s}" for s in range(4)],
                cell=(1.3, 1.0),
                masked=work == 0,
            )
        )
    diagrams.label(ax, (-5.0, -0.8), "")  # room for the row labels
    diagrams.fit(ax, *bounds, margin=0.4)
    ax.set_xlim(-5.5, bounds[1].right + 0.4)
    return fig


@figure("flash-backward-blocks", diagram=True)
def flash_backward_blocks() -> Figure:
    """The backward pass of one tiny attention: P, dP and dS = P * (dP - Δ), as numbers."""
    from hooks import diagrams

    gen = torch.Generator().manual_seed(0)
    q, k, v, grad_out = (torch.randn(4, 2, generator=gen) for _ in range(4))
    weights = torch.softmax(q @ k.T / 2**0.5, dim=-1)  # P, (4, 4)
    grad_weights = grad_out @ v.T  # dP
    row_dot = (grad_out * (weights @ v)).sum(-1, keepdim=True)  # Δ = rowsum(dO * O)
    grad_scores = weights * (grad_weights - row_dot)  # dS
    fig, ax = diagrams.canvas(8.0, 2.6)
    b1 = diagrams.matrix(ax, weights, (0, 0), role="weights", title="P", decimals=2)
    b2 = diagrams.matrix(ax, grad_weights, (5.5, 0), role="output", title="dP = dO Vᵀ", decimals=2)
    b3 = diagrams.matrix(ax, row_dot, (11, 0), role="output", title="Δ", decimals=2)
    b4 = diagrams.matrix(ax, grad_scores, (13.5, 0), role="weights", title="dS", decimals=2)
    diagrams.arrow(ax, b3.right_mid, b4.left_mid)
    diagrams.label(ax, (4.75, 2), "∘")
    diagrams.label(ax, (10.25, 2), "−")
    diagrams.fit(ax, b1, b2, b3, b4)
    return fig
