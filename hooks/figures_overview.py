"""The overview figures of the Foundations, drawn from ``attnlab``.

The whole decoder (the big picture) and the running example's projections (trainable
weights), registered with ``@figure`` and drawn by the figures hook.
"""

from __future__ import annotations

import diagrams
from figure_kit import projection_rows
from figure_registry import figure
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from attnlab import examples

_CENTRE_X = 4.0
_BOX_WIDTH = 6.0


def _box(ax: Axes, y: float, text: str, role: str, height: float = 0.9) -> diagrams.Bounds:
    return diagrams.operator(
        ax, (_CENTRE_X, y), text, role=role, size=(_BOX_WIDTH, height), fontsize="medium"
    )


def _chapter(ax: Axes, y: float, text: str) -> None:
    diagrams.label(ax, (_CENTRE_X + _BOX_WIDTH / 2 + 0.5, y), text, ha="left", fontsize="small")


def _residual(ax: Axes, top: float, plus_y: float) -> None:
    """The skip path: from the stream at ``top`` around the sublayer into the + at ``plus_y``."""
    left = _CENTRE_X - _BOX_WIDTH / 2 - 0.8
    colour = diagrams.text_colour()
    ax.plot([_CENTRE_X, left, left], [top, top, plus_y], color=colour, linewidth=1.5)
    diagrams.arrow(ax, (left, plus_y), (_CENTRE_X - 0.45, plus_y))


@figure("decoder-overview", diagram=True)
def decoder_overview() -> Figure:
    """The whole decoder, tokens to logits, each box labelled with the chapter that builds it."""
    words = examples.your_journey().words
    fig, ax = diagrams.canvas(8.0, 9.5)
    bounds = []
    stream: list[tuple[float, float]] = []  # (top, bottom) of each box on the main path

    def add(b: diagrams.Bounds) -> diagrams.Bounds:
        if stream:
            diagrams.arrow(ax, (_CENTRE_X, stream[-1][1]), (_CENTRE_X, b.top))
        stream.append((b.top, b.bottom))
        bounds.append(b)
        return b

    add(_box(ax, 17.0, " ".join(words) + "\ntoken ids (T,)", "input", 1.2))
    _chapter(ax, 17.0, "From words to vectors")
    add(_box(ax, 15.0, "token embedding + positions\n(T, d)", "input", 1.2))
    _chapter(ax, 15.0, "From words to vectors;\nPositions")

    # One block, repeated N times: pre-norm attention and feed-forward, each with a residual.
    norm1 = add(_box(ax, 12.6, "LayerNorm", "input", 0.8))
    _chapter(ax, 12.6, "this page")
    add(_box(ax, 11.0, "masked multi-head attention\nsoftmax(QKᵀ/√d_k) V", "weights", 1.4))
    _chapter(
        ax, 11.0, "Foundations (one head);\nToward the transformer;\nEfficient attention; LLMs"
    )
    plus1 = add(diagrams.operator(ax, (_CENTRE_X, 9.4), "+", size=(0.9, 0.7)))
    _residual(ax, norm1.top + 0.45, 9.4)
    norm2 = add(_box(ax, 8.0, "LayerNorm", "input", 0.8))
    add(_box(ax, 6.6, "feed-forward: Linear, GELU, Linear", "input", 0.9))
    _chapter(ax, 6.6, "this page")
    add(diagrams.operator(ax, (_CENTRE_X, 5.2), "+", size=(0.9, 0.7)))
    _residual(ax, norm2.top + 0.4 + (plus1.bottom - norm2.top - 0.4) / 2, 5.2)

    frame_top, frame_bottom = norm1.top + 0.9, 4.5
    left, right = _CENTRE_X - _BOX_WIDTH / 2 - 1.3, _CENTRE_X + _BOX_WIDTH / 2 + 0.3
    ax.plot(
        [left, right, right, left, left],
        [frame_top, frame_top, frame_bottom, frame_bottom, frame_top],
        color=diagrams.text_colour(),
        linewidth=1.0,
        linestyle="--",
    )
    diagrams.label(ax, (right + 0.2, frame_bottom + 0.3), "× N blocks", ha="left")

    add(_box(ax, 3.0, "LayerNorm, Linear: logits\n(T, vocabulary size)", "output", 1.2))
    _chapter(ax, 3.0, "this page; trained:\nWatch attention learn")
    diagrams.label(
        ax,
        (_CENTRE_X, 1.6),
        "a real one, weights and all: the finale, A real LLM",
        fontsize="small",
    )
    extent = diagrams.Bounds(left, 1.2, _CENTRE_X + _BOX_WIDTH / 2 + 5.2, frame_top)
    diagrams.fit(ax, *bounds, extent, margin=0.4)
    return fig


@figure("journey-projections", diagram=True)
def journey_projections() -> Figure:
    """Seed-123 ``(3, 3)`` weights on "Your journey…": x @ W = queries, keys, values."""
    inputs = examples.your_journey().inputs  # (6, 3)
    weights = examples.seeded_weights(3, 3)  # seed 123, (3, 3) each, global RNG untouched
    fig, ax = diagrams.canvas(7.0, 9.0)
    bounds = projection_rows(ax, inputs, weights._asdict(), decimals=2, cell=(1.2, 0.8))
    diagrams.fit(ax, *bounds, margin=0.9)
    return fig
