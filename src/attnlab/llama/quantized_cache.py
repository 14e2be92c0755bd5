"""A quantised key/value cache: keys and values stored in GGUF's 8-bit and 4-bit blocks.

The cache of a long conversation can outgrow the model's weights, and llama.cpp can
store it in the formats it stores weights in (``--cache-type-k``, ``--cache-type-v``).
Each row of ``D`` numbers (one key or one value of one head) is cut into blocks of 32:

* ``"q8_0"``: one float16 scale ``d = max|x| / 127`` and 32 signed bytes ``round(x / d)``:
  34 bytes per 32 numbers;
* ``"q4_0"``: one float16 scale (the block's largest magnitude over -8) and 32 four-bit
  codes: 18 bytes per 32 numbers;
* ``"q4_1"``: a float16 scale and a float16 minimum, 32 four-bit codes: 20 bytes;
* ``"f16"``: float16, 64 bytes per 32 numbers (llama.cpp's default cache);
* ``"fp8_e4m3"``: one byte per number, PyTorch's ``float8_e4m3fn`` with a scale of 1
  (vLLM's ``fp8`` cache without calibrated scales), saturated at its largest, 448.

The GGUF formats are the ``gguf`` library's own (its ``gguf.quants`` module quantises and
dequantises, bit-exact with ggml): a
[`QuantizedKVCache`][attnlab.llama.quantized_cache.QuantizedKVCache] keeps only the
packed bytes and returns the dequantised keys and values to the attention, keys and
values each in their own format (or unquantised).

Shape legend: ``B`` batch, ``Hkv`` key/value heads, ``S`` cached positions, ``T`` new
ones, ``D`` head width (a multiple of 32 for the block formats).
"""

from __future__ import annotations

from typing import Any, Literal, cast, get_args

import numpy as np
import torch
from gguf import GGMLQuantizationType, quants
from torch import Tensor, nn

from .._validation import check_floating, format_shape
from ..kv_cache import Cache
from .experiments import mean_loss
from .model import DecoderBlock, LlamaModel

__all__ = [
    "CacheFormat",
    "QuantizedKVCache",
    "attention_errors",
    "cache_format_loss",
    "quantize_dequantize",
    "quantized_caches",
]

CacheFormat = Literal["f16", "q8_0", "q4_1", "q4_0", "fp8_e4m3"]
"""The number formats a cache can store keys or values in (GGUF's names, and vLLM's FP8)."""

FORMATS: tuple[str, ...] = get_args(CacheFormat)
_GGML = {
    "f16": GGMLQuantizationType.F16,
    "q8_0": GGMLQuantizationType.Q8_0,
    "q4_1": GGMLQuantizationType.Q4_1,
    "q4_0": GGMLQuantizationType.Q4_0,
}
_FP8_MAX = torch.finfo(torch.float8_e4m3fn).max  # 448


def _check_format(name: str, fmt: object) -> CacheFormat | None:
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"{name} must be None or one of {', '.join(FORMATS)}; got {fmt!r}")
    return cast(CacheFormat | None, fmt)


def _pack(x: Tensor, fmt: CacheFormat) -> np.ndarray:
    """``x (..., D)`` in ``fmt``'s bytes, ``(..., bytes per row)`` (float16: 2 bytes each)."""
    if fmt == "fp8_e4m3":  # saturate, as GPU kernels do, rather than overflow to NaN
        fp8 = x.detach().cpu().float().clamp(-_FP8_MAX, _FP8_MAX).to(torch.float8_e4m3fn)
        return fp8.view(torch.uint8).numpy()
    if fmt != "f16" and x.shape[-1] % 32:
        raise ValueError(
            f"keys and values must have a width D divisible by 32 for {fmt!r} "
            f"(blocks of 32); got shape {format_shape(x.shape)}"
        )
    packed: np.ndarray = quants.quantize(x.detach().cpu().float().numpy(), _GGML[fmt])
    return packed.view(np.uint8)


def _unpack(packed: np.ndarray, fmt: CacheFormat, like: Tensor) -> Tensor:
    """The numbers ``_pack`` stored, as a tensor of ``like``'s dtype and device."""
    if fmt == "fp8_e4m3":
        fp8 = torch.from_numpy(np.ascontiguousarray(packed)).view(torch.float8_e4m3fn)
        return fp8.to(like.device, like.dtype)
    data = packed.view(np.float16) if fmt == "f16" else packed
    numbers = quants.dequantize(data, _GGML[fmt])
    return torch.from_numpy(np.ascontiguousarray(numbers)).to(like.device, like.dtype)


