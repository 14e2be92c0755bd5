"""Sampling's temperature against its definition, on a tiny random model (nothing loaded).

The reference is written out here: ``torch.multinomial(softmax(logits / T))`` with a
generator seeded as ``generate`` seeds its own, the logits of the whole sequence read
again at every step (no cache). The tiny model's logits are sharp (std ~8), so the
temperatures tried are large enough to make a draw differ from greedy decoding.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from tiny_llama import TINY, tiny_model

from attnlab.llama import LlamaModel
from attnlab.llama.generate import Sampling, pick_next_tokens

TWO_LAYERS = replace(TINY, num_layers=2)


@pytest.fixture(scope="module")
def model() -> LlamaModel:
    return tiny_model(TWO_LAYERS)


def prompts() -> torch.Tensor:
    return torch.randint(0, 64, (4, 3), generator=torch.Generator().manual_seed(5))  # (B, T)


def reference_sample(
    model: LlamaModel, ids: torch.Tensor, n: int, T: float, seed: int
) -> torch.Tensor:
    """n tokens drawn from softmax(logits / T) by torch.multinomial, no cache, no filters."""
    generator = torch.Generator().manual_seed(seed)
    tokens = ids  # (B, t)
    for _ in range(n):
        logits = model(tokens)[:, -1, :]  # (B, V)
        probs = torch.softmax(logits.double() / T, dim=-1)  # (B, V)
        next_ids = torch.multinomial(probs.float(), 1, generator=generator)  # (B, 1)
        tokens = torch.cat([tokens, next_ids], dim=-1)
    return tokens


@pytest.mark.parametrize("T", [0.5, 3.0, 8.0])
def test_pick_next_tokens_draws_what_multinomial_draws_at_that_temperature(T: float) -> None:
    """One step on 256 rows of spread logits: the same tokens as the definition's draw."""
    logits = torch.randn(256, 40, generator=torch.Generator().manual_seed(1)) * 3  # (B, V)
    expected = torch.multinomial(
        torch.softmax(logits / T, dim=-1), 1, generator=torch.Generator().manual_seed(7)
    ).squeeze(-1)  # (B,)
    ours = pick_next_tokens(logits, Sampling(temperature=T), torch.Generator().manual_seed(7))
    assert torch.equal(ours, expected)


@pytest.mark.parametrize("T", [4.0, 10.0])
def test_generate_samples_the_reference_loops_tokens(model: LlamaModel, T: float) -> None:
    """generate(temperature=T, seed=s) = the loop above, step by step through the cache."""
    ids = prompts()
    ours = model.generate(ids, 8, temperature=T, seed=11)
    assert torch.equal(ours, reference_sample(model, ids, 8, T, seed=11))
    assert not torch.equal(ours, model.generate(ids, 8))  # the draw is not greedy decoding


def test_a_tiny_temperature_is_greedy(model: LlamaModel) -> None:
    """T -> 0 puts all the mass on the largest logit: the same text as temperature=0."""
    ids = prompts()
    greedy = model.generate(ids, 8)
    for seed in (0, 1, 2):
        assert torch.equal(model.generate(ids, 8, temperature=1e-6, seed=seed), greedy)


def test_other_seeds_and_temperatures_draw_other_samples(model: LlamaModel) -> None:
    """The same seed and temperature repeat; another seed or temperature changes the text."""
    ids = prompts()
    first = model.generate(ids, 8, temperature=6.0, seed=3)
    assert torch.equal(model.generate(ids, 8, temperature=6.0, seed=3), first)
    assert not torch.equal(model.generate(ids, 8, temperature=6.0, seed=4), first)
    assert not torch.equal(model.generate(ids, 8, temperature=2.0, seed=3), first)
    assert not torch.equal(model.generate(ids, 8, temperature=20.0, seed=3), first)
