"""Recall with many pairs: causal stacks of softmax attention and Gated DeltaNet layers."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from attnlab import GatedDeltaNet, MultiHeadAttention
from attnlab import recall_mixers as rm
from attnlab.recall import RecallTask, make_batch

TASK = RecallTask(num_keys=12, num_values=5, min_pairs=2, max_pairs=2)
TINY = rm.MixerConfig(d_model=8, num_heads=2, chunk_size=3)


def _batch(pairs: int, size: int = 3, seed: int = 0):  # type: ignore[no-untyped-def]
    task = RecallTask(TASK.num_keys, TASK.num_values, pairs, pairs)
    return make_batch(task, size, torch.Generator().manual_seed(seed))


def test_the_three_stacks_are_four_layers_and_the_hybrid_is_three_to_one() -> None:
    assert all(len(kinds) == 4 for kinds in rm.MIXERS.values())
    hybrid = rm.MIXERS["hybrid"]
    assert hybrid.count("linear_attention") == 3 and hybrid[-1] == "full_attention"
    model = rm.RecallStack(TASK, rm.MixerConfig(hybrid, d_model=8, num_heads=2))
    kinds = [type(m) for m in model.mixers]
    assert kinds == [GatedDeltaNet] * 3 + [MultiHeadAttention]
    assert all(m.causal for m in model.mixers if isinstance(m, MultiHeadAttention))


def test_the_sequence_is_the_pairs_then_the_marked_question() -> None:
    torch.manual_seed(0)
    model = rm.RecallStack(TASK, TINY)
    batch = _batch(5)
    x = rm.sequence_batch(model, batch)  # (3, 6, 8)
    assert x.shape == (3, 6, 8)
    pair = model.key_embedding(batch.keys[1, 2]) + model.value_embedding(batch.values[1, 2])
    assert torch.allclose(x[1, 2], pair)
    assert torch.allclose(x[1, -1], model.key_embedding(batch.query[1]) + model.query_marker)


def test_the_answer_depends_on_no_token_after_the_question() -> None:
    """Causal: the logits equal those of the same stack run on the sequence's prefix, and
    changing an earlier pair's value changes them (the question reads the pairs)."""
    torch.manual_seed(1)
    model = rm.RecallStack(TASK, rm.MixerConfig(rm.MIXERS["hybrid"], d_model=8, num_heads=2))
    batch = _batch(7, size=4)
    x = rm.sequence_batch(model, batch)  # (4, 8, 8)
    longer = torch.cat([x, torch.randn(4, 3, 8)], dim=1)  # tokens after the question
    outputs = []
    for tokens in (x, longer):
        for norm, mixer in zip(model.norms, model.mixers, strict=True):
            tokens = tokens + mixer(norm(tokens))[0]
        outputs.append(tokens[:, 7])
    assert torch.allclose(outputs[0], outputs[1], atol=1e-5)
    changed = batch._replace(values=(batch.values + 1) % TASK.num_values)
    assert not torch.allclose(model(batch), model(changed))


def test_training_is_seeded_and_changes_the_weights() -> None:
    """Same seed, same weights and losses; training moves the weights away from the start."""
    runs = [rm.trained_stack("gated_deltanet", TASK, (2, 3), 4, seed=5, config=TINY) for _ in "ab"]
    (a, losses), (b, again) = runs
    assert losses == again and len(losses) == 4
    for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y)
    with torch.random.fork_rng():
        torch.manual_seed(5)
        start = rm.RecallStack(
            TASK, dataclasses.replace(TINY, layer_types=rm.MIXERS["gated_deltanet"])
        )
    assert not torch.equal(start.readout.weight, a.readout.weight)
    assert 0.0 <= rm.recall_accuracy(a, 3, size=50) <= 1.0


def test_the_softmax_stack_learns_recall() -> None:
    """One causal softmax layer learns to answer from four pairs in 100 steps."""
    torch.manual_seed(0)
    model = rm.RecallStack(TASK, rm.MixerConfig(("full_attention",), d_model=16, num_heads=2))
    losses = rm.train_stack(model, (2, 4), steps=100, batch_size=32, lr=1e-2)
    assert sum(losses[-10:]) / 10 < 0.1 * losses[0]
    assert rm.recall_accuracy(model, 4, size=200) > 0.9


