"""The figures of the Foundations chapters (and the errata appendix), drawn from ``attnlab``.

Each figure is registered with ``@figure`` (``hooks/figure_registry.py``) and drawn
by the figures hook (``hooks/figures.py``); ``diagram=True`` marks a conceptual diagram
in the role colours of ``hooks/diagrams.py``.
"""

from __future__ import annotations

import functools
import math

import diagrams
import torch
from figure_kit import (
    SMALL_CELL,
    journey_self_attention,
    matrix_style,
    projection_rows,
    seeded,
    side_by_side,
)
from figure_registry import figure
from matplotlib.figure import Figure

import attnlab
from attnlab import examples, plot


@figure("embedding")
def embedding() -> Figure:
    """The 6 x 16 embedding of "Life is short, eat dessert first" (seed 123)."""
    sentence = examples.life_is_short()
    return plot.plot_attention(
        sentence.inputs,
        sentence.words,
        [str(i + 1) for i in range(sentence.inputs.shape[1])],
        annotate=False,
        xlabel="embedding dimension",
        ylabel="token",
        title="nn.Embedding(6, 16), seed 123",
    )


@figure("journey-weights")
def journey_weights() -> Figure:
    """Weights of "Your journey starts with one step": softmax of the raw dot products."""
    words, inputs = examples.your_journey()
    attn_weights = attnlab.softmax(attnlab.attention_scores(inputs, inputs))  # (6, 6)
    return plot.plot_attention(attn_weights, words, words, title="softmax(inputs @ inputsᵀ)")


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
    fig, (left, right) = side_by_side(10.0, 4.0)
    plot.plot_attention(w2, words, words, ax=left, title="SelfAttentionV2, seed 789")
    plot.plot_attention(w1, words, words, ax=right, title="SelfAttentionV1.from_v2(v2)")
    return fig


@figure("rnn-vs-attention", diagram=True)
def rnn_vs_attention() -> Figure:
    """A recurrent encoder hands on only its last state; attention weighs every state.

    The states come from a seeded ``nn.RNN(3, 3)`` run over "Your journey starts with one
    step"; the attention weights are the softmax of each state's dot product with the last.
    """

    def build() -> Figure:
        words, inputs = examples.your_journey()
        rnn = torch.nn.RNN(3, 3)
        with torch.no_grad():
            states, _ = rnn(inputs)  # (T, 3): one state per word
        attn_weights = attnlab.softmax(states @ states[-1])  # (T,)
        context_vec = attn_weights @ states  # (3,)
        fig, ax = diagrams.canvas(8.0, 6.0)
        spacing = 2.0
        for top, title in (
            (6.0, "recurrent encoder: the decoder sees one vector"),
            (0.0, "attention: the decoder looks at every state"),
        ):
            for t, word in enumerate(words):
                x = t * spacing
                diagrams.matrix(
                    ax,
                    states[t].unsqueeze(-1),
                    (x, top),
                    decimals=2,
                    cell=SMALL_CELL,
                    fontsize="small",
                )
                diagrams.label(ax, (x + 0.7, top - 0.35), word, fontsize="medium")
                if t > 0:
                    diagrams.arrow(ax, (x - 0.6, top + 1.05), (x, top + 1.05))
            diagrams.label(ax, (0, top + 2.7), title, ha="left")
        last = (5 * spacing + 1.4, 7.05)
        diagrams.arrow(ax, last, (14.0, 7.05), "only h₆")
        diagrams.matrix(
            ax,
            states[-1].unsqueeze(-1),
            (14.0, 6.0),
            role="output",
            decimals=2,
            cell=SMALL_CELL,
            fontsize="small",
            title="decoder",
        )
        row = diagrams.matrix(
            ax,
            attn_weights.unsqueeze(0),
            (0, -1.6),
            role="weights",
            decimals=2,
            cell=(spacing, 0.7),
            fontsize="small",
        )
        diagrams.label(ax, (row.right + 0.2, -1.25), "weights", ha="left")
        for t in range(6):
            diagrams.arrow(ax, (t * spacing + 0.7, -0.7), (t * spacing + 0.7, -0.9))
        diagrams.arrow(ax, (row.right, -1.25), (14.0, 1.05), "Σ weight · state", rad=0.2)
        out = diagrams.matrix(
            ax,
            context_vec.unsqueeze(-1),
            (14.0, 0.0),
            role="output",
            decimals=2,
            cell=SMALL_CELL,
            fontsize="small",
            title="decoder",
        )
        diagrams.fit(ax, diagrams.Bounds(-0.2, -1.8, out.right + 0.4, 9.2))
        return fig

    return seeded(123, build)


