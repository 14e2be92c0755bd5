"""MkDocs hook: every figure on the site is drawn from the package at build time.

``FIGURES`` maps a figure name to a function that builds a matplotlib figure from
``attnlab`` (its examples, functions, modules and ``attnlab.plot``). Each figure is
rendered twice to SVG, once per colour scheme, with text drawn as paths (no font
needed) on a transparent background:

* ``figures/<name>-light.svg``: matplotlib's default style (dark text);
* ``figures/<name>-dark.svg``: the ``dark_background`` style (light text).

Authors write one image, on a line of its own, with an optional caption as its title::

    ![Alt text for screen readers](../figures/journey-weights.svg "One-line caption")

and the hook rewrites it to the pair that Material shows per scheme (``#only-light``
and ``#only-dark``), wrapped in ``<figure>`` with the caption. A name missing from
``FIGURES`` fails the build with the page and the name.

Renders are memoised in memory and on disk, keyed by the sources they are drawn from
(``build_cache``), so a build after a docs edit draws nothing.
"""

from __future__ import annotations

import functools
import io
import math
import posixpath
import re
from collections.abc import Callable
from typing import Any

import matplotlib as mpl
import matplotlib.style
import torch
from build_cache import cached_text, evict_stale, source_key
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.typing import RcKeyType
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

import attnlab
import attnlab.recall
from attnlab import diagrams, examples, plot

FigureBuilder = Callable[[], Figure]
SCHEMES = {"light": "default", "dark": "dark_background"}
SVG_RC: dict[RcKeyType, Any] = {"svg.fonttype": "path", "svg.hashsalt": "attnlab", "font.size": 10}

# `![alt](<../>*figures/<name>.svg "optional caption")` alone on a line.
FIGURE_REF = re.compile(
    r'^(?P<indent>[ \t]*)!\[(?P<alt>[^\]]*)\]\((?P<prefix>(?:\.\./)*)figures/(?P<name>[^)\s"]+)'
    r'\.svg(?:\s+"(?P<caption>[^"]*)")?\)[ \t]*$',
    re.MULTILINE,
)


# --- the figures -----------------------------------------------------------------------


def _seeded(seed: int, build: Callable[[], Figure]) -> Figure:
    """Run ``build`` after ``torch.manual_seed(seed)``, leaving the global RNG as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def _side_by_side(width: float, height: float) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, list(fig.subplots(1, 2))


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


def journey_weights() -> Figure:
    """Weights of "Your journey starts with one step": softmax of the raw dot products."""
    words, inputs = examples.your_journey()
    attn_weights = attnlab.softmax(attnlab.attention_scores(inputs, inputs))  # (6, 6)
    return plot.plot_attention(attn_weights, words, words, title="softmax(inputs @ inputsᵀ)")


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

    return _seeded(123, build)


SCALING_SCORES = [0.1, -0.2, 0.3, -0.2, 0.5]


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


def variance_vs_dim() -> Figure:
    """Variance of ``q · k`` for standard-normal vectors against ``d``, before and after scaling."""
    return plot.plot_variance_vs_dim(*_dot_variances(), title="variance of a dot product")


def _illustrated_scores() -> tuple[tuple[str, ...], torch.Tensor]:
    ex = examples.illustrated()
    queries = ex.inputs @ ex.W_query  # (3, 3)
    keys = ex.inputs @ ex.W_key  # (3, 3)
    return ex.words, attnlab.attention_scores(queries, keys)  # (3, 3)


def illustrated_weights() -> Figure:
    """The illustrated walkthrough's exact (row-wise, unscaled) softmax weights."""
    words, attn_scores = _illustrated_scores()
    return plot.plot_attention(
        attnlab.softmax(attn_scores), words, words, decimals=3, title="softmax(scores), per row"
    )


def softmax_errata() -> Figure:
    """Softmax over the whole score matrix (the tutorial's bug) next to the row-wise one."""
    words, attn_scores = _illustrated_scores()
    whole = attn_scores.exp() / attn_scores.exp().sum()  # one distribution over all 9 cells
    fig, (left, right) = _side_by_side(8.0, 3.2)
    plot.plot_attention(
        whole, words, words, ax=left, decimals=3, title="whole matrix: all 9 sum to 1"
    )
    plot.plot_attention(
        attnlab.softmax(attn_scores), words, words, ax=right, decimals=3,
        title="row-wise: each row sums to 1",
    )  # fmt: skip
    return fig


def v1_vs_v2() -> Figure:
    """``SelfAttentionV2`` (seed 789) and the ``SelfAttentionV1`` built from its weights."""

    def build() -> Figure:
        words, inputs = examples.your_journey()
        v2 = attnlab.SelfAttentionV2(3, 2)
        v1 = attnlab.SelfAttentionV1.from_v2(v2)
        with torch.no_grad():
            w2 = attnlab.attention_weights(v2.W_query(inputs), v2.W_key(inputs))  # (6, 6)
            w1 = attnlab.attention_weights(inputs @ v1.W_query, inputs @ v1.W_key)  # (6, 6)
        fig, (left, right) = _side_by_side(10.0, 4.0)
        plot.plot_attention(w2, words, words, ax=left, title="SelfAttentionV2, seed 789")
        plot.plot_attention(w1, words, words, ax=right, title="SelfAttentionV1.from_v2(v2)")
        return fig

    return _seeded(789, build)


def causal_mask() -> Figure:
    """The causal mask of a six-token sentence: query i may attend to keys j <= i."""
    words = examples.your_journey().words
    return plot.plot_mask(attnlab.causal_mask(6), words, title="causal_mask(6)")


def causal_weights() -> Figure:
    """``SelfAttentionV2(3, 2)`` weights (seed 789) on "Your journey…", unmasked and causal."""

    def build() -> Figure:
        words, inputs = examples.your_journey()
        module = attnlab.SelfAttentionV2(3, 2)
        with torch.no_grad():
            queries, keys = module.W_query(inputs), module.W_key(inputs)  # (6, 2) each
            full = attnlab.attention_weights(queries, keys)  # (6, 6)
            causal = attnlab.attention_weights(queries, keys, is_causal=True)  # (6, 6)
        fig, (left, right) = _side_by_side(10.0, 4.0)
        plot.plot_attention(
            full, words, words, ax=left, vmin=0, vmax=1, colorbar=False, title="no mask"
        )
        plot.plot_attention(
            causal, words, words, ax=right, vmin=0, vmax=1, title="causal: keys j <= i only"
        )
        return fig

    return _seeded(789, build)


