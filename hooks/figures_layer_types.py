"""Figures of the chapter on gates, sinks and layer types (llm/gates-and-sinks).

Registered with ``@figure`` (``hooks/figure_registry.py``) and drawn by the figures hook.
"""

from __future__ import annotations

from figure_registry import figure
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from attnlab import OPEN_MODEL_LAYOUTS

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
