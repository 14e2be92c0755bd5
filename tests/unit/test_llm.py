"""Inside today's LLMs: enable_gqa, sliding windows, rotary, GroupedQueryAttention, KVCache.

References: PyTorch's SDPA (``enable_gqa=True``) and Hugging Face transformers'
``LlamaAttention`` built from a small random config (nothing downloaded).
"""

from __future__ import annotations

import math
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import (
    GroupedQueryAttention,
    KVCache,
    RotaryEmbedding,
    attend,
    flash_attention,
    flash_visited_blocks,
    scaled_dot_product_attention,
    sliding_window_mask,
)

# The tests against Hugging Face's Llama share one worker under --dist loadgroup: importing
# transformers takes seconds, so it happens once per run and only when they run.
HF = pytest.mark.xdist_group("transformers")


def hf() -> tuple[ModuleType, ModuleType]:
    """transformers and its Llama modelling module (skips the test without the hf extra)."""
    transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")
    from transformers.models.llama import modeling_llama

    return transformers, modeling_llama


@st.composite
def gqa_case(draw: st.DrawFn) -> dict[str, object]:
    Hkv = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    return {
        "batch": draw(st.sampled_from([(), (2,)])),
        "Hq": Hkv * group,
        "Hkv": Hkv,
        "L": draw(st.integers(1, 9)),
        "S": draw(st.integers(1, 9)),
        "E": draw(st.sampled_from([2, 4, 8])),
        "mask": draw(st.sampled_from(["none", "causal", "bool", "float"])),
        "block": draw(st.sampled_from([1, 3, (2, 5), 64])),
        "seed": draw(st.integers(0, 1000)),
    }


@settings(max_examples=40, deadline=None)
@given(gqa_case())
def test_enable_gqa_equals_torch_sdpa(case: dict[str, object]) -> None:
    gen = torch.Generator().manual_seed(case["seed"])  # type: ignore[arg-type]
    batch, Hq, Hkv = case["batch"], case["Hq"], case["Hkv"]
    L, S, E = case["L"], case["S"], case["E"]
    q = torch.randn(*batch, Hq, L, E, generator=gen)  # type: ignore[misc]
    k = torch.randn(*batch, Hkv, S, E, generator=gen)  # type: ignore[misc]
    v = torch.randn(*batch, Hkv, S, E + 1, generator=gen)  # type: ignore[misc]
    mask, causal = None, case["mask"] == "causal"
    if case["mask"] == "bool":
        mask = torch.rand(Hq, L, S, generator=gen) > 0.3  # type: ignore[misc]
    elif case["mask"] == "float":
        mask = torch.randn(L, S, generator=gen)  # type: ignore[misc]
    expected = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True
    )
    if mask is not None and mask.dtype == torch.bool:  # torch gives NaN for empty rows
        expected = expected.nan_to_num(0.0)
    explicit = scaled_dot_product_attention(q, k, v, mask, is_causal=causal, enable_gqa=True)
    block: int | tuple[int, int] = case["block"]  # type: ignore[assignment]
    flash = flash_attention(q, k, v, mask, is_causal=causal, block_size=block, enable_gqa=True)
    for backend in ("explicit", "torch", "flash"):
        got = attend(q, k, v, mask, is_causal=causal, backend=backend, enable_gqa=True)
        torch.testing.assert_close(got.nan_to_num(0.0), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(explicit, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(flash, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("window", [None, 3])
@pytest.mark.parametrize("group", [1, 3])
def test_flash_gqa_backward_equals_sdpa_without_repeating_keys(
    group: int, window: int | None
) -> None:
    """enable_gqa's gradients equal SDPA's in float64 (causal, or a window), and the
    forward saves nothing as large as the repeated keys for the backward."""
    gen = torch.Generator().manual_seed(group)
    B, Hkv, L, S, E = 2, 2, 5, 11, 4  # L < S: the queries are the last positions
    q = torch.randn(B, Hkv * group, L, E, generator=gen, dtype=torch.float64)
    k = torch.randn(B, Hkv, S, E, generator=gen, dtype=torch.float64)
    v = torch.randn(B, Hkv, S, E + 1, generator=gen, dtype=torch.float64)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    grad_out = torch.randn(B, Hkv * group, L, E + 1, generator=gen, dtype=torch.float64)
    saved: list[torch.Size] = []
    with torch.autograd.graph.saved_tensors_hooks(
        lambda t: saved.append(t.shape) or t, lambda t: t
    ):
        ours = flash_attention(
            q, k, v, is_causal=window is None, block_size=(2, 3), window=window, enable_gqa=True
        )
    mask = None if window is None else sliding_window_mask(L, S, window)  # end-aligned
    theirs = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=window is None, enable_gqa=True
    )
    torch.testing.assert_close(ours, theirs, atol=1e-9, rtol=0)
    grads = torch.autograd.grad(ours, (q, k, v), grad_out)
    expected = torch.autograd.grad(theirs, (q, k, v), grad_out)
    for name, got, want in zip("qkv", grads, expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-9, rtol=0, msg=name)
    repeated_keys = B * Hkv * group * S * E  # what repeat_kv_heads(k, group) would hold
    assert saved
    if group > 1:
        assert all(shape.numel() < repeated_keys for shape in saved), saved


def test_sliding_window_mask_by_hand() -> None:
    mask = sliding_window_mask(4, 4, 2)
    assert mask.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0], [0, 0, 1, 1]]
    # two new queries after three cached keys: positions 3 and 4, aligned to the end
    assert sliding_window_mask(2, 5, 3).int().tolist() == [[0, 1, 1, 1, 0], [0, 0, 1, 1, 1]]
    assert torch.equal(sliding_window_mask(5, 5, 99), torch.ones(5, 5, dtype=torch.bool).tril())
    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(3, 3, 0)


