"""Each public function against its PyTorch counterpart, one test per class of edge.

softmax and softmax_naive against ``torch.softmax``; every attention path (explicit,
flash, the dispatcher's backends) against ``F.scaled_dot_product_attention``;
``MultiHeadAttention`` against ``nn.MultiheadAttention``. Where the package chooses
otherwise (a fully masked row gives zeros, not NaN), the test says so.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from support import seeded_randn
from torch import Tensor, nn

from attnlab import (
    BACKENDS,
    MultiHeadAttention,
    attend,
    attention_with_weights,
    causal_mask,
    flash_attention,
    mask_to_torch,
    scaled_dot_product_attention,
    sliding_window_mask,
    softmax,
    softmax_naive,
)

_randn = functools.partial(seeded_randn, dtype=torch.float64)  # float64: compared exactly

SOFTMAXES = {"softmax": softmax, "softmax_naive": softmax_naive}
PATHS: dict[str, Callable[..., Tensor]] = {
    "explicit": scaled_dot_product_attention,
    "with_weights": lambda *a, **k: attention_with_weights(*a, **k)[0],
    "flash": lambda *a, **k: flash_attention(*a, **k).output,
    **{
        f"attend-{b}": (lambda *a, _b=b, **k: attend(*a, backend=_b, **k))
        for b in BACKENDS
        if b != "torch"  # PyTorch's SDPA itself: see test_attend_torch_backend_is_a_dispatch
    },
}


def test_attend_torch_backend_is_a_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """backend="torch" hands SDPA the call's own arguments and returns SDPA's result
    (comparing it with SDPA could not fail: it is SDPA, so its dispatch is tested)."""
    seen: list[tuple[tuple[object, ...], dict[str, object]]] = []
    sentinel = torch.full((2, 3, 6), 7.0, dtype=torch.float64)

    def spy(*args: object, **kwargs: object) -> Tensor:
        seen.append((args, kwargs))
        return sentinel

    query, key, value = _randn(2, 3, 4, seed=1), _randn(2, 5, 4, seed=2), _randn(2, 5, 6)
    mask = torch.rand(3, 5) > 0.2
    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    output = attend(query, key, value, attn_mask=mask, scale=0.3, backend="torch")
    assert output is sentinel and len(seen) == 1
    args, kwargs = seen[0]
    assert all(a is b for a, b in zip(args, (query, key, value), strict=True))
    assert kwargs["attn_mask"] is mask and kwargs["scale"] == 0.3
    assert kwargs["dropout_p"] == 0.0 and kwargs["is_causal"] is False
    assert kwargs["enable_gqa"] is False


def _same(ours: Tensor, theirs: Tensor) -> None:
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    torch.testing.assert_close(ours, theirs, equal_nan=True)


# --- softmax ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", SOFTMAXES)
@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_of_a_0d_tensor_is_one(name: str, dim: int) -> None:
    """A single score normalises to 1, as torch.softmax gives (dim 0 or -1)."""
    x = torch.tensor(2.5)
    _same(SOFTMAXES[name](x, dim), torch.softmax(x, dim))


@pytest.mark.parametrize("name", SOFTMAXES)
@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3), (2, 0, 3)])
@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_of_empty_tensors(name: str, shape: tuple[int, ...], dim: int) -> None:
    """Empty along the softmax dim or another: an empty result of the same shape."""
    x = torch.zeros(shape)
    _same(SOFTMAXES[name](x, dim), torch.softmax(x, dim))


@pytest.mark.parametrize("name", SOFTMAXES)
@pytest.mark.parametrize("dim", [-3, -2, -1, 0, 1, 2])
def test_softmax_along_every_dim(name: str, dim: int) -> None:
    """Positive and negative dims of a batched tensor normalise the same slices as torch."""
    x = _randn(2, 3, 4)
    _same(SOFTMAXES[name](x, dim), torch.softmax(x, dim))


@pytest.mark.parametrize("name", SOFTMAXES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_softmax_keeps_the_input_dtype(name: str, dtype: torch.dtype) -> None:
    x = _randn(3, 5, dtype=dtype)
    torch.testing.assert_close(SOFTMAXES[name](x), torch.softmax(x, -1))
    assert SOFTMAXES[name](x).dtype == dtype


def test_fully_masked_slice_gives_zeros_where_torch_gives_nan() -> None:
    """The package's one deliberate difference: an all -inf slice gives zeros (no NaN);
    the naive textbook formula gives NaN there, as torch.softmax does."""
    x = torch.tensor([[0.0, 1.0], [float("-inf"), float("-inf")]])
    assert torch.softmax(x, -1)[1].isnan().all()
    _same(softmax(x), torch.tensor([[0.2689414, 0.7310586], [0.0, 0.0]]))
    _same(softmax_naive(x), torch.softmax(x, -1))


@pytest.mark.parametrize("name", SOFTMAXES)
def test_softmax_refuses_integers_like_torch(name: str) -> None:
    """torch.softmax has no integer kernel; here the refusal is a TypeError naming x."""
    x = torch.ones(2, 3, dtype=torch.int64)
    with pytest.raises(NotImplementedError):
        torch.softmax(x, -1)
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        SOFTMAXES[name](x)


# --- scaled dot-product attention ------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("B", "L", "S"), [(2, 0, 4), (2, 3, 0), (2, 0, 0), (0, 3, 4)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_empty_batches_and_sequences(path: str, B: int, L: int, S: int, is_causal: bool) -> None:
    """No queries, no keys or no batch entries: torch's shapes and zeros."""
    query, key, value = _randn(B, L, 4, seed=1), _randn(B, S, 4, seed=2), _randn(B, S, 6, seed=3)
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=is_causal)
    _same(PATHS[path](query, key, value, is_causal=is_causal), expected)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "batches",
    [((), (), ()), ((2,), (2,), (2,)), ((2, 1, 3), (1, 4, 1), ()), ((3, 1), (1,), (2, 1, 1))],
)
def test_batch_dims_of_any_rank_broadcast(path: str, batches: tuple[tuple[int, ...], ...]) -> None:
    """None to three batch dims, broadcasting between query, key and value as torch does."""
    q_batch, k_batch, v_batch = batches
    query, key = _randn(*q_batch, 3, 4, seed=1), _randn(*k_batch, 5, 4, seed=2)
    value = _randn(*v_batch, 5, 6, seed=3)
    _same(PATHS[path](query, key, value), F.scaled_dot_product_attention(query, key, value))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "mask_shape", [(3, 1), (1, 5), (3, 5), (2, 1, 3, 5), (1, 1, 5), (2, 2, 1, 1)]
)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_masks_broadcast(path: str, mask_shape: tuple[int, ...], kind: str) -> None:
    """Bool (True = may attend) and float masks of every broadcastable shape."""
    query, key, value = _randn(2, 2, 3, 4, seed=1), _randn(2, 2, 5, 4, seed=2), _randn(2, 2, 5, 6)
    allowed = _randn(*mask_shape, seed=4) > -0.5
    mask = allowed if kind == "bool" else _randn(*mask_shape, seed=5)
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    _same(PATHS[path](query, key, value, attn_mask=mask), expected)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows_output_zeros(path: str, kind: str) -> None:
    """A query that may attend to nothing outputs zeros, as PyTorch's SDPA does."""
    query, key, value = _randn(2, 3, 4, seed=1), _randn(2, 5, 4, seed=2), _randn(2, 5, 6)
    allowed = torch.ones(3, 5, dtype=torch.bool)
    allowed[1] = False
    mask = (
        allowed
        if kind == "bool"
        else torch.zeros(3, 5, dtype=torch.float64).masked_fill(~allowed, float("-inf"))
    )
    output = PATHS[path](query, key, value, attn_mask=mask)
    _same(output, F.scaled_dot_product_attention(query, key, value, attn_mask=mask))
    assert not output.isnan().any() and not output[:, 1].any()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("L", "S"), [(3, 6), (6, 3), (1, 1)])
