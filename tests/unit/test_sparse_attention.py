"""DeepSeek Sparse Attention: MultiHeadLatentAttention with DeepSeek-V3.2's lightning indexer
against transformers' DeepseekV32Attention (tiny random configs, nothing downloaded, masks
from transformers' own builder): the keys each query keeps, the output with index_topk
below T, whole and chunk by chunk through a cache that keeps the indexer's keys; index_topk
at least T is dense latent attention; and what the indexer saves, counted on the masks."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from support import HF_GROUP

from attnlab import (
    GroupedQueryAttention,
    KVCache,
    LatentCache,
    LightningIndexer,
    MultiHeadLatentAttention,
    sparse_attention_counts,
)

YARN = {  # DeepSeek-V3.2's kind of scaling, with mscale != mscale_all_dim: cos/sin scaled too
    "rope_type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 0.8,
    "original_max_position_embeddings": 64, "beta_fast": 32, "beta_slow": 1, "rope_theta": 1e4,
}  # fmt: skip


def v32(*, topk: int = 4, seed: int = 0, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """A random DeepseekV32Attention (eager) with YaRN, and its rotary embedding; eight
    indexer heads, so that a key scored 0 by all (ReLU) is rare and ties at the cut absent."""
    modeling = pytest.importorskip("transformers.models.deepseek_v32.modeling_deepseek_v32")
    from transformers import DeepseekV32Config

    config = DeepseekV32Config(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=12,
        kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=6, v_head_dim=5,
        index_topk=topk, index_n_heads=8, index_head_dim=16, num_hidden_layers=1,
        rope_parameters=dict(YARN), max_position_embeddings=2560,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    attn = modeling.DeepseekV32Attention(config, layer_idx=0).eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0.0, 0.3)  # norms' weights and k_norm's bias too: every one matters
    return attn.to(dtype), modeling.DeepseekV32RotaryEmbedding(config)


def hf_mask(attn: Any, x: torch.Tensor, positions: torch.Tensor, cache: Any = None) -> Any:
    """transformers' own causal mask for ``x`` at ``positions`` after ``cache``."""
    from transformers.masking_utils import create_causal_mask

    return create_causal_mask(
        config=attn.config, inputs_embeds=x, attention_mask=None, cache=cache,
        position_ids=positions, allow_is_causal_skip=False,
    )  # fmt: skip


def hf_forward(attn: Any, rotary: Any, x: torch.Tensor, start: int = 0, cache: Any = None) -> Any:
    """transformers' layer on ``x`` at positions ``start, start + 1, ...``."""
    positions = torch.arange(start, start + x.shape[1])[None]
    mask = hf_mask(attn, x, positions, cache)
    return attn(x, rotary(x, positions), mask, cache=cache)[0]


def hf_kept(attn: Any, rotary: Any, x: torch.Tensor) -> torch.Tensor:
    """The keys transformers' indexer keeps for each query that the causal rule allows."""
    positions = torch.arange(x.shape[1])[None]
    mask = hf_mask(attn, x, positions)
    q_resid = attn.q_a_layernorm(attn.q_a_proj(x))
    chosen = attn.indexer(x, q_resid, rotary(x, positions), mask[:, 0], positions)
    kept = torch.zeros(mask[:, 0].shape, dtype=torch.bool).scatter(-1, chosen.long(), True)
    return kept & (mask[:, 0] == 0)  # (B, L, S)


def our_kept(layer: MultiHeadLatentAttention, x: torch.Tensor) -> torch.Tensor:
    """The keys the layer's selector keeps, the causal rule included: ``(B, L, S)``."""
    assert layer.selector is not None
    mask = layer.selector(layer, x, None, True, offset=0, table=None, cache=None)
    return mask.squeeze(-3)


