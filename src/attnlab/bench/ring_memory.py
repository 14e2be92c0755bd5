"""Ring attention's memory per rank (``ring``), measured in local processes."""

from __future__ import annotations

import contextlib
import ctypes
import time
from typing import Any

import torch

from ..launch import run_local
from ..memory import MIB, peak_extra_bytes
from ..ring import chunk_ids, ring_attention

__all__ = ["run_ring_memory"]


def _ring_rank(rank: int, world_size: int, T: int) -> dict[str, float]:
    """One rank of the ring measurement: the peak extra memory of its shards and its call.

    The rank draws its shards of q, k and v and runs causal zig-zag ring attention on
    them; the output is not counted.
    """
    # Big blocks straight from and back to the OS (glibc otherwise keeps freed blocks
    # of a few MiB for reuse), so that the peak resident set follows the live tensors.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD = 64 KiB
    chunk = T // (2 * world_size)

    def shard(seed: int) -> torch.Tensor:
        """This rank's zig-zag shard of one (1, 4, T, 64) tensor, drawn chunk by chunk."""
        out = torch.empty(1, 4, 2 * chunk, 64)  # (B, H, T / P, D)
        for i, c in enumerate(chunk_ids(rank, world_size, "zigzag")):
            gen = torch.Generator().manual_seed(1000 * seed + c)
            out[..., i * chunk : (i + 1) * chunk, :].normal_(generator=gen)
        return out

    def shards_and_attention() -> torch.Tensor:
        q, k, v = shard(0), shard(1), shard(2)
        return ring_attention(q, k, v, is_causal=True, layout="zigzag")

    start = time.perf_counter()
    extra = peak_extra_bytes(shards_and_attention)
    return {
        "peak_mib": extra / MIB,
        "shard_mib": 4 * 2 * chunk * 64 * 4 / MIB,
        "seconds": time.perf_counter() - start,
    }


def run_ring_memory(T: int = 16384, world_sizes: tuple[int, ...] = (1, 2, 4)) -> dict[str, Any]:
    """Peak extra memory per rank of causal zig-zag ring attention, ``P`` local processes.

    Batch 1, 4 heads of 64, float32; each rank measures, with
    ``attnlab.memory.peak_extra_bytes``, its own peak resident memory
    while it draws its shards of q, k and v and runs the ring on them, beyond its
    output and beyond what the process held before (after a warm-up, so the process
    group, gloo's buffers and the thread pools already exist). ``T`` is large enough
    (a shard of 16 MiB at ``P = 1``) that the memory which grows with ``T / P``
    outweighs the few MiB that do not (one block of scores per head).
    """
    runs = []
    for world_size in world_sizes:
        ranks = run_local(_ring_rank, world_size, T, timeout_s=600.0)
        runs.append({"world_size": world_size, "T": T, "ranks": ranks})
    return {
        "note": "recorded on a 2-core machine shared by 8 agents; memory does not depend on load",
        "runs": runs,
    }