def test_causal_is_top_left_aligned_when_lengths_differ(path: str, L: int, S: int) -> None:
    query, key, value = _randn(2, L, 4, seed=1), _randn(2, S, 4, seed=2), _randn(2, S, 6)
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=True)
    _same(PATHS[path](query, key, value, is_causal=True), expected)


@pytest.mark.parametrize("path", [p for p in PATHS if p != "with_weights"])
@pytest.mark.parametrize(("Hq", "Hkv"), [(4, 2), (4, 1), (3, 3)])
def test_grouped_query_heads(path: str, Hq: int, Hkv: int) -> None:
    """enable_gqa: query head h uses key/value head h // (Hq // Hkv), as PyTorch's."""
    query, key, value = (
        _randn(2, Hq, 3, 4, seed=1),
        _randn(2, Hkv, 5, 4, seed=2),
        _randn(2, Hkv, 5, 6),
    )
    expected = F.scaled_dot_product_attention(query, key, value, enable_gqa=True)
    _same(PATHS[path](query, key, value, enable_gqa=True), expected)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("scale", [1, 0.0, 2.5])
def test_scale_may_be_any_number(path: str, scale: float) -> None:
    query, key, value = _randn(2, 3, 4, seed=1), _randn(2, 5, 4, seed=2), _randn(2, 5, 6)
    expected = F.scaled_dot_product_attention(query, key, value, scale=scale)
    _same(PATHS[path](query, key, value, scale=scale), expected)