def multi_head() -> Figure:
    """Per-head weights of the multi-head chapter's three stacked heads (seed 123)."""

    def build() -> Figure:
        sentence = examples.life_is_short()
        inputs = sentence.inputs  # (6, 16)
        torch.rand(24, 16), torch.rand(24, 16), torch.rand(28, 16)  # the single-head draws
        W_query = torch.rand(3, 24, 16)  # (H, d_q, d)
        W_key = torch.rand(3, 24, 16)  # (H, d_k, d)
        queries = inputs @ W_query.transpose(-2, -1)  # (6, 16) @ (3, 16, 24) -> (3, 6, 24)
        keys = inputs @ W_key.transpose(-2, -1)  # (3, 6, 24)
        attn_weights = attnlab.attention_weights(queries, keys)  # (3, 6, 6), scale 1/sqrt(24)
        return plot.plot_heads(attn_weights, sentence.words)

    return _seeded(123, build)


def cross_attention() -> Figure:
    """Cross-attention weights from "Life is short…" to the 8 tokens of ``second_sequence()``.

    The tutorial's weights of the cross-attention chapter: ``W_query`` and ``W_key`` of
    shape ``(24, 16)`` drawn under seed 123, as in its by-hand block.
    """

    def build() -> Figure:
        sentence = examples.life_is_short()
        context = examples.second_sequence()  # (S, d) = (8, 16)
        W_query, W_key = torch.rand(24, 16), torch.rand(24, 16)  # (d_q, d), (d_k, d)
        queries = sentence.inputs @ W_query.transpose(-2, -1)  # (6, 24)
        keys = context @ W_key.transpose(-2, -1)  # (8, 24)
        attn_weights = attnlab.attention_weights(queries, keys)  # (6, 8), scale 1/sqrt(24)
        return plot.plot_attention(
            attn_weights,
            sentence.words,
            [f"c{j + 1}" for j in range(8)],
            xlabel="context token (key)",
            ylabel="query token",
            title="queries from sentence 1, keys from sequence 2",
        )

    return _seeded(123, build)


def _recall_rows(batch: attnlab.recall.RecallBatch) -> list[str]:
    task = attnlab.recall.RecallTask()
    return [
        f"{task.key_name(int(q))}? -> {int(t)}"
        for q, t in zip(batch.query, batch.target, strict=True)
    ]


def recall_model() -> Figure:
    """The trained recall model answering the chapter's first example, as a lookup diagram."""
    from attnlab import recall

    _, trained, _ = recall.trained_recall_model()
    batch = recall.example_batch()
    task, real = trained.task, int(batch.present[0].sum())
    with torch.no_grad():
        logits, attn_weights = trained(batch)
    return plot.plot_retrieval(
        f"{task.key_name(int(batch.query[0]))} ?",
        [task.key_name(int(k)) for k in batch.keys[0, :real]],
        [str(int(v)) for v in batch.values[0, :real]],
        attn_weights[0, :real],
        f"answer {int(logits[0].argmax())}",
        title="trained: " + recall.describe(task, batch),
    )


def recall_loss() -> Figure:
    """Training loss of the chapter's recall model."""
    from attnlab import recall

    _, _, history = recall.trained_recall_model()
    return plot.plot_loss(history.loss, title="associative recall, seed 0")


def recall_attention() -> Figure:
    """Query attention over the slots of six held-out sequences, before and after training."""
    from attnlab import recall

    untrained, trained, _ = recall.trained_recall_model()
    batch = recall.held_out_batch(6)
    rows, slots = _recall_rows(batch), [str(j + 1) for j in range(batch.keys.shape[1])]
    fig, (left, right) = _side_by_side(11.0, 3.6)
    with torch.no_grad():
        for ax, model, title in [(left, untrained, "before training"), (right, trained, "after")]:
            plot.plot_attention(
                model(batch)[1], rows, slots, ax=ax, vmin=0, vmax=1, colorbar=ax is right,
                xlabel="slot (stored pair)", ylabel="question", title=title,
            )  # fmt: skip
    return fig


def recall_scores() -> Figure:
    """Scores between question letters and stored key letters, before and after training."""
    from attnlab import recall

    untrained, trained, _ = recall.trained_recall_model()
    letters = [trained.task.key_name(k) for k in range(trained.task.num_keys)]
    before, after = recall.key_query_scores(untrained), recall.key_query_scores(trained)
    low, high = float(min(before.min(), after.min())), float(max(before.max(), after.max()))
    fig, (left, right) = _side_by_side(11.0, 5.0)
    for ax, scores, title in [(left, before, "before training"), (right, after, "after")]:
        plot.plot_attention(
            scores, letters, letters, ax=ax, annotate=False, vmin=low, vmax=high,
            colorbar=ax is right, xlabel="stored key", ylabel="question", title=title,
        )  # fmt: skip
    return fig


def bench_time() -> Figure:
    """Forward time against T, log-log, from the benchmark's recorded results."""
    from attnlab.bench import load_results, plot_sweep

    figure: Figure = plot_sweep(load_results(), "median_ms")
    return figure


def bench_memory() -> Figure:
    """Peak extra memory against T, log-log, from the benchmark's recorded results."""
    from attnlab.bench import load_results, plot_sweep

    figure: Figure = plot_sweep(load_results(), "peak_mib")
    return figure


def decode_time() -> Figure:
    """Decoding with a KV cache against recomputing the prefix, from the recorded run."""
    from attnlab.bench import load_results, plot_decode

    figure: Figure = plot_decode(load_results("decode"))
    return figure


def window_cost() -> Figure:
    """Sliding-window against causal flash attention, time and memory, from the recorded run."""
    from attnlab.bench import load_results, plot_window

    figure: Figure = plot_window(load_results("window"))
    return figure


