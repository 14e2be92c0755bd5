"""A paged key/value cache: fixed-size blocks, a block table, prefixes shared.

A dense [`KVCache`][attnlab.KVCache] keeps one contiguous tensor per layer; a batch of
prompts of different lengths is padded to the longest, and two prompts that begin with
the same words (a system prompt, say) each keep their own copy of that beginning.
vLLM's PagedAttention (Kwon et al. 2023) stores the cache the way an operating system
stores memory pages:

* a [`BlockPool`][attnlab.paged_cache.BlockPool] per layer holds ``num_blocks``
  fixed-size blocks of ``block_size`` positions each;
* a sequence's [`PagedKVCache`][attnlab.paged_cache.PagedKVCache] keeps a *block table*,
  the list of its blocks in order: position ``p`` lives in slot ``p % block_size`` of
  block ``table[p // block_size]``; a sequence wastes at most one partly filled block;
* [`fork`][attnlab.paged_cache.PagedKVCache.fork] starts a second sequence that shares
  every block of the first (each block counts its references); when either writes into
  a shared, partly filled block, that block is copied first (*copy on write*), so a
  shared prefix is stored once.

Attention reads a sequence's keys and values through its block table (here gathered
into one tensor; vLLM's kernel reads the blocks in place). The numbers read are the
numbers written, so a model run on a paged cache gives *exactly* the logits it gives on
a dense one.

Shape legend: ``Hkv`` key/value heads, ``D`` head width, ``S`` cached positions, ``T``
new positions; a sequence's keys and values are ``(1, Hkv, S, D)``, as a dense cache's
with batch 1.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._validation import check_floating, check_positive_int, format_shape
from .kv_cache import Cache

__all__ = ["BlockPool", "PagedKVCache", "block_pools", "paged_caches"]


class BlockPool:
    """The blocks of one attention layer's keys and values, shared by every sequence.

    The pool is allocated once (``num_blocks * block_size * Hkv * (D + Dv)`` numbers);
    blocks are handed out by [`allocate`][attnlab.paged_cache.BlockPool.allocate] and
    come back when no sequence refers to them any more.

    Args:
        num_blocks: Blocks in the pool.
        block_size: Positions per block.
        num_kv_heads: Key/value heads ``Hkv``.
        head_dim: Head width ``D``.
        dtype: The cache's number format.
        device: Where the blocks live.
        value_dim: Width of a value, if not ``head_dim``.

    Attributes:
        keys: ``(Hkv, num_blocks * block_size, D)``: slot ``b * block_size + i`` is
            position ``i`` of block ``b``.
        values: The same for the values, ``(Hkv, num_blocks * block_size, Dv)``.
        ref_counts: How many sequences refer to each block (0: free).
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
        *,
        value_dim: int | None = None,
    ) -> None:
        self.num_blocks = check_positive_int("num_blocks", num_blocks)
        self.block_size = check_positive_int("block_size", block_size)
        kv_heads = check_positive_int("num_kv_heads", num_kv_heads)
        width = check_positive_int("head_dim", head_dim)
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch.dtype; got {dtype!r}")
        value_width = width if value_dim is None else check_positive_int("value_dim", value_dim)
        slots = self.num_blocks * self.block_size
        self.keys = torch.zeros(kv_heads, slots, width, dtype=dtype, device=device)
        self.values = torch.zeros(kv_heads, slots, value_width, dtype=dtype, device=device)
        self.ref_counts = [0] * self.num_blocks
        self._free = list(range(self.num_blocks - 1, -1, -1))  # a stack: block 0 first

    @property
    def block_nbytes(self) -> int:
        """Bytes of one block, keys and values together."""
        width = self.keys.shape[-1] + self.values.shape[-1]
        return self.keys.shape[0] * self.block_size * width * self.keys.itemsize

    @property
    def blocks_in_use(self) -> int:
        """Blocks that some sequence refers to."""
        return self.num_blocks - len(self._free)

    @property
    def nbytes_in_use(self) -> int:
        """Bytes of the blocks in use: the memory the cached sequences need."""
        return self.blocks_in_use * self.block_nbytes

    def allocate(self) -> int:
        """A free block, now referred to once.

        Raises:
            RuntimeError: No block is free.
        """
        if not self._free:
            raise RuntimeError(
                f"the BlockPool is full: all {self.num_blocks} blocks are in use; "
                "free a sequence or make a larger pool"
            )
        block = self._free.pop()
        self.ref_counts[block] = 1
        return block

    def retain(self, block: int) -> None:
        """One more sequence refers to ``block``."""
        self.ref_counts[block] += 1

    def release(self, block: int) -> None:
        """One sequence fewer refers to ``block``; with none left it is free again."""
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:
            self._free.append(block)

    def slots(self, block_table: list[int], start: int, stop: int) -> Tensor:
        """The pool slots of positions ``start .. stop - 1`` of a sequence, ``(stop - start,)``."""
        positions = torch.arange(start, stop)
        blocks = torch.tensor(block_table, dtype=torch.long)[positions // self.block_size]
        return (blocks * self.block_size + positions % self.block_size).to(self.keys.device)


class PagedKVCache(Cache):
    """One sequence's keys and values for one layer, in the blocks of a pool.

    A [`Cache`][attnlab.Cache] for a batch of one, used like a
    [`KVCache`][attnlab.KVCache], its positions in the blocks of a
    [`BlockPool`][attnlab.paged_cache.BlockPool]:
    ``keys, values = cache.append(new_keys, new_values)`` writes the new positions into
    the sequence's blocks (taking new blocks as they fill) and returns every position
    cached, read through the block table.

    Args:
        pool: The layer's blocks.

    Attributes:
        pool: The layer's blocks.
        block_table: The sequence's blocks, in order.

    Shape:
        keys and values: ``(1, Hkv, S, D)``; a chunk: ``(1, Hkv, T, D)``.
    """

    def __init__(self, pool: BlockPool) -> None:
        if not isinstance(pool, BlockPool):
            raise TypeError(f"pool must be a BlockPool; got {type(pool).__name__}")
        self.pool = pool
        self.block_table: list[int] = []
        self._length = 0

    def __len__(self) -> int:
        return self._length

    @property
    def batch_size(self) -> int | None:
        """1 (one sequence), or ``None`` while empty."""
        return 1 if self._length else None

    @property
    def keys(self) -> Tensor | None:
        """Every cached key, read through the block table: ``(1, Hkv, S, D)``."""
        return self._read(self.pool.keys)

    @property
    def values(self) -> Tensor | None:
        """Every cached value, read through the block table: ``(1, Hkv, S, D)``."""
        return self._read(self.pool.values)

    @property
    def nbytes(self) -> int:
        """Bytes of the blocks this sequence refers to (shared ones counted in full)."""
        return len(self.block_table) * self.pool.block_nbytes

    def _read(self, store: Tensor) -> Tensor | None:
        if self._length == 0:
            return None
        return store.index_select(1, self.pool.slots(self.block_table, 0, self._length))[None]

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Write a chunk's keys and values after the cached ones; return all of them.

        A shared block that is only partly filled is copied before it is written
        (copy on write): the other sequences sharing it keep what they had.

        Args:
            keys: The new positions' keys, ``(1, Hkv, T, D)``.
            values: The new positions' values, ``(1, Hkv, T, D)``.

        Returns:
            ``(keys, values)`` of every position so far, ``(1, Hkv, S + T, D)``.

        Raises:
            TypeError: Non-floating tensors, or a dtype other than the pool's.
            ValueError: A shape other than ``(1, Hkv, T, D)`` with the pool's sizes.
            RuntimeError: The pool has too few free blocks.
        """
        keys = check_floating("keys", keys)
        values = check_floating("values", values)
        pool = self.pool
        kv_heads = pool.keys.shape[0]
        for name, x, width in (
            ("keys", keys, pool.keys.shape[-1]),
            ("values", values, pool.values.shape[-1]),
        ):
            if x.dim() != 4 or x.shape[0] != 1 or x.shape[1] != kv_heads or x.shape[3] != width:
                raise ValueError(
                    f"{name} must have shape (1, {kv_heads}, T, {width}) to fit the pool "
                    f"(one sequence); got {format_shape(x.shape)}"
                )
            if x.dtype != pool.keys.dtype:
                raise TypeError(
                    f"{name} must have the pool's dtype {pool.keys.dtype}; got {x.dtype}"
                )
        if values.shape[2] != keys.shape[2]:
            raise ValueError(
                f"values must have as many positions as keys {format_shape(keys.shape)}; "
                f"got {format_shape(values.shape)}"
            )
        start, stop = self._length, self._length + keys.shape[2]
        self._copy_last_block_if_shared()
        while len(self.block_table) * pool.block_size < stop:
            self.block_table.append(pool.allocate())
        slots = pool.slots(self.block_table, start, stop)
        pool.keys[:, slots] = keys[0]
        pool.values[:, slots] = values[0]
        self._length = stop
        return self._read(pool.keys), self._read(pool.values)  # type: ignore[return-value]

    def _copy_last_block_if_shared(self) -> None:
        """Copy on write: a partly filled block that another sequence shares."""
        pool = self.pool
        if self._length % pool.block_size == 0 or pool.ref_counts[self.block_table[-1]] == 1:
            return  # the next position opens a new block, or the block is ours alone
        old, new = self.block_table[-1], pool.allocate()
        src = slice(old * pool.block_size, (old + 1) * pool.block_size)
        dst = slice(new * pool.block_size, (new + 1) * pool.block_size)
        pool.keys[:, dst] = pool.keys[:, src]
        pool.values[:, dst] = pool.values[:, src]
        pool.release(old)
        self.block_table[-1] = new

    def fork(self) -> PagedKVCache:
        """A second sequence that starts with this one's positions, sharing its blocks."""
        other = PagedKVCache(self.pool)
        other.block_table = list(self.block_table)
        other._length = self._length
        for block in self.block_table:
            self.pool.retain(block)
        return other

    def free(self) -> None:
        """Give the sequence's blocks back (shared ones stay with their other sequences)."""
        for block in self.block_table:
            self.pool.release(block)
        self.block_table, self._length = [], 0


def block_pools(
    num_layers: int,
    num_blocks: int,
    block_size: int,
    num_kv_heads: int,
    head_dim: int,
    dtype: torch.dtype = torch.float32,
) -> list[BlockPool]:
    """One [`BlockPool`][attnlab.paged_cache.BlockPool] per layer of a model."""
    layers = check_positive_int("num_layers", num_layers)
    return [BlockPool(num_blocks, block_size, num_kv_heads, head_dim, dtype) for _ in range(layers)]


def paged_caches(pools: list[BlockPool]) -> list[PagedKVCache]:
    """A new sequence's cache: one empty PagedKVCache per layer.

    Pass it as ``model(ids, cache=...)`` in place of ``model.new_cache()``.
    """
    return [PagedKVCache(pool) for pool in pools]