def quantize_dequantize(x: Tensor, fmt: CacheFormat) -> Tensor:
    """``x`` stored in ``fmt`` and read back: what a quantised cache returns for it.

    Args:
        x: Floating numbers, rows of ``D`` along the last dim.
        fmt: One of ``"f16"``, ``"q8_0"``, ``"q4_1"``, ``"q4_0"``, ``"fp8_e4m3"``.

    Returns:
        The dequantised numbers, shaped and typed like ``x``.

    Raises:
        TypeError: ``x`` is not a floating tensor.
        ValueError: An unknown format, or ``D`` not a multiple of 32 for a block format.
    """
    x = check_floating("x", x)
    fmt_ = _check_format("fmt", fmt)
    if fmt_ is None:
        raise ValueError(f"fmt must be one of {', '.join(FORMATS)}; got None")
    return _unpack(_pack(x, fmt_), fmt_, x)


class QuantizedKVCache(Cache):
    """A [`Cache`][attnlab.Cache] that stores keys and values in GGUF formats or FP8.

    ``append`` packs the new positions (keys in ``keys_format``, values in
    ``values_format``; ``None`` keeps them as given) and returns every cached position
    dequantised: the attention reads what a quantised cache would hand it, the new
    positions included. Only the packed bytes are kept (``nbytes`` counts them).

    Args:
        keys_format: The keys' format, or ``None`` for unquantised keys.
        values_format: The values' format, or ``None`` for unquantised values.

    Shape:
        keys and values: ``(B, Hkv, S, D)``; a chunk: ``(B, Hkv, T, D)``.
    """

    def __init__(
        self, keys_format: CacheFormat | None = "q8_0", values_format: CacheFormat | None = "q8_0"
    ) -> None:
        self.keys_format = _check_format("keys_format", keys_format)
        self.values_format = _check_format("values_format", values_format)
        self._stored: list[tuple[Tensor | np.ndarray, Tensor | np.ndarray]] = []
        self._like: Tensor | None = None  # an empty tensor of the cache's dtype and device
        self._length = 0

    def __len__(self) -> int:
        return self._length

    @property
    def nbytes(self) -> int:
        """Bytes held: the packed keys and values."""
        return sum(k.nbytes + v.nbytes for k, v in self._stored)

    @property
    def batch_size(self) -> int | None:
        """``B`` of the cached keys (``None`` while empty)."""
        return None if not self._stored else self._stored[0][0].shape[0]

    @property
    def keys(self) -> Tensor | None:
        """Every cached key, dequantised: ``(B, Hkv, S, D)``."""
        return self._read(0, self.keys_format)

    @property
    def values(self) -> Tensor | None:
        """Every cached value, dequantised: ``(B, Hkv, S, D)``."""
        return self._read(1, self.values_format)

    def _read(self, which: int, fmt: CacheFormat | None) -> Tensor | None:
        if self._like is None:
            return None
        like = self._like
        chunks = [
            _unpack(cast(np.ndarray, stored[which]), fmt, like)
            if fmt is not None
            else cast(Tensor, stored[which])
            for stored in self._stored
        ]
        return torch.cat(chunks, dim=-2)

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Pack a chunk after the cached positions; return every position, dequantised.

        Raises:
            TypeError: Non-floating tensors, or a dtype other than the cached one.
            ValueError: Shapes other than ``(B, Hkv, T, D)`` matching the cache's, or a
                width not divisible by 32 for a block format.
        """
        keys = check_floating("keys", keys)
        values = check_floating("values", values)
        for name, x in (("keys", keys), ("values", values)):
            if x.dim() != 4 or x.shape[:-1] != keys.shape[:-1]:
                raise ValueError(
                    f"{name} must have shape (B, Hkv, T, D), values matching keys "
                    f"{format_shape(keys.shape)} but for D; got {format_shape(x.shape)}"
                )
        if self._like is not None:
            cached = cast(Tensor, self.keys)
            if keys.dtype != self._like.dtype or values.dtype != self._like.dtype:
                raise TypeError(f"keys and values must have the cached dtype {self._like.dtype}")
            if keys.shape[:2] != cached.shape[:2] or keys.shape[-1] != cached.shape[-1]:
                raise ValueError(
                    f"keys must have shape (B, Hkv, T, D) matching the cache's "
                    f"{format_shape(cached.shape)} but for T; got {format_shape(keys.shape)}"
                )
        stored_keys = keys if self.keys_format is None else _pack(keys, self.keys_format)
        stored_values = values if self.values_format is None else _pack(values, self.values_format)
        self._stored.append((stored_keys, stored_values))
        self._like = keys.new_empty(0)
        self._length += keys.shape[-2]
        return cast(Tensor, self.keys), cast(Tensor, self.values)


def quantized_caches(
    num_layers: int, keys_format: CacheFormat | None, values_format: CacheFormat | None
) -> list[QuantizedKVCache]:
    """One [`QuantizedKVCache`][attnlab.llama.quantized_cache.QuantizedKVCache] per layer.

    Pass it as ``model(ids, cache=...)`` in place of ``model.new_cache()``.
    """
    return [QuantizedKVCache(keys_format, values_format) for _ in range(num_layers)]


def cache_format_loss(
    model: LlamaModel,
    input_ids: Tensor,
    keys_format: CacheFormat | None,
    values_format: CacheFormat | None,
    start: int = 1,
) -> float:
    """The model's mean next-token loss (nats) when every layer's cache uses these formats.

    One pass over ``input_ids`` through
    [`quantized_caches`][attnlab.llama.quantized_cache.quantized_caches]: every query
    attends to the stored-and-read-back keys and values of its own and earlier
    positions, as it would when decoding token by token from a quantised cache. Scored
    by [`mean_loss`][attnlab.llama.experiments.mean_loss] on tokens ``start .. T-1``.

    Shape:
        input_ids: ``(T,)`` or ``(1, T)``.
    """
    ids = model.check_ids("input_ids", input_ids)
    caches = quantized_caches(len(model.layers), keys_format, values_format)
    with torch.no_grad():
        return mean_loss(model(ids, cache=caches), ids, start)


def attention_errors(
    model: LlamaModel, input_ids: Tensor, fmt: CacheFormat
) -> list[dict[str, float]]:
    """Per layer, what quantising only the keys or only the values does to its attention.

    The model runs once; each layer's attention is then called again on the very input
    it received, with a cache that quantises the keys (or the values) to ``fmt``, so the
    error of one layer is seen alone, not carried from the layers below.

    Returns:
        One dict per layer: ``keys_error`` and ``values_error``, the relative error
        ``|x' - x| / |x|`` of the stored keys and values; ``weights_change_keys``, the
        mean over query rows and heads of the total variation ``sum |w' - w| / 2``
        between the attention weights with quantised and exact keys (quantised values
        leave the weights as they are); ``output_change_keys`` and
        ``output_change_values``, the relative change of the layer's attention output.

    Shape:
        input_ids: ``(T,)`` or ``(1, T)``.
    """
    ids = model.check_ids("input_ids", input_ids)
    fmt_ = _check_format("fmt", fmt)
    if fmt_ is None:
        raise ValueError(f"fmt must be one of {', '.join(FORMATS)}; got None")
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def record(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        calls.append((args, {k: v for k, v in kwargs.items() if k != "need_weights"}))

    attentions = [cast(DecoderBlock, layer).attn for layer in model.layers]
    hooks = [attn.register_forward_pre_hook(record, with_kwargs=True) for attn in attentions]
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for hook in hooks:
            hook.remove()

    def relative(new: Tensor | None, old: Tensor | None) -> float:
        assert new is not None and old is not None  # the caches hold the sequence
        return float((new - old).norm() / old.norm())

    rows = []
    with torch.no_grad():
        for attn, (args, kwargs) in zip(attentions, calls, strict=True):
            runs = {}
            for name, formats in (
                ("exact", (None, None)),
                ("keys", (fmt_, None)),
                ("values", (None, fmt_)),
            ):
                cache = QuantizedKVCache(*formats)
                kwargs["cache"] = cache
                runs[name] = (attn(*args, **kwargs, need_weights=True), cache)
            (exact, exact_cache), (on_keys, keys_cache), (on_values, values_cache) = runs.values()
            rows.append(
                {
                    "keys_error": relative(keys_cache.keys, exact_cache.keys),
                    "values_error": relative(values_cache.values, exact_cache.values),
                    "weights_change_keys": float(
                        (on_keys.attn_weights - exact.attn_weights).abs().sum(-1).mean() / 2
                    ),
                    "output_change_keys": relative(on_keys.output, exact.output),
                    "output_change_values": relative(on_values.output, exact.output),
                }
            )
    return rows
