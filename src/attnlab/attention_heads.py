"""The one attention layer, composed of parts passed by keyword.

[`AttentionHeads`][attnlab.AttentionHeads] is every multi-head layer of the package;
[`MultiHeadAttention`][attnlab.MultiHeadAttention],
[`CrossAttention`][attnlab.CrossAttention],
[`GroupedQueryAttention`][attnlab.GroupedQueryAttention] (the real LLM's layer) and
[`MultiHeadLatentAttention`][attnlab.MultiHeadLatentAttention] are constructors that
choose its parts, as torchtune's one ``MultiHeadAttention`` takes its projections,
``pos_embeddings`` and ``kv_cache``. A variant is one new part, not a new forward:

* projections ([`HeadProjections`][attnlab.HeadProjections], or latent attention's):
  check the inputs, make the queries, the entries a cache keeps per token, the
  kernel's keys and values, and the output;
* positions ([`Positions`][attnlab.Positions]): none, rotary or ALiBi;
* the mask rule ([`MaskRule`][attnlab.MaskRule]): causal, a window; the call adds
  ``attn_mask`` and ``key_padding_mask`` (padding);
* a cache ([`Cache`][attnlab.Cache]), passed with each call;
* optionally a key selection ([`KeySelection`][attnlab.KeySelection]): keys chosen
  from the data, then hidden by the mask (sparse attention);
* optionally an output gate ([`OutputGate`][attnlab.OutputGate]) and attention sinks
  (one logit per head, the kernels' ``sinks``).

Shapes and mask polarity follow the package docstring's legend.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from ._validation import (
    check_bool,
    check_features,
    check_floating,
    check_key_padding_mask,
    check_mask,
    check_module_input,
    check_positive_int,
    check_probability,
    check_same_device,
    check_sinks,
    format_shape,
)
from .backends import KERNELS, Backend, check_backend
from .functional import AttentionCall, explicit_attention
from .key_selection import KeySelection
from .kv_cache import Cache
from .layer_parts import PartialRotary
from .masks import causal_mask, combine_masks, decoder_mask, padding_to_attn_mask
from .positions import Positions
from .rotary import RotaryEmbedding

__all__ = [
    "AttentionHeads",
    "AttentionOutput",
    "HeadProjections",
    "MaskRule",
    "PositionEmbeddings",
    "Projections",
]

PositionEmbeddings = tuple[Tensor, Tensor]
"""Rotary ``(cos, sin)`` computed once per model: each ``(L, D)`` or ``(B, L, D)``."""


class AttentionOutput(NamedTuple):
    """What a layer's forward returns, always: ``output, attn_weights = layer(x)``.

    Attributes:
        output: ``(B, L, d_out)``.
        attn_weights: ``None`` unless ``need_weights=True``; then ``(B, H, L, S)`` per
            query head, or ``(B, L, S)`` averaged over the heads; after dropout in training.
    """

    output: Tensor
    attn_weights: Tensor | None


def split_heads(x: Tensor, head_dim: int) -> Tensor:
    """``(B, T, H * D) -> (B, H, T, D)``: the width cut into heads, heads moved forward."""
    return x.view(*x.shape[:-1], x.shape[-1] // head_dim, head_dim).transpose(-3, -2)


def merge_heads(x: Tensor) -> Tensor:
    """Undo ``split_heads``: ``(B, H, T, D) -> (B, T, H * D)``."""
    return x.transpose(-3, -2).flatten(-2)


@dataclass(frozen=True)
class MaskRule:
    """The layer's own rule for which keys a query sees, before the call's masks.

    Without a cache a causal query ``i`` sees keys ``j <= i``, aligned top-left as
    SDPA's ``is_causal`` (cross-attention too); after a cache the queries are the last
    positions ([`decoder_mask`][attnlab.decoder_mask], end-aligned), so feeding a
    sequence chunk by chunk gives the whole sequence's output. ``window`` keeps each
    query's last ``window`` positions.
    """

    causal: bool = False
    window: int | None = None

    def __call__(
        self, L: int, S: int, offset: int, device: torch.device
    ) -> tuple[Tensor | None, bool]:
        """``(attn_mask, is_causal)`` in the cheapest form for ``L`` queries over ``S`` keys."""
        if not self.causal:
            return None, False
        if offset == 0 and self.window is None:
            return None, True
        return decoder_mask(L, S, self.window, device=device)


class Projections(nn.Module):
    """What a projections part does for [`AttentionHeads`][attnlab.AttentionHeads].

    ``entries`` returns what a cache keeps per token (the first is what the positions
    part turns); ``kernel_inputs`` turns the queries and every kept entry into the
    kernel's queries, keys and values (latent attention expands or absorbs here).
    """

    def check(self, query: object, key: object, value: object) -> tuple[tuple[int, ...], int, int]:
        """Check the inputs before any arithmetic; the batch shape, ``L`` and new ``S``."""
        raise NotImplementedError

    def queries(self, query: Tensor) -> Tensor:
        """``(B, L, d_in) -> (B, H, L, Dq)``."""
        raise NotImplementedError

    def entries(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """What a cache keeps per token, each ``(B, Hc, S, .)``."""
        raise NotImplementedError

    def kernel_inputs(
        self, queries: Tensor, keys: Tensor, values: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The kernel's ``(B, H, L, E)``, ``(B, Hkv, S, E)``, ``(B, Hkv, S, Ev)``."""
        raise NotImplementedError

    def out(self, context: Tensor) -> Tensor:
        """``(B, H, L, Ev) -> (B, L, d_out)``."""
        raise NotImplementedError


