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

With ``is_causal=True``, key blocks that lie entirely after a query block's last row
are never computed at all (they would only be masked away). With ``window=W`` (a causal
sliding window, see [`sliding_window_mask`][attnlab.sliding_window_mask]) the key
blocks entirely before a query block's window are skipped too, so the work per query
stays bounded however long the sequence. With ``enable_gqa=True`` each group of query
heads is computed against its shared key/value head, which is never copied.

Shape legend: ``query (N, ..., L, E)``, ``key (N, ..., S, E)``, ``value (N, ..., S, Ev)``,
output ``(N, ..., L, Ev)``; the batch dims ``N, ...`` broadcast. Masks follow PyTorch's
SDPA: boolean ``True`` = may attend, float masks are added to the scaled scores.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Literal, overload

import torch
import torch.nn.functional as F
from torch import Tensor

from ._validation import check_attention_args, check_bool, check_positive_int
from .flash_tiles import (
    DEFAULT_BLOCK_SIZE,
    block_bias,
    block_scores,
    check_block_size,
    flash_visited_blocks,
    key_range,
)
from .functional import compute_dtype
from .masks import divide_rows, row_shift

__all__ = ["DEFAULT_BLOCK_SIZE", "flash_attention", "flash_visited_blocks"]


@overload
def flash_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = ...,
    dropout_p: float = ...,
    is_causal: bool = ...,
    scale: float | None = ...,
    block_size: int | tuple[int, int] = ...,
    return_lse: Literal[False] = ...,
    *,
    window: int | None = ...,
    enable_gqa: bool = ...,
) -> Tensor: ...


@overload
def flash_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = ...,
    dropout_p: float = ...,
    is_causal: bool = ...,
    scale: float | None = ...,
    block_size: int | tuple[int, int] = ...,
    *,
    return_lse: Literal[True],
    window: int | None = ...,
    enable_gqa: bool = ...,
) -> tuple[Tensor, Tensor]: ...


