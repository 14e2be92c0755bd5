"""flash_visited_blocks: the tiles flash attention reads, and only those that hold an
allowed (query, key) pair."""

from __future__ import annotations

from attnlab import flash_visited_blocks, sliding_window_mask


def test_flash_window_skips_blocks() -> None:
    # T = 64, blocks of 8: a window of 8 needs the diagonal block and the one before it
    visited = flash_visited_blocks(64, 64, 8, window=8)
    assert visited[:3] == [(0, 0), (8, 0), (8, 8)]
    assert len(visited) == 1 + 2 * 7
    assert len(flash_visited_blocks(64, 64, 8, is_causal=True)) == 8 * 9 // 2
    assert len(flash_visited_blocks(64, 64, 8)) == 64
    # every block that holds an allowed pair is visited, no other
    mask = sliding_window_mask(64, 64, 8)
    needed = {
        (i0, j0)
        for i0 in range(0, 64, 8)
        for j0 in range(0, 64, 8)
        if mask[i0 : i0 + 8, j0 : j0 + 8].any()
    }
    assert set(visited) == needed
