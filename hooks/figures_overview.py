"""The overview figures of the Foundations, drawn from ``attnlab``.

Why attention (the recurrent bottleneck, additive against dot-product weights), the
whole decoder (the big picture), words to vectors and the running example's projections
(trainable weights), registered with ``@figure`` and drawn by the figures hook.
"""

from __future__ import annotations

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

import attnlab
from attnlab import examples
from hooks import diagrams
from hooks.figure_kit import SMALL_CELL, projection_rows, seeded
from hooks.figure_registry import figure
from hooks.figures_foundations import paired_bars

_CENTRE_X = 4.0
_BOX_WIDTH = 6.0


def _box(ax: Axes, y: float, text: str, role: str, height: float = 0.9) -> diagrams.Bounds:
    return diagrams.operator(
        ax, (_CENTRE_X, y), text, role=role, size=(_BOX_WIDTH, height), fontsize="large"
    )


def _chapter(ax: Axes, y: float, text: str) -> None:
    diagrams.label(ax, (_CENTRE_X + _BOX_WIDTH / 2 + 0.4, y), text, ha="left", fontsize="medium")


def _residual(ax: Axes, top: float, plus_y: float) -> None:
    """The skip path: from the stream at ``top`` around the sublayer into the + at ``plus_y``."""
    left = _CENTRE_X - _BOX_WIDTH / 2 - 0.8
    colour = diagrams.text_colour()
    ax.plot([_CENTRE_X, left, left], [top, top, plus_y], color=colour, linewidth=1.5)
    diagrams.arrow(ax, (left, plus_y), (_CENTRE_X - 0.45, plus_y))


@figure("decoder-overview", diagram=True)
def decoder_overview() -> Figure:
    """The whole decoder, tokens to logits, each box labelled with the chapter that builds it."""
    words = examples.your_journey().words
    fig, ax = diagrams.canvas(6.4, 9.0)
    bounds = []
    stream: list[tuple[float, float]] = []  # (top, bottom) of each box on the main path

    def add(b: diagrams.Bounds) -> diagrams.Bounds:
        if stream:
            diagrams.arrow(ax, (_CENTRE_X, stream[-1][1]), (_CENTRE_X, b.top))
        stream.append((b.top, b.bottom))
        bounds.append(b)
        return b

    add(_box(ax, 17.0, " ".join(words) + "\ntoken ids (T,)", "input", 1.2))
    _chapter(ax, 17.0, "From words\nto vectors")
    add(_box(ax, 15.0, "token embedding + positions\n(T, d)", "input", 1.2))
    _chapter(ax, 15.0, "From words\nto vectors;\nPositions")

    # One block, repeated N times: pre-norm attention and feed-forward, each with a residual.
    norm1 = add(_box(ax, 12.6, "LayerNorm", "input", 0.8))
    _chapter(ax, 12.6, "this page")
    add(_box(ax, 11.0, "masked multi-head attention\nsoftmax(QKᵀ/√d_k) V", "weights", 1.4))
    _chapter(ax, 11.0, "First pass;\nDeeper track")
    plus1 = add(diagrams.operator(ax, (_CENTRE_X, 9.4), "+", size=(0.9, 0.7)))
    _residual(ax, norm1.top + 0.45, 9.4)
    norm2 = add(_box(ax, 8.0, "LayerNorm", "input", 0.8))
    add(_box(ax, 6.6, "feed-forward: Linear, GELU, Linear", "input", 0.9))
    _chapter(ax, 6.6, "this page")
    add(diagrams.operator(ax, (_CENTRE_X, 5.2), "+", size=(0.9, 0.7)))
    _residual(ax, norm2.top + 0.4 + (plus1.bottom - norm2.top - 0.4) / 2, 5.2)

    frame_top, frame_bottom = norm1.top + 0.9, 4.5
    left, right = _CENTRE_X - _BOX_WIDTH / 2 - 1.3, _CENTRE_X + _BOX_WIDTH / 2 + 0.3
    ax.plot(
        [left, right, right, left, left],
        [frame_top, frame_top, frame_bottom, frame_bottom, frame_top],
        color=diagrams.text_colour(),
        linewidth=1.0,
        linestyle="--",
    )
    diagrams.label(ax, (right + 0.2, frame_bottom + 0.3), "× N blocks", ha="left")

    add(_box(ax, 3.0, "LayerNorm, Linear: logits\n(T, vocabulary size)", "output", 1.2))
    _chapter(ax, 3.0, "this page")
    diagrams.label(
        ax,
        (_CENTRE_X, 1.6),
        "trained, with RMSNorm, SwiGLU, RoPE, GQA:\nA real LLM",
        fontsize="medium",
    )
    extent = diagrams.Bounds(left, 0.9, _CENTRE_X + _BOX_WIDTH / 2 + 4.2, frame_top)
    diagrams.fit(ax, *bounds, extent, margin=0.4)
    return fig


