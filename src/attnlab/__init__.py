"""attnlab: self-attention from first principles, in small typed PyTorch.

Everything the site's chapters use is importable from here. Shapes follow one
legend (see the Notation page): ``B`` batch, ``T`` tokens, ``L``/``S`` query/key
lengths, ``d_in``/``d_out`` widths (``d_out`` always the total), ``H`` heads,
``D = d_out // H``. Masks follow PyTorch's SDPA: boolean ``True`` = may attend, float
masks are added to the scores.
"""

from . import examples, ring
from .backends import BACKENDS, Backend, attend
from .causal import CausalAttention
from .flash import flash_attention
from .functional import (
    attention_scores,
    attention_weights,
    attention_with_weights,
    causal_mask,
    context_vectors,
    scaled_dot_product_attention,
    softmax,
    softmax_naive,
)
from .masks import mask_from_torch, mask_to_torch
from .multihead import CrossAttention, MultiHeadAttention, MultiHeadAttentionWrapper
from .ring import ring_attention
from .self_attention import SelfAttentionV1, SelfAttentionV2

__all__ = [
    "BACKENDS",
    "Backend",
    "CausalAttention",
    "CrossAttention",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "SelfAttentionV1",
    "SelfAttentionV2",
    "attend",
    "attention_scores",
    "attention_weights",
    "attention_with_weights",
    "causal_mask",
    "context_vectors",
    "examples",
    "flash_attention",
    "mask_from_torch",
    "mask_to_torch",
    "ring",
    "ring_attention",
    "scaled_dot_product_attention",
    "softmax",
    "softmax_naive",
]
