"""Multi-head attention: several heads side by side, then one output projection.

Two versions of the same computation:

* [`MultiHeadAttentionWrapper`][attnlab.MultiHeadAttentionWrapper]: ``num_heads``
  independent single-head modules whose outputs are concatenated; the teaching version.
* [`MultiHeadAttention`][attnlab.MultiHeadAttention]: one projection each for queries,
  keys and values, split into heads with ``view``/``transpose``, one call to
  [`attend`][attnlab.attend] for all heads, then an output projection. Its forward
  pass runs the four seams of [`AttentionHeads`][attnlab.AttentionHeads], which
  [`GroupedQueryAttention`][attnlab.GroupedQueryAttention] shares. Interoperates with
  ``torch.nn.MultiheadAttention`` (``from_torch``/``to_torch``).

[`CrossAttention`][attnlab.CrossAttention] is ``MultiHeadAttention`` with keys and values
from a second sequence.

Shape legend: ``B`` batch, ``L`` queries, ``S`` keys (``L = S = T`` in self-attention),
``H`` heads, ``d_out`` the total width, ``D = d_out // H`` the width of one head. The
scale is ``1 / sqrt(D)``: the head width, not the model width. Masks follow PyTorch's
SDPA (bool ``True`` = may attend; float added to the scores), the **opposite** of
``nn.MultiheadAttention``'s boolean masks.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._validation import (
    check_bool,
    check_features,
    check_key_padding_mask,
    check_mask,
    check_module_input,
    check_positive_int,
    check_probability,
    check_same_device,
    format_shape,
)
from .backends import Backend, attend_kernel, check_backend
from .causal import CausalAttention
from .functional import attention_kernel
from .interop import (
    check_torch_mha,
    copy_from_heads,
    copy_from_torch,
    to_torch_mha,
    torch_mha_config,
)
from .masks import module_attn_mask
from .self_attention import checked_padding_mask

__all__ = [
    "AttentionHeads",
    "CrossAttention",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
]


def _check_heads(d_out: int, num_heads: int) -> int:
    """Return the head width ``d_out // num_heads``, or raise if it does not divide."""
    check_positive_int("d_out", d_out)
    check_positive_int("num_heads", num_heads)
    if d_out % num_heads != 0:
        raise ValueError(
            f"d_out must be divisible by num_heads; got d_out={d_out}, num_heads={num_heads}"
        )
    return d_out // num_heads


class MultiHeadAttentionWrapper(nn.Module):
    """Multi-head attention as independent heads whose outputs are concatenated.

    Each head is a [`CausalAttention`][attnlab.CausalAttention] module of width
    ``D = d_out // num_heads`` with its own query, key and value projections; the
    outputs are concatenated along the last axis into width ``d_out``. No output
    projection. Slow (one small attention per head) but easy to read;
    [`MultiHeadAttention.from_wrapper`][attnlab.MultiHeadAttention.from_wrapper]
    builds the efficient module that computes the same thing.

    Args:
        d_in: Width of each input token.
        d_out: Total output width, the sum of the heads' widths.
        num_heads: Number of heads ``H``; must divide ``d_out``.
        dropout: Dropout probability on the attention weights, in training only.
        qkv_bias: Give the projections a bias.
        causal: Let token ``i`` attend only to tokens ``j <= i``.
        backend: How each head computes attention (default ``"torch"``).

    Shape:
        x: ``(T, d_in)`` or ``(B, T, d_in)``; key_padding_mask: ``(T,)`` or ``(B, T)``;
        output: ``(T, d_out)`` or ``(B, T, d_out)``.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        num_heads: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
        causal: bool = False,
        *,
        backend: Backend = "torch",
    ) -> None:
        super().__init__()
        self.d_in = check_positive_int("d_in", d_in)
        self.head_dim = _check_heads(d_out, num_heads)
        self.d_out = d_out
        self.num_heads = num_heads
        self.dropout = check_probability("dropout", dropout)
        self.causal = check_bool("causal", causal)
        self.backend = check_backend(backend)
        self.heads = nn.ModuleList(
            CausalAttention(d_in, self.head_dim, dropout, qkv_bias, causal=causal, backend=backend)
            for _ in range(num_heads)
        )

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Run every head on ``x`` and concatenate their outputs.

        Args:
            x: The input tokens.
            key_padding_mask: Optional; bool ``True`` = real token (may be attended to),
                the opposite of ``nn.MultiheadAttention``'s; or float, added.

        Returns:
            The concatenated context vectors.

        Shape:
            x: ``(T, d_in)`` or ``(B, T, d_in)``; output: ``(T, d_out)`` or
            ``(B, T, d_out)``.
        """
        heads = [head for head in self.heads if isinstance(head, CausalAttention)]
        # checked once for every head: (..., 1, T) or None
        padding = checked_padding_mask(x, self.d_in, key_padding_mask, heads[0].W_query.weight)
        # H outputs of (..., T, D) -> (..., T, H * D) = (..., T, d_out)
        return torch.cat([head.attend_tokens(x, padding) for head in heads], dim=-1)

    def extra_repr(self) -> str:
        """Sizes, dropout, causality and backend, shown by ``print(module)``."""
        return (
            f"d_in={self.d_in}, d_out={self.d_out}, num_heads={self.num_heads}, "
            f"dropout={self.dropout}, causal={self.causal}, backend={self.backend!r}"
        )


