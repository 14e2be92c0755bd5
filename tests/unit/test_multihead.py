"""MultiHeadAttentionWrapper, MultiHeadAttention and CrossAttention: behaviour and errors."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support import HYPOTHESIS_SETTINGS, MODULE_BACKENDS

from attnlab import (
    CausalAttention,
    CrossAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
)

SETTINGS = settings(**HYPOTHESIS_SETTINGS)
BACKENDS = MODULE_BACKENDS


@SETTINGS
@given(
    num_heads=st.integers(2, 4),
    head_dim=st.integers(1, 4),
    d_in=st.integers(1, 6),
    batch=st.integers(2, 3),
    T=st.integers(1, 9),
    qkv_bias=st.booleans(),
    causal=st.booleans(),
    padded=st.booleans(),
    dtype=st.sampled_from([torch.float32, torch.float64]),
    backend=st.sampled_from(BACKENDS),
    seed=st.integers(0, 1000),
)
def test_wrapper_equals_fused_module_after_weight_copy(
    num_heads: int,
    head_dim: int,
    d_in: int,
    batch: int,
    T: int,
    qkv_bias: bool,
    causal: bool,
    padded: bool,
    dtype: torch.dtype,
    backend: str,
    seed: int,
) -> None:
    """from_wrapper stacks the heads' weights: both modules give the same output."""
    torch.manual_seed(seed)
    d_out = num_heads * head_dim
    wrapper = MultiHeadAttentionWrapper(
        d_in,
        d_out,
        num_heads,
        qkv_bias=qkv_bias,
        causal=causal,
        backend=backend,  # type: ignore[arg-type]
    ).to(dtype)
    fused = MultiHeadAttention.from_wrapper(wrapper)
    x = torch.randn(batch, T, d_in, dtype=dtype)
    real = torch.rand(batch, T) > 0.3 if padded else None
    tol = 1e-6 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(
        fused(x, key_padding_mask=real).output, wrapper(x, real), atol=tol, rtol=tol
    )


def test_wrapper_heads_are_independent_attention_modules() -> None:
    """The wrapper's output is its heads' outputs side by side, each of width d_out / H."""
    torch.manual_seed(0)
    wrapper = MultiHeadAttentionWrapper(3, 6, 3, causal=True)
    x = torch.randn(2, 5, 3)
    assert all(isinstance(h, CausalAttention) and h.d_out == 2 for h in wrapper.heads)
    expected = torch.cat([head(x) for head in wrapper.heads], dim=-1)
    assert torch.equal(wrapper(x), expected)
    assert wrapper(x).shape == (2, 5, 6)


