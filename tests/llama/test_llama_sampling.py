"""top_k / top_p sampling with transformers' semantics, seeded.

The reference is transformers' own ``TemperatureLogitsWarper``, ``TopKLogitsWarper`` and
``TopPLogitsWarper``, applied in the order its ``generate`` applies them; the sampling
loop is re-written here without a cache (every step reads the whole sequence) and draws
with ``torch.multinomial`` from a generator seeded the same way.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

pytest.importorskip("gguf", reason="the llm extra is not installed")

from attnlab.llama import load_smollm2
from attnlab.llama.generate import Sampling, next_token_probs, warp_logits

pytestmark = pytest.mark.xdist_group("smollm2")

SETTINGS = [
    Sampling(temperature=1.0, top_k=1),
    Sampling(temperature=0.7, top_k=5),
    Sampling(temperature=1.3, top_p=0.9),
    Sampling(temperature=0.8, top_k=20, top_p=0.5),
    Sampling(temperature=1.0, top_p=0.0),
    Sampling(temperature=2.0, top_k=10_000, top_p=1.0),
]


def hf_warp(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """transformers' warpers, in generate's order (temperature, top-k, top-p)."""
    logits_process = pytest.importorskip("transformers.generation.logits_process")
    scores = logits_process.TemperatureLogitsWarper(sampling.temperature)(None, logits)
    if sampling.top_k is not None:
        scores = logits_process.TopKLogitsWarper(top_k=sampling.top_k)(None, scores)
    if sampling.top_p is not None:
        scores = logits_process.TopPLogitsWarper(top_p=sampling.top_p)(None, scores)
    return scores


def tied_logits() -> torch.Tensor:
    """(4, 3000) logits with many exact ties (rounded), a peaked row and a flat one."""
    logits = torch.randn(4, 3000, generator=torch.Generator().manual_seed(0)).mul(3).round()
    logits[2] *= 4  # peaked
    logits[3] = logits[3] / 100  # almost flat
    return logits


@pytest.mark.parametrize("sampling", SETTINGS, ids=repr)
def test_warped_logits_keep_transformers_tokens_with_its_probabilities(sampling: Sampling) -> None:
    """The same tokens survive the filters (ties at the k-th score kept) with the same probs."""
    logits = tied_logits()
    expected = hf_warp(logits, sampling)
    ours = warp_logits(logits, sampling)
    assert torch.equal(torch.isinf(ours), torch.isinf(expected))
    torch.testing.assert_close(
        next_token_probs(logits, sampling), expected.softmax(-1), atol=1e-6, rtol=1e-5
    )


def test_top_k_keeps_ties_and_top_p_keeps_at_least_one_token() -> None:
    """Hand example: k = 2 keeps every token tied with the 2nd best; p = 0 keeps the best."""
    logits = torch.tensor([[3.0, 1.0, 1.0, 0.0]])
    kept = torch.isfinite(warp_logits(logits, Sampling(temperature=1.0, top_k=2)))
    assert kept.tolist() == [[True, True, True, False]]
    kept = torch.isfinite(warp_logits(logits, Sampling(temperature=1.0, top_p=0.0)))
    assert kept.tolist() == [[True, False, False, False]]
    probs = next_token_probs(logits, Sampling(temperature=1.0, top_p=0.8))
    e = torch.tensor([3.0, 1.0, 1.0]).exp()  # p(best) = 0.78 < 0.8: one tied token joins
    assert torch.isfinite(probs).all() and (probs > 0).sum() == 2
    assert abs(probs[0, 0].item() - e[0].item() / (e[0] + e[1]).item()) < 1e-6


def reference_sample(
    model: Any, ids: torch.Tensor, n: int, sampling: Sampling, seed: int
) -> torch.Tensor:
    """The sampling loop written out: no cache, transformers' warpers, torch.multinomial."""
    generator = torch.Generator().manual_seed(seed)
    tokens = ids
    for _ in range(n):
        logits = model(tokens)[:, -1, :]  # (B, V): the whole sequence again, no cache
        probs = hf_warp(logits, sampling).softmax(-1)
        next_ids = torch.multinomial(probs, 1, generator=generator)  # (B, 1)
        tokens = torch.cat([tokens, next_ids], dim=-1)
    return tokens


@pytest.mark.parametrize(
    "sampling", [Sampling(temperature=0.8, top_k=20, top_p=0.9), Sampling(temperature=1.5)]
)
def test_seeded_generation_draws_the_reference_loops_tokens(sampling: Sampling) -> None:
    """generate(temperature, top_k, top_p, seed) = the loop above with the same seed."""
    model, tokenizer = load_smollm2()
    texts = ("Once upon a time", "The best fruit is")
    ids = torch.tensor([tokenizer.encode(text)[:4] for text in texts])  # (2, 4)
    kwargs = {"temperature": sampling.temperature, "top_k": sampling.top_k, "top_p": sampling.top_p}
    ours = model.generate(ids, 8, seed=11, **kwargs)
    assert torch.equal(ours, reference_sample(model, ids, 8, sampling, seed=11))
    assert torch.equal(model.generate(ids, 8, seed=11, **kwargs), ours)  # the same seed again
    assert not torch.equal(model.generate(ids, 8, seed=12, **kwargs), ours)  # another seed


def test_top_k_of_one_is_greedy_whatever_the_temperature() -> None:
    """Only the most likely token survives top_k=1: sampling then equals greedy decoding."""
    model, tokenizer = load_smollm2()
    ids = torch.tensor(tokenizer.encode("The capital of France is"))
    greedy = model.generate(ids, 6)
    assert torch.equal(model.generate(ids, 6, temperature=5.0, top_k=1, seed=3), greedy)
    assert torch.equal(model.generate(ids, 6, temperature=5.0, top_p=0.0, seed=3), greedy)
