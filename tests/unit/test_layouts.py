"""Layer layouts of open models (attnlab.layouts) and the gate-and-sink experiment
(attnlab.bench.gate_sink): the cache counted layer by layer from the package's own
per-token formula, the layouts held against transformers' configs, the experiment's
parts and its recorded run."""

from __future__ import annotations

import pytest
import torch
from support import HF_GROUP

from attnlab import OPEN_MODEL_LAYOUTS, GatedDeltaNet, OutputGate, kv_cache_bytes_per_token
from attnlab.bench import load_results
from attnlab.bench.gate_sink import (
    GateSinkTask,
    SinkProbe,
    held_out_questions,
    make_questions,
    run_gate_sink_experiment,
)
from attnlab.layouts import LinearStateSizes, ModelLayout

T = 32 * 1024


@pytest.mark.parametrize("name", list(OPEN_MODEL_LAYOUTS))
def test_cache_is_the_per_token_formula_layer_by_layer(name: str) -> None:
    """Full layers keep every token, sliding ones min(T, W), linear ones a fixed state:
    its matrix in float32 whatever the model's dtype, its convolution in the model's."""
    layout = OPEN_MODEL_LAYOUTS[name]
    for dtype in (torch.bfloat16, torch.float32):
        per_token = kv_cache_bytes_per_token(1, layout.num_kv_heads, layout.head_dim, dtype)
        expected = 0
        for kind in layout.layer_types:
            if kind == "full_attention":
                expected += per_token * T
            elif kind == "sliding_attention":
                expected += per_token * min(T, layout.window or 0)
            else:
                s = layout.linear
                assert s is not None
                conv = 2 * s.num_key_heads * s.key_head_dim + s.num_value_heads * s.value_head_dim
                state = s.num_value_heads * s.key_head_dim * s.value_head_dim
                expected += 4 * state + dtype.itemsize * conv * (s.conv_kernel - 1)
        bytes_ = layout.cache_bytes(T, dtype)
        assert bytes_["total"] == expected == sum(v for k, v in bytes_.items() if k != "total")
        assert layout.all_full_bytes(T, dtype) == per_token * T * len(layout.layer_types)


def test_linear_state_bytes_are_those_of_a_bf16_gated_deltanet_cache() -> None:
    """A bfloat16 GatedDeltaNet's cache, after a few tokens, holds the bytes that
    LinearStateSizes counts: the recurrent state in float32, the conv state in bf16."""
    sizes = LinearStateSizes(2, 4, 8, 6, 4)
    layer = GatedDeltaNet(32, 2, 4, 8, 6, 4).to(torch.bfloat16)
    cache = layer.new_cache()
    with torch.no_grad():
        layer(torch.randn(2, 5, 32, dtype=torch.bfloat16), cache=cache)
    assert cache.recurrent_state is not None and cache.recurrent_state.dtype == torch.float32
    assert cache.nbytes == 2 * sizes.nbytes(torch.bfloat16)  # batch of 2


def test_the_published_patterns() -> None:
    """Five sliding to one full (Gemma 3), alternating (gpt-oss), three to one (Olmo 3,
    Qwen3.5), every fourth layer unrotated (SmolLM3); Gemma 3 27B: 10 full of 62."""
    counts = {
        name: (layout.count("full_attention"), len(layout.layer_types))
        for name, layout in OPEN_MODEL_LAYOUTS.items()
    }
    assert counts == {
        "Gemma 3 1B": (4, 26),
        "Gemma 3 27B": (10, 62),
        "gpt-oss-20b": (12, 24),
        "SmolLM3-3B": (36, 36),
        "Olmo 3 7B": (8, 32),
        "Qwen3.5 (9B style)": (8, 32),
        "Qwen3-Next 80B-A3B": (12, 48),
    }
    gpt_oss = OPEN_MODEL_LAYOUTS["gpt-oss-20b"].layer_types
    assert gpt_oss[:2] == ("sliding_attention", "full_attention")
    rotary = OPEN_MODEL_LAYOUTS["SmolLM3-3B"].rotary
    assert rotary is not None and [i for i, r in enumerate(rotary) if not r] == list(
        range(3, 36, 4)
    )


