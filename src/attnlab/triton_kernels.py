"""FlashAttention-2's kernels in Triton: the forward, and the backward's two passes.

Imported only by [`triton_attention`][attnlab.triton_attention], on its first call,
because this module imports Triton (a test and docs dependency, not the package's).
Without a CUDA GPU it first sets ``TRITON_INTERPRET=1``: ``@triton.jit`` reads that
variable when it *decorates* a function, so it must be set before the kernels below
are defined; the interpreter then runs each program instance in turn with NumPy.

Each kernel sees one ``(batch, head)`` slice at a time through its strides: ``Q`` is
``(B, H, L, E)``, ``K`` ``(B, H, S, E)``, ``V`` ``(B, H, S, Ev)``, any strides (a
transposed or broadcast view is read in place); what the kernels write (``Out``,
``Lse``, ``Delta``, the gradients) is contiguous. ``tl.arange`` takes powers of two, so
tiles are ``BLOCK_M`` or ``BLOCK_N`` rows by ``BLOCK_E`` or ``BLOCK_EV`` columns, padded
past ``L``, ``S``, ``E`` and ``Ev`` and masked.
"""

# mypy: disable-error-code="untyped-decorator, no-untyped-def, no-untyped-call"
# (Triton ships no type information: its decorator and kernels are untyped.)

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # before @triton.jit runs below

import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

if os.environ.get("TRITON_INTERPRET") == "1" and not isinstance(tl.sum, InterpretedFunction):
    # Triton was imported earlier (by torch.compile, say) without the interpreter: its own
    # library functions (tl.sum, tl.max) are compiled ones, which the interpreter cannot call.
    raise RuntimeError(
        "triton_attention needs Triton's interpreter on a CPU, but Triton was imported "
        "before TRITON_INTERPRET=1 was set; set it before anything imports Triton "
        "(os.environ['TRITON_INTERPRET'] = '1' before importing torch)"
    )

__all__ = [
    "attention_backward_kernel",
    "attention_forward_kernel",
    "backward_preprocess_kernel",
    "dot",
    "load_tile",
]


@triton.jit
def load_tile(pointer, rows, cols, row_stride, col_stride, n_rows, n_cols):
    """A ``(len(rows), len(cols))`` tile of a matrix; zeros outside its ``n_rows x n_cols``."""
    inside = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    return tl.load(pointer + rows[:, None] * row_stride + cols[None, :] * col_stride, inside, 0.0)


@triton.jit
def dot(a, b, ACC_DTYPE: tl.constexpr):
    """``a @ b`` summed in ``ACC_DTYPE``; float32 exactly (``"ieee"``), not as tf32."""
    return tl.dot(a, b, input_precision="ieee", out_dtype=ACC_DTYPE)


