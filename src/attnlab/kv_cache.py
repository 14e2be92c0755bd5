"""A key/value cache: decoding one token at a time without recomputing the past.

In causal self-attention a token's key and value never change once computed (later
tokens cannot influence earlier ones). A decoder that generates text token by token can
therefore keep them: each step projects only the new token(s) and attends over the
cached keys and values plus its own. [`KVCache`][attnlab.KVCache] holds them for one
attention layer.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._validation import (
    check_floating,
    check_min_rank,
    check_positive_int,
    check_same_device,
    format_shape,
)

__all__ = ["KVCache", "kv_cache_bytes_per_token"]


def kv_cache_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype = torch.bfloat16
) -> int:
    """Bytes a model's KV cache holds per token: ``2 * layers * Hkv * D`` numbers.

    Every layer keeps one key and one value of width ``head_dim`` per key/value head
    for every token, whatever the number of query heads.

    Args:
        num_layers: Attention layers of the model.
        num_kv_heads: Key/value heads ``Hkv`` per layer (``H`` for multi-head attention,
            ``1`` for multi-query attention).
        head_dim: Width ``D`` of a head.
        dtype: The cache's number format (16-bit by default).

    Returns:
        The bytes per token, keys and values of every layer together.
    """
    layers = check_positive_int("num_layers", num_layers)
    kv_heads = check_positive_int("num_kv_heads", num_kv_heads)
    width = check_positive_int("head_dim", head_dim)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype; got {type(dtype).__name__} {dtype!r}")
    return 2 * layers * kv_heads * width * dtype.itemsize


class KVCache:
    """The keys and values of the tokens seen so far, for one attention layer.

    ``cache = KVCache()`` starts empty; ``keys, values = cache.append(new_keys,
    new_values)`` adds a chunk of positions at the end and returns everything cached.
    ``len(cache)`` is the number of positions held, which is also the position of the
    next token.

    Shape:
        keys and values: ``(B, Hkv, S, D)``; a chunk: ``(B, Hkv, T, D)``.
    """

    def __init__(self) -> None:
        self.keys: Tensor | None = None
        self.values: Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values."""
        if self.keys is None or self.values is None:
            return 0
        return self.keys.nbytes + self.values.nbytes

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Add a chunk's keys and values after the cached ones; return all of them.

        Args:
            keys: The new positions' keys.
            values: The new positions' values.

        Returns:
            ``(keys, values)`` of every position so far.

        Shape:
            keys, values: ``(..., T, D)``; outputs: ``(..., S + T, D)``.
        """
        keys = check_floating("keys", keys)
        values = check_floating("values", values)
        check_min_rank("keys", keys, 2, "(..., T, D)")
        check_same_device("values", values, keys, "keys")
        if values.shape[:-1] != keys.shape[:-1]:
            raise ValueError(
                f"values must have shape (..., T, Dv) with the batch and length of keys "
                f"{format_shape(keys.shape)}; got shape {format_shape(values.shape)}"
            )
        if self.keys is None or self.values is None:
            self.keys, self.values = keys, values
        else:
            check_same_device("keys", keys, self.keys, "the cached keys")
            if keys.dtype != self.keys.dtype or values.dtype != self.values.dtype:
                raise TypeError(
                    f"keys and values must have the cached dtype {self.keys.dtype}; "
                    f"got {keys.dtype} and {values.dtype}"
                )
            if keys.shape[:-2] != self.keys.shape[:-2] or keys.shape[-1] != self.keys.shape[-1]:
                raise ValueError(
                    f"keys must have shape (..., T, D) matching the cache's "
                    f"{format_shape(self.keys.shape)} but for T; got {format_shape(keys.shape)}"
                )
            self.keys = torch.cat([self.keys, keys], dim=-2)
            self.values = torch.cat([self.values, values], dim=-2)
        return self.keys, self.values
