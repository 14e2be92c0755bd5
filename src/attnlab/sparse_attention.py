"""DeepSeek Sparse Attention (DeepSeek-V3.2): a cheap indexer picks the keys each query reads.

Dense causal attention scores every query against every earlier key. DeepSeek-V3.2's
*lightning indexer* scores every pair too, but cheaply (a few small heads, ReLU
instead of softmax, FP8 in DeepSeek's kernel), and the main attention (latent
attention, MLA) attends to each query's ``index_topk`` best keys only. For query
``i`` and key ``j``, with ``Hi`` indexer heads of width ``Di``:

    I[i, j] = sum_h w_h(x_i) * relu(q_h(i) . k(j) / sqrt(Di)),   w = weights_proj(x_i) / sqrt(Hi)

[`LightningIndexer`][attnlab.LightningIndexer] is a key-selection part of the composed
layer ([`KeySelection`][attnlab.KeySelection]): it turns the layer's mask into one that
also hides every key outside a query's top ``index_topk``.
[`sparse_attention_counts`][attnlab.sparse_attention_counts] counts what that saves.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from ._validation import check_features, check_positive_int
from .attention_heads import AttentionHeads, PositionEmbeddings, split_heads
from .key_selection import KeySelection
from .kv_cache import Cache
from .masks import apply_mask, causal_mask

__all__ = ["LightningIndexer", "SparseAttentionCounts", "sparse_attention_counts"]


@runtime_checkable
class _IndexKeyStore(Protocol):
    """A cache that keeps the indexer's keys beside the layer's own entries (``LatentCache``)."""

    index_keys: Tensor | None

    def __len__(self) -> int: ...

    def append_index_keys(self, keys: Tensor) -> Tensor: ...


@runtime_checkable
class _QueryLatent(Protocol):
    """A projections part whose queries pass through a latent (``LatentProjections``)."""

    def query_latent(self, x: Tensor) -> Tensor: ...


class LightningIndexer(KeySelection):
    """DeepSeek-V3.2's lightning indexer: score every key cheaply, keep each query's top k.

    Queries come from the layer's query latent (``wq_b``), ``num_heads`` of them; one
    key per token (``wk``, then ``k_norm``, a LayerNorm with bias). The first
    ``rope_head_dim`` features of each are turned by the layer's positions part, its
    rotate-half pairing (DeepSeek's checkpoints pair neighbours in the main attention,
    halves here). Scores are computed in float32 whatever the layer's dtype, without
    gradient (the choice is a mask). Keys the layer's mask hides score ``-inf``, then
    each query keeps its ``topk`` best; ties go to ``torch.topk``. A cache must keep
    the indexer's rotated keys ([`LatentCache`][attnlab.LatentCache] does).

    Args:
        d_model: Width of a token.
        q_lora_rank: Width of the layer's query latent.
        num_heads: Indexer heads ``Hi`` (``index_n_heads``; DeepSeek-V3.2: 64).
        head_dim: Their width ``Di`` (``index_head_dim``; 128).
        rope_head_dim: Rotary features at the start of each (``qk_rope_head_dim``; 64).
        topk: Keys each query keeps (``index_topk``; 2048).

    Shape:
        index scores: ``(B, L, S)``; the returned mask: ``(B, 1, L, S)`` or wider.
    """

    def __init__(
        self,
        d_model: int,
        q_lora_rank: int,
        num_heads: int,
        head_dim: int,
        rope_head_dim: int,
        topk: int,
    ) -> None:
        super().__init__()
        sizes = {
            "d_model": d_model,
            "q_lora_rank": q_lora_rank,
            "index_n_heads": num_heads,
            "index_head_dim": head_dim,
            "qk_rope_head_dim": rope_head_dim,
            "index_topk": topk,
        }
        for name, size in sizes.items():
            check_positive_int(name, size)
        if rope_head_dim > head_dim:
            raise ValueError(
                f"index_head_dim must be at least qk_rope_head_dim = {rope_head_dim} (its "
                f"first features are rotated); got {head_dim}"
            )
        self.num_heads, self.head_dim = num_heads, head_dim
        self.rope_head_dim, self.topk = rope_head_dim, topk
        self.wq_b = nn.Linear(q_lora_rank, num_heads * head_dim, bias=False)
        self.wk = nn.Linear(d_model, head_dim, bias=False)
        self.k_norm = nn.LayerNorm(head_dim, eps=1e-6)
        self.weights_proj = nn.Linear(d_model, num_heads, bias=False)

    def check_cache(self, cache: object) -> None:
        """A cache must keep the indexer's keys, one per position it holds."""
        if cache is None:
            return
        if not isinstance(cache, _IndexKeyStore):
            raise TypeError(
                "cache must keep the indexer's keys (a LatentCache) for a layer with a "
                f"LightningIndexer; got {type(cache).__name__}"
            )
        held = 0 if cache.index_keys is None else cache.index_keys.shape[-2]
        if held != len(cache):
            raise ValueError(
                f"cache must hold the indexer's keys of all its {len(cache)} positions "
                f"(fill it with this layer from the first token); got {held}"
            )

    def index_scores(
        self, layer: nn.Module, x: Tensor, table: PositionEmbeddings | None = None
    ) -> Tensor:
        """Every query's score for every key of ``x`` (before any mask), in float32.

        Args:
            layer: The sparse layer this indexer belongs to (its query latent and rotary).
            x: The layer's input, positions ``0 .. T - 1``.
            table: A model's rotary ``(cos, sin)`` for them; the layer's own by default.

        Shape:
            x: ``(B, T, d_model)``; output: ``(B, T, T)``.
        """
        check_features("x", x, self.wk.in_features, width_name="d_model")
        return self._scores(layer, x, 0, table, None)

    def _scores(
        self,
        layer: nn.Module,
        x: Tensor,
        offset: int,
        table: PositionEmbeddings | None,
        cache: Cache | None,
    ) -> Tensor:
        """``(B, L, S)`` float32 scores of queries at ``offset ..``; the new keys join ``cache``."""
        projections = getattr(layer, "projections", None)
        if not isinstance(layer, AttentionHeads) or not isinstance(projections, _QueryLatent):
            raise TypeError(
                "layer must be an AttentionHeads whose queries pass through a latent "
                f"(LatentProjections); got {type(layer).__name__}"
            )
        Dr = self.rope_head_dim
        latent = projections.query_latent(x)  # (B, L, q_lora_rank)
        queries = split_heads(self.wq_b(latent), self.head_dim)  # (B, Hi, L, Di)
        keys = self.k_norm(self.wk(x)).unsqueeze(-3)  # (B, L, Di) -> (B, 1, L, Di)
        q_rope, k_rope = layer.position_queries_keys(
            queries[..., :Dr], keys[..., :Dr], offset, table
        )  # the first Dr features turned, halves paired
        queries = torch.cat([q_rope, queries[..., Dr:]], dim=-1)
        keys = torch.cat([k_rope, keys[..., Dr:]], dim=-1)
        if isinstance(cache, _IndexKeyStore):  # check_cache refused any other cache
            keys = cache.append_index_keys(keys)  # (B, 1, S, Di)
        # (B, Hi, L, Di) @ (B, 1, Di, S) -> (B, Hi, L, S), float32 as DeepSeek's
        scores = torch.relu(queries.float() @ keys.float().transpose(-2, -1) * self.head_dim**-0.5)
        weights = self.weights_proj(x.to(self.weights_proj.weight.dtype)).float()  # (B, L, Hi)
        weights = weights * self.num_heads**-0.5
        return torch.einsum("...lh,...hls->...ls", weights, scores)  # (B, L, S)

    def forward(
        self,
        layer: nn.Module,
        x: Tensor,
        mask: Tensor | None,
        is_causal: bool,
        *,
        offset: int,
        table: PositionEmbeddings | None,
        cache: Cache | None,
    ) -> Tensor:
        """The layer's mask with every key outside a query's top ``topk`` hidden.

        Shape:
            mask: broadcastable to ``(B, H, L, S)``; output: bool or float like it.
        """
        with torch.no_grad():  # a choice of keys: no gradient reaches the indexer here
            scores = self._scores(layer, x, offset, table, cache).unsqueeze(-3)  # (B, 1, L, S)
            L, S = scores.shape[-2:]
            if mask is None and is_causal:
                mask = causal_mask(L, S, device=x.device)
            chosen = apply_mask(scores, mask).topk(min(self.topk, S), dim=-1).indices
            kept = torch.zeros(*chosen.shape[:-1], S, dtype=torch.bool, device=x.device)
            kept = kept.scatter(-1, chosen, True)  # (B, 1 or H, L, S)
        if mask is None:
            return kept
        return mask & kept if mask.dtype == torch.bool else apply_mask(mask, kept)

    def extra_repr(self) -> str:
        """Heads, widths and ``topk``, shown by ``print(module)``."""
        return (
            f"num_heads={self.num_heads}, head_dim={self.head_dim}, "
            f"rope_head_dim={self.rope_head_dim}, topk={self.topk}"
        )