@pytest.mark.parametrize(
    ("L", "S", "window", "block"),
    [
        (17, 17, 4, 4),
        (17, 17, 1, (3, 5)),
        (6, 20, 7, 4),
        (20, 6, 3, (5, 2)),
        (9, 9, 50, 2),
    ],
)
def test_flash_window_equals_masked_and_torch(
    L: int, S: int, window: int, block: int | tuple[int, int]
) -> None:
    gen = torch.Generator().manual_seed(L * S + window)
    q, k, v = (torch.randn(2, 3, n, 8, generator=gen) for n in (L, S, S))
    mask = sliding_window_mask(L, S, window)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0)
    ours = flash_attention(q, k, v, window=window, block_size=block)
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours, scaled_dot_product_attention(q, k, v, mask))


def test_flash_window_gradients_match_torch() -> None:
    gen = torch.Generator().manual_seed(3)
    q, k, v = (
        torch.randn(2, 2, n, 4, generator=gen, dtype=torch.float64, requires_grad=True)
        for n in (9, 13, 13)
    )
    ours = torch.autograd.grad(flash_attention(q, k, v, window=4, block_size=3).sum(), (q, k, v))
    mask = sliding_window_mask(9, 13, 4)
    theirs = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum(), (q, k, v)
    )
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)


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


def test_rotary_complex_view_equals_rotate_half() -> None:
    rope = RotaryEmbedding(8, theta=100.0)
    x = torch.randn(2, 5, 8)
    positions = torch.arange(3, 8)
    torch.testing.assert_close(rope(x, positions), rope.rotate_complex(x, positions))
    torch.testing.assert_close(rope(x, torch.zeros(5, dtype=torch.long)), x)


def test_rotary_score_depends_on_distance_only() -> None:
    rope = RotaryEmbedding(16)
    q, k = torch.randn(1, 16), torch.randn(1, 16)
    scores = [
        (rope(q, torch.tensor([m])) @ rope(k, torch.tensor([m - 3])).T).item() for m in (3, 10, 100)
    ]
    assert scores == pytest.approx([scores[0]] * 3, abs=1e-4)
    moved = (rope(q, torch.tensor([10])) @ rope(k, torch.tensor([5])).T).item()
    assert not math.isclose(moved, scores[0], abs_tol=1e-3)


@HF
def test_rotary_equals_hf() -> None:
    transformers, modeling_llama = hf()
    config = transformers.LlamaConfig(
        hidden_size=32, num_attention_heads=4, head_dim=8, rope_theta=500000.0
    )
    hf_rope = modeling_llama.LlamaRotaryEmbedding(config)
    x = torch.randn(1, 4, 6, 8)
    positions = torch.arange(6)
    cos, sin = hf_rope(x, positions[None])
    ours_cos, ours_sin = RotaryEmbedding(8, 500000.0).cos_sin(positions)
    torch.testing.assert_close(ours_cos, cos[0])
    torch.testing.assert_close(ours_sin, sin[0])
    expected, _ = modeling_llama.apply_rotary_pos_emb(x, x, cos, sin)
    torch.testing.assert_close(RotaryEmbedding(8, 500000.0)(x, positions), expected)


