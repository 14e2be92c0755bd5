"""GroupedQueryAttention: equal to Hugging Face's ``LlamaAttention`` (MHA, GQA and MQA,
built from a small random config, nothing downloaded) and to its own explicit backend
with a sliding window."""

from __future__ import annotations

import pytest
import torch
from support import HF_GROUP, hf_llama_attention

from attnlab import GroupedQueryAttention, KVCache


def _hf_forward(attn: torch.nn.Module, x: torch.Tensor, pass_mask: bool) -> torch.Tensor:
    T = x.shape[1]
    cos, sin = attn.rotary(x, torch.arange(T)[None])
    mask = None
    if pass_mask:
        allowed = torch.ones(T, T, dtype=torch.bool).tril()
        mask = torch.zeros(T, T).masked_fill(~allowed, torch.finfo(x.dtype).min)[None, None]
    output, _ = attn(x, position_embeddings=(cos, sin), attention_mask=mask)
    return output


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (4, 1)])  # MHA, GQA, MQA
def test_from_hf_equals_llama_attention(implementation: str, heads: int, kv_heads: int) -> None:
    attn = hf_llama_attention(heads, kv_heads, implementation)
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


@pytest.mark.parametrize(("window", "S", "masked"), [(None, 6, False), (6, 6, False), (3, 6, True)])
def test_one_new_token_needs_a_mask_only_when_a_window_hides_keys(
    window: int | None, S: int, masked: bool
) -> None:
    """A decoding step (one query, the last position) sees every key unless a window cuts."""
    torch.manual_seed(0)
    layer = GroupedQueryAttention(16, 4, 2, window=window).eval()
    attn_mask, is_causal = layer._mask(1, S)
    assert (attn_mask is not None) == masked and not is_causal
    x = torch.randn(1, S, 16)
    cache = KVCache()
    with torch.no_grad():
        layer(x[:, :-1], cache=cache)
        last = layer(x[:, -1:], cache=cache)  # (1, 1, 16): one step through the cache
        torch.testing.assert_close(last, layer(x)[:, -1:])  # the full forward's last row
