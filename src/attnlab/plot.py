"""Pictures of attention, drawn from the package's own tensors.

Needs the ``plot`` extra (matplotlib); ``import attnlab`` alone never imports it::

    from attnlab import plot
    fig = plot.plot_attention(attn_weights, words, words)

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (no
global figure registry to leak), or draws into the ``ax`` it is given and returns that
axes' figure. Colours come from the active matplotlib style (light or
``dark_background``); heatmaps use ``viridis``. Labels default to ``1..L`` and
``1..S``; a label list of the wrong length is refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import matplotlib as mpl
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
from torch import Tensor

from ._validation import check_tensor, format_shape

__all__ = [
    "ROLE_COLOURS",
    "plot_attention",
    "plot_decode",
    "plot_heads",
    "plot_loss",
    "plot_mask",
    "plot_softmax_scaling",
    "plot_sweep",
    "plot_variance_vs_dim",
    "plot_window",
]

CMAP = "viridis"

#: One colour per role, kept on every diagram of the site (Okabe-Ito based, colour-blind
#: safe; each passes 3:1 contrast on white and on black).
ROLE_COLOURS: dict[str, str] = {
    "input": "#808080",  # grey: embeddings, anything without a role
    "queries": "#d55e00",  # vermillion
    "keys": "#0072b2",  # blue
    "values": "#009e73",  # bluish green
    "weights": "#a65fbf",  # purple: scores and attention weights
    "output": "#b07d00",  # dark gold: context vectors
    "masked": "#808080",  # grey, drawn faded: masked or skipped cells
}


def _check_rank(name: str, tensor: Tensor, rank: int, wanted: str) -> None:
    if tensor.dim() != rank:
        raise ValueError(f"{name} must have shape {wanted}; got shape {format_shape(tensor.shape)}")


def _check_labels(name: str, labels: Sequence[str] | None, size: int, dim: str) -> list[str]:
    if labels is None:
        return [str(i + 1) for i in range(size)]
    if len(labels) != size:
        raise ValueError(f"{name} must have {size} entries (the size of {dim}); got {len(labels)}")
    return [str(label) for label in labels]


def _new_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    if ax is not None:
        root = ax.get_figure(root=True)
        if root is None:
            raise ValueError("ax must belong to a figure")
        return root, ax
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def _text_colour(value: float, vmin: float, vmax: float) -> str:
    """Black on the bright end of viridis, white on the dark end, whatever the page theme."""
    level = 0.5 if vmax == vmin else (value - vmin) / (vmax - vmin)
    return "black" if level > 0.55 else "white"


def _heatmap(
    ax: Axes,
    matrix: Tensor,
    row_labels: list[str],
    col_labels: list[str],
    *,
    annotate: bool,
    decimals: int,
    vmin: float | None,
    vmax: float | None,
) -> AxesImage:
    data = matrix.detach().to(torch.float64).cpu()
    low = float(data.min()) if vmin is None else vmin
    high = float(data.max()) if vmax is None else vmax
    image = ax.imshow(data.numpy(), cmap=CMAP, vmin=low, vmax=high, aspect="auto")
    ax.set_xticks(range(len(col_labels)), col_labels, rotation=45, ha="right")
    ax.set_yticks(range(len(row_labels)), row_labels)
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if annotate:
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                value = float(data[i, j])
                ax.text(
                    j,
                    i,
                    f"{value:.{decimals}f}",
                    ha="center",
                    va="center",
                    fontsize="small",
                    color=_text_colour(value, low, high),
                )
    return image


def plot_attention(
    weights: Tensor,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    *,
    title: str | None = None,
    ax: Axes | None = None,
    annotate: bool = True,
    decimals: int = 2,
    xlabel: str = "key",
    ylabel: str = "query",
    vmin: float | None = None,
    vmax: float | None = None,
    colorbar: bool = True,
) -> Figure:
    """Draw a matrix ``(L, S)`` (attention weights, scores, embeddings) as a labelled heatmap.

    Row ``i`` is query ``i`` and column ``j`` is key ``j``, as in ``attn_weights[i, j]``.
    ``annotate`` writes each value, rounded to ``decimals``; ``vmin``/``vmax`` default to
    the matrix's extremes.
    """
    weights = check_tensor("weights", weights)
    _check_rank("weights", weights, 2, "(L, S)")
    L, S = weights.shape
    rows = _check_labels("row_labels", row_labels, L, "weights' dim 0 (L)")
    cols = _check_labels("col_labels", col_labels, S, "weights' dim 1 (S)")
    fig, ax = _new_axes(ax, (1.0 + 0.75 * S, 0.8 + 0.55 * L))
    image = _heatmap(
        ax, weights, rows, cols, annotate=annotate, decimals=decimals, vmin=vmin, vmax=vmax
    )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)
    if colorbar:
        fig.colorbar(image, ax=ax, shrink=0.9)
    return fig


def plot_mask(
    mask: Tensor,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    *,
    title: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Draw a boolean mask ``(L, S)``: bright cells ``True`` (seen), dark cells masked.

    ``col_labels`` default to ``row_labels`` when ``L == S``.
    """
    mask = check_tensor("mask", mask)
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a boolean tensor (True = may attend); got {mask.dtype}")
    _check_rank("mask", mask, 2, "(L, S)")
    L, S = mask.shape
    rows = _check_labels("row_labels", row_labels, L, "mask's dim 0 (L)")
    if col_labels is None and L == S:
        col_labels = rows
    cols = _check_labels("col_labels", col_labels, S, "mask's dim 1 (S)")
    fig, ax = _new_axes(ax, (1.6 + 0.6 * S, 0.8 + 0.5 * L))
    cmap = mpl.colors.ListedColormap([mpl.colormaps[CMAP](0.1), mpl.colormaps[CMAP](0.85)])
    image = ax.imshow(mask.to(torch.float64).numpy(), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(S), cols, rotation=45, ha="right")
    ax.set_yticks(range(L), rows)
    ax.tick_params(length=0)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title is not None:
        ax.set_title(title)
    colorbar = fig.colorbar(image, ax=ax, ticks=[0.25, 0.75], shrink=0.6)
    colorbar.ax.set_yticklabels(["masked\n(False)", "may attend\n(True)"])
    colorbar.ax.tick_params(length=0)
    return fig


