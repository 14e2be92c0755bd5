"""The worked inputs are the tutorials' inputs, fresh on every call."""

from __future__ import annotations

import torch

from attnlab import examples


def test_sentences_have_one_row_per_word() -> None:
    for sentence in (examples.your_journey(), examples.dream_big()):
        assert sentence.inputs.shape == (len(sentence.words), 3)
    assert examples.your_journey().inputs[1].tolist() == torch.tensor([0.55, 0.87, 0.66]).tolist()


def test_each_call_returns_fresh_tensors() -> None:
    first = examples.your_journey()
    first.inputs.zero_()
    assert examples.your_journey().inputs.abs().sum() > 0


def test_life_is_short_reproduces_the_tutorial_embedding() -> None:
    """Vocabulary, ids and the seed-123 embedding printed in the tutorial."""
    sentence = examples.life_is_short()
    assert sentence.vocab == {"Life": 0, "dessert": 1, "eat": 2, "first": 3, "is": 4, "short": 5}
    assert sentence.token_ids.tolist() == [0, 4, 5, 2, 1, 3]
    assert sentence.inputs.shape == (6, 16)
    assert not sentence.inputs.requires_grad
    first_row = [0.3374, -0.1778, -0.3035, -0.5880, 0.3486, 0.6603, -0.2196, -0.3792]
    torch.testing.assert_close(sentence.inputs[0, :8], torch.tensor(first_row), atol=1e-4, rtol=0)
    torch.testing.assert_close(sentence.inputs[5, -1], torch.tensor(0.2293), atol=1e-4, rtol=0)


def test_life_is_short_leaves_the_global_random_state_alone() -> None:
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    examples.life_is_short()
    assert torch.equal(torch.rand(3), expected)


def test_illustrated_products_match_the_walkthrough() -> None:
    ex = examples.illustrated()
    assert (ex.inputs @ ex.W_key).tolist() == [[0, 1, 1], [4, 4, 0], [2, 3, 1]]
    assert (ex.inputs @ ex.W_query).tolist() == [[1, 0, 2], [2, 2, 2], [2, 1, 3]]
    assert (ex.inputs @ ex.W_value).tolist() == [[1, 2, 3], [2, 8, 0], [2, 6, 3]]


def test_second_sequence_has_its_own_reproducible_draw() -> None:
    torch.manual_seed(0)
    state = torch.get_rng_state()
    first = examples.second_sequence()
    assert torch.equal(torch.get_rng_state(), state)  # global random state untouched
    assert torch.equal(first, examples.second_sequence())
    assert first.shape == (8, 16)
    torch.manual_seed(123)
    W_query = torch.rand(24, 16)  # the weights the tutorial draws under seed 123
    assert not torch.equal(first, W_query[:8])