class SparseAttentionCounts(NamedTuple):
    """What ``sparse_attention_counts`` returns, per head and layer, for ``T`` tokens.

    Attributes:
        dense_scores: Query-key scores dense causal attention computes, ``T (T + 1) / 2``.
        sparse_scores: Those the main attention computes with top-k,
            ``sum_i min(i + 1, k)``.
        indexer_scores: Those the indexer computes: every pair, ``T (T + 1) / 2``.
        dense_keys_read: Keys the last query reads, dense: ``T``.
        sparse_keys_read: The same with top-k: ``min(T, k)``.
    """

    dense_scores: int
    sparse_scores: int
    indexer_scores: int
    dense_keys_read: int
    sparse_keys_read: int


def sparse_attention_counts(num_tokens: int, index_topk: int) -> SparseAttentionCounts:
    """Scores computed and keys read by causal attention over ``num_tokens``, dense and top-k.

    Query ``i`` (from 0) may see ``i + 1`` keys and the main attention scores
    ``min(i + 1, index_topk)`` of them; the indexer scores all ``i + 1``. The last
    query is the one a decoding step runs, its keys the cache it reads.

    Args:
        num_tokens: ``T``, the sequence's length so far.
        index_topk: ``k``, keys kept per query.

    Returns:
        [`SparseAttentionCounts`][attnlab.SparseAttentionCounts].
    """
    T = check_positive_int("num_tokens", num_tokens)
    k = check_positive_int("index_topk", index_topk)
    pairs = T * (T + 1) // 2
    short = min(T, k)  # the first queries see fewer than k keys and keep them all
    sparse = short * (short + 1) // 2 + (T - short) * k
    return SparseAttentionCounts(pairs, sparse, pairs, T, short)
