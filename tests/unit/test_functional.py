"""The functional core against PyTorch's own softmax and scaled_dot_product_attention."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import attnlab
from attnlab import (
    attend,
    attention_scores,
    attention_weights,
    attention_with_weights,
    causal_mask,
    context_vectors,
    flash_attention,
    scaled_dot_product_attention,
    softmax,
    softmax_naive,
)
from attnlab._validation import broadcast_shape

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: {"atol": 1e-5, "rtol": 1e-5}, torch.float64: {"atol": 1e-12, "rtol": 1e-10}}


@st.composite
def attention_case(draw: st.DrawFn) -> dict[str, object]:
    """Random query/key/value shapes, batch dims, mask kind, scale and dtype."""
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    L, S = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    E, Ev = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    mask_kind = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    mask_batch = draw(st.sampled_from(["full", "broadcast"]))
    scale = draw(st.one_of(st.none(), st.floats(0.05, 3.0)))
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2**16))
    return {
        "batch": batch,
        "L": L,
        "S": S,
        "E": E,
        "Ev": Ev,
        "mask_kind": mask_kind,
        "mask_batch": mask_batch,
        "scale": scale,
        "dtype": dtype,
        "seed": seed,
    }


def make_inputs(case: dict[str, object]) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(case["seed"])  # type: ignore[arg-type]
    batch, L, S = case["batch"], case["L"], case["S"]
    E, Ev, dtype = case["E"], case["Ev"], case["dtype"]
    q = torch.randn(*batch, L, E, generator=gen, dtype=dtype)  # type: ignore[misc]
    k = torch.randn(*batch, S, E, generator=gen, dtype=dtype)  # type: ignore[misc]
    v = torch.randn(*batch, S, Ev, generator=gen, dtype=dtype)  # type: ignore[misc]
    return q, k, v


def make_mask(case: dict[str, object]) -> torch.Tensor | None:
    gen = torch.Generator().manual_seed(case["seed"] + 1)  # type: ignore[operator]
    batch = case["batch"] if case["mask_batch"] == "full" else ()
    shape = (*batch, case["L"], case["S"])  # type: ignore[misc]
    if case["mask_kind"] == "bool":
        return torch.rand(shape, generator=gen) > 0.3
    if case["mask_kind"] == "float":
        return torch.randn(shape, generator=gen, dtype=case["dtype"])  # type: ignore[arg-type]
    return None


@settings(max_examples=150, deadline=None)
@given(attention_case())
def test_sdpa_matches_torch_across_shapes_masks_scales_and_dtypes(case: dict[str, object]) -> None:
    """Output equals torch's SDPA for any batch dims, L != S, bool/float/causal masks."""
    q, k, v = make_inputs(case)
    mask = make_mask(case)
    is_causal = case["mask_kind"] == "causal"
    scale = case["scale"]
    ours = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale)  # type: ignore[arg-type]
    theirs = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale
    )  # type: ignore[arg-type]
    assert ours.shape == theirs.shape
    torch.testing.assert_close(ours, theirs, **TOL[case["dtype"]])  # type: ignore[index]


