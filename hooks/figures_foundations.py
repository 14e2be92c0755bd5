"""The figures of the Foundations chapters (and the errata appendix), drawn from ``attnlab``.

Each figure is registered with ``@figure`` (``hooks/figure_registry.py``) and drawn
by the figures hook (``hooks/figures.py``); ``diagram=True`` marks a conceptual diagram
in the role colours of ``hooks/diagrams.py``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import torch
from matplotlib.figure import Figure

import attnlab
from attnlab import examples, plot
from hooks import diagrams
from hooks.figure_kit import (
    journey_self_attention,
    matrix_style,
    projection_rows,
    seeded,
    side_by_side,
)
from hooks.figure_registry import figure


@figure("journey-weights")
def journey_weights() -> Figure:
    """Weights of "Your journey starts with one step": softmax of the raw dot products."""
    words, inputs = examples.your_journey()
    attn_weights = attnlab.softmax(attnlab.attention_scores(inputs, inputs))  # (6, 6)
    return plot.plot_attention(
        attn_weights, words, words, title="softmax(inputs @ inputsᵀ)", xlabel="input j"
    )


@figure("dream-big-weights")
def dream_big_weights() -> Figure:
    """Trainable weights, ``d_out = 2``, seed 123, on "Dream big and work for it"."""

    def build() -> Figure:
        words, inputs = examples.dream_big()
        module = attnlab.SelfAttentionV1(3, 2)
        with torch.no_grad():
            queries = inputs @ module.W_query  # (6, 2)
            keys = inputs @ module.W_key  # (6, 2)
            attn_weights = attnlab.attention_weights(queries, keys)  # (6, 6), scale 1/sqrt(2)
        return plot.plot_attention(
            attn_weights, words, words, title="W_query, W_key ~ torch.rand(3, 2), seed 123"
        )

    return seeded(123, build)


def paired_bars(
    labels: Sequence[str],
    rows: dict[str, torch.Tensor],
    *,
    ylabel: str,
    title: str | None = None,
    width: float = 5.2,
) -> Figure:
    """Bars of a few rows of numbers over the same labels, each bar's value written on it.

    Sized for a phone (about 5 inches wide, large type): one group of bars per label,
    one bar per row, the rows in the queries, keys and weights colours.
    """
    fig = Figure(figsize=(width, 3.4), layout="constrained")
    ax = fig.add_subplot()
    bar = 0.8 / len(rows)
    colours = [diagrams.ROLE_COLOURS[r] for r in ("keys", "weights", "queries")]
    for k, (name, values) in enumerate(rows.items()):
        xs = [i + (k - (len(rows) - 1) / 2) * bar for i in range(len(labels))]
        ax.bar(xs, values.tolist(), width=bar, color=colours[k], label=name)
        for x, v in zip(xs, values.tolist(), strict=True):
            ax.text(
                x,
                v,
                f"{v:.2f}".lstrip("0"),
                ha="center",
                va="bottom",
                fontsize=8.5,
                rotation=90 if len(rows) > 1 else 0,
            )
    ax.set_xticks(range(len(labels)), labels, fontsize=11)
    ax.set_ylabel(ylabel, fontsize=11)
    ax.set_ylim(0, max(float(v.max()) for v in rows.values()) * 1.3)
    ax.legend(frameon=False, fontsize=10, loc="upper right", ncols=len(rows))
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    if title is not None:
        ax.set_title(title, fontsize=12)
    return fig


SCALING_SCORES = [0.1, -0.2, 0.3, -0.2, 0.5]


@figure("softmax-scaling")
def softmax_scaling() -> Figure:
    """Softmax of five scores, as they are and multiplied by 8."""
    scores = torch.tensor(SCALING_SCORES)
    return plot.plot_softmax_scaling(
        scores, [1, 8], [f"{s:g}" for s in SCALING_SCORES], title="softmax(scores × factor)"
    )


@functools.cache
def _dot_variances() -> tuple[list[int], list[float], list[float]]:
    """Variance of ``q · k`` and ``q · k / sqrt(d)``: the scaling chapter's seeded draws."""
    dims = [1, 4, 5, 16, 64, 100, 256]
    unscaled, scaled = [], []
    for d in dims:
        q, k = examples.random_query_key_pairs(d)  # (10_000, d) each, seed 123
        dots = (q * k).sum(dim=-1)  # (10_000,)
        unscaled.append(float(dots.var()))
        scaled.append(float((dots / math.sqrt(d)).var()))
    return dims, unscaled, scaled


