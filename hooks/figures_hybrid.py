"""The figures of "Why hybrids keep some full attention": a state against a cache, recall.

Registered with ``@figure`` (``hooks/figure_registry.py``) and drawn by the figures hook;
the recall curve from the recorded run (``python -m attnlab.bench --hybrid_recall``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

import attnlab
from hooks import diagrams
from hooks.figure_kit import matrix_style
from hooks.figure_registry import figure

#: How each stack is drawn, and its legend label.
STYLES = {
    "softmax": ("-", "o", "softmax"),
    "gated_deltanet": ("--", "s", "Gated DeltaNet"),
    "hybrid": ("-.", "D", "3:1 hybrid"),
}


@figure("hybrid-recall")
def hybrid_recall() -> Figure:
    """Held-out recall accuracy of the three stacks against the number of stored pairs."""
    from attnlab.bench import load_results

    results = load_results("hybrid_recall")
    pairs = results["pairs"]
    fig = Figure(figsize=(5.0, 3.8), layout="constrained")
    ax = fig.add_subplot()
    for row in results["rows"]:
        linestyle, marker, label = STYLES[row["model"]]
        hollow = row["model"] == "softmax"  # drawn around the hybrid's points, which it meets
        ax.plot(
            pairs,
            row["accuracy"],
            linestyle=linestyle,
            marker=marker,
            label=label,
            markersize=11 if hollow else 6,
            markerfacecolor="none" if hollow else None,
            linewidth=2.0,
        )
    state = results["config"]["head_dim"]
    ax.axvline(state, color="grey", linewidth=1.0)
    ax.text(state * 1.05, 0.5, f"$D_k$ = {state}", fontsize="large", va="center")
    chance = 1 / results["config"]["num_values"]
    ax.axhline(chance, color="grey", linewidth=1.0, linestyle=":")
    ax.text(pairs[-1], chance + 0.02, "chance", fontsize="large", ha="right", va="bottom")
    ax.set_xscale("log", base=2)
    ax.set_xticks(pairs, [str(p) for p in pairs])
    ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("pairs stored", fontsize="large")
    ax.set_ylabel("recall accuracy", fontsize="large")
    ax.tick_params(labelsize="large")
    ax.legend(loc="center left", fontsize="large")
    return fig


def _six_pairs() -> dict[str, torch.Tensor]:
    """Six pairs (unit keys of width 4, values of width 2) and the delta-rule state."""
    generator = torch.Generator().manual_seed(1)
    keys = F.normalize(torch.randn(1, 1, 6, 4, generator=generator), dim=-1)
    values = torch.randn(1, 1, 6, 2, generator=generator).round(decimals=1)
    zeros, ones = torch.zeros(1, 1, 6), torch.ones(1, 1, 6)  # no decay, beta = 1
    _, state = attnlab.gated_delta_rule(keys, keys, values, zeros, ones, output_final_state=True)
    assert state is not None
    return {"keys": keys[0, 0], "values": values[0, 0], "state": state[0, 0]}


@figure("state-versus-cache", diagram=True)
def state_versus_cache() -> Figure:
    """Six pairs kept by a KV cache (a row each) and written into a 4 x 2 delta-rule state.

    Reading pair ``a`` back: the cache returns its value exactly; the state returns
    ``S^T k_a``, blurred by the five later pairs that share its four dimensions.
    """
    six = _six_pairs()
    fig, ax = diagrams.canvas(6.4, 5.6)
    names = list("abcdef")
    grid = matrix_style((1.0, 0.8), decimals=1, fontsize="medium")
    keys = grid(ax, six["keys"], (0, 0), role="keys", title="keys", row_labels=names)
    values = grid(ax, six["values"], (4.4, 0), role="values", title="values")
    state = grid(ax, six["state"], (9.0, 1.6), role="weights", title="state S")
    diagrams.arrow(ax, (values.right, 2.4), state.left_mid, "write all six")
    read_cache = grid(ax, six["values"][:1], (4.4, -2.2), role="output", title="cache: a")
    read_state = grid(
        ax, (six["keys"][:1] @ six["state"]), (9.0, -2.2), role="output", title="state: Sᵀk_a"
    )
    diagrams.label(ax, (2.0, -1.8), "read a", fontsize="large")
    diagrams.label(ax, (2.6, 5.9), "KV cache: a row per pair", fontsize="large")
    diagrams.label(ax, (10.0, 5.9), "fixed 4 × 2", fontsize="large")
    diagrams.fit(ax, keys, values, state, read_cache, read_state, margin=0.8)
    return fig