@pytest.mark.parametrize("dtype", DTYPES)
def test_weights_rows_sum_to_one_and_match_explicit_formula(dtype: torch.dtype) -> None:
    """attention_weights is softmax(q k^T / sqrt(E)) along the key axis."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, 4, generator=gen, dtype=dtype)
    k = torch.randn(2, 3, 6, 4, generator=gen, dtype=dtype)
    weights = attention_weights(q, k)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)
    torch.testing.assert_close(weights, expected, **TOL[dtype])
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5, dtype=dtype), **TOL[dtype])


def test_attention_with_weights_returns_the_weights_the_output_used() -> None:
    """output == weights @ value, and weights match attention_weights."""
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 3, generator=gen) for _ in range(3))
    mask = causal_mask(4)
    output, weights = attention_with_weights(q, k, v, attn_mask=mask)
    torch.testing.assert_close(weights, attention_weights(q, k, attn_mask=mask))
    torch.testing.assert_close(output, context_vectors(weights, v))
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_scores_are_dot_products_for_batched_input() -> None:
    """attention_scores uses transpose(-2, -1), so batched input is right."""
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(3, 4, 5, generator=gen)
    k = torch.randn(3, 6, 5, generator=gen)
    scores = attention_scores(q, k)
    expected = torch.einsum("ble,bse->bls", q, k)
    torch.testing.assert_close(scores, expected)


@pytest.mark.parametrize(("L", "S"), [(4, 4), (3, 6), (6, 3)])
def test_causal_mask_is_top_left_aligned_like_torch(L: int, S: int) -> None:
    """causal_mask(L, S) equals what is_causal=True does in torch's SDPA."""
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(L, 4, generator=gen)
    k = torch.randn(S, 4, generator=gen)
    v = torch.randn(S, 2, generator=gen)
    via_mask = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(L, S))
    via_flag = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(via_mask, via_flag)
    assert causal_mask(L, S).tolist() == [[j <= i for j in range(S)] for i in range(L)]


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_fully_masked_row_gives_zeros_like_torch(mask_kind: str) -> None:
    """A query that may attend to nothing outputs zeros (not NaN), as torch does."""
    gen = torch.Generator().manual_seed(4)
    q = torch.randn(1, 3, 4, generator=gen)
    k = torch.randn(1, 5, 4, generator=gen)
    v = torch.randn(1, 5, 2, generator=gen)
    allowed = torch.ones(3, 5, dtype=torch.bool)
    allowed[1] = False
    mask = allowed if mask_kind == "bool" else torch.zeros(3, 5).masked_fill(~allowed, -math.inf)
    output, weights = attention_with_weights(q, k, v, attn_mask=mask)
    assert not output.isnan().any()
    assert torch.equal(weights[0, 1], torch.zeros(5))
    assert torch.equal(output[0, 1], torch.zeros(2))
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_fully_masked_row_has_zero_gradient_not_nan() -> None:
    """Backpropagating through a fully masked row gives finite gradients."""
    q = torch.randn(3, 4, requires_grad=True)
    k = torch.randn(5, 4, requires_grad=True)
    v = torch.randn(5, 2, requires_grad=True)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[0] = False
    scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()
    for tensor in (q, k, v):
        assert tensor.grad is not None
        assert torch.isfinite(tensor.grad).all()
    assert torch.equal(q.grad[0], torch.zeros(4))  # type: ignore[index]


@pytest.mark.parametrize(("is_causal", "use_mask"), [(False, False), (True, False), (False, True)])
def test_gradcheck_float64(is_causal: bool, use_mask: bool) -> None:
    """Analytic gradients of the explicit path match finite differences."""
    gen = torch.Generator().manual_seed(5)
    q = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    mask = torch.randn(3, 5, generator=gen, dtype=torch.float64) if use_mask else None
    assert torch.autograd.gradcheck(
        lambda q, k, v: scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal),
        (q, k, v),
    )


def test_gradients_match_torch_sdpa() -> None:
    """Gradients w.r.t. query, key and value equal those through torch's SDPA."""
    gen = torch.Generator().manual_seed(6)
    base = [torch.randn(2, 2, 5, 4, generator=gen) for _ in range(3)]
    ours = [t.clone().requires_grad_() for t in base]
    theirs = [t.clone().requires_grad_() for t in base]
    scaled_dot_product_attention(*ours, is_causal=True).pow(2).sum().backward()
    F.scaled_dot_product_attention(*theirs, is_causal=True).pow(2).sum().backward()
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a.grad, b.grad)


