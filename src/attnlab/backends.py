"""Choosing how attention is computed: one dispatcher for every module.

Modules project their inputs, then call [`attend`][attnlab.attend] with the name of a
backend. Every backend has the semantics of
[`scaled_dot_product_attention`][attnlab.scaled_dot_product_attention]:

* ``"explicit"``: the package's step-by-step computation (materialises the
  ``(L, S)`` weights; the one to read);
* ``"torch"``: ``torch.nn.functional.scaled_dot_product_attention``, PyTorch's fused
  kernels (the fastest, and the modules' default);
* ``"flash"``: [`flash_attention`][attnlab.flash_attention], the package's own
  FlashAttention algorithm in plain PyTorch (blocks and an online softmax; never
  materialises the ``(L, S)`` matrix).
"""

from __future__ import annotations

from typing import Literal, get_args

import torch.nn.functional as F
from torch import Tensor

from ._validation import check_attention_args
from .flash import DEFAULT_BLOCK_SIZE, flash_kernel
from .functional import attention_kernel

__all__ = ["BACKENDS", "Backend", "attend", "attend_kernel", "check_backend"]

Backend = Literal["explicit", "torch", "flash"]
"""Names of the attention backends."""

BACKENDS: tuple[str, ...] = get_args(Backend)
"""Every backend name, in the order the docs list them."""


def check_backend(backend: object) -> Backend:
    """Return ``backend`` if it names a backend, else raise ``ValueError``."""
    if backend not in BACKENDS:
        raise ValueError(
            f"backend must be one of {', '.join(map(repr, BACKENDS))}; got {backend!r}"
        )
    return backend  # type: ignore[return-value]


def attend(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    backend: Backend = "torch",
    enable_gqa: bool = False,
) -> Tensor:
    """Scaled dot-product attention computed by the chosen backend.

    Args:
        query: Query vectors.
        key: Key vectors.
        value: Value vectors.
        attn_mask: Optional mask broadcastable to ``(N, ..., L, S)``: bool (``True`` =
            may attend) or float (added to the scaled scores).
        dropout_p: Dropout probability on the attention weights, applied whenever
            positive.
        is_causal: Causal masking, aligned top-left; not together with ``attn_mask``.
        scale: Multiplier of the scores; defaults to ``1 / sqrt(E)``.
        backend: ``"explicit"``, ``"torch"`` or ``"flash"``.
        enable_gqa: Grouped-query attention with PyTorch's semantics: query head ``h``
            uses key/value head ``h // (Hq // Hkv)`` (heads at dim ``-3``).

    Returns:
        The attention output.

    Shape:
        query: ``(N, ..., L, E)``; key: ``(N, ..., S, E)``; value: ``(N, ..., S, Ev)``;
        output: ``(N, ..., L, Ev)``.
    """
    check_backend(backend)
    batch, group = check_attention_args(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa=enable_gqa
    )
    return attend_kernel(
        query, key, value, attn_mask, dropout_p, is_causal, scale, backend, batch=batch, group=group
    )


def attend_kernel(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    backend: Backend,
    *,
    batch: tuple[int, ...],
    group: int,
) -> Tensor:
    """[`attend`][attnlab.attend] on arguments already checked: the backends' kernels.

    ``batch`` and ``group`` are what the checks return (the broadcast batch shape and
    the query heads per key/value head). The modules check their own inputs once and
    call this.
    """
    if backend == "explicit":
        output, _ = attention_kernel(
            query, key, value, attn_mask, dropout_p, is_causal, scale, group
        )
        return output
    if backend == "flash":
        output, _ = flash_kernel(
            query, key, value, attn_mask, dropout_p, is_causal, scale, DEFAULT_BLOCK_SIZE,
            window=None, batch=batch, group=group,
        )  # fmt: skip
        return output
    return F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        is_causal=is_causal,
        scale=scale,
        enable_gqa=group > 1,
    )
