"""The figures of "Toward the transformer": masks, heads, cross-attention, a model learning.

Each figure is registered with ``@figure`` (``hooks/figure_registry.py``) and drawn
by the figures hook (``hooks/figures.py``); ``diagram=True`` marks a conceptual diagram
in the role colours of ``hooks/diagrams.py``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import matplotlib
import torch
from matplotlib.figure import Figure

import attnlab
import attnlab.recall
from attnlab import examples, plot
from hooks import diagrams
from hooks.figure_kit import journey_self_attention, matrix_style, seeded
from hooks.figure_registry import figure

#: Font size (pt) of the stacked heatmaps below: drawn about 5 in wide, their smallest
#: text (matplotlib's "small", 0.83 of this) stays above 9 px on a 390-px phone.
STACKED_FONT_PT = 12.0


def stacked_heatmaps(
    width: float,
    height: float,
    panels: Sequence[tuple[str, Callable[..., object]]],
) -> Figure:
    """Heatmap panels one above the other, sharing one colorbar, in phone-sized type.

    Each panel is ``(title, draw)``; ``draw(ax=..., title=..., colorbar=False)`` draws it
    with ``plot.plot_attention`` (one colour scale: pass the same ``vmin``/``vmax``).
    """
    with matplotlib.rc_context({"font.size": STACKED_FONT_PT}):
        fig = Figure(figsize=(width, height), layout="constrained")
        axes = list(fig.subplots(len(panels), 1))
        for ax, (title, draw) in zip(axes, panels, strict=True):
            draw(ax=ax, title=title, colorbar=False)
        fig.colorbar(axes[0].images[0], ax=axes, shrink=0.6)
    return fig


@figure("causal-mask")
def causal_mask() -> Figure:
    """The causal mask of a six-token sentence: query i may attend to keys j <= i."""
    words = examples.your_journey().words
    return plot.plot_mask(attnlab.causal_mask(6), words, title="causal_mask(6)")


@figure("causal-weights")
def causal_weights() -> Figure:
    """``SelfAttentionV2(3, 2)`` weights (seed 789) on "Your journey…", unmasked and causal."""
    words, inputs = examples.your_journey()
    module = journey_self_attention()
    with torch.no_grad():
        queries, keys = module.W_query(inputs), module.W_key(inputs)  # (6, 2) each
        full = attnlab.attention_weights(queries, keys)  # (6, 6)
        causal = attnlab.attention_weights(queries, keys, is_causal=True)  # (6, 6)
    return stacked_heatmaps(
        5.0,
        8.6,
        [
            (title, functools.partial(plot.plot_attention, weights, words, words, vmin=0, vmax=1))
            for title, weights in [("no mask", full), ("causal: keys j <= i only", causal)]
        ],
    )


@figure("multi-head")
def multi_head() -> Figure:
    """The two causal heads of the multi-head chapter's wrapper (seed 123) on "Your journey…"."""

    def build() -> Figure:
        words, inputs = examples.your_journey()
        wrapper = attnlab.MultiHeadAttentionWrapper(d_in=3, d_out=4, num_heads=2, causal=True)
        with torch.no_grad():
            per_head = torch.stack(
                [
                    attnlab.attention_weights(
                        head.W_query(inputs), head.W_key(inputs), is_causal=True
                    )
                    for head in wrapper.heads
                    if isinstance(head, attnlab.CausalAttention)
                ]
            )  # (H, T, T) = (2, 6, 6)
        low, high = float(per_head.min()), float(per_head.max())
        return stacked_heatmaps(
            5.0,
            8.6,
            [
                (
                    f"head {h + 1}",
                    functools.partial(
                        plot.plot_attention,
                        per_head[h],
                        words,
                        words,
                        decimals=1,
                        vmin=low,
                        vmax=high,
                    ),
                )
                for h in range(per_head.shape[0])
            ],
        )

    return seeded(123, build)


def _cross_weights() -> torch.Tensor:
    """The cross-attention chapter's by-hand weights, ``(6, 8)``: call right after seed 123.

    ``W_query`` and ``W_key`` are ``(d_in, d_k) = (16, 24)`` matrices drawn first, as in the
    chapter's block; queries from "Life is short…", keys from ``second_sequence()``.
    """
    W_query, W_key = torch.rand(16, 24), torch.rand(16, 24)  # (d_in, d_k) each
    queries = examples.life_is_short().inputs @ W_query  # (6, 24)
    keys = examples.second_sequence() @ W_key  # (8, 24)
    return attnlab.attention_weights(queries, keys)  # (6, 8), scale 1/sqrt(24)


