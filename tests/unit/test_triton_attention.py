"""triton_attention: FlashAttention-2's Triton kernels equal flash_attention, SDPA and autograd.

Without a CUDA GPU the kernels run in Triton's interpreter, one program at a time in
NumPy, which is slow: the shapes are tiny, and the lengths are chosen so that the
16-row blocks never divide them (one full block and a partial one, or more).
"""

from __future__ import annotations

import os
import sys

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab import TRITON_MODE, flash_attention, triton_attention

CASES = [
    # (batch dims, L, S, E, Ev, is_causal, scale)
    ((2, 2), 21, 21, 16, 16, False, None),
    ((2, 2), 21, 35, 32, 24, True, 0.3),  # L < S
    ((3,), 35, 19, 64, 64, True, None),  # L > S: late rows see every key
    ((2, 1), 20, 20, 24, 5, False, 1.7),  # head widths that are not powers of two
]


def _inputs(
    batch: tuple[int, ...], L: int, S: int, E: int, Ev: int, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(L * 100 + S)
    q = torch.randn(*batch, L, E, generator=gen).to(dtype)
    k = torch.randn(*batch, S, E, generator=gen).to(dtype)
    v = torch.randn(*batch, S, Ev, generator=gen).to(dtype)
    return q, k, v


def _explicit(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Output and lse by the formula, every score built: softmax(q k^T * scale) v."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale  # (..., L, S)
    if causal:
        L, S = scores.shape[-2:]
        visible = torch.ones(L, S, dtype=torch.bool).tril()  # top-left: j <= i
        scores = scores.masked_fill(~visible, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v, torch.logsumexp(scores, dim=-1)


@pytest.mark.parametrize("case", CASES)
def test_output_and_lse_equal_flash_attention_and_torch_sdpa(case: tuple) -> None:
    """Float32 output and lse within 1e-5 of flash_attention's and of PyTorch's SDPA."""
    batch, L, S, E, Ev, causal, scale = case
    q, k, v = _inputs(batch, L, S, E, Ev)
    output, lse = triton_attention(q, k, v, is_causal=causal, scale=scale)
    flash_output, flash_lse = flash_attention(q, k, v, is_causal=causal, scale=scale)
    sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    assert output.shape == (*batch, L, Ev) and lse.shape == (*batch, L)
    torch.testing.assert_close(output, flash_output, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(output, sdpa, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse, flash_lse, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("case", [CASES[1], CASES[3]])
def test_gradients_equal_autograd_through_explicit_attention(case: tuple) -> None:
    """dq, dk, dv (through the output and the lse) within 1e-4 of autograd's, in float32."""
    batch, L, S, E, Ev, causal, scale = case
    inputs = _inputs(batch, L, S, E, Ev)
    gen = torch.Generator().manual_seed(7)
    grad_output, grad_lse = torch.randn(*batch, L, Ev, generator=gen), torch.randn(*batch, L)
    grads = []
    for attention in (triton_attention, None):
        leaves = [x.clone().requires_grad_(True) for x in inputs]
        if attention is None:
            output, lse = _explicit(*leaves, causal, scale)
        else:
            output, lse = attention(*leaves, is_causal=causal, scale=scale)
        grads.append(torch.autograd.grad((output, lse), leaves, (grad_output, grad_lse)))
    for ours, autograd in zip(*grads, strict=True):
        torch.testing.assert_close(ours, autograd, atol=1e-4, rtol=1e-4)


def test_strided_and_broadcast_views_are_read_in_place() -> None:
    """A transposed query (B, L, H, E).transpose(1, 2), keys stored (E, S) and transposed,
    and keys and values broadcast over the batch (stride 0) give SDPA's output and
    gradients, those of the broadcast tensors summed over the batch."""
    gen = torch.Generator().manual_seed(3)
    q_stored = torch.randn(2, 18, 3, 16, generator=gen)  # (B, L, H, E), as projections give
    k_stored = torch.randn(1, 3, 16, 20, generator=gen)  # (1, H, E, S)
    v = torch.randn(1, 3, 20, 8, generator=gen)  # (1, H, S, Ev): broadcast over B
    leaves = [x.requires_grad_(True) for x in (q_stored, k_stored, v)]
    q, k = q_stored.transpose(1, 2), k_stored.transpose(-2, -1)  # (2, 3, 18, 16), (1, 3, 20, 16)
    assert not q.is_contiguous() and not k.is_contiguous()
    ours = triton_attention(q, k, v, is_causal=True).output
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    grad_output = torch.randn(2, 3, 18, 8, generator=gen)
    our_grads = torch.autograd.grad(ours, leaves, grad_output)
    for a, b in zip(our_grads, torch.autograd.grad(theirs, leaves, grad_output), strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "dtype, tol",
    [(torch.float64, 1e-12), (torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)],
)
def test_other_dtypes_match_sdpa_in_their_precision(dtype: torch.dtype, tol: float) -> None:
    """float64 computes in float64; float16 and bfloat16 in float32, the output rounded once.

    Their gradients match the explicit computation in float64 within the same tolerance."""
    q, k, v = _inputs((2,), 19, 17, 16, 8, dtype)
    leaves = [x.requires_grad_(True) for x in (q, k, v)]
    output, lse = triton_attention(*leaves, is_causal=True)
    assert output.dtype == dtype
    assert lse.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    wide = [x.detach().double().requires_grad_(True) for x in (q, k, v)]
    expected, expected_lse = _explicit(*wide, True, None)
    torch.testing.assert_close(output.double(), expected, atol=tol, rtol=tol)
    torch.testing.assert_close(lse.double(), expected_lse, atol=tol, rtol=tol)
    grad_output = torch.randn(2, 19, 8, generator=torch.Generator().manual_seed(1))
    grads = torch.autograd.grad(output, leaves, grad_output.to(dtype))
    expected_grads = torch.autograd.grad(expected, wide, grad_output.double())
    for ours, exact in zip(grads, expected_grads, strict=True):
        assert ours.dtype == dtype
        torch.testing.assert_close(ours.double(), exact, atol=4 * tol, rtol=4 * tol)


def test_single_query_block_and_unbatched_input() -> None:
    """(L, E) input without batch dims; blocks of 64 larger than L and S; a block of 1 row."""
    q, k, v = _inputs((), 5, 9, 4, 3)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    for block_m, block_n in [(64, 64), (1, 2)] if TRITON_MODE == "interpreter" else [(64, 64)]:
        output, _ = triton_attention(q, k, v, is_causal=True, block_m=block_m, block_n=block_n)
        torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)


def test_empty_lengths_give_zeros_and_minus_infinity() -> None:
    """No keys: zero output and an lse of -inf, as flash_attention; no queries: empty."""
    q, k, v = _inputs((2,), 4, 0, 8, 3)
    output, lse = triton_attention(q, k, v)
    assert torch.equal(output, torch.zeros(2, 4, 3)) and torch.isneginf(lse).all()
    output, lse = triton_attention(q[:, :0], k, v)
    assert output.shape == (2, 0, 3) and lse.shape == (2, 0)


def test_interpreter_mode_is_said_and_switched_on_without_a_gpu() -> None:
    """Without CUDA, TRITON_MODE says so and a call has set TRITON_INTERPRET=1."""
    triton_attention(*_inputs((), 2, 2, 2, 2))
    if torch.cuda.is_available():
        assert TRITON_MODE == "compiled"
    else:
        assert TRITON_MODE == "interpreter" and os.environ["TRITON_INTERPRET"] == "1"


def test_bad_input_is_refused_by_name() -> None:
    """Wrong dtypes, shapes and block sizes are refused before any kernel runs."""
    q, k, v = _inputs((2,), 6, 6, 8, 8)
    with pytest.raises(ValueError, match=r"block_m must be a power of two.*got 24"):
        triton_attention(q, k, v, block_m=24)
    with pytest.raises(ValueError, match="block_n must be a positive int; got 0"):
        triton_attention(q, k, v, block_n=0)
    with pytest.raises(TypeError, match="block_n must be a positive int; got float"):
        triton_attention(q, k, v, block_n=16.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"key must have shape \(N, ..., S, E\) with E = 8"):
        triton_attention(q, k[..., :4], v)
    with pytest.raises(TypeError, match="query, key and value must share one dtype"):
        triton_attention(q, k.double(), v)
    with pytest.raises(TypeError, match="query must be a floating-point tensor"):
        triton_attention(q.int(), k, v)
    with pytest.raises(TypeError, match="is_causal must be a bool"):
        triton_attention(q, k, v, is_causal=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="scale must be a float or None"):
        triton_attention(q, k, v, scale="0.5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="broadcastable batch dims"):
        triton_attention(q, torch.randn(3, 6, 8), torch.randn(3, 6, 8))
    if TRITON_MODE == "interpreter":
        with pytest.raises(ValueError, match="query must be on a cpu device"):
            triton_attention(q.to("meta"), k.to("meta"), v.to("meta"))


def test_without_triton_the_package_imports_and_the_call_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Triton is imported on the first call only; without it, the call names it."""
    monkeypatch.setitem(sys.modules, "attnlab.triton_kernels", None)  # as if not importable
    monkeypatch.delattr(attnlab, "triton_kernels", raising=False)  # set by an earlier import
    with pytest.raises(ImportError, match="triton_attention needs Triton: pip install triton"):
        triton_attention(*_inputs((), 2, 2, 2, 2))


def test_triton_imported_before_the_interpreter_is_refused_with_the_fix() -> None:
    """A process that imported Triton compiled (torch.compile does) is told what to set."""
    import subprocess
    import sys

    code = (
        "import os; os.environ.pop('TRITON_INTERPRET', None)\n"
        "import triton.language\n"
        "os.environ['TRITON_INTERPRET'] = '1'\n"
        "import torch, attnlab\n"
        "q = torch.randn(1, 1, 4, 16)\n"
        "try:\n"
        "    attnlab.triton_attention(q, q, q)\n"
        "except RuntimeError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert "before TRITON_INTERPRET=1 was set" in result.stdout
