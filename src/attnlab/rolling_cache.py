"""A rolling key/value buffer (Mistral 7B): a windowed layer's cache of ``W`` positions.

A layer with a sliding window of ``W`` never looks further back than ``W - 1``
positions, so its cache need only keep the last ``W``. Mistral's *rolling buffer*
stores them in ``W`` fixed slots and writes the keys and values of position ``p`` into
slot ``p mod W``, over the oldest ones: the memory stops growing once ``W`` positions
have been seen, however long the stream. [`RollingKVCache`][attnlab.RollingKVCache] is
that buffer as a cache part ([`Cache`][attnlab.Cache]): ``len(cache)`` still counts every
position seen (rotary positions keep counting), while ``append`` returns only the held
positions and the new chunk, oldest first, which the layer's end-aligned window rule
reads as it reads a full cache's last columns.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._validation import check_floating, check_min_rank, check_positive_int, format_shape
from .kv_cache import Cache

__all__ = ["RollingKVCache"]


class RollingKVCache(Cache):
    """The last ``window`` positions' keys and values, in ``window`` fixed slots.

    ``cache = RollingKVCache(window)`` starts empty; ``keys, values =
    cache.append(new_keys, new_values)`` returns the held positions (at most ``window``)
    followed by the chunk's, and keeps the last ``window`` of them. Give the layer the
    same ``window`` (or a smaller one): its queries then see exactly what they would
    see through a full [`KVCache`][attnlab.KVCache].

    Args:
        window: Positions kept ``W``.

    Attributes:
        keys: The slots ``(B, Hkv, W, D)`` (``None`` before the first chunk); slot
            ``p % W`` holds position ``p``.
        values: The slots ``(B, Hkv, W, Dv)``.

    Shape:
        a chunk: ``(B, Hkv, T, D)`` and ``(B, Hkv, T, Dv)``; ``append`` returns
        ``(B, Hkv, min(len, W) + T, D)`` and the same for values.
    """

    def __init__(self, window: int) -> None:
        self.window = check_positive_int("window", window)
        self.keys: Tensor | None = None
        self.values: Tensor | None = None
        self._seen = 0

    def __len__(self) -> int:
        return self._seen

    @property
    def nbytes(self) -> int:
        """Bytes of the slots: fixed from the first chunk on."""
        if self.keys is None or self.values is None:
            return 0
        return self.keys.nbytes + self.values.nbytes

    @property
    def batch_size(self) -> int | None:
        """``B`` of the slots (``None`` while empty or unbatched)."""
        return None if self.keys is None or self.keys.dim() < 4 else self.keys.shape[0]

    def held(self) -> tuple[Tensor, Tensor]:
        """The held positions' keys and values, oldest first (a copy, in order).

        Shape:
            outputs: ``(B, Hkv, min(len, W), D)`` and ``(B, Hkv, min(len, W), Dv)``.
        """
        if self.keys is None or self.values is None:
            raise ValueError("the cache holds nothing yet: append a chunk first")
        n = min(self._seen, self.window)
        slots = torch.arange(self._seen - n, self._seen, device=self.keys.device) % self.window
        return self.keys[..., slots, :], self.values[..., slots, :]

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Return the held positions then the chunk's; keep the last ``window`` of them.

        Shape:
            keys: ``(..., T, D)``; values: ``(..., T, Dv)``; outputs:
            ``(..., min(len, W) + T, ·)``.
        """
        keys = check_floating("keys", keys)
        values = check_floating("values", values)
        check_min_rank("keys", keys, 2, "(..., T, D)")
        if values.shape[:-1] != keys.shape[:-1] or values.device != keys.device:
            raise ValueError(
                f"values must have shape (..., T, Dv) with the batch and length of keys "
                f"{format_shape(keys.shape)}, on {keys.device}; got shape "
                f"{format_shape(values.shape)} on {values.device}"
            )
        W, T = self.window, keys.shape[-2]
        if self.keys is None or self.values is None:
            self.keys = keys.new_empty(*keys.shape[:-2], W, keys.shape[-1])
            self.values = values.new_empty(*values.shape[:-2], W, values.shape[-1])
            old_keys, old_values = keys[..., :0, :], values[..., :0, :]
        else:
            for name, new, slots in (("keys", keys, self.keys), ("values", values, self.values)):
                if (
                    new.shape[:-2] != slots.shape[:-2]
                    or new.shape[-1] != slots.shape[-1]
                    or new.dtype != slots.dtype
                    or new.device != slots.device
                ):
                    raise ValueError(
                        f"{name} must match the cache's {format_shape(slots.shape)} "
                        f"{slots.dtype} on {slots.device} but for T; got "
                        f"{format_shape(new.shape)} {new.dtype} on {new.device}"
                    )
            old_keys, old_values = self.held()
        out_keys = torch.cat([old_keys, keys], dim=-2)  # (..., min(len, W) + T, D)
        out_values = torch.cat([old_values, values], dim=-2)
        kept = min(T, W)  # the chunk's last positions overwrite the oldest slots
        slots = torch.arange(self._seen + T - kept, self._seen + T, device=keys.device) % W
        self.keys[..., slots, :] = keys[..., T - kept :, :]
        self.values[..., slots, :] = values[..., T - kept :, :]
        self._seen += T
        return out_keys, out_values

    def __repr__(self) -> str:
        return f"RollingKVCache(window={self.window}, seen={self._seen})"
