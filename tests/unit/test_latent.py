"""MultiHeadLatentAttention against transformers' DeepseekV3Attention (random tiny configs,
nothing downloaded): whole, with masks, through a cache that holds what DeepSeek's holds
(the latent and the rotated shared key); the absorbed decoding path equal to the naive
one; and the cache's bytes per token against GQA's and MHA's."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from support import HF_GROUP

from attnlab import (
    AttentionHeads,
    LatentCache,
    MultiHeadLatentAttention,
    kv_cache_bytes_per_token,
    mla_cache_bytes_per_token,
)


def deepseek(
    *, q_lora_rank: int | None, interleave: bool, bias: bool, seed: int = 0, heads: int = 4
) -> tuple[Any, Any]:
    """A random DeepseekV3Attention (eager) and its rotary embedding."""
    modeling = pytest.importorskip("transformers.models.deepseek_v3.modeling_deepseek_v3")
    from transformers import DeepseekV3Config

    config = DeepseekV3Config(
        hidden_size=32,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        q_lora_rank=q_lora_rank,
        kv_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=6,
        v_head_dim=5,
        rope_interleave=interleave,
        attention_bias=bias,
        rope_theta=500.0,
    )
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    attn = modeling.DeepseekV3Attention(config, layer_idx=0).eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0.0, 0.3)  # norms' weights too: every parameter matters
    return attn, modeling.DeepseekV3RotaryEmbedding(config)


def causal(T: int, past: int = 0) -> torch.Tensor:
    """transformers' additive causal mask for T queries after ``past`` cached positions."""
    allowed = torch.ones(T, past + T, dtype=torch.bool).tril(past)
    return torch.zeros(T, past + T).masked_fill(~allowed, float("-inf"))[None, None]


CONFIGS = [(None, True, False), (12, False, True), (12, True, False)]


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize(("q_lora_rank", "interleave", "bias"), CONFIGS)
@pytest.mark.parametrize("backend", ["torch", "explicit", "flash"])
def test_from_hf_equals_deepseek_v3_attention(
    q_lora_rank: int | None, interleave: bool, bias: bool, backend: str
) -> None:
    attn, rotary = deepseek(q_lora_rank=q_lora_rank, interleave=interleave, bias=bias)
    ours = MultiHeadLatentAttention.from_hf(attn, backend=backend)  # type: ignore[arg-type]
    x = torch.randn(2, 7, 32)
    with torch.no_grad():
        expected, _ = attn(x, rotary(x, torch.arange(7)[None]), causal(7))
        torch.testing.assert_close(ours(x).output, expected, atol=1e-5, rtol=1e-5)
        ours.absorb = True
        torch.testing.assert_close(ours(x).output, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize(("q_lora_rank", "interleave", "bias"), CONFIGS)
@pytest.mark.parametrize("absorb", [False, True])
def test_cached_decoding_equals_deepseeks_cache(
    q_lora_rank: int | None, interleave: bool, bias: bool, absorb: bool
) -> None:
    """A prompt then single tokens, through LatentCache and transformers' DynamicCache:
    the same outputs, and the caches hold the same latents and rotated shared keys."""
    transformers = pytest.importorskip("transformers")
    attn, rotary = deepseek(q_lora_rank=q_lora_rank, interleave=interleave, bias=bias, seed=1)
    ours = MultiHeadLatentAttention.from_hf(attn, backend="torch")
    ours.absorb = absorb
    x = torch.randn(2, 8, 32)
    hf_cache, cache = transformers.DynamicCache(config=attn.config), LatentCache()
    with torch.no_grad():
        for start, end in [(0, 5), (5, 6), (6, 7), (7, 8)]:
            table = rotary(x, torch.arange(start, end)[None])
            mask = causal(end - start, start)
            expected, _ = attn(x[:, start:end], table, mask, cache=hf_cache)
            got = ours(x[:, start:end], cache=cache).output
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    assert len(cache) == 8
    assert cache.latent is not None and cache.latent.shape == (2, 1, 8, 16)
    torch.testing.assert_close(cache.latent, hf_cache.layers[0].keys)
    assert cache.rope_keys is not None and cache.rope_keys.shape == (2, 1, 8, 8)
    torch.testing.assert_close(cache.rope_keys, hf_cache.layers[0].values)
    assert cache.nbytes == 2 * 8 * (16 + 8) * 4  # B, S, r + Dr, float32


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("backend", ["torch", "explicit"])
def test_padding_masks_equal_deepseeks(backend: str) -> None:
    """attn_mask hiding padding keys (left and right) combined with the causal rule equals
    DeepSeek given the same additive mask, at every real query, naive and absorbed."""
    attn, rotary = deepseek(q_lora_rank=12, interleave=True, bias=False, seed=2)
    ours = MultiHeadLatentAttention.from_hf(attn, backend=backend)  # type: ignore[arg-type]
    x = torch.randn(2, 7, 32)
    real = torch.ones(2, 7, dtype=torch.bool)
    real[0, :3] = False
    real[1, 5:] = False
    allowed = torch.ones(7, 7, dtype=torch.bool).tril() & real[:, None, None, :]
    hf_mask = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(x.dtype).min)
    with torch.no_grad():
        expected, _ = attn(x, rotary(x, torch.arange(7)[None]), hf_mask)
        for absorb in (False, True):
            ours.absorb = absorb
            got = ours(x, attn_mask=real[:, None, None, :], key_padding_mask=None).output
            torch.testing.assert_close(got[real], expected[real], atol=1e-5, rtol=1e-5)
            weights = ours(x, attn_mask=real[:, None, None, :], need_weights=True).attn_weights
            assert weights.shape == (2, 4, 7, 7) and not weights[~allowed.expand(2, 4, 7, 7)].any()