@figure("cross-attention")
def cross_attention() -> Figure:
    """Cross-attention weights from "Life is short…" to the 8 tokens of ``second_sequence()``.

    The weights of the cross-attention chapter's by-hand block (:func:`_cross_weights`).
    """

    def build() -> Figure:
        sentence = examples.life_is_short()
        return plot.plot_attention(
            _cross_weights(),
            sentence.words,
            [f"c{j + 1}" for j in range(8)],
            xlabel="context token (key)",
            ylabel="query token",
            title="queries from sentence 1, keys from sequence 2",
        )

    return seeded(123, build)


def _recall_rows(batch: attnlab.recall.RecallBatch) -> list[str]:
    task = attnlab.recall.RecallTask()
    return [
        f"{task.key_name(int(q))}? -> {int(t)}"
        for q, t in zip(batch.query, batch.target, strict=True)
    ]


@figure("recall-model", diagram=True)
def recall_model() -> Figure:
    """The trained recall model answering the chapter's first example, as a lookup diagram."""
    from attnlab import recall

    _, trained, _ = recall.trained_recall_model()
    batch = recall.example_batch()
    task, real = trained.task, int(batch.present[0].sum())
    with torch.no_grad():
        logits, attn_weights = trained(batch)
    return diagrams.plot_retrieval(
        f"{task.key_name(int(batch.query[0]))} ?",
        [task.key_name(int(k)) for k in batch.keys[0, :real]],
        [str(int(v)) for v in batch.values[0, :real]],
        attn_weights[0, :real],
        f"answer {int(logits[0].argmax())}",
        title="trained: " + recall.describe(task, batch),
    )


@figure("recall-loss")
def recall_loss() -> Figure:
    """Training loss of the chapter's recall model."""
    from attnlab import recall

    _, _, history = recall.trained_recall_model()
    return plot.plot_loss(history.loss, title="associative recall, seed 0")


@figure("recall-attention")
def recall_attention() -> Figure:
    """Query attention over the slots of six held-out sequences, before and after training."""
    from attnlab import recall

    untrained, trained, _ = recall.trained_recall_model()
    batch = recall.held_out_batch(6)
    rows, slots = _recall_rows(batch), [str(j + 1) for j in range(batch.keys.shape[1])]
    with torch.no_grad():
        weights = [(title, model(batch)[1]) for title, model in
                   [("before training", untrained), ("after training", trained)]]  # fmt: skip
    return stacked_heatmaps(
        5.0,
        7.6,
        [
            (
                title,
                functools.partial(
                    plot.plot_attention,
                    w,
                    rows,
                    slots,
                    vmin=0,
                    vmax=1,
                    decimals=1,
                    xlabel="slot (stored pair)",
                    ylabel="question",
                ),
            )
            for title, w in weights
        ],
    )


@figure("recall-scores")
def recall_scores() -> Figure:
    """Scores between question letters and stored key letters, before and after training."""
    from attnlab import recall

    untrained, trained, _ = recall.trained_recall_model()
    letters = [trained.task.key_name(k) for k in range(trained.task.num_keys)]
    before, after = recall.key_query_scores(untrained), recall.key_query_scores(trained)
    low, high = float(min(before.min(), after.min())), float(max(before.max(), after.max()))
    return stacked_heatmaps(
        5.0,
        9.4,
        [
            (
                title,
                functools.partial(
                    plot.plot_attention,
                    scores,
                    letters,
                    letters,
                    annotate=False,
                    vmin=low,
                    vmax=high,
                    xlabel="stored key",
                    ylabel="question",
                ),
            )
            for title, scores in [("before training", before), ("after training", after)]
        ],
    )


@figure("causal-row", diagram=True)
def causal_row() -> Figure:
    """Row 3 ("starts") of ``SelfAttentionV2(3, 2)`` (seed 789): mask, −∞, renormalised softmax."""
    words, inputs = examples.your_journey()
    module = journey_self_attention()
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