# --- conceptual diagrams (attnlab.diagrams: one colour per role on every diagram) -------

_SMALL_CELL = (1.4, 0.7)


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
                    cell=_SMALL_CELL,
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
            cell=_SMALL_CELL,
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
            cell=_SMALL_CELL,
            fontsize="small",
            title="decoder",
        )
        diagrams.fit(ax, diagrams.Bounds(-0.2, -1.8, out.right + 0.4, 9.2))
        return fig

    return _seeded(123, build)


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


def attention_flow() -> Figure:
    """The journey token's query · every input → scores → softmax → weighted sum of inputs."""
    words, inputs = examples.your_journey()
    query = inputs[1]  # (3,) "journey"
    attn_scores = inputs @ query  # (T,)
    attn_weights = attnlab.softmax(attn_scores)  # (T,)
    context_vec = attn_weights @ inputs  # (3,)
    fig, ax = diagrams.canvas(8.0, 4.0)
    T = len(words)
    x_in = diagrams.matrix(
        ax,
        inputs,
        (0, 0),
        role="keys",
        decimals=2,
        cell=(1.3, 1.0),
        fontsize="small",
        row_labels=list(words),
        title="inputs xᵢ",
    )
    q = diagrams.matrix(
        ax,
        query.unsqueeze(0),
        (0, T + 1.6),
        role="queries",
        decimals=2,
        cell=(1.3, 1.0),
        fontsize="small",
        title="query x⁽²⁾ (journey)",
    )
    s = diagrams.matrix(
        ax,
        attn_scores.unsqueeze(-1),
        (6.0, 0),
        role="weights",
        decimals=2,
        cell=(1.3, 1.0),
        fontsize="small",
        title="scores",
    )
    w = diagrams.matrix(
        ax,
        attn_weights.unsqueeze(-1),
        (9.6, 0),
        role="weights",
        decimals=2,
        cell=(1.3, 1.0),
        fontsize="small",
        title="weights",
    )
    z = diagrams.matrix(
        ax,
        context_vec.unsqueeze(0),
        (13.0, 4.0),
        role="output",
        decimals=2,
        cell=(1.3, 1.0),
        fontsize="small",
        title="context z⁽²⁾",
    )
    diagrams.arrow(ax, x_in.right_mid, s.left_mid, "xᵢ · x⁽²⁾")
    diagrams.arrow(ax, q.right_mid, (s.left + 0.6, s.top + 0.9), rad=-0.2)
    diagrams.arrow(ax, s.right_mid, w.left_mid, "softmax")
    diagrams.arrow(ax, w.right_mid, z.bottom_mid, rad=0.3)
    diagrams.label(ax, (15.0, 2.2), "Σ wᵢ xᵢ", fontsize="medium")
    diagrams.fit(ax, x_in, q, s, w, z, diagrams.Bounds(-2.0, 0, 17.0, T + 3.4))
    return fig


def _projection_rows(
    ax: Axes,
    inputs: torch.Tensor,
    weights: dict[str, torch.Tensor],
    *,
    decimals: int,
    cell: tuple[float, float],
) -> list[diagrams.Bounds]:
    """One row per role: inputs @ W = result, stacked downward."""
    T, d_in = inputs.shape
    bounds = []
    y = 0.0
    for role, (name, W) in zip(("queries", "keys", "values"), weights.items(), strict=True):
        height = max(T, d_in) * cell[1]
        x = diagrams.matrix(
            ax,
            inputs,
            (0, y),
            decimals=decimals,
            cell=cell,
            fontsize="small",
            title="x" if y == 0 else None,
        )
        diagrams.label(ax, (x.right + 0.5, y + T * cell[1] / 2), "@")
        w = diagrams.matrix(
            ax,
            W,
            (x.right + 1.0, y),
            role=role,
            decimals=decimals,
            cell=cell,
            fontsize="small",
            title=name,
        )
        diagrams.label(ax, (w.right + 0.5, y + T * cell[1] / 2), "=")
        out = diagrams.matrix(
            ax,
            inputs @ W,
            (w.right + 1.0, y),
            role=role,
            decimals=decimals,
            cell=cell,
            fontsize="small",
            title=role,
        )
        bounds += [x, w, out]
        y -= height + 1.6
    return bounds


def illustrated_projections() -> Figure:
    """The three projections of the integer walkthrough, with its numbers: x @ W = Q, K, V."""
    ex = examples.illustrated()
    fig, ax = diagrams.canvas(7.0, 8.0)
    bounds = _projection_rows(
        ax,
        ex.inputs,
        {"W_query": ex.W_query, "W_key": ex.W_key, "W_value": ex.W_value},
        decimals=0,
        cell=(0.9, 0.9),
    )
    diagrams.fit(ax, *bounds, margin=0.9)
    return fig


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


def trainable_projections() -> Figure:
    """``SelfAttentionV1(3, 2)`` (seed 123) on "Dream big…": x @ W = queries, keys, values."""

    def build() -> Figure:
        _, inputs = examples.dream_big()
        module = attnlab.SelfAttentionV1(3, 2)
        fig, ax = diagrams.canvas(7.0, 9.0)
        with torch.no_grad():
            bounds = _projection_rows(
                ax,
                inputs,
                {"W_query": module.W_query, "W_key": module.W_key, "W_value": module.W_value},
                decimals=2,
                cell=(1.2, 0.8),
            )
        diagrams.fit(ax, *bounds, margin=0.9)
        return fig

    return _seeded(123, build)


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


def compact_module_diagram() -> Figure:
    """``SelfAttentionV2(3, 2)`` (seed 789): x → three Linear layers → attend → context."""

    def build() -> Figure:
        words, inputs = examples.your_journey()
        module = attnlab.SelfAttentionV2(3, 2)
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

    return _seeded(789, build)