def assert_no_ties_at_the_cut(layer: MultiHeadLatentAttention, x: torch.Tensor, k: int) -> None:
    """The k-th and (k+1)-th best scores differ in every row that drops keys (ReLU makes
    exact ties; a tie at the cut would let either key in)."""
    assert isinstance(layer.selector, LightningIndexer)
    scores = layer.selector.index_scores(layer, x)  # (B, L, S)
    T = x.shape[-2]
    allowed = torch.ones(T, T, dtype=torch.bool).tril()
    ranked = scores.masked_fill(~allowed, float("-inf")).sort(dim=-1, descending=True).values
    rows = ranked[:, k:]  # queries 0 .. k - 1 keep every key they may see
    gap = rows[..., k - 1] - rows[..., k]
    assert (gap > 1e-4 * scores.abs().max()).all()


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("backend", ["torch", "explicit", "flash"])
@pytest.mark.parametrize("absorb", [False, True])
def test_from_hf_keeps_transformers_keys_equals_deepseek_v32(backend: str, absorb: bool) -> None:
    """index_topk = 4 < T = 11: the same keys kept per query (checked free of ties), and
    the same output, batched and unbatched, naive and absorbed, on every backend."""
    attn, rotary = v32(topk=4)
    ours = MultiHeadLatentAttention.from_hf(attn, backend=backend)  # type: ignore[arg-type]
    ours.absorb = absorb
    x = torch.randn(2, 11, 32)
    with torch.no_grad():
        assert_no_ties_at_the_cut(ours, x, 4)
        kept = our_kept(ours, x)
        assert torch.equal(kept, hf_kept(attn, rotary, x))
        assert kept.sum(-1).tolist() == [[1, 2, 3] + [4] * 8] * 2  # min(i + 1, 4) keys
        expected = hf_forward(attn, rotary, x)
        torch.testing.assert_close(ours(x).output, expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(ours(x[1]).output, expected[1], atol=1e-5, rtol=1e-5)
        weights = ours(x, need_weights=True).attn_weights
        assert torch.equal(weights > 0, kept[:, None].expand(2, 4, 11, 11))


@pytest.mark.xdist_group(HF_GROUP)
def test_gradients_equal_transformers_and_never_reach_the_indexer() -> None:
    """Backward through the sparse layer: the input's and the projections' gradients equal
    transformers'; the choice of keys is a mask, so the indexer gets none in either."""
    attn, rotary = v32(topk=4, seed=3)
    ours = MultiHeadLatentAttention.from_hf(attn)
    x = torch.randn(2, 11, 32)
    x_hf, x_ours = x.clone().requires_grad_(), x.clone().requires_grad_()
    hf_forward(attn, rotary, x_hf).square().sum().backward()
    ours(x_ours).output.square().sum().backward()
    torch.testing.assert_close(x_ours.grad, x_hf.grad, atol=1e-5, rtol=1e-5)
    for name in ("kv_b_proj", "o_proj", "q_a_proj"):
        ours_grad = getattr(ours, name).weight.grad
        torch.testing.assert_close(ours_grad, getattr(attn, name).weight.grad, atol=1e-5, rtol=1e-5)
    assert ours.selector is not None
    assert all(p.grad is None for p in (*ours.selector.parameters(), *attn.indexer.parameters()))


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("absorb", [False, True])
def test_chunked_through_latent_cache_equals_transformers_cache(absorb: bool) -> None:
    """Chunks of 5, 1, 3 and 2 through a LatentCache and transformers' DynamicCache: the
    same outputs as transformers and as one pass; the cache keeps the indexer's rotated
    keys, equal to transformers', and counts them in nbytes."""
    transformers = pytest.importorskip("transformers")
    attn, rotary = v32(topk=4, seed=1)
    ours = MultiHeadLatentAttention.from_hf(attn)
    ours.absorb = absorb
    x = torch.randn(2, 11, 32)
    hf_cache, cache = transformers.DynamicCache(config=attn.config), LatentCache()
    got, expected, start = [], [], 0
    with torch.no_grad():
        whole = ours(x).output
        for size in (5, 1, 3, 2):
            chunk = x[:, start : start + size]
            expected.append(hf_forward(attn, rotary, chunk, start, hf_cache))
            got.append(ours(chunk, cache=cache).output)
            start += size
    torch.testing.assert_close(torch.cat(got, 1), torch.cat(expected, 1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat(got, 1), whole, atol=1e-5, rtol=1e-5)
    assert cache.index_keys is not None and cache.index_keys.shape == (2, 1, 11, 16)
    torch.testing.assert_close(cache.index_keys[:, 0], hf_cache.layers[0].indexer_keys)
    assert cache.nbytes == 2 * 11 * (16 + 8 + 16) * 4  # B, S, r + Dr + Di, float32


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("topk", [11, 64])
def test_topk_at_least_the_length_equals_dense_latent_attention(topk: int) -> None:
    """With index_topk >= T every key is kept: the output equals dense latent attention of
    the same weights (no selector), whole and chunk by chunk, and transformers' layer."""
    attn, rotary = v32(topk=topk, seed=2)
    sparse = MultiHeadLatentAttention.from_hf(attn)
    dense = MultiHeadLatentAttention.from_hf(attn)
    dense.selector = None
    x = torch.randn(2, 11, 32)
    with torch.no_grad():
        expected = dense(x).output
        torch.testing.assert_close(sparse(x).output, expected, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(hf_forward(attn, rotary, x), expected, atol=1e-5, rtol=1e-5)
        cache = LatentCache()
        steps = [sparse(part, cache=cache).output for part in x.split([4, 1, 6], dim=1)]
        torch.testing.assert_close(torch.cat(steps, 1), expected, atol=1e-6, rtol=1e-6)


@pytest.mark.xdist_group(HF_GROUP)
def test_float64_layer_scores_in_float32_and_keeps_transformers_keys() -> None:
    """A float64 layer: the indexer scores in float32 (as V3.2's), keeps transformers' keys,
    and the outputs agree to float32's rotary precision (both turn in float32)."""
    attn, rotary = v32(topk=4, seed=4, dtype=torch.float64)
    ours = MultiHeadLatentAttention.from_hf(attn)
    x = torch.randn(2, 11, 32, dtype=torch.float64)
    assert isinstance(ours.selector, LightningIndexer)
    with torch.no_grad():
        assert ours.selector.index_scores(ours, x).dtype == torch.float32
        assert_no_ties_at_the_cut(ours, x, 4)
        assert torch.equal(our_kept(ours, x), hf_kept(attn, rotary, x))
        got = ours(x).output
        assert got.dtype == torch.float64
        torch.testing.assert_close(got, hf_forward(attn, rotary, x), atol=1e-6, rtol=1e-6)


def test_counts_match_the_layers_masks() -> None:
    """sparse_attention_counts against the masks a sparse layer builds (one batch row, one
    head): scores = allowed (query, key) cells, keys read = the last query's row."""
    torch.manual_seed(0)
    for T in (3, 4, 5, 11):
        layer = MultiHeadLatentAttention(24, 2, 10, 4, 6, 5, q_lora_rank=8, index_topk=4,
                                         index_n_heads=4, index_head_dim=8)  # fmt: skip
        kept = our_kept(layer, torch.randn(1, T, 24))[0]  # (L, S)
        counts = sparse_attention_counts(T, 4)
        assert counts.sparse_scores == int(kept.sum())
        assert counts.dense_scores == counts.indexer_scores == int(torch.ones(T, T).tril().sum())
        assert (counts.dense_keys_read, counts.sparse_keys_read) == (T, int(kept[-1].sum()))
    at_128k = sparse_attention_counts(131072, 2048)  # DeepSeek-V3.2's index_topk
    assert at_128k.sparse_scores == 2048 * 2049 // 2 + (131072 - 2048) * 2048
    assert at_128k.dense_scores == 131072 * 131073 // 2


def test_bad_inputs_are_refused_by_name() -> None:
    sizes = dict(d_model=24, num_heads=2, kv_lora_rank=10, qk_rope_head_dim=4,
                 qk_nope_head_dim=6, v_head_dim=5)  # fmt: skip
    with pytest.raises(ValueError, match="index_topk must be a positive int"):
        MultiHeadLatentAttention(**sizes, q_lora_rank=8, index_topk=0)
    with pytest.raises(ValueError, match="q_lora_rank must be a positive int with index_topk"):
        MultiHeadLatentAttention(**sizes, index_topk=4)
    with pytest.raises(ValueError, match="index_head_dim must be at least qk_rope_head_dim = 4"):
        MultiHeadLatentAttention(**sizes, q_lora_rank=8, index_topk=4, index_head_dim=2)
    layer = MultiHeadLatentAttention(**sizes, q_lora_rank=8, index_topk=2, index_head_dim=8)
    x = torch.randn(2, 3, 24)
    with pytest.raises(TypeError, match=r"cache must keep the indexer's keys .* got KVCache"):
        layer(x, cache=KVCache())
    filled = LatentCache()
    MultiHeadLatentAttention(**sizes)(x, cache=filled)  # a dense layer keeps no index keys
    with pytest.raises(ValueError, match="cache must hold the indexer's keys of all its 3"):
        layer(x, cache=filled)
    assert len(filled) == 3  # refused before anything was appended
    assert isinstance(layer.selector, LightningIndexer)
    with pytest.raises(ValueError, match=r"x must have shape .* d_model = 24; got shape \(2, 3"):
        layer.selector.index_scores(layer, torch.randn(2, 3, 23))
    with pytest.raises(TypeError, match="layer must be an AttentionHeads whose queries pass"):
        layer.selector.index_scores(GroupedQueryAttention(24, 2), x)
    cache = LatentCache()
    cache.append_index_keys(torch.randn(2, 1, 3, 8))
    with pytest.raises(ValueError, match=r"keys must have the cached index keys' shape"):
        cache.append_index_keys(torch.randn(2, 1, 3, 4))
    with pytest.raises(ValueError, match="num_tokens must be a positive int"):
        sparse_attention_counts(0, 4)


@pytest.mark.xdist_group(HF_GROUP)
def test_from_hf_refuses_glm_dsa_whose_indexer_pairs_neighbours() -> None:
    modeling = pytest.importorskip("transformers.models.glm_moe_dsa.modeling_glm_moe_dsa")
    from transformers import GlmMoeDsaConfig

    config = GlmMoeDsaConfig(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=12,
        kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=6, v_head_dim=5,
        index_n_heads=4, index_head_dim=16, num_hidden_layers=1,
    )  # fmt: skip
    with pytest.raises(TypeError, match=r"indexer must be DeepSeek-V3\.2's .* GlmMoeDsaAttention"):
        MultiHeadLatentAttention.from_hf(modeling.GlmMoeDsaAttention(config, layer_idx=0))