@figure("head-split", diagram=True)
def head_split() -> Figure:
    """Causal ``MultiHeadAttention(3, 4, num_heads=2)`` (seed 123): split, attend, merge."""

    def build() -> Figure:
        _, inputs = examples.your_journey()
        module = attnlab.MultiHeadAttention(d_in=3, d_out=4, num_heads=2, causal=True)
        x = inputs.unsqueeze(0)  # (B, T, d_in) = (1, 6, 3)
        with torch.no_grad():
            queries = module.W_query(x)  # (1, 6, 4)
            keys = module.W_key(x)  # (1, 6, 4)
            values = module.W_value(x)  # (1, 6, 4)
            # the module's own seams: (B, T, d_out) -> (B, H, T, D), attend, and back
            split = [module.split_heads(t) for t in (queries, keys, values)]  # (1, 2, 6, 2)
            q_split, k_split, v_split = split
            context_vecs, _ = module.attend_heads(q_split, k_split, v_split, is_causal=True)
            merged = module.merge_heads(context_vecs)  # (1, 6, 4)
        fig, ax = diagrams.canvas(8.0, 4.4)
        grid = matrix_style((1.25, 0.7))
        q = grid(ax, queries[0], (0, 0), role="queries", title="queries (1, 6, 4)")
        heads = [
            grid(ax, q_split[0, h], (8.5 + 3.8 * h, 0), role="queries", title=f"head {h + 1} q")
            for h in range(2)
        ]
        outs = [
            grid(
                ax,
                context_vecs[0, h],
                (8.5 + 3.8 * h, -6.6),
                role="output",
                title=f"head {h + 1} out",
            )
            for h in range(2)
        ]
        m = grid(ax, merged[0], (0, -6.6), role="output", title="merged (1, 6, 4)")
        diagrams.arrow(ax, q.right_mid, heads[0].left_mid)
        diagrams.label(
            ax, ((q.right + heads[0].left) / 2, 2.6), "view,\ntranspose", fontsize="small"
        )
        diagrams.label(ax, (11.0, 5.4), "(1, 2, 6, 2) = (B, H, T, D)")
        for h in range(2):
            diagrams.arrow(ax, heads[h].bottom_mid, (outs[h].left + 1.25, outs[h].top + 0.6))
        diagrams.label(
            ax,
            (heads[0].left - 0.3, -1.0),
            "attend, each head with\nits own keys and values\n(split the same way)",
            ha="right",
            fontsize="small",
        )
        diagrams.arrow(ax, outs[0].left_mid, m.right_mid)
        diagrams.label(
            ax, ((m.right + outs[0].left) / 2, -3.3), "transpose,\nreshape", fontsize="small"
        )
        diagrams.fit(ax, q, *heads, *outs, m, diagrams.Bounds(0, -6.6, 16.0, 5.8), margin=0.6)
        return fig

    return seeded(123, build)


@figure("cross-attention-diagram", diagram=True)
def cross_attention_diagram() -> Figure:
    """Query "is" of sentence 1 over ``second_sequence()``: the chapter's by-hand weights."""

    def build() -> Figure:
        sentence = examples.life_is_short()
        attn_weights = _cross_weights()  # (6, 8), as the chapter's block computes them
        row = 1  # "is", the row the chapter prints
        fig, ax = diagrams.canvas(4.8, 4.6)
        ink = diagrams.text_colour()
        for i, word in enumerate(sentence.words):
            y = 7 - i * 1.4
            diagrams.operator(ax, (1.0, y), word, role="queries", size=(2.0, 0.9), fontsize="large")
        for j in range(8):
            y = 8 - j
            diagrams.operator(
                ax, (8.0, y), f"c{j + 1}", role="keys", size=(1.4, 0.8), fontsize="large"
            )
            weight = float(attn_weights[row, j])
            ax.plot(
                [2.0, 7.3],
                [7 - row * 1.4, y],
                color=diagrams.ROLE_COLOURS["weights"],
                linewidth=0.5 + 8 * weight,
                solid_capstyle="round",
            )
            ax.text(8.9, y, f"{weight:.2f}", ha="left", va="center", color=ink, fontsize="large")
        diagrams.label(ax, (1.0, 8.4), "queries")
        diagrams.label(ax, (8.8, 9.0), "keys, weight")
        diagrams.fit(ax, diagrams.Bounds(-0.2, -0.5, 10.9, 9.5), margin=0.1)
        return fig

    return seeded(123, build)


