"""The sizes of a decoder-only model of any supported family, and its layers' kinds.

[`LlamaConfig`][attnlab.llama.LlamaConfig] holds numbers and one list of names: how
wide, how many heads, which rotary base, and ``layer_types``, each layer's kind in
transformers' names. What a layer is *made of* (biases, norms, gates, the mixer) is the
family's to say (``attnlab.llama.families``), never a flag here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..rope_scaling import RopeScaling

__all__ = ["LAYER_TYPES", "LlamaConfig"]

LAYER_TYPES = ("full_attention", "sliding_attention", "linear_attention")
"""The layer kinds, in transformers' names: softmax attention over every earlier position,
over a window of them, or a linear-attention (Gated DeltaNet) layer."""


@dataclass(frozen=True)
class LlamaConfig:
    """The sizes of a decoder-only model (defaults: SmolLM2-135M, a Llama).

    Attributes:
        vocab_size: Tokens in the vocabulary ``V``.
        d_model: Width of every token's vector (``hidden_size``).
        num_layers: Decoder blocks.
        num_heads: Query heads ``H`` per softmax layer.
        num_kv_heads: Key/value heads ``Hkv``, shared by ``H // Hkv`` query heads each.
        head_dim: Width ``D`` of a head.
        ffn_dim: Hidden width of the gated feed-forward (``intermediate_size``).
        rope_theta: Base of the rotary frequencies (Gemma 3: of its global layers).
        rms_eps: The epsilon inside RMSNorm's square root.
        context_length: The longest sequence the model was trained for.
        bos_token_id: Id of the beginning-of-sequence token.
        eos_token_id: Id of the end-of-sequence token (``<|im_end|>`` for SmolLM2).
        architecture: The family (GGUF's ``general.architecture``): ``"llama"``,
            ``"qwen2"``, ``"qwen3"``, ``"gemma3"`` or ``"qwen35"``; it decides each
            layer's parts.
        tie_word_embeddings: Score the vocabulary with the embedding matrix; ``False``:
            with a separate ``lm_head``.
        rope_scaling: Rotary frequencies stretched past the trained length (one of
            [`rope_frequencies`][attnlab.rope_frequencies]' scalings); ``None``: the
            trained ones. Gemma 3 scales its global layers only.
        sliding_window: The window ``W`` of the ``"sliding_attention"`` layers: each
            query sees only its last ``W`` positions (see
            [`sliding_window_mask`][attnlab.sliding_window_mask]).
        layer_types: Each layer's kind, one of ``LAYER_TYPES``; ``None``: every layer
            ``"sliding_attention"`` if ``sliding_window`` is set (Mistral), else
            ``"full_attention"`` ([`types`][attnlab.llama.LlamaConfig.types]).
        rotary_dim: Features of each head the rotation turns, the first ones (partial
            rotary, Qwen3.5: a quarter); ``None``: all ``head_dim``.
        rope_local_theta: Gemma 3's rotary base of the sliding layers; ``None``:
            ``rope_theta`` everywhere.
        query_pre_attn_scalar: Scores are scaled by its ``-1/2`` power (Gemma 3);
            ``None``: by ``head_dim ** -0.5``.
        linear_num_key_heads: Gated DeltaNet's query/key heads ``Hk`` (Qwen3.5).
        linear_num_value_heads: Gated DeltaNet's value heads ``Hv``.
        linear_key_head_dim: Gated DeltaNet's ``Dk``.
        linear_value_head_dim: Gated DeltaNet's ``Dv``.
        linear_conv_kernel_dim: Gated DeltaNet's convolution taps ``K``.
    """

    vocab_size: int = 49152
    d_model: int = 576
    num_layers: int = 30
    num_heads: int = 9
    num_kv_heads: int = 3
    head_dim: int = 64
    ffn_dim: int = 1536
    rope_theta: float = 100000.0
    rms_eps: float = 1e-5
    context_length: int = 8192
    bos_token_id: int = 1
    eos_token_id: int = 2
    architecture: str = "llama"
    tie_word_embeddings: bool = True
    rope_scaling: RopeScaling | None = None
    sliding_window: int | None = None
    layer_types: tuple[str, ...] | None = None
    rotary_dim: int | None = None
    rope_local_theta: float | None = None
    query_pre_attn_scalar: float | None = None
    linear_num_key_heads: int | None = None
    linear_num_value_heads: int | None = None
    linear_key_head_dim: int | None = None
    linear_value_head_dim: int | None = None
    linear_conv_kernel_dim: int | None = None

    def __post_init__(self) -> None:
        types = self.layer_types
        if types is None:
            return
        if not isinstance(types, tuple) or len(types) != self.num_layers:
            raise ValueError(
                f"layer_types must be a tuple of num_layers = {self.num_layers} names; "
                f"got {types!r}"
            )
        for kind in types:
            if kind not in LAYER_TYPES:
                raise ValueError(f"layer_types must hold names of {LAYER_TYPES}; got {kind!r}")
        if "sliding_attention" in types and self.sliding_window is None:
            raise ValueError("layer_types has sliding_attention layers but sliding_window is None")

    def types(self) -> tuple[str, ...]:
        """Each layer's kind: ``layer_types``, or what ``None`` there means."""
        if self.layer_types is not None:
            return self.layer_types
        kind = "full_attention" if self.sliding_window is None else "sliding_attention"
        return (kind,) * self.num_layers

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready data (the page's config has the same keys and values).

        ``layer_types`` becomes the list [`types`][attnlab.llama.LlamaConfig.types]
        gives (never ``None``); ``rope_scaling`` ``None`` or its dataclass's fields with
        ``"type"`` first (``{"type": "linear", "factor": 2.0}``).
        """
        data = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        data["layer_types"] = list(self.types())
        scaling = self.rope_scaling
        if scaling is not None:
            kind = type(scaling).__name__.removesuffix("Scaling").lower()
            kind = {"dynamicntk": "dynamic"}.get(kind, kind)
            data["rope_scaling"] = {"type": kind, **dataclasses.asdict(scaling)}
        return data
