"""Key/value caches: decoding token by token without recomputing the past.

A token's key and value never change once computed in causal attention, so a decoder
keeps them and each step projects only its new tokens. A cache is one of the parts of
the composed attention ([`AttentionHeads`][attnlab.AttentionHeads]); the protocol every
cache follows is [`Cache`][attnlab.Cache]'s; [`KVCache`][attnlab.KVCache] keeps
everything.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor

from ._validation import (
    check_floating,
    check_min_rank,
    check_positive_int,
    check_same_device,
    format_shape,
)

__all__ = ["Cache", "KVCache", "kv_cache_bytes_per_token", "mla_cache_bytes_per_token"]


def _check_dtype(dtype: object) -> torch.dtype:
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype; got {type(dtype).__name__} {dtype!r}")
    return dtype


def kv_cache_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype = torch.bfloat16
) -> int:
    """Bytes a model's KV cache holds per token: ``2 * layers * Hkv * D`` numbers.

    One key and one value per key/value head and layer, whatever the query heads
    (``num_kv_heads``: ``H`` for multi-head attention, ``1`` for multi-query).
    """
    layers = check_positive_int("num_layers", num_layers)
    kv_heads = check_positive_int("num_kv_heads", num_kv_heads)
    width = check_positive_int("head_dim", head_dim)
    return 2 * layers * kv_heads * width * _check_dtype(dtype).itemsize


def mla_cache_bytes_per_token(
    num_layers: int, kv_lora_rank: int, qk_rope_head_dim: int, dtype: torch.dtype = torch.bfloat16
) -> int:
    """Bytes latent attention caches per token: ``layers * (r + Dr)`` numbers.

    [`MultiHeadLatentAttention`][attnlab.MultiHeadLatentAttention] keeps one latent of
    width ``kv_lora_rank`` (``r``) and one shared rotary key of width
    ``qk_rope_head_dim`` (``Dr``) per token and layer, whatever the heads. DeepSeek-V2
    (``r = 4 D``, ``Dr = D / 2``) caches ``4.5 D`` numbers: grouped-query attention with
    2.25 groups.
    """
    layers = check_positive_int("num_layers", num_layers)
    rank = check_positive_int("kv_lora_rank", kv_lora_rank)
    rope = check_positive_int("qk_rope_head_dim", qk_rope_head_dim)
    return layers * (rank + rope) * _check_dtype(dtype).itemsize


class Cache(ABC):
    """The cache part's protocol: subclass it (or ``KVCache``) for a new cache.

    * ``len(cache)``: positions seen so far, the position of the next token (rotary
      and ALiBi count from it);
    * ``cache.append(keys, values)``: store a chunk's entries and return those its
      queries attend to, oldest first, the chunk's own last. A rolling buffer may
      return fewer than ``len(cache)`` positions (the layer then keeps the last columns
      of the caller's masks); a paged or quantised cache may store something else and
      return dense tensors;
    * ``nbytes`` and ``batch_size`` (``None`` while empty), which a model checks before
      any layer writes.

    What the entries are is the attention's business: multi-head and grouped-query
    attention append rotated keys ``(B, Hkv, T, D)`` and values ``(B, Hkv, T, Dv)``;
    latent attention its rotated shared key ``(B, 1, T, Dr)`` and latent ``(B, 1, T, r)``.
    """

    @abstractmethod
    def __len__(self) -> int:
        """Positions seen so far: the position of the next token."""

    @abstractmethod
    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Store a chunk; return the keys and values its queries attend to."""

    @property
    @abstractmethod
    def nbytes(self) -> int:
        """Bytes held."""

    @property
    def batch_size(self) -> int | None:
        """Rows held, or ``None`` while empty (or when the cache cannot tell)."""
        return None


class KVCache(Cache):
    """Every position's keys and values so far, for one attention layer.

    ``keys, values = cache.append(new_keys, new_values)`` adds a chunk at the end and
    returns everything cached; ``len(cache)`` counts the positions.

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

    @property
    def batch_size(self) -> int | None:
        """``B`` of the cached keys (``None`` while empty or unbatched)."""
        keys = self.keys
        return None if keys is None or keys.dim() < 4 else keys.shape[0]

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Add a chunk after the cached positions; return every position so far.

        Shape:
            keys: ``(..., T, D)``; values: ``(..., T, Dv)``; outputs ``(..., S + T, ·)``.
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
            for name, new, old in (("keys", keys, self.keys), ("values", values, self.values)):
                if new.shape[:-2] != old.shape[:-2] or new.shape[-1] != old.shape[-1]:
                    raise ValueError(
                        f"{name} must have shape (..., T, D) matching the cache's "
                        f"{format_shape(old.shape)} but for T; got {format_shape(new.shape)}"
                    )
            self.keys = torch.cat([self.keys, keys], dim=-2)
            self.values = torch.cat([self.values, values], dim=-2)
        return self.keys, self.values
