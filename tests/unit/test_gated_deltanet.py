"""The gated delta rule and Gated DeltaNet against transformers (Qwen3.5, Qwen3-Next; tiny
random configs, nothing downloaded): the recurrent and chunked rules, the implicit
attention matrix in closed form, the layer whole and chunk by chunk through a cache that
holds what transformers' holds."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support import HF_GROUP

from attnlab import (
    GatedDeltaNet,
    GatedDeltaNetCache,
    examples,
    gated_delta_attention_matrix,
    gated_delta_attention_rows,
    gated_delta_rule,
)

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}
B, H, T, DK, DV = 2, 3, 37, 8, 5  # T divisible by none of the chunk sizes but 1


def rule_inputs(dtype: torch.dtype, seed: int = 0, T: int = T) -> dict[str, torch.Tensor]:
    """Random heads-first inputs as a layer makes them: unit keys, g <= 0, beta in (0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    return {
        "query": torch.randn(B, H, T, DK, generator=gen, dtype=dtype),
        "key": F.normalize(torch.randn(B, H, T, DK, generator=gen, dtype=dtype), dim=-1),
        "value": torch.randn(B, H, T, DV, generator=gen, dtype=dtype),
        "g": -F.softplus(torch.randn(B, H, T, generator=gen, dtype=dtype)) / 4,
        "beta": torch.rand(B, H, T, generator=gen, dtype=dtype),
    }


def textbook_rule(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The update written out with outer products, one batch row and head at a time."""
    out = torch.zeros_like(value)
    state = state.clone()
    for b in range(query.shape[0]):
        for h in range(query.shape[1]):
            S = state[b, h]  # (Dk, Dv)
            for t in range(query.shape[2]):
                k, v = key[b, h, t], value[b, h, t]
                S = torch.exp(g[b, h, t]) * S
                S = S + beta[b, h, t] * torch.outer(k, v - S.T @ k)
                out[b, h, t] = S.T @ query[b, h, t] / query.shape[-1] ** 0.5
            state[b, h] = S
    return out, state


def heads_second(x: torch.Tensor) -> torch.Tensor:
    """transformers' rules take (B, T, H, ...)."""
    return x.transpose(1, 2)


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("with_state", [False, True])
def test_rule_equals_transformers_recurrent_and_chunked_rules(with_state: bool) -> None:
    """float32, chunks that divide T or not: transformers' two torch rules, outputs and states."""
    modeling = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    x = rule_inputs(torch.float32, seed=1)
    start = torch.randn(B, H, DK, DV) if with_state else None
    hf = {name: heads_second(t) for name, t in x.items()}
    expected, expected_state = modeling.torch_recurrent_gated_delta_rule(
        **hf, initial_state=start, output_final_state=True
    )
    out, state = gated_delta_rule(
        **x, chunk_size=None, initial_state=start, output_final_state=True
    )
    torch.testing.assert_close(out, heads_second(expected), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(state, expected_state, atol=1e-5, rtol=1e-5)
    for chunk_size in (1, 5, 16, 64):
        expected, expected_state = modeling.torch_chunk_gated_delta_rule(
            **hf, chunk_size=chunk_size, initial_state=start, output_final_state=True
        )
        out, state = gated_delta_rule(
            **x, chunk_size=chunk_size, initial_state=start, output_final_state=True
        )
        torch.testing.assert_close(out, heads_second(expected), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(state, expected_state, atol=1e-5, rtol=1e-5)


def test_recurrent_and_chunked_rules_equal_the_textbook_update() -> None:
    """Every chunk size gives the outer-product update's outputs and state in float64, 1e-10."""
    dtype = torch.float64
    x = rule_inputs(dtype, seed=2)
    start = torch.randn(B, H, DK, DV, dtype=dtype)
    expected, expected_state = textbook_rule(**x, state=start)
    tol = TOL[dtype]
    for chunk_size in (None, 1, 4, 10, 37, 64):
        out, state = gated_delta_rule(
            **x, chunk_size=chunk_size, initial_state=start, output_final_state=True
        )
        assert out.dtype == dtype and state is not None and state.dtype == dtype
        torch.testing.assert_close(out, expected, atol=tol, rtol=tol)
        torch.testing.assert_close(state, expected_state, atol=tol, rtol=tol)


def test_two_calls_carrying_the_state_equal_one() -> None:
    """The final state of the first half, as the second's initial state, continues the sequence."""
    x = rule_inputs(torch.float64, seed=3)
    whole, whole_state = gated_delta_rule(**x, chunk_size=8, output_final_state=True)
    first = {name: t[:, :, :20] for name, t in x.items()}
    second = {name: t[:, :, 20:] for name, t in x.items()}
    out1, state1 = gated_delta_rule(**first, chunk_size=8, output_final_state=True)
    out2, state2 = gated_delta_rule(
        **second, chunk_size=None, initial_state=state1, output_final_state=True
    )
    torch.testing.assert_close(torch.cat([out1, out2], dim=2), whole, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(state2, whole_state, atol=1e-10, rtol=1e-10)
    assert gated_delta_rule(**x)[1] is None  # no state unless asked


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_attention_matrix_is_the_rule_applied_to_the_identity(dtype: torch.dtype) -> None:
    """A in closed form equals the rule's output for values = the T x T identity (so A @ V is
    the rule's output for any V); it is lower triangular; its rows are not probabilities."""
    x = rule_inputs(dtype, seed=4)
    A = gated_delta_attention_matrix(x["query"], x["key"], x["g"], x["beta"])
    assert A.shape == (B, H, T, T) and A.dtype == dtype
    eye = torch.eye(T, dtype=dtype).expand(B, H, T, T)
    by_rule, _ = gated_delta_rule(x["query"], x["key"], eye, x["g"], x["beta"], chunk_size=None)
    tol = TOL[dtype]
    torch.testing.assert_close(A, by_rule, atol=tol, rtol=tol)
    out, _ = gated_delta_rule(**x, chunk_size=16)
    torch.testing.assert_close(A @ x["value"], out, atol=tol, rtol=tol)
    assert not A.triu(1).any()  # causal: exactly zero above the diagonal
    assert (A < 0).any()  # signed
    assert not torch.allclose(A.sum(-1), torch.ones(B, H, T, dtype=dtype))  # not normalised


def test_rule_gradients_match_finite_differences_and_the_recurrent_form() -> None:
    """gradcheck of the chunked rule in float64; its gradients equal the recurrent form's."""
    x = {
        name: t[:1, :2, :7].clone().requires_grad_(True)
        for name, t in rule_inputs(torch.float64, seed=5).items()
    }
    start = torch.randn(1, 2, DK, DV, dtype=torch.float64, requires_grad=True)

    def chunked(*args: torch.Tensor) -> torch.Tensor:
        return gated_delta_rule(*args[:5], chunk_size=3, initial_state=args[5])[0]

    inputs = (*x.values(), start)
    assert torch.autograd.gradcheck(chunked, inputs, fast_mode=True)
    chunk_grads = torch.autograd.grad(chunked(*inputs).sum(), inputs)
    recurrent = gated_delta_rule(*inputs[:5], chunk_size=None, initial_state=start)[0]
    for got, expected in zip(
        chunk_grads, torch.autograd.grad(recurrent.sum(), inputs), strict=True
    ):
        torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-10)


def test_half_precision_is_computed_in_float32() -> None:
    """bfloat16 input: output in bfloat16, state in float32, close to the float32 rule."""
    x = rule_inputs(torch.float32, seed=6)
    out32, _ = gated_delta_rule(**x)
    out16, state = gated_delta_rule(
        **{n: t.bfloat16() for n, t in x.items()}, output_final_state=True
    )
    assert out16.dtype == torch.bfloat16 and state is not None and state.dtype == torch.float32
    torch.testing.assert_close(out16.float(), out32, atol=0.05, rtol=0.05)


BAD_RULE_ARGS = [
    ({"query": torch.zeros(2, 3, 4)}, ValueError, r"query must have shape \(B, H, T, Dk\)"),
    ({"key": torch.zeros(1, 2, 5, 3)}, ValueError, r"key must have shape \(B, H, T, Dk\) = "),
    ({"value": torch.zeros(1, 2, 4, 3)}, ValueError, r"value must have shape \(B, H, T, Dv\)"),
    ({"value": torch.zeros(1, 2, 5, 3, dtype=torch.float64)}, TypeError, "value must have query"),
    ({"key": torch.zeros(1, 2, 5, 4, dtype=torch.int64)}, TypeError, "key must be a floating"),
    ({"g": torch.zeros(1, 2, 4)}, ValueError, r"g must have shape \(B, H, T\) = \(1, 2, 5\)"),
    ({"g": torch.full((1, 2, 5), 0.1)}, ValueError, r"g must be <= 0 .* maximum of 0\.1"),
    ({"g": torch.full((1, 2, 5), -float("inf"))}, ValueError, "g must be finite"),
    ({"beta": torch.zeros(1, 2, 5, 1)}, ValueError, r"beta must have shape \(B, H, T\)"),
    ({"beta": torch.full((1, 2, 5), float("nan"))}, ValueError, "beta must be finite"),
    ({"beta": [0.5] * 5}, TypeError, "beta must be a torch.Tensor"),
    ({"chunk_size": 0}, ValueError, "chunk_size must be a positive int; got 0"),
    ({"chunk_size": 4.0}, TypeError, "chunk_size must be a positive int; got float"),
    (
        {"initial_state": torch.zeros(1, 2, 3, 4)},
        ValueError,
        r"initial_state must have shape \(B, H, Dk, Dv\) = \(1, 2, 4, 3\)",
    ),
    ({"output_final_state": 1}, TypeError, "output_final_state must be a bool"),
]


@pytest.mark.parametrize(("change", "error", "message"), BAD_RULE_ARGS)
def test_rule_refuses_bad_arguments_by_name(
    change: dict[str, Any], error: type[Exception], message: str
) -> None:
    args: dict[str, Any] = {
        "query": torch.zeros(1, 2, 5, 4),
        "key": torch.zeros(1, 2, 5, 4),
        "value": torch.zeros(1, 2, 5, 3),
        "g": torch.zeros(1, 2, 5),
        "beta": torch.zeros(1, 2, 5),
    }
    args.update(change)
    with pytest.raises(error, match=message):
        gated_delta_rule(**args)
    if not {"value", "chunk_size", "initial_state", "output_final_state"} & set(change):
        with pytest.raises(error, match=message):
            gated_delta_attention_matrix(args["query"], args["key"], args["g"], args["beta"])


# --- The layer against transformers ----------------------------------------------------


def hf_layer(kind: str, dtype: torch.dtype, seed: int = 0) -> tuple[Any, Any]:
    """A random Qwen3.5 or Qwen3-Next Gated DeltaNet layer (2 key heads of 8, 4 value heads
    of 12, kernel 4), every parameter drawn at a scale that makes each one matter."""
    transformers = pytest.importorskip("transformers")
    sizes: dict[str, Any] = {
        "hidden_size": 48,
        "num_hidden_layers": 1,
        "layer_types": ["linear_attention"],
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 8,
        "linear_value_head_dim": 12,
        "linear_conv_kernel_dim": 4,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 8,
    }
    if kind == "qwen3_5":
        from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5GatedDeltaNet as Layer

        config = transformers.Qwen3_5TextConfig(**sizes)
    else:
        from transformers.models.qwen3_next.modeling_qwen3_next import (
            Qwen3NextGatedDeltaNet as Layer,
        )

        config = transformers.Qwen3NextConfig(**sizes, num_experts=2, num_experts_per_tok=1)
    torch.manual_seed(seed)
    layer = Layer(config, layer_idx=0).to(dtype).eval()
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.normal_(0.0, 0.3) if name != "A_log" else p.uniform_(-1.0, 1.0)
    return layer, config


KINDS = ["qwen3_5", "qwen3_next"]


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", KINDS)
def test_from_hf_equals_the_layer_with_its_implicit_attention(
    kind: str, dtype: torch.dtype
) -> None:
    """The output equals transformers' (which runs its rule in float32, hence 1e-5 in float64
    too); weights @ values is the rule's output before the gated norm, to 1e-5 / 1e-10."""
    layer, _ = hf_layer(kind, dtype, seed=1)
    ours = GatedDeltaNet.from_hf(layer, chunk_size=8)
    x = torch.randn(2, 21, 48, dtype=dtype)
    with torch.no_grad():
        expected = layer(x)
        out, weights = ours(x, need_weights=True)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
        assert weights is not None and weights.shape == (2, 4, 21, 21)
        assert not weights.triu(1).any()
        inputs = ours.rule_inputs(x)
        core, _ = gated_delta_rule(*inputs, chunk_size=None)
        tol = TOL[dtype]
        torch.testing.assert_close(weights @ inputs.value, core, atol=tol, rtol=tol)
        assert ours(x[0]).output.shape == (21, 48)  # unbatched
        torch.testing.assert_close(ours(x[0]).output, out[0], atol=tol, rtol=tol)


@pytest.mark.xdist_group(HF_GROUP)
@pytest.mark.parametrize("kind", KINDS)
def test_cache_chunk_by_chunk_equals_one_pass_and_transformers_cache(kind: str) -> None:
    """Chunks of 2, 1 (shorter than the kernel), 8, 1 and 9 tokens through our cache and
    transformers' DynamicCache: one pass's output; the same conv inputs (ours keeps the
    last K - 1 = 3 of its 4) and recurrent state; a fixed size, whatever the length."""
    transformers = pytest.importorskip("transformers")
    layer, config = hf_layer(kind, torch.float32, seed=2)
    ours = GatedDeltaNet.from_hf(layer, chunk_size=4)
    x = torch.randn(2, 21, 48)
    cache, hf_cache = ours.new_cache(), transformers.DynamicCache(config=config)
    sizes = []
    with torch.no_grad():
        whole = ours(x).output
        for start, end in [(0, 2), (2, 3), (3, 11), (11, 12), (12, 21)]:
            got = ours(x[:, start:end], cache=cache).output
            expected = layer(x[:, start:end], cache=hf_cache)
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(got, whole[:, start:end], atol=1e-5, rtol=1e-5)
            sizes.append(cache.nbytes)
    hf_states = hf_cache.layers[0]
    assert cache.conv_state is not None and cache.conv_state.shape == (2, 2 * 16 + 48, 3)
    torch.testing.assert_close(cache.conv_state, hf_states.conv_states[0][..., 1:])
    torch.testing.assert_close(cache.recurrent_state, hf_states.recurrent_states[0])
    assert len(cache) == 21 and cache.batch_size == 2
    assert sizes == [4 * (2 * 80 * 3 + 2 * 4 * 8 * 12)] * 5  # float32: conv inputs and state


@pytest.mark.xdist_group(HF_GROUP)
def test_cache_equals_one_pass_in_float64() -> None:
    """In float64 (no transformers in the loop) the chunked cache path holds to 1e-10."""
    layer, _ = hf_layer("qwen3_next", torch.float64, seed=3)
    ours = GatedDeltaNet.from_hf(layer, chunk_size=5)
    x = torch.randn(2, 17, 48, dtype=torch.float64)
    cache = ours.new_cache()
    with torch.no_grad():
        whole = ours(x).output
        parts = [ours(x[:, i:j], cache=cache).output for i, j in [(0, 1), (1, 3), (3, 17)]]
    torch.testing.assert_close(torch.cat(parts, dim=1), whole, atol=1e-10, rtol=1e-10)


@pytest.mark.xdist_group(HF_GROUP)
def test_gradients_equal_transformers() -> None:
    """The input's and every projection's gradients equal those through transformers' layer."""
    layer, _ = hf_layer("qwen3_5", torch.float32, seed=4)
    ours = GatedDeltaNet.from_hf(layer, chunk_size=8)
    x = torch.randn(2, 11, 48, requires_grad=True)
    target = torch.randn(2, 11, 48)
    ((layer(x) - target) ** 2).sum().backward()
    expected = {name: p.grad for name, p in layer.named_parameters()}
    expected_x, x.grad = x.grad, None
    ((ours(x).output - target) ** 2).sum().backward()
    torch.testing.assert_close(x.grad, expected_x, atol=1e-4, rtol=1e-4)
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, expected[name], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rows_after_a_history_equal_the_whole_matrix(dtype: torch.dtype) -> None:
    """gated_delta_attention_rows chunk by chunk (5, 1, 1, 4 tokens) = the closed form's rows."""
    inputs = rule_inputs(dtype, T=11)
    q, k, g, beta = (inputs[name] for name in ("query", "key", "g", "beta"))
    whole = gated_delta_attention_matrix(q, k, g, beta)  # (B, H, 11, 11)
    writes, start = None, 0
    for size in (5, 1, 1, 4):
        part = slice(start, start + size)
        rows, writes = gated_delta_attention_rows(
            q[:, :, part], k[:, :, part], g[:, :, part], beta[:, :, part], writes
        )
        tol = 1e-5 if dtype == torch.float32 else 1e-12
        torch.testing.assert_close(rows, whole[:, :, part, : start + size], atol=tol, rtol=tol)
        start += size
    with pytest.raises(ValueError, match=r"past_writes must have shape \(B, H, S, Dk\)"):
        gated_delta_attention_rows(q, k, g, beta, writes[:, :1])


def test_layer_gives_the_implicit_attention_during_cached_decoding() -> None:
    """Weights asked on every pass, chunk by chunk through a cache = one pass's matrix rows."""
    torch.manual_seed(0)
    layer = GatedDeltaNet(32, 2, 4, 8, 6, chunk_size=4).eval()
    x = torch.randn(2, 9, 32)
    _, whole = layer(x, need_weights=True)  # (2, 4, 9, 9)
    cache = layer.new_cache()
    start = 0
    for size in (6, 1, 2):
        _, rows = layer(x[:, start : start + size], cache=cache, need_weights=True)
        torch.testing.assert_close(
            rows, whole[:, :, start : start + size, : start + size], atol=1e-5, rtol=1e-5
        )
        start += size
    assert cache.writes is not None and cache.writes.shape == (2, 4, 9, 8)


def test_layer_refuses_bad_calls_by_name() -> None:
    torch.manual_seed(0)
    layer = GatedDeltaNet(32, 2, 4, 8, 6)
    with pytest.raises(ValueError, match=r"x must have shape \(T, d_model\) or \(B, T, d_model\)"):
        layer(torch.zeros(2, 5, 31))
    with pytest.raises(TypeError, match=r"x has dtype torch\.float64 but the module's parameters"):
        layer(torch.zeros(2, 5, 32, dtype=torch.float64))
    with pytest.raises(TypeError, match="cache must be a GatedDeltaNetCache"):
        layer(torch.zeros(2, 5, 32), cache={})
    with pytest.raises(TypeError, match="need_weights must be a bool"):
        layer(torch.zeros(2, 5, 32), need_weights=1)
    cache = GatedDeltaNetCache()
    layer(torch.zeros(2, 5, 32), cache=cache)
    with pytest.raises(ValueError, match="x must have the cache's batch size 2; got a batch of 3"):
        layer(torch.zeros(3, 1, 32), cache=cache)
    with pytest.raises(ValueError, match="need_weights=True after cached tokens needs the cache's"):
        layer(torch.zeros(2, 1, 32), cache=cache, need_weights=True)
    with pytest.raises(ValueError, match="num_key_heads must divide num_value_heads = 4; got 3"):
        GatedDeltaNet(32, 3, 4, 8, 6)
    with pytest.raises(ValueError, match="chunk_size must be a positive int; got 0"):
        GatedDeltaNet(32, 2, 4, 8, 6, chunk_size=0)
    with pytest.raises(TypeError, match="layer must be a transformers Qwen3_5GatedDeltaNet"):
        GatedDeltaNet.from_hf(torch.nn.Linear(2, 2))


def test_letter_digit_recall_layer_recalls_the_latest_digit_under_each_letter() -> None:
    """The chapter's hand-set layer: A and C were overwritten (A1 -> A5, C3 -> C6); the last
    four letters read 5, 2, 6, 4 through a signed, lower-triangular implicit attention."""
    rng = torch.get_rng_state()
    recall = examples.letter_digit_recall()
    assert torch.equal(torch.get_rng_state(), rng)  # global random state untouched
    with torch.no_grad():
        out, weights = recall.layer(recall.x, need_weights=True)
    digits = out[0, 12:, len(recall.letters) : -1].argmax(-1)
    assert "".join(recall.digits[int(d)] for d in digits) == "5264"
    assert weights is not None and (weights < 0).any() and not weights.triu(1).any()
    with pytest.raises(ValueError, match="text must be capital letters and digits"):
        examples.letter_digit_recall("a1")
    with pytest.raises(ValueError, match="text must hold at least one letter and one digit"):
        examples.letter_digit_recall("AB")
    with pytest.raises(ValueError, match=r"decay must be a finite number > 0\.0 and <= 1\.0"):
        examples.letter_digit_recall(decay=1.5)