@triton.jit
def attention_forward_kernel(
    Q,  # (B, H, L, E)
    K,  # (B, H, S, E)
    V,  # (B, H, S, Ev)
    Out,  # (B * H, L, Ev), contiguous
    Lse,  # (B * H, L), contiguous
    q_strides,  # (batch, head, row, column) strides of Q, in elements
    k_strides,
    v_strides,
    H,
    L,
    S,
    E,
    Ev,
    scale,
    IS_CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,  # query rows per program
    BLOCK_N: tl.constexpr,  # keys per tile
    BLOCK_E: tl.constexpr,  # E padded to a power of two
    BLOCK_EV: tl.constexpr,  # Ev padded to a power of two
    DOT_DTYPE: tl.constexpr,  # what tl.dot multiplies: the input's dtype, or float32
    ACC_DTYPE: tl.constexpr,  # m, l, the sums: float32 (float64 for float64 input)
):
    """One program: one block of ``BLOCK_M`` query rows of one ``(batch, head)``."""
    block, head = tl.program_id(0), tl.program_id(1)
    b, h = head // H, head % H
    Q += b * q_strides[0] + h * q_strides[1]
    K += b * k_strides[0] + h * k_strides[1]
    V += b * v_strides[0] + h * v_strides[1]
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query positions
    e, ev = tl.arange(0, BLOCK_E), tl.arange(0, BLOCK_EV)
    queries = load_tile(Q, rows, e, q_strides[2], q_strides[3], L, E).to(DOT_DTYPE)
    row_max = tl.full((BLOCK_M,), float("-inf"), ACC_DTYPE)  # m, in registers
    row_sum = tl.zeros((BLOCK_M,), ACC_DTYPE)  # l
    acc = tl.zeros((BLOCK_M, BLOCK_EV), ACC_DTYPE)  # the output before dividing by l
    end = tl.minimum(S, (block + 1) * BLOCK_M) if IS_CAUSAL else S  # causal: skip the future
    for j0 in range(0, end, BLOCK_N):
        cols = j0 + tl.arange(0, BLOCK_N)  # (BLOCK_N,) key positions
        keys = load_tile(K, cols, e, k_strides[2], k_strides[3], S, E).to(DOT_DTYPE)
        values = load_tile(V, cols, ev, v_strides[2], v_strides[3], S, Ev).to(DOT_DTYPE)
        attn_scores = dot(queries, tl.trans(keys), ACC_DTYPE) * scale  # (BLOCK_M, BLOCK_N)
        visible = cols[None, :] < S  # (1, BLOCK_N): padded keys hidden
        if IS_CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])  # (BLOCK_M, BLOCK_N)
        attn_scores = tl.where(visible, attn_scores, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(attn_scores, axis=1))
        weights = tl.exp(attn_scores - new_max[:, None])  # (BLOCK_M, BLOCK_N), unnormalised
        correction = tl.exp(row_max - new_max)  # (BLOCK_M,): rescales the old sums
        row_sum = row_sum * correction + tl.sum(weights, axis=1)
        acc = acc * correction[:, None] + dot(weights.to(DOT_DTYPE), values, ACC_DTYPE)
        row_max = new_max
    inside = rows < L
    out = Out + head * L * Ev + rows[:, None] * Ev + ev[None, :]  # Out: (B * H, L, Ev)
    tl.store(out, acc / row_sum[:, None], inside[:, None] & (ev[None, :] < Ev))
    tl.store(Lse + head * L + rows, row_max + tl.log(row_sum), inside)  # Lse: (B * H, L)


@triton.jit
def backward_preprocess_kernel(
    Out,  # (B * H, L, Ev), contiguous, as are the rest
    dOut,
    dLse,  # (B * H, L)
    Delta,  # (B * H, L)
    L,
    Ev,
    BLOCK_M: tl.constexpr,
    BLOCK_EV: tl.constexpr,
    ACC_DTYPE: tl.constexpr,
):
    """Delta = rowsum(dO * O) - dLse for one block of rows: ``(B * H, L)``, contiguous."""
    block, head = tl.program_id(0), tl.program_id(1)
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    ev = tl.arange(0, BLOCK_EV)
    out = load_tile(Out + head * L * Ev, rows, ev, Ev, 1, L, Ev).to(ACC_DTYPE)
    grad_out = load_tile(dOut + head * L * Ev, rows, ev, Ev, 1, L, Ev).to(ACC_DTYPE)
    grad_lse = tl.load(dLse + head * L + rows, rows < L, 0.0)  # a gradient reaching the lse
    delta = tl.sum(grad_out * out, axis=1) - grad_lse  # (BLOCK_M,)
    tl.store(Delta + head * L + rows, delta, rows < L)