def test_sweep_reports_every_stack_at_every_count() -> None:
    results = rm.recall_sweep(TASK, (2, 4), steps=2, config=TINY, size=8)
    assert results["pairs"] == [2, 4]
    assert [row["model"] for row in results["rows"]] == list(rm.MIXERS)
    for row in results["rows"]:
        assert len(row["accuracy"]) == 2 and row["parameters"] > 0
    states = {row["model"]: row["state_floats"] for row in results["rows"]}
    assert states == {"softmax": 0, "gated_deltanet": 4 * 2 * 4**2, "hybrid": 3 * 2 * 4**2}


def test_state_and_cache_sizes() -> None:
    config = rm.MixerConfig()  # the hybrid, width 32, two heads of 16
    assert config.state_floats() == 3 * 2 * 16 * 16
    assert config.cache_floats(65) == 1 * 2 * 65 * 32


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"layer_types": ()}, ValueError, "layer_types must be a non-empty tuple"),
        ({"layer_types": ("sliding",)}, ValueError, "one of full_attention, linear_attention"),
        ({"d_model": 10, "num_heads": 4}, ValueError, "num_heads must divide d_model = 10"),
        ({"chunk_size": 0}, ValueError, "chunk_size must be a positive int"),
    ],
)
def test_bad_configs_are_refused(kwargs: dict[str, object], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        rm.MixerConfig(**kwargs)  # type: ignore[arg-type]


def test_bad_calls_are_refused() -> None:
    torch.manual_seed(0)
    model = rm.RecallStack(TASK, TINY)
    padded = make_batch(
        RecallTask(12, 5, 2, 6), 8, torch.Generator().manual_seed(0)
    )  # some sequences shorter than their 6 slots
    with pytest.raises(ValueError, match="batch must hold real pairs only"):
        model(padded)
    with pytest.raises(ValueError, match=r"pairs must be in 1 \.\. num_keys = 12; got 13"):
        rm.recall_accuracy(model, 13)
    with pytest.raises(ValueError, match=r"low <= high; got \(4, 3\)"):
        rm.train_stack(model, (4, 3), steps=1)
    with pytest.raises(ValueError, match="name must be one of softmax"):
        rm.trained_stack("mamba", TASK, (2, 2), 1)
    with pytest.raises(TypeError, match="config must be a MixerConfig"):
        rm.RecallStack(TASK, {"d_model": 8})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="measured must name at least one"):
        rm.recall_sweep(TASK, (), steps=1)
    with pytest.raises(ValueError, match=r"pairs must be in 1 \.\. num_keys = 12; got 20"):
        rm.recall_sweep(TASK, (4, 20), steps=1)
    with pytest.raises(ValueError, match=r"pairs must be a tuple \(low, high\); got \[2, 3\]"):
        rm.train_stack(model, [2, 3], steps=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"lr must be a finite number > 0\.0; got 0"):
        rm.train_stack(model, (2, 3), steps=1, lr=0)


def test_recorded_run_is_the_full_one_and_matches_todays_stacks() -> None:
    """The recorded sweep is the full run; its stacks have the weights today's code builds."""
    from attnlab.bench import load_results
    from attnlab.bench.hybrid_recall import HYBRID_RECALL_FULL

    results = load_results("hybrid_recall")
    assert results["quick"] is False
    assert results["pairs"] == HYBRID_RECALL_FULL["pairs"]
    assert {k: results["config"][k] for k in HYBRID_RECALL_FULL} == HYBRID_RECALL_FULL
    task = RecallTask(HYBRID_RECALL_FULL["num_keys"], HYBRID_RECALL_FULL["num_values"])
    assert [row["model"] for row in results["rows"]] == list(rm.MIXERS)
    for row in results["rows"]:
        config = rm.MixerConfig(rm.MIXERS[row["model"]])
        weights = sum(p.numel() for p in rm.RecallStack(task, config).parameters())
        assert row["parameters"] == weights
        assert row["state_floats"] == config.state_floats()
        assert len(row["accuracy"]) == len(results["pairs"])
        assert all(0.0 <= a <= 1.0 for a in row["accuracy"])
