"""The figures of the first pass (``docs/start/``): what attention does, before the maths.

Three are drawn from SmolLM2-135M (the model of "A real LLM", loaded once per build by
``figures_real_llm.smollm2``) on the pages' sentence, with the heads the pages name;
one is the library picture of queries, keys and values, whose weights are a softmax of
dot products computed here. Each is registered with ``@figure`` and drawn by the figures
hook.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

import attnlab
from attnlab import examples, plot
from hooks import diagrams
from hooks.figure_kit import matrix_style
from hooks.figure_registry import figure

#: The first pass's sentence (Alammar's, from "The Illustrated Transformer").
SENTENCE = "The animal didn't cross the street because it was too tired."
#: (layer, head) of the three heads page one shows, counted from zero as in the code.
PREVIOUS_TOKEN_HEAD = (16, 0)
INDUCTION_HEAD = (18, 6)
REFERENT_HEAD = (13, 8)
#: The layer whose nine heads "Causal attention and several heads" shows side by side.
LAYER_OF_HEADS = 11
#: Weights below this are not drawn as lines (the caption says so).
SHOWN_WEIGHT = 0.2


class Reading(NamedTuple):
    """SmolLM2's attention on a text: its tokens as words, and every head's weights."""

    words: list[str]
    maps: torch.Tensor  # (N, H, T, T): layer, head, query, key


@functools.cache
def reading(text: str) -> Reading:
    """SmolLM2's tokens (as words, spaces stripped) and attention maps on ``text``."""
    from attnlab.llama.interpret import attention_maps
    from hooks.figures_real_llm import smollm2

    model, tokenizer = smollm2()
    ids = tokenizer.encode(text)
    words = [tokenizer.decode([i]).strip() for i in ids]
    return Reading(words, attention_maps(model, torch.tensor(ids))[0])


def _column(ax: Axes, x: float, words: list[str], role: str, width: float) -> list[float]:
    """Draw ``words`` as a column of boxes, top to bottom; return each box's centre ``y``."""
    ys = [-1.0 * i for i in range(len(words))]
    for word, y in zip(words, ys, strict=True):
        diagrams.operator(ax, (x, y), word, role=role, size=(width, 0.8), fontsize="medium")
    return ys


def _lines(
    ax: Axes,
    rows: list[tuple[float, torch.Tensor]],
    key_ys: list[float],
    x: tuple[float, float],
    *,
    label: bool = False,
) -> None:
    """One line per weight above ``SHOWN_WEIGHT``, from a query's ``y`` to each key's.

    Weight on the first word (where many heads park what they do not need, an attention
    sink) is left out, as the captions say.
    """
    for query_y, weights in rows:
        for key, weight in enumerate(weights.tolist()):
            if weight < SHOWN_WEIGHT or key == 0:
                continue
            ax.plot(
                list(x), [query_y, key_ys[key]], color=diagrams.ROLE_COLOURS["weights"],
                linewidth=1.0 + 5.0 * weight, alpha=0.35 + 0.65 * weight, solid_capstyle="round",
            )  # fmt: skip
            if label:
                mid = (0.35 * x[0] + 0.65 * x[1], 0.35 * query_y + 0.65 * key_ys[key] + 0.35)
                diagrams.label(ax, mid, f"{weight:.2f}", fontsize="medium")


@figure("three-heads", diagram=True)
def three_heads() -> Figure:
    """Three of SmolLM2's heads on the sentence: one back, copy what came next, it → animal.

    Left column: the word that looks (queries colour); right column: the words it can
    look at (keys colour); a line for every weight of at least ``SHOWN_WEIGHT``, thicker
    for a larger weight. The induction panel reads the sentence written twice and shows
    where the second copy looks in the first.
    """
    once = reading(SENTENCE)
    twice = reading(SENTENCE + " " + SENTENCE)
    T = len(once.words)
    fig, ax = diagrams.canvas(8.0, 6.4)
    width, gap, panel = 1.9, 2.2, 7.3
    drawn = []
    panels = [
        ("one word back", PREVIOUS_TOKEN_HEAD, once, range(T), 0, ("word", "looks at")),
        ("what came next last time", INDUCTION_HEAD, twice, range(T + 1, 2 * T), T,
         ("2nd copy", "1st copy")),
        ("“it” → its noun", REFERENT_HEAD, once, [once.words.index("it")], 0,
         ("word", "looks at")),
    ]  # fmt: skip
    for p, (title, (layer, head), read, queries, offset, headers) in enumerate(panels):
        left = p * panel
        right = left + width + gap
        query_words = read.words[offset : offset + T]
        query_ys = _column(ax, left + width / 2, query_words, "queries", width)
        key_ys = _column(ax, right + width / 2, read.words[:T], "keys", width)
        rows = [
            (query_ys[q - offset], read.maps[layer, head, q, :T]) for q in queries
        ]  # the weights on the (first copy of the) sentence
        _lines(ax, rows, key_ys, (left + width, right), label=len(rows) == 1)
        diagrams.label(ax, (left + width + gap / 2, 2.6), title, fontsize="large")
        diagrams.label(ax, (left + width + gap / 2, 1.8), f"layer {layer}, head {head}",
                       fontsize="medium")  # fmt: skip
        for x, header in zip((left, right), headers, strict=True):
            diagrams.label(ax, (x + width / 2, 0.85), header, fontsize="medium")
        drawn.append(diagrams.Bounds(left, -T + 0.4, right + width, 3.0))
    diagrams.fit(ax, *drawn, margin=0.2)
    return fig


