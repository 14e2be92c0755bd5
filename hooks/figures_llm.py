"""The figures of "Inside today's LLMs": the KV cache, shared heads, rotary, windows.

Each figure is registered with ``@figure`` (``hooks/figure_registry.py``) and drawn
by the figures hook (``hooks/figures.py``); ``diagram=True`` marks a conceptual diagram
in the role colours of ``hooks/diagrams.py``.
"""

from __future__ import annotations

import math

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

import attnlab
from hooks import diagrams
from hooks.figure_kit import matrix_style
from hooks.figure_registry import figure


@figure("decode-time")
def decode_time() -> Figure:
    """Decoding with a KV cache against recomputing the prefix, from the recorded run."""
    from attnlab.bench import load_results
    from attnlab.plot import plot_decode

    fig: Figure = plot_decode(load_results("decode"))
    return fig


@figure("window-cost")
def window_cost() -> Figure:
    """Sliding-window against causal flash attention, time and memory, from the recorded run."""
    from attnlab.bench import load_results
    from attnlab.plot import plot_window

    fig: Figure = plot_window(load_results("window"))
    return fig


def _decoding_step() -> dict[str, torch.Tensor]:
    """The KV-cache chapter's layer and tokens: the step where position 6 meets the cache.

    ``GroupedQueryAttention(16, num_heads=4)`` (one key/value head per query head) and
    ``x`` of shape ``(1, 10, 16)`` after ``torch.manual_seed(0)``; the prompt (positions
    0-5) fills the cache, then token 6 goes through the layer's seams. Returned for
    head 0.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = attnlab.GroupedQueryAttention(d_model=16, num_heads=4)
        x = torch.randn(1, 10, 16)  # (B, T, d_model)
    cache = attnlab.KVCache()
    with torch.no_grad():
        layer(x[:, :6], cache=cache)  # the prompt: positions 0..5
        new = x[:, 6:7]  # (1, 1, d_model): the token at position 6
        queries = layer.split_heads(layer.q_proj(new))  # (1, H, 1, D)
        keys = layer.split_heads(layer.k_proj(new))  # (1, Hkv, 1, D)
        values = layer.split_heads(layer.v_proj(new))  # (1, Hkv, 1, D)
        queries, keys = layer.position_queries_keys(queries, keys, offset=len(cache))
        all_keys, all_values = cache.append(keys, values)  # (1, Hkv, 7, D) each
        q, K, V = queries[0, 0, 0], all_keys[0, 0], all_values[0, 0]  # (D,), (7, D), (7, D)
        attn_weights = attnlab.softmax(K @ q / math.sqrt(layer.head_dim))  # (7,)
    return {
        "query": q,
        "key": keys[0, 0, 0],
        "value": values[0, 0, 0],
        "keys": K,
        "values": V,
        "weights": attn_weights,
        "output": attn_weights @ V,  # (D,): head 0's context vector
    }


@figure("kv-cache-step", diagram=True)
def kv_cache_step() -> Figure:
    """One decoding step: token 6's q, k, v; the cached K and V grow by a row; q meets all."""
    step = _decoding_step()
    fig, ax = diagrams.canvas(8.0, 3.8)
    cell = (1.1, 0.7)
    S = step["keys"].shape[0]
    rows = [f"pos {i}" for i in range(S - 1)] + ["pos 6 (new)"]
    grid = matrix_style(cell)
    K = grid(
        ax,
        step["keys"],
        (0, 0),
        role="keys",
        title="cached keys K (head 0)",
        row_labels=rows,
        highlight_rows=[S - 1],
    )
    k = grid(ax, step["key"], (0, -2.0), role="keys", row_labels=["new k"])
    q = grid(
        ax,
        step["query"],
        (0, S * cell[1] + 1.5),
        role="queries",
        row_labels=["new q (head 0)"],
    )
    w = grid(ax, step["weights"].unsqueeze(-1), (8.0, 0), role="weights", title="weights")
    V = grid(
        ax,
        step["values"],
        (11.0, 0),
        role="values",
        title="cached values V",
        highlight_rows=[S - 1],
    )
    v = grid(ax, step["value"], (11.0, -2.0), role="values")
    diagrams.label(ax, (v.right + 0.2, -1.65), "new v", ha="left", fontsize="medium")
    out = grid(
        ax,
        step["output"].unsqueeze(-1),
        (V.right + 2.6, 1.05),
        role="output",
        title="output",
    )
    for small_box, big in ((k, K), (v, V)):
        diagrams.arrow(ax, small_box.top_mid, (big.left + 2.2, big.bottom))
        diagrams.label(ax, (big.left + 2.4, -0.65), "append", ha="left", fontsize="small")
    diagrams.arrow(ax, K.right_mid, w.left_mid, "q · kⱼ / √4,\nsoftmax", offset=0.15)
    diagrams.arrow(ax, q.right_mid, (6.2, K.top - 0.6), rad=-0.3)
    diagrams.arrow(ax, w.right_mid, V.left_mid)
    diagrams.arrow(ax, V.right_mid, out.left_mid, "Σ wⱼ vⱼ", offset=0.15)
    diagrams.fit(ax, K, k, q, w, V, v, out, diagrams.Bounds(-3.2, -2.0, out.right, 7.4), margin=0.3)
    return fig


