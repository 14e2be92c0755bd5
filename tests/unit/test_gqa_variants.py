"""GroupedQueryAttention.from_hf of the softmax layers of 2025's open models equals
transformers' own layer, built from a tiny random config (nothing downloaded) and run with
the mask its model builds (transformers' ``create_causal_mask`` or
``create_sliding_window_causal_mask``: the eager code applies a window only through it):

* Qwen3-Next and Qwen3.5 full-attention layers: output gate, (1 + w) q/k norms, rotary on
  the first quarter of each head;
* gpt-oss sliding and full layers: sinks, YaRN; weights equal the eager ones;
* Gemma 3 sliding and global layers: (1 + w) q/k norms, ``query_pre_attn_scalar``, a rotary
  base per layer type, linear scaling on the global one;
* SmolLM3 layers with and without rotary (``no_rope_layers[i] == 1`` means rotary);
* Qwen3's q/k norms (weight w, not 1 + w).

Each whole and chunk by chunk through a KVCache (and a RollingKVCache where a window
bounds it), on every backend, batch 2, 4 query heads sharing 2 key/value heads.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch
from support import HF_GROUP

from attnlab import (
    GroupedQueryAttention,
    KVCache,
    LinearScaling,
    OutputGate,
    PartialRotary,
    Positions,
    RollingKVCache,
    RotaryEmbedding,
    YarnScaling,
)

pytestmark = pytest.mark.xdist_group(HF_GROUP)

T = 11  # tokens: the window (4) and the chunks (4, 1, 6) do not divide it
SIZES = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2}

# family: (config class, its keyword arguments, modelling module, attention, rotary)
FAMILIES: dict[str, tuple[str, dict[str, Any], str, str, str]] = {
    "qwen3_next": (
        "Qwen3NextConfig",
        {"head_dim": 16, "num_hidden_layers": 4},
        "qwen3_next.modeling_qwen3_next",
        "Qwen3NextAttention",
        "Qwen3NextRotaryEmbedding",
    ),
    "qwen3_5": (
        "Qwen3_5TextConfig",
        {"head_dim": 16, "num_hidden_layers": 4},
        "qwen3_5.modeling_qwen3_5",
        "Qwen3_5Attention",
        "Qwen3_5TextRotaryEmbedding",
    ),
    "gpt_oss": (
        "GptOssConfig",
        {
            "head_dim": 8,
            "num_hidden_layers": 2,
            "sliding_window": 4,
            "max_position_embeddings": 256,
            "rope_parameters": {
                "rope_type": "yarn",
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 8,
                "rope_theta": 150000.0,
            },
        },
        "gpt_oss.modeling_gpt_oss",
        "GptOssAttention",
        "GptOssRotaryEmbedding",
    ),
    "gemma3": (
        "Gemma3TextConfig",
        {
            "head_dim": 8,
            "num_hidden_layers": 6,
            "sliding_window": 4,
            "query_pre_attn_scalar": 12,
            "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            },
        },
        "gemma3.modeling_gemma3",
        "Gemma3Attention",
        "Gemma3RotaryEmbedding",
    ),
    "smollm3": (
        "SmolLM3Config",
        {"num_hidden_layers": 4, "pad_token_id": None, "bos_token_id": None, "eos_token_id": None},
        "smollm3.modeling_smollm3",
        "SmolLM3Attention",
        "SmolLM3RotaryEmbedding",
    ),
    "qwen3": (
        "Qwen3Config",
        {"head_dim": 8, "num_hidden_layers": 1},
        "qwen3.modeling_qwen3",
        "Qwen3Attention",
        "Qwen3RotaryEmbedding",
    ),
}


class HFLayer:
    """A seeded transformers attention layer (eager) with random weights everywhere (norm
    weights and sinks too: zeros would hide a w / 1 + w slip), its rotary and mask."""

    def __init__(self, family: str, layer: int) -> None:
        transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")
        config_name, extra, module_name, attn_name, rotary_name = FAMILIES[family]
        modelling = importlib.import_module(f"transformers.models.{module_name}")
        self.config = getattr(transformers, config_name)(**SIZES, **extra)
        self.config._attn_implementation = "eager"
        torch.manual_seed(layer)
        self.attn = getattr(modelling, attn_name)(self.config, layer_idx=layer).eval()
        with torch.no_grad():
            for param in self.attn.parameters():
                param.copy_(torch.randn(param.shape) * 0.3)
        self.rotary = getattr(modelling, rotary_name)(self.config)
        self.layer_type: str = self.config.layer_types[layer]
        self.family = family

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The layer's output and eager weights on ``x`` ``(B, T, d)``, from position 0."""
        masking_utils = importlib.import_module("transformers.masking_utils")
        B, L, _ = x.shape
        position_ids = torch.arange(L)[None].expand(B, L)
        args = (x, position_ids, self.layer_type) if self.family == "gemma3" else (x, position_ids)
        cos, sin = self.rotary(*args)
        build = (
            masking_utils.create_sliding_window_causal_mask
            if self.layer_type == "sliding_attention"
            else masking_utils.create_causal_mask
        )
        mask = build(
            config=self.config,
            inputs_embeds=x,
            attention_mask=torch.ones(B, L, dtype=torch.long),
            cache=None,
            position_ids=position_ids,
        )
        with torch.no_grad():
            output, weights = self.attn(x, position_embeddings=(cos, sin), attention_mask=mask)
        return output, weights


