"""The passkey experiment's parts (attnlab.bench.passkey): the prompt is exactly as long
as asked with the key where asked, a stretched model shares SmolLM2's weights and changes
only its rotary table and context, bad input is refused by name, and the recorded run is
whole."""

from __future__ import annotations

import pytest
import torch

from attnlab import LinearScaling, ScaledRotaryEmbedding, YarnScaling
from attnlab.bench import load_results
from attnlab.bench.passkey import (
    PASSKEY_FULL,
    SCALINGS,
    passkey_prompt,
    scaling_for,
    stretched,
)
from attnlab.llama import load_smollm2


@pytest.mark.parametrize(("length", "depth"), [(120, 0.0), (200, 0.5), (333, 1.0)])
def test_the_prompt_has_the_length_and_the_key_where_asked(length: int, depth: float) -> None:
    _, tokenizer = load_smollm2()
    ids, answer_start = passkey_prompt(tokenizer, length, depth, key=68217)
    assert ids.shape == (length,) and ids.dtype == torch.int64
    assert tokenizer.decode(ids[answer_start:]) == "68217"
    text = tokenizer.decode(ids[:answer_start])
    assert text.endswith("What is the pass key? The pass key is ")
    _, rest = text.split("\n", 1)
    body = rest.removesuffix("\nWhat is the pass key? The pass key is ")
    where = body.index("The pass key is 68217") / len(body)  # 0: first; near 1: last
    assert abs(where - depth) < 0.2, (depth, where)


def test_stretched_shares_the_weights_and_changes_only_the_rotary() -> None:
    model, _ = load_smollm2()
    longer = stretched(model, LinearScaling(2.0), 16384)
    assert longer.config.context_length == 16384 and model.config.context_length == 8192
    assert isinstance(longer.rotary, ScaledRotaryEmbedding)
    assert longer.rotary.scaling == LinearScaling(2.0) and model.config.rope_scaling is None
    ours, theirs = dict(longer.named_parameters()), dict(model.named_parameters())
    assert ours.keys() == theirs.keys()
    assert all(ours[name].data_ptr() == theirs[name].data_ptr() for name in ours)
    assert not longer.training and not any(p.requires_grad for p in longer.parameters())


def test_scaling_for_names_each_kind() -> None:
    assert scaling_for("none", 2.0, 8192) is None
    assert scaling_for("yarn", 2.0, 8192) == YarnScaling(2.0, 8192)
    kinds = [type(scaling_for(method, 2.0, 8192)).__name__ for method in SCALINGS[1:]]
    assert kinds == ["LinearScaling", "DynamicNTKScaling", "YarnScaling", "Llama3Scaling"]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda t: passkey_prompt(t, 100, 1.5, 12345), ValueError, "depth must be"),
        (lambda t: passkey_prompt(t, 100, 0.5, 123), ValueError, "key must be a five-digit"),
        (lambda t: passkey_prompt(t, 30, 0.5, 12345), ValueError, "length must leave room"),
        (lambda t: scaling_for("ntk", 2.0, 8192), ValueError, "method must be one of"),
        (lambda t: scaling_for("linear", 0.5, 8192), ValueError, "factor must be"),
    ],
)
def test_bad_input_is_refused_by_name(call, error, match) -> None:  # type: ignore[no-untyped-def]
    _, tokenizer = load_smollm2()
    with pytest.raises(error, match=match):
        call(tokenizer)


def test_the_recorded_run_is_whole() -> None:
    """Every scaling, one trial per depth, the loss for every bucket of the full length."""
    results = load_results("passkey")
    assert results["quick"] is False and results["config"] == PASSKEY_FULL
    assert results["trained_length"] == 8192 < results["config"]["length"]
    assert [row["method"] for row in results["rows"]] == list(SCALINGS)
    buckets = results["config"]["length"] // results["config"]["bucket"]
    for row in results["rows"]:
        assert len(row["retrieved"]) == len(row["digits_right"]) == len(PASSKEY_FULL["depths"])
        assert len(row["bucket_losses"]) == buckets
