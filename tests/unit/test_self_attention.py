"""SelfAttentionV1/V2: the classic seeded numbers, weight copying, batching, backends."""

from __future__ import annotations

import pytest
import torch

from attnlab import BACKENDS, SelfAttentionV1, SelfAttentionV2, examples


def test_v1_reproduces_the_classic_seed_123_numbers() -> None:
    """torch.manual_seed(123); SelfAttentionV1(3, 2) on "Your journey..."."""
    torch.manual_seed(123)
    module = SelfAttentionV1(3, 2)
    with torch.no_grad():
        out = module(examples.your_journey().inputs)
    expected = torch.tensor(
        [
            [0.2996, 0.8053],
            [0.3061, 0.8210],
            [0.3058, 0.8203],
            [0.2948, 0.7939],
            [0.2927, 0.7891],
            [0.2990, 0.8040],
        ]
    )
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=0)


def test_v2_reproduces_the_classic_seed_789_numbers() -> None:
    torch.manual_seed(789)
    module = SelfAttentionV2(3, 2)
    with torch.no_grad():
        out = module(examples.your_journey().inputs)
    expected = torch.tensor(
        [
            [-0.0739, 0.0713],
            [-0.0748, 0.0703],
            [-0.0749, 0.0702],
            [-0.0760, 0.0685],
            [-0.0763, 0.0679],
            [-0.0754, 0.0693],
        ]
    )
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=0)


def test_v1_weights_are_drawn_in_query_key_value_order() -> None:
    """Seed 123 then three torch.rand draws give exactly V1's matrices."""
    torch.manual_seed(123)
    draws = [torch.rand(3, 2) for _ in range(3)]
    torch.manual_seed(123)
    module = SelfAttentionV1(3, 2)
    for draw, param in zip(draws, [module.W_query, module.W_key, module.W_value], strict=True):
        assert torch.equal(draw, param.detach())


@pytest.mark.parametrize("batched", [False, True])
def test_v1_from_v2_gives_the_same_output(batched: bool) -> None:
    torch.manual_seed(0)
    v2 = SelfAttentionV2(5, 4)
    v1 = SelfAttentionV1.from_v2(v2)
    x = torch.randn(3, 7, 5) if batched else torch.randn(7, 5)
    torch.testing.assert_close(v1(x), v2(x))


def test_v1_from_v2_copies_rather_than_shares() -> None:
    v2 = SelfAttentionV2(3, 2)
    v1 = SelfAttentionV1.from_v2(v2)
    with torch.no_grad():
        v1.W_query.zero_()
    assert v2.W_query.weight.abs().sum() > 0


@pytest.mark.parametrize("module", [SelfAttentionV1, SelfAttentionV2])
def test_batched_input_equals_each_sequence_alone(module: type[torch.nn.Module]) -> None:
    torch.manual_seed(1)
    layer = module(4, 3)
    x = torch.randn(2, 6, 4)
    out = layer(x)
    assert out.shape == (2, 6, 3)
    torch.testing.assert_close(out[0], layer(x[0]))
    torch.testing.assert_close(out[1], layer(x[1]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_gives_the_written_out_output(backend: str) -> None:
    """Each backend equals softmax(x Wq (x Wk)^T / sqrt(d_out)) x Wv written out here."""
    torch.manual_seed(2)
    layer = SelfAttentionV2(4, 3, qkv_bias=True, backend=backend)  # type: ignore[arg-type]
    x = torch.randn(2, 9, 4)
    with torch.no_grad():
        queries, keys, values = layer.W_query(x), layer.W_key(x), layer.W_value(x)  # (2, 9, 3)
        weights = torch.softmax(queries @ keys.mT / 3**0.5, dim=-1)  # (2, 9, 9)
        torch.testing.assert_close(layer(x), weights @ values)


def test_gradients_reach_every_weight() -> None:
    torch.manual_seed(3)
    layer = SelfAttentionV2(4, 3, qkv_bias=True)
    layer(torch.randn(2, 5, 4)).sum().backward()
    for name, param in layer.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_repr_shows_sizes() -> None:
    assert "d_in=3, d_out=2" in repr(SelfAttentionV1(3, 2))


@pytest.mark.parametrize("module", [SelfAttentionV1, SelfAttentionV2])
@pytest.mark.parametrize("backend", BACKENDS)
def test_padded_keys_are_ignored(module: type[torch.nn.Module], backend: str) -> None:
    """With padding after 4 real tokens, real queries see exactly the 4-token sequence."""
    torch.manual_seed(4)
    layer = module(3, 2, backend=backend)
    x = torch.randn(2, 6, 3)
    real = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])  # (B, T)
    out = layer(x, key_padding_mask=real)
    torch.testing.assert_close(out[0, :4], layer(x[0, :4]))
    torch.testing.assert_close(out[1], layer(x[1]))
    additive = torch.zeros(2, 6).masked_fill(~real, float("-inf"))
    torch.testing.assert_close(layer(x, key_padding_mask=additive), out)
