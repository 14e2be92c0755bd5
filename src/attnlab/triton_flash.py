"""FlashAttention as Triton kernels, which a GPU compiles and a CPU interprets.

[`flash_attention`][attnlab.flash_attention] writes FlashAttention's algorithm as
PyTorch loops over tiles. [`triton_attention`][attnlab.triton_attention] runs the same
algorithm as FlashAttention-2 organises it on a GPU: one *program* per block of query
rows and ``(batch, head)``, its running maximum ``m``, running sum ``l`` and output
accumulator held in registers while it walks the key blocks, and the log-sum-exp
written out for the backward pass. The backward is two more kernels: one computes
``Delta = rowsum(dO * O)``, the other runs one program per block of keys, keeps that
block's dK and dV in registers, and adds each query block's share of dQ atomically.
The kernels live in ``attnlab.triton_kernels``.

Without a CUDA GPU (``attnlab.TRITON_MODE`` is ``"interpreter"``), the
first call sets the environment variable ``TRITON_INTERPRET=1`` for the process and
imports Triton: its interpreter then runs each program instance in turn with NumPy,
slowly. Triton itself is imported only then, so the package imports
without it.

Shape legend: ``query (N, ..., L, E)``, ``key (N, ..., S, E)``, ``value (N, ..., S, Ev)``,
output ``(N, ..., L, Ev)``, as ``flash_attention``; the batch dims broadcast.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

import torch
from torch import Tensor

from ._validation import check_attention_args, check_positive_int
from .flash import FlashOutput
from .functional import compute_dtype

__all__ = ["TRITON_MODE", "triton_attention"]

TRITON_MODE: Literal["compiled", "interpreter"] = (
    "compiled"
    if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    else "interpreter"
)
"""How [`triton_attention`][attnlab.triton_attention] runs its kernels in this process:
``"compiled"`` for a CUDA GPU, ``"interpreter"`` (Triton's, on the CPU) without one or
when ``TRITON_INTERPRET=1`` is set (the test suite sets it on every machine)."""

MIN_GPU_TILE = 16
"""The smallest block and padded head width on a GPU: each is the length some ``tl.dot``
sums over, at least 16 for float16 and bfloat16 there; the interpreter takes any."""


def triton_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    block_m: int = 16,
    block_n: int = 16,
) -> FlashOutput:
    """Scaled dot-product attention by FlashAttention-2's Triton kernels, forward and backward.

    Equal, up to rounding, to [`flash_attention`][attnlab.flash_attention] and PyTorch's
    SDPA without a mask or dropout: the default scale is ``1 / sqrt(E)``, and
    ``is_causal=True`` lets query ``i`` see keys ``j <= i`` (top-left, also when
    ``L != S``), skipping key blocks wholly in a query block's future. Gradients flow to
    ``query``, ``key`` and ``value`` (through the output and the lse) by Triton kernels.

    Float32 and float64 are computed in their own precision (``tl.dot`` exact, not tf32);
    float16 and bfloat16 accumulate in float32, their products taken in float32 by the
    interpreter (its bfloat16 ``tl.dot`` is wrong) and in the input's dtype on a GPU.

    Args:
        query: Query vectors.
        key: Key vectors.
        value: Value vectors.
        is_causal: Causal masking, aligned top-left.
        scale: Multiplier of the scores; defaults to ``1 / sqrt(E)``.
        block_m: Query rows per program, a power of two (at least 16 on a GPU).
        block_n: Keys per tile, a power of two (at least 16 on a GPU).

    Returns:
        ``FlashOutput(output, lse)``, the lse in float32 (float64 for float64 input).

    Raises:
        TypeError: A non-tensor, a non-floating or mismatched dtype, a block size that is
            not an int.
        ValueError: Wrong rank, mismatched ``E`` or ``S``, batch dims that do not
            broadcast, a block size that is not a power of two (or under 16 on a GPU),
            tensors on a device the kernels cannot run on.

    Shape:
        query: ``(N, ..., L, E)``; key: ``(N, ..., S, E)``; value: ``(N, ..., S, Ev)``;
        output: ``(N, ..., L, Ev)``; lse: ``(N, ..., L)``.
    """
    batch, _ = check_attention_args(query, key, value, None, 0.0, is_causal, scale)
    call = KernelCall(
        is_causal,
        1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale),
        check_block("block_m", block_m),
        check_block("block_n", block_n),
    )
    wanted = "cuda" if TRITON_MODE == "compiled" else "cpu"
    if query.device.type != wanted:
        raise ValueError(
            f"query must be on a {wanted} device (Triton runs {TRITON_MODE} here); "
            f"got device {query.device}"
        )
    L, S, Ev = query.shape[-2], key.shape[-2], value.shape[-1]
    if math.prod(batch) == 0 or L == 0 or S == 0:  # nothing for a kernel to do
        lse = query.new_full((*batch, L), float("-inf"), dtype=compute_dtype(query.dtype))
        return FlashOutput(query.new_zeros(*batch, L, Ev), lse)
    # (N, ..., T, D) -> (B, H, T, D), views where reshape can (broadcast dims: stride 0)
    B, H = math.prod(batch[:-1]), (batch[-1] if batch else 1)
    q, k, v = (
        x.expand(*batch, *x.shape[-2:]).reshape(B, H, *x.shape[-2:]) for x in (query, key, value)
    )
    output, lse = _TritonAttention.apply(q, k, v, call)  # type: ignore[no-untyped-call]
    return FlashOutput(output.view(*batch, L, Ev), lse.view(*batch, L))


def check_block(name: str, size: object) -> int:
    """Return ``size`` if it is a power of two (at least 16 when compiled), else raise."""
    size = check_positive_int(name, size)
    if size & (size - 1):
        raise ValueError(f"{name} must be a power of two (tl.arange's sizes are); got {size}")
    if TRITON_MODE == "compiled" and size < MIN_GPU_TILE:
        raise ValueError(
            f"{name} must be at least {MIN_GPU_TILE} on a GPU (tl.dot's sums); got {size}"
        )
    return size


@dataclass(frozen=True)
class KernelCall:
    """The settings every kernel of one call shares (besides the tensors)."""

    is_causal: bool
    scale: float
    block_m: int
    block_n: int


def _kernel_arguments(q: Tensor, k: Tensor, v: Tensor, call: KernelCall) -> dict[str, Any]:
    """What the forward and backward kernels share: strides, sizes, compile-time constants.

    ``q (B, H, L, E)``, ``k (B, H, S, E)``, ``v (B, H, S, Ev)``.
    """
    import triton
    import triton.language as tl

    tl_dtypes = {
        torch.float16: tl.float16,
        torch.bfloat16: tl.bfloat16,
        torch.float32: tl.float32,
        torch.float64: tl.float64,
    }
    smallest = MIN_GPU_TILE if TRITON_MODE == "compiled" else 1
    acc_dtype = tl_dtypes[compute_dtype(q.dtype)]
    H, L, E = q.shape[1:]
    S, Ev = v.shape[-2:]
    return {
        "q_strides": q.stride(),
        "k_strides": k.stride(),
        "v_strides": v.stride(),
        "H": H,
        "L": L,
        "S": S,
        "E": E,
        "Ev": Ev,
        "scale": call.scale,
        "IS_CAUSAL": call.is_causal,
        "BLOCK_M": call.block_m,
        "BLOCK_N": call.block_n,
        "BLOCK_E": max(triton.next_power_of_2(E), smallest),
        "BLOCK_EV": max(triton.next_power_of_2(Ev), smallest),
        # the interpreter's bfloat16 tl.dot is wrong: it multiplies in float32 or float64
        "DOT_DTYPE": tl_dtypes[q.dtype] if TRITON_MODE == "compiled" else acc_dtype,
        "ACC_DTYPE": acc_dtype,
    }


def _kernels() -> ModuleType:
    """``attnlab.triton_kernels``, imported on first use (it imports Triton)."""
    try:
        from . import triton_kernels
    except ImportError as missing:
        raise ImportError("triton_attention needs Triton: pip install triton") from missing
    return triton_kernels


class _TritonAttention(torch.autograd.Function):
    """The forward kernel; the backward's preprocessing and key-block kernels."""

    @staticmethod
    def forward(
        ctx: Any, q: Tensor, k: Tensor, v: Tensor, call: KernelCall
    ) -> tuple[Tensor, Tensor]:
        triton_kernels = _kernels()
        B, H, L, _ = q.shape
        output = q.new_empty(B, H, L, v.shape[-1])  # contiguous, as the kernels write it
        lse = q.new_empty(B, H, L, dtype=compute_dtype(q.dtype))
        grid = (math.ceil(L / call.block_m), B * H)  # a program per (query block, head)
        triton_kernels.attention_forward_kernel[grid](
            Q=q, K=k, V=v, Out=output, Lse=lse, **_kernel_arguments(q, k, v, call)
        )
        ctx.save_for_backward(q, k, v, output, lse)
        ctx.call = call
        return output, lse

    @staticmethod
    def backward(
        ctx: Any, grad_output: Tensor, grad_lse: Tensor | None
    ) -> tuple[Tensor | None, ...]:
        triton_kernels = _kernels()
        q, k, v, output, lse = ctx.saved_tensors
        call: KernelCall = ctx.call
        arguments = _kernel_arguments(q, k, v, call)
        B, H, L, E = q.shape
        S, Ev = v.shape[-2:]
        grad_output = grad_output.contiguous()
        grad_lse = torch.zeros_like(lse) if grad_lse is None else grad_lse.contiguous()
        delta = torch.empty_like(lse)  # (B, H, L): rowsum(dO * O) - dlse
        triton_kernels.backward_preprocess_kernel[(math.ceil(L / call.block_m), B * H)](
            Out=output,
            dOut=grad_output,
            dLse=grad_lse,
            Delta=delta,
            L=L,
            Ev=Ev,
            BLOCK_M=call.block_m,
            BLOCK_EV=arguments["BLOCK_EV"],
            ACC_DTYPE=arguments["ACC_DTYPE"],
        )
        grad_q = q.new_zeros(B, H, L, E, dtype=lse.dtype)  # contiguous; programs add to it
        grad_k = k.new_empty(B, H, S, E, dtype=lse.dtype)
        grad_v = v.new_empty(B, H, S, Ev, dtype=lse.dtype)
        grid = (math.ceil(S / call.block_n), B * H)  # a program per (key block, head)
        triton_kernels.attention_backward_kernel[grid](
            Q=q,
            K=k,
            V=v,
            dOut=grad_output,
            Lse=lse,
            Delta=delta,
            dQ=grad_q,
            dK=grad_k,
            dV=grad_v,
            **arguments,
        )
        return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype), None
