"""Multi-head latent attention (MLA; DeepSeek-V2, V3): cache a latent, not keys and values.

Each token's keys and values come from one low-rank latent ``c`` of width
``kv_lora_rank`` (``r``): ``[k_nope, v] = W_UK c, W_UV c`` per head. Rotary positions
cannot pass through that product (the rotation would sit between ``W_UK`` and the
query), so position lives in a small *decoupled* key ``k_rope`` of width
``qk_rope_head_dim`` (``Dr``), one for all heads, concatenated to every head's key. A
token then costs ``r + Dr`` cached numbers per layer
([`mla_cache_bytes_per_token`][attnlab.mla_cache_bytes_per_token]).

[`MultiHeadLatentAttention`][attnlab.MultiHeadLatentAttention] is a configuration of
[`AttentionHeads`][attnlab.AttentionHeads]: [`LatentProjections`][attnlab.LatentProjections]
makes the entries a cache keeps (``k_rope``, then the latent), the rotary part turns
the queries' and ``k_rope``'s last ``Dr`` features, and the kernel's keys and values
come from the cached latent, expanded (naive), or with ``W_UK`` folded into the
queries and ``W_UV`` into the output (``absorb=True``): multi-query attention over
the latent itself, what a decoder runs. DeepSeek-V3's YaRN (``rope_scaling``) also
multiplies the softmax scale by ``mscale ** 2``; DeepSeek-V3.2 adds a
[`LightningIndexer`][attnlab.LightningIndexer] (``index_topk``): sparse attention.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._validation import (
    check_bool,
    check_features,
    check_floating,
    check_module_input,
    check_positive_int,
    format_shape,
)
from .attention_heads import AttentionHeads, MaskRule, Projections, merge_heads, split_heads
from .backends import Backend
from .kv_cache import KVCache
from .rope_scaling import RopeScaling, ScaledRotaryEmbedding, YarnScaling, rope_scaling_from_hf
from .rotary import RotaryEmbedding, theta_from_hf
from .sparse_attention import LightningIndexer

__all__ = ["LatentCache", "LatentProjections", "MultiHeadLatentAttention"]


class LatentCache(KVCache):
    """A [`KVCache`][attnlab.KVCache] of latent attention's entries, named for them.

    A sparse layer's [`LightningIndexer`][attnlab.LightningIndexer] keeps its keys here
    too (``index_keys``, counted in ``nbytes``).

    Shape:
        rope_keys: ``(B, 1, S, Dr)``, rotated; latent: ``(B, 1, S, r)``; index_keys:
        ``(B, 1, S, Di)``, rotated.
    """

    def __init__(self) -> None:
        super().__init__()
        self.index_keys: Tensor | None = None

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached entries and the indexer's keys."""
        return super().nbytes + (0 if self.index_keys is None else self.index_keys.nbytes)

    def append_index_keys(self, keys: Tensor) -> Tensor:
        """Add a chunk of the indexer's keys ``(..., T, Di)``; return every one so far."""
        keys = check_floating("keys", keys)
        held = self.index_keys
        if held is None:
            self.index_keys = keys
            return keys
        same_rows = keys.shape[:-2] == held.shape[:-2] and keys.shape[-1] == held.shape[-1]
        if not same_rows or keys.dtype != held.dtype:
            raise ValueError(
                f"keys must have the cached index keys' shape {format_shape(held.shape)} but "
                f"for T, and dtype {held.dtype}; got {format_shape(keys.shape)}, {keys.dtype}"
            )
        self.index_keys = torch.cat([held, keys], dim=-2)
        return self.index_keys

    @property
    def rope_keys(self) -> Tensor | None:
        """The shared rotary keys (stored as ``keys``)."""
        return self.keys

    @property
    def latent(self) -> Tensor | None:
        """The normalised latents (stored as ``values``)."""
        return self.values