@figure("variance-vs-dim")
def variance_vs_dim() -> Figure:
    """Variance of ``q · k`` for standard-normal vectors against ``d``, before and after scaling."""
    return plot.plot_variance_vs_dim(*_dot_variances(), title="variance of a dot product")


def _illustrated_scores() -> tuple[tuple[str, ...], torch.Tensor]:
    ex = examples.illustrated()
    queries = ex.inputs @ ex.W_query  # (3, 3)
    keys = ex.inputs @ ex.W_key  # (3, 3)
    return ex.words, attnlab.attention_scores(queries, keys)  # (3, 3)


@figure("illustrated-weights")
def illustrated_weights() -> Figure:
    """The illustrated walkthrough's exact (row-wise, unscaled) softmax weights."""
    words, attn_scores = _illustrated_scores()
    return plot.plot_attention(
        attnlab.softmax(attn_scores), words, words, decimals=3, title="softmax(scores), per row"
    )


@figure("softmax-errata")
def softmax_errata() -> Figure:
    """Softmax over the whole score matrix (the tutorial's bug) next to the row-wise one."""
    words, attn_scores = _illustrated_scores()
    whole = attn_scores.exp() / attn_scores.exp().sum()  # one distribution over all 9 cells
    fig, (left, right) = side_by_side(8.0, 3.2)
    plot.plot_attention(
        whole, words, words, ax=left, decimals=3, title="whole matrix: all 9 sum to 1"
    )
    plot.plot_attention(
        attnlab.softmax(attn_scores), words, words, ax=right, decimals=3,
        title="row-wise: each row sums to 1",
    )  # fmt: skip
    return fig


@figure("v1-vs-v2")
def v1_vs_v2() -> Figure:
    """``SelfAttentionV2`` (seed 789) and the ``SelfAttentionV1`` built from its weights."""
    words, inputs = examples.your_journey()
    v2 = journey_self_attention()
    v1 = attnlab.SelfAttentionV1.from_v2(v2)
    with torch.no_grad():
        w2 = attnlab.attention_weights(v2.W_query(inputs), v2.W_key(inputs))  # (6, 6)
        w1 = attnlab.attention_weights(inputs @ v1.W_query, inputs @ v1.W_key)  # (6, 6)
    fig = Figure(figsize=(5.2, 7.6), layout="constrained")  # stacked: legible on a phone
    top, bottom = fig.subplots(2, 1)
    plot.plot_attention(w2, words, words, ax=top, title="SelfAttentionV2, seed 789")
    plot.plot_attention(w1, words, words, ax=bottom, title="SelfAttentionV1.from_v2(v2)")
    return fig


@figure("attention-flow", diagram=True)
def attention_flow() -> Figure:
    """The journey token's query · every input → scores → softmax → weighted sum of inputs."""
    words, inputs = examples.your_journey()
    query = inputs[1]  # (3,) "journey"
    attn_scores = inputs @ query  # (T,)
    attn_weights = attnlab.softmax(attn_scores)  # (T,)
    context_vec = attn_weights @ inputs  # (3,)
    fig, ax = diagrams.canvas(6.0, 3.7)
    T = len(words)
    grid = matrix_style((1.3, 1.0))
    x_in = grid(ax, inputs, (0, 0), role="keys", row_labels=list(words), title="inputs xⱼ")
    q = grid(ax, query.unsqueeze(0), (0, T + 1.6), role="queries", title="query x⁽²⁾ (journey)")
    s = grid(ax, attn_scores.unsqueeze(-1), (6.0, 0), role="weights", title="scores")
    w = grid(ax, attn_weights.unsqueeze(-1), (9.6, 0), role="weights", title="weights")
    z = grid(ax, context_vec.unsqueeze(0), (13.0, 4.0), role="output", title="context z⁽²⁾")
    diagrams.arrow(ax, x_in.right_mid, s.left_mid, "xⱼ · x⁽²⁾")
    diagrams.arrow(ax, q.right_mid, (s.left + 0.6, s.top + 0.9), rad=-0.2)
    diagrams.arrow(ax, s.right_mid, w.left_mid, "softmax")
    diagrams.arrow(ax, w.right_mid, z.bottom_mid, rad=0.3)
    diagrams.label(ax, (15.0, 2.2), "Σ α₂ⱼ xⱼ", fontsize="medium")
    diagrams.fit(ax, x_in, q, s, w, z, diagrams.Bounds(-2.0, 0, 17.0, T + 3.4))
    return fig


