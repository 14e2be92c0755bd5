"""LlamaConfig: sizes and layer kinds only, checked; its dict is what the page's config holds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from attnlab import LinearScaling, YarnScaling
from attnlab.llama import LAYER_TYPES, DecoderBlock, LlamaConfig, LlamaModel

TINY = LlamaConfig(vocab_size=50, d_model=16, num_layers=3, num_heads=4, num_kv_heads=2, head_dim=4)


def test_default_layer_types_follow_the_window() -> None:
    """None: every layer full_attention, or sliding_attention once a window is set (Mistral)."""
    assert TINY.types() == ("full_attention",) * 3
    assert replace(TINY, sliding_window=8).types() == ("sliding_attention",) * 3
    mixed = replace(
        TINY,
        sliding_window=8,
        layer_types=("sliding_attention", "full_attention") * 1 + ("full_attention",),
    )
    model = LlamaModel(mixed)
    assert [block.kind for block in model.layers] == list(mixed.types())
    assert [block.attn.window for block in model.layers] == [8, None, None]


@pytest.mark.parametrize(
    ("layer_types", "message"),
    [
        (("full_attention",) * 2, "layer_types must be a tuple of num_layers = 3"),
        (["full_attention"] * 3, "layer_types must be a tuple"),
        (("full_attention", "global", "full_attention"), "names of .*got 'global'"),
        (("sliding_attention",) * 3, "sliding_window is None"),
    ],
)
def test_bad_layer_types_are_refused(layer_types: object, message: str) -> None:
    """A wrong length, a name outside LAYER_TYPES, windows without a window size."""
    with pytest.raises(ValueError, match=message):
        replace(TINY, layer_types=layer_types)


def test_to_dict_gives_every_field_with_resolved_layer_types_and_typed_scaling() -> None:
    """JSON-ready: layer_types a list (never None), rope_scaling a dict with its type."""
    data = replace(TINY, rope_scaling=LinearScaling(2.0)).to_dict()
    assert data["layer_types"] == ["full_attention"] * 3 and set(LAYER_TYPES) >= set(
        data["layer_types"]
    )
    assert data["rope_scaling"] == {"type": "linear", "factor": 2.0}
    yarn = replace(TINY, rope_scaling=YarnScaling(4.0, 32)).to_dict()["rope_scaling"]
    assert yarn["type"] == "yarn" and yarn["original_length"] == 32
    assert "attention_bias" not in data and "qk_norm" not in data  # the family's parts now


def test_a_block_built_from_a_config_is_a_llama_layer() -> None:
    """DecoderBlock(config): RMSNorm, grouped-query attention (no biases), RMSNorm, SwiGLU."""
    block = DecoderBlock(TINY)
    assert block.kind == "full_attention" and block.attn.q_proj.bias is None
    assert not hasattr(block, "post_attn_norm") and block.rotary is not None
    with pytest.raises(TypeError, match="parts must be LayerParts or a LlamaConfig"):
        DecoderBlock("llama")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("architecture", "kind"),
    [
        ("llama", "linear_attention"),
        ("qwen35", "sliding_attention"),
        ("gemma3", "linear_attention"),
    ],
)
def test_a_family_refuses_a_layer_kind_it_does_not_build(architecture: str, kind: str) -> None:
    """A kind the family has no parts for is refused by name, not built as another kind."""
    config = LlamaConfig(
        num_layers=2,
        architecture=architecture,
        layer_types=("full_attention", kind),
        sliding_window=4,
    )
    with pytest.raises(
        ValueError, match=rf"layer_types\[1\] must be one of the {architecture} .*{kind}"
    ):
        LlamaModel(config)


def test_every_kind_a_description_lists_is_a_kind_its_family_builds() -> None:
    """The JSON's layer section and the family's LAYER_KINDS agree."""
    from attnlab.llama.families import FAMILIES
    from attnlab.llama.families.description import describe

    for name, module in FAMILIES.items():
        assert set(describe(name)["layer"]) <= set(module.LAYER_KINDS), name
