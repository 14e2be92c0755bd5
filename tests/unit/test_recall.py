"""The associative-recall task and the small attention model that learns it."""

from __future__ import annotations

import pytest
import torch

from attnlab import recall
from attnlab.recall import RecallTask


def test_batches_are_reproducible_and_well_formed() -> None:
    """The same seed gives the same batch; keys are distinct; the target sits at position."""
    task = RecallTask()
    a = recall.make_batch(task, 256, torch.Generator().manual_seed(3))
    b = recall.make_batch(task, 256, torch.Generator().manual_seed(3))
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)
    lengths = a.present.sum(dim=-1)
    assert int(lengths.min()) >= task.min_pairs and int(lengths.max()) <= task.max_pairs
    assert bool((a.position < lengths).all())
    rows = torch.arange(256)
    assert torch.equal(a.keys[rows, a.position], a.query)
    assert torch.equal(a.values[rows, a.position], a.target)
    for keys, present in zip(a.keys, a.present, strict=True):
        real = keys[present]
        assert real.unique().numel() == real.numel()  # one answer per query


def test_describe_writes_the_real_pairs_only() -> None:
    task = RecallTask()
    batch = recall.example_batch()
    text = recall.describe(task, batch)
    pairs, question = text.split(" | ")
    assert len(pairs.split()) == int(batch.present[0].sum())
    assert question == f"{task.key_name(int(batch.query[0]))}? -> {int(batch.target[0])}"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_keys": 0}, "num_keys must be a positive int"),
        ({"min_pairs": 5, "max_pairs": 3}, "min_pairs <= max_pairs"),
        ({"num_keys": 4, "max_pairs": 5}, "max_pairs <= num_keys"),
    ],
)
def test_task_sizes_are_checked(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RecallTask(**kwargs)


def test_training_learns_a_sharp_pattern() -> None:
    """Untrained: chance accuracy, spread weights. Trained: accurate and sharp."""
    untrained, trained, history = recall.trained_recall_model()
    held_out = recall.held_out_batch()
    accuracy, on_key = recall.evaluate(untrained, held_out)
    assert accuracy < 0.2 and on_key < 0.4
    accuracy, on_key = recall.evaluate(trained, held_out)
    assert accuracy >= 0.95 and on_key >= 0.9
    assert history.loss[-1] < 0.1 * history.loss[0]


def test_untrained_copy_is_the_initial_model() -> None:
    """Training does not touch the untrained copy; both start from the same weights."""
    untrained, trained, _ = recall.trained_recall_model()
    torch.manual_seed(0)
    fresh = recall.RecallModel(RecallTask())
    expected = fresh.state_dict()
    for name, tensor in untrained.state_dict().items():
        assert torch.equal(tensor, expected[name]), name
    assert not torch.equal(untrained.readout.weight, trained.readout.weight)


def test_learned_queries_match_their_own_key() -> None:
    """After training, every key symbol's query scores its own key highest."""
    _, trained, _ = recall.trained_recall_model()
    scores = recall.key_query_scores(trained)  # (K, K)
    assert torch.equal(scores.argmax(dim=-1), torch.arange(scores.shape[0]))


def test_removing_the_padding_mask_costs_accuracy() -> None:
    _, trained, _ = recall.trained_recall_model()
    held_out = recall.held_out_batch()
    with_mask, _ = recall.evaluate(trained, held_out)
    without_mask, _ = recall.evaluate(trained, held_out, use_mask=False)
    assert without_mask < with_mask - 0.05


def test_training_is_quiet_unless_asked(capsys: pytest.CaptureFixture[str]) -> None:
    model = recall.RecallModel(RecallTask(), d_model=8)
    history = recall.train(model, steps=3, progress=False)
    assert len(history.loss) == 3
    assert capsys.readouterr().err == ""
    recall.train(model, steps=2, progress=True)
    assert "training" in capsys.readouterr().err


def test_key_query_scores_match_the_modules_own_weights() -> None:
    """key_query_scores equals the attention weights' logits of the module for one pair."""
    _, trained, _ = recall.trained_recall_model()
    task = RecallTask()
    batch = recall.make_batch(task, 4, torch.Generator().manual_seed(1))
    # A pair token with a zero value embedding part: only the key letter scores.
    attention = trained.attention
    embeddings = trained.key_embedding.weight
    with torch.no_grad():
        q = attention.W_query(embeddings[batch.query])  # (B, d)
        k = attention.W_key(embeddings[batch.keys])  # (B, P, d)
        direct = (k @ q[:, :, None])[..., 0] / attention.head_dim**0.5  # (B, P)
    scores = recall.key_query_scores(trained)
    assert torch.allclose(scores[batch.query[:, None], batch.keys], direct, atol=1e-5)


def test_key_query_scores_average_every_heads_scores_with_the_query_gain() -> None:
    """Four heads and an unscaled model (query gain sqrt(D) = 2), written out head by head:
    W_query's rows h*D..(h+1)*D score the gained query embedding against W_key's rows."""
    torch.manual_seed(3)
    model = recall.RecallModel(RecallTask(), d_model=16, num_heads=4, scaled=False)
    assert model.query_gain == 2.0
    E = model.key_embedding.weight.detach()  # (K, d)
    Wq, Wk = model.attention.W_query, model.attention.W_key
    per_head = []
    with torch.no_grad():
        for h in range(4):
            rows = slice(4 * h, 4 * h + 4)  # head h's D = 4 output features
            q = torch.nn.functional.linear(2.0 * E, Wq.weight[rows], _bias(Wq, rows))  # (K, D)
            k = torch.nn.functional.linear(E, Wk.weight[rows], _bias(Wk, rows))  # (K, D)
            per_head.append(q @ k.T / 2.0)  # (K, K): / sqrt(D)
        expected = torch.stack(per_head).mean(dim=0)  # (K, K)
        scores = recall.key_query_scores(model)
    torch.testing.assert_close(scores, expected, atol=1e-5, rtol=1e-5)


def _bias(linear: torch.nn.Linear, rows: slice) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias[rows]


def test_train_is_the_plain_loop_the_chapter_shows() -> None:
    """recall.train's losses equal a hand-written forward/loss/backward/step loop's."""
    task = RecallTask()
    torch.manual_seed(0)
    by_hand = recall.RecallModel(task)
    torch.manual_seed(0)
    packaged = recall.RecallModel(task)
    optimizer = torch.optim.Adam(by_hand.parameters(), lr=3e-3)
    data = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(3):
        batch = recall.make_batch(task, 64, data)
        logits, _ = by_hand(batch)
        loss = torch.nn.functional.cross_entropy(logits, batch.target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    history = recall.train(packaged, steps=3, progress=False)
    assert history.loss == pytest.approx(losses, rel=1e-6)
