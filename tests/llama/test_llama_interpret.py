"""attnlab.llama.interpret: head scores, the induction test and ablation, by hand and on SmolLM2.

The scores are checked against plain loops on hand-made and random attention maps and a
tiny random ``LlamaModel``; the last tests check, with margins, the claims that the
chapter "What trained attention does" makes about the real model.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("tokenizers", reason="the llm extra is not installed")

from tiny_llama import tiny_model

from attnlab.llama.interpret import (
    as_ablation,
    attention_maps,
    copy_losses,
    induction_scores,
    previous_token_scores,
    random_heads,
    repeated_random_tokens,
    sink_scores,
    top_heads,
)

pytestmark = pytest.mark.xdist_group("smollm2")


def _random_maps(B: int, N: int, H: int, T: int, seed: int = 0) -> torch.Tensor:
    """Causal rows that sum to one, from a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(B, N, H, T, T, generator=g)
    hidden = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)


def test_attention_maps_stack_every_layer_of_atiny_model() -> None:
    """(B, N, H, T, T): the model's own per-layer weights, causal rows summing to one."""
    model = tiny_model()
    ids = torch.randint(0, 64, (2, 7), generator=torch.Generator().manual_seed(1))
    maps = attention_maps(model, ids)
    assert maps.shape == (2, 3, 4, 7, 7)
    _, per_layer = model(ids, return_attention=True)
    for n in range(3):
        assert torch.equal(maps[:, n], per_layer[n])
    assert torch.allclose(maps.sum(-1), torch.ones(2, 3, 4, 7), atol=1e-5)
    assert torch.all(maps.triu(1) == 0)
    assert not maps.requires_grad


def test_scores_match_plain_loops_on_random_maps() -> None:
    """Sink, previous-token and induction scores equal their definitions written as loops."""
    B, N, H, T, length = 2, 3, 4, 11, 5  # positions 1..10 are the copies
    maps = _random_maps(B, N, H, T)
    sink = torch.zeros(N, H)
    prev = torch.zeros(N, H)
    induction = torch.zeros(N, H)
    for n in range(N):
        for h in range(H):
            sink[n, h] = sum(maps[b, n, h, i, 0] for b in range(B) for i in range(1, T)) / (
                B * (T - 1)
            )
            prev[n, h] = sum(maps[b, n, h, i, i - 1] for b in range(B) for i in range(1, T)) / (
                B * (T - 1)
            )
            second = range(T - length, T)
            induction[n, h] = sum(
                maps[b, n, h, p, p - length + 1] for b in range(B) for p in second
            ) / (B * length)
    assert torch.allclose(sink_scores(maps), sink, atol=1e-6)
    assert torch.allclose(previous_token_scores(maps), prev, atol=1e-6)
    assert torch.allclose(induction_scores(maps, length), induction, atol=1e-6)


def test_ideal_heads_score_one() -> None:
    """A head always on i - 1, or always on the token after the earlier copy, scores 1."""
    T, length = 9, 4  # one prefix token, then two copies of 4
    prev = torch.zeros(T, T)
    prev[0, 0] = 1.0
    prev[torch.arange(1, T), torch.arange(0, T - 1)] = 1.0
    induction = torch.eye(T)
    for p in range(T - length, T):
        induction[p] = 0.0
        induction[p, p - length + 1] = 1.0
    maps = torch.stack([prev, induction]).view(1, 1, 2, T, T)  # (B, N, H, T, T)
    assert previous_token_scores(maps).tolist() == [[1.0, 0.0]]
    assert induction_scores(maps, length)[0, 1].item() == 1.0
    assert sink_scores(maps)[0, 0].item() == pytest.approx(1 / (T - 1))


def test_repeated_random_tokens_are_two_seeded_copies() -> None:
    """Prefix token, then the same draw twice; seeded, within [low, high), RNG untouched."""
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    ids = repeated_random_tokens(6, batch=3, seed=2, low=10, high=20)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert ids.shape == (3, 13) and ids.dtype == torch.int64
    assert torch.all(ids[:, 0] == 0)
    assert torch.equal(ids[:, 1:7], ids[:, 7:])
    assert int(ids[:, 1:].min()) >= 10 and int(ids[:, 1:].max()) < 20
    assert torch.equal(ids, repeated_random_tokens(6, batch=3, seed=2, low=10, high=20))
    assert repeated_random_tokens(6, first_token=None).shape == (1, 12)


def test_copy_losses_match_cross_entropy_token_by_token() -> None:
    """Means of -log p(token) over tokens 2..length of each copy (not each copy's first)."""
    g = torch.Generator().manual_seed(3)
    B, T, V, length = 2, 9, 7, 4
    logits = torch.randn(B, T, V, generator=g)
    ids = torch.randint(0, V, (B, T), generator=g)

    def loss(b: int, p: int) -> float:  # the loss on the token at position p
        return float(F.cross_entropy(logits[b, p - 1], ids[b, p]))

    first = sum(loss(b, p) for b in range(B) for p in (2, 3, 4)) / 6
    second = sum(loss(b, p) for b in range(B) for p in (6, 7, 8)) / 6
    got = copy_losses(logits, ids, length)
    assert got.first == pytest.approx(first, abs=1e-5)
    assert got.second == pytest.approx(second, abs=1e-5)
    one = copy_losses(logits[:1], ids[0], length)  # 1-D ids count as one sequence
    assert one.first == pytest.approx(sum(loss(0, p) for p in (2, 3, 4)) / 3, abs=1e-5)


