"""MultiHeadLatentAttention.from_hf of DeepseekV3Attention with YaRN, DeepSeek-V3's real
rotary scaling (tiny random configs, masks from transformers' builder): the frequencies,
the cos/sin factor and the softmax scale's mscale**2 all as transformers has them, whole
and chunk by chunk through a cache, naive and absorbed."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from support import HF_GROUP

from attnlab import (
    LatentCache,
    MultiHeadLatentAttention,
    ScaledRotaryEmbedding,
    YarnScaling,
    rope_scaling_from_hf,
)

V3 = {  # DeepSeek-V3's config.json: rope_scaling and rope_theta
    "rope_type": "yarn", "factor": 40.0, "mscale": 1.0, "mscale_all_dim": 1.0,
    "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1, "rope_theta": 1e4,
}  # fmt: skip
SCALINGS = {
    "deepseek-v3": V3,  # mscale = mscale_all_dim: cos/sin unscaled, the softmax scale x 1.87
    "unequal mscales": {**V3, "factor": 4.0, "mscale": 0.707, "beta_fast": 8},
    "no mscale_all_dim": {**V3, "mscale": None, "mscale_all_dim": None, "rope_theta": 500.0},
}


def deepseek_v3(rope: dict[str, Any], *, interleave: bool, seed: int = 0) -> tuple[Any, Any]:
    """A random DeepseekV3Attention (eager) with ``rope`` as its rope_parameters."""
    modeling = pytest.importorskip("transformers.models.deepseek_v3.modeling_deepseek_v3")
    from transformers import DeepseekV3Config

    config = DeepseekV3Config(
        hidden_size=32, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=12,
        kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=6, v_head_dim=5,
        rope_interleave=interleave, max_position_embeddings=163840,
        rope_parameters={k: v for k, v in rope.items() if v is not None},
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    attn = modeling.DeepseekV3Attention(config, layer_idx=0).eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0.0, 0.3)
    return attn, modeling.DeepseekV3RotaryEmbedding(config)


def hf_forward(attn: Any, rotary: Any, x: torch.Tensor, start: int = 0, cache: Any = None) -> Any:
    """transformers' layer on ``x`` at ``start, start + 1, ...``, masked by its own builder."""
    from transformers.masking_utils import create_causal_mask

    positions = torch.arange(start, start + x.shape[1])[None]
    mask = create_causal_mask(
        config=attn.config, inputs_embeds=x, attention_mask=None, cache=cache,
        position_ids=positions, allow_is_causal_skip=False,
    )  # fmt: skip
    return attn(x, rotary(x, positions), mask, cache=cache)[0]


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("name", list(SCALINGS))
@pytest.mark.parametrize("interleave", [True, False])
def test_from_hf_equals_deepseek_v3_with_yarn(name: str, interleave: bool) -> None:
    """The scaled rotary part and the softmax scale equal transformers'; the outputs are
    equal whole and through a LatentCache in chunks of 4, 1 and 6, naive and absorbed."""
    transformers = pytest.importorskip("transformers")
    attn, rotary = deepseek_v3(SCALINGS[name], interleave=interleave)
    ours = MultiHeadLatentAttention.from_hf(attn)
    assert isinstance(ours.positions, ScaledRotaryEmbedding)
    assert ours.scale == pytest.approx(attn.scaling, rel=1e-12)
    x = torch.randn(2, 11, 32)
    positions = torch.arange(11)
    cos, sin = rotary(x, positions[None])  # (1, T, Dr) each
    torch.testing.assert_close(ours.positions.cos_sin(positions), (cos[0], sin[0]))
    with torch.no_grad():
        expected = hf_forward(attn, rotary, x)
        hf_cache = transformers.DynamicCache(config=attn.config)
        chunked = [
            hf_forward(attn, rotary, x[:, start:end], start, hf_cache)
            for start, end in ((0, 4), (4, 5), (5, 11))
        ]
        torch.testing.assert_close(torch.cat(chunked, 1), expected, atol=1e-5, rtol=1e-5)
        for absorb in (False, True):
            ours.absorb = absorb
            torch.testing.assert_close(ours(x).output, expected, atol=1e-5, rtol=1e-5)
            cache = LatentCache()
            steps = [ours(part, cache=cache).output for part in x.split([4, 1, 6], dim=1)]
            torch.testing.assert_close(torch.cat(steps, 1), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.xdist_group(HF_GROUP)
def test_softmax_factor_is_transformers_yarn_apply_mscale() -> None:
    """YarnScaling.softmax_factor times 1/sqrt(D) is transformers' yarn_apply_mscale: mscale
    of mscale_all_dim, squared; 1 without mscale_all_dim or with factor 1."""
    rope_utils = pytest.importorskip("transformers.modeling_rope_utils")
    for factor, mscale_all_dim in ((40.0, 1.0), (4.0, 0.707), (1.0, 1.0), (8.0, None)):
        rope = {"rope_type": "yarn", "factor": factor, "mscale_all_dim": mscale_all_dim,
                "original_max_position_embeddings": 64}  # fmt: skip
        scaling = rope_scaling_from_hf(rope, 256)
        assert isinstance(scaling, YarnScaling)
        expected = rope_utils.yarn_apply_mscale(rope, 0.125)
        assert 0.125 * scaling.softmax_factor == pytest.approx(expected, rel=1e-12)
    assert YarnScaling(40.0, 4096, mscale_all_dim=1.0).softmax_factor == pytest.approx(
        (0.1 * torch.tensor(40.0).log().item() + 1) ** 2
    )


@pytest.mark.xdist_group(HF_GROUP)
def test_from_hf_refuses_an_unknown_rope_type_by_name() -> None:
    attn, _ = deepseek_v3(V3, interleave=True)
    attn.config.rope_parameters = {"rope_type": "longrope", "rope_theta": 1e4}
    with pytest.raises(ValueError, match="rope_type must be default, linear, dynamic, yarn"):
        MultiHeadLatentAttention.from_hf(attn)