@figure("mask-polarity", diagram=True)
def mask_polarity() -> Figure:
    """``causal_mask(6)`` given to ``nn.MultiheadAttention`` unflipped and flipped (seed 123)."""

    def build() -> Figure:
        words, inputs = examples.your_journey()
        mha = torch.nn.MultiheadAttention(embed_dim=3, num_heads=1, batch_first=True)
        allowed = attnlab.causal_mask(6)  # (6, 6), True = may attend
        x = inputs.unsqueeze(0)  # (1, 6, 3)
        with torch.no_grad():
            _, right = mha(x, x, x, attn_mask=~allowed)  # (1, 6, 6)
            _, wrong = mha(x, x, x, attn_mask=allowed)  # (1, 6, 6), last row NaN
        fig, ax = diagrams.canvas(8.0, 4.2)
        cell = (1.0, 0.9)
        panels = [
            (right[0], "True = may attend (causal)", 0.0),
            (wrong[0], "True = ignore (future only)", 9.0),
        ]
        bounds = []
        for weights, title, x0 in panels:
            used = weights.nan_to_num(0.0) > 0  # (6, 6) the keys each query used
            b = diagrams.matrix(
                ax,
                weights.nan_to_num(0.0),
                (x0, 0.0),
                role="weights",
                decimals=1,
                cell=cell,
                masked=~used,
                row_labels=list(words) if x0 == 0.0 else None,
                col_labels=[w[:4] for w in words],
                title=title,
                fontsize="medium",
            )
            bounds.append(b)
        for j in range(6):  # "step" keeps no key: its row is NaN
            diagrams.label(ax, (9.5 + j, 0.45), "NaN", fontsize="small")
        diagrams.fit(ax, *bounds, diagrams.Bounds(-2.0, 0.0, 15.0, 6.5), margin=0.2)
        return fig

    return seeded(123, build)


def _view_transpose(first: int) -> Figure:
    """Twelve numbers, (B, T, d_out) = (1, 3, 4), split into two heads: view, then transpose.

    Tokens and heads are numbered from ``first``: 1 on the deeper track, 0 (as the code
    indexes them) on the first pass.
    """
    x = torch.arange(12.0).view(1, 3, 4)  # (B, T, d_out)
    split = x.view(1, 3, 2, 2)  # (B, T, H, D): per token, one row per head
    heads = split.transpose(1, 2)  # (B, H, T, D): per head, one row per token
    fig, ax = diagrams.canvas(8.0, 4.4)
    grid = matrix_style((1.0, 0.8), decimals=0, fontsize="large")
    tokens, names = [f"t{first + t}" for t in range(3)], [f"h{first + h}" for h in range(2)]
    x_box = grid(ax, x[0], (1.0, 4.2), role="queries", title="x (1, 3, 4)", row_labels=tokens)
    per_token = [
        grid(ax, split[0, t], (8.0 + 3.4 * t, 4.6), role="queries", title=tokens[t],
             row_labels=names if t == 0 else None)
        for t in range(3)
    ]  # fmt: skip
    per_head = [
        grid(ax, heads[0, h], (9.0 + 4.4 * h, 0.0), role="queries",
             title=f"head {first + h}", row_labels=tokens)
        for h in range(2)
    ]  # fmt: skip
    diagrams.arrow(ax, x_box.right_mid, (per_token[0].left - 0.9, per_token[0].bottom + 0.8))
    diagrams.label(ax, (11.4, 7.6), "view: (1, 3, 2, 2) = (B, T, H, D)", fontsize="medium")
    middle = (per_head[0].right + per_head[1].left) / 2
    for t, block in enumerate(per_token):  # every token gives each head one of its rows
        diagrams.arrow(ax, block.bottom_mid, (middle + 0.5 * (t - 1), per_head[0].top + 0.9))
    diagrams.label(
        ax, (5.8, 3.0), "transpose(1, 2):\n(1, 2, 3, 2) = (B, H, T, D)", fontsize="medium"
    )
    diagrams.fit(
        ax, x_box, *per_token, *per_head, diagrams.Bounds(-0.2, -0.2, 16.0, 8.0), margin=0.3
    )
    return fig