def causal_row() -> Figure:
    """Row 3 ("starts") of ``SelfAttentionV2(3, 2)`` (seed 789): mask, −∞, renormalised softmax."""

    def build() -> Figure:
        words, inputs = examples.your_journey()
        module = attnlab.SelfAttentionV2(3, 2)
        with torch.no_grad():
            attn_scores = attnlab.attention_scores(module.W_query(inputs), module.W_key(inputs))
        row = 2
        scores = attn_scores[row] / math.sqrt(2)  # (6,) scaled scores of "starts"
        allowed = attnlab.causal_mask(6)[row]  # (6,) True = may attend
        masked = scores.masked_fill(~allowed, float("-inf"))
        fig, ax = diagrams.canvas(8.0, 4.6)
        cell = (1.7, 0.8)
        steps = [
            ("scores / √2", scores, None, 2, "weights"),
            ("causal mask", allowed.float(), None, 0, "input"),
            ("masked", masked, ~allowed, 2, "weights"),
            ("softmax", attnlab.softmax(masked), ~allowed, 3, "weights"),
            ("no mask", attnlab.softmax(scores), None, 3, "masked"),
        ]
        bounds = []
        for k, (name, values, hide, decimals, role) in enumerate(steps):
            y = (len(steps) - 1 - k) * 1.4
            b = diagrams.matrix(
                ax,
                values,
                (0, y),
                role=role,
                decimals=decimals,
                cell=cell,
                fontsize="small",
                masked=hide,
                masked_text="−∞" if k == 2 else "0",
                col_labels=list(words) if k == 0 else None,
            )
            diagrams.label(ax, (b.right + 0.3, y + 0.4), name, ha="left", fontsize="medium")
            bounds.append(b)
        diagrams.fit(ax, *bounds, diagrams.Bounds(0, 0, bounds[0].right + 3.4, 7.2))
        return fig

    return _seeded(789, build)


def head_split() -> Figure:
    """``MultiHeadAttention(3, 4, num_heads=2)`` (seed 123): (B, T, d_out) → (B, H, T, D) → back."""

    def build() -> Figure:
        _, inputs = examples.your_journey()
        module = attnlab.MultiHeadAttention(d_in=3, d_out=4, num_heads=2)
        x = inputs.unsqueeze(0)  # (B, T, d_in) = (1, 6, 3)
        with torch.no_grad():
            queries = module.W_query(x)  # (1, 6, 4)
            keys = module.W_key(x)  # (1, 6, 4)
            values = module.W_value(x)  # (1, 6, 4)
            split = [t.view(1, 6, 2, 2).transpose(1, 2) for t in (queries, keys, values)]
            context_vecs = attnlab.scaled_dot_product_attention(*split)  # (1, 2, 6, 2)
            merged = context_vecs.transpose(1, 2).reshape(1, 6, 4)  # (1, 6, 4)
        fig, ax = diagrams.canvas(8.0, 4.4)
        cell = (1.25, 0.7)
        q = diagrams.matrix(
            ax,
            queries[0],
            (0, 0),
            role="queries",
            decimals=2,
            cell=cell,
            fontsize="small",
            title="queries (1, 6, 4)",
        )
        heads = []
        for h in range(2):
            heads.append(
                diagrams.matrix(
                    ax,
                    split[0][0, h],
                    (8.5 + 3.8 * h, 0),
                    role="queries",
                    decimals=2,
                    cell=cell,
                    fontsize="small",
                    title=f"head {h + 1}",
                )
            )
        outs = []
        for h in range(2):
            outs.append(
                diagrams.matrix(
                    ax,
                    context_vecs[0, h],
                    (8.5 + 3.8 * h, -6.6),
                    role="output",
                    decimals=2,
                    cell=cell,
                    fontsize="small",
                    title=f"head {h + 1}",
                )
            )
        m = diagrams.matrix(
            ax,
            merged[0],
            (0, -6.6),
            role="output",
            decimals=2,
            cell=cell,
            fontsize="small",
            title="merged (1, 6, 4)",
        )
        diagrams.arrow(ax, q.right_mid, heads[0].left_mid)
        diagrams.label(
            ax, ((q.right + heads[0].left) / 2, 2.6), "view,\ntranspose", fontsize="small"
        )
        diagrams.label(ax, (11.0, 5.4), "(1, 2, 6, 2) = (B, H, T, D)")
        for h in range(2):
            diagrams.arrow(
                ax,
                heads[h].bottom_mid,
                (outs[h].left + 1.25, outs[h].top + 0.6),
                "attend" if h == 0 else None,
                offset=-0.4,
            )
        diagrams.arrow(ax, outs[0].left_mid, m.right_mid)
        diagrams.label(
            ax, ((m.right + outs[0].left) / 2, -4.2), "transpose,\nreshape", fontsize="small"
        )
        diagrams.fit(ax, q, *heads, *outs, m, diagrams.Bounds(0, -6.6, 16.0, 5.8), margin=0.6)
        return fig

    return _seeded(123, build)


def cross_attention_diagram() -> Figure:
    """Query "short" of sentence 1 attends to ``second_sequence()`` (CrossAttention, seed 123)."""

    def build() -> Figure:
        sentence = examples.life_is_short()
        context = examples.second_sequence()  # (S, d) = (8, 16)
        module = attnlab.CrossAttention(d_in=16, d_context=16, d_out=16, num_heads=1)
        with torch.no_grad():
            queries = module.W_query(sentence.inputs)  # (6, 16)
            keys = module.W_key(context)  # (8, 16)
        attn_weights = attnlab.attention_weights(queries, keys)  # (6, 8)
        row = 2  # "short"
        fig, ax = diagrams.canvas(8.0, 4.6)
        ink = diagrams.text_colour()
        for i, word in enumerate(sentence.words):
            y = 7 - i * 1.4
            diagrams.operator(ax, (1.0, y), word, role="queries", size=(2.0, 0.9))
        for j in range(8):
            y = 8 - j
            diagrams.operator(ax, (10.0, y), f"c{j + 1}", role="keys", size=(1.6, 0.8))
            weight = float(attn_weights[row, j])
            ax.plot(
                [2.0, 9.2],
                [7 - row * 1.4, y],
                color=diagrams.ROLE_COLOURS["weights"],
                linewidth=0.5 + 8 * weight,
                solid_capstyle="round",
            )
            ax.text(11.0, y, f"{weight:.2f}", ha="left", va="center", color=ink, fontsize="medium")
        diagrams.label(ax, (1.0, 8.4), "sentence 1 (queries)")
        diagrams.label(ax, (10.0, 9.0), "sequence 2 (keys)")
        diagrams.label(ax, (11.0, 9.0), "            weight", ha="left")
        diagrams.fit(ax, diagrams.Bounds(-0.2, -0.5, 14.0, 9.5), margin=0.1)
        return fig

    return _seeded(123, build)