def test_top_random_heads_and_ablation_dict() -> None:
    """Heads ranked by score; random heads distinct, seeded, never excluded; grouped by layer."""
    scores = torch.tensor([[0.1, 0.9, 0.3], [0.8, 0.0, 0.5]])
    assert top_heads(scores, 3) == [(0, 1), (1, 0), (1, 2)]
    assert top_heads(scores, 2, largest=False) == [(1, 1), (0, 0)]
    drawn = random_heads(4, num_layers=2, num_heads=3, seed=0, exclude=[(0, 1), (1, 0)])
    assert len(set(drawn)) == 4 and not {(0, 1), (1, 0)} & set(drawn)
    assert drawn == random_heads(4, num_layers=2, num_heads=3, seed=0, exclude=[(0, 1), (1, 0)])
    assert as_ablation([(18, 6), (17, 4), (17, 3)]) == {17: [3, 4], 18: [6]}


def test_ablating_through_the_dict_changes_only_later_layers() -> None:
    """as_ablation's dict is what model(ablate=...) takes: layer 2 off leaves layers 0-1 alone."""
    model = tiny_model()
    ids = torch.arange(10).unsqueeze(0)
    base = attention_maps(model, ids)
    with torch.no_grad():
        _, off = model(ids, return_attention=True, ablate=as_ablation([(1, 0), (1, 3)]))
    assert torch.equal(torch.stack(off, 1)[:, :2], base[:, :2])
    assert not torch.allclose(torch.stack(off, 1)[:, 2], base[:, 2])


SHAPE_5D = r"maps must have shape \(B, N, H, T, T\).*got shape \(2, 3, 4, 4\)"


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: sink_scores(torch.zeros(2, 3, 4, 4)), ValueError, SHAPE_5D),
        (
            lambda: previous_token_scores(torch.zeros(1, 1, 1, 3, 4)),
            ValueError,
            r"got shape \(1, 1, 1, 3, 4\)",
        ),
        (
            lambda: induction_scores(torch.zeros(1, 1, 1, 9, 9), 5),
            ValueError,
            r"length must be in 2 \.\. T // 2 = 4",
        ),
        (lambda: induction_scores([[0.0]], 2), TypeError, "maps must be a torch.Tensor"),
        (
            lambda: copy_losses(torch.zeros(1, 8, 5), torch.zeros(1, 7, dtype=torch.long), 3),
            ValueError,
            r"logits must have shape \(B, T, V\)",
        ),
        (lambda: repeated_random_tokens(1), ValueError, "length must be >= 2; got 1"),
        (lambda: repeated_random_tokens(4, low=5, high=5), ValueError, "low=5, high=5"),
        (lambda: repeated_random_tokens(4.0), TypeError, "length must be an int"),  # type: ignore[arg-type]
        (lambda: top_heads(torch.zeros(2, 3), 7), ValueError, r"k must be an int in 1 \.\. 6"),
        (lambda: top_heads(torch.zeros(6), 1), ValueError, r"scores must have shape \(N, H\)"),
        (lambda: random_heads(5, num_layers=2, num_heads=2, seed=0), ValueError, r"1 \.\. 4"),
    ],
)
def test_bad_input_is_refused(call, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        call()


# --- the chapter's claims, on the real model --------------------------------------------


@pytest.fixture(scope="module")
def smollm2():  # type: ignore[no-untyped-def]
    pytest.importorskip("gguf", reason="the llm extra is not installed")
    from attnlab.llama import load_smollm2

    return load_smollm2()


def test_smollm2_has_induction_heads_that_its_copying_needs(smollm2) -> None:  # type: ignore[no-untyped-def]
    """Seed 0: second copy far easier; top heads score > 0.7; ablating 4 hurts, 4 random do not."""
    model, _ = smollm2
    ids = repeated_random_tokens(25, seed=0)
    maps = attention_maps(model, ids)
    scores = induction_scores(maps, 25)
    top = top_heads(scores, 4)
    assert top[0] == (18, 6) and scores[18, 6] > 0.85
    assert all(scores[n, h] > 0.7 for n, h in top)
    with torch.no_grad():
        base = copy_losses(model(ids), ids, 25)
        knocked = copy_losses(model(ids, ablate=as_ablation(top)), ids, 25)
        controls = [
            copy_losses(model(ids, ablate=as_ablation(
                random_heads(4, num_layers=30, num_heads=9, seed=s, exclude=top))), ids, 25)
            for s in range(3)
        ]  # fmt: skip
    assert base.first > 12 and base.second < 3.5
    assert knocked.second > base.second + 4
    assert all(abs(c.second - base.second) < 1.0 for c in controls)
    assert all(abs(x.first - base.first) < 0.5 for x in (knocked, *controls))


def test_smollm2_puts_weight_on_the_first_token(smollm2) -> None:  # type: ignore[no-untyped-def]
    """On a plain sentence most layers put well over a uniform share on token 0."""
    model, tokenizer = smollm2
    text = "The cat sat on the mat because it was warm and quiet there."
    ids = torch.tensor(tokenizer.encode(text))
    scores = sink_scores(attention_maps(model, ids))
    T = ids.shape[-1]
    uniform = sum(1 / (i + 1) for i in range(1, T)) / (T - 1)
    assert (scores.mean(-1) > 2 * uniform).sum() >= 20
