"""Small helpers shared by the ``figures_*.py`` modules (not a hook itself)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["SMALL_CELL", "seeded", "side_by_side"]

#: The cell size (width, height) of the small matrices in the conceptual diagrams.
SMALL_CELL = (1.4, 0.7)


def seeded(seed: int, build: Callable[[], Figure]) -> Figure:
    """Run ``build`` after ``torch.manual_seed(seed)``, leaving the global RNG as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def side_by_side(width: float, height: float) -> tuple[Figure, list[Axes]]:
    """A constrained-layout figure of ``width`` x ``height`` inches with two axes in a row."""
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, list(fig.subplots(1, 2))