def flash_tiles() -> Figure:
    """Causal FlashAttention in 2 x 2 tiles: visit order, skipped tiles, running max and sum."""

    def build() -> Figure:
        words, inputs = examples.your_journey()
        module = attnlab.SelfAttentionV2(3, 2)
        with torch.no_grad():
            attn_scores = attnlab.attention_scores(module.W_query(inputs), module.W_key(inputs))
        scores = attn_scores / math.sqrt(2)  # (6, 6)
        block = 2
        mask = ~attnlab.causal_mask(6)  # True = masked
        fig, ax = diagrams.canvas(8.0, 4.6)
        cell = (1.3, 0.8)
        grid = diagrams.matrix(
            ax,
            scores,
            (0, 0),
            role="weights",
            decimals=2,
            cell=cell,
            fontsize="small",
            masked=mask,
            masked_text="",
            row_labels=list(words),
        )
        ink = diagrams.text_colour()
        order = 0
        for qi in range(3):
            for kj in range(3):
                x, y = kj * block * cell[0], (2 - qi) * block * cell[1]
                ax.add_patch(
                    Rectangle(
                        (x, y),
                        block * cell[0],
                        block * cell[1],
                        fill=False,
                        edgecolor=ink,
                        linewidth=2.0,
                    )
                )
                if kj <= qi:
                    order += 1
                    ax.text(
                        x + 0.12,
                        y + block * cell[1] - 0.1,
                        str(order),
                        ha="left",
                        va="top",
                        color=ink,
                        fontsize="x-small",
                        fontweight="bold",
                    )
                else:
                    ax.text(
                        x + block * cell[0] / 2,
                        y + block * cell[1] / 2,
                        "skipped",
                        ha="center",
                        va="center",
                        color=ink,
                        fontsize="small",
                    )
        # running max m and sum l of the last query row ("step") after each key tile
        row = scores[5]
        running_max, running_sum = [], []
        m, l_sum = float("-inf"), 0.0
        for kj in range(3):
            tile = row[kj * block : (kj + 1) * block]
            new_m = max(m, float(tile.max()))
            l_sum = l_sum * math.exp(m - new_m) + float((tile - new_m).exp().sum())
            m = new_m
            running_max.append(m)
            running_sum.append(l_sum)
        stats = torch.tensor([running_max, running_sum])  # (2, 3)
        s = diagrams.matrix(
            ax,
            stats,
            (9.6, -2.8),
            role="weights",
            decimals=2,
            cell=cell,
            fontsize="small",
            row_labels=["max m", "sum l"],
            col_labels=["tile 4", "tile 5", "tile 6"],
            title="row 'step', running",
        )
        diagrams.fit(ax, grid, s, diagrams.Bounds(-1.8, -3.0, 14.0, 5.6), margin=0.3)
        return fig

    return _seeded(789, build)


def ring_schedule() -> Figure:
    """Causal ring attention on 4 ranks: work per rank and step, contiguous vs zig-zag."""
    from attnlab import diagrams, ring

    fig, ax = diagrams.canvas(8.0, 2.8)
    bounds = []
    layouts: tuple[tuple[float, ring.Layout], ...] = ((0.0, "contiguous"), (13.0, "zigzag"))
    for x0, layout in layouts:
        schedule = ring.ring_schedule(4, is_causal=True, layout=layout)
        work = torch.tensor([[step[r]["work"] for step in schedule] for r in range(4)])
        chunks = [str(ring.chunk_ids(r, 4, layout)).strip("[]") for r in range(4)]
        bounds.append(
            diagrams.matrix(
                ax,
                work,
                (x0, 0.0),
                role="weights",
                title=layout,
                decimals=1,
                row_labels=[f"rank {r}: chunk {c}" for r, c in enumerate(chunks)],
                col_labels=[f"s{s}" for s in range(4)],
                cell=(1.3, 1.0),
                masked=work == 0,
            )
        )
    diagrams.label(ax, (-5.0, -0.8), "")  # room for the row labels
    diagrams.fit(ax, *bounds, margin=0.4)
    ax.set_xlim(-5.5, bounds[1].right + 0.4)
    return fig


def flash_backward_blocks() -> Figure:
    """The backward pass of one tiny attention: P, dP and dS = P * (dP - D), as numbers."""
    from attnlab import diagrams

    gen = torch.Generator().manual_seed(0)
    q, k, v, grad_out = (torch.randn(4, 2, generator=gen) for _ in range(4))
    weights = torch.softmax(q @ k.T / 2**0.5, dim=-1)  # P, (4, 4)
    grad_weights = grad_out @ v.T  # dP
    row_dot = (grad_out * (weights @ v)).sum(-1, keepdim=True)  # D = rowsum(dO * O)
    grad_scores = weights * (grad_weights - row_dot)  # dS
    fig, ax = diagrams.canvas(8.0, 2.6)
    b1 = diagrams.matrix(ax, weights, (0, 0), role="weights", title="P", decimals=2)
    b2 = diagrams.matrix(ax, grad_weights, (5.5, 0), role="output", title="dP = dO Vᵀ", decimals=2)
    b3 = diagrams.matrix(ax, row_dot, (11, 0), role="output", title="D", decimals=2)
    b4 = diagrams.matrix(ax, grad_scores, (13.5, 0), role="weights", title="dS", decimals=2)
    diagrams.arrow(ax, b3.right_mid, b4.left_mid)
    diagrams.label(ax, (4.75, 2), "∘")
    diagrams.label(ax, (10.25, 2), "−")
    diagrams.fit(ax, b1, b2, b3, b4)
    return fig


# --- inside today's LLMs -----------------------------------------------------------------