@figure("illustrated-projections", diagram=True)
def illustrated_projections() -> Figure:
    """The three projections of the integer walkthrough, with its numbers: x @ W = Q, K, V."""
    ex = examples.illustrated()
    fig, ax = diagrams.canvas(7.0, 8.0)
    bounds = projection_rows(
        ax,
        ex.inputs,
        {"W_query": ex.W_query, "W_key": ex.W_key, "W_value": ex.W_value},
        decimals=0,
        cell=(0.9, 0.9),
    )
    diagrams.fit(ax, *bounds, margin=0.9)
    return fig


@figure("illustrated-attention", diagram=True)
def illustrated_attention() -> Figure:
    """Input 1's row of the walkthrough: q₁ · keys → scores → softmax → weighted sum of values."""
    ex = examples.illustrated()
    queries, keys, values = ex.inputs @ ex.W_query, ex.inputs @ ex.W_key, ex.inputs @ ex.W_value
    attn_scores = queries[0] @ keys.T  # (3,)
    attn_weights = attnlab.softmax(attn_scores)  # (3,)
    weighted = attn_weights.unsqueeze(-1) * values  # (3, 3): each value row times its weight
    fig, ax = diagrams.canvas(8.0, 4.0)
    cell = (1.2, 0.9)
    q = diagrams.matrix(
        ax, queries[0].unsqueeze(0), (0, 3.6), role="queries", cell=cell, title="q₁"
    )
    k = diagrams.matrix(
        ax, keys, (0, 0), role="keys", cell=cell, title="keys", row_labels=["k₁", "k₂", "k₃"]
    )
    s = diagrams.matrix(
        ax, attn_scores.unsqueeze(-1), (5.0, 0), role="weights", cell=cell, title="scores"
    )
    w = diagrams.matrix(
        ax,
        attn_weights.unsqueeze(-1),
        (8.2, 0),
        role="weights",
        decimals=3,
        cell=(1.6, 0.9),
        fontsize="small",
        title="softmax",
    )
    v = diagrams.matrix(
        ax,
        weighted,
        (11.8, 0),
        role="values",
        decimals=2,
        cell=cell,
        fontsize="small",
        title="weight × value",
    )
    out = diagrams.matrix(
        ax,
        weighted.sum(0).unsqueeze(0),
        (17.0, 1.0),
        role="output",
        decimals=2,
        cell=cell,
        fontsize="small",
        title="output 1 = Σ",
    )
    diagrams.arrow(ax, k.right_mid, s.left_mid, "q₁ · kⱼ")
    diagrams.arrow(ax, q.right_mid, (s.left + 0.6, s.top + 0.5), rad=-0.2)
    diagrams.arrow(ax, s.right_mid, w.left_mid)
    diagrams.arrow(ax, w.right_mid, v.left_mid)
    diagrams.arrow(ax, v.right_mid, out.left_mid, "sum")
    diagrams.fit(ax, q, k, s, w, v, out, margin=0.8)
    return fig


