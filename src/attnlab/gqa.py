"""Grouped-query attention: the causal self-attention layer of Llama-style models.

``num_heads`` query heads share ``num_kv_heads`` key/value heads in groups of
``num_heads // num_kv_heads`` (``num_kv_heads = num_heads``: ordinary multi-head
attention; ``num_kv_heads = 1``: multi-query attention). Queries and keys are rotated
by their positions ([`RotaryEmbedding`][attnlab.RotaryEmbedding]), and a
[`KVCache`][attnlab.KVCache] lets a decoder feed the sequence in chunks.

The layer runs the one forward pass of [`AttentionHeads`][attnlab.AttentionHeads],
the one [`MultiHeadAttention`][attnlab.MultiHeadAttention] runs: it reuses
``split_heads``, ``attend_heads`` and ``merge_heads``, names its projections
(``q_proj``/``k_proj``/``v_proj``/``o_proj``, Hugging Face's names) and overrides
``position_queries_keys`` (the rotation) and ``causal_rule`` (end-aligned with the
cache, within the window: [`decoder_mask`][attnlab.decoder_mask]).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._validation import check_features, check_module_input, check_positive_int
from .attention_heads import AttentionHeads, PositionEmbeddings
from .backends import Backend, check_backend
from .masks import decoder_mask
from .rotary import RotaryEmbedding

__all__ = ["GroupedQueryAttention"]


class GroupedQueryAttention(AttentionHeads):
    """Causal self-attention with grouped key/value heads and rotary positions.

    ``module(x)`` treats ``x`` as positions ``0 .. T-1``. ``module(x, cache=cache)``
    treats it as the positions after the ``len(cache)`` already cached: it appends the
    chunk's keys and values to the cache and lets each new query see the cached
    positions and the chunk's positions up to its own (the causal mask aligned to the
    end). Feeding a sequence chunk by chunk gives the full forward's output.

    The forward pass is [`AttentionHeads`][attnlab.AttentionHeads]'s: ``split_heads``,
    ``position_queries_keys`` (overridden here: the rotary rotation, or the model's
    ``position_embeddings``), the cache, ``causal_rule`` (overridden: end-aligned, within
    the window) combined with an optional ``attn_mask`` (bool ``True`` = may attend,
    e.g. ``False`` at padding keys), ``attend_heads`` (each group of query heads sharing
    one key/value head), ``merge_heads``; ``ablate_heads`` and ``need_weights`` (per
    query head) as the skeleton takes them. No dropout, as in Llama's inference.

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
        self.value_head_dim = self.head_dim
        self.window = None if window is None else check_positive_int("window", window)
        self.backend = check_backend(backend)
        H, Hkv, D = self.num_heads, self.num_kv_heads, self.head_dim
        self.q_proj = nn.Linear(d_model, H * D, bias=bias)
        self.k_proj = nn.Linear(d_model, Hkv * D, bias=bias)
        self.v_proj = nn.Linear(d_model, Hkv * D, bias=bias)
        self.o_proj = nn.Linear(H * D, d_model, bias=bias)
        self.rotary = RotaryEmbedding(D, rope_theta)

    def check_inputs(
        self, query: object, key: object, value: object
    ) -> tuple[tuple[int, ...], int, int]:
        """Check ``x`` (self-attention only: key and value are ``x``); batch shape, T, T."""
        if key is not query or value is not query:
            kind = type(key if key is not query else value).__name__
            raise TypeError(
                f"GroupedQueryAttention is self-attention: call it as layer(x, cache=...), "
                f"with no key or value; got a second positional argument of type {kind}"
            )
        x = check_features("x", query, self.d_model, width_name="d_model")
        check_module_input("x", x, self.q_proj.weight)
        return tuple(x.shape[:-2]), x.shape[-2], x.shape[-2]

    def project_qkv(
        self, query: Tensor, key: Tensor, value: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``q_proj``, ``k_proj``, ``v_proj``: ``(B, T, H * D)``, ``(B, T, Hkv * D)`` twice."""
        return self.q_proj(query), self.k_proj(key), self.v_proj(value)

    def project_out(self, x: Tensor) -> Tensor:
        """``o_proj`` of the merged heads: ``(B, T, H * D)`` -> ``(B, T, d_model)``."""
        output: Tensor = self.o_proj(x)
        return output

    def position_queries_keys(
        self,
        queries: Tensor,
        keys: Tensor,
        offset: int = 0,
        position_embeddings: PositionEmbeddings | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Rotate queries and keys by their positions ``offset, offset + 1, ...``.

        Values are not rotated: position shapes who is attended to, not what is read.
        A model passes its one rotary table for every layer (``position_embeddings``);
        a layer used alone builds its own from ``rotary``.

        Args:
            queries: Per-head queries of the new tokens.
            keys: Per-head keys of the same tokens.
            offset: Position of the first new token (``len(cache)``).
            position_embeddings: ``(cos, sin)`` for these positions, each ``(T, D)`` or
                ``(B, T, D)`` (one row of positions per sequence); ``None``: this
                layer's own table for ``offset .. offset + T - 1``.

        Returns:
            The rotated ``(queries, keys)``.

        Shape:
            queries: ``(B, H, T, D)``; keys: ``(B, Hkv, T, D)``; outputs: the same.
        """
        if position_embeddings is None:
            T = queries.shape[-2]
            positions = torch.arange(offset, offset + T, device=queries.device)  # (T,)
            position_embeddings = self.rotary.cos_sin(positions)  # (T, D) each
        cos, sin = position_embeddings  # one angle table for queries and keys
        if cos.dim() == 3:  # (B, T, D) -> (B, 1, T, D): the same angles for every head
            cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)
        rotate = self.rotary.apply_cos_sin  # forward checked x once: no checks again
        return rotate(queries, cos, sin), rotate(keys, cos, sin)

    def causal_rule(
        self, L: int, S: int, device: torch.device, offset: int = 0
    ) -> tuple[Tensor | None, bool]:
        """Causal, aligned to the end (the queries follow the cached keys), within the window.

        [`decoder_mask`][attnlab.decoder_mask] in its cheapest form: SDPA's flag
        for a whole sequence, nothing for one decoding step, else a bool ``(L, S)``.
        """
        return decoder_mask(L, S, self.window, device=device)

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
