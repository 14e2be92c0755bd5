"""Small helpers shared by the ``figures_*.py`` modules (not a hook itself)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TypeVar

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

import attnlab
from hooks import diagrams

__all__ = [
    "SMALL_CELL",
    "journey_self_attention",
    "matrix_style",
    "projection_rows",
    "seeded",
    "side_by_side",
]

T = TypeVar("T")

#: The cell size (width, height) of the small matrices in the conceptual diagrams.
SMALL_CELL = (1.4, 0.7)


def seeded(seed: int, build: Callable[[], T]) -> T:
    """Run ``build`` after ``torch.manual_seed(seed)``, leaving the global RNG as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def journey_self_attention() -> attnlab.SelfAttentionV2:
    """``SelfAttentionV2(3, 2)`` built right after ``torch.manual_seed(789)``, as the chapters do.

    The module the diagrams of "Your journey starts with one step" share; the global
    random state is left as it was.
    """
    return seeded(789, lambda: attnlab.SelfAttentionV2(3, 2))


def side_by_side(width: float, height: float) -> tuple[Figure, list[Axes]]:
    """A constrained-layout figure of ``width`` x ``height`` inches with two axes in a row."""
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, list(fig.subplots(1, 2))


def matrix_style(
    cell: tuple[float, float], *, decimals: int = 2, fontsize: str = "small"
) -> Callable[..., diagrams.Bounds]:
    """``diagrams.matrix`` with one figure's cell size, decimals and font size set.

    The grids of a diagram share these three; a call still passes its own ``role``,
    ``title`` or labels, and may override any of the three.
    """
    return partial(diagrams.matrix, cell=cell, decimals=decimals, fontsize=fontsize)


def projection_rows(
    ax: Axes,
    inputs: torch.Tensor,
    weights: dict[str, torch.Tensor],
    *,
    decimals: int,
    cell: tuple[float, float],
) -> list[diagrams.Bounds]:
    """Draw ``inputs @ W = result`` once per weight, stacked downward.

    The weights come in query, key, value order, each row in its role colour.

    Shape:
        inputs: ``(T, d_in)``; each weight: ``(d_in, d_out)``.
    """
    T, d_in = inputs.shape
    grid = matrix_style(cell, decimals=decimals)
    bounds = []
    y = 0.0
    for role, (name, W) in zip(("queries", "keys", "values"), weights.items(), strict=True):
        height = max(T, d_in) * cell[1]
        x = grid(ax, inputs, (0, y), title="x" if y == 0 else None)
        diagrams.label(ax, (x.right + 0.5, y + T * cell[1] / 2), "@")
        w = grid(ax, W, (x.right + 1.0, y), role=role, title=name)
        diagrams.label(ax, (w.right + 0.5, y + T * cell[1] / 2), "=")
        out = grid(ax, inputs @ W, (w.right + 1.0, y), role=role, title=role)
        bounds += [x, w, out]
        y -= height + 1.6
    return bounds