@figure("trainable-projections", diagram=True)
def trainable_projections() -> Figure:
    """``SelfAttentionV1(3, 2)`` (seed 123) on "Dream big…": x @ W = queries, keys, values."""

    def build() -> Figure:
        _, inputs = examples.dream_big()
        module = attnlab.SelfAttentionV1(3, 2)
        fig, ax = diagrams.canvas(7.0, 9.0)
        with torch.no_grad():
            bounds = projection_rows(
                ax,
                inputs,
                {"W_query": module.W_query, "W_key": module.W_key, "W_value": module.W_value},
                decimals=2,
                cell=(1.2, 0.8),
            )
        diagrams.fit(ax, *bounds, margin=0.9)
        return fig

    return seeded(123, build)


@figure("scaling-flow", diagram=True)
def scaling_flow() -> Figure:
    """The same scores through softmax, as they are and divided by √d_k (d_k = 64)."""
    attn_scores = 8 * torch.tensor(SCALING_SCORES)  # (5,) scores of the size d_k = 64 gives
    fig, ax = diagrams.canvas(5.0, 3.0)
    grid = matrix_style((1.3, 0.8), decimals=2, fontsize="medium")
    drawn = []
    for left, divisor, name in ((0.0, 1.0, "scores"), (7.4, 8.0, "scores / √64")):
        s = grid(ax, (attn_scores / divisor).unsqueeze(-1), (left, 0), role="weights",
                 decimals=1, title=name)  # fmt: skip
        w = grid(ax, attnlab.softmax(attn_scores / divisor).unsqueeze(-1), (left + 3.6, 0),
                 role="weights", title="weights")  # fmt: skip
        diagrams.arrow(ax, s.right_mid, w.left_mid)
        diagrams.label(ax, ((s.right + w.left) / 2, s.right_mid[1] + 0.45), "softmax",
                       fontsize="small")  # fmt: skip
        drawn += [s, w]
    diagrams.fit(ax, *drawn, diagrams.Bounds(-0.6, 0, 12.9, 5.2), margin=0.2)
    return fig


@figure("compact-module-diagram", diagram=True)
def compact_module_diagram() -> Figure:
    """``SelfAttentionV2(3, 2)`` (seed 789): x → three Linear layers → attend → context."""
    words, inputs = examples.your_journey()
    module = journey_self_attention()
    with torch.no_grad():
        projected = {
            "queries": module.W_query(inputs),  # (6, 2)
            "keys": module.W_key(inputs),  # (6, 2)
            "values": module.W_value(inputs),  # (6, 2)
        }
        context_vecs = module(inputs)  # (6, 2)
    fig, ax = diagrams.canvas(5.4, 6.2)
    cell = (1.3, 0.7)
    x = diagrams.matrix(
        ax,
        inputs,
        (2.5, 5.5),
        decimals=2,
        cell=cell,
        fontsize="medium",
        title="x (6, 3)",
        row_labels=list(words),
    )
    bounds = [x]
    names = {"queries": "W_query", "keys": "W_key", "values": "W_value"}
    for k, (role, tensor) in enumerate(projected.items()):
        left = k * 4.4
        op = diagrams.operator(
            ax,
            (left + 1.3, 4.1),
            f"{names[role]}\nLinear(3, 2)",
            role=role,
            size=(3.4, 1.2),
            fontsize="medium",
        )
        m = diagrams.matrix(
            ax,
            tensor,
            (left, -1.8),
            role=role,
            decimals=2,
            cell=cell,
            fontsize="medium",
            title=f"{role} (6, 2)",
        )
        diagrams.arrow(ax, x.bottom_mid, op.top_mid)
        diagrams.arrow(ax, op.bottom_mid, (m.left + 1.3, m.top + 0.6))
        bounds += [op, m]
    att = diagrams.operator(
        ax, (5.0, -3.6), "softmax(Q Kᵀ / √2) V", role="weights", size=(6.0, 0.9)
    )
    for k in range(3):
        diagrams.arrow(ax, (k * 4.4 + 1.3, -1.8), (att.left + 1.0 + 2.0 * k, att.top))
    out = diagrams.matrix(
        ax,
        context_vecs,
        (10.5, -8.8),
        role="output",
        decimals=2,
        cell=cell,
        fontsize="medium",
        title="context (6, 2)",
    )
    diagrams.arrow(ax, att.right_mid, (out.left, out.top - 0.4), rad=-0.3)
    diagrams.fit(ax, *bounds, att, out, margin=0.6)
    return fig