@figure("tokens-to-vectors", diagram=True)
def tokens_to_vectors() -> Figure:
    """Words → ids (sorted vocabulary) → rows of the seeded embedding (first 5 of 16 dims)."""
    sentence = examples.life_is_short()
    shown = 5
    fig, ax = diagrams.canvas(8.0, 4.2)
    T = len(sentence.words)
    ids = diagrams.matrix(
        ax,
        sentence.token_ids.unsqueeze(-1).float(),
        (3.2, 0),
        row_labels=list(sentence.words),
        title="token id",
    )
    rows = diagrams.matrix(
        ax,
        sentence.inputs[:, :shown],
        (7.0, 0),
        decimals=2,
        cell=(1.5, 1.0),
        fontsize="small",
        title=f"embedding row (first {shown} of {sentence.inputs.shape[1]})",
    )
    for i in range(T):
        y = T - 1 - i + 0.5
        diagrams.arrow(ax, (ids.right, y), (rows.left, y))
    diagrams.label(ax, ((ids.right + rows.left) / 2, T + 0.2), "look up", fontsize="small")
    diagrams.label(ax, (rows.right + 0.3, T / 2), "…", ha="left")
    diagrams.fit(ax, diagrams.Bounds(0.0, 0.0, rows.right + 0.8, T + 1.0))
    return fig


@figure("attention-flow", diagram=True)
def attention_flow() -> Figure:
    """The journey token's query · every input → scores → softmax → weighted sum of inputs."""
    words, inputs = examples.your_journey()
    query = inputs[1]  # (3,) "journey"
    attn_scores = inputs @ query  # (T,)
    attn_weights = attnlab.softmax(attn_scores)  # (T,)
    context_vec = attn_weights @ inputs  # (3,)
    fig, ax = diagrams.canvas(8.0, 4.0)
    T = len(words)
    grid = matrix_style((1.3, 1.0))
    x_in = grid(ax, inputs, (0, 0), role="keys", row_labels=list(words), title="inputs xᵢ")
    q = grid(ax, query.unsqueeze(0), (0, T + 1.6), role="queries", title="query x⁽²⁾ (journey)")
    s = grid(ax, attn_scores.unsqueeze(-1), (6.0, 0), role="weights", title="scores")
    w = grid(ax, attn_weights.unsqueeze(-1), (9.6, 0), role="weights", title="weights")
    z = grid(ax, context_vec.unsqueeze(0), (13.0, 4.0), role="output", title="context z⁽²⁾")
    diagrams.arrow(ax, x_in.right_mid, s.left_mid, "xᵢ · x⁽²⁾")
    diagrams.arrow(ax, q.right_mid, (s.left + 0.6, s.top + 0.9), rad=-0.2)
    diagrams.arrow(ax, s.right_mid, w.left_mid, "softmax")
    diagrams.arrow(ax, w.right_mid, z.bottom_mid, rad=0.3)
    diagrams.label(ax, (15.0, 2.2), "Σ wᵢ xᵢ", fontsize="medium")
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
    fig, ax = diagrams.canvas(8.0, 3.2)
    cell = (1.3, 0.9)
    rows = []
    for y, divisor, name in ((2.2, 1.0, "scores"), (0.0, 8.0, "scores / √64")):
        s = diagrams.matrix(
            ax,
            attn_scores / divisor,
            (2.6, y),
            role="weights",
            decimals=1,
            cell=cell,
            fontsize="small",
        )
        diagrams.label(ax, (2.4, y + 0.45), name, ha="right", fontsize="medium")
        w = diagrams.matrix(
            ax,
            attnlab.softmax(attn_scores / divisor),
            (11.4, y),
            role="weights",
            decimals=2,
            cell=cell,
            fontsize="small",
        )
        diagrams.arrow(ax, s.right_mid, w.left_mid, "softmax", offset=0.05)
        rows += [s, w]
    diagrams.fit(ax, *rows, diagrams.Bounds(-2.6, 0, 18.0, 3.1), margin=0.2)
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
    fig, ax = diagrams.canvas(8.0, 7.0)
    cell = (1.3, 0.7)
    x = diagrams.matrix(
        ax,
        inputs,
        (2.5, 5.5),
        decimals=2,
        cell=cell,
        fontsize="small",
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
            fontsize="small",
        )
        m = diagrams.matrix(
            ax,
            tensor,
            (left, -1.8),
            role=role,
            decimals=2,
            cell=cell,
            fontsize="small",
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
        fontsize="small",
        title="context (6, 2)",
    )
    diagrams.arrow(ax, att.right_mid, (out.left, out.top - 0.4), rad=-0.3)
    diagrams.fit(ax, *bounds, att, out, margin=0.6)
    return fig