@pytest.mark.parametrize("path", PATHS)
def test_a_mask_with_is_causal_is_refused_as_torch_refuses_it(path: str) -> None:
    query, key, value = _randn(2, 3, 4), _randn(2, 3, 4), _randn(2, 3, 4)
    mask = torch.ones(3, 3, dtype=torch.bool)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=True)
    with pytest.raises(ValueError, match="attn_mask and is_causal=True were both given"):
        PATHS[path](query, key, value, attn_mask=mask, is_causal=True)


@pytest.mark.parametrize("path", PATHS)
def test_dropout_of_one_drops_every_weight_as_torch_does(path: str) -> None:
    """``dropout_p=1`` is allowed, as in PyTorch: every weight is dropped, the output is 0."""
    query, key, value = _randn(2, 3, 4, seed=1), _randn(2, 5, 4, seed=2), _randn(2, 5, 6, seed=3)
    expected = F.scaled_dot_product_attention(query, key, value, dropout_p=1.0)
    _same(PATHS[path](query, key, value, dropout_p=1.0), expected)
    assert not expected.any()


def test_modules_take_a_dropout_of_one_as_torch_modules_do() -> None:
    """``nn.MultiheadAttention(dropout=1.0)`` is valid; so is this module's, in training."""
    ours = MultiHeadAttention(8, 8, 2, dropout=1.0, qkv_bias=True).train()
    x = _randn(2, 3, 8, seed=4).float()
    assert torch.equal(ours(x).output, ours.out_proj.bias.expand(2, 3, 8))  # only the bias is left
    assert not torch.equal(ours.eval()(x).output, ours.out_proj.bias.expand(2, 3, 8))


@pytest.mark.parametrize(("L", "S"), [(0, 0), (0, 3), (3, 0)])
def test_masks_of_empty_sequences_are_empty_like_torchs(L: int, S: int) -> None:
    """No queries or no keys: an empty mask, as ``torch.ones(L, S).tril()`` gives."""
    assert torch.equal(causal_mask(L, S), torch.ones(L, S, dtype=torch.bool).tril())
    assert sliding_window_mask(L, S, window=2).shape == (L, S)


# --- MultiHeadAttention against nn.MultiheadAttention ----------------------------------


def _pair(kdim: int = 8) -> tuple[MultiHeadAttention, nn.MultiheadAttention]:
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(8, 2, batch_first=True, kdim=kdim, vdim=kdim).double()
    return MultiHeadAttention.from_torch(theirs.eval()).eval(), theirs.eval()


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize(("L", "S"), [(3, 3), (3, 5), (0, 4)])
def test_multihead_matches_torch_batched_or_not_and_across_lengths(
    batch: tuple[int, ...], L: int, S: int
) -> None:
    """Unbatched or batched input, self- or cross-attention lengths, no queries at all."""
    ours, theirs = _pair(kdim=6)
    query, context = _randn(*batch, L, 8, seed=1), _randn(*batch, S, 6, seed=2)
    with torch.no_grad():
        expected, expected_weights = theirs(query, context, context)
        output, weights = ours(query, context, context, need_weights=True)
    _same(output, expected)
    _same(weights, expected_weights)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_multihead_key_padding_masks_mean_the_same_once_translated(kind: str) -> None:
    """Polarity is SDPA's here (True = real token); translated, the outputs agree."""
    ours, theirs = _pair()
    x = _randn(2, 4, 8, seed=1)
    real = torch.tensor([[True, True, True, False], [True, False, True, True]])
    padding = (
        real
        if kind == "bool"
        else torch.zeros(2, 4, dtype=torch.float64).masked_fill(~real, float("-inf"))
    )
    with torch.no_grad():
        expected = theirs(x, x, x, key_padding_mask=mask_to_torch(padding))[0]
        _same(ours(x, key_padding_mask=padding).output, expected)


def test_multihead_fully_padded_sequence_gives_bias_not_nan() -> None:
    """Every key padded: PyTorch's module gives NaN; this one gives out_proj's bias."""
    ours, theirs = _pair()
    x = _randn(1, 3, 8, seed=1)
    real = torch.zeros(1, 3, dtype=torch.bool)
    with torch.no_grad():
        assert theirs(x, x, x, key_padding_mask=mask_to_torch(real))[0].isnan().all()
        output = ours(x, key_padding_mask=real).output
    _same(output, ours.out_proj.bias.expand(1, 3, 8))