@figure("softmax-vs-sum")
def softmax_vs_sum() -> Figure:
    """Journey's six scores made into weights two ways: divided by their sum, and softmax."""
    words, inputs = examples.your_journey()
    attn_scores_2 = inputs @ inputs[1]  # (6,)
    return paired_bars(
        words,
        {
            "score / sum": attn_scores_2 / attn_scores_2.sum(),
            "softmax": torch.softmax(attn_scores_2, dim=-1),
        },
        ylabel="weight of journey",
        title="two ways to make weights",
    )


@figure("journey-context-terms", diagram=True)
def journey_context_terms() -> Figure:
    """Journey's context vector: each input row times its weight, then the six rows summed."""
    words, inputs = examples.your_journey()
    attn_weights_2 = torch.softmax(inputs @ inputs[1], dim=-1)  # (6,)
    weighted = attn_weights_2.unsqueeze(-1) * inputs  # (6, 3): row j is alpha_2j x_j
    fig, ax = diagrams.canvas(5.4, 4.6)
    cell = (1.25, 0.8)
    grid = matrix_style(cell, fontsize="medium")
    w = grid(ax, attn_weights_2.unsqueeze(-1), (0, 0), role="weights", title="α₂ⱼ",
             row_labels=list(words))  # fmt: skip
    diagrams.label(ax, (w.right + 0.45, 2.4), "×")
    x = grid(ax, inputs, (w.right + 0.9, 0), title="xⱼ")
    diagrams.label(ax, (x.right + 0.45, 2.4), "=")
    terms = grid(ax, weighted, (x.right + 0.9, 0), role="values", title="α₂ⱼ xⱼ")
    z = grid(ax, weighted.sum(dim=0).unsqueeze(0), (terms.left, -2.0), role="output",
             title=None)  # fmt: skip
    diagrams.arrow(ax, terms.bottom_mid, z.top_mid)
    diagrams.label(ax, (terms.left - 0.3, -1.6), "z⁽²⁾ = Σ", ha="right")
    diagrams.fit(ax, w, x, terms, z, diagrams.Bounds(-2.0, -2.0, terms.right, 5.8))
    return fig


@figure("journey-scores")
def journey_scores() -> Figure:
    """All 36 dot products of the running example: ``inputs @ inputs.transpose(-2, -1)``."""
    words, inputs = examples.your_journey()
    return plot.plot_attention(
        inputs @ inputs.transpose(-2, -1),
        words,
        words,
        title="scores: inputs @ inputsᵀ",
        xlabel="input j",
    )


def _journey_head() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries, keys and values of the running example under the seed-123 (3, 3) weights."""
    inputs = examples.your_journey().inputs  # (6, 3)
    W_query, W_key, W_value = examples.seeded_weights(3, 3)  # as the chapter draws them
    return inputs @ W_query, inputs @ W_key, inputs @ W_value  # (6, 3) each


@figure("journey-qkv-row", diagram=True)
def journey_qkv_row() -> Figure:
    """Journey's query · every key → scaled softmax → weighted sum of the values (seed 123)."""
    words = examples.your_journey().words
    queries, keys, values = _journey_head()
    attn_weights_2 = torch.softmax(queries[1] @ keys.T / math.sqrt(3), dim=-1)  # (6,)
    fig, ax = diagrams.canvas(6.0, 5.0)
    cell = (1.25, 0.8)
    grid = matrix_style(cell, fontsize="medium")
    q = grid(ax, queries[1].unsqueeze(0), (0, 7.4), role="queries", title="query q⁽²⁾ (journey)")
    k = grid(ax, keys, (0, 0), role="keys", title="keys", row_labels=list(words))
    w = grid(ax, attn_weights_2.unsqueeze(-1), (k.right + 2.6, 0), role="weights", title="α₂ⱼ")
    v = grid(ax, values, (w.right + 0.9, 0), role="values", title="values")
    diagrams.arrow(ax, k.right_mid, w.left_mid, "softmax")
    diagrams.label(ax, ((k.right + w.left) / 2, k.bottom_mid[1] + 1.6), "q·kⱼ / √3",
                   fontsize="medium")  # fmt: skip
    diagrams.label(ax, (w.right + 0.45, 2.4), "×")
    z = grid(ax, attn_weights_2 @ values, (v.left, 7.4), role="output", title="context z⁽²⁾")
    diagrams.arrow(ax, (v.top_mid[0], v.top + 0.75), z.bottom_mid)
    diagrams.label(ax, (v.top_mid[0] + 0.3, v.top + 1.3), "Σ α₂ⱼ vⱼ", ha="left", fontsize="medium")
    diagrams.arrow(ax, q.bottom_mid, (k.top_mid[0], k.top + 0.75))
    diagrams.fit(ax, q, k, w, v, z, diagrams.Bounds(-2.0, 0, v.right, 9.2))
    return fig


