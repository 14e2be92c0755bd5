"""split_kv_attention: chunks of the keys merged by log-sum-exp equal PyTorch's SDPA."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.ring import merge_partials
from attnlab.split_kv import split_kv_attention, split_kv_partials

TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 1e-2}


def _qkv(
    q_shape: tuple[int, ...], kv_shape: tuple[int, ...], dtype: torch.dtype = torch.float64
) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(*q_shape, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(*kv_shape, generator=gen, dtype=torch.float64) for _ in range(2))
    return q.to(dtype), k.to(dtype), v.to(dtype)


@pytest.mark.parametrize("num_splits", [1, 2, 3, 4, 7, 37])
@pytest.mark.parametrize(
    ("q_shape", "kv_shape"),
    [
        ((1, 4, 1, 16), (1, 4, 37, 16)),  # one decoding query per head
        ((2, 3, 5, 8), (2, 3, 37, 8)),  # several query rows
        ((37, 8), (37, 8)),  # no batch dims; L = S
        ((2, 1, 1, 8), (2, 3, 40, 8)),  # batch dims that broadcast
    ],
)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_equals_sdpa(
    q_shape: tuple[int, ...], kv_shape: tuple[int, ...], num_splits: int, dtype: torch.dtype
) -> None:
    q, k, v = _qkv(q_shape, kv_shape, dtype)
    output = split_kv_attention(q, k, v, num_splits=num_splits)
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    assert output.dtype == dtype
    torch.testing.assert_close(output.double(), expected, atol=TOLERANCE[dtype], rtol=0)


@pytest.mark.parametrize("kind", ["bool", "float", "a row fully masked"])
def test_masks_equal_sdpa(kind: str) -> None:
    q, k, v = _qkv((2, 4, 3, 8), (2, 4, 29, 8))
    gen = torch.Generator().manual_seed(1)
    mask = torch.rand(2, 1, 3, 29, generator=gen) > 0.6
    if kind == "float":
        mask = torch.where(
            mask, torch.randn(mask.shape, generator=gen, dtype=torch.float64), -torch.inf
        )
    if kind == "a row fully masked":
        mask[0, 0, 1] = False
    output = split_kv_attention(q, k, v, mask, num_splits=4)
    expected = F.scaled_dot_product_attention(q, k, v, mask)
    if kind == "a row fully masked":  # SDPA gives NaN there; attnlab gives zeros
        assert torch.equal(output[0, :, 1], torch.zeros_like(output[0, :, 1]))
        expected = torch.nan_to_num(expected, nan=0.0)
    torch.testing.assert_close(output, expected, atol=1e-12, rtol=0)


def test_grouped_query_heads_and_scale() -> None:
    q, k, v = _qkv((2, 8, 1, 16), (2, 2, 50, 16))
    output = split_kv_attention(q, k, v, scale=0.3, num_splits=6, enable_gqa=True)
    expected = F.scaled_dot_product_attention(q, k, v, scale=0.3, enable_gqa=True)
    torch.testing.assert_close(output, expected, atol=1e-12, rtol=0)


def test_gradients_equal_sdpa() -> None:
    q, k, v = (x.requires_grad_(True) for x in _qkv((2, 4, 2, 8), (2, 2, 23, 8)))
    mask = torch.rand(2, 1, 2, 23, generator=torch.Generator().manual_seed(2)) > 0.3
    grad_output = torch.randn(2, 4, 2, 8, dtype=torch.float64)
    got = torch.autograd.grad(
        split_kv_attention(q, k, v, mask, num_splits=5, enable_gqa=True), (q, k, v), grad_output
    )
    want = torch.autograd.grad(
        F.scaled_dot_product_attention(q, k, v, mask, enable_gqa=True), (q, k, v), grad_output
    )
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_gradcheck() -> None:
    q, k, v = (x.requires_grad_(True) for x in _qkv((1, 2, 1, 4), (1, 2, 9, 4)))
    assert torch.autograd.gradcheck(
        lambda q, k, v: split_kv_attention(q, k, v, num_splits=3), (q, k, v)
    )


def test_partials_are_the_chunks_own_attention() -> None:
    q, k, v = _qkv((1, 2, 1, 8), (1, 2, 12, 8))
    outputs, lse = split_kv_partials(q, k, v, num_splits=3)
    assert outputs.shape == (3, 1, 2, 1, 8) and lse.shape == (3, 1, 2, 1)
    for i in range(3):
        chunk = slice(4 * i, 4 * i + 4)
        expected = F.scaled_dot_product_attention(q, k[..., chunk, :], v[..., chunk, :])
        torch.testing.assert_close(outputs[i], expected, atol=1e-12, rtol=0)
        scores = q @ k[..., chunk, :].transpose(-2, -1) / 8**0.5
        torch.testing.assert_close(lse[i], scores.logsumexp(-1), atol=1e-12, rtol=0)
    merged = merge_partials(outputs[0], lse[0], outputs[1], lse[1])[..., :-1]
    expected = F.scaled_dot_product_attention(q, k[..., :8, :], v[..., :8, :])
    torch.testing.assert_close(merged, expected, atol=1e-12, rtol=0)


def test_refusals() -> None:
    q, k, v = _qkv((1, 1, 1, 4), (1, 1, 5, 4))
    with pytest.raises(ValueError, match="num_splits must be at most S = 5"):
        split_kv_attention(q, k, v, num_splits=6)
    with pytest.raises(ValueError, match="num_splits"):
        split_kv_attention(q, k, v, num_splits=0)
    with pytest.raises(TypeError, match="num_splits"):
        split_kv_attention(q, k, v, num_splits=2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="key must have shape"):
        split_kv_attention(q, k[..., :3], v)
