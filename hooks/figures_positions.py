"""The figures of "Positions" and of the multi-head idea ("Toward the transformer").

Each figure is registered with ``@figure`` (``hooks/figure_registry.py``) and drawn
by the figures hook (``hooks/figures.py``); both are conceptual diagrams in the role
colours of ``hooks/diagrams.py``, drawn from the package's real tensors.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from matplotlib.figure import Figure

import attnlab
from attnlab import examples
from hooks import diagrams
from hooks.figure_kit import journey_self_attention, matrix_style, seeded
from hooks.figure_registry import figure


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
    return _permutation_panels(module, decimals=3)


def attend(x: torch.Tensor) -> torch.Tensor:
    """Page one's attention for every word at once, no learned weights: ``(T, d) -> (T, d)``."""
    return torch.softmax(x @ x.transpose(0, 1), dim=1) @ x


@figure("permutation-equivariance-start", diagram=True)
def permutation_equivariance_start() -> Figure:
    """The first pass's version: page one's attention, whose six output rows differ visibly.

    The seeded head's outputs (``permutation-equivariance``) are nearly equal rows, so
    that their reversal cannot be seen.
    """
    return _permutation_panels(attend, decimals=2)


def _permutation_panels(module: Callable[[torch.Tensor], torch.Tensor], decimals: int) -> Figure:
    """``module`` on the sentence, on its reversal, and on its reversal with positions."""
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
    grid = matrix_style((1.5, 0.8), fontsize="small")
    fig, ax = diagrams.canvas(8.0, 5.2)
    drawn = []
    for p, (title, x, labels) in enumerate(panels):
        left = 1.6 + p * 7.6
        with torch.no_grad():
            out = module(x)  # (6, 2) for the head, (6, 3) for page one's attention
        top = grid(ax, x, (left, 8.2), role="input", row_labels=labels, title=title)
        shift = 0.75 * (x.shape[1] - out.shape[1])  # centre a narrower output under the input
        bottom = grid(ax, out, (left + shift, 0), role="output", decimals=decimals,
                      row_labels=labels)  # fmt: skip
        diagrams.arrow(ax, top.bottom_mid, (top.bottom_mid[0], bottom.top + 0.1))
        diagrams.label(ax, (top.bottom_mid[0] + 0.3, 6.4), "attention", ha="left", fontsize="small")
        drawn += [top, bottom]
    diagrams.label(ax, (11.3, -1.0), "same rows, reversed", role="output", fontsize="small")
    diagrams.label(ax, (18.9, -1.0), "new numbers", role="output", fontsize="small")
    diagrams.fit(ax, *drawn, diagrams.Bounds(-0.5, -1.6, 23.0, 14.0), margin=0.3)
    return fig


@figure("multi-head-concat", diagram=True)
def multi_head_concat() -> Figure:
    """The multi-head chapter's wrapper (seed 123), its two heads concatenated, then W^O."""
    return seeded(123, _multi_head_concat)


def _multi_head_concat() -> Figure:
    wrapper = attnlab.MultiHeadAttentionWrapper(d_in=3, d_out=4, num_heads=2, causal=True)
    out_proj = torch.nn.Linear(4, 4)  # drawn after the heads, as on the page
    inputs = examples.your_journey().inputs  # (6, 3)
    with torch.no_grad():
        concat = wrapper(inputs)  # (6, 4): columns 0-1 head 1, 2-3 head 2
        per_head = concat.view(6, 2, 2).transpose(0, 1)  # (2, 6, 2)
        output = out_proj(concat)  # (6, 4)
    grid = matrix_style((1.3, 0.75), fontsize="medium")
    fig, ax = diagrams.canvas(8.0, 5.6)
    h1 = grid(ax, per_head[0], (0, 6.2), role="output", title="head 1 (6, 2)")
    h2 = grid(ax, per_head[1], (4.4, 6.2), role="output", title="head 2 (6, 2)")
    c = grid(ax, concat, (11.0, 6.2), role="output", title="concatenated (6, 4)")
    W_O = out_proj.weight.detach().T  # (4, 4): the formula's W^O, concat @ W^O + bias
    w = grid(ax, W_O, (2.2, -0.3), role="input", title="Wᴼ = out_proj.weightᵀ (4, 4)")
    o = grid(ax, output, (11.0, -1.0), role="output", title="output (6, 4)")
    diagrams.arrow(ax, h2.right_mid, c.left_mid, "cat")
    diagrams.arrow(ax, (c.left + 2.6, c.bottom - 0.2), (w.right + 0.2, w.top + 0.9), "concat @")
    diagrams.arrow(ax, w.right_mid, o.left_mid, "+ bias")
    diagrams.fit(ax, h1, h2, c, w, o, diagrams.Bounds(-0.2, -1.0, 16.4, 11.4), margin=0.3)
    return fig