@figure("journey-trainable-weights")
def journey_trainable_weights() -> Figure:
    """The seed-123 head's 6 x 6 weights on the running example: softmax(Q Kᵀ / √3)."""
    words = examples.your_journey().words
    queries, keys, _ = _journey_head()
    attn_weights = torch.softmax(queries @ keys.T / math.sqrt(3), dim=-1)  # (6, 6)
    return plot.plot_attention(attn_weights, words, words, title="softmax(Q Kᵀ / √3), seed 123")


@figure("journey-gradient-step")
def journey_gradient_step() -> Figure:
    """Journey's weights before and after one gradient step on −log α₂₃ (seed 123, lr 1)."""
    inputs = examples.your_journey().inputs  # (6, 3)
    W_query, W_key, _ = (W.requires_grad_() for W in examples.seeded_weights(3, 3))

    def row_2(W_query: torch.Tensor, W_key: torch.Tensor) -> torch.Tensor:
        scores = (inputs @ W_query) @ (inputs @ W_key).transpose(-2, -1)  # (6, 6)
        return torch.softmax(scores / math.sqrt(3), dim=-1)[1]  # (6,)

    before = row_2(W_query, W_key)
    grad_q, grad_k = torch.autograd.grad(-before[2].log(), (W_query, W_key))
    with torch.no_grad():
        after = row_2(W_query - grad_q, W_key - grad_k)  # one step, learning rate 1
    return paired_bars(
        examples.your_journey().words,
        {"before": before.detach(), "after one step": after},
        ylabel="weight of journey",
        title="loss −log α₂₃: journey → starts",
    )


@figure("journey-batch", diagram=True)
def journey_batch() -> Figure:
    """The sentence and its reversal, one batch, through ``SelfAttentionV2(3, 2)`` (seed 789)."""
    inputs = examples.your_journey().inputs  # (6, 3)
    batch = torch.stack([inputs, inputs.flip(0)])  # (2, 6, 3): the words in reverse order
    module = journey_self_attention()
    with torch.no_grad():
        context_vecs = module(batch)  # (2, 6, 2)
    fig, ax = diagrams.canvas(5.0, 6.0)
    cell = (1.2, 0.75)
    grid = matrix_style(cell, fontsize="medium")
    bounds = []
    for b in range(2):
        x = grid(ax, batch[b], (b * 4.6, 7.0), title=f"batch[{b}] (6, 3)")
        out = grid(ax, context_vecs[b], (b * 4.6 + 0.3, -1.0), role="output", decimals=3,
                   cell=(1.5, 0.75))  # fmt: skip
        diagrams.label(ax, (out.left + 1.5, out.bottom - 0.5), f"out[{b}] (6, 2)", va="top")
        diagrams.arrow(ax, x.bottom_mid, (x.bottom_mid[0], 5.2))
        diagrams.arrow(ax, (x.bottom_mid[0], 4.0), out.top_mid)
        bounds += [x, out]
    op = diagrams.operator(ax, (4.1, 4.6), "SelfAttentionV2(3, 2): (2, 6, 3) → (2, 6, 2)",
                           role="weights", size=(8.4, 1.1))  # fmt: skip
    diagrams.fit(ax, *bounds, op, diagrams.Bounds(0, -2.4, 8.2, 12.5))
    return fig
