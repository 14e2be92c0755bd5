"""Causal self-attention: each token attends to itself and the tokens before it.

The causal mask is built for the input's length on every call (no fixed
``context_length`` buffer), so the module takes sequences of any length. An optional
key padding mask hides padding tokens; it is combined with the causal mask into one
boolean mask. Masks follow PyTorch's SDPA: ``True`` = may attend.
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

    Token ``i`` attends to tokens ``j <= i`` only (the mask is lower-triangular and
    built for each input's length). The scale is ``1 / sqrt(d_out)``, the key width.
    Dropout zeroes attention weights with probability ``dropout`` and scales the
    survivors by ``1 / (1 - dropout)``, in training mode only: ``model.eval()`` turns
    it off.

    It is [`SelfAttentionV2`][attnlab.SelfAttentionV2] plus the mask and dropout: the
    same ``nn.Linear`` projections, created in the order query, key, value, so the same
    seed gives the same weights.

    Args:
        d_in: Width of each input token.
        d_out: Width of queries, keys, values and output.
        dropout: Probability of dropping an attention weight in training, in ``[0, 1]``.
        qkv_bias: Give the three projections a bias.
        causal: Apply the causal mask (the default). ``False`` gives plain
            self-attention with dropout and padding, as one head of a non-causal
            [`MultiHeadAttentionWrapper`][attnlab.MultiHeadAttentionWrapper].
        backend: How to compute attention: ``"torch"`` (default, fastest),
            ``"explicit"``, or any other name in ``attnlab.BACKENDS``.

    Shape:
        x: ``(T, d_in)`` or ``(B, T, d_in)``; key_padding_mask: ``(T,)`` or ``(B, T)``;
        output: ``(T, d_out)`` or ``(B, T, d_out)``.
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

        Args:
            x: The input tokens.
            key_padding_mask: Optional, one entry per token: bool with ``True`` = real
                token (may be attended to), ``False`` = padding; or float, added to the
                scores. This is the **opposite** of ``nn.MultiheadAttention``'s boolean
                ``key_padding_mask`` (``True`` = ignore); see
                [`mask_from_torch`][attnlab.mask_from_torch]. A query that can
                attend to nothing (the first token, if it is padding) outputs zeros.

        Returns:
            The context vectors.

        Shape:
            x: ``(T, d_in)`` or ``(B, T, d_in)``; key_padding_mask: ``(T,)`` or
            ``(B, T)``; output: ``(T, d_out)`` or ``(B, T, d_out)``.
        """
        # (..., 1, T) or None
        padding = checked_padding_mask(x, self.d_in, key_padding_mask, self.W_query.weight)
        return self.attend_tokens(x, padding)

    def attend_tokens(self, x: Tensor, padding: Tensor | None) -> Tensor:
        """``forward`` after its checks: project, mask causally and attend.

        For callers that have checked ``x`` and the padding mask already (the
        [`MultiHeadAttentionWrapper`][attnlab.MultiHeadAttentionWrapper] checks once for
        all its heads).

        Args:
            x: The input tokens, already checked.
            padding: The key padding mask as an attention mask ``(..., 1, T)``, or ``None``.

        Returns:
            The context vectors.

        Shape:
            x: ``(T, d_in)`` or ``(B, T, d_in)``; output: ``(T, d_out)`` or
            ``(B, T, d_out)``.
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