@figure("view-transpose", diagram=True)
def view_transpose() -> Figure:
    """The deeper track's view and transpose, tokens and heads numbered from 1."""
    return _view_transpose(first=1)


@figure("view-transpose-start", diagram=True)
def view_transpose_start() -> Figure:
    """The first pass's view and transpose, tokens and heads numbered from 0 as in code."""
    return _view_transpose(first=0)


@figure("stacked-projection", diagram=True)
def stacked_projection() -> Figure:
    """The wrapper's two heads' W_query weights (seed 123), stacked by rows, and the queries."""

    def build() -> Figure:
        _, inputs = examples.your_journey()
        wrapper = attnlab.MultiHeadAttentionWrapper(d_in=3, d_out=4, num_heads=2, causal=True)
        heads = [h for h in wrapper.heads if isinstance(h, attnlab.CausalAttention)]
        with torch.no_grad():
            weight = torch.cat([h.W_query.weight for h in heads])  # (4, 3) = (d_out, d_in)
            queries = inputs @ weight.T  # (6, 4)
        fig, ax = diagrams.canvas(8.0, 3.6)
        grid = matrix_style((1.3, 0.75), decimals=2, fontsize="medium")
        w1 = grid(ax, weight[:2], (0, 2.6), role="queries", title="head 1 (2, 3)")
        w2 = grid(ax, weight[2:], (0, -0.6), role="queries", title="head 2 (2, 3)")
        stacked = grid(ax, weight, (6.4, 0.5), role="queries", title="W_query (4, 3)")
        q = grid(ax, queries, (13.6, -0.6), role="queries", title="queries (6, 4)")
        diagrams.arrow(ax, w1.right_mid, (stacked.left, stacked.top - 0.75))
        diagrams.arrow(ax, w2.right_mid, (stacked.left, stacked.bottom + 0.75))
        diagrams.arrow(ax, stacked.right_mid, q.left_mid, "x @ W.T")
        diagrams.label(ax, (14.9, -1.3), "head 1", fontsize="medium")
        diagrams.label(ax, (17.5, -1.3), "head 2", fontsize="medium")
        diagrams.fit(ax, w1, w2, stacked, q, diagrams.Bounds(-0.2, -1.7, 19.0, 4.6), margin=0.3)
        return fig

    return seeded(123, build)


@figure("padding-mask", diagram=True)
def padding_mask() -> Figure:
    """Query 1 of the cross-attention chapter's padded context: mask, weights, and no mask."""

    def build() -> Figure:
        x = examples.life_is_short().inputs  # (6, 16)
        context = examples.second_sequence(num_tokens=8, embed_dim=10)  # (8, 10)
        padded = torch.cat([context[:5], torch.zeros(3, 10)])  # (8, 10)
        real = torch.tensor([True] * 5 + [False] * 3)  # (S,)
        cross = attnlab.CrossAttention(d_in=16, d_context=10, d_out=16, num_heads=4)
        with torch.no_grad():
            _, masked = cross(x, padded, key_padding_mask=real, need_weights=True)  # (6, 8)
            _, unmasked = cross(x, padded, need_weights=True)  # (6, 8)
        fig, ax = diagrams.canvas(8.0, 3.0)
        cell = (1.5, 0.9)
        slots = [f"c{j + 1}" for j in range(5)] + ["pad"] * 3
        rows = [
            ("mask (True = real)", real.float(), None, 0, "input"),
            ("weights", masked[0], ~real, 2, "weights"),
            ("no mask", unmasked[0], None, 2, "masked"),
        ]
        bounds = []
        for k, (name, values, hide, decimals, role) in enumerate(rows):
            y = (len(rows) - 1 - k) * 1.5
            b = diagrams.matrix(
                ax, values, (0, y), role=role, decimals=decimals, cell=cell, fontsize="medium",
                masked=hide, masked_text="0", col_labels=slots if k == 0 else None,
            )  # fmt: skip
            diagrams.label(ax, (b.right + 0.3, y + 0.45), name, ha="left", fontsize="medium")
            bounds.append(b)
        diagrams.fit(ax, *bounds, diagrams.Bounds(0, 0, bounds[0].right + 5.2, 4.6))
        return fig

    return seeded(123, build)