def flash_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    block_size: int | tuple[int, int] = DEFAULT_BLOCK_SIZE,
    return_lse: bool = False,
    *,
    window: int | None = None,
    enable_gqa: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
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
    (FlashAttention-2's backward), so training memory also grows like ``L + S``.
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
        return_lse: Also return the log-sum-exp of each query row's scaled, masked
            scores (the softmax's log-normaliser).
        window: Causal sliding window: query ``i`` sees keys ``p - window < j <= p``
            with ``p = i + S - L`` (aligned to the end, like a KV cache), exactly
            [`sliding_window_mask`][attnlab.sliding_window_mask]; key blocks
            outside every row's window are skipped. Not with ``attn_mask``/``is_causal``.
        enable_gqa: Grouped-query attention, as PyTorch's: key and value have ``Hkv``
            heads at dim ``-3`` and query head ``h`` uses head ``h // (Hq // Hkv)``.

    Returns:
        The attention output, or ``(output, lse)`` if ``return_lse``.

    Raises:
        TypeError: A non-tensor, a non-floating or mismatched dtype, a bad mask dtype,
            a block size that is not an int.
        ValueError: Wrong rank, mismatched ``E`` or ``S``, a mask that does not broadcast,
            both ``attn_mask`` and ``is_causal``, ``dropout_p`` outside ``[0, 1]``, a
            block size or window that is not positive, a window with a mask or
            ``is_causal``, head counts that do not group (``enable_gqa``).

    Shape:
        query: ``(N, ..., L, E)``; key: ``(N, ..., S, E)``; value: ``(N, ..., S, Ev)``;
        output: ``(N, ..., L, Ev)``; lse: ``(N, ..., L)``.
    """
    batch, group = check_attention_args(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa=enable_gqa
    )
    check_bool("return_lse", return_lse)
    block_q, block_k = check_block_size(block_size)
    if window is not None:
        check_positive_int("window", window)
        if attn_mask is not None or is_causal:
            raise ValueError(
                "window is a causal sliding-window mask of its own; do not pass attn_mask "
                "or is_causal=True with it"
            )
    output, lse = flash_kernel(
        query, key, value, attn_mask, dropout_p, is_causal, scale, (block_q, block_k),
        window=window, batch=batch, group=group,
    )  # fmt: skip
    return (output, lse) if return_lse else output


def flash_kernel(
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
) -> tuple[Tensor, Tensor]:
    """[`flash_attention`][attnlab.flash_attention] on arguments already checked.

    ``batch`` is the broadcast batch shape and ``group`` the query heads per key/value
    head (``1`` without grouped-query attention), as the checks return them. Returns
    ``(output, lse)``; the package's other entry points (``attend``, ring attention)
    call it after checking their own arguments once.
    """
    dtype = query.dtype
    block_q, block_k = block_size
    L, E = query.shape[-2:]
    S, Ev = value.shape[-2:]
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    kv_batch = (*batch[:-1], batch[-1] // group) if group > 1 else batch
    n = math.prod(kv_batch)
    # float16/bfloat16: scores, softmax and accumulation in float32, as PyTorch's kernels
    compute = compute_dtype(dtype)
    query, key, value = query.to(compute), key.to(compute), value.to(compute)
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask.to(compute)
    # (N, ..., H, L, E) -> (n, group, L, E): query head h = kv head * group + g;
    # key and value (N, ..., Hkv, S, E) -> (n, S, E): one flat batch dim
    q = query.expand(*batch, L, E).reshape(n, group, L, E)
    k = key.expand(*kv_batch, S, E).reshape(n, S, E)
    v = value.expand(*kv_batch, S, Ev).reshape(n, S, Ev)
    mask = None
    if attn_mask is not None:  # a view, no copy: (N, ..., Hkv, group, L, S)
        mask = attn_mask.expand(*batch, L, S)
        if group > 1:
            mask = mask.view(*batch[:-1], batch[-1] // group, group, L, S)

    needs_grad = torch.is_grad_enabled() and (
        query.requires_grad or key.requires_grad or value.requires_grad
    )
    outputs: list[Tensor] = []
    lses: list[Tensor] = []
    for g in range(group):  # each query head of a group against the shared kv head
        mask_g = None if mask is None else (mask[..., g, :, :] if group > 1 else mask)
        q_g = q[:, g]  # (n, L, E)
        if q.is_meta:  # shapes only: nothing to compute
            output, lse = q.new_empty(n, L, Ev), q.new_empty(n, L)
        elif n == 0 or L == 0 or S == 0:
            output, lse = q.new_zeros(n, L, Ev), q.new_full((n, L), float("-inf"))
        elif (
            mask_g is None
            and dropout_p == 0.0
            and not needs_grad
            and window is None
            and (
                not torch.compiler.is_compiling()  # its reused buffers and its overflow check
            )
        ):  # would break torch.compile's graph: compiled, the rescaling algorithm runs
            output, lse = _flash_fast(q_g, k, v, is_causal, scale, block_q, block_k)
        elif dropout_p == 0.0 and not (mask_g is not None and mask_g.requires_grad):
            output, lse = _FlashAttentionFunction.apply(  # type: ignore[no-untyped-call]
                q_g, k, v, mask_g, is_causal, window, scale, block_q, block_k
            )
        else:
            output, lse = _flash_rescaling(
                q_g, k, v, mask_g, dropout_p, is_causal, window, scale, block_q, block_k
            )
        outputs.append(output)
        lses.append(lse)
    if group > 1:  # group x (n, L, Ev) -> (n, group, L, Ev); lse: (n, group, L)
        output, lse = torch.stack(outputs, dim=1), torch.stack(lses, dim=1)
    # -> (N, ..., L, Ev) and (N, ..., L)
    return output.reshape(*batch, L, Ev).to(dtype), lse.reshape(*batch, L)


class _FlashAttentionFunction(torch.autograd.Function):
    """Flash forward that saves only the output and the log-sum-exp; tiled backward.

    The backward is FlashAttention-2's: with ``P = exp(S - lse)`` recomputed block by
    block and ``D = rowsum(dO * O)``, ``dV += P^T dO``, ``dP = dO V^T``,
    ``dS = P * (dP - D)``, ``dQ += scale * dS K`` and ``dK += scale * dS^T Q``.
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        is_causal: bool,
        window: int | None,
        scale: float,
        block_q: int,
        block_k: int,
    ) -> tuple[Tensor, Tensor]:
        if mask is None and window is None and not torch.compiler.is_compiling():
            output, lse = _flash_fast(q, k, v, is_causal, scale, block_q, block_k)
        else:
            output, lse = _flash_rescaling(
                q, k, v, mask, 0.0, is_causal, window, scale, block_q, block_k
            )
        ctx.save_for_backward(q, k, v, mask, output, lse)
        ctx.config = (is_causal, window, scale, block_q, block_k)
        return output, lse

    @staticmethod
    def backward(
        ctx: Any, grad_output: Tensor, grad_lse: Tensor | None
    ) -> tuple[Tensor | None, ...]:
        q, k, v, mask, output, lse = ctx.saved_tensors
        is_causal, window, scale, block_q, block_k = ctx.config
        grads = flash_backward(
            q,
            k,
            v,
            mask,
            output,
            lse,
            grad_output,
            grad_lse,
            is_causal,
            window,
            scale,
            block_q,
            block_k,
        )
        return (*grads, None, None, None, None, None, None)


def flash_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    output: Tensor,
    lse: Tensor,
    grad_output: Tensor,
    grad_lse: Tensor | None,
    is_causal: bool,
    window: int | None,
    scale: float,
    block_q: int,
    block_k: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """dQ, dK, dV block by block, recomputing each block's weights from the lse.

    Two extra columns save two passes over every block, as in ``_flash_fast``:
    ``[q * scale, -lse]`` against ``[k, 1]`` gives ``S - lse`` in one matmul (then
    ``P = exp(S - lse)`` in place), and ``[dO, -D]`` against ``[v, 1]`` gives
    ``dP - D``. Blocks of scores live in two reused buffers; nothing here is tracked
    by autograd, so every step runs in place.

    Shapes: ``q (n, L, E)``, ``k (n, S, E)``, ``v (n, S, Ev)``, ``output`` and
    ``grad_output (n, L, Ev)``, ``lse`` and ``grad_lse (n, L)``;
    returns tensors shaped like q, k, v.
    """
    n, L, E = q.shape
    S, Ev = v.shape[-2:]
    grad_q, grad_k, grad_v = q.new_zeros(n, L, E), k.new_zeros(n, S, E), v.new_zeros(n, S, Ev)
    # D = rowsum(dO * O): the weighted mean of dP over each row, (n, L). A gradient
    # reaching the log-sum-exp adds dlse * P to dS (d lse / d S = P), so it enters as -D.
    row_dot = torch.linalg.vecdot(grad_output, output)
    if grad_lse is not None:
        row_dot.sub_(grad_lse)
    # Rows with nothing to attend to have lse = -inf; shifting by 0 makes their P = 0.
    shift = row_shift(lse)
    queries_ext = torch.cat([q * scale, -shift.unsqueeze(-1)], dim=-1)  # (n, L, E + 1)
    grad_out_ext = torch.cat([grad_output, -row_dot.unsqueeze(-1)], dim=-1)  # (n, L, Ev + 1)
    keys_ext = torch.cat([k, k.new_ones(n, S, 1)], dim=-1)  # (n, S, E + 1)
    values_ext = torch.cat([v, v.new_ones(n, S, 1)], dim=-1)  # (n, S, Ev + 1)
    size = n * min(block_q, L) * min(block_k, S)
    weights_buf, grad_buf = q.new_empty(size), q.new_empty(size)
    scores_of = functools.partial(
        block_scores, mask=mask, is_causal=is_causal, window=window, offset=S - L, cache={}
    )
    for i0 in range(0, L, block_q):
        i1 = min(i0 + block_q, L)
        queries = queries_ext[:, i0:i1]  # (n, Bq, E + 1): [q * scale, -lse]
        grad_out_block = grad_out_ext[:, i0:i1]  # (n, Bq, Ev + 1): [dO, -D]
        grad_q_block = grad_q[:, i0:i1]
        start, end = key_range(i0, i1, L, S, is_causal, window, block_k)
        for j0 in range(start, end, block_k):
            j1 = min(j0 + block_k, end)
            shape = (n, i1 - i0, j1 - j0)
            attn_weights = weights_buf[: math.prod(shape)].view(shape)
            scores_of(queries, keys_ext, i0=i0, i1=i1, j0=j0, j1=j1, out=attn_weights)
            attn_weights.exp_()  # P = exp(S - lse): (n, Bq, Bk)
            grad_v[:, j0:j1].baddbmm_(attn_weights.transpose(-2, -1), grad_out_block[..., :Ev])
            grad_scores = grad_buf[: math.prod(shape)].view(shape)
            torch.bmm(grad_out_block, values_ext[:, j0:j1].transpose(-2, -1), out=grad_scores)
            grad_scores.mul_(attn_weights)  # dS = P * (dP - D)
            grad_q_block.baddbmm_(grad_scores, k[:, j0:j1], alpha=scale)
            grad_k[:, j0:j1].baddbmm_(grad_scores.transpose(-2, -1), queries[..., :E])
    return grad_q, grad_k, grad_v


def _flash_rescaling(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    window: int | None,
    scale: float,
    block_q: int,
    block_k: int,
) -> tuple[Tensor, Tensor]:
    """The textbook algorithm, every query block; out-of-place, so autograd works."""
    L = q.shape[-2]
    outputs: list[Tensor] = []
    lses: list[Tensor] = []
    for i0 in range(0, L, block_q):
        output, lse = _query_block_rescaling(
            q,
            k,
            v,
            mask,
            dropout_p,
            is_causal,
            window,
            scale,
            i0,
            min(i0 + block_q, L),
            block_k,
        )
        outputs.append(output)
        lses.append(lse)
    return torch.cat(outputs, dim=-2), torch.cat(lses, dim=-1)


def _query_block_rescaling(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    window: int | None,
    scale: float,
    i0: int,
    i1: int,
    block_k: int,
) -> tuple[Tensor, Tensor]:
    """Output rows ``i0:i1`` with the running max, running sum and rescaling.

    Shapes: ``q (n, L, E)``, ``k (n, S, E)``, ``v (n, S, Ev)``, ``mask (N, ..., L, S)``;
    returns the output ``(n, i1 - i0, Ev)`` and the log-sum-exp ``(n, i1 - i0)``.
    """
    n, S, Ev = v.shape
    L = q.shape[-2]
    queries = q[:, i0:i1] * scale  # (n, Bq, E)
    neg_inf = torch.tensor(float("-inf"), dtype=q.dtype, device=q.device)
    row_max = neg_inf.expand(n, i1 - i0, 1)  # m: the largest score seen so far
    row_sum = q.new_zeros(n, i1 - i0, 1)  # l: the sum of exp(score - m) so far
    acc = q.new_zeros(n, i1 - i0, Ev)  # the output, not yet divided by l
    start, end = key_range(i0, i1, L, S, is_causal, window, block_k)
    for j0 in range(start, end, block_k):
        j1 = min(j0 + block_k, end)
        attn_scores = block_scores(queries, k, mask, is_causal, i0, i1, j0, j1, window, S - L)
        new_max = torch.maximum(row_max, attn_scores.amax(dim=-1, keepdim=True))
        # A row masked everywhere so far has new_max = -inf; shift it by 0 instead,
        # so that exp(-inf - 0) = 0 rather than exp(-inf - (-inf)) = nan.
        shift = row_shift(new_max)
        weights = torch.exp(attn_scores - shift)  # (n, Bq, Bk), unnormalised
        correction = torch.exp(row_max - shift)  # (n, Bq, 1): rescales the old sums
        row_sum = row_sum * correction + weights.sum(dim=-1, keepdim=True)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p, training=True)
        acc = acc * correction + weights @ v[:, j0:j1]  # (n, Bq, Ev)
        row_max = new_max
    output = divide_rows(acc, row_sum)  # rows with nothing to attend to: zeros, not 0 / 0
    shift = row_shift(row_max)
    lse = (shift + torch.log(row_sum)).squeeze(-1)  # log(0) = -inf for empty rows
    return output, lse


