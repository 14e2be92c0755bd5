"""rope_frequencies against transformers' ROPE_INIT_FUNCTIONS (configs built here, nothing
downloaded), the HF dict reader, refusals by name, and the scaled rotary table against
LlamaRotaryEmbedding with each rope_type."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from support import HF_GROUP, hf_llama

from attnlab import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    ScaledRotaryEmbedding,
    YarnScaling,
    rope_frequencies,
    rope_scaling_from_hf,
)

# (head_dim, base, max_position_embeddings, rope_parameters less rope_theta)
CONFIGS: list[tuple[int, float, int, dict[str, Any]]] = [
    (64, 10000.0, 2048, {"rope_type": "default"}),
    (128, 500000.0, 8192, {"rope_type": "default"}),
    (64, 10000.0, 2048, {"rope_type": "linear", "factor": 2.0}),
    (128, 100000.0, 8192, {"rope_type": "linear", "factor": 4.0}),
    (16, 1000.0, 512, {"rope_type": "linear", "factor": 1.0}),
    (64, 10000.0, 2048, {"rope_type": "dynamic", "factor": 2.0}),
    (128, 500000.0, 4096, {"rope_type": "dynamic", "factor": 8.0}),
    (64, 100000.0, 8192, {"rope_type": "yarn", "factor": 2.0,
                          "original_max_position_embeddings": 8192}),
    (128, 10000.0, 32768, {"rope_type": "yarn", "factor": 4.0,
                           "original_max_position_embeddings": 4096, "beta_fast": 16,
                           "beta_slow": 2}),
    (64, 10000.0, 16384, {"rope_type": "yarn", "factor": 40.0,
                          "original_max_position_embeddings": 4096, "mscale": 1.0,
                          "mscale_all_dim": 0.707}),
    (32, 50000.0, 8192, {"rope_type": "yarn", "factor": 3.0,
                         "original_max_position_embeddings": 2048, "attention_factor": 1.2,
                         "truncate": False}),
    (128, 500000.0, 131072, {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192}),
    (64, 100000.0, 16384, {"rope_type": "llama3", "factor": 2.0, "low_freq_factor": 2.0,
                           "high_freq_factor": 8.0,
                           "original_max_position_embeddings": 8192}),
]  # fmt: skip


def hf_config(head_dim: int, base: float, max_len: int, params: dict[str, Any]) -> Any:
    transformers, _ = hf_llama()
    return transformers.LlamaConfig(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        head_dim=head_dim,
        max_position_embeddings=max_len,
        rope_parameters={**params, "rope_theta": base},
    )


def hf_frequencies(config: Any, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
    _, modeling_llama = hf_llama()
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    kind = config.rope_parameters["rope_type"]
    if kind == "default":
        inv_freq, factor = modeling_llama.LlamaRotaryEmbedding.compute_default_rope_parameters(
            config
        )
    else:
        inv_freq, factor = ROPE_INIT_FUNCTIONS[kind](config, None, seq_len=seq_len)
    return inv_freq, float(factor)


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize(("head_dim", "base", "max_len", "params"), CONFIGS)
def test_rope_frequencies_equal_transformers(
    head_dim: int, base: float, max_len: int, params: dict[str, Any]
) -> None:
    config = hf_config(head_dim, base, max_len, params)
    scaling = rope_scaling_from_hf(params, max_len)
    for seq_len in (None, max_len // 2, 3 * max_len):  # read by dynamic only
        inv_freq, factor = hf_frequencies(config, seq_len)
        ours = rope_frequencies(head_dim, base, scaling, seq_len=seq_len)
        assert torch.equal(ours.inv_freq, inv_freq), (params, seq_len)
        assert ours.attention_factor == factor
        assert ours.inv_freq.dtype == torch.float32 and ours.inv_freq.shape == (head_dim // 2,)


def test_the_kinds_by_hand() -> None:
    """What each kind does, written out: linear divides everything; dynamic changes
    nothing up to the trained length; YaRN and Llama 3 keep the fastest pair and divide
    the slowest; YaRN's attention factor 0.1 ln(s) + 1."""
    plain = rope_frequencies(64, 10000.0).inv_freq
    torch.testing.assert_close(plain, 10000.0 ** -(torch.arange(0, 64, 2) / 64))
    linear = rope_frequencies(64, 10000.0, LinearScaling(4.0)).inv_freq
    torch.testing.assert_close(linear, plain / 4)
    dynamic = DynamicNTKScaling(4.0, original_length=2048)
    assert torch.equal(rope_frequencies(64, 10000.0, dynamic, seq_len=2048).inv_freq, plain)
    longer = rope_frequencies(64, 10000.0, dynamic, seq_len=4096).inv_freq
    assert longer[0] == plain[0] and bool((longer[1:] < plain[1:]).all())
    for kind in (YarnScaling(4.0, original_length=2048), Llama3Scaling(4.0, original_length=2048)):
        inv_freq, _ = rope_frequencies(64, 10000.0, kind)
        assert inv_freq[0] == plain[0]
        torch.testing.assert_close(inv_freq[-1], plain[-1] / 4)
    assert rope_frequencies(64, 10000.0, YarnScaling(4.0, 2048)).attention_factor == (
        pytest.approx(0.1 * math.log(4.0) + 1)
    )


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: rope_frequencies(63, 10000.0), ValueError, "head_dim must be even"),
        (lambda: rope_frequencies(64.0, 10000.0), TypeError, "head_dim must be a positive int"),
        (lambda: rope_frequencies(64, 1.0), ValueError, "base must be a finite number > 1.0"),
        (lambda: rope_frequencies(64, 1e4, {"rope_type": "linear"}), TypeError, "scaling must be"),
        (lambda: rope_frequencies(64, 1e4, seq_len=0), ValueError, "seq_len must be a positive"),
        (lambda: LinearScaling(0.5), ValueError, "factor must be a finite number >= 1.0; got 0.5"),
        (lambda: LinearScaling("2"), TypeError, "factor must be"),
        (lambda: DynamicNTKScaling(2.0, 0), ValueError, "original_length must be a positive"),
        (lambda: YarnScaling(2.0, 4096, beta_fast=1.0), ValueError, "beta_fast must be"),
        (lambda: YarnScaling(2.0, 4096, truncate="no"), TypeError, "truncate must be"),
        (lambda: Llama3Scaling(8.0, 4.0, 1.0), ValueError, "high_freq_factor must be"),
        (lambda: rope_scaling_from_hf({"rope_type": "longrope"}, 4096), ValueError, "longrope"),
        (lambda: rope_scaling_from_hf([("rope_type", "linear")], 4096), TypeError, "dict"),
    ],
)
def test_bad_input_refused_by_name(call: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(").replace(".", r"\.")):
        call()


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("index", [2, 5, 7, 11])  # linear, dynamic, yarn, llama3
def test_scaled_table_equals_llama_rotary_embedding(index: int) -> None:
    """The table a LlamaConfig(rope_scaling=...) model uses: transformers' cos and sin
    (the attention factor included), past the trained length too."""
    head_dim, base, max_len, params = CONFIGS[index]
    _, modeling_llama = hf_llama()
    config = hf_config(head_dim, base, max_len, params)
    hf_rope = modeling_llama.LlamaRotaryEmbedding(config)
    scaling = rope_scaling_from_hf(params, max_len)
    assert scaling is not None
    ours = ScaledRotaryEmbedding(head_dim, base, scaling)
    positions = torch.arange(0, 3 * max_len, 97)
    with torch.no_grad():
        cos, sin = hf_rope(torch.zeros(1, 1, head_dim), positions[None])
    ours_cos, ours_sin = ours.cos_sin(positions)
    torch.testing.assert_close(ours_cos, cos[0])
    torch.testing.assert_close(ours_sin, sin[0])


def test_llama_model_takes_a_scaled_table() -> None:
    """LlamaConfig(rope_scaling=...) gives the model a ScaledRotaryEmbedding; None keeps
    the plain one; the logits change with the scaling."""
    from attnlab.llama import LlamaConfig, LlamaModel

    small = dict(vocab_size=64, d_model=32, num_layers=1, num_heads=4, num_kv_heads=2,
                 head_dim=8, ffn_dim=64, context_length=64)  # fmt: skip
    torch.manual_seed(0)
    plain = LlamaModel(LlamaConfig(**small))  # type: ignore[arg-type]
    scaled = LlamaModel(LlamaConfig(**small, rope_scaling=LinearScaling(2.0)))  # type: ignore[arg-type]
    scaled.load_state_dict(plain.state_dict())
    assert type(plain.rotary).__name__ == "RotaryEmbedding"
    assert isinstance(scaled.rotary, ScaledRotaryEmbedding)
    ids = torch.arange(20)
    with torch.no_grad():
        assert not torch.allclose(plain(ids), scaled(ids))