@figure("journey-projections", diagram=True)
def journey_projections() -> Figure:
    """Seed-123 ``(3, 3)`` weights on "Your journey…": x @ W = queries, keys, values."""
    inputs = examples.your_journey().inputs  # (6, 3)
    weights = examples.seeded_weights(3, 3)  # seed 123, (3, 3) each, global RNG untouched
    fig, ax = diagrams.canvas(4.8, 6.4)
    bounds = projection_rows(ax, inputs, weights._asdict(), decimals=2, cell=(1.2, 0.8))
    diagrams.fit(ax, *bounds, margin=0.9)
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
        fig, ax = diagrams.canvas(6.4, 4.9)
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
        diagrams.arrow(ax, (row.right, -1.25), (14.0, 1.05), "Σ", rad=0.2)
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


def _additive_and_dot_weights() -> tuple[torch.Tensor, torch.Tensor]:
    """Why-attention's two rows of weights: the decoder state against the six RNN states.

    The draws of the chapter's blocks: seed 123, the ``nn.RNN(3, 3)``, then the additive
    score's ``W_query``, ``W_key`` (3, 4) and ``w_score`` (4,).
    """

    def build() -> tuple[torch.Tensor, torch.Tensor]:
        inputs = examples.your_journey().inputs  # (6, 3)
        encoder = torch.nn.RNN(input_size=3, hidden_size=3, batch_first=True)
        with torch.no_grad():
            states, last = encoder(inputs.unsqueeze(0))  # (1, 6, 3), (1, 1, 3)
        keys, query = states[0], last[0]  # (6, 3), (1, 3)
        W_query, W_key = torch.rand(3, 4), torch.rand(3, 4)
        w_score = torch.rand(4) - 0.5
        additive = attnlab.additive_attention_scores(query, keys, W_query, W_key, w_score)
        dot = query @ keys.transpose(-2, -1)  # (1, 6)
        return torch.softmax(additive, dim=-1)[0], torch.softmax(dot, dim=-1)[0]

    return seeded(123, build)


@figure("additive-vs-dot")
def additive_vs_dot() -> Figure:
    """The decoder's weights over the six encoder states: additive against dot product."""
    additive, dot = _additive_and_dot_weights()
    return paired_bars(
        examples.your_journey().words,
        {"additive": additive, "dot product": dot},
        ylabel="attention weight",
        title="one decoder step, six encoder states",
    )


@figure("tokens-to-vectors", diagram=True)
def tokens_to_vectors() -> Figure:
    """Words → ids (sorted vocabulary) → rows of the seeded ``nn.Embedding(6, 3)``."""
    words = examples.your_journey().words
    vocab = {word: i for i, word in enumerate(sorted(set(words)))}
    token_ids = torch.tensor([vocab[word] for word in words])  # (6,)
    embedding = seeded(123, lambda: torch.nn.Embedding(6, 3))
    with torch.no_grad():
        rows_of = embedding(token_ids)  # (6, 3)
    fig, ax = diagrams.canvas(5.0, 4.2)
    ids = diagrams.matrix(
        ax, token_ids.unsqueeze(-1).float(), (0, 0), row_labels=list(words), title="id",
        fontsize="large",
    )  # fmt: skip
    rows = diagrams.matrix(
        ax, rows_of, (3.0, 0), decimals=2, cell=(1.6, 1.0), fontsize="large",
        title="embedding row",
    )  # fmt: skip
    for i in range(len(words)):
        y = len(words) - 1 - i + 0.5
        diagrams.arrow(ax, (ids.right, y), (rows.left, y))
    diagrams.fit(ax, ids, rows, diagrams.Bounds(-2.6, 0.0, rows.right, 7.0))
    return fig


@figure("journey-vectors")
def journey_vectors() -> Figure:
    """The running example's six hand-made vectors as arrows from the origin, in 3-D."""
    words, inputs = examples.your_journey()
    fig = Figure(figsize=(4.6, 4.4), layout="constrained")
    ax = fig.add_subplot(projection="3d")
    colour = diagrams.ROLE_COLOURS["keys"]
    lift = {"starts": -0.12, "journey": 0.06}  # the two nearly coincide: one above, one below
    for word, (x, y, z) in zip(words, inputs.tolist(), strict=True):
        ax.quiver(0, 0, 0, x, y, z, color=colour, arrow_length_ratio=0.08, linewidth=1.8)
        ax.text(x, y, z + lift.get(word, 0.04), word, fontsize=12, ha="left")
    for setter in (ax.set_xlim, ax.set_ylim, ax.set_zlim):
        setter(0, 1)
    ax.set_xlabel("dim 1", fontsize=10)
    ax.set_ylabel("dim 2", fontsize=10)
    ax.set_zlabel("dim 3", fontsize=10)
    ax.view_init(elev=15, azim=-35)
    return fig