def test_dropout_zeroes_weights_and_scales_survivors() -> None:
    """With dropout_p, weights are zeroed or scaled by 1/(1-p), applied whenever p > 0."""
    torch.manual_seed(7)
    q = k = torch.zeros(1, 50, 4)
    v = torch.randn(1, 50, 3)
    _, weights = attention_with_weights(q, k, v, dropout_p=0.5)
    kept = weights[weights != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, (1 / 50) / (1 - 0.5)))
    assert 0.3 < (weights == 0).float().mean() < 0.7


@settings(max_examples=100, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    magnitude=st.sampled_from([1.0, 10.0, 100.0]),
    dtype=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**16),
)
def test_softmax_matches_torch(
    shape: list[int], magnitude: float, dtype: torch.dtype, seed: int
) -> None:
    """The stable softmax equals torch.softmax along any dim, for small and large scores."""
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=dtype) * magnitude
    for dim in range(-len(shape), len(shape)):
        torch.testing.assert_close(softmax(x, dim=dim), torch.softmax(x, dim=dim), **TOL[dtype])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 3), max_size=4), min_size=1, max_size=3))
def test_broadcast_shape_follows_torch(shapes: list[list[int]]) -> None:
    """The package's broadcast rule gives torch.broadcast_shapes' answer, or None where
    torch raises (sizes 0, 1 and others, ranks 0 to 4)."""
    try:
        expected: tuple[int, ...] | None = tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        expected = None
    assert broadcast_shape(*shapes) == expected


def test_naive_softmax_overflows_where_stable_softmax_does_not() -> None:
    """exp overflows past ~88.7 in float32: the naive softmax returns NaN, ours does not."""
    scores = torch.tensor([1000.0, 999.0, 0.0])
    assert softmax_naive(scores).isnan().any()
    torch.testing.assert_close(softmax(scores), torch.softmax(scores, dim=-1))
    small = torch.tensor([0.1, -0.2, 0.3])
    torch.testing.assert_close(softmax_naive(small), torch.softmax(small, dim=-1))


def test_softmax_of_all_minus_inf_row_is_zeros() -> None:
    """The documented rule for a row with nothing to attend to."""
    x = torch.tensor([[-math.inf, -math.inf], [0.0, -math.inf]])
    assert softmax(x).tolist() == [[0.0, 0.0], [1.0, 0.0]]


def test_public_api_is_explicit() -> None:
    """Every name in __all__ exists, and nothing private is exported."""
    for name in attnlab.__all__:
        assert hasattr(attnlab, name), name
        assert not name.startswith("_")


def test_no_keys_at_all_gives_zeros_like_torch() -> None:
    """S = 0: every query has nothing to attend to, so the output is zeros."""
    q, k, v = torch.randn(2, 3, 4), torch.randn(2, 0, 4), torch.randn(2, 0, 5)
    torch.testing.assert_close(
        scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v)
    )
    assert torch.equal(scaled_dot_product_attention(q, k, v), torch.zeros(2, 3, 5))


@st.composite
def gqa_case(draw: st.DrawFn) -> dict[str, object]:
    """Query heads a multiple of the key/value heads, a mask kind, a flash block size."""
    Hkv = draw(st.integers(1, 3))
    group = draw(st.integers(1, 3))
    return {
        "batch": draw(st.sampled_from([(), (2,)])),
        "Hq": Hkv * group,
        "Hkv": Hkv,
        "L": draw(st.integers(1, 9)),
        "S": draw(st.integers(1, 9)),
        "E": draw(st.sampled_from([2, 4, 8])),
        "mask": draw(st.sampled_from(["none", "causal", "bool", "float"])),
        "block": draw(st.sampled_from([1, 3, (2, 5), 64])),
        "seed": draw(st.integers(0, 1000)),
    }