@SETTINGS
@given(
    num_heads=st.integers(2, 4),
    head_dim=st.integers(1, 4),
    batch=st.integers(2, 3),
    L=st.integers(1, 7),
    S=st.integers(1, 9),
    causal=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_split_heads_equal_per_head_attention(
    num_heads: int, head_dim: int, batch: int, L: int, S: int, causal: bool, seed: int
) -> None:
    """Each head attends with its slice of the projections, scaled by 1/sqrt(head width)."""
    torch.manual_seed(seed)
    d_out = num_heads * head_dim
    module = MultiHeadAttention(5, d_out, num_heads, causal=causal, kdim=3, vdim=4)
    x, context = torch.randn(batch, L, 5), torch.randn(batch, S, 3)
    value_in = torch.randn(batch, S, 4)
    queries = module.W_query(x)
    keys, values = module.W_key(context), module.W_value(value_in)
    heads = []
    for h in range(num_heads):
        cols = slice(h * head_dim, (h + 1) * head_dim)
        scores = queries[..., cols] @ keys[..., cols].transpose(-2, -1)
        scores = scores / math.sqrt(head_dim)
        if causal:
            allowed = torch.ones(L, S, dtype=torch.bool).tril()
            scores = scores.masked_fill(~allowed, float("-inf"))
        weights = torch.nan_to_num(torch.softmax(scores, dim=-1))
        heads.append(weights @ values[..., cols])
    expected = module.out_proj(torch.cat(heads, dim=-1))
    torch.testing.assert_close(module(x, context, value_in).output, expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_backends_agree_with_masks(backend: str) -> None:
    """Every backend, and need_weights' path, equal SDPA on heads split here by hand."""
    torch.manual_seed(1)
    module = MultiHeadAttention(6, 8, 2, qkv_bias=True, causal=True, backend=backend)  # type: ignore[arg-type]
    x = torch.randn(3, 5, 6)
    real = torch.tensor([[True] * 5, [True, True, False, True, False], [True] * 3 + [False] * 2])
    allowed = torch.rand(3, 2, 5, 5) > 0.3
    allowed[..., 0] = True
    out = module(x, attn_mask=allowed, key_padding_mask=real).output
    out_weights, _ = module(x, attn_mask=allowed, key_padding_mask=real, need_weights=True)
    with torch.no_grad():
        q, k, v = (  # (3, 5, 8) -> (3, 2, 5, 4) each
            proj(x).view(3, 5, 2, 4).transpose(1, 2)
            for proj in (module.W_query, module.W_key, module.W_value)
        )
        causal = torch.ones(5, 5, dtype=torch.bool).tril()
        keep = allowed & real[:, None, None, :] & causal  # (3, 2, 5, 5): no row left empty
        heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        expected = module.out_proj(heads.transpose(1, 2).reshape(3, 5, 8))  # (3, 5, 8)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(out_weights, expected, atol=1e-6, rtol=0)


def test_attention_weights_rows_sum_to_one_and_respect_causality() -> None:
    """Returned weights: (B, L, S) averaged or (B, H, L, S); rows sum to 1; zero above diagonal."""
    torch.manual_seed(2)
    module = MultiHeadAttention(4, 6, 3, causal=True)
    x = torch.randn(2, 5, 4)
    _, averaged = module(x, need_weights=True)
    _, per_head = module(x, need_weights=True, average_attn_weights=False)
    assert averaged.shape == (2, 5, 5) and per_head.shape == (2, 3, 5, 5)
    torch.testing.assert_close(per_head.mean(dim=1), averaged)
    torch.testing.assert_close(per_head.sum(dim=-1), torch.ones(2, 3, 5))
    assert torch.equal(per_head.triu(diagonal=1), torch.zeros(2, 3, 5, 5))


@SETTINGS
@given(T=st.integers(2, 10), position=st.integers(0, 100), seed=st.integers(0, 1000))
def test_causal_future_tokens_never_change_earlier_outputs(
    T: int, position: int, seed: int
) -> None:
    """With causal=True, changing token t leaves every earlier output unchanged."""
    t = 1 + position % (T - 1)
    torch.manual_seed(seed)
    module = MultiHeadAttention(4, 6, 2, causal=True)
    x = torch.randn(2, T, 4)
    changed = x.clone()
    changed[:, t] += 1.0 + torch.rand(2, 4)
    before, after = module(x).output, module(changed).output
    assert torch.equal(before[:, :t], after[:, :t])
    assert not torch.allclose(before[:, t:], after[:, t:])


def test_unbatched_equals_batch_of_one() -> None:
    """(L, d_in) input with (S,) padding gives the batch-of-one result without its batch axis."""
    torch.manual_seed(3)
    module = MultiHeadAttention(4, 6, 3, kdim=5)
    x, context = torch.randn(3, 4), torch.randn(7, 5)
    real = torch.tensor([True, True, False, True, True, False, True])
    allowed = torch.rand(3, 3, 7) > 0.2
    out = module(x, context, attn_mask=allowed, key_padding_mask=real).output
    out_batched = module(
        x[None], context[None], attn_mask=allowed, key_padding_mask=real[None]
    ).output
    torch.testing.assert_close(out, out_batched[0], atol=1e-7, rtol=0)


def test_cross_attention_shapes_and_equality_with_multihead() -> None:
    """CrossAttention(x, context) is MultiHeadAttention(x, context, context) with kdim=vdim."""
    torch.manual_seed(4)
    cross = CrossAttention(16, 12, 8, num_heads=2)
    mha = MultiHeadAttention(16, 8, 2, kdim=12, vdim=12)
    mha.load_state_dict(cross.state_dict())
    x, context = torch.randn(2, 6, 16), torch.randn(2, 8, 12)
    out, weights = cross(x, context, need_weights=True)
    assert out.shape == (2, 6, 8) and weights.shape == (2, 6, 8)
    assert not cross.causal
    torch.testing.assert_close(out, mha(x, context, context).output, atol=1e-7, rtol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_only_in_training(backend: str) -> None:
    """Dropout is off in eval (equal to dropout=0), on in train (different, seed-reproducible)."""
    torch.manual_seed(5)
    module = MultiHeadAttention(4, 8, 2, dropout=0.5, backend=backend)  # type: ignore[arg-type]
    reference = MultiHeadAttention(4, 8, 2, backend=backend)  # type: ignore[arg-type]
    reference.load_state_dict(module.state_dict())
    x = torch.randn(2, 7, 4)
    module.eval()
    torch.testing.assert_close(module(x).output, reference(x).output, atol=0, rtol=0)
    module.train()
    torch.manual_seed(0)
    first = module(x).output
    torch.manual_seed(0)
    assert torch.equal(first, module(x).output)
    assert not torch.allclose(first, reference(x).output)


def test_wrapper_dropout_only_in_training() -> None:
    """The wrapper's heads drop attention weights in training only."""
    torch.manual_seed(6)
    wrapper = MultiHeadAttentionWrapper(4, 4, 2, dropout=0.5)
    x = torch.randn(2, 6, 4)
    wrapper.eval()
    evaluated = wrapper(x)
    torch.testing.assert_close(evaluated, MultiHeadAttention.from_wrapper(wrapper)(x).output)
    wrapper.train()
    assert not torch.allclose(wrapper(x), evaluated)


@pytest.mark.parametrize("cls", [MultiHeadAttention, MultiHeadAttentionWrapper])
def test_d_out_not_divisible_by_heads(cls: type) -> None:
    """d_out % num_heads != 0 is a ValueError with both numbers in the message."""
    with pytest.raises(
        ValueError, match="d_out must be divisible by num_heads; got d_out=10, num_heads=3"
    ):
        cls(4, 10, 3)


def test_self_attention_default_needs_matching_widths() -> None:
    """Leaving out key with kdim != d_in fails on key's width, not deep inside a matmul."""
    module = CrossAttention(4, 3, 6, num_heads=2)
    with pytest.raises(ValueError, match=r"key must have shape .* with kdim = 3"):
        module(torch.randn(2, 5, 4))
