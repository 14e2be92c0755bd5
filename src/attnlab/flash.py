"""FlashAttention's algorithm in plain PyTorch: tiles and an online softmax.

The explicit computation builds the whole ``(L, S)`` matrix of scores, then its
softmax, then multiplies by the values: memory that grows with ``L * S``.
[`flash_attention`][attnlab.flash_attention] gives the same output while holding only
one block of scores at a time:

1. split the queries into blocks of ``Bq`` rows and the keys and values into blocks of
   ``Bk`` rows;
2. for one query block, visit the key blocks in order, keeping per query row a running
   maximum ``m`` of the scores seen so far, a running sum ``l`` of ``exp(score - m)``
   and an unnormalised output ``acc``;
3. when a block raises a row's maximum from ``m_old`` to ``m_new``, everything summed
   so far is multiplied by ``exp(m_old - m_new)``, which is exactly the factor that
   turns ``exp(x - m_old)`` into ``exp(x - m_new)``;
4. after the last block, ``acc / l`` is the attention output and ``m + log(l)`` is the
   row's log-sum-exp.

An attention sink (gpt-oss: one logit ``s_h`` per head) is one more term of the running
sum, a key of value zero visited first: each row starts at ``m = s_h``, ``l = 1``.

With ``is_causal=True``, key blocks that lie entirely after a query block's last row
are never computed at all (they would only be masked away). With ``window=W`` (a causal
sliding window, see [`sliding_window_mask`][attnlab.sliding_window_mask]) the key
blocks entirely before a query block's window are skipped too, so the work per query
stays bounded however long the sequence. With ``enable_gqa=True`` the query heads that
share a key/value head are interleaved row by row, so one matmul scores the whole group
against one read of each key block: the keys and values are never copied per head.

Shape legend: ``query (N, ..., L, E)``, ``key (N, ..., S, E)``, ``value (N, ..., S, Ev)``,
output ``(N, ..., L, Ev)``; the batch dims ``N, ...`` broadcast. Masks follow PyTorch's
SDPA: boolean ``True`` = may attend, float masks are added to the scaled scores.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ._validation import check_attention_args, check_positive_int, check_sinks
from .flash_tiles import (
    DEFAULT_BLOCK_SIZE,
    Tile,
    TileRule,
    block_scores,
    check_block_size,
    flash_visited_blocks,
    key_range,
)
from .functional import compute_dtype
from .masks import divide_rows, row_shift

__all__ = ["DEFAULT_BLOCK_SIZE", "FlashOutput", "flash_attention", "flash_visited_blocks"]

LOG2_E = math.log2(math.e)
"""``log2(e)``: ``exp(x) = 2 ** (x * log2(e))``, and ``torch.exp2`` is the faster."""


class FlashOutput(NamedTuple):
    """What [`flash_attention`][attnlab.flash_attention] returns: ``output, lse = ...``.

    Attributes:
        output: ``(N, ..., L, Ev)``.
        lse: ``(N, ..., L)``, each query row's log-sum-exp of its scaled, masked scores
            (the softmax's log-normaliser; ``-inf`` for a row with nothing to attend to).
    """

    output: Tensor
    lse: Tensor


def flash_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    block_size: int | tuple[int, int] = DEFAULT_BLOCK_SIZE,
    *,
    window: int | None = None,
    enable_gqa: bool = False,
    sinks: Tensor | None = None,
) -> FlashOutput:
    """Scaled dot-product attention computed block by block with an online softmax.

    The output equals
    [`scaled_dot_product_attention`][attnlab.scaled_dot_product_attention]'s (and so
    PyTorch's) up to floating-point rounding, but the ``(L, S)`` matrix of scores is
    never built: only one ``(Bq, Bk)`` block per batch entry exists at a time, so the
    extra memory grows like ``L + S``, not ``L * S``.

    Semantics, as in PyTorch's SDPA: the default scale is ``1 / sqrt(E)``; a boolean
    ``attn_mask`` is ``True`` where a query may attend, a float one is added to the
    scaled scores; ``is_causal=True`` lets query ``i`` attend to keys ``j <= i``
    (top-left aligned, also when ``L != S``) and key blocks entirely in a query block's
    future are skipped, not computed; dropout is applied to the attention weights
    whenever ``dropout_p > 0`` (survivors scaled by ``1 / (1 - dropout_p)``). A query
    row with nothing to attend to outputs zeros (and a log-sum-exp of ``-inf``), never
    NaN.

    Without a mask, dropout or gradients, a faster path runs: it fixes each row's
    reference maximum from its first key and never rescales, then checks the result
    and recomputes a query block with the rescaling algorithm if anything overflowed.
    With gradients enabled, the forward saves only the output and each row's
    log-sum-exp, and the backward pass recomputes the weights block by block
    (FlashAttention-2's formulas, with query blocks outside), so training memory also
    grows like ``L + S``.
    With dropout (or a float mask that needs gradients), autograd differentiates
    through the blocks instead.

    Args:
        query: Query vectors.
        key: Key vectors.
        value: Value vectors.
        attn_mask: Optional mask broadcastable to ``(N, ..., L, S)``: bool (``True`` =
            may attend) or float of the query's dtype (added to the scaled scores).
        dropout_p: Dropout probability on the attention weights, in ``[0, 1]``.
        is_causal: Causal masking, aligned top-left; not together with ``attn_mask``.
        scale: Multiplier of the scores; defaults to ``1 / sqrt(E)``.
        block_size: Rows per block: one int for both queries and keys, or a pair
            ``(Bq, Bk)``. Sizes need not divide ``L`` or ``S``; any positive size works,
            larger than ``L`` or ``S`` included.
        window: Causal sliding window: query ``i`` sees keys ``p - window < j <= p``
            with ``p = i + S - L`` (aligned to the end, like a KV cache), exactly
            [`sliding_window_mask`][attnlab.sliding_window_mask]; key blocks
            outside every row's window are skipped. Not with ``attn_mask``/``is_causal``.
        enable_gqa: Grouped-query attention, as PyTorch's: key and value have ``Hkv``
            heads at dim ``-3`` and query head ``h`` uses head ``h // (Hq // Hkv)``.
        sinks: Optional attention sinks ``(H,)``, one logit per query head (heads at
            dim ``-3``): each row's running sum starts at the sink's term.

    Returns:
        ``FlashOutput(output, lse)``: the log-sum-exp (the sinks' terms in it) comes free.

    Raises:
        TypeError: A non-tensor, a non-floating or mismatched dtype, a bad mask dtype,
            a block size that is not an int.
        ValueError: Wrong rank, mismatched ``E`` or ``S``, a mask that does not broadcast,
            both ``attn_mask`` and ``is_causal``, ``dropout_p`` outside ``[0, 1]``, a
            block size or window that is not positive, a window with a mask or
            ``is_causal``, head counts that do not group (``enable_gqa``), ``sinks``
            not ``(H,)``.

    Shape:
        query: ``(N, ..., L, E)``; key: ``(N, ..., S, E)``; value: ``(N, ..., S, Ev)``;
        output: ``(N, ..., L, Ev)``; lse: ``(N, ..., L)``.
    """
    batch, group = check_attention_args(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa=enable_gqa
    )
    sinks = check_sinks(sinks, batch, query)
    block_q, block_k = check_block_size(block_size)
    if window is not None:
        check_positive_int("window", window)
        if attn_mask is not None or is_causal:
            raise ValueError(
                "window is a causal sliding-window mask of its own; do not pass attn_mask "
                "or is_causal=True with it"
            )
    output, lse = flash_with_lse(
        query,
        key,
        value,
        attn_mask,
        dropout_p,
        is_causal,
        scale,
        (block_q, block_k),
        window=window,
        batch=batch,
        group=group,
        sinks=sinks,
    )
    return FlashOutput(output, lse)


@dataclass(frozen=True, eq=False)
class FlashCall:
    """One call of flash attention's kernels: its tensors, in the kernels' layout, and how.

    The layout folds every batch and head dim into one dim of ``n`` key/value heads and
    interleaves, row by row, the ``group`` query heads that share a key/value head:
    query row ``r`` is position ``r // group`` of head ``r % group``. A tile's rows then
    hold every head of the group at the same positions, and one matmul scores them all
    against one read of a key block; keys and values are never copied per query head.
    Without grouped-query attention ``group`` is 1 and the rows are the positions.

    Attributes:
        q: Queries, ``(n, L * group, E)``.
        k: Keys, ``(n, S, E)``.
        v: Values, ``(n, S, Ev)``.
        rule: What hides keys inside a tile: the causal rule, a window or a mask.
        scale: Multiplier of the scores.
        block_q: Query positions per tile (``block_q * group`` rows).
        block_k: Keys per tile.
        sinks: ``None`` or each row's sink logit, ``(n, L * group, 1)``.
    """

    q: Tensor
    k: Tensor
    v: Tensor
    rule: TileRule
    scale: float
    block_q: int
    block_k: int
    sinks: Tensor | None = None

    @property
    def L(self) -> int:  # noqa: N802 (the shape legend's name)
        """Number of query positions."""
        return self.q.shape[-2] // self.rule.group

    @property
    def S(self) -> int:  # noqa: N802
        """Number of keys."""
        return self.k.shape[-2]

    def rows(self, i0: int, i1: int) -> slice:
        """The rows of query positions ``i0:i1``, every head of the group."""
        return slice(i0 * self.rule.group, i1 * self.rule.group)

    def query_blocks(self) -> Iterator[tuple[int, int]]:
        """``(i0, i1)`` of every block of query positions, in order."""
        for i0 in range(0, self.L, self.block_q):
            yield i0, min(i0 + self.block_q, self.L)

    def tiles(self, i0: int, i1: int) -> Iterator[Tile]:
        """The tiles of query positions ``i0:i1`` that are computed: the rest are skipped."""
        rule = self.rule
        start, end = key_range(i0, i1, self.L, self.S, rule.is_causal, rule.window, self.block_k)
        for j0 in range(start, end, self.block_k):
            yield Tile(i0, i1, j0, min(j0 + self.block_k, end))


def flash_with_lse(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    block_size: tuple[int, int],
    *,
    window: int | None,
    batch: tuple[int, ...],
    group: int,
    sinks: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """[`flash_attention`][attnlab.flash_attention] on arguments already checked.

    ``batch`` is the broadcast batch shape and ``group`` the query heads per key/value
    head (``1`` without grouped-query attention), as the checks return them; ``sinks``
    ``(H,)`` or ``None``. Returns
    ``(output, lse)``; the package's other entry points (ring attention) call it after
    checking their own arguments once.
    """
    dtype = query.dtype
    L, E = query.shape[-2:]
    # float16/bfloat16: scores, softmax and accumulation in float32, as PyTorch's kernels
    compute = compute_dtype(dtype)
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask.to(compute)
    q, k, v, mask = _kernel_layout(
        query.to(compute), key.to(compute), value.to(compute), attn_mask, batch, group
    )
    rule = TileRule(is_causal, window, offset=k.shape[-2] - L, group=group, mask=mask)
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    sink_rows = None
    if sinks is not None:  # (H,) -> (*batch) -> (n, group) -> (n, L * group, 1), rows' order
        by_group = sinks.to(compute).expand(*batch).reshape(-1, 1, group)  # (n, 1, group)
        sink_rows = by_group.expand(-1, L, group).reshape(-1, L * group, 1)
    call = FlashCall(q, k, v, rule, scale, *block_size, sinks=sink_rows)
    leaves = (query, key, value) if sinks is None else (query, key, value, sinks)
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in leaves)
    output, lse = _run_path(call, dropout_p, needs_grad)
    # (n, L * group, Ev) -> (n, L, group, Ev) -> (n, group, L, Ev) -> (N, ..., L, Ev)
    n, Ev = output.shape[0], output.shape[-1]
    output = output.view(n, L, group, Ev).transpose(1, 2).reshape(*batch, L, Ev)
    lse = lse.view(n, L, group).transpose(1, 2).reshape(*batch, L)
    return output.to(dtype), lse


def _kernel_layout(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    batch: tuple[int, ...],
    group: int,
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """Query, key, value and mask in the kernels' layout (see ``FlashCall``)."""
    L, E = query.shape[-2:]
    S, Ev = value.shape[-2:]
    kv_batch = (*batch[:-1], batch[-1] // group) if group > 1 else batch
    n = math.prod(kv_batch)
    # (N, ..., Hkv * group, L, E) -> (n, group, L, E) -> (n, L * group, E): the group's
    # heads interleaved row by row (a copy only when group > 1)
    q = query.expand(*batch, L, E).reshape(n, group, L, E).transpose(1, 2)
    q = q.reshape(n, L * group, E)
    k = key.expand(*kv_batch, S, E).reshape(n, S, E)  # (N, ..., Hkv, S, E) -> (n, S, E)
    v = value.expand(*kv_batch, S, Ev).reshape(n, S, Ev)
    if attn_mask is None:
        return q, k, v, None
    # a view, no copy: (N, ..., Hkv * group, L, S) -> (N, ..., Hkv, L, group, S)
    mask = attn_mask.expand(*batch, L, S).view(*kv_batch, group, L, S).transpose(-3, -2)
    return q, k, v, mask


def _run_path(call: FlashCall, dropout_p: float, needs_grad: bool) -> tuple[Tensor, Tensor]:
    """Output ``(n, L * group, Ev)`` and lse ``(n, L * group)`` by the fitting path."""
    q, v, mask = call.q, call.v, call.rule.mask
    n, R = q.shape[:2]
    if q.is_meta:  # shapes only: nothing to compute
        return q.new_empty(n, R, v.shape[-1]), q.new_empty(n, R)
    if n == 0 or R == 0 or call.S == 0:  # no keys: zeros; the lse is the sink's, if any
        lse = q.new_full((n, R), float("-inf")) if call.sinks is None else call.sinks[..., 0]
        return q.new_zeros(n, R, v.shape[-1]), lse
    if (
        mask is None
        and dropout_p == 0.0
        and not needs_grad
        and call.rule.window is None
        and call.sinks is None
        # compiled, the rescaling algorithm runs: the fast path's overflow check
        and not torch.compiler.is_compiling()  # would break torch.compile's graph
    ):
        return _flash_fast(call)
    sink_grad = call.sinks is not None and call.sinks.requires_grad
    if dropout_p == 0.0 and not (mask is not None and mask.requires_grad) and not sink_grad:
        output, lse = _FlashAttentionFunction.apply(  # type: ignore[no-untyped-call]
            call.q, call.k, call.v, call
        )
        return output, lse
    return _flash_rescaling(call, dropout_p)


class _FlashAttentionFunction(torch.autograd.Function):
    """Flash forward that saves only the output and the log-sum-exp; tiled backward.

    The backward uses FlashAttention-2's formulas: with ``P = exp(S - lse)`` recomputed
    block by block and ``D = rowsum(dO * O)``, ``dV += P^T dO``, ``dP = dO V^T``,
    ``dS = P * (dP - D)``, ``dQ += scale * dS K`` and ``dK += scale * dS^T Q``; its loop
    runs query blocks outside (see ``flash_backward`` for FlashAttention-2's order).
    """

    @staticmethod
    def forward(
        ctx: Any, q: Tensor, k: Tensor, v: Tensor, call: FlashCall
    ) -> tuple[Tensor, Tensor]:
        call = replace(call, q=q, k=k, v=v)
        plain = call.rule.mask is None and call.rule.window is None and call.sinks is None
        if plain and not torch.compiler.is_compiling():
            output, lse = _flash_fast(call)
        else:
            output, lse = _flash_rescaling(call, 0.0)
        ctx.save_for_backward(q, k, v, output, lse)
        ctx.call = call
        return output, lse

    @staticmethod
    def backward(
        ctx: Any, grad_output: Tensor, grad_lse: Tensor | None
    ) -> tuple[Tensor | None, ...]:
        q, k, v, output, lse = ctx.saved_tensors
        call = replace(ctx.call, q=q, k=k, v=v)
        return (*flash_backward(call, output, lse, grad_output, grad_lse), None)


def flash_backward(
    call: FlashCall,
    output: Tensor,
    lse: Tensor,
    grad_output: Tensor,
    grad_lse: Tensor | None = None,
    *,
    order: Literal["query", "key"] = "query",
) -> tuple[Tensor, Tensor, Tensor]:
    """dQ, dK, dV tile by tile, recomputing each tile's weights from the lse.

    Two extra columns save two passes over every tile, as in ``_flash_fast``:
    ``[q * scale, -lse]`` against ``[k, 1]`` gives ``S - lse`` in one matmul (then
    ``P = exp(S - lse)`` in place), and ``[dO, -D]`` against ``[v, 1]`` gives
    ``dP - D``. Tiles of scores live in two reused buffers; nothing here is tracked
    by autograd, so every step runs in place. A tile holds every query head of a
    group, so dK and dV sum over the group as they accumulate.

    ``order``, the loop nest over the same tiles: ``"query"`` (what ``flash_attention``
    runs) puts query blocks outside, dK and dV accumulating across them; ``"key"`` is
    FlashAttention-2's, key/value blocks outside, each block's dK and dV kept in a
    buffer (on a GPU, on chip) and written once, dQ accumulating (on a GPU, atomically).

    Shapes: ``output`` and ``grad_output (n, L * group, Ev)``, ``lse`` and
    ``grad_lse (n, L * group)``, ``call`` as in ``FlashCall``; returns tensors shaped
    like ``call.q``, ``call.k``, ``call.v``.
    """
    if order not in ("query", "key"):
        raise ValueError(f"order must be 'query' or 'key'; got {order!r}")
    q, k, v = call.q, call.k, call.v
    n, R, E = q.shape
    S, Ev = v.shape[-2:]
    grad_q, grad_k, grad_v = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    # D = rowsum(dO * O): the weighted mean of dP over each row, (n, R). A gradient
    # reaching the log-sum-exp adds dlse * P to dS (d lse / d S = P), so it enters as -D.
    row_dot = torch.linalg.vecdot(grad_output, output)
    if grad_lse is not None:
        row_dot.sub_(grad_lse)
    # Rows with nothing to attend to have lse = -inf; shifting by 0 makes their P = 0.
    shift = row_shift(lse)
    queries_ext = torch.cat([q * call.scale, -shift.unsqueeze(-1)], dim=-1)  # (n, R, E + 1)
    grad_out_ext = torch.cat([grad_output, -row_dot.unsqueeze(-1)], dim=-1)  # (n, R, Ev + 1)
    keys_ext = torch.cat([k, k.new_ones(n, S, 1)], dim=-1)  # (n, S, E + 1)
    values_ext = torch.cat([v, v.new_ones(n, S, 1)], dim=-1)  # (n, S, Ev + 1)
    size = n * min(call.block_q * call.rule.group, R) * min(call.block_k, S)
    weights_buf, grad_buf = q.new_empty(size), q.new_empty(size)

    def one_tile(tile: Tile, grad_k_block: Tensor, grad_v_block: Tensor) -> None:
        """Add one tile's share to dQ (in place) and to the given dK, dV rows."""
        rows = call.rows(tile.i0, tile.i1)
        queries = queries_ext[:, rows]  # (n, Bq * group, E + 1): [q * scale, -lse]
        grad_out_block = grad_out_ext[:, rows]  # (n, Bq * group, Ev + 1): [dO, -D]
        keys = slice(tile.j0, tile.j1)
        shape = (n, queries.shape[1], tile.j1 - tile.j0)
        attn_weights = weights_buf[: math.prod(shape)].view(shape)
        block_scores(queries, keys_ext, tile, call.rule, out=attn_weights)
        attn_weights.exp_()  # P = exp(S - lse): (n, Bq * group, Bk)
        grad_v_block.baddbmm_(attn_weights.transpose(-2, -1), grad_out_block[..., :Ev])
        grad_scores = grad_buf[: math.prod(shape)].view(shape)
        torch.bmm(grad_out_block, values_ext[:, keys].transpose(-2, -1), out=grad_scores)
        grad_scores.mul_(attn_weights)  # dS = P * (dP - D)
        grad_q[:, rows].baddbmm_(grad_scores, k[:, keys], alpha=call.scale)
        grad_k_block.baddbmm_(grad_scores.transpose(-2, -1), queries[..., :E])

    if order == "query":
        for i0, i1 in call.query_blocks():
            for tile in call.tiles(i0, i1):
                keys = slice(tile.j0, tile.j1)
                one_tile(tile, grad_k[:, keys], grad_v[:, keys])
        return grad_q, grad_k, grad_v
    # FlashAttention-2's order: one key/value block outside, every query block inside
    tiles_by_key: dict[int, list[Tile]] = {}  # key blocks start on the same grid
    for tile in (t for i0, i1 in call.query_blocks() for t in call.tiles(i0, i1)):
        tiles_by_key.setdefault(tile.j0, []).append(tile)
    for j0 in sorted(tiles_by_key):
        j1 = max(tile.j1 for tile in tiles_by_key[j0])
        grad_k_block, grad_v_block = k.new_zeros(n, j1 - j0, E), v.new_zeros(n, j1 - j0, Ev)
        for tile in tiles_by_key[j0]:  # a causal tile may stop short of j1
            width = tile.j1 - j0
            one_tile(tile, grad_k_block[:, :width], grad_v_block[:, :width])
        grad_k[:, j0:j1], grad_v[:, j0:j1] = grad_k_block, grad_v_block  # written once
    return grad_q, grad_k, grad_v


def flash_attention_taught(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    is_causal: bool = False,
    block_size: int | tuple[int, int] = DEFAULT_BLOCK_SIZE,
    *,
    enable_gqa: bool = False,
) -> Tensor:
    """``flash_attention``'s output by the loop as taught, even where it takes its fast path.

    The running maximum and sum, rescaling every tile; for ``bench --flash_taught``.
    """
    batch, group = check_attention_args(
        query, key, value, None, 0.0, is_causal, None, enable_gqa=enable_gqa
    )
    L, E = query.shape[-2:]
    q, k, v, _ = _kernel_layout(query, key, value, None, batch, group)
    rule = TileRule(is_causal, None, offset=k.shape[-2] - L, group=group)
    call = FlashCall(q, k, v, rule, 1.0 / math.sqrt(E), *check_block_size(block_size))
    output, _ = _flash_rescaling(call, 0.0)
    n, Ev = output.shape[0], output.shape[-1]
    return output.view(n, L, group, Ev).transpose(1, 2).reshape(*batch, L, Ev)


def _flash_rescaling(call: FlashCall, dropout_p: float) -> tuple[Tensor, Tensor]:
    """The textbook algorithm, every query block; out-of-place, so autograd works."""
    blocks = [_query_block_rescaling(call, i0, i1, dropout_p) for i0, i1 in call.query_blocks()]
    outputs, lses = zip(*blocks, strict=True)
    return torch.cat(outputs, dim=-2), torch.cat(lses, dim=-1)


def _query_block_rescaling(
    call: FlashCall, i0: int, i1: int, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Output rows of positions ``i0:i1`` with the running max, running sum and rescaling.

    Returns the output ``(n, Bq * group, Ev)`` and the log-sum-exp ``(n, Bq * group)``.
    """
    q, k, v = call.q, call.k, call.v
    queries = q[:, call.rows(i0, i1)] * call.scale  # (n, Bq * group, E)
    n, rows = queries.shape[:2]
    neg_inf = torch.tensor(float("-inf"), dtype=q.dtype, device=q.device)
    row_max = neg_inf.expand(n, rows, 1)  # m: the largest score seen so far
    row_sum = q.new_zeros(n, rows, 1)  # l: the sum of exp(score - m) so far
    if call.sinks is not None:  # the sink, seen first: m = s_h, l = exp(s_h - m) = 1
        row_max = call.sinks[:, call.rows(i0, i1)]  # (n, Bq * group, 1)
        row_sum = torch.ones_like(row_sum)
    acc = q.new_zeros(n, rows, v.shape[-1])  # the output, not yet divided by l
    for tile in call.tiles(i0, i1):
        attn_scores = block_scores(queries, k, tile, call.rule)  # (n, Bq * group, Bk)
        new_max = torch.maximum(row_max, attn_scores.amax(dim=-1, keepdim=True))
        # A row masked everywhere so far has new_max = -inf; shift it by 0 instead,
        # so that exp(-inf - 0) = 0 rather than exp(-inf - (-inf)) = nan.
        shift = row_shift(new_max)
        weights = torch.exp(attn_scores - shift)  # (n, Bq * group, Bk), unnormalised
        correction = torch.exp(row_max - shift)  # (n, Bq * group, 1): rescales the old sums
        row_sum = row_sum * correction + weights.sum(dim=-1, keepdim=True)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p, training=True)
        acc = acc * correction + weights @ v[:, tile.j0 : tile.j1]  # (n, Bq * group, Ev)
        row_max = new_max
    output = divide_rows(acc, row_sum)  # rows with nothing to attend to: zeros, not 0 / 0
    shift = row_shift(row_max)
    lse = (shift + torch.log(row_sum)).squeeze(-1)  # log(0) = -inf for empty rows
    return output, lse


def _flash_fast(call: FlashCall) -> tuple[Tensor, Tensor]:
    """No mask, window, dropout or gradients: the same algorithm with fewer passes.

    Four tricks, each exact up to rounding:

    * each row's reference maximum ``m`` is its score with key 0 (which every row may
      see), fixed for the whole row, so nothing is ever rescaled; since ``m`` is at
      most the true maximum, the largest term is ``exp(.) >= 1`` and nothing underflows
      to an all-zero row;
    * ``-m`` rides along as an extra column of the queries, against a column of ones
      in the keys, so one matmul returns ``score - m``;
    * a column of ones in the values makes the second matmul also return ``l``; that
      matmul runs transposed, ``[v, 1]^T @ p^T``, which MKL computes faster with the
      odd width ``Ev + 1`` as rows than as columns;
    * the scores are computed in base 2, ``s * log2(e)`` (the factor folded into the
      queries' scale), so ``2 ** (.)`` gives the same weights as ``exp(s - m)``:
      ``torch.exp2`` is several times faster than ``torch.exp`` on a CPU (the trick of
      FlashAttention-2's kernels).

    Each step is one large operation over every head of the tile, and everything done
    once per row (the scale, ``m``, the division by ``l``, the log-sum-exp, the
    overflow check) is done once for all rows: few, large parallel regions, which a
    busy neighbour on the cores slows down far less than many small ones. If a row's
    scores rise so far above its first score that ``exp`` overflows, its query block
    is recomputed by the rescaling algorithm.
    """
    q, k, v = call.q, call.k, call.v
    n, R, E = q.shape
    S, Ev = v.shape[-2:]
    keys_ext = torch.cat([k, k.new_ones(n, S, 1)], dim=-1)  # (n, S, E + 1): [k, 1]
    values_ext = torch.cat([v, v.new_ones(n, S, 1)], dim=-1)  # (n, S, Ev + 1): [v, 1]
    queries = q.new_empty(n, R, E + 1)  # (n, R, E + 1): [q * scale * log2(e), -m]
    torch.mul(q, call.scale * LOG2_E, out=queries[..., :E])  # base 2: s * log2(e)
    torch.bmm(queries[..., :E], -k[:, :1].transpose(-2, -1), out=queries[..., E:])
    # One reused buffer for the tiles: fresh allocations would cost page faults.
    scores_buf = q.new_empty(n * min(call.block_q * call.rule.group, R) * min(call.block_k, S))
    accs: list[Tensor] = []  # per query block, (n, Ev + 1, Bq * group): [sum p v, sum p]^T
    for i0, i1 in call.query_blocks():
        block_queries = queries[:, call.rows(i0, i1)]  # (n, Bq * group, E + 1)
        for tile in call.tiles(i0, i1):  # the first tile starts at key 0: every row sees it
            shape = (n, block_queries.shape[1], tile.j1 - tile.j0)
            shifted = scores_buf[: math.prod(shape)].view(shape)
            block_scores(block_queries, keys_ext, tile, call.rule, out=shifted)  # s - m
            shifted.exp2_()  # (n, Bq * group, Bk), unnormalised weights exp(s - m)
            # (n, Ev + 1, Bk) @ (n, Bk, Bq * group): the weighted values, transposed
            values_t = values_ext[:, tile.j0 : tile.j1].transpose(-2, -1)
            if tile.j0 == 0:
                accs.append(torch.bmm(values_t, shifted.transpose(-2, -1)))
            else:
                accs[-1].baddbmm_(values_t, shifted.transpose(-2, -1))
    acc_t = torch.cat(accs, dim=-1)  # (n, Ev + 1, R)
    row_sum = acc_t[:, Ev:]  # (n, 1, R)
    output = q.new_empty(n, R, Ev)
    torch.div(acc_t[:, :Ev].transpose(-2, -1), row_sum.transpose(-2, -1), out=output)
    lse = torch.log(acc_t[:, Ev]) - queries[..., E] / LOG2_E  # (n, R): log l + m
    if not _all_finite(acc_t):  # exp overflowed somewhere: redo those blocks, rescaling
        for i0, i1 in call.query_blocks():
            rows = call.rows(i0, i1)
            if not _all_finite(acc_t[..., rows]):
                output[:, rows], lse[:, rows] = _query_block_rescaling(call, i0, i1)
    return output, lse


def _all_finite(x: Tensor) -> bool:
    """Whether no element is inf or nan: one reduction, not an elementwise pass."""
    low, high = torch.aminmax(x)
    return math.isfinite(low.item()) and math.isfinite(high.item())
