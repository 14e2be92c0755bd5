"""Ring attention: one sequence split across the processes of a ``torch.distributed`` group.

Each of ``P`` ranks holds a shard of the sequence (dim ``-2``). The key/value shards
travel around a ring: at step ``s`` rank ``r`` holds those that started on rank
``(r - s) mod P``, attends its own queries to them with flash attention's blocks (which
also give each row's log-sum-exp), and passes them on to rank ``r + 1``. The partial
results merge by [`merge_partials`][attnlab.ring.merge_partials]'s log-sum-exp rule, so
no rank holds more than two key/value shards: memory per rank grows like ``T / P``.

Causal attention skips the chunk pairs entirely in the future; with contiguous shards
that leaves rank 0 almost idle, so the ``"zigzag"`` layout gives rank ``r`` chunks ``r``
and ``2P - 1 - r`` of ``2P``, and every rank the same work.

[`run_local`][attnlab.ring.run_local] (from ``attnlab.launch``) starts ``P`` local gloo
processes on 127.0.0.1, so all of this runs on one CPU. Only point-to-point calls are
used, which NCCL also provides, but it is tested on gloo only.
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
    """The chunks of the sequence that ``rank`` holds: ``[r]`` or ``[r, 2P - 1 - r]``.

    ``"contiguous"`` cuts the sequence into ``P`` chunks, ``"zigzag"`` into ``2P``.
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
    """The part ``(..., T / P, E)`` of a full sequence ``x (..., T, E)`` that ``rank`` holds.

    Its chunks (see [`chunk_ids`][attnlab.ring.chunk_ids]), concatenated along dim ``-2``.

    Raises:
        ValueError: ``T`` is not a multiple of the number of chunks.
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
    """Put the ranks' shards (``shards[r]`` from rank ``r``) back in sequence order."""
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

    ``schedule[step][rank]`` holds ``source`` (the rank whose keys and values are
    visiting), ``pairs`` (``(query chunk, key chunk, kind)``, kind ``"full"``,
    ``"diagonal"`` or ``"skip"``) and ``work`` (scores computed, in full
    ``(T / P, T / P)`` blocks; a diagonal block counts a half).
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

    With ``lse`` each row's log-sum-exp over its keys, the softmax over the union weighs
    each part by ``exp(lse_part - lse_union)``: flash attention's rescaling, applied to
    normalised outputs. A row with no keys in either part stays zero. Returns
    ``(..., L, Ev + 1)``: the merged output, the merged log-sum-exp as its last column.
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

    Call it on every rank of ``group`` (the default group if ``None``) with that rank's
    shard (see [`shard`][attnlab.ring.shard]); it returns the rank's shard of the output,
    equal to the matching rows of ``scaled_dot_product_attention`` on the whole sequence.
    Gradients flow back through the ring: the backward runs the ring again, each
    key/value shard travelling with the gradients accumulated for it.

    Raises:
        TypeError: Non-tensor or non-floating inputs, mismatched dtypes.
        ValueError: Mismatched shapes, query and key shards of different lengths, a
            shard that does not split into the layout's chunks, a bad layout.
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