def _hf_attention(heads: int, kv_heads: int, implementation: str) -> torch.nn.Module:
    transformers, modeling_llama = hf()
    config = transformers.LlamaConfig(
        hidden_size=24,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=6,
        rope_theta=1000.0,
        attention_bias=kv_heads == 2,
    )
    config._attn_implementation = implementation
    torch.manual_seed(heads * 10 + kv_heads)
    attn = modeling_llama.LlamaAttention(config, layer_idx=0).eval()
    attn.rotary = modeling_llama.LlamaRotaryEmbedding(config)
    return attn


def _hf_forward(attn: torch.nn.Module, x: torch.Tensor, pass_mask: bool) -> torch.Tensor:
    T = x.shape[1]
    cos, sin = attn.rotary(x, torch.arange(T)[None])
    mask = None
    if pass_mask:
        allowed = torch.ones(T, T, dtype=torch.bool).tril()
        mask = torch.zeros(T, T).masked_fill(~allowed, torch.finfo(x.dtype).min)[None, None]
    output, _ = attn(x, position_embeddings=(cos, sin), attention_mask=mask)
    return output


@HF
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (4, 1)])  # MHA, GQA, MQA
def test_from_hf_equals_llama_attention(implementation: str, heads: int, kv_heads: int) -> None:
    attn = _hf_attention(heads, kv_heads, implementation)
    ours = GroupedQueryAttention.from_hf(attn)
    assert (ours.num_heads, ours.num_kv_heads, ours.head_dim) == (heads, kv_heads, 6)
    assert ours.rotary.theta == 1000.0
    x = torch.randn(2, 7, 24)
    with torch.no_grad():
        expected = _hf_forward(attn, x, pass_mask=implementation == "eager")
        for backend in ("torch", "explicit", "flash"):
            ours.backend = backend  # type: ignore[assignment]
            torch.testing.assert_close(ours(x), expected, atol=1e-5, rtol=1e-5)
            cache = KVCache()
            chunks = [ours(part, cache=cache) for part in x.split([3, 1, 3], dim=1)]
            torch.testing.assert_close(torch.cat(chunks, dim=1), expected, atol=1e-5, rtol=1e-5)


@HF
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (4, 1)])
def test_cached_decoding_equals_hf_dynamic_cache(heads: int, kv_heads: int) -> None:
    """Prompt then single tokens through KVCache and through transformers' DynamicCache:
    the same outputs and the same cached (rotated) keys and values."""
    transformers, _ = hf()
    attn = _hf_attention(heads, kv_heads, "sdpa")
    ours = GroupedQueryAttention.from_hf(attn)
    x = torch.randn(2, 8, 24)
    hf_cache, cache = transformers.DynamicCache(config=attn.config), KVCache()
    with torch.no_grad():
        for start, end in [(0, 5), (5, 6), (6, 7), (7, 8)]:
            cos_sin = attn.rotary(x, torch.arange(start, end)[None])
            expected, _ = attn(
                x[:, start:end], position_embeddings=cos_sin, past_key_values=hf_cache
            )
            torch.testing.assert_close(
                ours(x[:, start:end], cache=cache), expected, atol=1e-5, rtol=1e-5
            )
    torch.testing.assert_close(cache.keys, hf_cache.layers[0].keys)
    torch.testing.assert_close(cache.values, hf_cache.layers[0].values)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=5), st.sampled_from([None, 1, 3]))
def test_chunked_decoding_equals_full_forward(sizes: list[int], window: int | None) -> None:
    torch.manual_seed(0)
    module = GroupedQueryAttention(16, num_heads=4, num_kv_heads=2, window=window)
    x = torch.randn(2, sum(sizes), 16)
    cache = KVCache()
    with torch.no_grad():
        full = module(x)
        chunks = torch.cat([module(part, cache=cache) for part in x.split(sizes, dim=1)], dim=1)
    torch.testing.assert_close(chunks, full, atol=1e-5, rtol=1e-5)
    assert len(cache) == sum(sizes)
    assert cache.nbytes == 2 * 2 * 2 * sum(sizes) * 4 * 4  # keys + values, B, Hkv, T, D, fp32


def test_window_module_equals_masked_reference() -> None:
    torch.manual_seed(1)
    module = GroupedQueryAttention(16, num_heads=2, window=3, backend="flash")
    x = torch.randn(9, 16)
    with torch.no_grad():
        explicit = GroupedQueryAttention(16, num_heads=2, window=3, backend="explicit")
        explicit.load_state_dict(module.state_dict())
        torch.testing.assert_close(module(x), explicit(x))
        unwindowed = GroupedQueryAttention(16, num_heads=2)
        unwindowed.load_state_dict(module.state_dict())
        assert not torch.allclose(module(x)[5:], unwindowed(x)[5:])
