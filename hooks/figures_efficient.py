"""The figures of "Efficient attention": tiles, blocks, the ring, and the recorded benchmarks.

Each figure is registered with ``@figure`` (``hooks/figure_registry.py``) and drawn
by the figures hook (``hooks/figures.py``); ``diagram=True`` marks a conceptual diagram
in the role colours of ``hooks/diagrams.py``.
"""

from __future__ import annotations

import math

import diagrams
import torch
from figure_kit import journey_self_attention
from figure_registry import figure
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

import attnlab
from attnlab import examples


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
    """Causal FlashAttention in 2 x 2 tiles: visit order, skipped tiles, running max and sum."""
    words, inputs = examples.your_journey()
    module = journey_self_attention()
    with torch.no_grad():
        attn_scores = attnlab.attention_scores(module.W_query(inputs), module.W_key(inputs))
    scores = attn_scores / math.sqrt(2)  # (6, 6)
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
        row_labels=list(words),
    )
    ink = diagrams.text_colour()
    order = 0
    for qi in range(3):
        for kj in range(3):
            x, y = kj * block * cell[0], (2 - qi) * block * cell[1]
            ax.add_patch(
                Rectangle(
                    (x, y),
                    block * cell[0],
                    block * cell[1],
                    fill=False,
                    edgecolor=ink,
                    linewidth=2.0,
                )
            )
            if kj <= qi:
                order += 1
                ax.text(
                    x + 0.12,
                    y + block * cell[1] - 0.1,
                    str(order),
                    ha="left",
                    va="top",
                    color=ink,
                    fontsize="x-small",
                    fontweight="bold",
                )
            else:
                ax.text(
                    x + block * cell[0] / 2,
                    y + block * cell[1] / 2,
                    "skipped",
                    ha="center",
                    va="center",
                    color=ink,
                    fontsize="small",
                )
    # running max m and sum l of the last query row ("step") after each key tile
    row = scores[5]
    running_max, running_sum = [], []
    m, l_sum = float("-inf"), 0.0
    for kj in range(3):
        tile = row[kj * block : (kj + 1) * block]
        new_m = max(m, float(tile.max()))
        l_sum = l_sum * math.exp(m - new_m) + float((tile - new_m).exp().sum())
        m = new_m
        running_max.append(m)
        running_sum.append(l_sum)
    stats = torch.tensor([running_max, running_sum])  # (2, 3)
    s = diagrams.matrix(
        ax,
        stats,
        (9.6, -2.8),
        role="weights",
        decimals=2,
        cell=cell,
        fontsize="small",
        row_labels=["max m", "sum l"],
        col_labels=["tile 4", "tile 5", "tile 6"],
        title="row 'step', running",
    )
    diagrams.fit(ax, grid, s, diagrams.Bounds(-1.8, -3.0, 14.0, 5.6), margin=0.3)
    return fig


@figure("ring-schedule", diagram=True)
def ring_schedule() -> Figure:
    """Causal ring attention on 4 ranks: work per rank and step, contiguous vs zig-zag."""
    import diagrams

    from attnlab import ring

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
    """The backward pass of one tiny attention: P, dP and dS = P * (dP - D), as numbers."""
    import diagrams

    gen = torch.Generator().manual_seed(0)
    q, k, v, grad_out = (torch.randn(4, 2, generator=gen) for _ in range(4))
    weights = torch.softmax(q @ k.T / 2**0.5, dim=-1)  # P, (4, 4)
    grad_weights = grad_out @ v.T  # dP
    row_dot = (grad_out * (weights @ v)).sum(-1, keepdim=True)  # D = rowsum(dO * O)
    grad_scores = weights * (grad_weights - row_dot)  # dS
    fig, ax = diagrams.canvas(8.0, 2.6)
    b1 = diagrams.matrix(ax, weights, (0, 0), role="weights", title="P", decimals=2)
    b2 = diagrams.matrix(ax, grad_weights, (5.5, 0), role="output", title="dP = dO Vᵀ", decimals=2)
    b3 = diagrams.matrix(ax, row_dot, (11, 0), role="output", title="D", decimals=2)
    b4 = diagrams.matrix(ax, grad_scores, (13.5, 0), role="weights", title="dS", decimals=2)
    diagrams.arrow(ax, b3.right_mid, b4.left_mid)
    diagrams.label(ax, (4.75, 2), "∘")
    diagrams.label(ax, (10.25, 2), "−")
    diagrams.fit(ax, b1, b2, b3, b4)
    return fig
