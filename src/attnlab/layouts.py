"""Layer layouts of open models: which layers see how far back, and the cache each keeps.

A model is a list of layers, each of one type, in transformers' names (``layer_types``):

* ``"full_attention"``: every past token, so the cache grows with the text;
* ``"sliding_attention"``: the last ``window`` positions, the token itself included
  (``i - j < window``), so a rolling cache stops growing at ``window``;
* ``"linear_attention"``: a Gated DeltaNet layer, whose state has one size whatever the
  length: a ``Dk x Dv`` matrix per value head, kept in float32 as transformers keeps it,
  and the last ``kernel - 1`` inputs of its short convolution, in the model's dtype.

[`OPEN_MODEL_LAYOUTS`][attnlab.OPEN_MODEL_LAYOUTS] holds the sizes of a few published
models, each with where the numbers come from;
[`ModelLayout.cache_bytes`][attnlab.ModelLayout.cache_bytes] counts what they keep.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._validation import check_positive_int

__all__ = ["LAYER_TYPES", "OPEN_MODEL_LAYOUTS", "LinearStateSizes", "ModelLayout"]

LAYER_TYPES = ("full_attention", "sliding_attention", "linear_attention")
"""The layer types a layout may hold, in transformers' names."""


@dataclass(frozen=True)
class LinearStateSizes:
    """The sizes of a Gated DeltaNet layer's state (transformers' ``linear_*`` keys).

    Attributes:
        num_key_heads: ``linear_num_key_heads``.
        num_value_heads: ``linear_num_value_heads``; each keeps a ``Dk x Dv`` matrix.
        key_head_dim: ``linear_key_head_dim`` ``Dk``.
        value_head_dim: ``linear_value_head_dim`` ``Dv``.
        conv_kernel: ``linear_conv_kernel_dim``; the convolution keeps ``kernel - 1``
            past inputs of width ``2 * num_key_heads * Dk + num_value_heads * Dv``.
        state_dtype: The matrix state's dtype, float32 whatever the model's (transformers
            casts to float32 before the delta rule, and FLA's kernels return it so).
    """

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    state_dtype: torch.dtype = torch.float32

    def matrix_numbers(self) -> int:
        """Numbers in the matrix state: ``Dk x Dv`` per value head."""
        return self.num_value_heads * self.key_head_dim * self.value_head_dim

    def conv_numbers(self) -> int:
        """Numbers in the convolution's state: its last ``kernel - 1`` inputs."""
        conv_width = 2 * self.num_key_heads * self.key_head_dim
        conv_width += self.num_value_heads * self.value_head_dim
        return conv_width * (self.conv_kernel - 1)

    def numbers(self) -> int:
        """Numbers one layer keeps: the matrix state and the convolution's inputs."""
        return self.matrix_numbers() + self.conv_numbers()

    def nbytes(self, dtype: torch.dtype = torch.bfloat16) -> int:
        """Bytes one layer keeps: the matrix in ``state_dtype``, the convolution in ``dtype``."""
        return (
            self.matrix_numbers() * self.state_dtype.itemsize + self.conv_numbers() * dtype.itemsize
        )


