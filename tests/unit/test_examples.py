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


def test_seeded_weights_are_the_parameters_of_self_attention_v1() -> None:
    """Under the same seed, seeded_weights draws what SelfAttentionV1 draws, in its order."""
    from attnlab import SelfAttentionV1

    torch.manual_seed(123)
    module = SelfAttentionV1(3, 2)
    weights = examples.seeded_weights(3, 2)
    parameters = (module.W_query, module.W_key, module.W_value)
    for drawn, parameter in zip(weights, parameters, strict=True):
        assert torch.equal(drawn, parameter.detach())
    expected_row = torch.tensor([0.2961, 0.5166])  # as the trainable-weights chapter prints it
    torch.testing.assert_close(weights.W_query[0], expected_row, atol=1e-4, rtol=0)


def test_seeded_weights_drawn_transposed_reproduce_the_column_convention() -> None:
    """drawn_transposed=True: inputs @ W equals the article's W @ x, with d_v of its own."""
    inputs = examples.life_is_short().inputs  # (6, 16)
    W_query, W_key, W_value = examples.seeded_weights(16, 24, d_v=28, drawn_transposed=True)
    assert (W_query.shape, W_key.shape, W_value.shape) == ((16, 24), (16, 24), (16, 28))
    torch.manual_seed(123)
    article_query, _, article_value = torch.rand(24, 16), torch.rand(24, 16), torch.rand(28, 16)
    torch.testing.assert_close(inputs[1] @ W_query, article_query @ inputs[1])
    torch.testing.assert_close(inputs @ W_value, (article_value @ inputs.T).T)


def test_seeded_weights_leave_the_global_random_state_alone() -> None:
    torch.manual_seed(0)
    state = torch.get_rng_state()
    first = examples.seeded_weights(3, 2, seed=7)
    assert torch.equal(torch.get_rng_state(), state)
    again = examples.seeded_weights(3, 2, seed=7)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first.W_query, examples.seeded_weights(3, 2, seed=8).W_query)


def test_random_query_key_pairs_give_dot_products_of_variance_d() -> None:
    """Each width has its own reproducible draw; Var(q . k) is close to d_k."""
    queries, keys = examples.random_query_key_pairs(64)
    assert queries.shape == keys.shape == (10_000, 64)
    assert queries.dtype == torch.float64
    assert not torch.equal(queries, keys)
    again, _ = examples.random_query_key_pairs(64)
    assert torch.equal(queries, again)
    variance = (queries * keys).sum(dim=-1).var().item()
    assert 60 < variance < 68  # 64 within about 2.5 standard errors (sd of the estimate ~ 1.3)
