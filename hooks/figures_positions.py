"""The figures of "Positions" and of the multi-head idea ("Toward the transformer").

Each figure is registered with ``@figure`` (``hooks/figure_registry.py``) and drawn
by the figures hook (``hooks/figures.py``); both are conceptual diagrams in the role
colours of ``hooks/diagrams.py``, drawn from the package's real tensors.
"""

from __future__ import annotations

import diagrams
import torch
from figure_kit import journey_self_attention, matrix_style, seeded
from figure_registry import figure
from matplotlib.figure import Figure

import attnlab
from attnlab import examples


def sinusoidal_positions(num_tokens: int, dim: int) -> torch.Tensor:
    """The original transformer's fixed position vectors (as on the positions page).

    Shape:
        output: ``(num_tokens, dim)``.
    """
    positions = torch.arange(num_tokens, dtype=torch.float32)[:, None]  # (T, 1)
    dims = torch.arange(dim, dtype=torch.float32)[None, :]  # (1, d)
    angles = positions / 10000 ** (2 * (dims // 2) / dim)  # (T, d)
    return torch.where(dims % 2 == 0, torch.sin(angles), torch.cos(angles))  # (T, d)


@figure("permutation-equivariance", diagram=True)
def permutation_equivariance() -> Figure:
    """SelfAttentionV2 (seed 789) on the sentence, reversed, and reversed with positions."""
    module = journey_self_attention()
    sentence = examples.your_journey()
    inputs = sentence.inputs  # (6, 3)
    words = list(sentence.words)
    order = torch.arange(5, -1, -1)  # reverse the sentence
    pos = sinusoidal_positions(6, 3)  # (6, 3)
    panels = [
        ("the sentence", inputs, words),
        ("reversed", inputs[order], [words[i] for i in order]),
        ("reversed + positions", inputs[order] + pos, [words[i] for i in order]),
    ]
    grid = matrix_style((1.4, 0.8), fontsize="x-small")
    fig, ax = diagrams.canvas(8.0, 5.2)
    drawn = []
    for p, (title, x, labels) in enumerate(panels):
        left = 1.6 + p * 7.6
        with torch.no_grad():
            out = module(x)  # (6, 2)
        top = grid(ax, x, (left, 8.2), role="input", row_labels=labels, title=title)
        bottom = grid(ax, out, (left + 0.7, 0), role="output", decimals=3, row_labels=labels)
        diagrams.arrow(ax, top.bottom_mid, (bottom.left + 1.4, bottom.top + 0.1))
        diagrams.label(ax, (top.bottom_mid[0] + 0.3, 6.4), "attention", ha="left", fontsize="small")
        drawn += [top, bottom]
    diagrams.label(ax, (11.3, -1.0), "same rows, reversed", role="output", fontsize="small")
    diagrams.label(ax, (18.9, -1.0), "new numbers", role="output", fontsize="small")
    diagrams.fit(ax, *drawn, diagrams.Bounds(-0.5, -1.6, 23.0, 14.0), margin=0.3)
    return fig


@figure("multi-head-concat", diagram=True)
def multi_head_concat() -> Figure:
    """Two heads of MultiHeadAttention(3, 4, num_heads=2) (seed 123): concat, then W^O."""
    return seeded(123, _multi_head_concat)


def _multi_head_concat() -> Figure:
    module = attnlab.MultiHeadAttention(d_in=3, d_out=4, num_heads=2)  # the first draw
    inputs = examples.your_journey().inputs  # (6, 3)
    with torch.no_grad():
        x = inputs[None]  # (1, 6, 3)
        queries = module.split_heads(module.W_query(x))  # (1, 2, 6, 2)
        keys = module.split_heads(module.W_key(x))  # (1, 2, 6, 2)
        values = module.split_heads(module.W_value(x))  # (1, 2, 6, 2)
        per_head = attnlab.scaled_dot_product_attention(queries, keys, values)[0]  # (2, 6, 2)
        concat = per_head.transpose(0, 1).reshape(6, 4)  # (6, 4)
        output = module.out_proj(concat)  # (6, 4)
    grid = matrix_style((1.2, 0.7), fontsize="x-small")
    fig, ax = diagrams.canvas(8.0, 3.0)
    h1 = grid(ax, per_head[0], (0, 2.6), role="output", title="head 1 (6, 2)")
    h2 = grid(ax, per_head[1], (0, -3.4), role="output", title="head 2 (6, 2)")
    c = grid(ax, concat, (5.2, -0.4), role="output", title="concatenated (6, 4)")
    W_out = module.out_proj.weight.detach().T  # (4, 4): concat @ W_out + bias
    w = grid(ax, W_out, (12.4, 0.0), role="input", title="out_proj: W_O (4, 4)")
    o = grid(ax, output, (19.6, -0.4), role="output", title="output (6, 4)")
    diagrams.arrow(ax, h1.right_mid, (c.left, c.top - 1.0))
    diagrams.arrow(ax, h2.right_mid, (c.left, c.bottom + 1.0))
    diagrams.arrow(ax, c.right_mid, w.left_mid, "@")
    diagrams.arrow(ax, w.right_mid, o.left_mid, "+ bias")
    diagrams.fit(ax, h1, h2, c, w, o, margin=0.5)
    return fig