def plot_heads(
    weights: Tensor,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    *,
    titles: Sequence[str] | None = None,
    annotate: bool = False,
    decimals: int = 2,
) -> Figure:
    """Draw one attention map per head of ``weights (H, L, S)``, side by side, one colour scale.

    A new figure with ``H`` heatmap axes and one colorbar axes; ``titles`` default to
    ``head 1 .. head H``.
    """
    weights = check_tensor("weights", weights)
    _check_rank("weights", weights, 3, "(H, L, S)")
    H, L, S = weights.shape
    rows = _check_labels("row_labels", row_labels, L, "weights' dim 1 (L)")
    if col_labels is None and L == S:
        col_labels = rows
    cols = _check_labels("col_labels", col_labels, S, "weights' dim 2 (S)")
    heads = _check_labels("titles", titles, H, "weights' dim 0 (H)")
    if titles is None:
        heads = [f"head {h + 1}" for h in range(H)]
    low, high = float(weights.min()), float(weights.max())
    fig = Figure(figsize=(1.2 + H * (0.6 + 0.45 * S), 1.2 + 0.45 * L), layout="constrained")
    axes = fig.subplots(1, H, sharey=True, squeeze=False)[0]
    images = [
        _heatmap(
            ax, weights[h], rows, cols, annotate=annotate, decimals=decimals, vmin=low, vmax=high
        )
        for h, ax in enumerate(axes)
    ]
    for h, ax in enumerate(axes):
        ax.set_title(heads[h])
        ax.set_xlabel("key")
    axes[0].set_ylabel("query")
    fig.colorbar(images[0], ax=list(axes), shrink=0.9)
    return fig


