"""The key-selection part of the composed layer: sparse attention's choice of keys.

[`AttentionHeads`][attnlab.AttentionHeads] calls its ``selector`` after the mask rule:
the part chooses from the data which of the keys the mask allows each query attends
to, and returns the mask with the others hidden (DeepSeek-V3.2's
[`LightningIndexer`][attnlab.LightningIndexer]). It may keep entries of its own in the
call's cache.
"""

from __future__ import annotations

from torch import Tensor, nn

from .kv_cache import Cache

__all__ = ["KeySelection"]


class KeySelection(nn.Module):
    """What a key-selection part does for [`AttentionHeads`][attnlab.AttentionHeads]."""

    def check_cache(self, cache: object) -> None:
        """Refuse, before any arithmetic, a cache that cannot keep this part's entries."""

    def forward(
        self,
        layer: nn.Module,
        x: Tensor,
        mask: Tensor | None,
        is_causal: bool,
        *,
        offset: int,
        table: tuple[Tensor, Tensor] | None,
        cache: Cache | None,
    ) -> Tensor:
        """``mask`` with the keys not chosen hidden.

        Args:
            layer: The [`AttentionHeads`][attnlab.AttentionHeads] calling (its parts).
            x: The layer's input, ``(B, L, d_in)``.
            mask: The layer's mask, broadcastable to ``(B, H, L, S)``; ``None``: every
                key, or the causal rule if ``is_causal``.
            is_causal: Whether ``mask=None`` stands for the causal rule.
            offset: Positions in the cache before these queries.
            table: The call's rotary ``(cos, sin)`` (``position_embeddings``), if given.
            cache: The call's cache, already holding the layer's new entries.

        Returns:
            The mask, bool or float as given, hiding every key not chosen.
        """
        raise NotImplementedError
