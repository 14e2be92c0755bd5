"""Positions parts: ALiBi's slopes and bias against ones written out by hand (1 to 16
heads, powers of two and not) and against transformers' BLOOM, in MultiHeadAttention and
GroupedQueryAttention, whole and through a cache."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from attnlab import ALiBi, GroupedQueryAttention, KVCache, MultiHeadAttention, alibi_slopes

# Press et al.'s slopes written out: 2^(-8/n) .. 2^(-8) for n a power of two; otherwise
# the slopes of the power of two below, then every other slope of the one above.
WRITTEN_OUT = {
    1: [2**-8],
    2: [2**-4, 2**-8],
    3: [2**-4, 2**-8, 2**-2],
    4: [2**-2, 2**-4, 2**-6, 2**-8],
    6: [2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3],
    8: [2**-1, 2**-2, 2**-3, 2**-4, 2**-5, 2**-6, 2**-7, 2**-8],
    12: [2 ** -(h / 1) for h in range(1, 9)] + [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5],
    16: [2 ** -(h / 2) for h in range(1, 17)],
}


def paper_slopes(H: int) -> list[float]:
    """The ALiBi repository's get_slopes, as published (recursive)."""

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(H).is_integer():
        return power_of_two(H)
    n = 2 ** math.floor(math.log2(H))
    return power_of_two(n) + paper_slopes(2 * n)[0::2][: H - n]


@pytest.mark.parametrize("H", range(1, 17))
def test_slopes_equal_the_papers_rule_and_bloom(H: int) -> None:
    slopes = alibi_slopes(H)
    assert slopes.dtype == torch.float32 and slopes.shape == (H,)
    torch.testing.assert_close(slopes, torch.tensor(paper_slopes(H)))
    if H in WRITTEN_OUT:
        torch.testing.assert_close(slopes, torch.tensor(WRITTEN_OUT[H]))
    bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
    mask = torch.ones(1, 5)
    hf = bloom.build_alibi_tensor(mask, H, torch.float32)  # (H, 1, S): slope * key position
    torch.testing.assert_close(hf[:, 0, 1], slopes)


def test_slopes_refuse_a_bad_head_count() -> None:
    with pytest.raises(ValueError, match="num_heads must be a positive int"):
        alibi_slopes(0)
    with pytest.raises(ValueError, match="positions must have num_heads = 4"):
        GroupedQueryAttention(16, 4, positions=ALiBi(3))


def written_out(q: Tensor, k: Tensor, v: Tensor, H: int, causal: bool) -> Tensor:
    """softmax(q k^T / sqrt(D) - slope_h * (i - j)) v over keys j <= i, by loops."""
    _, _, T, D = q.shape
    slopes = WRITTEN_OUT.get(H) or paper_slopes(H)
    bias = torch.empty(H, T, T)
    for h in range(H):
        for i in range(T):
            for j in range(T):
                hidden = causal and j > i
                bias[h, i, j] = -math.inf if hidden else -slopes[h] * abs(i - j)
    group = H // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(D) + bias, dim=-1) @ v


def heads(x: Tensor, n: int) -> Tensor:
    B, T, width = x.shape
    return x.reshape(B, T, n, width // n).permute(0, 2, 1, 3)


@pytest.mark.parametrize("H", range(1, 17))
def test_alibi_in_multi_head_attention_equals_the_written_out_bias(H: int) -> None:
    torch.manual_seed(H)
    layer = MultiHeadAttention(8, 2 * H, H, causal=True, positions=ALiBi(H)).eval()
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        q, k, v = (heads(w(x), H) for w in (layer.W_query, layer.W_key, layer.W_value))
        context = written_out(q, k, v, H, causal=True)
        expected = layer.out_proj(context.permute(0, 2, 1, 3).reshape(2, 6, 2 * H))
        torch.testing.assert_close(layer(x).output, expected, atol=1e-5, rtol=1e-5)
        cache = KVCache()
        chunks = torch.cat([layer(part, cache=cache).output for part in x.split([4, 1, 1], 1)], 1)
        torch.testing.assert_close(chunks, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", ["torch", "explicit", "flash"])
@pytest.mark.parametrize(("H", "Hkv"), [(8, 2), (12, 4), (12, 12), (6, 3), (5, 1)])
def test_alibi_in_grouped_query_attention_equals_the_written_out_bias(
    backend: str, H: int, Hkv: int
) -> None:
    torch.manual_seed(H + Hkv)
    layer = GroupedQueryAttention(
        4 * H,
        H,
        Hkv,
        positions=ALiBi(H),
        backend=backend,  # type: ignore[arg-type]
    ).eval()
    x = torch.randn(2, 7, 4 * H)
    with torch.no_grad():
        q, k, v = (
            heads(layer.q_proj(x), H),
            heads(layer.k_proj(x), Hkv),
            heads(layer.v_proj(x), Hkv),
        )
        context = written_out(q, k, v, H, causal=True)
        expected = layer.o_proj(context.permute(0, 2, 1, 3).reshape(2, 7, 4 * H))
        torch.testing.assert_close(layer(x).output, expected, atol=1e-5, rtol=1e-5)
        weights = layer(x, need_weights=True).attn_weights  # (B, H, T, T)
        assert torch.allclose(weights.sum(-1), torch.ones(2, H, 7))
        cache = KVCache()
        chunks = torch.cat([layer(part, cache=cache).output for part in x.split([3, 1, 3], 1)], 1)
        torch.testing.assert_close(chunks, expected, atol=1e-5, rtol=1e-5)
        rotary = GroupedQueryAttention(4 * H, H, Hkv).eval()  # the same weights, rotary
        rotary.load_state_dict(layer.state_dict())
        assert not torch.allclose(rotary(x).output, expected, atol=1e-3)


def test_alibi_without_a_causal_mask_penalises_both_ways() -> None:
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 8, 4, positions=ALiBi(4)).eval()
    x = torch.randn(1, 5, 8)
    with torch.no_grad():
        q, k, v = (heads(w(x), 4) for w in (layer.W_query, layer.W_key, layer.W_value))
        expected = layer.out_proj(
            written_out(q, k, v, 4, causal=False).permute(0, 2, 1, 3).reshape(1, 5, 8)
        )
        torch.testing.assert_close(layer(x).output, expected, atol=1e-5, rtol=1e-5)
    assert repr(ALiBi(4)) == "ALiBi(num_heads=4)"
