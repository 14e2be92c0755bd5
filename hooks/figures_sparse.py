"""The figure of "Sparse attention": which keys each query keeps after the lightning indexer.

Registered with ``@figure`` (``hooks/figure_registry.py``) and drawn by the figures hook.
"""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

import attnlab
from hooks import diagrams
from hooks.figure_kit import seeded
from hooks.figure_registry import figure

#: The page's running example: eleven tokens, each query keeping its four best keys.
TOKENS, TOPK = 11, 4


def kept_keys() -> tuple[torch.Tensor, torch.Tensor]:
    """The causal rule and the keys the page's tiny sparse layer keeps, ``(T, T)`` each.

    The layer and input are those of the page's first example (seed 0): a
    ``MultiHeadLatentAttention`` with a ``LightningIndexer`` of ``index_topk = 4``; a key
    is kept where the layer's attention weights are not zero.
    """

    def build() -> tuple[attnlab.MultiHeadLatentAttention, torch.Tensor]:
        layer = attnlab.MultiHeadLatentAttention(
            d_model=32, num_heads=4, kv_lora_rank=16, qk_rope_head_dim=4,
            qk_nope_head_dim=8, v_head_dim=8, q_lora_rank=12,
            index_topk=TOPK, index_n_heads=8, index_head_dim=16,
        )  # fmt: skip
        return layer, torch.randn(1, TOKENS, 32)

    layer, x = seeded(0, build)
    with torch.no_grad():
        weights = layer(x, need_weights=True).attn_weights  # (1, H, T, T)
    assert weights is not None
    return attnlab.causal_mask(TOKENS), weights[0, 0] > 0


@figure("sparse-attention-keys", diagram=True)
def sparse_attention_keys() -> Figure:
    """Eleven tokens: the keys causal attention scores, and the four each query keeps.

    Tinted cells are scored by the main attention; faded cells are not, and a cross marks
    a key the indexer scored and dropped. Left, dense causal attention; right, the same
    layer with DeepSeek's indexer, ``index_topk = 4``.
    """
    allowed, kept = kept_keys()
    ink = diagrams.text_colour()
    fig, ax = diagrams.canvas(8.0, 4.6)
    cell = 0.55
    bounds = []
    panels = (("dense causal", allowed), (f"top {TOPK} by the indexer", kept))
    for p, (name, shown) in enumerate(panels):
        x0 = p * (TOKENS * cell + 1.6)
        grid = diagrams.matrix(
            ax,
            shown.float(),
            (x0, 0),
            role="weights",
            cell=(cell, cell),
            masked=~shown,
            show_values=False,
        )
        diagrams.label(
            ax,
            (x0 + TOKENS * cell / 2, TOKENS * cell + 0.45),
            f"{name}:\n{int(shown.sum())} scores",
            fontsize="medium",
        )
        bounds.append(grid)
    dropped = (allowed & ~kept).nonzero().tolist()  # scored by the indexer only: crossed
    for i, j in dropped:
        x, y = x0 + (j + 0.5) * cell, (TOKENS - i - 0.5) * cell
        ax.text(x, y, "×", ha="center", va="center", color=ink, fontsize="medium")
    diagrams.label(ax, (-0.2, TOKENS * cell / 2), "query", ha="right", fontsize="small")
    diagrams.label(ax, (TOKENS * cell / 2, -0.35), "key", fontsize="small")
    top = TOKENS * cell + 1.2
    diagrams.fit(ax, *bounds, diagrams.Bounds(-1.2, -0.6, bounds[-1].right, top))
    return fig