class LatentProjections(Projections):
    """Latent attention's projections part, with transformers' module names.

    Queries: ``q_proj``, or ``q_a_proj`` -> ``q_a_layernorm`` -> ``q_b_proj`` (rank
    ``q_lora_rank``), each head ``[q_nope, q_rope]``. Entries: ``kv_a_proj_with_mqa``
    gives ``[c, k_rope]``; ``c`` passes ``kv_a_layernorm``. ``kv_b_proj`` holds
    ``W_UK`` and ``W_UV`` (per head, ``Dn`` rows of one then ``Dv`` of the other).

    Args:
        d_model: Width of a token.
        num_heads: Heads ``H``.
        q_lora_rank: Rank of the query's compression (``None``: a full ``q_proj``).
        kv_lora_rank: Width ``r`` of the latent.
        qk_nope_head_dim: ``Dn``, the part of a query/key head without position.
        qk_rope_head_dim: ``Dr``, the rotary part.
        v_head_dim: ``Dv``.
        bias: Biases on ``q_a_proj``, ``kv_a_proj_with_mqa`` and ``o_proj``
            (``attention_bias``).
        absorb: Fold ``W_UK`` into the queries and ``W_UV`` into the output.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        q_lora_rank: int | None,
        kv_lora_rank: int,
        qk_nope_head_dim: int,
        qk_rope_head_dim: int,
        v_head_dim: int,
        bias: bool = False,
        absorb: bool = False,
    ) -> None:
        super().__init__()
        H, r = num_heads, kv_lora_rank
        Dn, Dr, Dv = qk_nope_head_dim, qk_rope_head_dim, v_head_dim
        self.d_model, self.num_heads, self.kv_lora_rank = d_model, H, r
        self.qk_nope_head_dim, self.qk_rope_head_dim, self.v_head_dim = Dn, Dr, Dv
        self.absorb = absorb
        if q_lora_rank is None:
            self.q_proj = nn.Linear(d_model, H * (Dn + Dr), bias=False)
        else:
            self.q_a_proj = nn.Linear(d_model, q_lora_rank, bias=bias)
            self.q_a_layernorm = nn.RMSNorm(q_lora_rank, eps=1e-6)
            self.q_b_proj = nn.Linear(q_lora_rank, H * (Dn + Dr), bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(d_model, r + Dr, bias=bias)
        self.kv_a_layernorm = nn.RMSNorm(r, eps=1e-6)
        self.kv_b_proj = nn.Linear(r, H * (Dn + Dv), bias=False)
        self.o_proj = nn.Linear(H * Dv, d_model, bias=bias)

    def check(self, query: object, key: object, value: object) -> tuple[tuple[int, ...], int, int]:
        """Self-attention only: ``x`` of width ``d_model``; batch shape, ``T``, ``T``."""
        if key is not query or value is not query:
            raise TypeError(
                "this layer is self-attention: call it as layer(x, cache=...), with no key "
                f"or value; got a second positional argument of type {type(key).__name__}"
            )
        x = check_features("x", query, self.d_model, width_name="d_model")
        check_module_input("x", x, self.kv_a_proj_with_mqa.weight)
        return tuple(x.shape[:-2]), x.shape[-2], x.shape[-2]

    def query_latent(self, x: Tensor) -> Tensor:
        """``(B, L, d_model) -> (B, L, q_lora_rank)``: ``q_a_layernorm(q_a_proj(x))``."""
        if "q_proj" in self._modules:
            raise ValueError("this layer's queries have no latent (built with q_lora_rank=None)")
        latent: Tensor = self.q_a_layernorm(self.q_a_proj(x))
        return latent

    def queries(self, query: Tensor) -> Tensor:
        """``(B, L, d_model) -> (B, H, L, Dn + Dr)``: ``[q_nope, q_rope]`` per head."""
        if "q_proj" in self._modules:
            flat = self.q_proj(query)
        else:
            flat = self.q_b_proj(self.query_latent(query))
        return split_heads(flat, self.qk_nope_head_dim + self.qk_rope_head_dim)

    def entries(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """What a cache keeps: ``k_rope`` ``(B, 1, S, Dr)`` and the latent ``(B, 1, S, r)``."""
        compressed = self.kv_a_proj_with_mqa(key)  # (B, S, r + Dr)
        latent, rope_keys = (
            compressed[..., : self.kv_lora_rank],
            compressed[..., self.kv_lora_rank :],
        )
        return rope_keys.unsqueeze(-3), self.kv_a_layernorm(latent).unsqueeze(-3)

    def _up(self) -> tuple[Tensor, Tensor]:
        """``W_UK`` ``(H, Dn, r)`` and ``W_UV`` ``(H, Dv, r)``: ``kv_b_proj``'s rows by head."""
        per_head = self.kv_b_proj.weight.view(self.num_heads, -1, self.kv_lora_rank)
        Dn = self.qk_nope_head_dim
        return per_head[:, :Dn], per_head[:, Dn:]

    def kernel_inputs(
        self, queries: Tensor, keys: Tensor, values: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Keys and values from every cached latent: expanded, or absorbed into the queries.

        ``keys`` are the cached rotary keys ``(B, 1, S, Dr)``, ``values`` the latents
        ``(B, 1, S, r)``. Naive: ``(B, H, L, Dn + Dr)``, ``(B, H, S, Dn + Dr)``,
        ``(B, H, S, Dv)``. Absorbed: ``(B, H, L, r + Dr)``, ``(B, 1, S, r + Dr)``,
        ``(B, 1, S, r)``, one key/value head for all ``H``.
        """
        rope_keys, latent = keys, values
        Dn, Dv = self.qk_nope_head_dim, self.v_head_dim
        q_nope, q_rope = queries[..., :Dn], queries[..., Dn:]
        if self.absorb:
            W_UK, _ = self._up()
            q_latent = torch.einsum("...hld,hdr->...hlr", q_nope, W_UK)  # (B, H, L, r)
            return (
                torch.cat([q_latent, q_rope], dim=-1),
                torch.cat([latent, rope_keys], dim=-1),
                latent,
            )
        kv = split_heads(self.kv_b_proj(latent.squeeze(-3)), Dn + Dv)  # (B, H, S, Dn + Dv)
        k_nope, v = kv[..., :Dn], kv[..., Dn:]
        k_rope = rope_keys.expand(*k_nope.shape[:-1], self.qk_rope_head_dim)
        return queries, torch.cat([k_nope, k_rope], dim=-1), v

    def out(self, context: Tensor) -> Tensor:
        """``(B, H, L, Dv)`` (absorbed: ``(B, H, L, r)``, through ``W_UV`` first) -> ``o_proj``."""
        if self.absorb:
            _, W_UV = self._up()
            context = torch.einsum("...hlr,hvr->...hlv", context, W_UV)  # (B, H, L, Dv)
        output: Tensor = self.o_proj(merge_heads(context))
        return output


class MultiHeadLatentAttention(AttentionHeads):
    """Causal self-attention that caches a latent per token (DeepSeek-V2/V3's MLA).

    A configuration of [`AttentionHeads`][attnlab.AttentionHeads]:
    [`LatentProjections`][attnlab.LatentProjections], a
    [`RotaryEmbedding`][attnlab.RotaryEmbedding] of width ``qk_rope_head_dim`` on the
    decoupled part (a [`ScaledRotaryEmbedding`][attnlab.ScaledRotaryEmbedding] with
    ``rope_scaling``), the causal rule, scale ``1 / sqrt(Dn + Dr)`` (times YaRN's
    ``softmax_factor``). A cache ([`LatentCache`][attnlab.LatentCache], or any
    [`Cache`][attnlab.Cache]) keeps the rotary key and the latent. ``absorb=True``
    (settable) computes the same output by attending over the latent with ``W_UK`` in
    the queries and ``W_UV`` after. With ``index_topk`` a
    [`LightningIndexer`][attnlab.LightningIndexer] is the layer's ``selector``: each
    query attends to its ``index_topk`` best keys (DeepSeek-V3.2; a LatentCache then).

    Args:
        d_model: Width of a token (``hidden_size``).
        num_heads: Heads ``H``.
        kv_lora_rank: Width ``r`` of the cached latent.
        qk_rope_head_dim: ``Dr``, the rotary part of a query/key head.
        qk_nope_head_dim: ``Dn``, the part without position.
        v_head_dim: ``Dv``.
        q_lora_rank: Rank of the query's compression (``None``: a full projection).
        rope_theta: Base of the rotary frequencies.
        bias: ``attention_bias``.
        absorb: Fold the up-projections into query and output.
        backend: How to compute attention: any name in ``attnlab.BACKENDS``.
        rope_scaling: Optional rotary scaling ([`YarnScaling`][attnlab.YarnScaling] in
            DeepSeek-V3 and V3.2).
        index_topk: Keys each query keeps (``None``: dense attention).
        index_n_heads: The indexer's heads ``Hi``.
        index_head_dim: Their width ``Di``.

    Shape:
        x: ``(T, d_model)`` or ``(B, T, d_model)``; output: the same.
    """

    projections: LatentProjections
    positions: RotaryEmbedding

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        kv_lora_rank: int,
        qk_rope_head_dim: int,
        qk_nope_head_dim: int,
        v_head_dim: int,
        q_lora_rank: int | None = None,
        rope_theta: float = 10000.0,
        bias: bool = False,
        absorb: bool = False,
        backend: Backend = "torch",
        rope_scaling: RopeScaling | None = None,
        index_topk: int | None = None,
        index_n_heads: int = 64,
        index_head_dim: int = 128,
    ) -> None:
        sizes = {
            "d_model": d_model,
            "num_heads": num_heads,
            "kv_lora_rank": kv_lora_rank,
            "qk_rope_head_dim": qk_rope_head_dim,
            "qk_nope_head_dim": qk_nope_head_dim,
            "v_head_dim": v_head_dim,
        }
        for name, size in sizes.items():
            check_positive_int(name, size)
        if q_lora_rank is not None:
            check_positive_int("q_lora_rank", q_lora_rank)
        projections = LatentProjections(
            d_model,
            num_heads,
            q_lora_rank,
            kv_lora_rank,
            qk_nope_head_dim,
            qk_rope_head_dim,
            v_head_dim,
            bias=check_bool("bias", bias),
            absorb=check_bool("absorb", absorb),
        )
        selector = None
        if index_topk is not None:
            if q_lora_rank is None:
                raise ValueError(
                    "q_lora_rank must be a positive int with index_topk (the indexer's "
                    "queries come from the query latent); got None"
                )
            selector = LightningIndexer(
                d_model, q_lora_rank, index_n_heads, index_head_dim, qk_rope_head_dim, index_topk
            )
        positions = (
            RotaryEmbedding(qk_rope_head_dim, rope_theta)
            if rope_scaling is None
            else ScaledRotaryEmbedding(qk_rope_head_dim, rope_theta, rope_scaling)
        )
        sharpen = rope_scaling.softmax_factor if isinstance(rope_scaling, YarnScaling) else 1.0
        qk_head_dim = qk_nope_head_dim + qk_rope_head_dim
        super().__init__(
            projections=projections,
            positions=positions,
            mask=MaskRule(causal=True),
            num_heads=num_heads,
            head_dim=qk_head_dim,
            value_head_dim=v_head_dim,
            scale=qk_head_dim**-0.5 * sharpen,  # the absorbed queries are wider: fixed here
            backend=backend,
            selector=selector,
        )
        self.d_model, self.kv_lora_rank, self.q_lora_rank = d_model, kv_lora_rank, q_lora_rank

    @property
    def absorb(self) -> bool:
        """Attend over the latent with the up-projections folded in (settable)."""
        return self.projections.absorb

    @absorb.setter
    def absorb(self, value: bool) -> None:
        self.projections.absorb = check_bool("absorb", value)

    @staticmethod
    def from_hf(attn: nn.Module, *, backend: Backend = "torch") -> MultiHeadLatentAttention:
        """Build a module equal to transformers' ``DeepseekV3Attention`` or V3.2's.

        Reads the sizes and the rotary scaling (V3's YaRN with its ``mscale``) from
        ``attn.config`` and copies every weight by name; V3.2's ``indexer`` becomes the
        layer's ``selector``. DeepSeek lays the main attention's rotary features out in
        adjacent pairs (``rope_interleave``; always in V3.2): their rows of ``q_b_proj``
        (or ``q_proj``) and ``kv_a_proj_with_mqa`` are reordered, evens then odds, so
        the rotate-half rotation gives the same dot products. V3.2's indexer pairs
        halves already.
        """
        config = getattr(attn, "config", None)
        if config is None or not isinstance(getattr(attn, "kv_b_proj", None), nn.Linear):
            raise TypeError(
                f"attn must be a transformers DeepseekV3Attention (config, kv_b_proj); "
                f"got {type(attn).__name__}"
            )
        indexer = getattr(attn, "indexer", None)
        if indexer is not None and type(attn).__name__ != "DeepseekV32Attention":
            raise TypeError(
                "attn's indexer must be DeepSeek-V3.2's (DeepseekV32Attention: halves "
                f"paired, its own top-k in every layer); got {type(attn).__name__}"
            )
        H, Dn, Dr = config.num_attention_heads, config.qk_nope_head_dim, config.qk_rope_head_dim
        rope = config.rope_parameters or {}
        module = MultiHeadLatentAttention(
            config.hidden_size,
            H,
            config.kv_lora_rank,
            Dr,
            Dn,
            config.v_head_dim,
            q_lora_rank=config.q_lora_rank,
            rope_theta=theta_from_hf(rope, config),
            bias=bool(config.attention_bias),
            backend=backend,
            rope_scaling=rope_scaling_from_hf(rope, config.max_position_embeddings),
            index_topk=None if indexer is None else config.index_topk,
            index_n_heads=getattr(config, "index_n_heads", 64),
            index_head_dim=getattr(config, "index_head_dim", 128),
        )
        state = {
            name.replace("indexer.", "selector.", 1): t.detach().clone()
            for name, t in attn.state_dict().items()
        }
        if indexer is not None or getattr(config, "rope_interleave", False):
            pairs = torch.cat([torch.arange(0, Dr, 2), torch.arange(1, Dr, 2)])
            q_name = "q_proj.weight" if config.q_lora_rank is None else "q_b_proj.weight"
            q = state[q_name].view(H, Dn + Dr, -1)
            q[:, Dn:] = q[:, Dn:][:, pairs]
            r = config.kv_lora_rank
            for name in ("kv_a_proj_with_mqa.weight", "kv_a_proj_with_mqa.bias"):
                if name in state:
                    state[name][r:] = state[name][r:][pairs]
        weight = next(attn.parameters())
        module.to(device=weight.device, dtype=weight.dtype)
        if indexer is not None and isinstance(module.selector, LightningIndexer):
            module.selector.weights_proj.to(indexer.weights_proj.weight.dtype)  # float32 in bf16
        module.load_state_dict(state)
        module.train(attn.training)
        return module

    def extra_repr(self) -> str:
        """Sizes, absorption and backend (and ``index_topk``), shown by ``print(module)``."""
        p = self.projections
        selector = self.selector
        sparse = f", index_topk={selector.topk}" if isinstance(selector, LightningIndexer) else ""
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, "
            f"kv_lora_rank={self.kv_lora_rank}, q_lora_rank={self.q_lora_rank}, "
            f"qk_nope_head_dim={p.qk_nope_head_dim}, qk_rope_head_dim={p.qk_rope_head_dim}, "
            f"v_head_dim={p.v_head_dim}, absorb={self.absorb}, backend={self.backend!r}{sparse}"
        )