@dataclass(frozen=True)
class ModelLayout:
    """One model's list of layer types and the sizes its caches depend on.

    Attributes:
        name: The model's name.
        layer_types: One type per layer, in ``LAYER_TYPES``.
        num_kv_heads: Key/value heads of each softmax layer ``Hkv``.
        head_dim: Width ``D`` of a key or value head.
        window: Positions a ``"sliding_attention"`` layer sees (``None``: no such layer).
        linear: Sizes of the ``"linear_attention"`` layers (``None``: no such layer).
        rotary: Per layer, whether it rotates (SmolLM3 leaves every fourth unrotated).
        source: Where the sizes come from.
    """

    name: str
    layer_types: tuple[str, ...]
    num_kv_heads: int
    head_dim: int
    window: int | None = None
    linear: LinearStateSizes | None = None
    rotary: tuple[bool, ...] | None = None
    source: str = ""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.layer_types) - set(LAYER_TYPES))
        if unknown:
            raise ValueError(f"layer_types must be in {LAYER_TYPES}; got {unknown}")
        for kind, field in (("sliding_attention", "window"), ("linear_attention", "linear")):
            if kind in self.layer_types and getattr(self, field) is None:
                raise ValueError(f"a layout with {kind} layers needs {field}; got None")

    def count(self, layer_type: str) -> int:
        """How many layers are of ``layer_type``."""
        return self.layer_types.count(layer_type)

    def layer_numbers(self, layer_type: str, tokens: int) -> int:
        """Numbers one layer of ``layer_type`` keeps after ``tokens`` tokens."""
        tokens = check_positive_int("tokens", tokens)
        per_token = 2 * self.num_kv_heads * self.head_dim  # a key and a value per kv head
        if layer_type == "full_attention":
            return per_token * tokens
        if layer_type == "sliding_attention" and self.window is not None:
            return per_token * min(tokens, self.window)
        if layer_type == "linear_attention" and self.linear is not None:
            return self.linear.numbers()
        raise ValueError(f"layer_type must be one of this layout's types; got {layer_type!r}")

    def layer_bytes(self, layer_type: str, tokens: int, dtype: torch.dtype = torch.bfloat16) -> int:
        """Bytes one layer of ``layer_type`` keeps after ``tokens`` tokens in ``dtype``.

        A linear layer's matrix state counts in its own ``state_dtype``.
        """
        numbers = self.layer_numbers(layer_type, tokens)  # checks tokens and the type
        if layer_type == "linear_attention" and self.linear is not None:
            return self.linear.nbytes(dtype)
        return numbers * dtype.itemsize

    def cache_bytes(self, tokens: int, dtype: torch.dtype = torch.bfloat16) -> dict[str, int]:
        """Bytes kept after ``tokens`` tokens, per layer type present, and ``"total"``."""
        by_type = {
            kind: self.count(kind) * self.layer_bytes(kind, tokens, dtype)
            for kind in LAYER_TYPES
            if kind in self.layer_types
        }
        return {**by_type, "total": sum(by_type.values())}

    def all_full_bytes(self, tokens: int, dtype: torch.dtype = torch.bfloat16) -> int:
        """Bytes if every layer were full attention of the same sizes."""
        layers = len(self.layer_types)
        return layers * self.layer_numbers("full_attention", tokens) * dtype.itemsize


def _every_nth(n: int, layers: int, other: str, nth: str = "full_attention") -> tuple[str, ...]:
    """Layers ``n - 1, 2n - 1, ...`` (from zero) of type ``nth``, the rest ``other``."""
    return tuple(nth if (i + 1) % n == 0 else other for i in range(layers))


_QWEN_LINEAR = LinearStateSizes(16, 32, 128, 128, 4)

OPEN_MODEL_LAYOUTS: dict[str, ModelLayout] = {
    layout.name: layout
    for layout in (
        ModelLayout(
            "Gemma 3 1B",
            _every_nth(6, 26, "sliding_attention"),
            1,
            256,
            window=512,
            source="google/gemma-3-1b-pt config.json: 26 layers, sliding_window_pattern 6",
        ),
        ModelLayout(
            "Gemma 3 27B",
            _every_nth(6, 62, "sliding_attention"),
            16,
            128,
            window=1024,
            source="google/gemma-3-27b-pt config.json (text_config): 62 layers, pattern 6",
        ),
        ModelLayout(
            "gpt-oss-20b",
            _every_nth(2, 24, "sliding_attention"),
            8,
            64,
            window=128,
            source="openai/gpt-oss-20b config.json: layer_types alternate, sliding first",
        ),
        ModelLayout(
            "SmolLM3-3B",
            ("full_attention",) * 36,
            4,
            128,
            rotary=tuple((i + 1) % 4 != 0 for i in range(36)),
            source="HuggingFaceTB/SmolLM3-3B config.json: no_rope_layer_interval 4",
        ),
        ModelLayout(
            "Olmo 3 7B",
            _every_nth(4, 32, "sliding_attention"),
            32,
            128,
            window=4096,
            source="transformers 5.25 Olmo3Config defaults (allenai/Olmo-3-7B-Instruct)",
        ),
        ModelLayout(
            "Qwen3.5 (9B style)",
            _every_nth(4, 32, "linear_attention"),
            4,
            256,
            linear=_QWEN_LINEAR,
            source="transformers 5.25 Qwen3_5TextConfig defaults ('Qwen3.5-9B style')",
        ),
        ModelLayout(
            "Qwen3-Next 80B-A3B",
            _every_nth(4, 48, "linear_attention"),
            2,
            256,
            linear=_QWEN_LINEAR,
            source="Qwen/Qwen3-Next-80B-A3B-Instruct config.json and model card",
        ),
    )
}
"""A few published models' layouts, by name; each says where its sizes come from."""