@settings(max_examples=15, deadline=None)
@given(
    st.integers(1, 4),
    st.sampled_from([None, 3, 12]),
    st.integers(1, 3),
    st.lists(st.integers(1, 4), min_size=1, max_size=4),
)
def test_absorbed_decoding_equals_naive(
    heads: int, q_lora_rank: int | None, batch: int, chunks: list[int]
) -> None:
    """Folding W_UK into the queries and W_UV into the output is exact: whole, chunk by
    chunk through one cache each, unbatched, with weights and ablated heads."""
    torch.manual_seed(heads)
    naive = MultiHeadLatentAttention(24, heads, 10, 4, 6, 5, q_lora_rank=q_lora_rank).eval()
    absorbed = MultiHeadLatentAttention(24, heads, 10, 4, 6, 5, q_lora_rank=q_lora_rank).eval()
    absorbed.load_state_dict(naive.state_dict())
    absorbed.absorb = True
    x = torch.randn(batch, sum(chunks), 24)
    with torch.no_grad():
        full = naive(x).output
        torch.testing.assert_close(absorbed(x).output, full, atol=1e-5, rtol=1e-5)
        a, b = naive(x[0], need_weights=True), absorbed(x[0], need_weights=True)
        torch.testing.assert_close(b.output, a.output, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(b.attn_weights, a.attn_weights, atol=1e-5, rtol=1e-5)
        off = naive(x, ablate_heads=[0]).output, absorbed(x, ablate_heads=[0]).output
        torch.testing.assert_close(off[1], off[0], atol=1e-5, rtol=1e-5)
        for layer in (naive, absorbed):
            cache = LatentCache()
            steps = [layer(part, cache=cache).output for part in x.split(chunks, dim=1)]
            torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_mla_is_a_configuration_and_refuses_by_name() -> None:
    assert not set(vars(MultiHeadLatentAttention)) & (
        set(vars(AttentionHeads))
        - {"__init__", "__doc__", "__module__", "__annotations__", "extra_repr"}
    )
    layer = MultiHeadLatentAttention(24, 2, 10, 4, 6, 5)
    with pytest.raises(ValueError, match=r"x must have shape \(T, d_model\)"):
        layer(torch.randn(2, 3, 23))
    with pytest.raises(TypeError, match="self-attention"):
        layer(torch.randn(2, 3, 24), torch.randn(2, 3, 24))
    with pytest.raises(ValueError, match="kv_lora_rank must be a positive int"):
        MultiHeadLatentAttention(24, 2, 0, 4, 6, 5)
    with pytest.raises(TypeError, match="absorb must be a bool"):
        layer.absorb = "yes"  # type: ignore[assignment]
    with pytest.raises(TypeError, match="DeepseekV3Attention"):
        MultiHeadLatentAttention.from_hf(torch.nn.Linear(2, 2))


def test_cache_bytes_per_token_mla_against_gqa_and_mha() -> None:
    """DeepSeek-V2's sizes (d_h = 128, r = 4 d_h, Dr = d_h / 2) at one width: MLA caches
    4.5 d_h numbers per layer, GQA with 2.25 groups' worth; fewer than 8-group GQA, more
    than MQA."""
    layers, d_h = 60, 128
    mla = mla_cache_bytes_per_token(layers, 4 * d_h, d_h // 2)
    assert mla == layers * 576 * 2
    assert mla == 2 * 2.25 * layers * d_h * 2  # keys and values of 2.25 heads, 2 bytes each
    assert 4 * mla == kv_cache_bytes_per_token(layers, 9, d_h)  # 9 heads = 4 x 2.25
    assert kv_cache_bytes_per_token(layers, 1, d_h) < mla < kv_cache_bytes_per_token(layers, 8, d_h)
    assert kv_cache_bytes_per_token(layers, 128, d_h) / mla == pytest.approx(56.9, abs=0.05)
    with pytest.raises(ValueError, match="qk_rope_head_dim must be a positive int"):
        mla_cache_bytes_per_token(2, 4, 0)
