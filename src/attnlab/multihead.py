"""Multi-head attention: several heads side by side, then one output projection.

Two versions of the same computation:

* [`MultiHeadAttentionWrapper`][attnlab.MultiHeadAttentionWrapper]: ``num_heads``
  independent single-head modules whose outputs are concatenated; the teaching version.
* [`MultiHeadAttention`][attnlab.MultiHeadAttention]: one projection each for queries,
  keys and values, split into heads with ``view``/``transpose``, one call to
  [`attend`][attnlab.attend] for all heads, then an output projection. Its forward
  pass is the one of [`AttentionHeads`][attnlab.AttentionHeads], the skeleton
  [`GroupedQueryAttention`][attnlab.GroupedQueryAttention] shares; it names its
  projections and its causal rule. Interoperates with ``torch.nn.MultiheadAttention``
  (``from_torch``/``to_torch``).

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
    check_module_input,
    check_positive_int,
    check_probability,
    check_same_device,
    format_shape,
)
from .attention_heads import AttentionHeads
from .backends import Backend, check_backend
from .causal import CausalAttention
from .interop import (
    check_torch_mha,
    copy_from_heads,
    copy_from_torch,
    to_torch_mha,
    torch_mha_config,
)
from .masks import decoder_mask
from .self_attention import checked_padding_mask

__all__ = [
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


class MultiHeadAttention(AttentionHeads):
    """Multi-head attention with split heads, equal to ``torch.nn.MultiheadAttention``.

    Projects queries (from ``query``), keys (from ``key``) and values (from ``value``)
    to width ``d_out`` each, splits that width into ``H`` heads of ``D = d_out // H``,
    attends in every head at once through [`attend`][attnlab.attend] (scale
    ``1 / sqrt(D)``), joins the heads and applies ``out_proj``: the forward pass of
    [`AttentionHeads`][attnlab.AttentionHeads], whose arguments (``attn_mask``,
    ``key_padding_mask``, ``need_weights``, ``average_attn_weights`` as PyTorch's;
    ``cache``, ``ablate_heads``) it takes. With ``key`` and
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
    ``need_weights=True`` returns an [`AttentionOutput`][attnlab.AttentionOutput]
    ``(output, attn_weights)``, averaged over the heads unless
    ``average_attn_weights=False``.

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
        self.value_head_dim = self.head_dim
        self.d_out = d_out
        self.num_heads = num_heads
        self.num_kv_heads = num_heads
        self.averages_weights = True  # need_weights averages over heads, as PyTorch's
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

    def check_inputs(
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

    def project_qkv(
        self, query: Tensor, key: Tensor, value: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``W_query``, ``W_key`` and ``W_value``: ``(B, L, d_out)``, ``(B, S, d_out)`` twice."""
        return self.W_query(query), self.W_key(key), self.W_value(value)

    def project_out(self, x: Tensor) -> Tensor:
        """``out_proj`` of the merged heads: ``(B, L, d_out)`` -> ``(B, L, d_out)``."""
        output: Tensor = self.out_proj(x)
        return output

    def causal_rule(
        self, L: int, S: int, device: torch.device, offset: int = 0
    ) -> tuple[Tensor | None, bool]:
        """``causal=True``: query ``i`` sees keys ``j <= i``, top-left as SDPA's flag.

        With a cache (``offset`` positions before the queries) the new queries follow the
        cached keys: the rule is aligned to the end ([`decoder_mask`][attnlab.decoder_mask]),
        so feeding a sequence chunk by chunk gives the whole sequence's output.
        """
        if not self.causal:
            return None, False
        if offset:
            return decoder_mask(L, S, device=device)
        return None, True

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
