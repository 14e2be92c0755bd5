"""KVCache: decoding in chunks through the cache equals one full forward, and the cache
holds what Hugging Face's ``DynamicCache`` holds (rotated keys, values)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support import HF_GROUP, hf_llama, hf_llama_attention

from attnlab import GroupedQueryAttention, KVCache


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=5), st.sampled_from([None, 1, 3]))
def test_chunked_decoding_equals_full_forward(sizes: list[int], window: int | None) -> None:
    torch.manual_seed(0)
    module = GroupedQueryAttention(16, num_heads=4, num_kv_heads=2, window=window)
    x = torch.randn(2, sum(sizes), 16)
    cache = KVCache()
    with torch.no_grad():
        full = module(x).output
        chunks = torch.cat(
            [module(part, cache=cache).output for part in x.split(sizes, dim=1)], dim=1
        )
    torch.testing.assert_close(chunks, full, atol=1e-5, rtol=1e-5)
    assert len(cache) == sum(sizes)
    assert cache.nbytes == 2 * 2 * 2 * sum(sizes) * 4 * 4  # keys + values, B, Hkv, T, D, fp32


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (4, 1)])
def test_cached_decoding_equals_hf_dynamic_cache(heads: int, kv_heads: int) -> None:
    """Prompt then single tokens through KVCache and through transformers' DynamicCache:
    the same outputs and the same cached (rotated) keys and values."""
    transformers, _ = hf_llama()
    attn = hf_llama_attention(heads, kv_heads, "sdpa")
    ours = GroupedQueryAttention.from_hf(attn)
    x = torch.randn(2, 8, 24)
    hf_cache, cache = transformers.DynamicCache(config=attn.config), KVCache()
    with torch.no_grad():
        for start, end in [(0, 5), (5, 6), (6, 7), (7, 8)]:
            cos_sin = attn.rotary(x, torch.arange(start, end)[None])
            expected, _ = attn(x[:, start:end], position_embeddings=cos_sin, cache=hf_cache)
            torch.testing.assert_close(
                ours(x[:, start:end], cache=cache).output, expected, atol=1e-5, rtol=1e-5
            )
    torch.testing.assert_close(cache.keys, hf_cache.layers[0].keys)
    torch.testing.assert_close(cache.values, hf_cache.layers[0].values)


def test_append_refuses_a_chunk_unlike_the_cache() -> None:
    """Once keys (1, 2, 3, 4) and values (1, 2, 3, 5) are cached, a chunk must have their
    dtype and, but for T, their shape: each refusal names the tensor that differs."""
    cache = KVCache()
    cache.append(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 5))
    with pytest.raises(
        TypeError, match=r"cached dtype torch\.float32; got torch\.float32 and torch\.float64"
    ):
        cache.append(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 5, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"got torch\.float64 and torch\.float32"):
        cache.append(torch.randn(1, 2, 1, 4, dtype=torch.float64), torch.randn(1, 2, 1, 5))
    with pytest.raises(
        ValueError, match=r"^keys must have shape .* \(1, 2, 3, 4\) but for T; got \(1, 3, 1, 4\)$"
    ):
        cache.append(torch.randn(1, 3, 1, 4), torch.randn(1, 3, 1, 5))
    with pytest.raises(ValueError, match=r"^keys must have shape .* got \(1, 2, 1, 6\)$"):
        cache.append(torch.randn(1, 2, 1, 6), torch.randn(1, 2, 1, 5))
    with pytest.raises(
        ValueError,
        match=r"^values must have shape .* \(1, 2, 3, 5\) but for T; got \(1, 2, 1, 6\)$",
    ):
        cache.append(torch.randn(1, 2, 1, 4), torch.randn(1, 2, 1, 6))
    assert len(cache) == 3
