"""The site's diagram language: one colour per role and a few drawing primitives.

Site code, not part of the package (the figure modules in ``hooks/`` import it as
``hooks.diagrams``; it needs matplotlib). Every conceptual diagram on the site is a short
function over real tensors built from these pieces::

    from hooks import diagrams
    from attnlab import examples

    ex = examples.illustrated()
    fig, ax = diagrams.canvas(8.0, 3.0)
    x = diagrams.matrix(ax, ex.inputs, (0, 0), role="input", title="x")
    q = diagrams.matrix(ax, ex.inputs @ ex.W_query, (7, 0), role="queries", title="Q")
    diagrams.arrow(ax, x.right_mid, q.left_mid, "@ W_query")

**One colour per role** (``attnlab.plot.ROLE_COLOURS``, re-exported here), the same on
every diagram: queries, keys, values, weights (scores and attention weights), output
(context vectors), and a neutral grey for inputs and anything else. Each colour has a
relative luminance between 0.1 and 0.3, so it keeps a contrast of at least 3:1 against
both a white and a black page: the figure hook renders every figure under matplotlib's
``default`` and ``dark_background`` styles, and the same diagram code works for both.
Cells are filled with a light tint of the role colour (mixed with the page colour), so
the numbers, drawn in the style's text colour, stay readable in either scheme.

Coordinates are in *cell units*: one matrix cell is 1 x 1 (in data coordinates), and
:func:`canvas` sets equal aspect so cells stay square. ``y`` grows upward.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import matplotlib as mpl
import torch
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
from torch import Tensor

from attnlab._validation import check_tensor, format_shape
from attnlab.plot import ROLE_COLOURS

__all__ = [
    "ROLE_COLOURS",
    "Bounds",
    "Role",
    "arrow",
    "canvas",
    "fit",
    "label",
    "matrix",
    "operator",
    "plot_retrieval",
    "relative_luminance",
    "side_arrow",
    "text_colour",
    "tint",
]

Role = Literal["input", "queries", "keys", "values", "weights", "output", "masked"]

CELL_TINT = 0.3  # share of the role colour in a cell's fill
MASKED_TINT = 0.08


class Bounds(NamedTuple):
    """The extent of a drawn element, in data (cell) coordinates.

    Attributes:
        left: Smallest ``x``.
        bottom: Smallest ``y``.
        right: Largest ``x``.
        top: Largest ``y``.
    """

    left: float
    bottom: float
    right: float
    top: float

    @property
    def left_mid(self) -> tuple[float, float]:
        """Middle of the left edge."""
        return (self.left, (self.bottom + self.top) / 2)

    @property
    def right_mid(self) -> tuple[float, float]:
        """Middle of the right edge."""
        return (self.right, (self.bottom + self.top) / 2)

    @property
    def top_mid(self) -> tuple[float, float]:
        """Middle of the top edge."""
        return ((self.left + self.right) / 2, self.top)

    @property
    def bottom_mid(self) -> tuple[float, float]:
        """Middle of the bottom edge."""
        return ((self.left + self.right) / 2, self.bottom)


def relative_luminance(colour: str) -> float:
    """WCAG relative luminance of a colour (0 for black, 1 for white).

    Args:
        colour: Any matplotlib colour specification.

    Returns:
        The luminance in ``[0, 1]``.
    """

    def linear(channel: float) -> float:
        return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(c) for c in to_rgb(colour))
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def _background() -> tuple[float, float, float]:
    """The active style's page colour (white for ``default``, black for ``dark_background``)."""
    return to_rgb(mpl.rcParams["axes.facecolor"])


def text_colour() -> str:
    """The active style's text colour (dark on the light scheme, light on the dark one)."""
    return str(mpl.rcParams["text.color"])


def tint(role: str, share: float = CELL_TINT) -> tuple[float, float, float]:
    """The role's colour mixed with the active page colour.

    Args:
        role: A key of :data:`ROLE_COLOURS`.
        share: Fraction of the role colour, in ``[0, 1]``.

    Returns:
        An RGB triple, light on a white page and dark on a black one.

    Raises:
        ValueError: ``role`` is not a known role.
    """
    colour = _role_colour(role)
    background = _background()
    mixed = (share * c + (1 - share) * b for c, b in zip(to_rgb(colour), background, strict=True))
    return (next(mixed), next(mixed), next(mixed))