@triton.jit
def attention_backward_kernel(
    Q,  # (B, H, L, E), any strides, as K and V
    K,
    V,
    dOut,  # (B * H, L, Ev), contiguous, as every tensor below
    Lse,  # (B * H, L)
    Delta,  # (B * H, L)
    dQ,  # (B * H, L, E), zeros: programs add to it
    dK,  # (B * H, S, E)
    dV,  # (B * H, S, Ev)
    q_strides,
    k_strides,
    v_strides,
    H,
    L,
    S,
    E,
    Ev,
    scale,
    IS_CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_E: tl.constexpr,
    BLOCK_EV: tl.constexpr,
    DOT_DTYPE: tl.constexpr,
    ACC_DTYPE: tl.constexpr,
):
    """One program: one block of ``BLOCK_N`` keys, every query block inside (FA-2's order).

    dK and dV of the block stay in registers and are written once; each query block's
    share of dQ is added to ``dQ`` atomically, since other programs add to it too.
    """
    block, head = tl.program_id(0), tl.program_id(1)
    b, h = head // H, head % H
    Q += b * q_strides[0] + h * q_strides[1]
    K += b * k_strides[0] + h * k_strides[1]
    V += b * v_strides[0] + h * v_strides[1]
    cols = block * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,) key positions
    e, ev = tl.arange(0, BLOCK_E), tl.arange(0, BLOCK_EV)
    keys = load_tile(K, cols, e, k_strides[2], k_strides[3], S, E).to(DOT_DTYPE)
    values = load_tile(V, cols, ev, v_strides[2], v_strides[3], S, Ev).to(DOT_DTYPE)
    grad_k = tl.zeros((BLOCK_N, BLOCK_E), ACC_DTYPE)
    grad_v = tl.zeros((BLOCK_N, BLOCK_EV), ACC_DTYPE)
    # causal: query blocks wholly before this key block never see it
    start = (block * BLOCK_N // BLOCK_M) * BLOCK_M if IS_CAUSAL else 0
    for i0 in range(start, L, BLOCK_M):
        rows = i0 + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query positions
        queries = load_tile(Q, rows, e, q_strides[2], q_strides[3], L, E).to(DOT_DTYPE)
        grad_out = load_tile(dOut + head * L * Ev, rows, ev, Ev, 1, L, Ev).to(DOT_DTYPE)
        lse = tl.load(Lse + head * L + rows, rows < L, 0.0)  # (BLOCK_M,)
        delta = tl.load(Delta + head * L + rows, rows < L, 0.0)
        attn_scores = dot(queries, tl.trans(keys), ACC_DTYPE) * scale  # (BLOCK_M, BLOCK_N)
        visible = (rows[:, None] < L) & (cols[None, :] < S)  # padded rows and keys hidden
        if IS_CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        attn_weights = tl.exp(tl.where(visible, attn_scores, float("-inf")) - lse[:, None])  # P
        grad_v += dot(tl.trans(attn_weights).to(DOT_DTYPE), grad_out, ACC_DTYPE)  # P^T dO
        grad_weights = dot(grad_out, tl.trans(values), ACC_DTYPE)  # dP = dO V^T
        grad_scores = attn_weights * (grad_weights - delta[:, None])  # dS = P * (dP - D)
        grad_k += dot(tl.trans(grad_scores).to(DOT_DTYPE), queries, ACC_DTYPE)  # dS^T Q
        grad_q = dot(grad_scores.to(DOT_DTYPE), keys, ACC_DTYPE) * scale  # dS K * scale
        inside = (rows[:, None] < L) & (e[None, :] < E)
        tl.atomic_add(dQ + head * L * E + rows[:, None] * E + e[None, :], grad_q, inside)
    key_rows = cols[:, None] < S
    grad_k_at = dK + head * S * E + cols[:, None] * E + e[None, :]  # dK: (B * H, S, E)
    tl.store(grad_k_at, grad_k * scale, key_rows & (e[None, :] < E))
    grad_v_at = dV + head * S * Ev + cols[:, None] * Ev + ev[None, :]  # dV: (B * H, S, Ev)
    tl.store(grad_v_at, grad_v, key_rows & (ev[None, :] < Ev))
