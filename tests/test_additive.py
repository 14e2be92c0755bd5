"""Additive attention scores against an independent per-pair formula."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from attnlab import AdditiveAttention, additive_attention_scores


def _reference(
    queries: Tensor, keys: Tensor, W_query: Tensor, W_key: Tensor, w_score: Tensor
) -> Tensor:
    """One score at a time: v . tanh(W_q^T q + W_k^T k), batch dims flattened."""
    lead = queries.shape[:-2]
    q_flat = queries.reshape(-1, *queries.shape[-2:])
    k_flat = keys.reshape(-1, *keys.shape[-2:])
    out = torch.empty(q_flat.shape[0], q_flat.shape[1], k_flat.shape[1], dtype=queries.dtype)
    for b in range(q_flat.shape[0]):
        for i in range(q_flat.shape[1]):
            for j in range(k_flat.shape[1]):
                hidden = torch.tanh(W_query.T @ q_flat[b, i] + W_key.T @ k_flat[b, j])
                out[b, i, j] = torch.dot(w_score, hidden)
    return out.reshape(*lead, q_flat.shape[1], k_flat.shape[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("lead", "L", "S"), [((), 3, 5), ((2,), 4, 4), ((2, 3), 1, 2)])
def test_matches_per_pair_formula(
    dtype: torch.dtype, lead: tuple[int, ...], L: int, S: int
) -> None:
    g = torch.Generator().manual_seed(0)
    queries = torch.randn(*lead, L, 3, generator=g, dtype=dtype)
    keys = torch.randn(*lead, S, 4, generator=g, dtype=dtype)
    W_query = torch.randn(3, 6, generator=g, dtype=dtype)
    W_key = torch.randn(4, 6, generator=g, dtype=dtype)
    w_score = torch.randn(6, generator=g, dtype=dtype)
    got = additive_attention_scores(queries, keys, W_query, W_key, w_score)
    assert got.shape == (*lead, L, S)
    torch.testing.assert_close(got, _reference(queries, keys, W_query, W_key, w_score))


def test_module_gradients_match_reference() -> None:
    torch.manual_seed(0)
    module = AdditiveAttention(query_dim=3, key_dim=2, hidden_dim=4).double()
    queries = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    keys = torch.randn(5, 2, dtype=torch.float64)
    (got,) = torch.autograd.grad(module(queries, keys).sum(), queries)
    expected_scores = _reference(queries, keys, module.W_query, module.W_key, module.w_score)
    (expected,) = torch.autograd.grad(expected_scores.sum(), queries)
    torch.testing.assert_close(got, expected)


def test_bad_shapes_and_types_raise() -> None:
    q, k = torch.ones(2, 3), torch.ones(4, 5)
    W_q, W_k, w = torch.ones(3, 6), torch.ones(5, 6), torch.ones(6)
    with pytest.raises(
        ValueError, match=r"W_key must have shape \(E_k, A\) = \(5, 6\); got shape \(3, 6\)"
    ):
        additive_attention_scores(q, k, W_q, torch.ones(3, 6), w)
    with pytest.raises(ValueError, match="W_query"):
        additive_attention_scores(q, k, torch.ones(2, 6), W_k, w)
    with pytest.raises(ValueError, match="w_score must have shape"):
        additive_attention_scores(q, k, W_q, W_k, torch.ones(6, 1))
    with pytest.raises(ValueError, match="queries must have shape"):
        additive_attention_scores(
            torch.ones(3), k, torch.ones(3, 6), torch.ones(5, 6), torch.ones(6)
        )
    with pytest.raises(TypeError, match="keys must be a floating-point tensor"):
        additive_attention_scores(
            q, torch.ones(4, 5, dtype=torch.long), torch.ones(3, 6), torch.ones(5, 6), torch.ones(6)
        )
    with pytest.raises(ValueError, match="hidden_dim"):
        AdditiveAttention(3, 5, 0)
