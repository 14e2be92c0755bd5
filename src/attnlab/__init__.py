"""attnlab: self-attention from first principles, in small typed PyTorch.

Everything the site's chapters use is importable from here. The conventions, stated
once here and on the Notation page, hold for every function and module below:

* Shapes: ``B`` batch, ``T`` tokens, ``L``/``S`` query/key lengths, ``d_in``/``d_out``
  widths (``d_out`` always the total), ``H`` heads, ``D = d_out // H``. The functions
  take PyTorch's SDPA shapes: ``query (N, ..., L, E)``, ``key (N, ..., S, E)``,
  ``value (N, ..., S, Ev)``, weights ``(N, ..., L, S)``, output ``(N, ..., L, Ev)``,
  where ``N, ...`` is any number of batch dims (none included), which broadcast.
* Masks follow SDPA: a boolean mask's ``True`` lets a query see a key, a float mask
  is added to the scaled scores. ``is_causal=True`` lets query ``i`` see keys
  ``j <= i`` (top-left, also when ``L != S``). A query row that sees no key gets
  all-zero weights and a zero output, as SDPA gives, never NaN.
* The default scale is ``1 / sqrt(E)``; dropout applies to the weights whenever
  ``dropout_p > 0``, survivors scaled by ``1 / (1 - dropout_p)``.
"""

from . import examples, ring
from .additive import AdditiveAttention, additive_attention_scores
from .attention_heads import AttentionHeads, AttentionOutput, HeadProjections, MaskRule, Projections
from .backends import BACKENDS, Backend, attend, register_kernel
from .causal import CausalAttention
from .check import AttentionCheck, check_causal_self_attention
from .delta_rule import gated_delta_attention_matrix, gated_delta_attention_rows, gated_delta_rule
from .flash import FlashOutput, flash_attention, flash_visited_blocks
from .functional import (
    AttentionCall,
    attention_scores,
    attention_weights,
    attention_with_weights,
    check_gqa_heads,
    context_vectors,
    repeat_kv_heads,
    scaled_dot_product_attention,
    softmax,
    softmax_naive,
)
from .gated_deltanet import DeltaRuleInputs, GatedDeltaNet, GatedDeltaNetCache
from .gqa import GroupedQueryAttention
from .key_selection import KeySelection
from .kv_cache import Cache, KVCache, kv_cache_bytes_per_token, mla_cache_bytes_per_token
from .latent import LatentCache, LatentProjections, MultiHeadLatentAttention
from .layer_parts import OutputGate, PartialRotary
from .layouts import OPEN_MODEL_LAYOUTS, LinearStateSizes, ModelLayout
from .masks import (
    causal_mask,
    decoder_mask,
    mask_from_torch,
    mask_to_torch,
    sliding_window_mask,
)
from .multihead import CrossAttention, MultiHeadAttention, MultiHeadAttentionWrapper
from .positions import ALiBi, Positions, alibi_slopes
from .ring import ring_attention
from .rolling_cache import RollingKVCache
from .rope_scaling import (
    DynamicNTKScaling,
    LinearScaling,
    Llama3Scaling,
    RopeFrequencies,
    RopeScaling,
    ScaledRotaryEmbedding,
    YarnScaling,
    rope_frequencies,
    rope_scaling_from_hf,
)
from .rotary import RotaryEmbedding, rotate_half
from .self_attention import SelfAttentionV1, SelfAttentionV2
from .sparse_attention import LightningIndexer, SparseAttentionCounts, sparse_attention_counts
from .split_kv import split_kv_attention
from .triton_flash import TRITON_MODE, triton_attention

__all__ = [
    "BACKENDS",
    "OPEN_MODEL_LAYOUTS",
    "TRITON_MODE",
    "ALiBi",
    "AdditiveAttention",
    "AttentionCall",
    "AttentionCheck",
    "AttentionHeads",
    "AttentionOutput",
    "Backend",
    "Cache",
    "CausalAttention",
    "CrossAttention",
    "DeltaRuleInputs",
    "DynamicNTKScaling",
    "FlashOutput",
    "GatedDeltaNet",
    "GatedDeltaNetCache",
    "GroupedQueryAttention",
    "HeadProjections",
    "KVCache",
    "KeySelection",
    "LatentCache",
    "LatentProjections",
    "LightningIndexer",
    "LinearScaling",
    "LinearStateSizes",
    "Llama3Scaling",
    "MaskRule",
    "ModelLayout",
    "MultiHeadAttention",
    "MultiHeadAttentionWrapper",
    "MultiHeadLatentAttention",
    "OutputGate",
    "PartialRotary",
    "Positions",
    "Projections",
    "RollingKVCache",
    "RopeFrequencies",
    "RopeScaling",
    "RotaryEmbedding",
    "ScaledRotaryEmbedding",
    "SelfAttentionV1",
    "SelfAttentionV2",
    "SparseAttentionCounts",
    "YarnScaling",
    "additive_attention_scores",
    "alibi_slopes",
    "attend",
    "attention_scores",
    "attention_weights",
    "attention_with_weights",
    "causal_mask",
    "check_causal_self_attention",
    "check_gqa_heads",
    "context_vectors",
    "decoder_mask",
    "examples",
    "flash_attention",
    "flash_visited_blocks",
    "gated_delta_attention_matrix",
    "gated_delta_attention_rows",
    "gated_delta_rule",
    "kv_cache_bytes_per_token",
    "mask_from_torch",
    "mask_to_torch",
    "mla_cache_bytes_per_token",
    "register_kernel",
    "repeat_kv_heads",
    "ring",
    "ring_attention",
    "rope_frequencies",
    "rope_scaling_from_hf",
    "rotate_half",
    "scaled_dot_product_attention",
    "sliding_window_mask",
    "softmax",
    "softmax_naive",
    "sparse_attention_counts",
    "split_kv_attention",
    "triton_attention",
]
