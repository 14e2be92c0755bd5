"""RollingKVCache: a windowed layer fed in chunks through W slots equals the full
windowed forward (and the full cache), holds a fixed number of bytes, counts every
position, and refuses bad chunks by name; a tiny windowed Llama streams through it."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from attnlab import GroupedQueryAttention, KVCache, RollingKVCache
from attnlab.llama import LlamaConfig, LlamaModel


@pytest.mark.parametrize(("window", "buffer", "chunks"), [
    (4, 4, [1] * 20),
    (4, 4, [3, 1, 5, 2, 9]),
    (5, 8, [2] * 10),
    (6, 6, [13, 1, 1, 4]),  # a first chunk longer than the buffer
])  # fmt: skip
def test_rolling_buffer_equals_the_full_windowed_forward(
    window: int, buffer: int, chunks: list[int]
) -> None:
    torch.manual_seed(0)
    layer = GroupedQueryAttention(16, 4, 2, rope_theta=100.0, window=window).eval()
    x = torch.randn(2, sum(chunks), 16)
    with torch.no_grad():
        whole = layer(x).output
        rolling, full = RollingKVCache(buffer), KVCache()
        parts, sizes = [], []
        for part in x.split(chunks, dim=1):
            parts.append(layer(part, cache=rolling).output)
            torch.testing.assert_close(parts[-1], layer(part, cache=full).output)
            sizes.append(rolling.nbytes)
    torch.testing.assert_close(torch.cat(parts, dim=1), whole)
    assert len(rolling) == len(full) == sum(chunks)
    assert set(sizes) == {2 * 2 * 2 * buffer * 4 * 4}  # keys and values, B Hkv W D, float32
    assert rolling.batch_size == 2


def test_the_slots_hold_the_last_window_positions() -> None:
    cache = RollingKVCache(3)
    for p in range(7):  # position p's key is the number p
        keys, _ = cache.append(torch.full((1, 1, 1, 2), float(p)), torch.zeros(1, 1, 1, 2))
    assert keys[0, 0, :, 0].tolist() == [3.0, 4.0, 5.0, 6.0]  # three held, then the new one
    assert cache.held()[0][0, 0, :, 0].tolist() == [4.0, 5.0, 6.0]
    assert cache.keys is not None and cache.keys[0, 0, :, 0].tolist() == [6.0, 4.0, 5.0]  # p % 3


def test_a_tiny_windowed_llama_streams_through_rolling_caches() -> None:
    """LlamaConfig(sliding_window=5), token by token: the rolling caches' logits equal the
    full caches' and the one-pass windowed forward's; they hold 5 positions of 30."""
    config = LlamaConfig(vocab_size=64, d_model=32, num_layers=3, num_heads=4, num_kv_heads=2,
                         head_dim=8, ffn_dim=48, context_length=64, sliding_window=5)  # fmt: skip
    torch.manual_seed(0)
    model = LlamaModel(config).eval()
    ids = torch.randint(0, 64, (1, 30))
    rolling = [RollingKVCache(5) for _ in model.layers]
    full = model.new_cache()
    with torch.no_grad():
        by_rolling = torch.cat([model(ids[:, t : t + 1], cache=rolling) for t in range(30)], 1)
        by_full = torch.cat([model(ids[:, t : t + 1], cache=full) for t in range(30)], 1)
        whole = model(ids)
    torch.testing.assert_close(by_rolling, by_full)
    torch.testing.assert_close(by_rolling, whole)
    unwindowed = LlamaModel(replace(config, sliding_window=None)).eval()
    unwindowed.load_state_dict(model.state_dict())
    with torch.no_grad():
        assert not torch.allclose(whole, unwindowed(ids))  # the window matters here
    assert sum(c.nbytes for c in rolling) * 6 == sum(c.nbytes for c in full)


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda c: RollingKVCache(0), ValueError, "window must be a positive int"),
        (lambda c: RollingKVCache(2.0), TypeError, "window must be a positive int"),
        (lambda c: c.append(torch.ones(1, 1, 2, 4, dtype=torch.long), torch.ones(1, 1, 2, 4)),
         TypeError, "keys"),
        (lambda c: c.append(torch.ones(1, 1, 2, 4), torch.ones(1, 1, 3, 4)), ValueError,
         "values must have shape"),
        (lambda c: (c.append(torch.ones(1, 1, 2, 4), torch.ones(1, 1, 2, 4)),
                    c.append(torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))),
         ValueError, "keys must match the cache's"),
        (lambda c: c.held(), ValueError, "holds nothing yet"),
    ],
)  # fmt: skip
def test_bad_input_refused_by_name(call, error, words) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=words):
        call(RollingKVCache(4))
