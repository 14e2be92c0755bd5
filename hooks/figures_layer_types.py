"""Figures of the chapter on gates, sinks and layer types (llm/gates-and-sinks).

Registered with ``@figure`` (``hooks/figure_registry.py``) and drawn by the figures hook.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from attnlab import OPEN_MODEL_LAYOUTS
from hooks.figure_registry import figure

#: One colour per layer type (Okabe-Ito, colour-blind safe, legible on both schemes).
LAYER_COLOURS = {
    "full_attention": "#d55e00",
    "sliding_attention": "#56b4e9",
    "linear_attention": "#009e73",
}
LAYER_NAMES = {
    "full_attention": "full",
    "sliding_attention": "sliding window",
    "linear_attention": "linear (Gated DeltaNet)",
}


@figure("layer-types")
def layer_types() -> Figure:
    """Each model's layers, first to last, as a strip of cells coloured by layer type.

    One row per model of ``OPEN_MODEL_LAYOUTS``, its name above the strip; the strips share
    one scale (layers of the longest model span the width), so depth compares across rows.
    A layer without rotary (SmolLM3's every fourth) is hatched.
    """
    layouts = list(OPEN_MODEL_LAYOUTS.values())
    longest = max(len(layout.layer_types) for layout in layouts)
    fig = Figure(figsize=(6.4, 0.95 * len(layouts) + 1.1), layout="constrained")
    ax = fig.add_subplot()
    for row, layout in enumerate(layouts):
        y = -row * 1.0
        for i, kind in enumerate(layout.layer_types):
            unrotated = layout.rotary is not None and not layout.rotary[i]
            ax.add_patch(
                Rectangle(
                    (i, y), 0.86, 0.42, facecolor=LAYER_COLOURS[kind],
                    hatch="////" if unrotated else None, edgecolor="none",
                )
            )  # fmt: skip
        label = f"{layout.name}: {len(layout.layer_types)} layers"
        ax.text(0, y + 0.5, label, fontsize=13, va="bottom")
    ax.set_xlim(-0.2, longest + 0.2)
    ax.set_ylim(-(len(layouts) - 1) - 0.1, 1.05)
    ax.axis("off")
    handles = [Patch(color=LAYER_COLOURS[k], label=LAYER_NAMES[k]) for k in LAYER_COLOURS]
    handles.append(Patch(facecolor="grey", hatch="////", label="no rotary"))
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=12, frameon=False)
    return fig


@figure("sink-column", diagram=True)
def sink_column() -> Figure:
    """One query's softmax with a learned sink: the sink's logit joins the row, then is dropped.

    Four scores and a sink logit of 1.0: the five weights sum to 1, the four kept sum to
    less, and the rest (the sink's share) goes nowhere.
    """
    import torch

    from hooks import diagrams

    scores = torch.tensor([0.2, -0.5, 0.4, 0.1])
    sink = torch.tensor([1.0])
    weights = torch.softmax(torch.cat([scores, sink]), dim=0)
    fig, ax = diagrams.canvas(6.4, 5.0)
    top = diagrams.matrix(
        ax, torch.cat([scores, sink]), (0, 6), role="keys", decimals=1,
        title="scores of one query, then the sink's logit",
        col_labels=["k0", "k1", "k2", "k3", "sink"],
    )  # fmt: skip
    mid = diagrams.matrix(
        ax, weights, (0, 3), role="weights", decimals=2, title="softmax over all five",
    )  # fmt: skip
    kept = diagrams.matrix(
        ax, weights[:4], (0, 0), role="output", decimals=2,
        title=f"sink dropped: the row sums to {float(weights[:4].sum()):.2f}",
    )  # fmt: skip
    diagrams.side_arrow(ax, top, mid)
    diagrams.side_arrow(ax, mid, kept)
    diagrams.fit(ax, top, mid, kept, diagrams.Bounds(0, 0, top.right + 1.2, top.top + 1.6))
    return fig
