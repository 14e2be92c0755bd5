"""Ring attention: one sequence split across the processes of a ``torch.distributed`` group.

Each of ``P`` ranks holds a shard of the sequence (dim ``-2``) of the queries, keys and
values. The key/value shards travel around a ring: at step ``s`` rank ``r`` holds the
keys and values that started on rank ``(r - s) mod P``, computes the attention of its
own queries to them with [`flash_attention`][attnlab.flash_attention] (which also
returns each row's log-sum-exp), sends them on to rank ``r + 1`` and receives the next
ones from rank ``r - 1``. After ``P`` steps every query has seen every key, and the
partial results have been merged with the log-sum-exp rule of
[`merge_partials`][attnlab.ring.merge_partials]: no rank ever holds more than two
key/value shards, so memory per rank grows like ``T / P``. The backward pass runs the
ring again, each key/value shard travelling with the gradients accumulated for it.

Causal attention skips the (query chunk, key chunk) pairs that lie entirely in the
future. With contiguous shards that leaves rank 0 almost idle and the last rank doing
``P`` times more work; the ``"zigzag"`` layout gives rank ``r`` chunks ``r`` and
``2P - 1 - r`` of ``2P``, one early and one late, and every rank the same work.

[`run_local`][attnlab.ring.run_local] (at home in ``attnlab.launch``,
re-exported here for the chapter) starts ``P`` local processes on the gloo backend, bound to
127.0.0.1, so all of this runs on one CPU. ``ring_attention`` uses only
``torch.distributed`` point-to-point calls, which NCCL also provides, but it is tested on
gloo only.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch import Tensor

from ._validation import check_attention_args, format_shape
from .flash import DEFAULT_BLOCK_SIZE, FlashCall, flash_backward, flash_with_lse
from .flash_tiles import TileRule
from .launch import run_local
from .masks import row_shift

__all__ = [
    "Layout",
    "chunk_ids",
    "merge_partials",
    "ring_attention",
    "ring_schedule",
    "run_local",
    "shard",
    "unshard",
]

Layout = Literal["contiguous", "zigzag"]
"""How the sequence is cut: one contiguous shard per rank, or two zig-zag chunks."""

Pair = Literal["full", "diagonal", "skip"]
"""What one (query chunk, key chunk) pair costs: all scores, the causal half, or none."""


# ------------------------------------------------------------------ layout and schedule


def _check_layout(layout: object) -> Layout:
    if layout == "contiguous":
        return "contiguous"
    if layout == "zigzag":
        return "zigzag"
    raise ValueError(f"layout must be 'contiguous' or 'zigzag'; got {layout!r}")


def chunk_ids(rank: int, world_size: int, layout: Layout = "contiguous") -> list[int]:
    """The chunks of the sequence that ``rank`` holds, in order.

    Args:
        rank: The rank, ``0 <= rank < world_size``.
        world_size: ``P``, the number of ranks.
        layout: ``"contiguous"``: the sequence is cut into ``P`` chunks and rank ``r``
            holds chunk ``r``. ``"zigzag"``: ``2P`` chunks, rank ``r`` holds chunks
            ``r`` and ``2P - 1 - r``.

    Returns:
        The chunk indices, ``[r]`` or ``[r, 2P - 1 - r]``.
    """
    if _check_layout(layout) == "contiguous":
        return [rank]
    return [rank, 2 * world_size - 1 - rank]


def _chunks(x: Tensor, size: int) -> list[Tensor]:
    """``x`` cut into consecutive pieces of ``size`` rows (dim ``-2``): views, no copies."""
    return [x[..., i : i + size, :] for i in range(0, x.shape[-2], size)]


def _num_chunks(world_size: int, layout: Layout) -> int:
    return world_size if layout == "contiguous" else 2 * world_size


def shard(x: Tensor, rank: int, world_size: int, layout: Layout = "contiguous") -> Tensor:
    """The part of a full sequence ``x`` that ``rank`` holds.

    Args:
        x: A full sequence, tokens on dim ``-2``.
        rank: The rank.
        world_size: ``P``.
        layout: ``"contiguous"`` or ``"zigzag"`` (see [`chunk_ids`][attnlab.ring.chunk_ids]).

    Returns:
        The rank's chunks, concatenated along dim ``-2``.

    Raises:
        ValueError: ``T`` is not a multiple of the number of chunks.

    Shape:
        x: ``(..., T, E)``; output: ``(..., T / P, E)``.
    """
    n = _num_chunks(world_size, _check_layout(layout))
    T = x.shape[-2]
    if T % n:
        raise ValueError(
            f"x must have a sequence length (dim -2) divisible by {n} chunks; "
            f"got shape {format_shape(x.shape)}"
        )
    chunks = _chunks(x, T // n)
    return torch.cat([chunks[i] for i in chunk_ids(rank, world_size, layout)], dim=-2)


def unshard(shards: list[Tensor], layout: Layout = "contiguous") -> Tensor:
    """Put the ranks' shards (``shards[r]`` from rank ``r``) back in sequence order.

    Shape:
        shards: ``P`` tensors ``(..., T / P, E)``; output: ``(..., T, E)``.
    """
    world_size = len(shards)
    per_rank = len(chunk_ids(0, world_size, layout))
    chunks: dict[int, Tensor] = {}
    for rank, part in enumerate(shards):
        pieces = _chunks(part, part.shape[-2] // per_rank)
        chunks.update(zip(chunk_ids(rank, world_size, layout), pieces, strict=True))
    return torch.cat([chunks[i] for i in sorted(chunks)], dim=-2)


def _pair(query_chunk: int, key_chunk: int, is_causal: bool) -> Pair:
    if not is_causal or key_chunk < query_chunk:
        return "full"
    return "diagonal" if key_chunk == query_chunk else "skip"


def ring_schedule(
    world_size: int, is_causal: bool = False, layout: Layout = "contiguous"
) -> list[list[dict[str, Any]]]:
    """Who computes what at each step of the ring: the plan ``ring_attention`` follows.

    Args:
        world_size: ``P``.
        is_causal: Whether pairs in the future are skipped.
        layout: ``"contiguous"`` or ``"zigzag"``.

    Returns:
        ``schedule[step][rank]``: a dict with ``source`` (the rank whose keys and values
        are visiting), ``pairs`` (``(query chunk, key chunk, kind)`` for each pair, kind
        ``"full"``, ``"diagonal"`` or ``"skip"``) and ``work`` (the scores computed, in
        units of one full ``(T / P, T / P)`` block; a diagonal block counts a half).
    """
    schedule = []
    for step in range(world_size):
        row = []
        for rank in range(world_size):
            source = (rank - step) % world_size
            pairs = [
                (i, j, _pair(i, j, is_causal))
                for i in chunk_ids(rank, world_size, layout)
                for j in chunk_ids(source, world_size, layout)
            ]
            cost = {"full": 1.0, "diagonal": 0.5, "skip": 0.0}
            work = sum(cost[kind] for *_, kind in pairs) / len(pairs)
            row.append({"source": source, "pairs": pairs, "work": work})
        schedule.append(row)
    return schedule


# ---------------------------------------------------------------------- the merge rule


def merge_partials(out_a: Tensor, lse_a: Tensor, out_b: Tensor, lse_b: Tensor) -> Tensor:
    """Merge two attention outputs over disjoint sets of keys into the output over both.

    With ``lse`` the log-sum-exp of each row's scores over its keys, the softmax over
    the union gives each part the weight ``exp(lse_part - lse_union)``: the flash
    forward's rescaling factor ``exp(m_old - m_new)``, applied to normalised outputs.
    A row with no keys in either part (``lse = -inf``) stays zero.

    Args:
        out_a: Output over the first keys.
        lse_a: Its log-sum-exp per row.
        out_b: Output over the second keys.
        lse_b: Its log-sum-exp per row.

    Returns:
        ``torch.cat([output, lse[..., None]], dim=-1)``: the merged output with the merged
        log-sum-exp as its last column.

    Shape:
        out: ``(..., L, Ev)``; lse: ``(..., L)``; returns ``(..., L, Ev + 1)``.
    """
    lse = torch.logaddexp(lse_a, lse_b)  # (..., L)
    shift = row_shift(lse)
    weight_a = torch.exp(lse_a - shift)[..., None]  # (..., L, 1)
    weight_b = torch.exp(lse_b - shift)[..., None]
    return torch.cat([out_a * weight_a + out_b * weight_b, lse[..., None]], dim=-1)


# ------------------------------------------------------------------------- the ring


def _peer(group: dist.ProcessGroup | None, group_rank: int) -> int:
    """The global rank of ``group_rank`` in ``group`` (point-to-point takes global ranks)."""
    return group_rank if group is None else dist.get_global_rank(group, group_rank)


def ring_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    is_causal: bool = False,
    group: dist.ProcessGroup | None = None,
    layout: Layout = "contiguous",
) -> Tensor:
    """Attention over a sequence sharded across the ranks of a process group.

    Call it on every rank of ``group`` with that rank's shard (see
    `attnlab.ring.shard`); it returns the rank's shard of the output, equal to
    the matching rows of ``scaled_dot_product_attention`` on the whole sequence.
    Gradients flow back through the ring: the backward pass runs the ring again,
    and each key/value shard travels with the gradients accumulated for it, which
    reach their own rank after one last step.

    Args:
        query: This rank's queries.
        key: This rank's keys.
        value: This rank's values.
        is_causal: Causal attention over the whole sequence (pairs of chunks entirely
            in the future are skipped, not computed).
        group: The process group; the default group if ``None``.
        layout: How the sequence was sharded: ``"contiguous"`` or ``"zigzag"``.

    Returns:
        This rank's rows of the attention output.

    Raises:
        TypeError: Non-tensor or non-floating inputs, mismatched dtypes.
        ValueError: Mismatched shapes, query and key shards of different lengths, a
            shard that does not split into the layout's chunks, a bad layout.

    Shape:
        query, key: ``(N, ..., T / P, E)``; value: ``(N, ..., T / P, Ev)``;
        output: ``(N, ..., T / P, Ev)``.
    """
    batch, _ = check_attention_args(query, key, value, None, 0.0, is_causal, None)
    layout = _check_layout(layout)
    if query.shape[-2] != key.shape[-2]:
        raise ValueError(
            f"query must have as many rows as key (one shard each); got query shape "
            f"{format_shape(query.shape)} and key shape {format_shape(key.shape)}"
        )
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    per_rank = len(chunk_ids(rank, world_size, layout))
    if query.shape[-2] % per_rank:
        raise ValueError(
            f"query must have a shard length (dim -2) divisible by {per_rank} for layout "
            f"{layout!r}; got shape {format_shape(query.shape)}"
        )
    needs_grad = torch.is_grad_enabled() and (
        query.requires_grad or key.requires_grad or value.requires_grad
    )
    if not needs_grad:
        return _ring_forward(query, key, value, batch, is_causal, group, layout)[0]
    output: Tensor = _RingAttentionFunction.apply(  # type: ignore[no-untyped-call]
        query, key, value, tuple(batch), is_causal, group, layout
    )
    return output


def _exchange(
    tensors: list[Tensor], group: dist.ProcessGroup | None, rank: int, world_size: int
) -> tuple[list[Tensor], list[Any]]:
    """Post sends of ``tensors`` to rank + 1 and receives of as many from rank - 1."""
    received = [torch.empty_like(t) for t in tensors]
    send_to = _peer(group, (rank + 1) % world_size)
    recv_from = _peer(group, (rank - 1) % world_size)
    ops = [dist.P2POp(dist.isend, t, send_to, group) for t in tensors]
    ops += [dist.P2POp(dist.irecv, t, recv_from, group) for t in received]
    return received, dist.batch_isend_irecv(ops)


def _ring_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    batch: tuple[int, ...],
    is_causal: bool,
    group: dist.ProcessGroup | None,
    layout: Layout,
) -> tuple[Tensor, Tensor]:
    """The ring: this rank's output and its rows' log-sum-exp over the whole sequence."""
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    schedule = ring_schedule(world_size, is_causal, layout)
    my_chunks = chunk_ids(rank, world_size, layout)
    size = query.shape[-2] // len(my_chunks)
    query_chunks = dict(zip(my_chunks, _chunks(query, size), strict=True))
    merged: dict[int, Tensor] = {}  # query chunk -> (..., size, Ev + 1): [output, lse]
    keys, values = key.contiguous(), value.contiguous()
    for step in range(world_size):
        pending: list[Any] = []
        if step < world_size - 1:  # pass this shard on while computing with it
            (next_keys, next_values), pending = _exchange([keys, values], group, rank, world_size)
        key_chunks = dict(
            zip(
                chunk_ids(schedule[step][rank]["source"], world_size, layout),
                zip(_chunks(keys, size), _chunks(values, size), strict=True),
                strict=False,
            )
        )
        for i, j, kind in schedule[step][rank]["pairs"]:
            if kind == "skip":
                continue
            k_chunk, v_chunk = key_chunks[j]
            out, lse = flash_with_lse(
                query_chunks[i],
                k_chunk,
                v_chunk,
                attn_mask=None,
                dropout_p=0.0,
                is_causal=kind == "diagonal",
                scale=None,
                block_size=DEFAULT_BLOCK_SIZE,
                window=None,
                batch=batch,
                group=1,
            )
            if i in merged:
                out = merge_partials(merged[i][..., :-1], merged[i][..., -1], out, lse)
                merged[i] = out
            else:
                merged[i] = torch.cat([out, lse[..., None]], dim=-1)
        for request in pending:
            request.wait()
        if pending:
            keys, values = next_keys, next_values
    # Every query chunk sees at least its own diagonal block, so merged has all chunks.
    both = torch.cat([merged[i] for i in my_chunks], dim=-2)  # (..., T / P, Ev + 1)
    return both[..., :-1], both[..., -1]


class _RingAttentionFunction(torch.autograd.Function):
    """Ring forward that saves the output and the log-sum-exp; ring backward."""

    @staticmethod
    def forward(
        ctx: Any,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        batch: tuple[int, ...],
        is_causal: bool,
        group: dist.ProcessGroup | None,
        layout: Layout,
    ) -> Tensor:
        output, lse = _ring_forward(query, key, value, batch, is_causal, group, layout)
        ctx.save_for_backward(query, key, value, output, lse)
        ctx.config = (batch, is_causal, group, layout)
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple[Tensor | None, ...]:
        query, key, value, output, lse = ctx.saved_tensors
        batch, is_causal, group, layout = ctx.config
        grads = _ring_backward(
            query, key, value, output, lse, grad_output, batch, is_causal, group, layout
        )
        return (*grads, None, None, None, None)


def _ring_backward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    output: Tensor,
    lse: Tensor,
    grad_output: Tensor,
    batch: tuple[int, ...],
    is_causal: bool,
    group: dist.ProcessGroup | None,
    layout: Layout,
) -> tuple[Tensor, Tensor, Tensor]:
    """dQ, dK, dV of this rank's shards: the ring again, gradients travelling along.

    At each step the visiting key/value shard comes with the gradients accumulated
    for it so far; this rank adds its queries' share, computed by flash's backward
    from the whole sequence's output and log-sum-exp (so the recomputed weights are
    the final ones), and passes all four on. After the last step the gradients take
    one more step, which brings them home.
    """
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    schedule = ring_schedule(world_size, is_causal, layout)
    my_chunks = chunk_ids(rank, world_size, layout)
    L, E = query.shape[-2:]
    Ev = value.shape[-1]
    size = L // len(my_chunks)
    scale = 1.0 / math.sqrt(E)

    def flat(x: Tensor, width: int) -> Tensor:  # (N, ..., T / P, width) -> (n, T / P, width)
        return x.expand(*batch, L, width).reshape(-1, L, width).contiguous()

    q, o, grad_o = flat(query, E), flat(output, Ev), flat(grad_output, Ev)
    lse_flat = lse.expand(*batch, L).reshape(-1, L)
    grad_q = torch.zeros_like(q)
    keys, values = flat(key, E), flat(value, Ev)
    grad_keys, grad_values = torch.zeros_like(keys), torch.zeros_like(values)
    rows = dict(zip(my_chunks, range(0, L, size), strict=True))  # chunk -> first row
    for step in range(world_size):
        source = schedule[step][rank]["source"]
        key_rows = dict(zip(chunk_ids(source, world_size, layout), range(0, L, size), strict=True))
        for i, j, kind in schedule[step][rank]["pairs"]:
            if kind == "skip":
                continue
            qs, ks = slice(rows[i], rows[i] + size), slice(key_rows[j], key_rows[j] + size)
            rule = TileRule(is_causal=kind == "diagonal")
            call = FlashCall(q[:, qs], keys[:, ks], values[:, ks], rule, scale, *DEFAULT_BLOCK_SIZE)
            dq, dk, dv = flash_backward(call, o[:, qs], lse_flat[:, qs], grad_o[:, qs])
            grad_q[:, qs] += dq
            grad_keys[:, ks] += dk
            grad_values[:, ks] += dv
        if world_size == 1:
            break
        travelling = [grad_keys, grad_values]
        if step < world_size - 1:
            travelling = [keys, values, *travelling]
        received, pending = _exchange(travelling, group, rank, world_size)
        for request in pending:
            request.wait()
        *shards, grad_keys, grad_values = received
        if shards:
            keys, values = shards
    return (
        grad_q.reshape(*batch, L, E).sum_to_size(query.shape),
        grad_keys.reshape(*batch, L, E).sum_to_size(key.shape),
        grad_values.reshape(*batch, L, Ev).sum_to_size(value.shape),
    )
