"""Parts that 2025's open models add to the attention layer: an output gate, partial rotary.

* [`OutputGate`][attnlab.OutputGate] (Qwen3-Next, Qwen3.5; Qiu et al. 2025, "Gated
  Attention for Large Language Models"): each head's context vector is multiplied,
  feature by feature, by ``sigmoid(x W_gate)`` of the token's own input before the output
  projection, so a head can output almost nothing where it has nothing to add;
* [`PartialRotary`][attnlab.PartialRotary] (Qwen3-Next, Qwen3.5: a quarter of each head):
  rotary positions on the first features of each head, the rest unturned.

Each is a part of [`AttentionHeads`][attnlab.AttentionHeads] (``output_gate=`` and
``positions=``); attention sinks (gpt-oss) are the kernels' ``sinks``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ._validation import check_positive_int
from .positions import Positions
from .rotary import RotaryEmbedding

__all__ = ["OutputGate", "PartialRotary"]


class OutputGate(nn.Module):
    """Each head's context times ``sigmoid(gate_proj(x))``, before the output projection.

    Args:
        d_in: Width of a query token.
        num_heads: Query heads ``H``.
        head_dim: Width ``Dv`` of a head's context vector.
        bias: Give ``gate_proj`` a bias.

    Shape:
        context: ``(B, H, L, Dv)``; x: ``(B, L, d_in)``; output: ``(B, H, L, Dv)``.
    """

    def __init__(self, d_in: int, num_heads: int, head_dim: int, bias: bool = False) -> None:
        super().__init__()
        self.head_dim = check_positive_int("head_dim", head_dim)
        H = check_positive_int("num_heads", num_heads)
        self.gate_proj = nn.Linear(check_positive_int("d_in", d_in), H * head_dim, bias=bias)

    @staticmethod
    def split_rows(rows: Tensor, num_heads: int, head_dim: int) -> tuple[Tensor, Tensor]:
        """A projection whose rows are laid out per head as ``[q_h | gate_h]``, split.

        Qwen3-Next's and Qwen3.5's ``q_proj`` (and their GGUF query tensor) is twice as
        wide: each head's ``head_dim`` query rows then its ``head_dim`` gate rows.

        Shape:
            rows: ``(2 * H * D, ...)`` (a weight or a bias); outputs: ``(H * D, ...)`` each.
        """
        query, gate = rows.reshape(num_heads, 2, head_dim, -1).unbind(1)  # (H, D, ...) each
        shape = (num_heads * head_dim, *rows.shape[1:])
        return query.reshape(shape), gate.reshape(shape)

    def gate(self, x: Tensor) -> Tensor:
        """The gate of every head and feature, in ``(0, 1)``: ``(B, L, d_in) -> (B, H, L, Dv)``."""
        gates = torch.sigmoid(self.gate_proj(x))  # (B, L, H * Dv)
        return gates.view(*gates.shape[:-1], -1, self.head_dim).transpose(-3, -2)

    def forward(self, context: Tensor, x: Tensor) -> Tensor:
        """``context * gate(x)``: each head's output scaled feature by feature."""
        return context * self.gate(x)


class PartialRotary(Positions):
    """A rotary part on the first ``rotary.head_dim`` features of each head; the rest pass.

    Hugging Face's ``partial_rotary_factor``: Qwen3-Next and Qwen3.5 turn the first quarter
    of each head, pairing feature ``i`` with ``i + R / 2`` inside those ``R`` features
    (rotate-half on the rotated slice alone). ``rotary`` may be scaled
    ([`ScaledRotaryEmbedding`][attnlab.ScaledRotaryEmbedding]). Latent attention's
    decoupled rotary, by contrast, turns the *last* features (``RotaryEmbedding`` itself).

    Args:
        rotary: The rotary part of width ``R``.
        head_dim: Width ``D`` of the heads it turns, ``D > R``.
    """

    def __init__(self, rotary: RotaryEmbedding, head_dim: int) -> None:
        super().__init__()
        if not isinstance(rotary, RotaryEmbedding):
            raise TypeError(f"rotary must be a RotaryEmbedding; got {type(rotary).__name__}")
        self.head_dim = check_positive_int("head_dim", head_dim)
        if rotary.head_dim >= head_dim:
            raise ValueError(
                f"rotary must turn fewer features than head_dim = {head_dim}; "
                f"got rotary.head_dim = {rotary.head_dim}"
            )
        self.rotary = rotary

    def queries_keys(
        self,
        queries: Tensor,
        keys: Tensor,
        offset: int,
        table: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Turn the first ``R`` features of queries and keys to positions ``offset, ...``.

        ``table``: a model's ``(cos, sin)``, each ``(T, R)`` or ``(B, T, R)``.
        """
        R = self.rotary.head_dim
        turned_q, turned_k = self.rotary.queries_keys(
            queries[..., :R], keys[..., :R], offset, table
        )
        return (
            torch.cat([turned_q, queries[..., R:]], dim=-1),
            torch.cat([turned_k, keys[..., R:]], dim=-1),
        )

    def extra_repr(self) -> str:
        """The heads' width, shown by ``print(module)`` (the rotary part prints its own)."""
        return f"head_dim={self.head_dim}"