@figure("gqa-sharing", diagram=True)
def gqa_sharing() -> Figure:
    """Eight query heads on 8, 2 and 1 key/value heads, and what one token leaves in the cache.

    Which key/value head each query head reads is ``repeat_kv_heads`` applied to the
    key/value heads' numbers; the cached numbers per token are counted in a real
    ``KVCache`` after one token through ``GroupedQueryAttention(64, 8, num_kv_heads)``.
    """
    fig, ax = diagrams.canvas(8.0, 4.6)
    ink = diagrams.text_colour()
    H, spacing, row_height = 8, 1.25, 3.2
    bounds = []
    for r, (name, kv_heads) in enumerate((("MHA", 8), ("GQA", 2), ("MQA", 1))):
        y0 = -r * row_height
        layer = attnlab.GroupedQueryAttention(d_model=64, num_heads=H, num_kv_heads=kv_heads)
        cache = attnlab.KVCache()
        with torch.no_grad():
            layer(torch.zeros(1, 1, 64), cache=cache)  # one token
        assert cache.keys is not None and cache.values is not None
        per_token = cache.keys.numel() + cache.values.numel()  # (1, Hkv, 1, D) twice
        heads = torch.arange(kv_heads, dtype=torch.float32).view(kv_heads, 1, 1)  # (Hkv, 1, 1)
        reads = attnlab.repeat_kv_heads(heads, H // kv_heads).flatten().int().tolist()  # (H,)
        for j in range(kv_heads):
            group = [h for h in range(H) if reads[h] == j]
            x = sum(group) / len(group) * spacing
            for dx, letter, role in ((-0.26, "K", "keys"), (0.26, "V", "values")):
                diagrams.operator(
                    ax, (x + dx, y0), f"{letter}{j}", role=role, size=(0.5, 0.7), fontsize="small"
                )
            for h in group:
                ax.plot([h * spacing, x], [y0 + 1.45, y0 + 0.38], color=ink, linewidth=1.0)
        for h in range(H):
            diagrams.operator(
                ax, (h * spacing, y0 + 1.8), f"q{h}", role="queries", size=(0.9, 0.7),
                fontsize="small",
            )  # fmt: skip
        right = (H - 1) * spacing + 0.8
        diagrams.label(
            ax, (-0.8, y0 + 0.9), f"{name}\n{kv_heads} kv head{'s' * (kv_heads > 1)}",
            ha="right", fontsize="medium",
        )  # fmt: skip
        diagrams.label(
            ax, (right, y0 + 0.9),
            f"cache per token:\n2 × {kv_heads} × {layer.head_dim} = {per_token} numbers",
            ha="left", fontsize="small",
        )  # fmt: skip
        bounds.append(diagrams.Bounds(-3.4, y0 - 0.4, right + 4.4, y0 + 2.2))
    diagrams.fit(ax, *bounds, margin=0.1)
    return fig


ROTARY_THETA = 0.3  # radians per position, as in the rotary chapter's hand example


@figure("rotary-plane", diagram=True)
def rotary_plane() -> Figure:
    """The rotary chapter's 2-D query and key, turned to three pairs of positions.

    Query ``(1, 2)`` and key ``(0.5, -1)`` turned by position times ``θ = 0.3`` rad with a
    width-2 ``RotaryEmbedding`` (one pair, frequency 1: its angle is the position passed,
    so position ``m`` is passed as ``m θ``). The same distance leaves the same angle
    between them, and so the same score.
    """
    from matplotlib.patches import Arc

    rope = attnlab.RotaryEmbedding(head_dim=2)  # one pair: turns by 1 radian per unit
    query, key = torch.tensor([[1.0, 2.0]]), torch.tensor([[0.5, -1.0]])  # (1, 2) each
    ink = diagrams.text_colour()
    fig, ax = diagrams.canvas(8.0, 3.1)
    panel, radius = 7.6, 2.5
    bounds = []
    for p, (m, n) in enumerate(((5, 3), (102, 100), (7, 7))):
        cx = p * panel + radius
        cy = 3.6
        with torch.no_grad():  # position m turns by m * theta: pass m * theta as the angle
            q = rope(query, torch.tensor([m * ROTARY_THETA]))[0]  # (2,)
            k = rope(key, torch.tensor([n * ROTARY_THETA]))[0]  # (2,)
        score = float(q @ k)
        ax.plot([cx - radius, cx + radius], [cy, cy], color=ink, linewidth=0.5, alpha=0.4)
        ax.plot([cx, cx], [cy - radius, cy + radius], color=ink, linewidth=0.5, alpha=0.4)
        diagrams.arrow(ax, (cx, cy), (cx + float(q[0]), cy + float(q[1])), role="queries")
        diagrams.arrow(ax, (cx, cy), (cx + float(k[0]), cy + float(k[1])), role="keys")
        angle_q = math.degrees(math.atan2(float(q[1]), float(q[0])))
        angle_k = math.degrees(math.atan2(float(k[1]), float(k[0])))
        between = (angle_q - angle_k) % 360  # degrees from k to q, counter-clockwise
        ax.add_patch(
            Arc(
                (cx, cy), 1.4, 1.4, theta1=angle_k, theta2=angle_k + between,
                color=diagrams.ROLE_COLOURS["weights"], linewidth=2.0,
            )
        )  # fmt: skip
        diagrams.label(ax, (cx, cy + radius + 0.5), f"query at {m}, key at {n}", fontsize="medium")
        diagrams.label(
            ax, (cx, cy - radius - 0.25), f"angle k → q: {between:.1f}°", fontsize="small"
        )
        grid = matrix_style((1.2, 0.7))
        qb = grid(ax, q, (cx - 2.9, -0.6), role="queries", row_labels=["q"])
        kb = grid(ax, k, (cx - 2.9, -1.5), role="keys", row_labels=["k"])
        sb = diagrams.matrix(
            ax,
            torch.tensor([score]),
            (cx + 0.9, -1.05),
            role="weights",
            decimals=4,
            cell=(1.6, 0.7),
            fontsize="small",
        )
        diagrams.label(ax, (sb.left - 0.1, -0.7), "q · k =", ha="right", fontsize="small")
        bounds += [
            qb,
            kb,
            sb,
            diagrams.Bounds(cx - radius, cy - radius, cx + radius, cy + radius + 0.8),
        ]
    diagrams.fit(ax, *bounds, margin=0.3)
    return fig


@figure("window-blocks", diagram=True)
def window_blocks() -> Figure:
    """Causal mask and sliding window (W = 3) on 8 tokens, with flash attention's 2 x 2 blocks.

    Tinted cells may attend (``causal_mask``, ``sliding_window_mask``); outlined and
    numbered blocks are those ``flash_visited_blocks`` lists, in the loop's order.
    """
    T, block, window = 8, 2, 3
    ink = diagrams.text_colour()
    fig, ax = diagrams.canvas(8.0, 3.8)
    cell = 0.6
    bounds = []
    panels = (
        ("causal", attnlab.causal_mask(T), True, None),
        (f"window {window}", attnlab.sliding_window_mask(T, T, window), False, window),
    )
    for p, (name, allowed, is_causal, panel_window) in enumerate(panels):
        x0 = p * (T * cell + 2.2)
        grid = diagrams.matrix(
            ax,
            allowed.float(),
            (x0, 0),
            role="weights",
            cell=(cell, cell),
            masked=~allowed,
            show_values=False,
        )
        visited = attnlab.flash_visited_blocks(
            T, T, block, is_causal=is_causal, window=panel_window
        )
        for order, (i0, j0) in enumerate(visited, start=1):
            x, y = x0 + j0 * cell, (T - i0 - block) * cell
            ax.add_patch(
                Rectangle(
                    (x, y), block * cell, block * cell, fill=False, edgecolor=ink, linewidth=2.0
                )
            )
            ax.text(x + block * cell / 2, y + block * cell / 2, str(order), ha="center",
                    va="center", color=ink, fontsize="large", fontweight="bold")  # fmt: skip
        total = (T // block) ** 2
        diagrams.label(
            ax,
            (x0 + T * cell / 2, T * cell + 0.45),
            f"{name}: {len(visited)} of {total} blocks computed",
            fontsize="medium",
        )
        bounds.append(grid)
    diagrams.label(ax, (-0.2, T * cell / 2), "query", ha="right", fontsize="small")
    diagrams.label(ax, (T * cell / 2, -0.35), "key", fontsize="small")
    diagrams.fit(ax, *bounds, diagrams.Bounds(-1.2, -0.6, bounds[-1].right, T * cell + 0.8))
    return fig