def _decoding_step() -> dict[str, torch.Tensor]:
    """The KV-cache chapter's layer and tokens: the step where position 6 meets the cache.

    ``GroupedQueryAttention(16, num_heads=4, num_kv_heads=2)`` and ``x`` of shape
    ``(1, 10, 16)`` after ``torch.manual_seed(0)``; the prompt (positions 0-5) fills the
    cache, then token 6 goes through the layer's seams. Returned for query head 0 and
    the key/value head it shares with query head 1.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = attnlab.GroupedQueryAttention(d_model=16, num_heads=4, num_kv_heads=2)
        x = torch.randn(1, 10, 16)  # (B, T, d_model)
    cache = attnlab.KVCache()
    with torch.no_grad():
        layer(x[:, :6], cache=cache)  # the prompt: positions 0..5
        new = x[:, 6:7]  # (1, 1, d_model): the token at position 6
        queries = layer.split_heads(layer.q_proj(new))  # (1, H, 1, D)
        keys = layer.split_heads(layer.k_proj(new))  # (1, Hkv, 1, D)
        values = layer.split_heads(layer.v_proj(new))  # (1, Hkv, 1, D)
        queries, keys = layer.position_queries_keys(queries, keys, offset=len(cache))
        all_keys, all_values = cache.append(keys, values)  # (1, Hkv, 7, D) each
        q, K, V = queries[0, 0, 0], all_keys[0, 0], all_values[0, 0]  # (D,), (7, D), (7, D)
        attn_weights = attnlab.softmax(K @ q / math.sqrt(layer.head_dim))  # (7,)
    return {
        "query": q,
        "key": keys[0, 0, 0],
        "value": values[0, 0, 0],
        "keys": K,
        "values": V,
        "weights": attn_weights,
        "output": attn_weights @ V,  # (D,): head 0's context vector
    }


def kv_cache_step() -> Figure:
    """One decoding step: token 6's q, k, v; the cached K and V grow by a row; q meets all."""
    step = _decoding_step()
    fig, ax = diagrams.canvas(8.0, 3.8)
    cell = (1.1, 0.7)
    S = step["keys"].shape[0]
    rows = [f"pos {i}" for i in range(S - 1)] + ["pos 6 (new)"]
    small: dict[str, Any] = {"decimals": 2, "cell": cell, "fontsize": "small"}
    K = diagrams.matrix(
        ax,
        step["keys"],
        (0, 0),
        role="keys",
        title="cached keys K (kv head 0)",
        row_labels=rows,
        highlight_rows=[S - 1],
        **small,
    )
    k = diagrams.matrix(ax, step["key"], (0, -2.0), role="keys", row_labels=["new k"], **small)
    q = diagrams.matrix(
        ax,
        step["query"],
        (0, S * cell[1] + 1.5),
        role="queries",
        row_labels=["new q (head 0)"],
        **small,
    )
    w = diagrams.matrix(
        ax, step["weights"].unsqueeze(-1), (8.0, 0), role="weights", title="weights", **small
    )
    V = diagrams.matrix(
        ax,
        step["values"],
        (11.0, 0),
        role="values",
        title="cached values V",
        highlight_rows=[S - 1],
        **small,
    )
    v = diagrams.matrix(ax, step["value"], (11.0, -2.0), role="values", **small)
    diagrams.label(ax, (v.right + 0.2, -1.65), "new v", ha="left", fontsize="medium")
    out = diagrams.matrix(
        ax,
        step["output"].unsqueeze(-1),
        (V.right + 2.6, 1.05),
        role="output",
        title="output",
        **small,
    )
    for small_box, big in ((k, K), (v, V)):
        diagrams.arrow(ax, small_box.top_mid, (big.left + 2.2, big.bottom))
        diagrams.label(ax, (big.left + 2.4, -0.65), "append", ha="left", fontsize="small")
    diagrams.arrow(ax, K.right_mid, w.left_mid, "q · kⱼ / √4,\nsoftmax", offset=0.15)
    diagrams.arrow(ax, q.right_mid, (6.2, K.top - 0.6), rad=-0.3)
    diagrams.arrow(ax, w.right_mid, V.left_mid)
    diagrams.arrow(ax, V.right_mid, out.left_mid, "Σ wⱼ vⱼ", offset=0.15)
    diagrams.fit(ax, K, k, q, w, V, v, out, diagrams.Bounds(-3.2, -2.0, out.right, 7.4), margin=0.3)
    return fig


