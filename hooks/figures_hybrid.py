"""The figure of "Why hybrids keep some full attention": recall against the number of pairs.

Registered with ``@figure`` (``hooks/figure_registry.py``) and drawn by the figures hook
from the recorded run (``python -m attnlab.bench --hybrid_recall``).
"""

from __future__ import annotations

from figure_registry import figure
from matplotlib.figure import Figure

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
        ax.plot(pairs, row["accuracy"], linestyle=linestyle, marker=marker, label=label)
    state = results["config"]["head_dim"]
    ax.axvline(state, color="grey", linewidth=1.0)
    ax.text(state * 1.05, 0.5, f"$D_k$ = {state}", fontsize="large", va="center")
    ax.axhline(1 / results["config"]["num_values"], color="grey", linewidth=1.0, linestyle=":")
    ax.set_xscale("log", base=2)
    ax.set_xticks(pairs, [str(p) for p in pairs])
    ax.set_ylim(0.0, 1.05)
    ax.set_xlabel("pairs stored", fontsize="large")
    ax.set_ylabel("recall accuracy", fontsize="large")
    ax.tick_params(labelsize="large")
    ax.legend(loc="lower left", fontsize="large")
    return fig
