"""The figure of "Multi-head latent attention": what a token caches, expanded or absorbed.

Registered with ``@figure`` (``hooks/figure_registry.py``) and drawn by the figures hook.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from matplotlib.figure import Figure

import attnlab
from hooks import diagrams
from hooks.figure_registry import figure

#: DeepSeek-V3's attention sizes (its config.json; transformers' ``DeepseekV3Config``
#: defaults, checked in tests/site/test_figures_latent.py): the site's build installs no
#: transformers, so the figure does not read them from there.
DEEPSEEK_V3 = {
    "hidden_size": 7168, "num_attention_heads": 128, "kv_lora_rank": 512,
    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": 1536,
}  # fmt: skip


def deepseek_v3_shapes() -> dict[str, tuple[int, ...]]:
    """The tensors' shapes in one DeepSeek-V3 attention layer, read from the package's code.

    A ``MultiHeadLatentAttention`` of DeepSeek-V3's sizes (``DEEPSEEK_V3``) is built on the
    meta device (shapes only, no memory); one token goes through a ``LatentCache``, then
    the cached entries through the projections part's ``kernel_inputs``, naive and absorbed.
    """
    c = SimpleNamespace(**DEEPSEEK_V3)
    with torch.device("meta"), torch.no_grad():
        layer = attnlab.MultiHeadLatentAttention(
            c.hidden_size, c.num_attention_heads, c.kv_lora_rank, c.qk_rope_head_dim,
            c.qk_nope_head_dim, c.v_head_dim, q_lora_rank=c.q_lora_rank,
        )  # fmt: skip
        cache = attnlab.LatentCache()
        x = torch.empty(1, 1, c.hidden_size)
        layer(x, cache=cache)
        assert cache.rope_keys is not None and cache.latent is not None
        parts = layer.projections
        queries = parts.queries(x)  # (1, H, 1, Dn + Dr)
        _, keys, values = parts.kernel_inputs(queries, cache.rope_keys, cache.latent)
        parts.absorb = True
        absorbed, latent_keys, _ = parts.kernel_inputs(queries, cache.rope_keys, cache.latent)
    return {
        "x": tuple(x.shape[-1:]),
        "latent": tuple(cache.latent.shape[-1:]),
        "rope_keys": tuple(cache.rope_keys.shape[-1:]),
        "keys": (keys.shape[1], keys.shape[-1]),  # (H, Dn + Dr)
        "values": (values.shape[1], values.shape[-1]),  # (H, Dv)
        "queries": (queries.shape[1], queries.shape[-1]),
        "absorbed": (absorbed.shape[1], absorbed.shape[-1]),  # (H, r + Dr)
        "latent_keys": (latent_keys.shape[1], latent_keys.shape[-1]),  # (1, r + Dr)
    }


@figure("latent-attention", diagram=True)
def latent_attention() -> Figure:
    """One token of a DeepSeek-V3 layer: what it caches, expanded or absorbed.

    The cached latent and rotary key; expanded into every head's keys and values
    (naive), or attended over directly with ``W_UK`` folded into the queries (absorbed).
    """
    s = deepseek_v3_shapes()
    r, Dr = s["latent"][0], s["rope_keys"][0]
    H, Dk = s["keys"]
    fig, ax = diagrams.canvas(6.0, 7.0)
    ink = diagrams.text_colour()
    big = "large"
    bounds = [diagrams.Bounds(-0.3, -0.6, 10.9, 15.9)]

    def box(xy: tuple[float, float], text: str, role: str, width: float = 4.2) -> diagrams.Bounds:
        b = diagrams.operator(ax, xy, text, role=role, size=(width, 1.3), fontsize=big)
        bounds.append(b)
        return b

    def heading(xy: tuple[float, float], text: str) -> None:
        diagrams.label(ax, xy, text, ha="left", va="top", fontsize=big, role="input")

    # 1. What one token leaves behind: the rotary key and the latent.
    heading((-0.2, 15.9), "1. cached, per token and layer")
    x = box((2.1, 13.1), f"token x\n{s['x'][0]}", "input")
    rope = box((8.6, 13.9), f"rotary key\n{Dr}, rotated", "keys")
    latent = box((8.6, 12.3), f"latent c\n{r}", "input")
    diagrams.arrow(ax, x.right_mid, rope.left_mid)
    diagrams.arrow(ax, x.right_mid, latent.left_mid)
    left, right, low, high = 6.3, 10.9, 11.45, 14.75
    ax.plot([left, right, right, left, left], [low, low, high, high, low], color=ink,
            linestyle="--", linewidth=1.2)  # fmt: skip
    diagrams.label(ax, (2.1, 11.3), f"cached: {r} + {Dr}\n= {r + Dr} numbers", fontsize=big)

    # 2. Naive: expand every head's keys and values from the latent.
    heading((-0.2, 9.4), f"2. naive:\nall {H} heads'\nkeys and values\nrebuilt")
    keys = box((8.6, 8.7), f"keys {H} × {Dk}\nW_UK c + rotary", "keys")
    box((8.6, 7.1), f"values {H} × {s['values'][1]}\nW_UV c", "values")
    diagrams.arrow(ax, (8.6, low), keys.top_mid)

    # 3. Absorbed: the queries folded into the latent's space; attend over the cache.
    heading((-0.2, 5.6), "3. absorbed: attend over the cache")
    query = box((2.1, 3.6), f"queries {H} × {s['absorbed'][1]}\nW_UK folded in", "queries")
    latent_keys = s["latent_keys"]
    cached = box((8.6, 3.6), f"keys: the cache\n{latent_keys[0]} × {latent_keys[1]}", "keys")
    diagrams.arrow(ax, query.right_mid, cached.left_mid, "scores")
    out = box((4.4, 0.6), f"weights · c: {H} × {r}\nthen W_UV", "output", width=5.8)
    diagrams.arrow(ax, cached.bottom_mid, out.right_mid, rad=-0.3)
    diagrams.fit(ax, *bounds, margin=0.1)
    return fig
