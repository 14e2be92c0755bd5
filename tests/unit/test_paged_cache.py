"""PagedKVCache: blocks, a block table, shared prefixes; what it returns equals KVCache's."""

from __future__ import annotations

import pytest
import torch

from attnlab import GroupedQueryAttention, KVCache
from attnlab.paged_cache import BlockPool, PagedKVCache, block_pools, paged_caches


def _chunks(
    seed: int, lengths: list[int], width: int = 8, dv: int = 8
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(1, 2, n, width, generator=gen), torch.randn(1, 2, n, dv, generator=gen))
        for n in lengths
    ]


@pytest.mark.parametrize("block_size", [1, 3, 4, 16])
@pytest.mark.parametrize("value_dim", [8, 5])
def test_append_returns_exactly_what_a_dense_cache_returns(block_size: int, value_dim: int) -> None:
    pool = BlockPool(16, block_size, 2, 8, value_dim=value_dim)
    paged, dense = PagedKVCache(pool), KVCache()
    for keys, values in _chunks(0, [5, 1, 1, 7, 2], dv=value_dim):
        got, want = paged.append(keys, values), dense.append(keys, values)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert len(paged) == len(dense)
    assert len(paged.block_table) == -(-16 // block_size)  # ceil: at most one block part-filled
    assert pool.blocks_in_use == len(paged.block_table)
    assert paged.nbytes == len(paged.block_table) * block_size * 2 * (8 + value_dim) * 4
    assert paged.batch_size == 1 and PagedKVCache(pool).batch_size is None


def test_fork_shares_blocks_and_copies_on_write() -> None:
    pool = BlockPool(8, 4, 2, 8)
    first = PagedKVCache(pool)
    (prefix_k, prefix_v), (a_k, a_v), (b_k, b_v) = _chunks(1, [6, 3, 5])
    first.append(prefix_k, prefix_v)  # blocks [0, 1], the second half full
    second = first.fork()
    assert second.block_table == first.block_table and pool.ref_counts[:2] == [2, 2]
    first.append(a_k, a_v)  # writes into shared block 1: copied first
    assert first.block_table[0] == second.block_table[0]  # the full block stays shared
    assert first.block_table[1] != second.block_table[1]
    second.append(b_k, b_v)  # block 1 is second's alone now: written in place
    for cache, (k, v) in ((first, (a_k, a_v)), (second, (b_k, b_v))):
        keys, values = cache.keys, cache.values
        assert keys is not None and values is not None
        assert torch.equal(keys, torch.cat([prefix_k, k], dim=-2))
        assert torch.equal(values, torch.cat([prefix_v, v], dim=-2))
    assert pool.blocks_in_use == 5  # 1 shared + first's 2 + second's 2 (6 + 5 = 11 positions)
    first.free()
    assert pool.blocks_in_use == 3 and len(first) == 0
    second.free()
    assert pool.blocks_in_use == 0 and pool.ref_counts == [0] * 8


def test_in_a_layer_equals_the_dense_cache_token_by_token() -> None:
    torch.manual_seed(0)
    layer = GroupedQueryAttention(32, 4, 2, head_dim=8).eval()
    x = torch.randn(1, 9, 32)
    paged, dense = PagedKVCache(BlockPool(8, 4, 2, 8)), KVCache()
    for chunk in (x[:, :4], x[:, 4:5], x[:, 5:]):
        assert torch.equal(layer(chunk, cache=paged).output, layer(chunk, cache=dense).output)


def test_helpers_make_one_pool_and_one_cache_per_layer() -> None:
    pools = block_pools(3, 4, 2, 2, 8)
    caches = paged_caches(pools)
    assert [c.pool for c in caches] == pools and len({id(p) for p in pools}) == 3


def test_refusals() -> None:
    pool = BlockPool(1, 2, 2, 8)
    cache = PagedKVCache(pool)
    keys, values = _chunks(2, [3])[0]
    with pytest.raises(RuntimeError, match="BlockPool is full"):
        cache.append(keys, values)
    with pytest.raises(ValueError, match=r"keys must have shape \(1, 2, T, 8\)"):
        cache.append(keys[..., :4], values)
    with pytest.raises(ValueError, match="values must have as many positions"):
        cache.append(keys[..., :1, :], values)
    with pytest.raises(TypeError, match="keys must have the pool's dtype"):
        cache.append(keys.double(), values.double())
    with pytest.raises(TypeError, match="pool must be a BlockPool"):
        PagedKVCache("pool")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="block_size"):
        BlockPool(4, 0, 2, 8)
    with pytest.raises(TypeError, match="dtype"):
        BlockPool(4, 2, 2, 8, dtype=torch.int64)