def gqa_sharing() -> Figure:
    """Eight query heads on 8, 2 and 1 key/value heads, and what one token leaves in the cache.

    Which key/value head each query head reads is ``repeat_kv_heads`` applied to the
    key/value heads' numbers; the cached numbers per token are counted in a real
    ``KVCache`` after one token through ``GroupedQueryAttention(64, 8, num_kv_heads)``.
    """
    fig, ax = diagrams.canvas(8.0, 4.6)
    ink = diagrams.text_colour()
    H, spacing, row_height = 8, 1.25, 3.2
    bounds = []
    for r, (name, kv_heads) in enumerate((("MHA", 8), ("GQA", 2), ("MQA", 1))):
        y0 = -r * row_height
        layer = attnlab.GroupedQueryAttention(d_model=64, num_heads=H, num_kv_heads=kv_heads)
        cache = attnlab.KVCache()
        with torch.no_grad():
            layer(torch.zeros(1, 1, 64), cache=cache)  # one token
        assert cache.keys is not None and cache.values is not None
        per_token = cache.keys.numel() + cache.values.numel()  # (1, Hkv, 1, D) twice
        heads = torch.arange(kv_heads, dtype=torch.float32).view(kv_heads, 1, 1)  # (Hkv, 1, 1)
        reads = attnlab.repeat_kv_heads(heads, H // kv_heads).flatten().int().tolist()  # (H,)
        for j in range(kv_heads):
            group = [h for h in range(H) if reads[h] == j]
            x = sum(group) / len(group) * spacing
            for dx, letter, role in ((-0.26, "K", "keys"), (0.26, "V", "values")):
                diagrams.operator(
                    ax, (x + dx, y0), f"{letter}{j}", role=role, size=(0.5, 0.7), fontsize="small"
                )
            for h in group:
                ax.plot([h * spacing, x], [y0 + 1.45, y0 + 0.38], color=ink, linewidth=1.0)
        for h in range(H):
            diagrams.operator(
                ax, (h * spacing, y0 + 1.8), f"q{h}", role="queries", size=(0.9, 0.7),
                fontsize="small",
            )  # fmt: skip
        right = (H - 1) * spacing + 0.8
        diagrams.label(
            ax, (-0.8, y0 + 0.9), f"{name}\n{kv_heads} kv head{'s' * (kv_heads > 1)}",
            ha="right", fontsize="medium",
        )  # fmt: skip
        diagrams.label(
            ax, (right, y0 + 0.9),
            f"cache per token:\n2 × {kv_heads} × {layer.head_dim} = {per_token} numbers",
            ha="left", fontsize="small",
        )  # fmt: skip
        bounds.append(diagrams.Bounds(-3.4, y0 - 0.4, right + 4.4, y0 + 2.2))
    diagrams.fit(ax, *bounds, margin=0.1)
    return fig


ROTARY_THETA = 0.3  # radians per position, as in the rotary chapter's hand example


def rotary_plane() -> Figure:
    """The rotary chapter's 2-D query and key, turned to three pairs of positions.

    Query ``(1, 2)`` and key ``(0.5, -1)`` turned by position times ``θ = 0.3`` rad with a
    width-2 ``RotaryEmbedding`` (one pair, frequency 1: its angle is the position passed,
    so position ``m`` is passed as ``m θ``). The same distance leaves the same angle
    between them, and so the same score.
    """
    from matplotlib.patches import Arc

    rope = attnlab.RotaryEmbedding(head_dim=2)  # one pair: turns by 1 radian per unit
    query, key = torch.tensor([[1.0, 2.0]]), torch.tensor([[0.5, -1.0]])  # (1, 2) each
    ink = diagrams.text_colour()
    fig, ax = diagrams.canvas(8.0, 3.1)
    panel, radius = 7.6, 2.5
    bounds = []
    for p, (m, n) in enumerate(((5, 3), (102, 100), (7, 7))):
        cx = p * panel + radius
        cy = 3.6
        with torch.no_grad():  # position m turns by m * theta: pass m * theta as the angle
            q = rope(query, torch.tensor([m * ROTARY_THETA]))[0]  # (2,)
            k = rope(key, torch.tensor([n * ROTARY_THETA]))[0]  # (2,)
        score = float(q @ k)
        ax.plot([cx - radius, cx + radius], [cy, cy], color=ink, linewidth=0.5, alpha=0.4)
        ax.plot([cx, cx], [cy - radius, cy + radius], color=ink, linewidth=0.5, alpha=0.4)
        diagrams.arrow(ax, (cx, cy), (cx + float(q[0]), cy + float(q[1])), role="queries")
        diagrams.arrow(ax, (cx, cy), (cx + float(k[0]), cy + float(k[1])), role="keys")
        angle_q = math.degrees(math.atan2(float(q[1]), float(q[0])))
        angle_k = math.degrees(math.atan2(float(k[1]), float(k[0])))
        between = (angle_q - angle_k) % 360  # degrees from k to q, counter-clockwise
        ax.add_patch(
            Arc(
                (cx, cy), 1.4, 1.4, theta1=angle_k, theta2=angle_k + between,
                color=diagrams.ROLE_COLOURS["weights"], linewidth=2.0,
            )
        )  # fmt: skip
        diagrams.label(ax, (cx, cy + radius + 0.5), f"query at {m}, key at {n}", fontsize="medium")
        diagrams.label(
            ax, (cx, cy - radius - 0.25), f"angle k → q: {between:.1f}°", fontsize="small"
        )
        cell = (1.2, 0.7)
        qb = diagrams.matrix(
            ax,
            q,
            (cx - 2.9, -0.6),
            role="queries",
            decimals=2,
            cell=cell,
            fontsize="small",
            row_labels=["q"],
        )
        kb = diagrams.matrix(
            ax,
            k,
            (cx - 2.9, -1.5),
            role="keys",
            decimals=2,
            cell=cell,
            fontsize="small",
            row_labels=["k"],
        )
        sb = diagrams.matrix(
            ax,
            torch.tensor([score]),
            (cx + 0.9, -1.05),
            role="weights",
            decimals=4,
            cell=(1.6, 0.7),
            fontsize="small",
        )
        diagrams.label(ax, (sb.left - 0.1, -0.7), "q · k =", ha="right", fontsize="small")
        bounds += [
            qb,
            kb,
            sb,
            diagrams.Bounds(cx - radius, cy - radius, cx + radius, cy + radius + 0.8),
        ]
    diagrams.fit(ax, *bounds, margin=0.3)
    return fig


def window_blocks() -> Figure:
    """Causal mask and sliding window (W = 3) on 8 tokens, with flash attention's 2 x 2 blocks.

    Tinted cells may attend (``causal_mask``, ``sliding_window_mask``); outlined and
    numbered blocks are those ``flash_visited_blocks`` lists, in the loop's order.
    """
    T, block, window = 8, 2, 3
    ink = diagrams.text_colour()
    fig, ax = diagrams.canvas(8.0, 3.8)
    cell = 0.6
    bounds = []
    panels = (
        ("causal", attnlab.causal_mask(T), True, None),
        (f"window {window}", attnlab.sliding_window_mask(T, T, window), False, window),
    )
    for p, (name, allowed, is_causal, panel_window) in enumerate(panels):
        x0 = p * (T * cell + 2.2)
        grid = diagrams.matrix(
            ax,
            allowed.float(),
            (x0, 0),
            role="weights",
            cell=(cell, cell),
            masked=~allowed,
            show_values=False,
        )
        visited = attnlab.flash_visited_blocks(
            T, T, block, is_causal=is_causal, window=panel_window
        )
        for order, (i0, j0) in enumerate(visited, start=1):
            x, y = x0 + j0 * cell, (T - i0 - block) * cell
            ax.add_patch(
                Rectangle(
                    (x, y), block * cell, block * cell, fill=False, edgecolor=ink, linewidth=2.0
                )
            )
            ax.text(x + block * cell / 2, y + block * cell / 2, str(order), ha="center",
                    va="center", color=ink, fontsize="large", fontweight="bold")  # fmt: skip
        total = (T // block) ** 2
        diagrams.label(
            ax,
            (x0 + T * cell / 2, T * cell + 0.45),
            f"{name}: {len(visited)} of {total} blocks computed",
            fontsize="medium",
        )
        bounds.append(grid)
    diagrams.label(ax, (-0.2, T * cell / 2), "query", ha="right", fontsize="small")
    diagrams.label(ax, (T * cell / 2, -0.35), "key", fontsize="small")
    diagrams.fit(ax, *bounds, diagrams.Bounds(-1.2, -0.6, bounds[-1].right, T * cell + 0.8))
    return fig


FIGURES: dict[str, FigureBuilder] = {
    "embedding": embedding,
    "journey-weights": journey_weights,
    "dream-big-weights": dream_big_weights,
    "softmax-scaling": softmax_scaling,
    "variance-vs-dim": variance_vs_dim,
    "illustrated-weights": illustrated_weights,
    "softmax-errata": softmax_errata,
    "v1-vs-v2": v1_vs_v2,
    "causal-mask": causal_mask,
    "causal-weights": causal_weights,
    "multi-head": multi_head,
    "cross-attention": cross_attention,
    "recall-model": recall_model,
    "recall-loss": recall_loss,
    "recall-attention": recall_attention,
    "recall-scores": recall_scores,
    "bench-time": bench_time,
    "bench-memory": bench_memory,
    "decode-time": decode_time,
    "window-cost": window_cost,
    # conceptual diagrams (attnlab.diagrams)
    "rnn-vs-attention": rnn_vs_attention,
    "tokens-to-vectors": tokens_to_vectors,
    "attention-flow": attention_flow,
    "illustrated-projections": illustrated_projections,
    "illustrated-attention": illustrated_attention,
    "trainable-projections": trainable_projections,
    "scaling-flow": scaling_flow,
    "compact-module-diagram": compact_module_diagram,
    "causal-row": causal_row,
    "head-split": head_split,
    "cross-attention-diagram": cross_attention_diagram,
    "flash-tiles": flash_tiles,
    "ring-schedule": ring_schedule,
    "flash-backward-blocks": flash_backward_blocks,
    "kv-cache-step": kv_cache_step,
    "gqa-sharing": gqa_sharing,
    "rotary-plane": rotary_plane,
    "window-blocks": window_blocks,
}

#: The conceptual diagrams (drawn in the role colours of ``attnlab.diagrams``); every
#: main-line chapter shows at least one (tests/test_figures.py).
DIAGRAMS: frozenset[str] = frozenset(
    {
        "recall-model",
        "rnn-vs-attention",
        "tokens-to-vectors",
        "attention-flow",
        "illustrated-projections",
        "illustrated-attention",
        "trainable-projections",
        "scaling-flow",
        "compact-module-diagram",
        "causal-row",
        "head-split",
        "cross-attention-diagram",
        "flash-tiles",
        "flash-backward-blocks",
        "ring-schedule",
        "kv-cache-step",
        "gqa-sharing",
        "rotary-plane",
        "window-blocks",
    }
)


# --- rendering -------------------------------------------------------------------------


def render_svg(build: FigureBuilder, scheme: str) -> str:
    """Build a figure under the scheme's matplotlib style and return it as SVG text."""
    with matplotlib.style.context(SCHEMES[scheme]), mpl.rc_context(SVG_RC):
        fig = build()
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", transparent=True, metadata={"Date": None})
    return buffer.getvalue()


def rendered(name: str, scheme: str, key: str) -> str:
    """The SVG of figure ``name`` for ``scheme`` (``"light"`` or ``"dark"``), memoised.

    Memoised under the source ``key`` by ``build_cache``: a build whose sources did
    not change draws nothing.
    """
    return cached_text(f"{name}-{scheme}.svg", key, lambda: render_svg(FIGURES[name], scheme))


# --- MkDocs events ---------------------------------------------------------------------


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add ``figures/<name>-light.svg`` and ``-dark.svg`` for every registered figure."""
    key = source_key()
    evict_stale(key)
    for name in FIGURES:
        for scheme in SCHEMES:
            content = rendered(name, scheme, key)
            files.append(File.generated(config, f"figures/{name}-{scheme}.svg", content=content))
    return files


def figure_markdown(alt: str, prefix: str, name: str, caption: str | None, indent: str = "") -> str:
    """The Markdown for one figure: the light and dark images, and the caption if any."""
    light = f"![{alt}]({prefix}figures/{name}-light.svg#only-light){{ loading=lazy }}"
    dark = f"![{alt}]({prefix}figures/{name}-dark.svg#only-dark){{ loading=lazy }}"
    lines = ['<figure markdown="span">', f"  {light}", f"  {dark}"]
    if caption:
        lines.append(f"  <figcaption>{caption}</figcaption>")
    lines.append("</figure>")
    return "\n".join(indent + line for line in lines)


def rewrite_figures(markdown: str, src_uri: str) -> str:
    """Replace each ``![alt](../figures/<name>.svg "caption")`` line in a page's Markdown.

    Raises:
        PluginError: The name is not in ``FIGURES``, or the path does not lead to
            ``figures/`` at the root of ``docs/``.
    """

    def replace(match: re.Match[str]) -> str:
        name, prefix = match["name"], match["prefix"]
        target = posixpath.normpath(posixpath.join(posixpath.dirname(src_uri), prefix, "figures"))
        if target != "figures":
            raise PluginError(
                f"{src_uri}: figure {name!r} is referenced as {prefix}figures/; "
                "the path must lead to docs/figures/ from this page"
            )
        if name not in FIGURES:
            raise PluginError(
                f"{src_uri}: unknown figure {name!r}; registered figures: {', '.join(FIGURES)}"
            )
        return figure_markdown(match["alt"], prefix, name, match["caption"], match["indent"])

    return FIGURE_REF.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Turn the page's figure references into light/dark image pairs."""
    return rewrite_figures(markdown, page.file.src_uri)