class AttentionHeads(nn.Module):
    """The four seams of a multi-head attention layer's forward pass.

    [`MultiHeadAttention`][attnlab.MultiHeadAttention] and
    [`GroupedQueryAttention`][attnlab.GroupedQueryAttention] both project their inputs,
    then run the same four steps, in this order:

        queries = split_heads(W_query(x))  # (B, L, H * D) -> (B, H, L, D)
        keys, values = split_heads(W_key(x)), split_heads(W_value(x))  # (B, Hkv, S, D)
        queries, keys = position_queries_keys(queries, keys, offset)  # rotary, or nothing
        context_vecs, _ = attend_heads(queries, keys, values, mask)  # (B, H, L, D)
        output = out_proj(merge_heads(context_vecs))  # (B, L, H * D) -> (B, L, d_out)

    A new attention variant overrides one seam (grouped-query attention overrides
    ``position_queries_keys`` to rotate by position, and keeps a
    [`KVCache`][attnlab.KVCache] between it and ``attend_heads``) instead of copying
    the others. A subclass sets the attributes below in its ``__init__``.

    Attributes:
        num_heads: Query heads ``H``.
        num_kv_heads: Key/value heads ``Hkv``, dividing ``H`` (``H`` in multi-head
            attention; fewer in grouped-query attention).
        head_dim: Width ``D`` of one head.
        dropout: Dropout probability on the attention weights, in training only.
        backend: How [`attend`][attnlab.attend] computes attention.
    """

    num_heads: int
    num_kv_heads: int
    head_dim: int
    dropout: float
    backend: Backend

    def split_heads(self, x: Tensor) -> Tensor:
        """Split a projection's width into heads of ``head_dim`` and move heads forward.

        Works for any number of heads (``width // head_dim``): the queries' ``H`` and
        the keys' and values' ``Hkv`` alike.

        Args:
            x: A projected sequence.

        Returns:
            The same numbers, one ``(T, D)`` slice per head.

        Shape:
            x: ``(B, T, H * D)``; output: ``(B, H, T, D)`` (drop ``B`` for unbatched).
        """
        # (B, T, H * D) -> (B, T, H, D) -> (B, H, T, D)
        num_heads = x.shape[-1] // self.head_dim
        return x.view(*x.shape[:-1], num_heads, self.head_dim).transpose(-3, -2)

    def position_queries_keys(
        self, queries: Tensor, keys: Tensor, offset: int = 0
    ) -> tuple[Tensor, Tensor]:
        """Where positions enter queries and keys (e.g. rotary embeddings); here none do.

        A subclass that encodes positions in the queries and keys overrides this (as
        [`GroupedQueryAttention`][attnlab.GroupedQueryAttention] does with rotary
        embeddings); plain multi-head attention returns them unchanged.

        Args:
            queries: Per-head queries.
            keys: Per-head keys.
            offset: Position of the first token (the number of cached positions
                before it when decoding with a cache).

        Returns:
            ``(queries, keys)``, transformed by position.

        Shape:
            queries: ``(B, H, L, D)``; keys: ``(B, H_kv, S, D)``; outputs: the same.
        """
        return queries, keys

    def attend_heads(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attention in every head at once, through the module's backend.

        With fewer key/value heads than query heads, each group of
        ``num_heads // num_kv_heads`` query heads shares one key/value head
        (``enable_gqa``: the backends never copy the shared heads). With
        ``need_weights`` the explicit path computes the weights too, whatever the
        backend. Dropout acts in training only.

        Args:
            queries: Per-head queries.
            keys: Per-head keys.
            values: Per-head values.
            attn_mask: A merged mask (bool ``True`` = may attend, or float added to
                the scores), or ``None``.
            is_causal: SDPA's causal flag, top-left aligned (only without
                ``attn_mask``).
            need_weights: Also return the per-head attention weights.

        Returns:
            ``(context_vecs, attn_weights)``; the weights are ``None`` unless asked for.

        Shape:
            queries: ``(B, H, L, D)``; keys, values: ``(B, Hkv, S, D)``;
            context_vecs: ``(B, H, L, D)``; attn_weights: ``(B, H, L, S)``.
        """
        dropout_p = self.dropout if self.training else 0.0
        group = self.num_heads // self.num_kv_heads
        if need_weights:  # the weights are per query head (grouped heads are repeated)
            return attention_kernel(
                queries, keys, values, attn_mask, dropout_p, is_causal, None, group
            )
        # The module checked its inputs: the backend's kernel checks nothing again.
        context_vecs = attend_kernel(
            queries, keys, values, attn_mask, dropout_p=dropout_p, is_causal=is_causal,
            scale=None, backend=self.backend, batch=tuple(queries.shape[:-2]), group=group,
        )  # (B, H, L, D); fmt: skip
        return context_vecs, None

    def merge_heads(self, x: Tensor) -> Tensor:
        """Undo [`split_heads`][attnlab.AttentionHeads.split_heads]: heads side by side.

        Args:
            x: Per-head context vectors.

        Returns:
            The heads concatenated along the width.

        Shape:
            x: ``(B, H, T, D)``; output: ``(B, T, H * D)``.
        """
        return x.transpose(-3, -2).flatten(-2)  # (B, H, T, D) -> (B, T, H, D) -> (B, T, H * D)


class MultiHeadAttention(AttentionHeads):
    """Multi-head attention with split heads, equal to ``torch.nn.MultiheadAttention``.

    Projects queries (from ``query``), keys (from ``key``) and values (from ``value``)
    to width ``d_out`` each, splits that width into ``H`` heads of ``D = d_out // H``,
    attends in every head at once through [`attend`][attnlab.attend] (scale
    ``1 / sqrt(D)``), joins the heads and applies ``out_proj``: the four seams of
    [`AttentionHeads`][attnlab.AttentionHeads]. With ``key`` and
    ``value`` left out it is self-attention; given a second sequence it is
    cross-attention (set ``kdim``/``vdim`` when that sequence has another width).

    Dropout acts on the attention weights in training only (``model.eval()`` turns it
    off); survivors are scaled by ``1 / (1 - dropout)``. ``causal=True`` lets query
    ``i`` attend only to keys ``j <= i`` (top-left aligned when ``L != S``).

    Masks: ``attn_mask`` follows SDPA (bool ``True`` = may attend, float added to the
    scores) and broadcasts to ``(B, H, L, S)``; ``key_padding_mask`` is bool ``True`` =
    real token, or float. Both are the **opposite** of ``nn.MultiheadAttention``'s
    boolean masks (``True`` = ignore): translate them with
    [`mask_from_torch`][attnlab.mask_from_torch]. All masks are combined into
    one. A query that may attend to no key outputs zeros before ``out_proj`` (so
    ``out_proj``'s bias), where ``nn.MultiheadAttention`` gives NaN.

    Args:
        d_in: Width of each query token (``embed_dim`` in PyTorch).
        d_out: Total width of queries, keys, values and output.
        num_heads: Number of heads ``H``; must divide ``d_out``.
        dropout: Dropout probability on the attention weights, in ``[0, 1]``.
        qkv_bias: Give the query, key and value projections a bias.
        causal: Apply a causal mask on every call, built for the inputs' lengths.
        kdim: Width of each key token; defaults to ``d_in``.
        vdim: Width of each value token; defaults to ``kdim``.
        out_bias: Give ``out_proj`` a bias (PyTorch's module has one iff ``bias=True``).
        backend: How to compute attention: ``"torch"`` (default, fastest),
            ``"explicit"``, or any other name in ``attnlab.BACKENDS``.

    Shape:
        query: ``(L, d_in)`` or ``(B, L, d_in)``; key: ``(S, kdim)`` or
        ``(B, S, kdim)``; value: ``(S, vdim)`` or ``(B, S, vdim)``; output:
        ``(L, d_out)`` or ``(B, L, d_out)``. Always batch-first.
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        num_heads: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
        causal: bool = False,
        *,
        kdim: int | None = None,
        vdim: int | None = None,
        out_bias: bool = True,
        backend: Backend = "torch",
    ) -> None:
        super().__init__()
        self.d_in = check_positive_int("d_in", d_in)
        self.head_dim = _check_heads(d_out, num_heads)
        self.d_out = d_out
        self.num_heads = num_heads
        self.num_kv_heads = num_heads
        self.kdim = d_in if kdim is None else check_positive_int("kdim", kdim)
        self.vdim = self.kdim if vdim is None else check_positive_int("vdim", vdim)
        self.dropout = check_probability("dropout", dropout)
        self.causal = check_bool("causal", causal)
        self.backend = check_backend(backend)
        self.W_query = nn.Linear(d_in, d_out, bias=check_bool("qkv_bias", qkv_bias))
        self.W_key = nn.Linear(self.kdim, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(self.vdim, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out, bias=check_bool("out_bias", out_bias))
        self.torch_batch_first = True
        """The layout ``to_torch`` gives by default (``from_torch`` records the source's)."""

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        attn_mask: Tensor | None = None,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
        average_attn_weights: bool = True,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from the queries of ``query`` to the keys and values of ``key``/``value``.

        Args:
            query: The tokens that ask.
            key: The tokens that are looked at; defaults to ``query`` (self-attention).
            value: The tokens whose content is mixed; defaults to ``key``.
            attn_mask: Optional mask broadcastable to ``(B, H, L, S)`` (``(H, L, S)``
                unbatched): bool ``True`` = may attend, or float added to the scores.
            key_padding_mask: Optional, one entry per key: bool ``True`` = real token,
                or float added to the scores.
            need_weights: Also return the attention weights. They are computed by the
                explicit path ([`attention_with_weights`][attnlab.attention_with_weights])
                whatever the backend, and include dropout in training.
            average_attn_weights: Average the returned weights over the heads
                (``(B, L, S)``, as PyTorch does by default) rather than returning every
                head's (``(B, H, L, S)``).

        Returns:
            The output, or ``(output, attn_weights)`` when ``need_weights`` is true.

        Shape:
            query: ``(B, L, d_in)``; key: ``(B, S, kdim)``; value: ``(B, S, vdim)``;
            output: ``(B, L, d_out)``; attn_weights: ``(B, L, S)`` or ``(B, H, L, S)``
            (drop ``B`` throughout for unbatched input).
        """
        key = query if key is None else key
        value = key if value is None else value
        batch, L, S = self._check_inputs(query, key, value)
        H = self.num_heads
        if attn_mask is not None:
            check_mask("attn_mask", attn_mask, (*batch, H, L, S), query)
        if key_padding_mask is not None:
            check_key_padding_mask(key_padding_mask, batch, S, query)
        check_bool("need_weights", need_weights)
        check_bool("average_attn_weights", average_attn_weights)
        mask, is_causal = module_attn_mask(
            L,
            S,
            self.causal,
            attn_mask,
            key_padding_mask,
            num_heads_dims=1,
            dtype=query.dtype,
            device=query.device,
        )  # broadcastable to (B, H, L, S), or None
        queries = self.split_heads(self.W_query(query))  # (B, L, d_in) -> (B, H, L, D)
        keys = self.split_heads(self.W_key(key))  # (B, S, kdim) -> (B, H, S, D)
        values = self.split_heads(self.W_value(value))  # (B, S, vdim) -> (B, H, S, D)
        queries, keys = self.position_queries_keys(queries, keys)
        context_vecs, attn_weights = self.attend_heads(
            queries, keys, values, mask, is_causal, need_weights
        )  # (B, H, L, D), (B, H, L, S) or None
        output: Tensor = self.out_proj(self.merge_heads(context_vecs))  # (B, L, d_out)
        if attn_weights is None:
            return output
        if average_attn_weights:
            attn_weights = attn_weights.mean(dim=-3)  # (B, H, L, S) -> (B, L, S)
        return output, attn_weights

    def _check_inputs(
        self, query: object, key: object, value: object
    ) -> tuple[tuple[int, ...], int, int]:
        """Check query, key and value; return the batch shape, ``L`` and ``S``."""
        q = check_features("query", query, self.d_in, tokens="L")
        k = check_features("key", key, self.kdim, tokens="S", width_name="kdim")
        v = check_features("value", value, self.vdim, tokens="S", width_name="vdim")
        batch = tuple(q.shape[:-2])
        if k.dim() != q.dim() or tuple(k.shape[:-2]) != batch:
            wanted = "(B, S, kdim)" if batch else "(S, kdim)"
            raise ValueError(
                f"key must have shape {wanted} with the batch of query "
                f"{format_shape(q.shape)}; got shape {format_shape(k.shape)}"
            )
        if v.shape[:-1] != k.shape[:-1]:
            wanted = "(B, S, vdim)" if batch else "(S, vdim)"
            raise ValueError(
                f"value must have shape {wanted} with the batch and length of key "
                f"{format_shape(k.shape)}; got shape {format_shape(v.shape)}"
            )
        if not q.dtype == k.dtype == v.dtype:
            raise TypeError(
                f"query, key and value must share one dtype; got {q.dtype}, {k.dtype} and {v.dtype}"
            )
        check_module_input("query", q, self.W_query.weight)
        check_same_device("key", k, q, "query")
        check_same_device("value", v, q, "query")
        return batch, q.shape[-2], k.shape[-2]

    @staticmethod
    def from_wrapper(wrapper: MultiHeadAttentionWrapper) -> MultiHeadAttention:
        """Build the efficient module that computes exactly what ``wrapper`` computes.

        Head ``h``'s projection weights become rows ``h * D`` to ``(h + 1) * D`` of the
        fused projections; ``out_proj`` is the identity (no bias), since the wrapper
        has no output projection.

        Args:
            wrapper: The module of independent heads.

        Returns:
            A new ``MultiHeadAttention`` with copies of the wrapper's weights.
        """
        if not isinstance(wrapper, MultiHeadAttentionWrapper):
            raise TypeError(
                f"wrapper must be a MultiHeadAttentionWrapper; got {type(wrapper).__name__}"
            )
        heads = [head for head in wrapper.heads if isinstance(head, CausalAttention)]
        qkv_bias = heads[0].W_query.bias is not None
        module = MultiHeadAttention(
            wrapper.d_in,
            wrapper.d_out,
            wrapper.num_heads,
            wrapper.dropout,
            qkv_bias,
            wrapper.causal,
            out_bias=False,
            backend=wrapper.backend,
        )
        weight = heads[0].W_query.weight
        module.to(device=weight.device, dtype=weight.dtype)
        copy_from_heads(module, heads)
        module.train(wrapper.training)
        return module

    @staticmethod
    def from_torch(
        module: nn.MultiheadAttention, *, backend: Backend = "torch"
    ) -> MultiHeadAttention:
        """Build a module equal to a ``torch.nn.MultiheadAttention``.

        The weights are copied: PyTorch's fused ``in_proj_weight`` (``(3E, E)``, when
        ``kdim = vdim = E``) or its separate ``q_proj_weight``/``k_proj_weight``/
        ``v_proj_weight`` become ``W_query``/``W_key``/``W_value``; ``in_proj_bias`` is
        split the same way; ``out_proj`` is copied as it is. Dropout and training mode
        carry over; the result is on the source's device and dtype.

        The new module is always batch-first. For a source built with
        ``batch_first=False``, ``torch_module(x.transpose(0, 1), ...)`` corresponds to
        ``new(x, ...)`` with the output transposed back; ``to_torch`` restores that
        layout. Masks must be translated with
        [`mask_from_torch`][attnlab.mask_from_torch] (boolean polarity flips), and
        PyTorch's ``(B * H, L, S)`` masks reshaped to ``(B, H, L, S)``.

        Args:
            module: The PyTorch module.
            backend: The backend of the new module.

        Returns:
            A new ``MultiHeadAttention`` with ``d_in = d_out = embed_dim``.

        Raises:
            TypeError: ``module`` is not an ``nn.MultiheadAttention``.
            ValueError: ``module`` uses ``add_bias_kv`` or ``add_zero_attn``, which this
                package does not support.
        """
        module = check_torch_mha(module)
        new = MultiHeadAttention(**torch_mha_config(module), backend=backend)
        weight = module.out_proj.weight
        new.to(device=weight.device, dtype=weight.dtype)
        copy_from_torch(new, module)
        return new

    def to_torch(self, *, batch_first: bool | None = None) -> nn.MultiheadAttention:
        """Build a ``torch.nn.MultiheadAttention`` equal to this module.

        PyTorch's module has one ``bias`` flag for all its projections: it gets
        ``bias=True`` if this module has any bias, with zeros where this one has none,
        so the outputs agree either way.

        Args:
            batch_first: The layout of the new module; defaults to
                ``torch_batch_first`` (``True``, or the layout of the module
                ``from_torch`` copied).

        Returns:
            A new ``nn.MultiheadAttention`` on this module's device and dtype.

        Raises:
            ValueError: ``d_in != d_out`` (PyTorch's module has one ``embed_dim``), or
                ``causal=True`` (PyTorch's module has no causal flag: build this one
                with ``causal=False`` and pass PyTorch a causal ``attn_mask``).
        """
        return to_torch_mha(self, batch_first=batch_first)

    def extra_repr(self) -> str:
        """Sizes, dropout, causality and backend, shown by ``print(module)``."""
        return (
            f"d_in={self.d_in}, d_out={self.d_out}, num_heads={self.num_heads}, "
            f"kdim={self.kdim}, vdim={self.vdim}, dropout={self.dropout}, "
            f"causal={self.causal}, backend={self.backend!r}"
        )


class CrossAttention(MultiHeadAttention):
    """Multi-head cross-attention: queries from one sequence, keys and values from another.

    The same module as [`MultiHeadAttention`][attnlab.MultiHeadAttention] with
    ``kdim = vdim = d_context``, named for its use: call it as ``module(x, context)``.
    The queries come from ``x`` (e.g. a decoder's tokens, an image's patches); keys
    and values come from ``context`` (an encoder's output, a text prompt), which may
    have another length ``S`` and width ``d_context``. Not causal by default: every
    query may look at the whole context.

    Args:
        d_in: Width of each query token.
        d_context: Width of each context token.
        d_out: Total width of queries, keys, values and output.
        num_heads: Number of heads; must divide ``d_out``.
        dropout: Dropout probability on the attention weights, in training only.
        qkv_bias: Give the query, key and value projections a bias.
        causal: Apply a causal mask, top-left aligned (rarely wanted here).
        out_bias: Give ``out_proj`` a bias.
        backend: How to compute attention (default ``"torch"``).

    Shape:
        x: ``(L, d_in)`` or ``(B, L, d_in)``; context: ``(S, d_context)`` or
        ``(B, S, d_context)``; output: ``(L, d_out)`` or ``(B, L, d_out)``.
    """

    def __init__(
        self,
        d_in: int,
        d_context: int,
        d_out: int,
        num_heads: int = 1,
        dropout: float = 0.0,
        qkv_bias: bool = False,
        causal: bool = False,
        *,
        out_bias: bool = True,
        backend: Backend = "torch",
    ) -> None:
        super().__init__(
            d_in,
            d_out,
            num_heads,
            dropout,
            qkv_bias,
            causal,
            kdim=check_positive_int("d_context", d_context),
            vdim=d_context,
            out_bias=out_bias,
            backend=backend,
        )
