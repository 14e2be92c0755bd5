"""The Llama family in GGUF (``general.architecture = "llama"``): SmolLM2, TinyLlama, Llama 3.x.

Its config comes from the ``llama.*`` metadata keys, its tensors from llama.cpp's names
(``token_embd.weight``, ``blk.{i}.attn_q.weight``, ...). One thing needs undoing: llama.cpp
pairs the rotary coordinates of a head as neighbours, we (and Hugging Face) as halves, so
the converter stored the query and key rows reordered
([`unpermute_rotary_rows`][attnlab.llama.unpermute_rotary_rows]). Llama 3.1 to 3.3 files
carry their rotary scaling as a tensor of factors (``rope_freqs.weight``), read back into
a [`Llama3Scaling`][attnlab.Llama3Scaling].

The Qwen families ([`qwen2`][attnlab.llama.families.qwen2],
[`qwen3`][attnlab.llama.families.qwen3]) are this layout plus their own parts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from ...rope_scaling import Llama3Scaling
from ..gguf_file import GGUFError
from ..model import LlamaConfig, LlamaModel

__all__ = [
    "ARCHITECTURE",
    "config_from_gguf",
    "llama3_factors",
    "llama3_scaling",
    "read_config",
    "rename",
    "state_dict",
    "unpermute_rotary_rows",
]

ARCHITECTURE = "llama"

# llama.cpp's tensor names -> LlamaModel's parameters, per layer and for the whole model
LAYER_TENSORS = {
    "attn_norm.weight": "attn_norm.weight",
    "attn_q.weight": "attn.q_proj.weight",
    "attn_k.weight": "attn.k_proj.weight",
    "attn_v.weight": "attn.v_proj.weight",
    "attn_output.weight": "attn.o_proj.weight",
    "ffn_norm.weight": "ffn_norm.weight",
    "ffn_gate.weight": "ffn.gate_proj.weight",
    "ffn_up.weight": "ffn.up_proj.weight",
    "ffn_down.weight": "ffn.down_proj.weight",
}
MODEL_TENSORS = {"token_embd.weight": "embed.weight", "output_norm.weight": "norm.weight"}
OUTPUT = "output.weight"  # the unembedding, present only where it is not tied
# Llama 3.1 to 3.3: each rotary pair's frequency divided by a factor (llama3 scaling)
ROPE_FREQS = "rope_freqs.weight"


def unpermute_rotary_rows(weight: Tensor, num_heads: int) -> Tensor:
    """Reorder a GGUF query or key projection's rows from llama.cpp's rotary pairs to ours.

    This is the rotary chapter's "two pairings" lesson made real. Rotary embeddings
    turn a head's ``D`` coordinates in ``D / 2`` pairs. llama.cpp pairs neighbours,
    ``(0, 1), (2, 3), ...``; Hugging Face's Llama and
    [`RotaryEmbedding`][attnlab.RotaryEmbedding] pair coordinate ``i`` with
    ``i + D / 2`` (``rotate_half``). Both are the same rotation once the coordinates
    are renamed, so llama.cpp's converter reordered each head's rows of ``W_query``
    and ``W_key`` to suit its pairing. Within a head, GGUF row ``2i`` is our row
    ``i`` and GGUF row ``2i + 1`` is our row ``i + D / 2``; this puts them back
    (as transformers' GGUF loader does). The value and output projections are not
    rotated and stay as they are.

    Example: one head of width 4 stored as rows ``[a0, b0, a1, b1]`` (pair ``i`` is
    ``(a_i, b_i)``) becomes ``[a0, a1, b0, b1]``.

    Args:
        weight: The projection as stored, one row per output coordinate.
        num_heads: Heads in the projection (``H`` for queries, ``Hkv`` for keys).

    Returns:
        The rows in rotate-half order.

    Shape:
        weight: ``(num_heads * D, d_model)``; output: the same.
    """
    rows = weight.shape[0]
    if weight.dim() != 2 or rows % (2 * num_heads):
        raise ValueError(
            f"weight must have shape (num_heads * D, d_model) with D even, num_heads = "
            f"{num_heads}; got shape {tuple(weight.shape)}"
        )
    D = rows // num_heads
    pairs = weight.reshape(num_heads, D // 2, 2, -1)  # (H, D/2 pairs, 2 members, d_model)
    return pairs.transpose(1, 2).reshape(weight.shape)  # (H, 2 halves, D/2, d_model)


def llama3_factors(scaling: Llama3Scaling, head_dim: int, theta: float) -> Tensor:
    """The ``rope_freqs.weight`` llama.cpp's converter writes for ``scaling``.

    Each pair's frequency is divided by its factor: 1 for wavelengths shorter than
    ``original_length / high_freq_factor``, ``factor`` for those longer than
    ``original_length / low_freq_factor``, a blend between.
    """
    s = scaling
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    factors = []
    for freq in inv_freq.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < s.original_length / s.high_freq_factor:
            factors.append(1.0)
        elif wavelen > s.original_length / s.low_freq_factor:
            factors.append(s.factor)
        else:
            smooth = (s.original_length / wavelen - s.low_freq_factor) / (
                s.high_freq_factor - s.low_freq_factor
            )
            factors.append(1 / ((1 - smooth) / s.factor + smooth))
    return torch.tensor(factors, dtype=torch.float32)


def llama3_scaling(factors: Tensor, head_dim: int, theta: float) -> Llama3Scaling:
    """The Llama 3.1 scaling whose factors a file's ``rope_freqs.weight`` holds.

    The file keeps the factors, not the parameters: the largest factor is ``factor``,
    and the others must be what Llama 3.1 to 3.3's parameters give (``low_freq_factor``
    1, ``high_freq_factor`` 4, trained on 8192 positions), else the file is refused.
    """
    scaling = Llama3Scaling(float(factors.max()))
    expected = llama3_factors(scaling, head_dim, theta)
    if factors.shape != expected.shape or not torch.allclose(factors, expected, rtol=1e-5):
        raise ValueError(
            f"the GGUF file's {ROPE_FREQS} are not Llama 3.1's rotary scaling (factor "
            f"{scaling.factor:g}, low_freq_factor 1, high_freq_factor 4, 8192 positions), "
            f"the one attnlab.llama reads"
        )
    return scaling


def read_config(
    metadata: Mapping[str, Any], tensors: Mapping[str, Tensor], arch: str, **family: Any
) -> LlamaConfig:
    """The config the ``<arch>.*`` keys describe; ``family`` sets the family's own options.

    The head width is ``<arch>.attention.key_length`` where the file states it (Qwen3's
    is not ``d_model / H``), else the rotary dimension, else ``d_model / H``. A
    ``rope_freqs.weight`` tensor gives Llama 3.1's rotary scaling.
    """

    def key(name: str, default: Any = None) -> Any:
        full = f"{arch}.{name}"
        if full in metadata:
            return metadata[full]
        if default is None:
            raise GGUFError(f"the GGUF file lacks the metadata key {full!r}")
        return default

    def count(name: str, default: int | None = None) -> int:
        value = key(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise GGUFError(f"the GGUF's {arch}.{name} must be a positive int; got {value!r}")
        return value

    def number(name: str, default: float | None = None) -> float:
        value = key(name, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise GGUFError(f"the GGUF's {arch}.{name} must be a number > 0; got {value!r}")
        if not math.isfinite(value):
            raise GGUFError(f"the GGUF's {arch}.{name} must be finite; got {value!r}")
        return float(value)

    num_layers = count("block_count")
    blocks = {name.split(".")[1] for name in tensors if name.startswith("blk.")}
    if num_layers != len(blocks):
        raise GGUFError(
            f"the GGUF's {arch}.block_count is {num_layers}, but the file holds tensors of "
            f"{len(blocks)} block(s)"
        )
    d_model, num_heads = count("embedding_length"), count("attention.head_count")
    num_kv_heads = count("attention.head_count_kv", num_heads)
    if num_heads % num_kv_heads:
        raise GGUFError(
            f"the GGUF's {arch}.attention.head_count ({num_heads}) must be a multiple of "
            f"{arch}.attention.head_count_kv ({num_kv_heads})"
        )
    widths = (f"{arch}.attention.key_length", f"{arch}.rope.dimension_count")
    if d_model % num_heads and not any(width in metadata for width in widths):
        raise GGUFError(
            f"the GGUF's {arch}.embedding_length ({d_model}) must be a multiple of "
            f"{arch}.attention.head_count ({num_heads}) when the file states no head width"
        )
    head_dim = count("attention.key_length", count("rope.dimension_count", d_model // num_heads))
    if head_dim % 2:
        raise GGUFError(f"the GGUF's head width must be even (rotary pairs); got {head_dim}")
    # the embedding's rows: the model's vocabulary, even where the token list is shorter
    embed = tensors.get("token_embd.weight")
    rows = len(metadata.get("tokenizer.ggml.tokens", [])) if embed is None else embed.shape[0]
    vocab = count("vocab_size", int(rows))
    theta = number("rope.freq_base", 10000.0)
    if ROPE_FREQS in tensors:
        family["rope_scaling"] = llama3_scaling(tensors[ROPE_FREQS], head_dim, theta)
    return LlamaConfig(
        vocab_size=vocab,
        d_model=d_model,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        ffn_dim=count("feed_forward_length"),
        rope_theta=theta,
        rms_eps=number("attention.layer_norm_rms_epsilon"),
        context_length=count("context_length"),
        bos_token_id=int(metadata.get("tokenizer.ggml.bos_token_id", 1)),
        eos_token_id=int(metadata.get("tokenizer.ggml.eos_token_id", 2)),
        tie_word_embeddings=OUTPUT not in tensors,
        **family,
    )


def config_from_gguf(metadata: Mapping[str, Any], tensors: Mapping[str, Tensor]) -> LlamaConfig:
    """A Llama file's config, from its ``llama.*`` keys (and Llama 3.1's ``rope_freqs``)."""
    return read_config(metadata, tensors, ARCHITECTURE)


def rename(
    config: LlamaConfig,
    tensors: Mapping[str, Tensor],
    layer_tensors: Mapping[str, str],
    reorder: Callable[[str, Tensor], Tensor] | None = None,
) -> dict[str, Tensor]:
    """GGUF tensors under LlamaModel's parameter names, ``reorder(gguf_name, t)`` applied."""
    names = dict(MODEL_TENSORS)
    if not config.tie_word_embeddings:
        names[OUTPUT] = "lm_head.weight"
    for i in range(config.num_layers):
        names.update({f"blk.{i}.{g}": f"layers.{i}.{n}" for g, n in layer_tensors.items()})
    missing = [name for name in names if name not in tensors]
    if missing:
        raise GGUFError(
            f"the GGUF file lacks {len(missing)} tensor(s) of the {config.architecture} "
            f"family, e.g. {missing[0]!r}"
        )
    used = set(names) | ({ROPE_FREQS} if config.rope_scaling is not None else set())
    extra = sorted(set(tensors) - used)
    if extra:
        raise GGUFError(
            f"the GGUF file has tensor(s) the {config.architecture} family does not use, "
            f"e.g. {extra[0]!r}"
        )
    with torch.device("meta"):  # the shapes the config implies, no memory
        shapes = {name: p.shape for name, p in LlamaModel(config).state_dict().items()}
    for gguf_name, name in names.items():
        got, wanted = tuple(tensors[gguf_name].shape), tuple(shapes[name])
        if got != wanted:
            raise GGUFError(
                f"the GGUF file's tensor {gguf_name!r} has shape {got}; the file's "
                f"{config.architecture}.* keys imply {wanted}"
            )
    state = {}
    for gguf_name, name in names.items():
        tensor = tensors[gguf_name]
        state[name] = (tensor if reorder is None else reorder(gguf_name, tensor)).contiguous()
    return state


def state_dict(config: LlamaConfig, tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A Llama file's tensors as LlamaModel's parameters, the rotary rows un-permuted."""

    def reorder(gguf_name: str, tensor: Tensor) -> Tensor:
        if gguf_name.endswith(".attn_q.weight"):
            return unpermute_rotary_rows(tensor, config.num_heads)
        if gguf_name.endswith(".attn_k.weight"):
            return unpermute_rotary_rows(tensor, config.num_kv_heads)
        return tensor

    return rename(config, tensors, LAYER_TENSORS, reorder)
