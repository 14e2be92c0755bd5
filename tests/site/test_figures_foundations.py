"""The Foundations' figures show the running example's own numbers, as the pages compute them.

Each figure is built directly from its registered builder (no site build); the numbers
are recomputed here the way the chapter's code does, in plain PyTorch.
"""

from __future__ import annotations

import matplotlib.style
import pytest
import torch

from attnlab import examples
from hooks import figures as hook


def _texts(name: str) -> list[str]:
    with matplotlib.style.context("default"):
        fig = hook.FIGURES[name]()
    return [text.get_text() for ax in fig.axes for text in ax.texts]


def _shows(texts: list[str], cells: list[str]) -> bool:
    return any(texts[i : i + len(cells)] == cells for i in range(len(texts)))


def _chapter_weights() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The trainable-weights chapter's draws: seed 123, then query, key, value."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        W_query, W_key, W_value = (torch.rand(3, 3) for _ in range(3))
    return W_query, W_key, W_value


def test_tokens_to_vectors_shows_the_sentences_ids_and_seeded_rows() -> None:
    words = examples.your_journey().words
    vocab = {word: i for i, word in enumerate(sorted(set(words)))}
    token_ids = [vocab[word] for word in words]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        rows = torch.nn.Embedding(6, 3)(torch.tensor(token_ids)).detach()
    texts = _texts("tokens-to-vectors")
    assert _shows(texts, [str(i) for i in token_ids])
    assert _shows(texts, [f"{v:.2f}" for v in rows.flatten().tolist()])


def test_journey_qkv_row_shows_journeys_weights_and_context_vector() -> None:
    inputs = examples.your_journey().inputs
    W_query, W_key, W_value = _chapter_weights()
    queries, keys, values = inputs @ W_query, inputs @ W_key, inputs @ W_value
    weights = torch.softmax(queries[1] @ keys.transpose(-2, -1) / 3**0.5, dim=-1)  # (6,)
    texts = _texts("journey-qkv-row")
    assert _shows(texts, [f"{v:.2f}" for v in weights.tolist()])
    assert _shows(texts, [f"{v:.2f}" for v in (weights @ values).tolist()])
    assert _shows(texts, ["0.69", "1.06", "1.14"])  # the page's printed z^(2), rounded


def test_gradient_step_raises_journeys_weight_on_starts() -> None:
    texts = _texts("journey-gradient-step")
    before, after = texts[:6], texts[6:12]
    assert (before[2], after[2]) == (".21", ".23")  # alpha_23: 0.2117 -> 0.2322, as printed


@pytest.mark.parametrize(
    ("name", "cells"),
    [
        ("journey-context-terms", ["0.44", "0.65", "0.57"]),  # z^(2) without weights
        ("journey-batch", ["-0.074", "0.071"]),  # V2, seed 789: Raschka's first row
    ],
)
def test_diagram_shows_the_chapters_result(name: str, cells: list[str]) -> None:
    assert _shows(_texts(name), cells)


def test_decoder_overview_says_what_the_finale_changes() -> None:
    texts = " ".join(_texts("decoder-overview"))
    assert "RMSNorm" in texts and "GQA" in texts
    assert "Watch attention learn" not in texts  # that chapter trains no vocabulary head
