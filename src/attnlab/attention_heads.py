"""The one attention skeleton: every multi-head layer's forward pass, with public seams.

[`AttentionHeads`][attnlab.AttentionHeads] runs the one forward pass of
[`MultiHeadAttention`][attnlab.MultiHeadAttention],
[`GroupedQueryAttention`][attnlab.GroupedQueryAttention] and the real LLM's
[`LlamaAttention`][attnlab.llama.LlamaAttention]. A layer is a small class that sets a
few attributes and overrides seams, never the forward, as torchtune's one
``MultiHeadAttention`` serves MHA, GQA and MQA with injected parts. The seams, in order,
and the names the package uses (where they differ from the chapters') are listed in
[`AttentionHeads`][attnlab.AttentionHeads].

Query/key heads have width ``head_dim`` (``D``) and value heads ``value_head_dim``
(``Dv``, ``D`` unless a layer sets it), so latent attention's split widths need no new
forward. Head ablation is the ``ablate_heads`` keyword; the attention weights come back
as a named [`AttentionOutput`][attnlab.AttentionOutput].

Shape legend: ``B`` batch, ``L`` queries, ``S`` keys (cached ones included), ``H`` query
heads, ``Hkv`` key/value heads, ``D`` query/key head width, ``Dv`` value head width.
Masks follow PyTorch's SDPA: bool ``True`` = may attend, float added to the scores.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Literal, NamedTuple, overload

import torch
from torch import Tensor, nn

from ._validation import (
    check_bool,
    check_floating,
    check_key_padding_mask,
    check_mask,
    check_same_device,
    format_shape,
)
from .backends import Backend, run_kernel
from .functional import AttentionCall, attention_kernel
from .kv_cache import Cache, KVCache
from .masks import causal_mask, combine_masks, padding_to_attn_mask

__all__ = ["AttentionHeads", "AttentionOutput", "PositionEmbeddings"]

PositionEmbeddings = tuple[Tensor, Tensor]
"""Rotary ``(cos, sin)`` computed once per model: each ``(L, D)`` or ``(B, L, D)``."""


class AttentionOutput(NamedTuple):
    """A layer's output with its attention weights (what ``need_weights=True`` returns).

    A tuple too: ``output, attn_weights = layer(x, need_weights=True)`` unpacks it.

    Attributes:
        output: ``(B, L, d_out)``, the layer's output.
        attn_weights: ``(B, H, L, S)`` per query head, or ``(B, L, S)`` averaged over
            the heads; after dropout in training.
    """

    output: Tensor
    attn_weights: Tensor


class AttentionHeads(nn.Module):
    """The skeleton of a multi-head attention layer: one forward, declared seams.

    A subclass sets the attributes below in its ``__init__`` and overrides seams:
    ``check_inputs``, ``project_qkv`` and ``project_out`` always (they name its
    projections); ``position_queries_keys``, ``causal_rule`` and ``score_bias`` when it
    places positions or masks differently. ``split_heads``, ``attend_heads`` and
    ``merge_heads`` serve every layer. The forward runs, in order:

        check_inputs          query, key, value -> batch shape, L, S (before any arithmetic)
        project_qkv           (B, L, d_in), (B, S, kdim), (B, S, vdim) -> flat q, k, v
        split_heads           (B, T, H * D) -> (B, H, T, D)
        position_queries_keys rotate q and k by position (rotary), or leave them
        (the KVCache)         keys and values appended after the cached ones
        causal_rule           the layer's own mask: top-left causal, or end-aligned with a window
        score_bias            a float added to the scores by position (ALiBi, T5), or None
        attend_heads          the kernel: every head at once through the backend registry
        merge_heads           (B, H, L, Dv) -> (B, L, H * Dv)
        project_out           (B, L, H * Dv) -> (B, L, d_out)

    **One vocabulary, two sets of attribute names.** The chapters build
    ``MultiHeadAttention`` with the teaching names of *Build a Large Language Model (From
    Scratch)*; the Llama layers keep Hugging Face's names, so that checkpoints load by name.
    The skeleton's seams and arguments are the same for both:

    * query, key and value projections: ``W_query``, ``W_key``, ``W_value`` in the chapters'
      ``MultiHeadAttention``; ``q_proj``, ``k_proj``, ``v_proj`` in the Llama layers; both
      behind the seam ``project_qkv``;
    * output projection: ``out_proj`` (chapters), ``o_proj`` (Llama); the seam ``project_out``;
    * token width: ``d_in`` and ``d_out`` (chapters; ``d_out`` always the total),
      ``d_model`` (Llama, ``hidden_size``, in and out alike);
    * heads, widths, masks and results: one set of names everywhere (``num_heads``,
      ``num_kv_heads``, ``head_dim``, ``attn_mask``, ``key_padding_mask``, ``attn_weights``,
      ``context_vecs``).

    Attributes:
        num_heads: Query heads ``H``.
        num_kv_heads: Key/value heads ``Hkv``, dividing ``H`` (``H`` in multi-head
            attention; fewer in grouped-query attention).
        head_dim: Width ``D`` of a query or key head.
        value_head_dim: Width ``Dv`` of a value head (``head_dim`` in the package's
            layers; another width in latent attention).
        dropout: Dropout probability on the attention weights, in training only.
        scale: Multiplier of the scores; ``None`` means ``1 / sqrt(head_dim)``.
        backend: The kernel's name in the registry (``attnlab.backends.KERNELS``;
            [`register_kernel`][attnlab.register_kernel] adds one).
        averages_weights: Whether ``need_weights`` averages over the heads by default
            (``nn.MultiheadAttention`` does; the Llama layers return every head's).
    """

    num_heads: int
    num_kv_heads: int
    head_dim: int
    value_head_dim: int
    dropout: float = 0.0
    scale: float | None = None
    backend: Backend
    averages_weights: bool = False

    @overload
    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        attn_mask: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        cache: Cache | None = None,
        position_embeddings: PositionEmbeddings | None = None,
        ablate_heads: Iterable[int] = (),
        need_weights: Literal[False] = False,
        average_attn_weights: bool | None = None,
    ) -> Tensor: ...

    @overload
    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        attn_mask: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        cache: Cache | None = None,
        position_embeddings: PositionEmbeddings | None = None,
        ablate_heads: Iterable[int] = (),
        need_weights: Literal[True],
        average_attn_weights: bool | None = None,
    ) -> AttentionOutput: ...

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        attn_mask: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        cache: Cache | None = None,
        position_embeddings: PositionEmbeddings | None = None,
        ablate_heads: Iterable[int] = (),
        need_weights: bool = False,
        average_attn_weights: bool | None = None,
    ) -> Tensor | AttentionOutput:
        """Attend from ``query``'s tokens to ``key``'s, mixing ``value``'s: the one forward.

        Args:
            query: The tokens that ask.
            key: The tokens looked at; defaults to ``query`` (self-attention).
            value: The tokens whose content is mixed; defaults to ``key``.
            attn_mask: Optional mask broadcastable to ``(B, H, L, S)``, combined with
                the layer's own causal rule: bool ``True`` = may attend, or float added
                to the scores. ``S`` counts the cached keys too.
            key_padding_mask: Optional, one entry per key: bool ``True`` = real token,
                or float added to the scores.
            cache: Optional [`KVCache`][attnlab.KVCache] of earlier keys and values: the
                new ones are appended, and the queries are the positions after them.
            position_embeddings: Rotary ``(cos, sin)`` computed once for the whole model
                (each ``(L, D)`` or ``(B, L, D)``); a layer used alone computes its own.
            ablate_heads: Query heads (``0 .. H-1``) whose context vectors are zeroed
                before the output projection: they then contribute nothing.
            need_weights: Also return the attention weights, as an
                [`AttentionOutput`][attnlab.AttentionOutput] (computed by the explicit
                path whatever the backend).
            average_attn_weights: Average the weights over the heads; defaults to the
                layer's ``averages_weights``.

        Returns:
            The output, or ``AttentionOutput(output, attn_weights)`` with ``need_weights``.

        Shape:
            query: ``(B, L, d_in)``; key: ``(B, S_new, kdim)``; value: ``(B, S_new, vdim)``;
            output: ``(B, L, d_out)``; attn_weights: ``(B, H, L, S)`` or ``(B, L, S)``
            (drop ``B`` throughout for unbatched input).
        """
        if isinstance(key, KVCache) and value is None and cache is None:
            warnings.warn(  # GroupedQueryAttention's old forward(x, cache), one release
                "a KVCache passed by position is deprecated: call layer(x, cache=cache)",
                DeprecationWarning,
                stacklevel=2,
            )
            key, cache = None, key
        key = query if key is None else key
        value = key if value is None else value
        batch, L, S_new = self.check_inputs(query, key, value)
        past = self._check_cache(cache)  # cached positions before the new ones
        S = past + S_new
        self._check_call(query, batch, L, S, attn_mask, key_padding_mask, position_embeddings)
        heads_off = self._check_ablate_heads(ablate_heads)
        check_bool("need_weights", need_weights)
        average = self.averages_weights if average_attn_weights is None else average_attn_weights
        check_bool("average_attn_weights", average)
        queries, keys, values = self.project_qkv(query, key, value)
        queries = self.split_heads(queries)  # (B, L, H * D) -> (B, H, L, D)
        keys = self.split_heads(keys)  # (B, S_new, Hkv * D) -> (B, Hkv, S_new, D)
        values = self.split_heads(values, self.value_head_dim)  # (B, Hkv, S_new, Dv)
        queries, keys = self.position_queries_keys(
            queries, keys, offset=past, position_embeddings=position_embeddings
        )
        if cache is not None:
            keys, values = cache.append(keys, values)  # (B, Hkv, S, D), (B, Hkv, S, Dv)
            if keys.shape[-2] < S:  # a rolling buffer keeps the last positions only
                S = keys.shape[-2]
                attn_mask = None if attn_mask is None else attn_mask[..., -S:]
                key_padding_mask = None if key_padding_mask is None else key_padding_mask[..., -S:]
        mask, is_causal = self.attention_mask(L, S, attn_mask, key_padding_mask, query, past)
        context_vecs, attn_weights = self.attend_heads(
            queries, keys, values, mask, is_causal, need_weights
        )  # (B, H, L, Dv), (B, H, L, S) or None
        if heads_off:
            context_vecs = context_vecs.clone()
            context_vecs[..., heads_off, :, :] = 0.0  # those heads add nothing to the output
        output = self.project_out(self.merge_heads(context_vecs))  # (B, L, d_out)
        if attn_weights is None:
            return output
        if average:
            attn_weights = attn_weights.mean(dim=-3)  # (B, H, L, S) -> (B, L, S)
        return AttentionOutput(output, attn_weights)

    def check_inputs(
        self, query: object, key: object, value: object
    ) -> tuple[tuple[int, ...], int, int]:
        """Seam: check the three inputs; return the batch shape, ``L`` and new ``S``."""
        raise NotImplementedError(f"{type(self).__name__} must define check_inputs")

    def project_qkv(
        self, query: Tensor, key: Tensor, value: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Seam: the query, key and value projections (flat, heads side by side).

        Shape:
            outputs: ``(B, L, H * D)``, ``(B, S, Hkv * D)``, ``(B, S, Hkv * Dv)``.
        """
        raise NotImplementedError(f"{type(self).__name__} must define project_qkv")

    def project_out(self, x: Tensor) -> Tensor:
        """Seam: the output projection of the merged heads.

        Shape:
            x: ``(B, L, H * Dv)``; output: ``(B, L, d_out)``.
        """
        raise NotImplementedError(f"{type(self).__name__} must define project_out")

    def split_heads(self, x: Tensor, head_dim: int | None = None) -> Tensor:
        """Split a projection's width into heads of ``head_dim`` and move heads forward.

        Works for any number of heads (``width // head_dim``): the queries' ``H`` and
        the keys' and values' ``Hkv`` alike.

        Args:
            x: A projected sequence.
            head_dim: Width of one head; defaults to the layer's ``head_dim`` (pass
                ``value_head_dim`` for values).

        Returns:
            The same numbers, one ``(T, D)`` slice per head.

        Shape:
            x: ``(B, T, H * D)``; output: ``(B, H, T, D)`` (drop ``B`` for unbatched).
        """
        D = self.head_dim if head_dim is None else head_dim
        # (B, T, H * D) -> (B, T, H, D) -> (B, H, T, D)
        return x.view(*x.shape[:-1], x.shape[-1] // D, D).transpose(-3, -2)

    def position_queries_keys(
        self,
        queries: Tensor,
        keys: Tensor,
        offset: int = 0,
        position_embeddings: PositionEmbeddings | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Seam: where positions enter queries and keys (e.g. rotary embeddings); here none.

        A subclass that encodes positions in the queries and keys overrides this (as
        [`GroupedQueryAttention`][attnlab.GroupedQueryAttention] does with rotary
        embeddings); plain multi-head attention returns them unchanged.

        Args:
            queries: Per-head queries.
            keys: Per-head keys of the new tokens.
            offset: Position of the first new token (the number of cached positions).
            position_embeddings: A model's rotary ``(cos, sin)``, when it passes one.

        Returns:
            ``(queries, keys)``, transformed by position.

        Shape:
            queries: ``(B, H, L, D)``; keys: ``(B, Hkv, S_new, D)``; outputs: the same.
        """
        return queries, keys

    def causal_rule(
        self, L: int, S: int, device: torch.device, offset: int = 0
    ) -> tuple[Tensor | None, bool]:
        """Seam: the layer's own mask, as ``(attn_mask, is_causal)``; here none.

        Args:
            L: Queries.
            S: Keys, cached ones included.
            device: Where to build a mask.
            offset: Cached positions before the queries (``S - L`` with a cache, else 0).

        Returns:
            A bool ``(L, S)`` mask (``True`` = may attend) or ``None``, and SDPA's
            top-left ``is_causal`` flag.
        """
        return None, False

    def score_bias(self, L: int, S: int, device: torch.device) -> Tensor | None:
        """Seam: a float added to every head's scores by position (ALiBi, T5); here none.

        The queries are the last ``L`` of the ``S`` positions (after a cache).

        Returns:
            ``None``, or a float bias broadcastable to ``(B, H, L, S)``.
        """
        return None

    def attention_mask(
        self,
        L: int,
        S: int,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        query: Tensor,
        offset: int = 0,
    ) -> tuple[Tensor | None, bool]:
        """The call's one mask: ``causal_rule`` and ``score_bias`` with the caller's masks.

        With nothing but the rule, SDPA's ``is_causal`` flag passes through unbuilt;
        otherwise every part becomes one mask (``attnlab.masks.combine_masks``).

        Returns:
            ``(attn_mask, is_causal)`` for ``attend_heads``; the mask broadcasts to
            ``(B, H, L, S)``.
        """
        rule, is_causal = self.causal_rule(L, S, query.device, offset)
        bias = self.score_bias(L, S, query.device)
        if attn_mask is None and key_padding_mask is None and bias is None:
            return rule, is_causal
        if is_causal and L > 0 and S > 0:
            rule = causal_mask(L, S, device=query.device)  # (L, S), top-left like is_causal
        padding = None
        if key_padding_mask is not None:  # (B, S) -> (B, 1, 1, S): the same keys for all
            padding = padding_to_attn_mask(key_padding_mask, num_heads_dims=1)
        return combine_masks(rule, attn_mask, padding, bias, dtype=query.dtype), False

    def attend_heads(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Seam: attention in every head at once, through the layer's backend.

        With fewer key/value heads than query heads, each group of
        ``num_heads // num_kv_heads`` query heads shares one key/value head
        (``enable_gqa``: the kernels never copy the shared heads). With
        ``need_weights`` the explicit kernel computes the weights too, whatever the
        backend. Dropout acts in training only; the scale is ``self.scale``.

        Args:
            queries: Per-head queries.
            keys: Per-head keys.
            values: Per-head values.
            attn_mask: A merged mask (bool ``True`` = may attend, or float added to
                the scores), or ``None``.
            is_causal: SDPA's causal flag, top-left aligned (only without ``attn_mask``).
            need_weights: Also return the per-head attention weights.

        Returns:
            ``(context_vecs, attn_weights)``; the weights are ``None`` unless asked for.

        Shape:
            queries: ``(B, H, L, D)``; keys: ``(B, Hkv, S, D)``; values:
            ``(B, Hkv, S, Dv)``; context_vecs: ``(B, H, L, Dv)``; attn_weights:
            ``(B, H, L, S)``.
        """
        dropout_p = self.dropout if self.training else 0.0
        call = AttentionCall(
            attn_mask=attn_mask,
            dropout_p=dropout_p,
            is_causal=is_causal,
            scale=self.scale,
            group=self.num_heads // self.num_kv_heads,
        )
        if need_weights:  # the weights are per query head (grouped heads are repeated)
            return attention_kernel(queries, keys, values, call)
        # The layer checked its inputs: the backend's kernel checks nothing again.
        return run_kernel(queries, keys, values, call, self.backend), None

    def merge_heads(self, x: Tensor) -> Tensor:
        """Undo [`split_heads`][attnlab.AttentionHeads.split_heads]: heads side by side.

        Shape:
            x: ``(B, H, T, Dv)``; output: ``(B, T, H * Dv)``.
        """
        return x.transpose(-3, -2).flatten(-2)  # (B, H, T, Dv) -> (B, T, H, Dv) -> (B, T, H * Dv)

    def _check_cache(self, cache: object) -> int:
        """Check ``cache`` (``None`` or a KVCache); the number of cached positions."""
        if cache is None:
            return 0
        if not isinstance(cache, Cache):
            raise TypeError(
                f"cache must be a Cache (e.g. KVCache) or None; got {type(cache).__name__}"
            )
        return len(cache)

    def _check_call(
        self,
        query: Tensor,
        batch: tuple[int, ...],
        L: int,
        S: int,
        attn_mask: object,
        key_padding_mask: object,
        position_embeddings: object,
    ) -> None:
        """Check the masks and a model's rotary table against the call's shapes."""
        if attn_mask is not None:
            check_mask("attn_mask", attn_mask, (*batch, self.num_heads, L, S), query)
        if key_padding_mask is not None:
            check_key_padding_mask(key_padding_mask, batch, S, query)
        if position_embeddings is None:
            return
        wanted = f"(cos, sin), each (L, D) or (B, L, D) with L = {L}, D = {self.head_dim}"
        if not isinstance(position_embeddings, tuple) or len(position_embeddings) != 2:
            raise TypeError(
                f"position_embeddings must be {wanted}; got {type(position_embeddings).__name__}"
            )
        for part in position_embeddings:
            table = check_floating("position_embeddings", part)
            check_same_device("position_embeddings", table, query, "query")
            if table.dim() not in (2, 3) or table.shape[-2:] != (L, self.head_dim):
                raise ValueError(
                    f"position_embeddings must be {wanted}; got shape {format_shape(table.shape)}"
                )

    def _check_ablate_heads(self, ablate_heads: object) -> list[int]:
        """Check ``ablate_heads`` (ints in ``0 .. H-1``); the sorted distinct heads."""
        if isinstance(ablate_heads, Tensor | str) or not isinstance(ablate_heads, Iterable):
            raise TypeError(
                f"ablate_heads must be an iterable of head indices; got "
                f"{type(ablate_heads).__name__}"
            )
        heads = list(ablate_heads)
        H = self.num_heads
        for head in heads:
            if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < H:
                raise ValueError(f"ablate_heads must hold ints in 0 .. {H - 1}; got {head!r}")
        return sorted(set(heads))
