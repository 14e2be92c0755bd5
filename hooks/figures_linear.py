"""Figures of the chapter on linear attention and Gated DeltaNet (llm/linear-attention).

Registered with ``@figure`` (``hooks/figure_registry.py``) and drawn by the figures hook.
"""

from __future__ import annotations

import matplotlib as mpl
import torch
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure

from attnlab import examples
from hooks import diagrams
from hooks.figure_kit import matrix_style
from hooks.figure_registry import figure

#: Negative and positive ends of the signed scale (PuOr's, colour-blind safe); zero is
#: the page colour, so a cell that weighs nothing disappears in both schemes.
NEGATIVE, POSITIVE = "#e08214", "#8073ac"


@figure("gated-deltanet-attention")
def gated_deltanet_attention() -> Figure:
    """The implicit attention of the chapter's hand-set recall layer, on a signed scale.

    ``examples.letter_digit_recall()`` run with ``need_weights=True``: its one head's
    ``A (T, T)``, zero above the diagonal (left blank), the strong cells written in.
    """
    recall = examples.letter_digit_recall()
    with torch.no_grad():
        _, weights = recall.layer(recall.x, need_weights=True)
    assert weights is not None
    A = weights[0, 0].double()  # (T, T)
    T = A.shape[0]
    limit = float(A.abs().max())
    page = mpl.rcParams["axes.facecolor"]
    signed = LinearSegmentedColormap.from_list("signed", [NEGATIVE, page, POSITIVE])
    shown = A.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("nan"))
    fig = Figure(figsize=(6.4, 5.8), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(shown.numpy(), cmap=signed, vmin=-limit, vmax=limit)
    tokens = list(recall.text)
    ax.set_xticks(range(T), tokens, fontsize="large")
    ax.set_yticks(range(T), tokens, fontsize="large")
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    for i in range(T):
        for j in range(i + 1):
            if abs(float(A[i, j])) >= 0.2:
                ax.text(j, i, f"{float(A[i, j]):.2f}", ha="center", va="center", fontsize=7)
    ax.set_xlabel("token whose value is weighed")
    ax.set_ylabel("token whose output it is")
    ax.set_title("implicit attention A of one Gated DeltaNet head")
    colorbar = fig.colorbar(image, ax=ax, shrink=0.8)
    colorbar.set_label("weight (signed)")
    return fig


def _delta_rule_write() -> dict[str, torch.Tensor]:
    """The chapter's writes, A -> 1 and B -> 2 into a state of three keys, then A -> 5.

    Returned: the state before the last write, what key A recalls from it, the error the
    delta rule writes, and the state after the last write with and without the delta.
    """
    keys = torch.eye(3)  # A, B, C
    state = torch.zeros(3, 2)
    for key_id, value in ((0, torch.tensor([1.0, 0.0])), (1, torch.tensor([0.0, 2.0]))):
        state = state + torch.outer(keys[key_id], value)  # orthonormal keys: the same either way
    k, v = keys[0], torch.tensor([5.0, 0.0])
    recalled = state.transpose(-2, -1) @ k  # (2,)
    error = v - recalled
    return {
        "state": state,
        "recalled": recalled,
        "value": v,
        "error": error,
        "added": state + torch.outer(k, v),
        "corrected": state + torch.outer(k, error),
    }


@figure("delta-rule-write", diagram=True)
def delta_rule_write() -> Figure:
    """Writing A -> 5 into a state that holds A -> 1: added (linear attention), or corrected.

    The numbers are the chapter's delta-rule block's: keys one-hot, beta = 1.
    """
    step = _delta_rule_write()
    fig, ax = diagrams.canvas(8.0, 4.4)
    rows = ["A", "B", "C"]
    grid = matrix_style((1.0, 0.8), decimals=0, fontsize="large")
    S = grid(
        ax,
        step["state"],
        (0, 0.0),
        role="weights",
        title="state S",
        row_labels=rows,
        highlight_rows=[0],
    )
    added = grid(
        ax,
        step["added"],
        (11.0, 2.4),
        role="weights",
        title="linear attention",
        row_labels=rows,
        highlight_rows=[0],
    )
    recalled = grid(ax, step["recalled"], (4.0, -2.2), role="values", title="recall Sᵀk")
    error = grid(ax, step["error"], (7.4, -2.2), role="values", title="v − Sᵀk")
    corrected = grid(
        ax,
        step["corrected"],
        (11.0, -2.2),
        role="weights",
        title="delta rule",
        row_labels=rows,
        highlight_rows=[0],
    )
    diagrams.arrow(ax, S.right_mid, (added.left - 0.8, added.top - 0.4), rad=-0.15)
    diagrams.label(ax, (7.0, 2.5), "+ k vᵀ", fontsize="large")
    diagrams.arrow(ax, (S.right, S.bottom + 0.4), recalled.top_mid, "read with k = A")
    diagrams.arrow(ax, recalled.right_mid, error.left_mid)
    diagrams.arrow(ax, error.right_mid, (corrected.left - 0.9, corrected.bottom + 0.4))
    diagrams.label(ax, (9.0, -2.9), "+ k (v − Sᵀk)ᵀ", fontsize="large")
    diagrams.label(ax, (5.0, 3.9), "write A → v = (5, 0)", fontsize="x-large")
    diagrams.fit(ax, S, added, recalled, error, corrected, diagrams.Bounds(0, -3.4, 13, 4.6))
    return fig
