"""The Llama family in GGUF (``general.architecture = "llama"``): SmolLM2, TinyLlama, Llama 3.x.

Its facts (the ``llama.*`` metadata keys, llama.cpp's tensor names) are in ``llama.json``,
read by [`description`][attnlab.llama.families.description]; this module adds its layer's
parts and the rules the description states in words. One thing needs undoing: llama.cpp
pairs the rotary coordinates of a head as neighbours, we (and Hugging Face) as halves, so
the converter stored the query and key rows reordered
([`unpermute_rotary_rows`][attnlab.llama.unpermute_rotary_rows]). Llama 3.1 to 3.3 files
carry their rotary scaling as a tensor of factors (``rope_freqs.weight``), read back into
a [`Llama3Scaling`][attnlab.Llama3Scaling].

The Qwen families ([`qwen2`][attnlab.llama.families.qwen2],
[`qwen3`][attnlab.llama.families.qwen3]) are this layout plus their own parts.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import torch
from torch import Tensor

from ...layer_parts import PartialRotary
from ...positions import Positions
from ...rope_scaling import Llama3Scaling
from ...rotary import RotaryEmbedding
from ..blocks import LayerParts
from ..config import LlamaConfig
from ..gguf_file import GGUFError
from .description import describe, read_metadata, rename, rope_scaling

__all__ = [
    "ARCHITECTURE",
    "LAYER_KINDS",
    "Rotaries",
    "config_from_gguf",
    "layer_parts",
    "llama3_factors",
    "llama3_scaling",
    "read_config",
    "softmax_layer",
    "state_dict",
    "unpermute_rotary_rows",
]

ARCHITECTURE = "llama"
# the layer kinds this layout builds: its files' full layers, and windows when a config
# sets sliding_window (Mistral's; the sliding-window chapter's)
LAYER_KINDS = ("full_attention", "sliding_attention")
UNPERMUTE = re.compile(r"unpermute_rotary_rows\((\w+)\)")  # its argument: a heads field
CONFIG_FIELDS = frozenset(field.name for field in dataclasses.fields(LlamaConfig))
# the unembedding, present only where it is not tied (the description's optional tensor)
OUTPUT = next(
    row["name"] for row in describe(ARCHITECTURE)["tensors"]["model"] if row.get("optional")
)
# Llama 3.1 to 3.3: each rotary pair's frequency divided by a factor (llama3 scaling)
ROPE_FREQS: str = describe(ARCHITECTURE)["rope_freqs"]["tensor"]


class Rotaries(NamedTuple):
    """The model's rotary parts, each shared by the layers that use it.

    Attributes:
        main: The rotary of ``rope_theta`` (with ``rope_scaling``), of width
            ``rotary_dim``.
        local: Gemma 3's sliding layers' rotary of ``rope_local_theta``, unscaled
            (``None`` elsewhere).
    """

    main: RotaryEmbedding
    local: RotaryEmbedding | None = None

    @staticmethod
    def positions(rotary: RotaryEmbedding, head_dim: int) -> Positions:
        """``rotary`` over a head of ``head_dim``: itself, or partial over the first features."""
        return rotary if rotary.head_dim == head_dim else PartialRotary(rotary, head_dim)


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

    Raises:
        GGUFError: Factors of the wrong length (its shape named as the other tensors'),
            none >= 1, or not Llama 3.1's (each naming the tensor).
    """
    if factors.shape != (head_dim // 2,):
        raise GGUFError(
            f"the GGUF file's tensor {ROPE_FREQS!r} has shape {tuple(factors.shape)}; the "
            f"file's {ARCHITECTURE}.* keys imply {(head_dim // 2,)}"
        )
    if not float(factors.max()) >= 1.0:
        raise GGUFError(
            f"the GGUF file's {ROPE_FREQS} must hold factors >= 1 (Llama 3.1's rotary "
            f"scaling); got a largest factor of {float(factors.max())!r}"
        )
    scaling = Llama3Scaling(float(factors.max()))
    expected = llama3_factors(scaling, head_dim, theta)
    if not torch.allclose(factors, expected, rtol=1e-5):
        raise GGUFError(
            f"the GGUF file's {ROPE_FREQS} are not Llama 3.1's rotary scaling (factor "
            f"{scaling.factor:g}, low_freq_factor 1, high_freq_factor 4, 8192 positions), "
            f"the one attnlab.llama reads"
        )
    return scaling


def read_config(
    metadata: Mapping[str, Any], tensors: Mapping[str, Tensor], arch: str, **family: Any
) -> LlamaConfig:
    """The config the family's description reads from the ``<arch>.*`` keys.

    The rows of ``<arch>.json`` are read in order (types, defaults, refusals), then the
    rules they state in words are checked: ``block_count`` the blocks present, the kv
    heads dividing the heads, an even head width, ``value_length`` equal to it, the
    rotary width (Llama: the whole head, else refused as llama.cpp refuses it; the
    others: at most the head, fewer = partial rotary). ``family`` sets further fields.
    """
    description = describe(arch)
    values = read_metadata(description, metadata, tensors)
    key = {k.removeprefix("key:"): v for k, v in values.items() if k.startswith("key:")}
    fields = {f: values[f] for f in key if f in CONFIG_FIELDS}
    num_layers = fields["num_layers"]
    blocks = {name.split(".")[1] for name in tensors if name.startswith("blk.")}
    if num_layers != len(blocks):
        raise GGUFError(
            f"the GGUF's {key['num_layers']} is {num_layers}, but the file holds tensors of "
            f"{len(blocks)} block(s)"
        )
    mtp = values.get("mtp_layers", 0)  # Qwen3.5's prediction layers: counted, not read
    if mtp >= num_layers:
        raise GGUFError(
            f"the GGUF's {key['mtp_layers']} ({mtp}) must be less than {key['num_layers']} "
            f"({num_layers})"
        )
    fields["num_layers"] = num_layers - mtp
    for block in range(num_layers - mtp, num_layers):  # each MTP block: llama.cpp's tensors
        for row in description.get("mtp_blocks", {}).get("required", []):
            name = row.replace("{i}", str(block))
            if name not in tensors:
                raise GGUFError(
                    f"the GGUF's {key['mtp_layers']} is {mtp}, so block {block} is a "
                    f"multi-token-prediction block; it lacks its tensor {name!r}"
                )
    H, Hkv, D = fields["num_heads"], fields["num_kv_heads"], fields["head_dim"]
    if H % Hkv:
        raise GGUFError(
            f"the GGUF's {key['num_heads']} ({H}) must be a multiple of "
            f"{key['num_kv_heads']} ({Hkv})"
        )
    if D % 2:
        raise GGUFError(f"the GGUF's head width must be even (rotary pairs); got {D}")
    if values["value_length"] != D:
        raise GGUFError(
            f"the GGUF's {key['value_length']} ({values['value_length']}) must equal the "
            f"head width {D}; attnlab.llama reads equal widths"
        )
    R = fields["rotary_dim"]
    if description["rotary_rows"]["order"] == "neighbour_pairs" and R != D:  # llama.cpp's rule
        raise GGUFError(
            f"the GGUF's {key['rotary_dim']} ({R}) must equal the head width {D} "
            f"(llama.cpp refuses it too: invalid n_rot)"
        )
    if R % 2 or R > D:
        raise GGUFError(
            f"the GGUF's {key['rotary_dim']} must be even and at most the head width {D}; got {R}"
        )
    scaling = rope_scaling(values)
    if describe(arch).get("rope_freqs") and ROPE_FREQS in tensors:  # else: an unused tensor
        if scaling is not None:
            raise GGUFError(
                f"the GGUF file has both {ROPE_FREQS} and {key['scaling_type']} "
                f"{values['scaling_type']!r} (factor {values['scaling_factor']:g}); "
                f"attnlab.llama reads one rotary scaling"
            )
        scaling = llama3_scaling(tensors[ROPE_FREQS], D, fields["rope_theta"])
    fields.update(rope_scaling=scaling, tie_word_embeddings=OUTPUT not in tensors)
    return LlamaConfig(**fields, architecture=arch, **family)


def config_from_gguf(metadata: Mapping[str, Any], tensors: Mapping[str, Tensor]) -> LlamaConfig:
    """A Llama file's config, from its ``llama.*`` keys (and Llama 3.1's ``rope_freqs``)."""
    return read_config(metadata, tensors, ARCHITECTURE)  # layer_types None: all full


def layer_parts(config: LlamaConfig, index: int, rotaries: Rotaries) -> LayerParts:
    """Layer ``index``: RMSNorm, grouped-query attention (no biases), RMSNorm, SwiGLU."""
    return softmax_layer(config, index, rotaries)


def softmax_layer(
    config: LlamaConfig,
    index: int,
    rotaries: Rotaries,
    *,
    bias: bool = False,
    qk_norm: bool = False,
) -> LayerParts:
    """A Llama-layout layer, with q/k/v biases (Qwen2) or q/k norms (Qwen3) if asked.

    A ``"sliding_attention"`` layer sees the last ``sliding_window`` positions.
    """
    rotary = rotaries.positions(rotaries.main, config.head_dim)
    kind = config.types()[index]
    return LayerParts.llama(config, rotary, kind=kind, bias=bias, qk_norm=qk_norm)


def state_dict(config: LlamaConfig, tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A Llama file's tensors as the model's parameters, the rotary rows un-permuted."""

    def transform(row: dict[str, Any], tensor: Tensor) -> dict[str, Tensor]:
        heads = UNPERMUTE.fullmatch(row.get("transform", ""))  # the description's rows
        if heads is not None:
            wanted = (getattr(config, heads[1]) * config.head_dim, config.d_model)
            if tuple(tensor.shape) != wanted:  # refused by name before un-permuting
                raise GGUFError(
                    f"the GGUF file's tensor {row['name']!r} has shape {tuple(tensor.shape)}; "
                    f"the file's {config.architecture}.* keys imply {wanted}"
                )
            tensor = unpermute_rotary_rows(tensor, getattr(config, heads[1]))
        return {row["part"]: tensor}

    used = frozenset({ROPE_FREQS} if isinstance(config.rope_scaling, Llama3Scaling) else ())
    return rename(config, tensors, transform, used)
