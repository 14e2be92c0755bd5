"""Multi-head attention: several heads side by side, then one output projection.

Two versions of the same computation:

* [`MultiHeadAttentionWrapper`][attnlab.MultiHeadAttentionWrapper]: ``num_heads``
  independent single-head modules whose outputs are concatenated; the teaching version.
* [`MultiHeadAttention`][attnlab.MultiHeadAttention]: one projection each for queries,
  keys and values, split into heads with ``view``/``transpose``, one call to
  [`attend`][attnlab.attend] for all heads, then an output projection. Interoperates with
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
    check_features,
    check_key_padding_mask,
    check_mask,
    check_positive_int,
    check_probability,
    format_shape,
)
from .backends import Backend, attend, check_backend
from .causal import CausalAttention
from .functional import attention_with_weights, causal_mask
from .masks import combine_masks, padding_to_attn_mask

__all__ = ["CrossAttention", "MultiHeadAttention", "MultiHeadAttentionWrapper"]


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
        self.causal = bool(causal)
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
        check_features("x", x, self.d_in)
        # H outputs of (..., T, D) -> (..., T, H * D) = (..., T, d_out)
        return torch.cat([head(x, key_padding_mask) for head in self.heads], dim=-1)

    def extra_repr(self) -> str:
        """Sizes, dropout, causality and backend, shown by ``print(module)``."""
        return (
            f"d_in={self.d_in}, d_out={self.d_out}, num_heads={self.num_heads}, "
            f"dropout={self.dropout}, causal={self.causal}, backend={self.backend!r}"
        )


class MultiHeadAttention(nn.Module):
    """Multi-head attention with split heads, equal to ``torch.nn.MultiheadAttention``.

    Projects queries (from ``query``), keys (from ``key``) and values (from ``value``)
    to width ``d_out`` each, splits that width into ``H`` heads of ``D = d_out // H``,
    attends in every head at once through [`attend`][attnlab.attend] (scale
    ``1 / sqrt(D)``), joins the heads and applies ``out_proj``. With ``key`` and
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
        dropout: Dropout probability on the attention weights, in ``[0, 1)``.
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
        self.kdim = d_in if kdim is None else check_positive_int("kdim", kdim)
        self.vdim = self.kdim if vdim is None else check_positive_int("vdim", vdim)
        self.dropout = check_probability("dropout", dropout)
        self.causal = bool(causal)
        self.backend = check_backend(backend)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(self.kdim, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(self.vdim, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out, bias=out_bias)
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
        H, D = self.num_heads, self.head_dim
        if attn_mask is not None:
            check_mask("attn_mask", attn_mask, (*batch, H, L, S), query.dtype)
        if key_padding_mask is not None:
            check_key_padding_mask(key_padding_mask, batch, S, query.dtype)
        if not isinstance(need_weights, bool):
            raise TypeError(f"need_weights must be a bool; got {type(need_weights).__name__}")

        mask, is_causal = self._merge_masks(attn_mask, key_padding_mask, L, S, query)
        # (B, L, d_in) -> (B, L, d_out) -> (B, L, H, D) -> (B, H, L, D)
        queries = self.W_query(query).view(*batch, L, H, D).transpose(-3, -2)
        # (B, S, kdim) -> (B, S, d_out) -> (B, S, H, D) -> (B, H, S, D)
        keys = self.W_key(key).view(*batch, S, H, D).transpose(-3, -2)
        # (B, S, vdim) -> (B, S, d_out) -> (B, S, H, D) -> (B, H, S, D)
        values = self.W_value(value).view(*batch, S, H, D).transpose(-3, -2)

        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            context_vecs, attn_weights = attention_with_weights(
                queries, keys, values, mask, dropout_p, is_causal
            )  # (B, H, L, D), (B, H, L, S)
        else:
            context_vecs = attend(
                queries, keys, values, mask, dropout_p, is_causal, backend=self.backend
            )  # (B, H, L, D)
        # (B, H, L, D) -> (B, L, H, D) -> (B, L, d_out)
        context_vecs = context_vecs.transpose(-3, -2).reshape(*batch, L, self.d_out)
        output: Tensor = self.out_proj(context_vecs)  # (B, L, d_out)
        if not need_weights:
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
        return batch, q.shape[-2], k.shape[-2]

    def _merge_masks(
        self,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        L: int,
        S: int,
        query: Tensor,
    ) -> tuple[Tensor | None, bool]:
        """One mask from the causal flag, ``attn_mask`` and padding; or ``is_causal``."""
        if attn_mask is None and key_padding_mask is None:
            return None, self.causal  # SDPA's is_causal: no mask tensor needed
        padding = None
        if key_padding_mask is not None:
            # (B, S) -> (B, 1, 1, S): the same keys hidden from every head and query
            padding = padding_to_attn_mask(key_padding_mask, num_heads_dims=1)
        allowed = causal_mask(L, S, device=query.device) if self.causal else None  # (L, S)
        return combine_masks(allowed, attn_mask, padding, dtype=query.dtype), False

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
        with torch.no_grad():
            for name in ("W_query", "W_key", "W_value"):
                fused: nn.Linear = getattr(module, name)
                parts = [getattr(head, name) for head in heads]
                # H weights of (D, d_in) -> (H * D, d_in) = (d_out, d_in)
                fused.weight.copy_(torch.cat([part.weight for part in parts]))
                if fused.bias is not None:
                    fused.bias.copy_(torch.cat([part.bias for part in parts]))
            module.out_proj.weight.copy_(torch.eye(wrapper.d_out))
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
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(f"module must be a nn.MultiheadAttention; got {type(module).__name__}")
        if module.bias_k is not None or module.bias_v is not None:
            raise ValueError(
                "module has add_bias_kv=True, which MultiHeadAttention does not support"
            )
        if module.add_zero_attn:
            raise ValueError(
                "module has add_zero_attn=True, which MultiHeadAttention does not support"
            )
        E = module.embed_dim
        in_bias = module.in_proj_bias
        new = MultiHeadAttention(
            E,
            E,
            module.num_heads,
            float(module.dropout),
            in_bias is not None,
            kdim=module.kdim,
            vdim=module.vdim,
            out_bias=module.out_proj.bias is not None,
            backend=backend,
        )
        weight = module.out_proj.weight
        new.to(device=weight.device, dtype=weight.dtype)
        if module._qkv_same_embed_dim:
            # (3E, E) -> three (E, E)
            w_q, w_k, w_v = module.in_proj_weight.chunk(3)
        else:
            w_q, w_k, w_v = module.q_proj_weight, module.k_proj_weight, module.v_proj_weight
        with torch.no_grad():
            new.W_query.weight.copy_(w_q)
            new.W_key.weight.copy_(w_k)
            new.W_value.weight.copy_(w_v)
            if in_bias is not None:
                b_q, b_k, b_v = in_bias.chunk(3)  # (3E,) -> three (E,)
                new.W_query.bias.copy_(b_q)
                new.W_key.bias.copy_(b_k)
                new.W_value.bias.copy_(b_v)
            new.out_proj.weight.copy_(module.out_proj.weight)
            if module.out_proj.bias is not None:
                new.out_proj.bias.copy_(module.out_proj.bias)
        new.torch_batch_first = bool(module.batch_first)
        new.train(module.training)
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
        if self.d_in != self.d_out:
            raise ValueError(
                "to_torch needs d_in == d_out (nn.MultiheadAttention has one embed_dim); "
                f"got d_in={self.d_in}, d_out={self.d_out}"
            )
        if self.causal:
            raise ValueError(
                "to_torch needs causal=False: nn.MultiheadAttention has no causal flag "
                "(pass it attn_mask=nn.Transformer.generate_square_subsequent_mask(L))"
            )
        batch_first = self.torch_batch_first if batch_first is None else batch_first
        has_bias = self.W_query.bias is not None or self.out_proj.bias is not None
        weight = self.out_proj.weight
        module = nn.MultiheadAttention(
            self.d_out,
            self.num_heads,
            dropout=self.dropout,
            bias=has_bias,
            kdim=self.kdim,
            vdim=self.vdim,
            batch_first=batch_first,
            device=weight.device,
            dtype=weight.dtype,
        )
        projections = (self.W_query, self.W_key, self.W_value)
        with torch.no_grad():
            if module._qkv_same_embed_dim:
                # three (E, E) -> (3E, E)
                module.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
            else:
                module.q_proj_weight.copy_(self.W_query.weight)
                module.k_proj_weight.copy_(self.W_key.weight)
                module.v_proj_weight.copy_(self.W_value.weight)
            if has_bias:
                biases: list[Tensor] = [
                    torch.zeros_like(p.weight[:, 0]) if p.bias is None else p.bias
                    for p in projections
                ]
                module.in_proj_bias.copy_(torch.cat(biases))  # three (E,) -> (3E,)
                out_bias = self.out_proj.bias
                module.out_proj.bias.copy_(0.0 if out_bias is None else out_bias)
            module.out_proj.weight.copy_(self.out_proj.weight)
        module.train(self.training)
        return module

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
