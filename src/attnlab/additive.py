"""Additive (Bahdanau-style) attention scores: the score function before dot products.

Bahdanau, Cho and Bengio (2015) scored a decoder state ``q`` against every encoder
state ``k`` with ``score(q, k) = v . tanh(q W_q + k W_k)``; the rest of attention is
the same as for dot-product scores, so only the score function lives here.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._validation import (
    broadcast_shape,
    check_floating,
    check_min_rank,
    check_positive_int,
    check_same_device,
    format_shape,
)

__all__ = ["AdditiveAttention", "additive_attention_scores"]


def additive_attention_scores(
    queries: Tensor, keys: Tensor, W_query: Tensor, W_key: Tensor, w_score: Tensor
) -> Tensor:
    """Additive attention scores ``v . tanh(q_i W_query + k_j W_key)`` for every pair.

    Queries and keys may differ in width; both are projected to the hidden width ``A``.

    Shape:
        queries: ``(N, ..., L, E_q)``; keys: ``(N, ..., S, E_k)``;
        W_query: ``(E_q, A)``; W_key: ``(E_k, A)``; w_score: ``(A,)``;
        output ``(N, ..., L, S)``.
    """
    queries = check_floating("queries", queries)
    keys = check_floating("keys", keys)
    W_query = check_floating("W_query", W_query)
    W_key = check_floating("W_key", W_key)
    w_score = check_floating("w_score", w_score)
    check_min_rank("queries", queries, 2, "(N, ..., L, E_q)")
    check_min_rank("keys", keys, 2, "(N, ..., S, E_k)")
    if w_score.dim() != 1:
        raise ValueError(f"w_score must have shape (A,); got shape {format_shape(w_score.shape)}")
    hidden = w_score.shape[0]
    wanted_q = (queries.shape[-1], hidden)
    if tuple(W_query.shape) != wanted_q:
        raise ValueError(
            f"W_query must have shape (E_q, A) = {format_shape(wanted_q)}; "
            f"got shape {format_shape(W_query.shape)}"
        )
    wanted_k = (keys.shape[-1], hidden)
    if tuple(W_key.shape) != wanted_k:
        raise ValueError(
            f"W_key must have shape (E_k, A) = {format_shape(wanted_k)}; "
            f"got shape {format_shape(W_key.shape)}"
        )
    for name, tensor in (
        ("keys", keys),
        ("W_query", W_query),
        ("W_key", W_key),
        ("w_score", w_score),
    ):
        if tensor.dtype != queries.dtype:
            raise TypeError(
                f"{name} must have the dtype of queries ({queries.dtype}); got {tensor.dtype}"
            )
        check_same_device(name, tensor, queries, "queries")
    if broadcast_shape(queries.shape[:-2], keys.shape[:-2]) is None:
        raise ValueError(
            f"keys must have shape (N, ..., S, E_k) with batch dims that broadcast with "
            f"queries' {format_shape(queries.shape[:-2])}; got shape {format_shape(keys.shape)}"
        )
    projected_queries = (queries @ W_query).unsqueeze(-2)  # (N, ..., L, 1, A)
    projected_keys = (keys @ W_key).unsqueeze(-3)  # (N, ..., 1, S, A)
    hidden_states = torch.tanh(projected_queries + projected_keys)  # (N, ..., L, S, A)
    return hidden_states @ w_score  # (N, ..., L, S)


class AdditiveAttention(nn.Module):
    """Trainable additive attention scores, as in Bahdanau et al. (2015).

    ``queries (N, ..., L, query_dim)`` and ``keys (N, ..., S, key_dim)`` give scores
    ``(N, ..., L, S)`` through a hidden layer of width ``hidden_dim``.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int) -> None:
        super().__init__()
        check_positive_int("query_dim", query_dim)
        check_positive_int("key_dim", key_dim)
        check_positive_int("hidden_dim", hidden_dim)
        self.W_query = nn.Parameter(torch.rand(query_dim, hidden_dim))
        self.W_key = nn.Parameter(torch.rand(key_dim, hidden_dim))
        self.w_score = nn.Parameter(torch.rand(hidden_dim))

    def forward(self, queries: Tensor, keys: Tensor) -> Tensor:
        """Score every query against every key."""
        return additive_attention_scores(queries, keys, self.W_query, self.W_key, self.w_score)
