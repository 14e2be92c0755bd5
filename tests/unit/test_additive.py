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
