"""Multi-head attention: several heads side by side, then one output projection.

[`MultiHeadAttentionWrapper`][attnlab.MultiHeadAttentionWrapper] runs ``num_heads``
independent single-head modules and concatenates them (the teaching version);
[`MultiHeadAttention`][attnlab.MultiHeadAttention] computes the same with one
projection each for queries, keys and values, split into heads, and an output
projection: a configuration of [`AttentionHeads`][attnlab.AttentionHeads], equal to
``torch.nn.MultiheadAttention`` (``from_torch``/``to_torch``).
[`CrossAttention`][attnlab.CrossAttention] takes keys and values from a second
sequence. The scale is ``1 / sqrt(D)``, ``D = d_out // H``: the head width.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._validation import (
    check_bool,
    check_positive_int,
    check_probability,
)
from .attention_heads import AttentionHeads, HeadProjections, MaskRule
from .backends import Backend, check_backend
from .causal import CausalAttention
from .interop import (
    check_torch_mha,
    copy_from_heads,
    copy_from_torch,
    to_torch_mha,
    torch_mha_config,
)
from .positions import Positions
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

    Each head is a [`CausalAttention`][attnlab.CausalAttention] of width
    ``D = d_out // num_heads``; no output projection. Slow but easy to read;
    [`MultiHeadAttention.from_wrapper`][attnlab.MultiHeadAttention.from_wrapper]
    builds the efficient module that computes the same thing.

    Args:
        d_in: Width of each input token.
        d_out: Total output width, the sum of the heads' widths.
        num_heads: Number of heads ``H``; must divide ``d_out``.
        dropout: Dropout probability on the attention weights, in training only.
        qkv_bias: Give the projections a bias.
        causal: Let token ``i`` attend only to tokens ``j <= i``.
        backend: How each head computes attention.
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
        """Every head on ``x`` ``(B, T, d_in)``, concatenated: ``(B, T, d_out)``."""
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

    A configuration of [`AttentionHeads`][attnlab.AttentionHeads]: projections
    ``W_query``, ``W_key``, ``W_value`` (to width ``d_out``, ``H`` heads of
    ``D = d_out // H``) and ``out_proj``; the mask rule ``causal`` (top-left, end-aligned
    after a cache); no positions unless given (``positions=ALiBi(num_heads)``). With
    ``key`` and ``value`` left out it is self-attention; given a second sequence (set
    ``kdim``/``vdim`` for another width) it is cross-attention. ``need_weights=True``
    averages the weights over the heads unless ``average_attn_weights=False``, as
    PyTorch's module; a query that may attend to no key outputs zeros before
    ``out_proj`` where PyTorch gives NaN. PyTorch's boolean masks have the opposite
    polarity: [`mask_from_torch`][attnlab.mask_from_torch] translates them.

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
        backend: How to compute attention: any name in ``attnlab.BACKENDS``.
        positions: A positions part (default: none).
    """

    W_query: nn.Linear
    W_key: nn.Linear
    W_value: nn.Linear
    out_proj: nn.Linear

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
        positions: Positions | None = None,
    ) -> None:
        check_positive_int("d_in", d_in)
        head_dim = _check_heads(d_out, num_heads)
        kdim = d_in if kdim is None else check_positive_int("kdim", kdim)
        vdim = kdim if vdim is None else check_positive_int("vdim", vdim)
        projections = HeadProjections(
            nn.Linear(d_in, d_out, bias=check_bool("qkv_bias", qkv_bias)),
            nn.Linear(kdim, d_out, bias=qkv_bias),
            nn.Linear(vdim, d_out, bias=qkv_bias),
            nn.Linear(d_out, d_out, bias=check_bool("out_bias", out_bias)),
            names=("W_query", "W_key", "W_value", "out_proj"),
            head_dim=head_dim,
            d_in=d_in,
            kdim=kdim,
            vdim=vdim,
        )
        super().__init__(
            projections=projections,
            positions=positions,
            mask=MaskRule(causal=check_bool("causal", causal)),
            num_heads=num_heads,
            head_dim=head_dim,
            dropout=dropout,
            backend=backend,
            averages_weights=True,  # as PyTorch's
        )
        self.d_in, self.d_out, self.kdim, self.vdim = d_in, d_out, kdim, vdim
        self.torch_batch_first = True
        """The layout ``to_torch`` gives by default (``from_torch`` records the source's)."""

    @staticmethod
    def from_wrapper(wrapper: MultiHeadAttentionWrapper) -> MultiHeadAttention:
        """The efficient module that computes exactly what ``wrapper`` computes.

        Head ``h``'s weights become rows ``h * D`` to ``(h + 1) * D`` of the fused
        projections; ``out_proj`` is the identity (the wrapper has no output projection).
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
        """A module equal to a ``torch.nn.MultiheadAttention``, on its device and dtype.

        PyTorch's fused ``in_proj_weight`` (or its separate ``q/k/v_proj_weight``) and
        ``in_proj_bias`` are split into ``W_query``/``W_key``/``W_value``; ``out_proj``,
        dropout and training mode are copied. The new module is always batch-first
        (``to_torch`` restores the source's layout); masks need
        [`mask_from_torch`][attnlab.mask_from_torch] (boolean polarity flips) and
        ``(B * H, L, S)`` reshaped to ``(B, H, L, S)``. ``add_bias_kv`` and
        ``add_zero_attn`` are refused.
        """
        module = check_torch_mha(module)
        new = MultiHeadAttention(**torch_mha_config(module), backend=backend)
        weight = module.out_proj.weight
        new.to(device=weight.device, dtype=weight.dtype)
        copy_from_torch(new, module)
        return new

    def to_torch(self, *, batch_first: bool | None = None) -> nn.MultiheadAttention:
        """A ``torch.nn.MultiheadAttention`` equal to this module.

        It gets ``bias=True`` if this module has any bias (zeros where it has none).
        ``batch_first`` defaults to ``torch_batch_first``. Refused: ``d_in != d_out``
        (one ``embed_dim``) and ``causal=True`` (no causal flag: pass a causal mask).
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

    [`MultiHeadAttention`][attnlab.MultiHeadAttention] with ``kdim = vdim = d_context``,
    called as ``module(x, context)``: the context (an encoder's output, a prompt) may
    have another length ``S`` and width. Not causal by default.

    Args:
        d_in: Width of each query token.
        d_context: Width of each context token.
        d_out: Total width of queries, keys, values and output.
        num_heads: Number of heads; must divide ``d_out``.
        dropout: Dropout probability on the attention weights, in training only.
        qkv_bias: Give the query, key and value projections a bias.
        causal: Apply a causal mask, top-left aligned (rarely wanted here).
        out_bias: Give ``out_proj`` a bias.
        backend: How to compute attention.
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
