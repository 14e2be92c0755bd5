"""Causal self-attention: each token attends to itself and the tokens before it.

The causal mask is built for the input's length on every call (no fixed
``context_length`` buffer), so the module takes sequences of any length.
"""

from __future__ import annotations

from torch import Tensor

from ._validation import check_bool, check_probability
from .backends import KERNELS, Backend
from .functional import AttentionCall
from .masks import module_attn_mask
from .self_attention import SelfAttentionV2, checked_padding_mask

__all__ = ["CausalAttention"]


class CausalAttention(SelfAttentionV2):
    """Single-head causal self-attention with dropout on the attention weights.

    [`SelfAttentionV2`][attnlab.SelfAttentionV2] plus the mask and dropout (the same
    projections, so the same seed gives the same weights). Dropout acts in training mode
    only. ``causal=False`` gives plain self-attention with dropout and padding, as one head
    of a non-causal [`MultiHeadAttentionWrapper`][attnlab.MultiHeadAttentionWrapper].
    """

    def __init__(
        self,
        d_in: int,
        d_out: int,
        dropout: float = 0.0,
        qkv_bias: bool = False,
        *,
        causal: bool = True,
        backend: Backend = "torch",
    ) -> None:
        super().__init__(d_in, d_out, qkv_bias, backend=backend)
        self.dropout = check_probability("dropout", dropout)
        self.causal = check_bool("causal", causal)

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        """Attend causally over the tokens of ``x``.

        ``key_padding_mask`` is as in [`SelfAttentionV2`][attnlab.SelfAttentionV2]; a query
        that sees no key (the first token, if it is padding) outputs zeros.
        """
        # (..., 1, T) or None
        padding = checked_padding_mask(x, self.d_in, key_padding_mask, self.W_query.weight)
        return self.attend_tokens(x, padding)

    def attend_tokens(self, x: Tensor, padding: Tensor | None) -> Tensor:
        """``forward`` on ``x`` already checked, ``padding`` an attention mask ``(..., 1, T)``.

        For the [`MultiHeadAttentionWrapper`][attnlab.MultiHeadAttentionWrapper], which checks
        once for all its heads.
        """
        queries, keys, values = self.project(x)  # (..., T, d_out) each
        dropout_p = self.dropout if self.training else 0.0
        T = x.shape[-2]
        attn_mask, is_causal = module_attn_mask(
            T, T, self.causal, padding, None, num_heads_dims=0, dtype=x.dtype, device=x.device
        )  # (..., T, T) or None
        call = AttentionCall(attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal)
        return KERNELS[self.backend](queries, keys, values, call)  # (..., T, d_out)

    def extra_repr(self) -> str:
        """Sizes, dropout, causality and backend, shown by ``print(module)``."""
        return (
            f"d_in={self.d_in}, d_out={self.d_out}, dropout={self.dropout}, "
            f"causal={self.causal}, backend={self.backend!r}"
        )