@settings(max_examples=40, deadline=None)
@given(gqa_case())
def test_enable_gqa_equals_torch_sdpa(case: dict[str, object]) -> None:
    gen = torch.Generator().manual_seed(case["seed"])  # type: ignore[arg-type]
    batch, Hq, Hkv = case["batch"], case["Hq"], case["Hkv"]
    L, S, E = case["L"], case["S"], case["E"]
    q = torch.randn(*batch, Hq, L, E, generator=gen)  # type: ignore[misc]
    k = torch.randn(*batch, Hkv, S, E, generator=gen)  # type: ignore[misc]
    v = torch.randn(*batch, Hkv, S, E + 1, generator=gen)  # type: ignore[misc]
    mask, causal = None, case["mask"] == "causal"
    if case["mask"] == "bool":
        mask = torch.rand(Hq, L, S, generator=gen) > 0.3  # type: ignore[misc]
    elif case["mask"] == "float":
        mask = torch.randn(L, S, generator=gen)  # type: ignore[misc]
    torchs = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True
    )  # NaN in a row a bool mask empties
    expected = torchs.nan_to_num(0.0)  # the package's rule: such a row outputs zeros
    explicit = scaled_dot_product_attention(q, k, v, mask, is_causal=causal, enable_gqa=True)
    block: int | tuple[int, int] = case["block"]  # type: ignore[assignment]
    flash = flash_attention(
        q, k, v, mask, is_causal=causal, block_size=block, enable_gqa=True
    ).output
    for backend in ("explicit", "flash"):  # their own output, NaN included, against zeros
        got = attend(q, k, v, mask, is_causal=causal, backend=backend, enable_gqa=True)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    # "torch" is PyTorch's SDPA itself: this checks the dispatch, NaN rows and all
    got = attend(q, k, v, mask, is_causal=causal, backend="torch", enable_gqa=True)
    torch.testing.assert_close(got, torchs, atol=1e-5, rtol=1e-5, equal_nan=True)
    torch.testing.assert_close(explicit, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(flash, expected, atol=1e-5, rtol=1e-5)


def test_attention_weights_take_is_causal_and_scale() -> None:
    """attention_weights(is_causal=True, scale=s): softmax(q k^T s) under the top-left causal
    mask (L < S here), as the weights that PyTorch's SDPA averages the values with."""
    torch.manual_seed(11)
    q, k = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    allowed = torch.ones(3, 5, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-2, -1) * 0.3).masked_fill(~allowed, float("-inf"))
    expected = torch.softmax(scores, dim=-1)
    weights = attention_weights(q, k, is_causal=True, scale=0.3)
    torch.testing.assert_close(weights, expected)
    v = torch.eye(5).expand(2, 5, 5)  # each value is a one-hot: SDPA's output is its weights
    sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    torch.testing.assert_close(weights, sdpa)


def test_attention_weights_refuse_a_bad_scale() -> None:
    with pytest.raises(TypeError, match="scale must be a float or None; got str"):
        attention_weights(torch.randn(2, 4), torch.randn(3, 4), scale="0.5")  # type: ignore[arg-type]


def test_weights_come_back_in_the_inputs_half_precision() -> None:
    """float16 inputs: weights (and outputs) in float16, the float32 computation rounded."""
    torch.manual_seed(12)
    q, k, v = (torch.randn(1, 3, 4) for _ in range(3))
    half = [t.half() for t in (q, k, v)]
    weights = attention_weights(half[0], half[1])
    output, with_weights = attention_with_weights(*half)
    exact = attention_weights(*(t.float() for t in half[:2]))
    assert weights.dtype == output.dtype == with_weights.dtype == torch.float16
    torch.testing.assert_close(weights, exact.half())
    torch.testing.assert_close(with_weights, exact.half())


def test_context_vectors_refuse_values_of_the_wrong_length() -> None:
    """Weights (N, L, S) = (1, 2, 3) want values of length S = 3, not L = 2."""
    weights = torch.softmax(torch.randn(1, 2, 3), dim=-1)
    with pytest.raises(ValueError, match=r"S = 3 to match attn_weights; got shape \(1, 2, 4\)"):
        context_vectors(weights, torch.randn(1, 2, 4))