def _role_colour(role: str) -> str:
    if role not in ROLE_COLOURS:
        raise ValueError(f"role must be one of {', '.join(ROLE_COLOURS)}; got {role!r}")
    return ROLE_COLOURS[role]


def canvas(width: float, height: float) -> tuple[Figure, Axes]:
    """A blank figure for a diagram: no axes lines, equal aspect, limits fitted at the end.

    Draw with the primitives, then call :func:`fit` with their bounds to set the limits.

    Args:
        width: Figure width in inches (the content column is about 8 in wide).
        height: Figure height in inches.

    Returns:
        The figure and its single axes.
    """
    fig = Figure(figsize=(width, height), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_aspect("equal")
    return fig, ax


def fit(ax: Axes, *bounds: Bounds, margin: float = 0.4) -> None:
    """Set the axes' limits to enclose ``bounds`` plus a margin.

    Args:
        ax: The diagram's axes.
        *bounds: Every drawn element's bounds.
        margin: Extra room on each side, in cell units.
    """
    ax.set_xlim(min(b.left for b in bounds) - margin, max(b.right for b in bounds) + margin)
    ax.set_ylim(min(b.bottom for b in bounds) - margin, max(b.top for b in bounds) + margin)


def _format(value: float, decimals: int) -> str:
    if decimals == 0:
        return f"{value:.0f}"
    return f"{value:.{decimals}f}"


def matrix(
    ax: Axes,
    values: Tensor,
    xy: tuple[float, float],
    *,
    role: str = "input",
    title: str | None = None,
    decimals: int = 0,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    masked: Tensor | None = None,
    masked_text: str = "",
    highlight_rows: Sequence[int] = (),
    cell: tuple[float, float] = (1.0, 1.0),
    fontsize: float | str = "medium",
    show_values: bool = True,
) -> Bounds:
    """Draw a vector or matrix of real numbers as a grid of tinted boxes holding the values.

    Args:
        ax: The diagram's axes.
        values: The numbers, shape ``(n,)`` (drawn as one row) or ``(rows, cols)``.
        xy: Bottom-left corner of the grid, in cell units.
        role: Whose colour fills the cells (a key of :data:`ROLE_COLOURS`).
        title: Text above the grid.
        decimals: Digits after the point in each cell.
        row_labels: Text left of each row.
        col_labels: Text above each column (the title goes above them).
        masked: Boolean tensor of the same shape; ``True`` cells are drawn faded, without
            their value (masked scores, skipped tiles).
        masked_text: Written in each masked cell instead of its value (e.g. ``"−∞"``).
        highlight_rows: Rows drawn with a thick role-coloured outline.
        cell: Width and height of one cell, in cell units.
        fontsize: Size of the numbers.
        show_values: Write the numbers in the cells; ``False`` draws only the tinted
            boxes (a mask's pattern, with room for other marks on top).

    Returns:
        The bounds of the grid (labels and title excluded).

    Raises:
        TypeError: ``values`` is not a tensor.
        ValueError: ``values`` is not 1-D or 2-D, ``masked`` or a label list does not
            match its shape, or ``role`` is unknown.

    Shape:
        - values: ``(n,)`` or ``(rows, cols)``
        - masked: same as ``values``
    """
    values = check_tensor("values", values)
    if values.dim() not in (1, 2):
        raise ValueError(
            f"values must have shape (n,) or (rows, cols); got shape {format_shape(values.shape)}"
        )
    grid = values.detach().to(torch.float64).cpu().reshape(-1, values.shape[-1])
    if masked is not None and masked.shape != values.shape:
        raise ValueError(
            f"masked must have the shape of values, {format_shape(values.shape)}; "
            f"got shape {format_shape(masked.shape)}"
        )
    hidden = (
        torch.zeros(grid.shape, dtype=torch.bool)
        if masked is None
        else masked.detach().cpu().reshape(grid.shape)
    )
    rows, cols = grid.shape
    for name, labels, size in (("row_labels", row_labels, rows), ("col_labels", col_labels, cols)):
        if labels is not None and len(labels) != size:
            raise ValueError(f"{name} must have {size} entries; got {len(labels)}")
    colour = _role_colour(role)
    ink = text_colour()
    width, height = cell
    x0, y0 = xy
    for i in range(rows):
        for j in range(cols):
            x, y = x0 + j * width, y0 + (rows - 1 - i) * height
            off = bool(hidden[i, j])
            ax.add_patch(
                Rectangle(
                    (x, y),
                    width,
                    height,
                    facecolor=tint("masked", MASKED_TINT) if off else tint(role),
                    edgecolor=ROLE_COLOURS["masked"] if off else colour,
                    linewidth=1.0,
                )
            )
            if show_values and (not off or masked_text):
                ax.text(
                    x + width / 2,
                    y + height / 2,
                    masked_text if off else _format(float(grid[i, j]), decimals),
                    ha="center",
                    va="center",
                    color=ink,
                    fontsize=fontsize,
                )
    for i in highlight_rows:
        y = y0 + (rows - 1 - i) * height
        ax.add_patch(
            Rectangle((x0, y), cols * width, height, fill=False, edgecolor=colour, linewidth=3.0)
        )
    top = y0 + rows * height
    if row_labels is not None:
        for i, text in enumerate(row_labels):
            y = y0 + (rows - 1 - i) * height + height / 2
            ax.text(x0 - 0.2, y, text, ha="right", va="center", color=ink, fontsize="medium")
    if col_labels is not None:
        for j, text in enumerate(col_labels):
            x = x0 + j * width + width / 2
            ax.text(x, top + 0.15, text, ha="center", va="bottom", color=ink, fontsize="small")
    if title is not None:
        lift = 0.65 if col_labels is not None else 0.15
        label(ax, (x0 + cols * width / 2, top + lift), title, role=role, va="bottom")
    return Bounds(x0, y0, x0 + cols * width, top)


def label(
    ax: Axes,
    xy: tuple[float, float],
    text: str,
    *,
    role: str | None = None,
    ha: str = "center",
    va: str = "center",
    fontsize: float | str = "large",
) -> None:
    """Write a label; with a role, in bold and underlined by a short bar of its colour.

    Args:
        ax: The diagram's axes.
        xy: Anchor point, in cell units.
        text: The label.
        role: Whose colour marks the label; ``None`` for plain text.
        ha: Horizontal alignment.
        va: Vertical alignment.
        fontsize: Text size.
    """
    weight = "bold" if role is not None else "normal"
    ax.text(*xy, text, ha=ha, va=va, color=text_colour(), fontsize=fontsize, fontweight=weight)


def arrow(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    text: str | None = None,
    *,
    role: str | None = None,
    rad: float = 0.0,
    offset: float = 0.25,
) -> None:
    """Draw an arrow from ``start`` to ``end``, with an optional label above its middle.

    Args:
        ax: The diagram's axes.
        start: Tail, in cell units.
        end: Head, in cell units.
        text: Label written above the arrow's midpoint.
        role: Colour the arrow with this role; default the text colour.
        rad: Curvature (``0`` straight; see matplotlib's ``arc3`` connection style).
        offset: Distance of the label above the midpoint.
    """
    colour = text_colour() if role is None else _role_colour(role)
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle="-|>",
            mutation_scale=14,
            linewidth=1.5,
            color=colour,
            connectionstyle=f"arc3,rad={rad}",
            shrinkA=3,
            shrinkB=3,
        )
    )
    if text is not None:
        mid = ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2 + offset)
        ax.text(*mid, text, ha="center", va="bottom", color=text_colour(), fontsize="medium")


