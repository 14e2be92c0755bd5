"""Grouped-query attention: the causal self-attention layer of Llama-style models.

``num_heads`` query heads share ``num_kv_heads`` key/value heads in groups of
``num_heads // num_kv_heads`` (``num_kv_heads = num_heads``: ordinary multi-head
attention; ``num_kv_heads = 1``: multi-query attention). Queries and keys are rotated
by their positions ([`RotaryEmbedding`][attnlab.RotaryEmbedding]), and a
[`KVCache`][attnlab.KVCache] lets a decoder feed the sequence in chunks.

The layer is built on the seams of [`AttentionHeads`][attnlab.AttentionHeads], the
ones [`MultiHeadAttention`][attnlab.MultiHeadAttention] runs: it reuses
``split_heads``, ``attend_heads`` and ``merge_heads`` and overrides only
``position_queries_keys`` (the rotation), with the cache between it and
``attend_heads``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._validation import check_features, check_mask, check_module_input, check_positive_int
from .backends import Backend, check_backend
from .kv_cache import KVCache
from .masks import combine_masks, sliding_window_mask
from .multihead import AttentionHeads
from .rotary import RotaryEmbedding

__all__ = ["GroupedQueryAttention"]


class GroupedQueryAttention(AttentionHeads):
    """Causal self-attention with grouped key/value heads and rotary positions.

    ``module(x)`` treats ``x`` as positions ``0 .. T-1``. ``module(x, cache=cache)``
    treats it as the positions after the ``len(cache)`` already cached: it appends the
    chunk's keys and values to the cache and lets each new query see the cached
    positions and the chunk's positions up to its own (the causal mask aligned to the
    end). Feeding a sequence chunk by chunk gives the full forward's output.

    The forward pass runs the seams of [`AttentionHeads`][attnlab.AttentionHeads]:
    ``split_heads``, ``position_queries_keys`` (overridden here: the rotary rotation),
    the cache, ``attend_heads`` (each group of query heads sharing one key/value head)
    and ``merge_heads``. No dropout, as in Llama's inference.

    Args:
        d_model: Width of each token (``hidden_size``).
        num_heads: Query heads ``H``.
        num_kv_heads: Key/value heads ``Hkv``, dividing ``H``; defaults to ``H``.
        head_dim: Width ``D`` of a head; defaults to ``d_model // num_heads``.
        rope_theta: Base of the rotary frequencies.
        bias: Give the q/k/v projections a bias (``attention_bias`` in Llama's config;
            ``o_proj`` follows it too).
        window: Optional sliding window: each query sees only its last ``window``
            positions (see [`sliding_window_mask`][attnlab.sliding_window_mask]).
        backend: How to compute attention: any name in ``attnlab.BACKENDS``.

    Shape:
        x: ``(T, d_model)`` or ``(B, T, d_model)``; output: the same.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        rope_theta: float = 10000.0,
        bias: bool = False,
        window: int | None = None,
        backend: Backend = "torch",
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int("d_model", d_model)
        self.num_heads = check_positive_int("num_heads", num_heads)
        kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.num_kv_heads = check_positive_int("num_kv_heads", kv_heads)
        if num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads must divide num_heads = {num_heads}; got {self.num_kv_heads}"
            )
        if head_dim is None and d_model % num_heads:
            raise ValueError(
                f"num_heads must divide d_model = {d_model} unless head_dim is given; "
                f"got {num_heads}"
            )
        dim = d_model // num_heads if head_dim is None else head_dim
        self.head_dim = check_positive_int("head_dim", dim)
        self.window = None if window is None else check_positive_int("window", window)
        self.backend = check_backend(backend)
        self.dropout = 0.0
        H, Hkv, D = self.num_heads, self.num_kv_heads, self.head_dim
        self.q_proj = nn.Linear(d_model, H * D, bias=bias)
        self.k_proj = nn.Linear(d_model, Hkv * D, bias=bias)
        self.v_proj = nn.Linear(d_model, Hkv * D, bias=bias)
        self.o_proj = nn.Linear(H * D, d_model, bias=bias)
        self.rotary = RotaryEmbedding(D, rope_theta)

    def forward(
        self, x: Tensor, cache: KVCache | None = None, *, attn_mask: Tensor | None = None
    ) -> Tensor:
        """Attend causally over ``x`` (after the cached positions, if a cache is given).

        Args:
            x: The new tokens.
            cache: Optional cache of this layer's earlier keys and values; the chunk's
                are appended to it.
            attn_mask: Optional extra mask, combined with the causal (and window) rule:
                bool ``True`` = may attend (e.g. ``False`` at padding keys), or float
                added to the scores; broadcastable to ``(B, H, T, S)``.

        Returns:
            The output for the new tokens.

        Shape:
            x: ``(T, d_model)`` or ``(B, T, d_model)``; output: the same.
        """
        context_vecs, _ = self._attend_new_tokens(x, cache, attn_mask=attn_mask)  # (B, H, T, D)
        output: Tensor = self.o_proj(self.merge_heads(context_vecs))  # (B, T, d_model)
        return output

    def _attend_new_tokens(
        self,
        x: Tensor,
        cache: KVCache | None = None,
        need_weights: bool = False,
        *,
        attn_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Every step of ``forward`` before ``merge_heads``: each head's context vectors.

        Checks ``x`` and ``cache``, projects, splits the heads, rotates queries and keys
        by their positions (after the cached ones), appends to the cache, then attends
        causally (within the window, if one is set) through ``attend_heads``.

        Args:
            x: The new tokens.
            cache: Optional cache of this layer's earlier keys and values; the chunk's
                are appended to it.
            need_weights: Also return each query head's attention weights.
            attn_mask: Optional extra mask (bool ``True`` = may attend, or float),
                combined with the causal rule.

        Returns:
            ``(context_vecs, attn_weights)``; the weights are ``None`` unless asked for.

        Shape:
            x: ``(B, T, d_model)`` or ``(T, d_model)``; context_vecs: ``(B, H, T, D)``;
            attn_weights: ``(B, H, T, S)`` with ``S = len(cache) + T`` (no ``B`` unbatched).
        """
        x = check_features("x", x, self.d_model, width_name="d_model")
        check_module_input("x", x, self.q_proj.weight)
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache or None; got {type(cache).__name__}")
        T = x.shape[-2]
        past = 0 if cache is None else len(cache)
        if attn_mask is not None:
            batch = tuple(x.shape[:-2])
            check_mask("attn_mask", attn_mask, (*batch, self.num_heads, T, past + T), x)
        queries = self.split_heads(self.q_proj(x))  # (B, T, H * D) -> (B, H, T, D)
        keys = self.split_heads(self.k_proj(x))  # (B, T, Hkv * D) -> (B, Hkv, T, D)
        values = self.split_heads(self.v_proj(x))  # (B, Hkv, T, D)
        queries, keys = self.position_queries_keys(queries, keys, offset=past)  # rotated
        if cache is not None:
            keys, values = cache.append(keys, values)  # (B, Hkv, past + T, D)
        mask, is_causal = self._mask(T, keys.shape[-2], x.device)
        if attn_mask is not None:  # the rule as a mask, combined with the caller's
            rule = mask if mask is not None else sliding_window_mask(T, keys.shape[-2], T + past)
            mask, is_causal = combine_masks(rule, attn_mask, dtype=x.dtype), False
        return self.attend_heads(
            queries, keys, values, mask, is_causal, need_weights=need_weights
        )  # (B, H, T, D), (B, H, T, S) or None

    def position_queries_keys(
        self, queries: Tensor, keys: Tensor, offset: int = 0
    ) -> tuple[Tensor, Tensor]:
        """Rotate queries and keys by their positions ``offset, offset + 1, ...``.

        Values are not rotated: position shapes who is attended to, not what is read.

        Args:
            queries: Per-head queries of the new tokens.
            keys: Per-head keys of the same tokens.
            offset: Position of the first new token (``len(cache)``).

        Returns:
            The rotated ``(queries, keys)``.

        Shape:
            queries: ``(B, H, T, D)``; keys: ``(B, Hkv, T, D)``; outputs: the same.
        """
        T = queries.shape[-2]
        positions = torch.arange(offset, offset + T, device=queries.device)  # (T,)
        cos, sin = self.rotary.cos_sin(positions)  # (T, D) each: one angle table for both
        rotate = self.rotary.apply_cos_sin  # forward checked x once: no checks again
        return rotate(queries, cos, sin), rotate(keys, cos, sin)

    def _mask(
        self, L: int, S: int, device: torch.device | None = None
    ) -> tuple[Tensor | None, bool]:
        """The mask of ``L`` new queries over ``S`` keys: causal, aligned to the end.

        Args:
            L: New queries (the last ``L`` positions).
            S: Keys, cached ones included.
            device: Where to build the mask.

        Returns:
            ``(attn_mask, is_causal)`` for
            [`attend_heads`][attnlab.AttentionHeads.attend_heads]: ``(None, True)``
            when SDPA's top-left causal flag is the same mask (no window, ``L == S``);
            ``(None, False)`` when nothing is hidden (no window and one new token, the
            last position, which sees every key: each step of decoding); else a bool
            ``(L, S)`` [`sliding_window_mask`][attnlab.sliding_window_mask] (``True`` =
            may attend; the window is ``S`` when none is set).
        """
        if self.window is None and L == S:
            return None, True
        if (self.window is None or self.window >= S) and L == 1:
            return None, False
        window = S if self.window is None else self.window
        return sliding_window_mask(L, S, window, device=device), False

    @staticmethod
    def from_hf(attn: nn.Module, *, backend: Backend = "torch") -> GroupedQueryAttention:
        """Build a module equal to a Hugging Face transformers ``LlamaAttention``.

        Reads ``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``,
        ``head_dim``, ``attention_bias`` and the rotary base (``rope_theta``, in
        ``rope_parameters`` in transformers 5) from ``attn.config`` and copies the
        ``q_proj``/``k_proj``/``v_proj``/``o_proj`` weights. Only Llama's default
        rotary embedding (no scaling) is supported.

        Args:
            attn: The ``LlamaAttention`` (or a module of the same layout).
            backend: The backend of the new module.

        Returns:
            A new ``GroupedQueryAttention`` on the source's device and dtype.
        """
        config = getattr(attn, "config", None)
        if config is None or not all(
            isinstance(getattr(attn, name, None), nn.Linear)
            for name in ("q_proj", "k_proj", "v_proj", "o_proj")
        ):
            raise TypeError(
                f"attn must be a transformers LlamaAttention (config and q/k/v/o_proj); "
                f"got {type(attn).__name__}"
            )
        rope = getattr(config, "rope_parameters", None) or {}
        rope_type = rope.get("rope_type", "default")
        if rope_type != "default":
            raise ValueError(f"attn's config uses rope_type {rope_type!r}; only 'default' works")
        theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        module = GroupedQueryAttention(
            config.hidden_size,
            config.num_attention_heads,
            config.num_key_value_heads,
            head_dim=getattr(config, "head_dim", None),
            rope_theta=theta,
            bias=bool(getattr(config, "attention_bias", False)),
            backend=backend,
        )
        weight = next(attn.parameters())
        module.to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
                module.get_submodule(name).load_state_dict(attn.get_submodule(name).state_dict())
        return module

    def extra_repr(self) -> str:
        """Sizes, window and backend, shown by ``print(module)``."""
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, "
            f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
            f"window={self.window}, backend={self.backend!r}"
        )