@pytest.mark.xdist_group(HF_GROUP)
def test_layouts_agree_with_transformers_configs_of_the_same_checkpoints() -> None:
    """transformers' defaults describe Qwen3-Next-80B-A3B, SmolLM3-3B, Olmo-3-7B and the
    Qwen3.5-9B style; gpt-oss's and Gemma 3's describe other sizes (120b, 4b) of the same
    layer rules, compared on those rules."""
    transformers = pytest.importorskip("transformers")
    for name, config in [
        ("Qwen3-Next 80B-A3B", transformers.Qwen3NextConfig()),
        ("Qwen3.5 (9B style)", transformers.Qwen3_5TextConfig()),
        ("Olmo 3 7B", transformers.Olmo3Config()),
        ("SmolLM3-3B", transformers.SmolLM3Config()),
    ]:
        layout = OPEN_MODEL_LAYOUTS[name]
        assert tuple(config.layer_types) == layout.layer_types, name
        assert config.num_key_value_heads == layout.num_kv_heads, name
        head_dim = (
            getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        )
        assert head_dim == layout.head_dim, name
        assert getattr(config, "sliding_window", None) == layout.window or layout.window is None
    smol = transformers.SmolLM3Config()
    assert tuple(bool(r) for r in smol.no_rope_layers) == OPEN_MODEL_LAYOUTS["SmolLM3-3B"].rotary
    qwen = transformers.Qwen3_5TextConfig()
    assert OPEN_MODEL_LAYOUTS["Qwen3.5 (9B style)"].linear == LinearStateSizes(
        qwen.linear_num_key_heads,
        qwen.linear_num_value_heads,
        qwen.linear_key_head_dim,
        qwen.linear_value_head_dim,
        qwen.linear_conv_kernel_dim,
    )
    oss = transformers.GptOssConfig(num_hidden_layers=24)
    layout = OPEN_MODEL_LAYOUTS["gpt-oss-20b"]
    assert tuple(oss.layer_types) == layout.layer_types and oss.sliding_window == layout.window
    assert (oss.num_key_value_heads, oss.head_dim) == (layout.num_kv_heads, layout.head_dim)
    gemma = transformers.Gemma3TextConfig(num_hidden_layers=62)
    assert tuple(gemma.layer_types) == OPEN_MODEL_LAYOUTS["Gemma 3 27B"].layer_types


def test_a_layout_refuses_unknown_types_and_missing_sizes_by_name() -> None:
    with pytest.raises(ValueError, match=r"layer_types must be in .* got \['global'\]"):
        ModelLayout("m", ("global",), 1, 8)
    with pytest.raises(ValueError, match="a layout with sliding_attention layers needs window"):
        ModelLayout("m", ("sliding_attention",), 1, 8)
    with pytest.raises(ValueError, match="a layout with linear_attention layers needs linear"):
        ModelLayout("m", ("linear_attention",), 1, 8)
    with pytest.raises(ValueError, match="tokens must be a positive int"):
        OPEN_MODEL_LAYOUTS["Gemma 3 1B"].cache_bytes(0)


def test_gate_sink_batches_and_probes() -> None:
    """Questions see the first token and the pairs only; a key question's answer is its
    stored value; the gated probe differs from the plain one by its OutputGate alone."""
    task = GateSinkTask()
    batch = make_questions(task, 4, torch.Generator().manual_seed(0))
    P = task.pairs
    assert batch.tokens.shape == (4, task.length) and batch.answers.shape == (4, task.questions)
    for b in range(4):
        stored = dict(
            zip(
                batch.tokens[b, 1 : 1 + P].tolist(),
                batch.values[b, 1 : 1 + P].tolist(),
                strict=True,
            )
        )
        for q, answer, is_key in zip(
            batch.tokens[b, 1 + P :], batch.answers[b], batch.asks_key[b], strict=True
        ):
            assert bool(is_key) == (1 <= int(q) <= task.num_keys)
            assert not is_key or stored[int(q)] == int(answer)
    mask = task.mask()
    assert mask[1 + P :, : 1 + P].all() and not mask[1 + P :, 1 + P :].any()
    plain, gated = SinkProbe(task, False), SinkProbe(task, True)
    assert isinstance(gated.attention.output_gate, OutputGate)
    assert plain.attention.output_gate is None
    extra = {k for k in gated.state_dict()} - set(plain.state_dict())
    assert extra == {"attention.output_gate.gate_proj.weight"}
    logits, weights = gated(batch, mask, need_weights=True)
    assert logits.shape == (4, task.questions, task.num_values) and weights is not None
    assert held_out_questions(task, 3).tokens.shape == (3, task.length)


def test_gate_sink_quick_run_and_the_recorded_run() -> None:
    """The quick run has the recorded run's fields; in every recorded seed the gate is
    lower on filler questions than on key questions, and hiding the first token costs the
    plain model more than the gated one."""
    quick = run_gate_sink_experiment(quick=True)
    recorded = load_results("gate_sink")
    assert recorded["quick"] is False and recorded["config"]["steps"] == 800
    assert [set(row) for row in quick["rows"]] == [set(row) for row in recorded["rows"][:2]]
    rows = recorded["rows"]
    for plain, gated in zip(rows[::2], rows[1::2], strict=True):
        assert (plain["gated"], gated["gated"], plain["seed"]) == (False, True, gated["seed"])
        assert gated["gate_filler"] < gated["gate_key"] / 2
        cost = {
            r["gated"]: r["filler_loss_without_first"] - r["filler_loss"] for r in (plain, gated)
        }
        assert cost[False] > 3 * cost[True]
        assert plain["key_accuracy"] == gated["key_accuracy"] == 1.0