@figure("attention-flow-words", diagram=True)
def attention_flow_words() -> Figure:
    """``attention-flow`` in words, for page one: journey · every input → softmax → mix.

    The deeper track's ``attention-flow`` labels the same numbers with the book's
    symbols (x⁽²⁾, α₂ⱼ, z⁽²⁾), which the first pass never defines.
    """
    words, inputs = examples.your_journey()
    query = inputs[1]  # (3,) "journey"
    scores = inputs @ query  # (T,)
    weights = attnlab.softmax(scores)  # (T,)
    context = weights @ inputs  # (3,)
    fig, ax = diagrams.canvas(6.0, 3.7)
    T = len(words)
    grid = matrix_style((1.3, 1.0))
    x_in = grid(ax, inputs, (0, 0), role="keys", row_labels=list(words), title="inputs")
    q = grid(ax, query.unsqueeze(0), (0, T + 1.6), role="queries", title="journey")
    s = grid(ax, scores.unsqueeze(-1), (6.0, 0), role="weights", title="scores")
    w = grid(ax, weights.unsqueeze(-1), (9.6, 0), role="weights", title="weights")
    z = grid(ax, context.unsqueeze(0), (13.0, 4.0), role="output", title="context")
    diagrams.arrow(ax, x_in.right_mid, s.left_mid, "dot")
    diagrams.arrow(ax, q.right_mid, (s.left + 0.6, s.top + 0.9), rad=-0.2)
    diagrams.arrow(ax, s.right_mid, w.left_mid, "softmax")
    diagrams.arrow(ax, w.right_mid, z.bottom_mid, rad=0.3)
    diagrams.label(ax, (15.0, 2.2), "sum of\nweight × input", fontsize="medium")
    diagrams.fit(ax, x_in, q, s, w, z, diagrams.Bounds(-2.0, 0, 17.0, T + 3.4))
    return fig


# The library picture: four books, their catalogue cards, and one question.
SHELF = ("cats", "dogs", "soup", "stars")
#: Each card's topic vector over (animals, cats, cooking); the query asks for cats.
CARDS = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
QUESTION = torch.tensor([2.2, 2.0, 0.0])  # weights 0.86, 0.12, 0.01, 0.01: they add to 1


def library_weights() -> torch.Tensor:
    """softmax(cards · question): how much of each book the reader takes away. Shape ``(4,)``."""
    return attnlab.softmax(CARDS @ QUESTION)


@figure("library-lookup", diagram=True)
def library_lookup() -> Figure:
    """Attention as a library: a question (query) against catalogue cards (keys), books (values).

    The weights are ``library_weights()``; what the reader takes away is the weighted mix
    of the books, drawn as lines as thick as each book's weight.
    """
    weights = library_weights()  # (4,)
    fig, ax = diagrams.canvas(8.0, 3.6)
    S = len(SHELF)
    colour = diagrams.ROLE_COLOURS["weights"]
    query = diagrams.operator(ax, (0.0, -1.5), "query:\n“a book\nabout cats”", role="queries",
                              size=(3.0, 2.2))  # fmt: skip
    shares = zip(SHELF, weights.tolist(), strict=True)
    mix = " +\n".join(f"{w:.2f} × {topic}" for topic, w in shares)
    out = diagrams.operator(ax, (15.0, -1.5), mix, role="output", size=(3.2, 3.2))
    drawn = [query, out]
    for j, (topic, weight) in enumerate(zip(SHELF, weights.tolist(), strict=True)):
        y = -1.0 * j
        key = diagrams.operator(ax, (6.2, y), f"card: {topic}", role="keys", size=(2.6, 0.8))
        value = diagrams.operator(ax, (9.6, y), f"book: {topic}", role="values", size=(2.8, 0.8))
        for start, end in (((query.right, -1.5), key.left_mid), (value.right_mid, out.left_mid)):
            ax.plot([start[0], end[0]], [start[1], end[1]], color=colour,
                    linewidth=1.0 + 5.0 * weight, alpha=0.35 + 0.65 * weight)  # fmt: skip
        diagrams.label(ax, (3.9, y + 0.05), f"{weight:.2f}", fontsize="medium")
        drawn += [key, value]
    for x, text in ((3.9, "weights"), (6.2, "keys"), (9.6, "values"), (15.0, "output")):
        diagrams.label(ax, (x, 0.95), text, fontsize="medium")
    diagrams.fit(ax, *drawn, diagrams.Bounds(0, -S + 0.5, 1, 1.3), margin=0.2)
    return fig


@figure("layer-heads")
def layer_heads() -> Figure:
    """The nine heads of one SmolLM2 layer on the sentence, one heatmap each."""
    read = reading(SENTENCE)
    maps = read.maps[LAYER_OF_HEADS]  # (H, T, T)
    fig = Figure(figsize=(8.0, 8.4), layout="constrained")
    axes = fig.subplots(3, 3)
    blank = [""] * len(read.words)
    roles = {1: "one word back", 6: "the word itself"}
    for head, ax in enumerate(axes.flat):
        first_column, last_row = head % 3 == 0, head // 3 == 2
        plot.plot_attention(
            maps[head], read.words if first_column else blank, read.words if last_row else blank,
            ax=ax, annotate=False, colorbar=False, vmin=0.0, vmax=1.0,
            title=f"head {head}" + (f": {roles[head]}" if head in roles else ""),
            xlabel="", ylabel="",
        )  # fmt: skip
        if last_row:  # at 45 degrees the 13 words overlap on a phone: stand them upright
            ax.set_xticks(range(len(read.words)), read.words, rotation=90, ha="center")
    fig.colorbar(axes[0, 0].images[0], ax=axes, shrink=0.5, label="weight")
    return fig