def side_arrow(ax: Axes, upper: Bounds, lower: Bounds) -> None:
    """A curved arrow down the right of two stacked grids, from ``upper`` to ``lower``."""
    start = (upper.right + 0.3, upper.bottom + 0.5)
    arrow(ax, start, (max(lower.right, upper.right - 1) + 0.3, lower.top - 0.5), rad=-0.4)


def operator(
    ax: Axes,
    center: tuple[float, float],
    text: str,
    *,
    role: str = "input",
    size: tuple[float, float] = (2.0, 1.0),
    fontsize: float | str = "medium",
) -> Bounds:
    """Draw a rounded box naming an operation (``softmax``, ``Linear``, ``@``).

    Args:
        ax: The diagram's axes.
        center: Centre of the box, in cell units.
        text: The operation's name (may hold newlines).
        role: Whose colour outlines and tints the box.
        size: Width and height of the box, in cell units.
        fontsize: Text size.

    Returns:
        The box's bounds.
    """
    width, height = size
    left, bottom = center[0] - width / 2, center[1] - height / 2
    ax.add_patch(
        FancyBboxPatch(
            (left, bottom),
            width,
            height,
            boxstyle="round,pad=0,rounding_size=0.2",
            facecolor=tint(role, 0.15),
            edgecolor=_role_colour(role),
            linewidth=1.5,
        )
    )
    ax.text(*center, text, ha="center", va="center", color=text_colour(), fontsize=fontsize)
    return Bounds(left, bottom, left + width, bottom + height)