def plot_softmax_scaling(
    scores: Tensor,
    factors: Sequence[float],
    labels: Sequence[str] | None = None,
    *,
    title: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Show how ``softmax(scores * factor)`` sharpens towards the largest score.

    One group of bars per score of ``scores (n,)``, one bar per positive factor, each
    distribution's peak written above its bar.
    """
    scores = check_tensor("scores", scores)
    _check_rank("scores", scores, 1, "(n,)")
    if not scores.is_floating_point():
        raise TypeError(f"scores must be a floating-point tensor; got dtype {scores.dtype}")
    if len(factors) == 0 or any(not factor > 0 for factor in factors):
        raise ValueError(f"factors must be a non-empty list of positive numbers; got {factors}")
    n = scores.shape[0]
    names = _check_labels("labels", labels, n, "scores (n)")
    fig, ax = _new_axes(ax, (1.5 + 0.9 * n, 3.2))
    width = 0.8 / len(factors)
    cmap = mpl.colormaps[CMAP]
    for k, factor in enumerate(factors):
        probs = torch.softmax(scores.detach().to(torch.float64) * factor, dim=0)
        xs = [i + (k - (len(factors) - 1) / 2) * width for i in range(n)]
        colour = cmap(0.35 + 0.5 * k / max(len(factors) - 1, 1))
        ax.bar(xs, probs.tolist(), width=width, color=colour, label=f"× {factor:g}")
        peak = int(probs.argmax())
        ax.annotate(
            f"{float(probs[peak]):.2f}",
            (xs[peak], float(probs[peak])),
            xytext=(0, 2),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize="small",
        )
    ax.set_xticks(range(n), names)
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("softmax weight")
    ax.legend(title="scores", frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if title is not None:
        ax.set_title(title)
    return fig


def plot_variance_vs_dim(
    dims: Sequence[int],
    variances_unscaled: Sequence[float] | Tensor,
    variances_scaled: Sequence[float] | Tensor,
    *,
    title: str | None = None,
    ax: Axes | None = None,
) -> Figure:
    """Plot the variance of ``q · k`` against the dimension, before and after scaling.

    For unit-variance entries ``var(q · k) = d`` grows with the dimension and
    ``var(q · k / sqrt(d)) = 1`` does not: both axes logarithmic, with the lines ``y = d``
    and ``y = 1`` for reference.
    """
    dim_list = [int(d) for d in dims]
    unscaled = [float(v) for v in variances_unscaled]
    scaled = [float(v) for v in variances_scaled]
    if not dim_list or any(d <= 0 for d in dim_list):
        raise ValueError(f"dims must be a non-empty list of positive ints; got {dim_list}")
    for name, values in (("variances_unscaled", unscaled), ("variances_scaled", scaled)):
        if len(values) != len(dim_list):
            raise ValueError(
                f"{name} must have one entry per dim ({len(dim_list)}); got {len(values)}"
            )
    fig, ax = _new_axes(ax, (5.0, 3.4))
    cmap = mpl.colormaps[CMAP]
    ax.plot(dim_list, dim_list, linestyle=":", color="grey", label="y = d")
    ax.plot(dim_list, [1.0] * len(dim_list), linestyle="--", color="grey", label="y = 1")
    ax.plot(dim_list, unscaled, marker="o", color=cmap(0.35), label="q · k")
    ax.plot(dim_list, scaled, marker="s", color=cmap(0.75), label="q · k / √d")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("dimension d")
    ax.set_ylabel("variance")
    low = min([*unscaled, *scaled, 1.0])
    high = max([*unscaled, *scaled, *map(float, dim_list)])
    ax.set_ylim(2 ** math.floor(math.log2(low)), 2 ** math.ceil(math.log2(high) + 0.5))
    ax.legend(frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if title is not None:
        ax.set_title(title)
    return fig


def plot_loss(loss: Sequence[float], *, title: str | None = None, ax: Axes | None = None) -> Figure:
    """Draw a training loss curve, one point per step, on a log scale."""
    if len(loss) == 0:
        raise ValueError("loss must hold at least one value; got an empty sequence")
    fig, ax = _new_axes(ax, (6.0, 3.0))
    ax.plot(range(1, len(loss) + 1), list(loss), color=ROLE_COLOURS["output"], linewidth=1.2)
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy loss")
    ax.grid(True, which="major", alpha=0.3)
    if title is not None:
        ax.set_title(title)
    return fig


# ------------------------------------------- the benchmark's results (attnlab.bench)


def plot_sweep(results: dict[str, Any], metric: str = "median_ms") -> Figure:
    """Draw one sweep metric against ``T``, log-log, causal and not side by side.

    ``metric`` is ``"median_ms"`` (forward time) or ``"peak_mib"`` (peak extra memory);
    ``results`` as ``attnlab.bench.load_results`` returns them.
    """
    labels = {"median_ms": "forward time (ms)", "peak_mib": "peak extra memory (MiB)"}
    if metric not in labels:
        raise ValueError(f"metric must be 'median_ms' or 'peak_mib'; got {metric!r}")
    names = {
        "explicit": "attnlab explicit",
        "flash": "attnlab.flash_attention",
        "sdpa": "torch SDPA",
        "sdpa_math": "torch SDPA, math backend",
    }
    markers = {"explicit": "o", "flash": "s", "sdpa": "^", "sdpa_math": "D"}
    fig = Figure(figsize=(9, 3.8), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, causal in zip(axes, (False, True), strict=True):
        for method in names:
            points = [
                (row["T"], row[metric])
                for row in results["sweep"]
                if row["method"] == method and row["causal"] == causal and row.get(metric)
            ]
            if points:
                ts, values = zip(*points, strict=True)
                ax.plot(ts, values, marker=markers[method], label=names[method])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T (tokens)")
        ax.set_title("causal" if causal else "not causal")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel(labels[metric])
    axes[0].legend(fontsize="small")
    return fig


def _plain_log_ticks(ax: Axes, values: list[float]) -> None:
    """Label a log y axis at 1, 2, 3, 5, 10, 20 ... (those within the range of ``values``)."""
    low, high = min(values) / 1.25, max(values) * 1.25
    ticks = [m * 10.0**e for e in range(-1, 5) for m in (1, 2, 3, 5) if low <= m * 10.0**e <= high]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def plot_decode(results: dict[str, Any], target: float = 10.0) -> Figure:
    """Decoding time against ``T``, cached and recomputed; then the speed-up, ``target`` dashed."""
    steps = results["steps"]
    ts = [row["T"] for row in steps]
    fig = Figure(figsize=(9, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.plot(ts, [row["recompute_s"] for row in steps], marker="o", label="recompute the prefix")
    left.plot(ts, [row["cached_s"] for row in steps], marker="s", label="KV cache")
    left.set_ylabel("time to decode T tokens (s)")
    left.set_title("total decoding time")
    left.legend(fontsize="small")
    right.plot(ts, [row["speedup"] for row in steps], marker="D", color="C2", label="speed-up")
    right.axhline(target, color="C3", linestyle="--", label=f"target {target:g}x")
    right.set_ylabel("recompute time / cached time")
    right.set_title("speed-up of the cache")
    right.legend(fontsize="small")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens decoded T")
        ax.grid(True, which="major", alpha=0.3)
    _plain_log_ticks(right, [target, *(row["speedup"] for row in steps)])
    return fig


def plot_window(results: dict[str, Any]) -> Figure:
    """Sliding-window against full causal flash attention: time and memory against ``T``."""
    window = results["config"]["window"]
    names = {"causal": "causal flash", "window": f"window {window} flash"}
    fig = Figure(figsize=(9, 3.8), layout="constrained")
    axes = fig.subplots(1, 2)
    panels = (("median_ms", "time per call (ms)"), ("peak_mib", "peak extra memory (MiB)"))
    for ax, (metric, label) in zip(axes, panels, strict=True):
        for method, marker in (("causal", "o"), ("window", "s")):
            rows = [row for row in results["rows"] if row["method"] == method]
            ax.plot(
                [row["T"] for row in rows],
                [row[metric] for row in rows],
                marker=marker,
                label=names[method],
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T (tokens)")
        ax.set_ylabel(label)
        ax.grid(True, which="major", alpha=0.3)
    _plain_log_ticks(axes[1], [row["peak_mib"] for row in results["rows"]])
    axes[0].set_title("time")
    axes[1].set_title("memory")
    axes[0].legend(fontsize="small")
    return fig
