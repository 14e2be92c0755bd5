"""CausalAttention: causal masking, padding, dropout, and its error messages."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support import HYPOTHESIS_SETTINGS, MODULE_BACKENDS
from torch import Tensor

from attnlab import CausalAttention, SelfAttentionV2
from attnlab.masks import combine_masks, padding_to_attn_mask

SETTINGS = settings(**HYPOTHESIS_SETTINGS)
BACKENDS = MODULE_BACKENDS


def reference(module: CausalAttention, x: Tensor, real: Tensor | None = None) -> Tensor:
    """Softmax attention written out with -inf masking; empty rows set to zero."""
    queries, keys, values = module.W_query(x), module.W_key(x), module.W_value(x)
    T = x.shape[-2]
    scores = queries @ keys.transpose(-2, -1) / math.sqrt(module.d_out)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    if real is not None:
        allowed = allowed & real.unsqueeze(-2)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return torch.nan_to_num(weights, nan=0.0) @ values


@SETTINGS
@given(
    batch=st.integers(2, 3),
    T=st.integers(1, 9),
    d_in=st.integers(1, 6),
    d_out=st.integers(1, 6),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    backend=st.sampled_from(BACKENDS),
    seed=st.integers(0, 1000),
)
def test_matches_written_out_reference(
    batch: int, T: int, d_in: int, d_out: int, dtype: torch.dtype, backend: str, seed: int
) -> None:
    """The module equals softmax(mask(QK^T / sqrt(d_out))) V with a lower-triangular mask."""
    torch.manual_seed(seed)
    module = CausalAttention(d_in, d_out, qkv_bias=True, backend=backend).to(dtype)  # type: ignore[arg-type]
    x = torch.randn(batch, T, d_in, dtype=dtype)
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(module(x), reference(module, x), atol=tol, rtol=tol)


@SETTINGS
@given(
    T=st.integers(2, 12),
    position=st.integers(0, 100),
    backend=st.sampled_from(BACKENDS),
    seed=st.integers(0, 1000),
)
def test_future_tokens_never_change_earlier_outputs(
    T: int, position: int, backend: str, seed: int
) -> None:
    """Changing token t leaves outputs 0..t-1 exactly as they were, and changes output t."""
    t = 1 + position % (T - 1)
    torch.manual_seed(seed)
    module = CausalAttention(4, 6, backend=backend)  # type: ignore[arg-type]
    x = torch.randn(2, T, 4)
    changed = x.clone()
    changed[:, t] += 1.0 + torch.rand(2, 4)
    before, after = module(x), module(changed)
    assert torch.equal(before[:, :t], after[:, :t])
    assert not torch.allclose(before[:, t], after[:, t])


def test_accepts_any_length() -> None:
    """No context_length buffer: short and long inputs both work, and prefixes agree."""
    torch.manual_seed(0)
    module = CausalAttention(3, 4)
    long = torch.randn(1, 300, 3)
    torch.testing.assert_close(module(long)[:, :5], module(long[:, :5]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_right_padding_does_not_change_real_tokens(backend: str) -> None:
    """Real tokens of a right-padded sequence get the outputs of the unpadded sequence."""
    torch.manual_seed(1)
    module = CausalAttention(5, 4, causal=False, backend=backend)  # type: ignore[arg-type]
    x = torch.randn(2, 7, 5)
    real = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    out = module(x, key_padding_mask=real)
    torch.testing.assert_close(out[1, :4], module(x[1, :4]), atol=1e-6, rtol=0)
    torch.testing.assert_close(out[0], module(x[0]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_padding_combines_with_causal_and_empty_rows_are_zero(backend: str) -> None:
    """Left padding: the padded first query sees nothing and outputs zeros, never NaN."""
    torch.manual_seed(2)
    module = CausalAttention(3, 4, backend=backend)  # type: ignore[arg-type]
    x = torch.randn(2, 5, 3)
    real = torch.tensor([[False, False, True, True, True], [True, True, True, False, True]])
    out = module(x, key_padding_mask=real)
    assert not torch.isnan(out).any()
    assert torch.equal(out[0, :2], torch.zeros(2, 4))
    torch.testing.assert_close(out, reference(module, x, real), atol=1e-6, rtol=0)


def test_float_padding_mask_equals_bool() -> None:
    """A float key padding mask of 0 / -inf does what the boolean one does."""
    torch.manual_seed(3)
    module = CausalAttention(3, 2)
    x = torch.randn(2, 4, 3)
    real = torch.tensor([[True, True, False, True], [True, False, True, True]])
    added = torch.zeros(2, 4).masked_fill(~real, float("-inf"))
    torch.testing.assert_close(module(x, added), module(x, real), atol=1e-7, rtol=0)


def test_unbatched_padding_mask() -> None:
    """An unbatched (T, d_in) input takes a (T,) padding mask."""
    torch.manual_seed(4)
    module = CausalAttention(3, 2)
    x = torch.randn(4, 3)
    real = torch.tensor([True, True, True, False])
    torch.testing.assert_close(module(x, real), module(x[None], real[None])[0], atol=1e-7, rtol=0)


def test_same_weights_as_self_attention_v2_for_the_same_seed() -> None:
    """Seeded alike, CausalAttention has V2's weights; without the mask, V2's output."""
    torch.manual_seed(789)
    v2 = SelfAttentionV2(3, 2)
    torch.manual_seed(789)
    causal = CausalAttention(3, 2)
    torch.manual_seed(789)
    plain = CausalAttention(3, 2, causal=False)
    x = torch.randn(2, 6, 3)
    assert torch.equal(causal.W_query.weight, v2.W_query.weight)
    torch.testing.assert_close(plain(x), v2(x), atol=1e-7, rtol=0)
    assert not torch.allclose(causal(x)[:, :-1], v2(x)[:, :-1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_only_in_training(backend: str) -> None:
    """Dropout changes outputs in training, is reproducible under a seed, and is off in eval."""
    torch.manual_seed(5)
    module = CausalAttention(4, 4, dropout=0.5, backend=backend)  # type: ignore[arg-type]
    x = torch.randn(2, 8, 4)
    module.eval()
    no_dropout = module(x)
    torch.testing.assert_close(no_dropout, reference(module, x), atol=1e-6, rtol=0)
    module.train()
    torch.manual_seed(0)
    first = module(x)
    torch.manual_seed(0)
    again = module(x)
    assert torch.equal(first, again)
    assert not torch.allclose(first, no_dropout)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_is_unbiased_by_its_one_over_keep_scaling(backend: str) -> None:
    """Averaged over many dropout draws (p = 0.5, survivors x 2), training output ~ eval output."""
    torch.manual_seed(6)
    module = CausalAttention(3, 2, dropout=0.5, backend=backend)  # type: ignore[arg-type]
    x = torch.randn(5, 3).expand(4000, 5, 3)  # the same sequence, 4000 dropout draws
    with torch.no_grad():
        module.eval()
        expected = module(x[0])
        module.train()
        mean = module(x).mean(dim=0)
    torch.testing.assert_close(mean, expected, atol=0.03, rtol=0.05)
    assert not torch.allclose(mean, expected / 2, atol=0.03, rtol=0.05)


def test_mask_helpers() -> None:
    """combine_masks ANDs booleans, adds floats with -inf for blocked; padding is broadcastable."""
    a = torch.tensor([[True, False], [True, True]])
    b = torch.tensor([True, False])
    assert torch.equal(combine_masks(a, None, b), a & b)
    assert combine_masks(None, None) is None
    mixed = combine_masks(a, torch.tensor([[0.5, 0.0], [0.0, 1.0]]), dtype=torch.float64)
    assert mixed is not None and mixed.dtype == torch.float64
    assert torch.equal(mixed, torch.tensor([[0.5, float("-inf")], [0.0, 1.0]], dtype=torch.float64))
    assert padding_to_attn_mask(torch.ones(2, 5, dtype=torch.bool)).shape == (2, 1, 5)
    assert padding_to_attn_mask(torch.ones(2, 5), num_heads_dims=1).shape == (2, 1, 1, 5)
