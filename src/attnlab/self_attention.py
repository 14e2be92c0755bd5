"""Compact self-attention modules: ``(T, d_in)`` or ``(B, T, d_in)`` to ``(..., T, d_out)``.

Project the input to queries, keys and values, then attend (the scale is
``1 / sqrt(d_out)``, the key width). Every token sees every token, except keys marked
as padding by an optional ``key_padding_mask``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._validation import (
    check_bool,
    check_features,
    check_key_padding_mask,
    check_module_input,
    check_positive_int,
)
from .backends import KERNELS, Backend, check_backend
from .functional import AttentionCall
from .masks import padding_to_attn_mask

__all__ = ["SelfAttentionV1", "SelfAttentionV2"]


def _attend(
    queries: Tensor, keys: Tensor, values: Tensor, attn_mask: Tensor | None, backend: Backend
) -> Tensor:
    """Scaled dot-product attention of checked projections: no dropout, no causal mask."""
    return KERNELS[backend](queries, keys, values, AttentionCall(attn_mask=attn_mask))


class SelfAttentionV1(nn.Module):
    """Self-attention with raw ``nn.Parameter`` weight matrices: ``queries = x @ W_query``.

    The weights are drawn by ``torch.rand(d_in, d_out)`` in the order query, key, value,
    so ``torch.manual_seed(123)`` before construction reproduces the classic numbers.
    """

    def __init__(self, d_in: int, d_out: int, *, backend: Backend = "torch") -> None:
        super().__init__()
        self.d_in = check_positive_int("d_in", d_in)
        self.d_out = check_positive_int("d_out", d_out)
        self.backend = check_backend(backend)
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Attend over the tokens of ``x``.

        ``key_padding_mask`` ``(T,)`` or ``(B, T)`` marks real tokens ``True`` (padding
        ``False``), the **opposite** of ``nn.MultiheadAttention``'s; a float one is added.
        """
        attn_mask = checked_padding_mask(x, self.d_in, key_padding_mask, self.W_query)
        queries = x @ self.W_query  # (..., T, d_out)
        keys = x @ self.W_key  # (..., T, d_out)
        values = x @ self.W_value  # (..., T, d_out)
        return _attend(queries, keys, values, attn_mask, self.backend)  # (..., T, d_out)

    @classmethod
    def from_v2(cls, v2: SelfAttentionV2) -> SelfAttentionV1:
        """A V1 module that computes exactly what ``v2`` (without biases) computes.

        ``nn.Linear`` stores its weight as ``(d_out, d_in)`` and computes ``x @ weight.T``, so
        V1's matrices are the transposed Linear weights.
        """
        if type(v2) is not SelfAttentionV2:  # a subclass (CausalAttention) masks: V1 cannot
            raise TypeError(f"v2 must be a SelfAttentionV2; got {type(v2).__name__}")
        if v2.W_query.bias is not None:
            raise ValueError("v2 has qkv_bias=True; SelfAttentionV1 has no bias to copy it into")
        v1 = cls(v2.d_in, v2.d_out, backend=v2.backend)
        with torch.no_grad():
            v1.W_query.copy_(v2.W_query.weight.T)
            v1.W_key.copy_(v2.W_key.weight.T)
            v1.W_value.copy_(v2.W_value.weight.T)
        return v1

    def extra_repr(self) -> str:
        """Sizes and backend, shown by ``print(module)``."""
        return f"d_in={self.d_in}, d_out={self.d_out}, backend={self.backend!r}"


class SelfAttentionV2(nn.Module):
    """Self-attention with ``nn.Linear`` projections (and an optional bias).

    ``nn.Linear`` initialises its weights uniformly in ``±1/sqrt(d_in)``, centred on
    zero, where ``torch.rand`` gives values in ``[0, 1)``, all positive.
    """

    def __init__(
        self, d_in: int, d_out: int, qkv_bias: bool = False, *, backend: Backend = "torch"
    ) -> None:
        super().__init__()
        self.d_in = check_positive_int("d_in", d_in)
        self.d_out = check_positive_int("d_out", d_out)
        self.backend = check_backend(backend)
        self.W_query = nn.Linear(d_in, d_out, bias=check_bool("qkv_bias", qkv_bias))
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Attend over the tokens of ``x``.

        ``key_padding_mask`` ``(T,)`` or ``(B, T)`` marks real tokens ``True`` (padding
        ``False``), the **opposite** of ``nn.MultiheadAttention``'s; a float one is added.
        """
        attn_mask = checked_padding_mask(x, self.d_in, key_padding_mask, self.W_query.weight)
        queries, keys, values = self.project(x)  # (..., T, d_out) each
        return _attend(queries, keys, values, attn_mask, self.backend)  # (..., T, d_out)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of ``x``, each ``(..., T, d_out)``."""
        return self.W_query(x), self.W_key(x), self.W_value(x)

    def extra_repr(self) -> str:
        """Sizes and backend, shown by ``print(module)``."""
        return f"d_in={self.d_in}, d_out={self.d_out}, backend={self.backend!r}"


def checked_padding_mask(
    x: Tensor, d_in: int, key_padding_mask: Tensor | None, weight: Tensor
) -> Tensor | None:
    """Check a module's input and turn its key padding mask into an attention mask (or ``None``).

    The single-head modules' one check of a call; ``x`` must have ``weight``'s device and dtype.
    """
    check_module_input("x", check_features("x", x, d_in), weight)
    if key_padding_mask is None:
        return None
    check_key_padding_mask(key_padding_mask, tuple(x.shape[:-2]), x.shape[-2], x, "x")
    return padding_to_attn_mask(key_padding_mask)  # (..., T) -> (..., 1, T)
