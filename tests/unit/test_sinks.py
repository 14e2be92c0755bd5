"""Attention sinks (gpt-oss: one logit per head that joins each softmax row and is dropped)
in the package's functional attention, every backend, flash attention's online softmax and
the layer; the output gate and partial rotary parts on their own.

The reference is the formula written out here in float64: the scores with one more column
holding the head's sink logit, a softmax over the row, the sink's column dropped."""

from __future__ import annotations

import pytest
import torch

from attnlab import (
    GroupedQueryAttention,
    KVCache,
    OutputGate,
    PartialRotary,
    RotaryEmbedding,
    attend,
    attention_weights,
    attention_with_weights,
    flash_attention,
    scaled_dot_product_attention,
)

B, H, HKV, L, S, E = 2, 4, 2, 7, 9, 8  # L != S: queries are the last L of S positions


def _inputs(dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(B, h, n, E, generator=g, dtype=dtype) for h, n in [(H, L), (HKV, S), (HKV, S)]
    )
    sinks = torch.randn(H, generator=g, dtype=dtype) * 2
    return q, k, v, sinks


def _reference(q, k, v, sinks, allowed):  # type: ignore[no-untyped-def]
    """(output, weights, lse) from the explicit column, key/value heads repeated."""
    k, v = k.repeat_interleave(H // HKV, dim=1), v.repeat_interleave(H // HKV, dim=1)
    scores = (q @ k.transpose(-2, -1)) / E**0.5  # (B, H, L, S)
    scores = scores.masked_fill(~allowed, float("-inf"))
    with_sink = torch.cat([scores, sinks.view(H, 1, 1).expand(B, H, L, 1)], dim=-1)
    weights = with_sink.softmax(dim=-1)[..., :-1]
    return weights @ v, weights, with_sink.logsumexp(dim=-1)


def _band(window: int | None = None) -> torch.Tensor:
    """(L, S): query i is position S - L + i; it sees keys j <= that (and within window)."""
    pos = torch.arange(S - L, S)[:, None]
    j = torch.arange(S)[None, :]
    return (j <= pos) & (j > pos - window) if window else j <= pos


@pytest.mark.parametrize("backend", ["explicit", "torch", "flash"])
def test_every_backend_equals_the_dropped_softmax_column(backend: str) -> None:
    """Grouped heads, a causal band ending at the last key and padding that hides every
    key of some rows (those output zeros: the sink takes the whole row)."""
    q, k, v, sinks = _inputs()
    allowed = _band().expand(B, 1, L, S).clone()
    allowed[1, :, :, :5] = False  # row 1: keys 0..4 padded, so its first queries see nothing
    expected, _, _ = _reference(q, k, v, sinks, allowed)
    output = attend(q, k, v, allowed, backend=backend, enable_gqa=True, sinks=sinks)  # type: ignore[arg-type]
    torch.testing.assert_close(output, expected, atol=1e-12, rtol=1e-12)
    assert bool((output[1, :, 0] == 0).all())  # a row with no key at all
    causal = attend(q, k, v, is_causal=True, backend=backend, enable_gqa=True, sinks=sinks)  # type: ignore[arg-type]
    top_left = torch.ones(L, S, dtype=torch.bool).tril()  # is_causal aligns top-left, as SDPA
    torch.testing.assert_close(causal, _reference(q, k, v, sinks, top_left)[0])


def test_weights_drop_the_sink_and_sum_to_one_minus_its_share() -> None:
    q, k, v, sinks = _inputs()
    kr, vr = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    allowed = _band(window=4)
    expected, expected_weights, lse = _reference(q, k, v, sinks, allowed)
    output, weights = attention_with_weights(q, kr, vr, allowed, sinks=sinks)
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(attention_weights(q, kr, allowed, sinks=sinks), expected_weights)
    sink_share = torch.exp(sinks.view(H, 1) - lse)  # (B, H, L)
    torch.testing.assert_close(weights.sum(-1), 1 - sink_share)
    sdpa = scaled_dot_product_attention(q, k, v, allowed, enable_gqa=True, sinks=sinks)
    torch.testing.assert_close(sdpa, expected)


@pytest.mark.parametrize("block_size", [(3, 2), 4, 64])
@pytest.mark.parametrize("window", [None, 3])
def test_flash_running_sum_with_the_sink_equals_the_explicit_form(block_size, window) -> None:  # type: ignore[no-untyped-def]
    """Output and log-sum-exp (the sink's term included), blocks that do not divide L or S,
    no mask (the fast path's case) and a window; gradients of q, k, v and the sinks
    equal the explicit form's."""
    q, k, v, sinks = _inputs()
    allowed = torch.ones(L, S, dtype=torch.bool) if window is None else _band(window)
    expected, _, lse = _reference(q, k, v, sinks, allowed)
    flash = flash_attention(
        q, k, v, block_size=block_size, window=window, enable_gqa=True, sinks=sinks
    )
    torch.testing.assert_close(flash.output, expected, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(flash.lse, lse, atol=1e-12, rtol=1e-12)
    for sinks_learn in (False, True):  # the tiled backward, or autograd through the blocks
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        sink_leaf = sinks.clone().requires_grad_(sinks_learn)
        out = flash_attention(
            *leaves, block_size=block_size, window=window, enable_gqa=True, sinks=sink_leaf
        )
        ref_leaves = [t.clone().requires_grad_() for t in (q, k, v, sinks)]
        ref = _reference(*ref_leaves, allowed)[0]
        grad = torch.randn(
            expected.shape, dtype=expected.dtype, generator=torch.Generator().manual_seed(1)
        )
        out.output.backward(grad)
        ref.backward(grad)
        for ours, theirs in zip(leaves, ref_leaves, strict=False):
            torch.testing.assert_close(ours.grad, theirs.grad, atol=1e-12, rtol=1e-10)
        if sinks_learn:
            torch.testing.assert_close(sink_leaf.grad, ref_leaves[3].grad, atol=1e-12, rtol=1e-10)


def test_flash_with_sinks_in_float32_and_without_keys() -> None:
    q, k, v, sinks = _inputs(torch.float32)
    expected = scaled_dot_product_attention(q, k, v, _band(), enable_gqa=True, sinks=sinks)
    flash = flash_attention(q, k, v, _band(), block_size=3, enable_gqa=True, sinks=sinks)
    torch.testing.assert_close(flash.output, expected, atol=1e-6, rtol=1e-5)
    empty = flash_attention(q, k[..., :0, :], v[..., :0, :], enable_gqa=True, sinks=sinks)
    assert bool((empty.output == 0).all())
    torch.testing.assert_close(empty.lse, sinks.view(H, 1).expand(B, H, L))  # the sink alone


def test_sinks_of_the_wrong_shape_or_kind_are_refused_by_name() -> None:
    q, k, v, sinks = _inputs()
    kr, vr = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    wrong = r"sinks must have shape \(H,\), one logit per head, with H = 4; got shape \(2,\)"
    for call in (
        lambda s: scaled_dot_product_attention(q, kr, vr, sinks=s),
        lambda s: attention_with_weights(q, kr, vr, sinks=s),
        lambda s: attention_weights(q, kr, sinks=s),
        lambda s: attend(q, k, v, enable_gqa=True, sinks=s),
        lambda s: flash_attention(q, k, v, enable_gqa=True, sinks=s),
    ):
        with pytest.raises(ValueError, match=wrong):
            call(sinks[:2])
        with pytest.raises(TypeError, match="sinks must be a floating-point tensor"):
            call(torch.zeros(H, dtype=torch.long))
    with pytest.raises(ValueError, match=r"with query heads at dim -3, \(N, \.\.\., H, L, E\)"):
        scaled_dot_product_attention(q[0, 0], kr[0, 0], vr[0, 0], sinks=sinks)
    with pytest.raises(
        ValueError, match=r"sinks must have shape \(H,\).* H = 4; got shape \(4, 1\)"
    ):
        GroupedQueryAttention(16, 4, 2, sinks=torch.zeros(4, 1))


def test_layer_sinks_are_a_learned_parameter_and_chunk_with_the_cache() -> None:
    torch.manual_seed(0)
    layer = GroupedQueryAttention(16, 4, 2, window=3, sinks=torch.randn(4)).eval()
    assert isinstance(layer.sinks, torch.nn.Parameter) and "sinks" in layer.state_dict()
    x = torch.randn(2, 9, 16)
    with torch.no_grad():
        whole = layer(x).output
        cache = KVCache()
        chunks = torch.cat([layer(part, cache=cache).output for part in x.split([4, 5], 1)], 1)
    torch.testing.assert_close(chunks, whole)
    layer(x).output.sum().backward()
    assert layer.sinks.grad is not None and bool((layer.sinks.grad != 0).all())


def test_output_gate_of_zeros_halves_each_heads_output() -> None:
    """A gate_proj of zeros gives sigmoid(0) = 1/2 on every feature: the ungated layer with
    o_proj halved."""
    torch.manual_seed(0)
    gate = OutputGate(16, 4, 4)
    torch.nn.init.zeros_(gate.gate_proj.weight)
    gated = GroupedQueryAttention(16, 4, 2, output_gate=gate)
    plain = GroupedQueryAttention(16, 4, 2)
    plain.load_state_dict({k: v for k, v in gated.state_dict().items() if "gate" not in k})
    with torch.no_grad():
        plain.o_proj.weight.mul_(0.5)
        x = torch.randn(2, 5, 16)
        torch.testing.assert_close(gated(x).output, plain(x).output)
    assert gate.gate(x).shape == (2, 4, 5, 4)


def test_partial_rotary_turns_the_first_features_and_keeps_the_rest() -> None:
    rotary = RotaryEmbedding(4, 100.0)
    part = PartialRotary(rotary, 16)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 5, 16, generator=g), torch.randn(2, 2, 5, 16, generator=g)
    turned_q, turned_k = part.queries_keys(q, k, offset=3)
    positions = torch.arange(3, 8)
    torch.testing.assert_close(turned_q[..., :4], rotary(q[..., :4], positions))
    torch.testing.assert_close(turned_k[..., :4], rotary(k[..., :4], positions))
    assert torch.equal(turned_q[..., 4:], q[..., 4:]) and torch.equal(turned_k[..., 4:], k[..., 4:])
    with pytest.raises(ValueError, match="rotary must turn fewer features than head_dim = 4"):
        PartialRotary(rotary, 4)
    with pytest.raises(TypeError, match="rotary must be a RotaryEmbedding; got ALiBi"):
        from attnlab import ALiBi

        PartialRotary(ALiBi(4), 16)  # type: ignore[arg-type]