def _flash_fast(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    is_causal: bool,
    scale: float,
    block_q: int,
    block_k: int,
) -> tuple[Tensor, Tensor]:
    """No mask, no dropout, no gradients: the same algorithm with fewer passes.

    Three tricks, each exact:

    * each row's reference maximum ``m`` is its score with key 0 (which every row may
      see), fixed for the whole row, so nothing is ever rescaled; since ``m`` is at
      most the true maximum, the largest term is ``exp(.) >= 1`` and nothing underflows
      to an all-zero row;
    * ``-m`` rides along as an extra column of the queries, against a column of ones
      in the keys, so one matmul returns ``score - m``;
    * a column of ones in the values makes the second matmul also return ``l``.

    If a row's scores rise so far above its first score that ``exp`` overflows, its
    query block is recomputed by the rescaling algorithm.
    """
    n, L, E = q.shape
    S, Ev = v.shape[-2:]
    keys_ext = torch.cat([k, k.new_ones(n, S, 1)], dim=-1)  # (n, S, E + 1): [k, 1]
    values_ext = torch.cat([v, v.new_ones(n, S, 1)], dim=-1)  # (n, S, Ev + 1): [v, 1]
    output = q.new_empty(n, L, Ev)
    lse = q.new_empty(n, L)
    # Reused buffers: fresh allocations for every block would cost page faults.
    scores_buf = q.new_empty(n * min(block_q, L) * min(block_k, S))
    queries_buf = q.new_empty(n * min(block_q, L) * (E + 1))
    acc_buf = q.new_empty(n * min(block_q, L) * (Ev + 1))
    biases: dict[tuple[int, ...], Tensor] = {}  # one causal bias per block shape
    for i0 in range(0, L, block_q):
        i1 = min(i0 + block_q, L)
        rows = i1 - i0
        queries = queries_buf[: n * rows * (E + 1)].view(n, rows, E + 1)  # [q * scale, -m]
        torch.mul(q[:, i0:i1], scale, out=queries[..., :E])
        torch.bmm(queries[..., :E], k[:, :1].transpose(-2, -1), out=queries[..., E:])
        queries[..., E:].neg_()
        acc = acc_buf[: n * rows * (Ev + 1)].view(n, rows, Ev + 1)  # [sum p v, sum p]
        _, end = key_range(i0, i1, L, S, is_causal, None, block_k)
        for j0 in range(0, end, block_k):
            j1 = min(j0 + block_k, end)
            shifted = scores_buf[: n * rows * (j1 - j0)].view(n, rows, j1 - j0)
            torch.bmm(queries, keys_ext[:, j0:j1].transpose(-2, -1), out=shifted)  # s - m
            bias = block_bias(i0, i1, j0, j1, is_causal, None, 0, shifted, biases)
            if bias is not None:  # a causal block that reaches above the diagonal
                shifted.add_(bias)
            shifted.exp_()  # (n, Bq, Bk), unnormalised weights
            if j0 == 0:
                torch.bmm(shifted, values_ext[:, j0:j1], out=acc)
            else:
                acc.baddbmm_(shifted, values_ext[:, j0:j1])
        if bool(torch.isfinite(acc).all()):
            row_sum = acc[..., Ev:]  # (n, Bq, 1)
            torch.div(acc[..., :Ev], row_sum, out=output[:, i0:i1])
            lse[:, i0:i1] = (torch.log(row_sum) - queries[..., E:]).squeeze(-1)
        else:  # exp overflowed somewhere in this block of rows: redo it with rescaling
            output[:, i0:i1], lse[:, i0:i1] = _query_block_rescaling(
                q, k, v, None, 0.0, is_causal, None, scale, i0, i1, block_k
            )
    return output, lse