def _weighted_line(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    role: str,
    weight: float,
    *,
    head: str,
) -> None:
    """A line in the role's colour, thicker and more opaque for a larger weight in [0, 1]."""
    props: dict[str, str | float] = {"arrowstyle": head, "color": ROLE_COLOURS[role]}
    props["linewidth"] = 0.5 + 5.0 * weight
    props["alpha"] = 0.3 + 0.7 * weight
    ax.annotate("", xy=end, xytext=start, arrowprops=props)


def plot_retrieval(
    query_label: str,
    key_labels: Sequence[str],
    value_labels: Sequence[str],
    weights: Tensor,
    answer: str,
    *,
    title: str | None = None,
) -> Figure:
    """Draw one query retrieving from stored key-value pairs: attention as a lookup.

    The stored pairs form a column of key and value boxes; arrows from the query to
    each pair are labelled with its attention weight and drawn thicker for larger
    weights; the weighted sum of the values leads to the answer.

    Args:
        query_label: Text of the query box.
        key_labels: Text of each stored key (``S`` entries).
        value_labels: Text of each stored value (``S`` entries).
        weights: The query's attention weight on each pair.
        answer: Text of the output box.
        title: Figure title.

    Returns:
        The diagram.

    Shape:
        weights: ``(S,)``.
    """
    weights = check_tensor("weights", weights)
    if weights.dim() != 1:
        raise ValueError(f"weights must have shape (S,); got shape {format_shape(weights.shape)}")
    S = weights.shape[0]
    for name, labels in (("key_labels", key_labels), ("value_labels", value_labels)):
        if len(labels) != S:
            wanted = f"{S} entries (the size of weights)"
            raise ValueError(f"{name} must have {wanted}; got {len(labels)}")
    fig = Figure(figsize=(7.0, 0.9 + 0.7 * S), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.8, S - 0.2)
    ax.axis("off")
    middle = (S - 1) / 2

    def box(x: float, y: float, text: str, role: str, width: float = 1.1) -> None:
        colour = ROLE_COLOURS[role]
        corner = (x - width / 2, y - 0.27)
        ax.add_patch(
            FancyBboxPatch(
                corner,
                width,
                0.54,
                boxstyle="round,pad=0.04",
                facecolor=colour,
                edgecolor=colour,
                alpha=0.9,
            )
        )
        ax.text(x, y, text, ha="center", va="center", color="white", fontweight="bold")

    box(1.0, middle, query_label, "queries", width=1.4)
    for j in range(S):
        y = S - 1 - j
        weight = float(weights[j])
        box(5.6, y, str(key_labels[j]), "keys", width=0.9)
        box(6.6, y, str(value_labels[j]), "values", width=0.9)
        _weighted_line(ax, (1.75, middle), (5.1, y), "weights", weight, head="-|>")
        # beside the arrow's tip, on the side its line does not come from
        label_y = y + (0.3 if y >= middle else -0.3)
        ax.text(
            4.95,
            label_y,
            f"{weight:.2f}",
            ha="right",
            va="center",
            color=ROLE_COLOURS["weights"],
            fontweight="bold",
        )
        _weighted_line(ax, (7.1, y), (8.3, middle), "values", weight, head="-")
    box(9.0, middle, answer, "output", width=1.4)
    ax.text(1.0, middle - 0.55, "query", ha="center", va="top", fontsize="small")
    ax.text(6.1, -0.6, "stored pairs: key | value", ha="center", va="top", fontsize="small")
    answer_note = "weighted sum\nof values"
    ax.text(9.0, middle - 0.55, answer_note, ha="center", va="top", fontsize="small")
    if title is not None:
        ax.set_title(title)
    return fig