class HeadProjections(Projections):
    """Linear projections split into heads: the projections part of MHA and GQA.

    The four ``nn.Linear`` are registered under ``names`` (the chapters'
    ``W_query``/``W_key``/``W_value``/``out_proj`` or Hugging Face's ``q_proj``/
    ``k_proj``/``v_proj``/``o_proj``), on the layer itself: its state dict and printout
    name them so. With ``kdim`` left out the layer is self-attention only, on an input
    named ``x`` of width ``width_name``. ``q_norm``/``k_norm`` (Qwen3) normalise each
    query and key head before the positions part.

    Args:
        query: ``d_in -> H * D``.
        key: ``kdim -> Hkv * D``.
        value: ``vdim -> Hkv * Dv``.
        out: ``H * Dv -> d_out``.
        names: The four attribute names.
        head_dim: ``D``.
        value_head_dim: ``Dv`` (defaults to ``D``).
        d_in: Width of a query token.
        kdim: Width of a key token (``None``: self-attention only).
        vdim: Width of a value token (defaults to ``kdim``).
        width_name: How errors name ``d_in``.
        q_norm: Optional module applied to each query head.
        k_norm: Optional module applied to each key head.
    """

    def __init__(
        self,
        query: nn.Linear,
        key: nn.Linear,
        value: nn.Linear,
        out: nn.Linear,
        *,
        names: tuple[str, str, str, str] = ("q_proj", "k_proj", "v_proj", "o_proj"),
        head_dim: int,
        value_head_dim: int | None = None,
        d_in: int,
        kdim: int | None = None,
        vdim: int | None = None,
        width_name: str = "d_in",
        q_norm: nn.Module | None = None,
        k_norm: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.names = names
        for name, module in zip(names, (query, key, value, out), strict=True):
            self.add_module(name, module)
        self.q_norm, self.k_norm = q_norm, k_norm
        self.head_dim = head_dim
        self.value_head_dim = head_dim if value_head_dim is None else value_head_dim
        self.d_in, self.kdim, self.width_name = d_in, kdim, width_name
        self.vdim = kdim if vdim is None else vdim

    def check(self, query: object, key: object, value: object) -> tuple[tuple[int, ...], int, int]:
        """Check query, key and value (or ``x`` alone); batch shape, ``L``, ``S``."""
        weight = next(self.get_submodule(self.names[0]).parameters())
        if self.kdim is None:  # self-attention: key and value are the query
            if key is not query or value is not query:
                kind = type(key if key is not query else value).__name__
                raise TypeError(
                    "this layer is self-attention: call it as layer(x, cache=...), with no "
                    f"key or value; got a second positional argument of type {kind}"
                )
            x = check_features("x", query, self.d_in, width_name=self.width_name)
            check_module_input("x", x, weight)
            return tuple(x.shape[:-2]), x.shape[-2], x.shape[-2]
        q = check_features("query", query, self.d_in, tokens="L")
        k = check_features("key", key, self.kdim, tokens="S", width_name="kdim")
        v = check_features("value", value, self.vdim or self.kdim, tokens="S", width_name="vdim")
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
        check_module_input("query", q, weight)
        check_same_device("key", k, q, "query")
        check_same_device("value", v, q, "query")
        return batch, q.shape[-2], k.shape[-2]

    def queries(self, query: Tensor) -> Tensor:
        """``(B, L, d_in) -> (B, H, L, D)``."""
        queries = split_heads(self.get_submodule(self.names[0])(query), self.head_dim)
        return queries if self.q_norm is None else self.q_norm(queries)

    def entries(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """What a cache keeps per token: keys ``(B, Hkv, S, D)``, values ``(B, Hkv, S, Dv)``."""
        keys = split_heads(self.get_submodule(self.names[1])(key), self.head_dim)
        values = split_heads(self.get_submodule(self.names[2])(value), self.value_head_dim)
        return (keys if self.k_norm is None else self.k_norm(keys)), values

    def kernel_inputs(
        self, queries: Tensor, keys: Tensor, values: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """The kernel's queries, keys and values from the stored entries: themselves."""
        return queries, keys, values

    def out(self, context: Tensor) -> Tensor:
        """``(B, H, L, Dv) -> (B, L, d_out)``: heads merged, then the output projection."""
        output: Tensor = self.get_submodule(self.names[3])(merge_heads(context))
        return output


class AttentionHeads(nn.Module):
    """The one multi-head attention layer: its parts, passed by keyword, do the rest.

    The forward runs, in order (the steps the layer names are public, for taking it
    apart): ``projections.check``; the queries and the entries a
    cache keeps (``projections.queries``, ``projections.entries``); the positions part
    on queries and new keys; ``cache.append``; ``projections.kernel_inputs``; the mask
    rule with the call's masks and the positions part's bias (then the ``selector``'s
    choice of keys); the kernel of
    ``backend`` (every head at once; grouped heads shared, never copied, with the
    ``sinks``); ``ablate_heads``; the ``output_gate``; ``projections.out``.

    The projections part's modules are registered on the layer itself under their
    own names (``layer.q_proj``), so state dicts and printouts read as before.

    Args:
        projections: The projections part.
        positions: The positions part (default ``None``: no positions).
        mask: The mask rule (default: none).
        num_heads: Query heads ``H``.
        num_kv_heads: Key/value heads ``Hkv`` (defaults to ``H``).
        head_dim: Width ``D`` of a query or key head.
        value_head_dim: Width ``Dv`` of a value head (defaults to ``D``).
        dropout: On the attention weights, in training only.
        scale: Multiplier of the scores; ``None``: ``1 / sqrt`` of the kernel's query width.
        backend: A kernel's name in ``attnlab.BACKENDS``.
        averages_weights: Whether ``need_weights`` averages over heads by default
            (``nn.MultiheadAttention`` does; the Llama layers return every head's).
        output_gate: Optional part ``gate(context, query)`` on each head's context
            before ``projections.out`` ([`OutputGate`][attnlab.OutputGate]).
        sinks: Optional attention sinks, one logit per query head ``(H,)``, kept as the
            learned parameter ``layer.sinks`` (gpt-oss); the weights then sum to less
            than one.
        selector: Optional key-selection part ([`KeySelection`][attnlab.KeySelection]):
            keys chosen from the data, hidden by the mask (sparse attention).
    """

    def __init__(
        self,
        *,
        projections: Projections,
        positions: Positions | None = None,
        mask: MaskRule | None = None,
        num_heads: int,
        num_kv_heads: int | None = None,
        head_dim: int,
        value_head_dim: int | None = None,
        dropout: float = 0.0,
        scale: float | None = None,
        backend: Backend = "torch",
        averages_weights: bool = False,
        output_gate: nn.Module | None = None,
        sinks: Tensor | None = None,
        selector: KeySelection | None = None,
    ) -> None:
        super().__init__()
        self.num_heads = check_positive_int("num_heads", num_heads)
        kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.num_kv_heads = check_positive_int("num_kv_heads", kv_heads)
        if num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads must divide num_heads = {num_heads}; got {self.num_kv_heads}"
            )
        self.head_dim = check_positive_int("head_dim", head_dim)
        self.value_head_dim = head_dim if value_head_dim is None else value_head_dim
        self.dropout = check_probability("dropout", dropout)
        self.scale = scale
        self.backend = check_backend(backend)
        self.averages_weights = averages_weights
        self.mask = MaskRule() if mask is None else mask
        object.__setattr__(self, "projections", projections)  # its modules, not itself
        for name, module in projections.named_children():
            self.add_module(name, module)
        if getattr(positions, "num_heads", num_heads) != num_heads:
            raise ValueError(
                f"positions must have num_heads = {num_heads} like the layer; "
                f"got {getattr(positions, 'num_heads', None)}"
            )
        self.positions = positions
        self.output_gate = output_gate
        if sinks is not None:  # one learned logit per query head
            check_sinks(sinks, (num_heads,), sinks)
            sinks = nn.Parameter(sinks.detach().clone())
        self.sinks = sinks
        self.selector = selector

    projections: Projections
    positions: Positions | None
    output_gate: nn.Module | None
    sinks: Tensor | None
    selector: KeySelection | None

    @property
    def causal(self) -> bool:
        """The mask rule's ``causal`` (settable: the rule is replaced)."""
        return self.mask.causal

    @causal.setter
    def causal(self, value: bool) -> None:
        self.mask = replace(self.mask, causal=check_bool("causal", value))

    @property
    def window(self) -> int | None:
        """The mask rule's ``window`` (settable: the rule is replaced)."""
        return self.mask.window

    @window.setter
    def window(self, value: int | None) -> None:
        window = None if value is None else check_positive_int("window", value)
        self.mask = replace(self.mask, window=window)

    def __setattr__(self, name: str, value: Any) -> None:
        """Keep the projections part's modules and the layer's the same objects."""
        projections = self.__dict__.get("projections")
        if isinstance(projections, Projections) and name in projections._modules:
            setattr(projections, name, value)
        super().__setattr__(name, value)

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
    ) -> AttentionOutput:
        """Attend from ``query``'s tokens to ``key``'s, mixing ``value``'s.

        Args:
            query: The tokens that ask.
            key: The tokens looked at; defaults to ``query`` (self-attention).
            value: The tokens whose content is mixed; defaults to ``key``.
            attn_mask: Optional, broadcastable to ``(B, H, L, S)``, combined with the
                mask rule; ``S`` counts the cached keys too.
            key_padding_mask: Optional, one entry per key ``(B, S)``.
            cache: Optional [`Cache`][attnlab.Cache]: the new entries are appended,
                the queries are the positions after the cached ones.
            position_embeddings: A model's rotary ``(cos, sin)`` for these positions
                (each ``(L, D)`` or ``(B, L, D)``); a layer alone computes its own.
            ablate_heads: Query heads (``0 .. H-1``) whose context vectors are zeroed
                before the output projection.
            need_weights: Also compute the weights (the explicit kernel computes them
                whatever the backend); otherwise ``attn_weights`` is ``None``.
            average_attn_weights: Average the weights over the heads; defaults to
                ``averages_weights``.

        Returns:
            ``AttentionOutput(output, attn_weights)``, as ``nn.MultiheadAttention``
            returns a pair.
        """
        key = query if key is None else key
        value = key if value is None else value
        proj = self.projections
        batch, L, S_new = proj.check(query, key, value)
        past = self._check_cache(cache)  # positions seen before the new ones
        S = past + S_new
        self._check_call(query, batch, L, S, attn_mask, key_padding_mask, position_embeddings)
        heads_off = self._check_ablate_heads(ablate_heads)
        check_bool("need_weights", need_weights)
        average = self.averages_weights if average_attn_weights is None else average_attn_weights
        check_bool("average_attn_weights", average)
        queries = proj.queries(query)  # (B, H, L, D)
        keys, values = proj.entries(key, value)  # what a cache keeps: (B, Hc, S_new, .)
        queries, keys = self.position_queries_keys(queries, keys, past, position_embeddings)
        if cache is not None:
            keys, values = cache.append(keys, values)  # every position the queries see
            if keys.shape[-2] < S:  # a rolling buffer keeps the last positions only
                S = keys.shape[-2]
                attn_mask = None if attn_mask is None else attn_mask[..., -S:]
                key_padding_mask = None if key_padding_mask is None else key_padding_mask[..., -S:]
        queries, keys, values = proj.kernel_inputs(queries, keys, values)
        mask, is_causal = self._mask(L, S, attn_mask, key_padding_mask, query, past)
        if self.selector is not None:  # keys chosen from the data: sparse attention
            mask = self.selector(
                self, query, mask, is_causal, offset=past, table=position_embeddings, cache=cache
            )
            is_causal = False
        context, attn_weights = self.attend_heads(
            queries, keys, values, mask, is_causal, need_weights
        )
        if heads_off:
            context = context.clone()
            context[..., heads_off, :, :] = 0.0  # those heads add nothing to the output
        if self.output_gate is not None:  # each head's context times its gate from the query
            context = self.output_gate(context, query)  # (B, H, L, Dv)
        output = proj.out(context)  # (B, L, d_out)
        if attn_weights is not None and average:
            attn_weights = attn_weights.mean(dim=-3)  # (B, H, L, S) -> (B, L, S)
        return AttentionOutput(output, attn_weights)

    def extra_repr(self) -> str:
        """Heads, widths, the mask rule and backend, shown by ``print(module)``."""
        return (
            f"num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}, value_head_dim={self.value_head_dim}, "
            f"mask={self.mask}, backend={self.backend!r}"
        )

    def _mask(
        self,
        L: int,
        S: int,
        attn_mask: Tensor | None,
        key_padding_mask: Tensor | None,
        query: Tensor,
        offset: int,
    ) -> tuple[Tensor | None, bool]:
        """The call's one mask: the rule, the positions' bias and the caller's masks.

        With the rule alone SDPA's ``is_causal`` passes through unbuilt.
        """
        rule, is_causal = self.mask(L, S, offset, query.device)
        bias = None if self.positions is None else self.positions.score_bias(L, S, query.device)
        if attn_mask is None and key_padding_mask is None and bias is None:
            return rule, is_causal
        if is_causal and L > 0 and S > 0:
            rule = causal_mask(L, S, device=query.device)  # (L, S), top-left like is_causal
        padding = None
        if key_padding_mask is not None:  # (B, S) -> (B, 1, 1, S): the same keys for all
            padding = padding_to_attn_mask(key_padding_mask, num_heads_dims=1)
        return combine_masks(rule, attn_mask, padding, bias, dtype=query.dtype), False

    def split_heads(self, x: Tensor, head_dim: int | None = None) -> Tensor:
        """``(B, T, H * D) -> (B, H, T, D)``, ``D`` the layer's ``head_dim`` unless given."""
        return split_heads(x, self.head_dim if head_dim is None else head_dim)

    def merge_heads(self, x: Tensor) -> Tensor:
        """``(B, H, T, Dv) -> (B, T, H * Dv)``: the heads side by side again."""
        return merge_heads(x)

    def position_queries_keys(
        self,
        queries: Tensor,
        keys: Tensor,
        offset: int = 0,
        position_embeddings: PositionEmbeddings | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The positions part on queries and new keys at ``offset, offset + 1, ...``."""
        if self.positions is None:
            return queries, keys
        return self.positions.queries_keys(queries, keys, offset, position_embeddings)

    def attend_heads(
        self,
        queries: Tensor,
        keys: Tensor,
        values: Tensor,
        attn_mask: Tensor | None = None,
        is_causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Every head at once through the backend; the weights too with ``need_weights``.

        Shape:
            queries: ``(B, H, L, E)``; keys: ``(B, Hkv, S, E)``; values:
            ``(B, Hkv, S, Ev)``; outputs: ``(B, H, L, Ev)`` and ``(B, H, L, S)`` or ``None``.
        """
        call = AttentionCall(
            attn_mask=attn_mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=is_causal,
            scale=self.scale,
            group=queries.shape[-3] // keys.shape[-3],  # query heads per key/value head
            sinks=self.sinks,
        )
        if need_weights:  # per query head (grouped heads repeated)
            return explicit_attention(queries, keys, values, call)
        return KERNELS[self.backend](queries, keys, values, call), None

    def _check_cache(self, cache: object) -> int:
        """Check ``cache`` (``None`` or a Cache); the number of positions seen."""
        if self.selector is not None:
            self.selector.check_cache(cache)
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
        positions = self.positions
        if isinstance(positions, PartialRotary):  # its table turns the first R features
            positions = positions.rotary
        D = positions.head_dim if isinstance(positions, RotaryEmbedding) else self.head_dim
        wanted = f"(cos, sin), each (L, D) or (B, L, D) with L = {L}, D = {D}"
        if not isinstance(position_embeddings, tuple) or len(position_embeddings) != 2:
            raise TypeError(
                f"position_embeddings must be {wanted}; got {type(position_embeddings).__name__}"
            )
        for part in position_embeddings:
            table = check_floating("position_embeddings", part)
            check_same_device("position_embeddings", table, query, "query")
            if table.dim() not in (2, 3) or table.shape[-2:] != (L, D):
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
