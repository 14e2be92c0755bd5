"""Paged and quantised caches inside SmolLM2: paged exactly equal to dense, quantised measured.

A tiny random Llama checks the quantised cache's arithmetic; the real model (loaded once
per process, shared with the other llama tests) checks that a paged cache with a shared
prefix gives bit for bit the dense cache's logits, and that the quantised cache's loss is
the model's when nothing is quantised.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("gguf", reason="the llm extra is not installed")

from attnlab import KVCache
from attnlab.llama import load_smollm2
from attnlab.llama.experiments import long_text, mean_loss
from attnlab.llama.quantized_cache import (
    QuantizedKVCache,
    attention_errors,
    cache_format_loss,
    quantize_dequantize,
    quantized_caches,
)
from attnlab.paged_cache import block_pools, paged_caches
from tests.llama.tiny_llama import TINY, tiny_model

ROW_BYTES = {"f16": 128, "q8_0": 68, "q4_1": 40, "q4_0": 36, "fp8_e4m3": 64}  # a row of 64


def _q8_0(x: torch.Tensor) -> torch.Tensor:
    """GGUF's Q8_0 written out: per 32 numbers a scale max|x| / 127 (stored in float16)
    and int8 codes (rounded against the float32 scale, as ggml does)."""
    blocks = x.reshape(*x.shape[:-1], -1, 32)
    scale = blocks.abs().amax(-1, keepdim=True) / 127
    codes = torch.round(blocks / scale)
    return (codes * scale.half().float()).reshape(x.shape)


def test_q8_0_is_the_formula() -> None:
    x = torch.randn(2, 3, 5, 64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(quantize_dequantize(x, "q8_0"), _q8_0(x), atol=1e-6, rtol=0)


def test_fp8_e4m3_rounds_to_three_mantissa_bits_and_saturates_at_448() -> None:
    x = torch.tensor([[1.0, 1.0625, 1.2, -0.3, 1e-3, 500.0, -1e4, 17.0]])  # any width: no blocks
    # 3 mantissa bits: 1.0625, halfway to 1.125, rounds to even (1.0), 17 to 16; the smallest
    # step is 2**-9 (0.001953125); past 448 the value saturates instead of becoming NaN
    expected = torch.tensor([[1.0, 1.0, 1.25, -0.3125, 2**-9, 448.0, -448.0, 16.0]])
    assert torch.equal(quantize_dequantize(x, "fp8_e4m3"), expected)
    assert torch.equal(quantize_dequantize(x.double(), "fp8_e4m3"), expected.double())


@pytest.mark.parametrize("fmt", list(ROW_BYTES))
def test_bytes_and_error_per_format(fmt: str) -> None:
    x = torch.randn(1, 3, 10, 64, generator=torch.Generator().manual_seed(1))
    cache = QuantizedKVCache(fmt, fmt)  # type: ignore[arg-type]
    keys, _ = cache.append(x, 2 * x)
    assert cache.nbytes == 2 * 3 * 10 * ROW_BYTES[fmt]
    assert torch.equal(keys, quantize_dequantize(x, fmt))  # type: ignore[arg-type]
    error = float((keys - x).norm() / x.norm())
    assert error < {"f16": 1e-3, "q8_0": 0.01, "q4_1": 0.12, "q4_0": 0.15, "fp8_e4m3": 0.05}[fmt]
    assert cache.batch_size == 1 and len(cache) == 10


def test_tiny_model_unquantised_is_the_dense_cache_and_quantised_is_what_it_stores() -> None:
    model = tiny_model()
    ids = torch.arange(12).unsqueeze(0) % TINY.vocab_size
    dense, plain = model.new_cache(), quantized_caches(TINY.num_layers, None, None)
    for chunk in (ids[:, :7], ids[:, 7:8], ids[:, 8:]):
        assert torch.equal(model(chunk, cache=plain), model(chunk, cache=dense))
    assert plain[0].nbytes == dense[0].nbytes


def test_appends_chunk_by_chunk_in_separate_formats() -> None:
    gen = torch.Generator().manual_seed(2)
    cache = QuantizedKVCache("q4_0", None)
    chunks = [
        (torch.randn(2, 1, n, 32, generator=gen), torch.randn(2, 1, n, 32, generator=gen))
        for n in (3, 1)
    ]
    for k, v in chunks:
        keys, values = cache.append(k, v)
    expected_keys = torch.cat([quantize_dequantize(k, "q4_0") for k, _ in chunks], dim=-2)
    assert torch.equal(keys, expected_keys)
    assert torch.equal(values, torch.cat([v for _, v in chunks], dim=-2))  # stored as given
    assert cache.batch_size == 2


def test_refusals() -> None:
    with pytest.raises(ValueError, match="keys_format must be None or one of"):
        QuantizedKVCache("q3_k")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="divisible by 32"):
        QuantizedKVCache().append(torch.randn(1, 1, 2, 8), torch.randn(1, 1, 2, 8))
    cache = QuantizedKVCache()
    cache.append(torch.randn(1, 1, 2, 32), torch.randn(1, 1, 2, 32))
    with pytest.raises(ValueError, match="matching the cache's"):
        cache.append(torch.randn(1, 2, 2, 32), torch.randn(1, 2, 2, 32))
    with pytest.raises(TypeError, match="cached dtype"):
        cache.append(torch.randn(1, 1, 2, 32).double(), torch.randn(1, 1, 2, 32).double())
    with pytest.raises(ValueError, match="fmt must be one of"):
        quantize_dequantize(torch.randn(32), None)  # type: ignore[arg-type]


@pytest.mark.xdist_group("smollm2")
def test_paged_cache_with_a_shared_prefix_gives_the_dense_logits_bit_for_bit() -> None:
    model, tokenizer = load_smollm2()
    c = model.config
    prefix = torch.tensor([tokenizer.encode("The lighthouse keeper climbed the stairs and")])
    endings = [
        torch.tensor([tokenizer.encode(text)])
        for text in (" lit the lamp.", " slept until the morning")
    ]
    pools = block_pools(c.num_layers, 8, 4, c.num_kv_heads, c.head_dim)
    with torch.no_grad():
        dense, paged = model.new_cache(), paged_caches(pools)
        assert torch.equal(model(prefix, cache=paged), model(prefix, cache=dense))
        copies = []
        for cache in dense:
            copy = KVCache()
            copy.append(cache.keys.clone(), cache.values.clone())  # type: ignore[union-attr]
            copies.append(copy)
        forked = [cache.fork() for cache in paged]
        shared_blocks = pools[0].blocks_in_use
        for ending, dense_cache, paged_cache in zip(
            endings, (dense, copies), (paged, forked), strict=True
        ):
            for step in (ending[:, :-1], ending[:, -1:]):  # a chunk, then one token
                assert torch.equal(model(step, cache=paged_cache), model(step, cache=dense_cache))
    T = prefix.shape[1]
    assert shared_blocks == -(-T // 4)
    own = sum(-(-(T + e.shape[1]) // 4) for e in endings) - T // 4  # full prefix blocks: once
    assert pools[0].blocks_in_use == own


@pytest.mark.xdist_group("smollm2")
def test_quantised_cache_loss_on_the_real_model() -> None:
    model, tokenizer = load_smollm2()
    ids = torch.tensor(tokenizer.encode(long_text())[:24])
    with torch.no_grad():
        exact = mean_loss(model(ids), ids)
    assert cache_format_loss(model, ids, None, None) == pytest.approx(exact, abs=1e-5)
    assert cache_format_loss(model, ids, "q8_0", "q8_0") == pytest.approx(exact, abs=0.02)
    rows = attention_errors(model, ids[:12], "q4_0")
    assert len(rows) == 30
    for row in rows:
        assert 0 < row["keys_error"] < 0.3 and 0 < row["values_error"] < 0.3
        assert 0 < row["weights_change_keys"] < 1 and row["output_change_values"] > 0


def test_recorded_cache_formats_run() -> None:
    """The chapter's recorded run: every pair scored, keys the sensitive half at 4 bits."""
    from attnlab.bench import load_results

    results = load_results("cache_formats")
    assert not results["quick"] and results["config"]["T"] == 1024
    rows = {(r["keys"], r["values"]): r for r in results["rows"]}
    base = rows[None, None]["mean_loss"]
    assert rows[None, None]["bytes_per_token"] == 46_080  # 30 layers x 2 x 3 heads x 64 x 4 B
    for fmt in ("q4_0", "q4_1"):
        keys, values = rows[fmt, None]["mean_loss"] - base, rows[None, fmt]["mean_loss"] - base
        assert keys > 3 * values > 0
        assert rows[fmt, fmt]["bytes_per_token"] == 30 * 2 * 3 * {"q4_0": 36, "q4_1": 40}[fmt]
    for fmt, layers in results["layer_errors"].items():
        assert len(layers) == 30, fmt
        keys_out = sum(row["output_change_keys"] for row in layers)
        values_out = sum(row["output_change_values"] for row in layers)
        assert keys_out > values_out