def assert_equal_whole_and_chunked(ours: GroupedQueryAttention, x: torch.Tensor, expected: Any):
    """Every backend, the whole sequence and chunks (4, 1, 6) through a KVCache, to 1e-5;
    through a RollingKVCache of the window's size too where the layer has a window."""
    caches = [KVCache] if ours.window is None else [KVCache, lambda: RollingKVCache(4)]
    with torch.no_grad():
        for backend in ("torch", "explicit", "flash"):
            ours.backend = backend  # type: ignore[assignment]
            torch.testing.assert_close(ours(x).output, expected, atol=1e-5, rtol=1e-5)
            for new_cache in caches:
                cache = new_cache()
                chunks = [ours(part, cache=cache).output for part in x.split([4, 1, 6], dim=1)]
                torch.testing.assert_close(torch.cat(chunks, 1), expected, atol=1e-5, rtol=1e-5)


def _input(seed: int = 0) -> torch.Tensor:
    return torch.randn(2, T, 32, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family", ["qwen3_next", "qwen3_5"])
def test_gated_full_attention_equals_qwen3_next_and_qwen3_5(family: str) -> None:
    """The gate split from q_proj's [q_h | gate_h] rows, (1 + w) norms and rotary on the
    first 4 of 16 features: equal outputs and weights, whole and chunked."""
    hf = HFLayer(family, layer=3)  # layer_types: three linear_attention, then full
    assert hf.layer_type == "full_attention"
    ours = GroupedQueryAttention.from_hf(hf.attn)
    assert isinstance(ours.output_gate, OutputGate) and ours.window is None
    assert isinstance(ours.positions, PartialRotary) and ours.positions.rotary.head_dim == 4
    x = _input()
    expected, hf_weights = hf(x)
    assert_equal_whole_and_chunked(ours, x, expected)
    with torch.no_grad():
        _, weights = ours(x, need_weights=True)
        ungated = GroupedQueryAttention.from_hf(hf.attn)
        ungated.output_gate = None
        assert not torch.allclose(ungated(x).output, expected, atol=1e-2)  # the gate matters
    torch.testing.assert_close(weights, hf_weights, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("layer", "window"), [(0, 4), (1, None)])
def test_gpt_oss_sliding_and_full_layers_with_sinks_and_yarn(layer: int, window: int | None):
    """layer_types alternate sliding (window 4) and full; YaRN read; the weights are the
    eager ones with the sink's column dropped, each row summing to less than one."""
    hf = HFLayer("gpt_oss", layer)
    ours = GroupedQueryAttention.from_hf(hf.attn)
    assert ours.window == window and ours.sinks is not None
    assert isinstance(ours.positions.scaling, YarnScaling)  # type: ignore[union-attr]
    assert ours.positions.scaling.truncate is False  # type: ignore[union-attr]
    x = _input(layer)
    expected, hf_weights = hf(x)
    assert_equal_whole_and_chunked(ours, x, expected)
    with torch.no_grad():
        _, weights = ours(x, need_weights=True)
    assert weights is not None
    torch.testing.assert_close(weights, hf_weights, atol=1e-5, rtol=1e-5)
    row_sums = weights.sum(-1)  # (B, H, T)
    assert bool((row_sums <= 1 + 1e-6).all()) and bool((row_sums < 0.99).any())
    if window is not None:  # the mask carried the window: without it the output differs
        with torch.no_grad():
            ours.window = None
            assert not torch.allclose(ours(x).output, expected, atol=1e-3)


@pytest.mark.parametrize(("layer", "window", "theta"), [(0, 4, 1e4), (5, None, 1e6)])
def test_gemma3_sliding_and_global_layers(layer: int, window: int | None, theta: float):
    """Five sliding layers (base 10 000) to one global (base 10^6, linear scaling 8),
    (1 + w) q/k norms, scores scaled by query_pre_attn_scalar ** -0.5."""
    hf = HFLayer("gemma3", layer)
    ours = GroupedQueryAttention.from_hf(hf.attn)
    assert (ours.window, ours.scale, ours.positions.theta) == (window, 12**-0.5, theta)
    scaling = getattr(ours.positions, "scaling", None)
    assert scaling == (LinearScaling(8.0) if window is None else None)
    x = _input(layer)
    expected, hf_weights = hf(x)
    assert_equal_whole_and_chunked(ours, x, expected)
    with torch.no_grad():
        _, weights = ours(x, need_weights=True)
    torch.testing.assert_close(weights, hf_weights, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("layer", "rotary"), [(0, True), (3, False)])
def test_smollm3_layers_with_and_without_rotary(layer: int, rotary: bool) -> None:
    """no_rope_layers = [1, 1, 1, 0]: 1 means the layer rotates; layer 3 has no positions."""
    hf = HFLayer("smollm3", layer)
    assert hf.config.no_rope_layers == [1, 1, 1, 0]
    ours = GroupedQueryAttention.from_hf(hf.attn)
    assert isinstance(ours.positions, RotaryEmbedding) == rotary
    assert type(ours.positions) is (RotaryEmbedding if rotary else Positions)
    x = _input(layer)
    expected, _ = hf(x)
    assert_equal_whole_and_chunked(ours, x, expected)


def test_qwen3_head_norms_are_read_as_their_own_weight() -> None:
    """Qwen3's q/k RMSNorm multiplies by w itself (Gemma's and Qwen3.5's by 1 + w)."""
    hf = HFLayer("qwen3", 0)
    ours = GroupedQueryAttention.from_hf(hf.attn)
    torch.testing.assert_close(ours.projections.q_norm.weight, hf.attn.q_norm.weight)  # type: ignore[union-attr]
    x = _input()
    expected, _ = hf(x)
    assert_equal_whole_and_chunked(ours, x, expected)


@pytest.mark.parametrize(
    ("setting", "value"), [("attn_logit_softcapping", 50.0), ("use_bidirectional_attention", True)]
)
def test_from_hf_refuses_what_the_layer_does_not_compute(setting: str, value: object) -> None:
    hf = HFLayer("gemma3", 0)
    setattr(hf.attn.config, setting, value)
    with pytest.raises(ValueError, match=f"attn's config sets {setting}"):
        GroupedQueryAttention.from_hf(hf.attn)


def test_from_hf_refuses_a_head_norm_that_is_not_an_rms_norm() -> None:
    hf = HFLayer("qwen3", 0)
    hf.attn.q_norm = torch.nn.LayerNorm(8)
    with pytest.raises(TypeError, match=r"attn.q_norm must compute w \* x / rms\(x\) or"):
        GroupedQueryAttention.from_hf(hf.attn)
