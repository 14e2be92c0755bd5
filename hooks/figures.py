"""MkDocs hook: every figure on the site is drawn from the package at build time.

``FIGURES`` maps a figure name to a function that builds a matplotlib figure from
``attnlab`` (its examples, functions, modules and ``attnlab.plot``). Each figure is
rendered twice to SVG, once per colour scheme, with text drawn as paths (no font
needed) on a transparent background:

* ``figures/<name>-light.svg``: matplotlib's default style (dark text);
* ``figures/<name>-dark.svg``: the ``dark_background`` style (light text).

Authors write one image, on a line of its own, with an optional caption as its title::

    ![Alt text for screen readers](../figures/journey-weights.svg "One-line caption")

and the hook rewrites it to the pair that Material shows per scheme (``#only-light``
and ``#only-dark``), wrapped in ``<figure>`` with the caption. A name missing from
``FIGURES`` fails the build with the page and the name.

Renders are memoised per process, keyed by the source of ``attnlab`` and of this
hook, so ``mkdocs serve`` rebuilds after a docs edit reuse them (restart ``serve``
after editing the package: the running process keeps the package it imported).
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
import os
import posixpath
import re
import shutil
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib as mpl
import matplotlib.style
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.typing import RcKeyType
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

import attnlab
import attnlab.recall
from attnlab import examples, plot

FigureBuilder = Callable[[], Figure]
SCHEMES = {"light": "default", "dark": "dark_background"}
SVG_RC: dict[RcKeyType, Any] = {"svg.fonttype": "path", "svg.hashsalt": "attnlab", "font.size": 10}

# `![alt](<../>*figures/<name>.svg "optional caption")` alone on a line.
FIGURE_REF = re.compile(
    r'^(?P<indent>[ \t]*)!\[(?P<alt>[^\]]*)\]\((?P<prefix>(?:\.\./)*)figures/(?P<name>[^)\s"]+)'
    r'\.svg(?:\s+"(?P<caption>[^"]*)")?\)[ \t]*$',
    re.MULTILINE,
)


# --- the figures -----------------------------------------------------------------------


def _seeded(seed: int, build: Callable[[], Figure]) -> Figure:
    """Run ``build`` after ``torch.manual_seed(seed)``, leaving the global RNG as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def _side_by_side(width: float, height: float) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, list(fig.subplots(1, 2))


def embedding() -> Figure:
    """The 6 x 16 embedding of "Life is short, eat dessert first" (seed 123)."""
    sentence = examples.life_is_short()
    return plot.plot_attention(
        sentence.inputs,
        sentence.words,
        [str(i + 1) for i in range(sentence.inputs.shape[1])],
        annotate=False,
        xlabel="embedding dimension",
        ylabel="token",
        title="nn.Embedding(6, 16), seed 123",
    )


def journey_weights() -> Figure:
    """Weights of "Your journey starts with one step": softmax of the raw dot products."""
    words, inputs = examples.your_journey()
    attn_weights = attnlab.softmax(attnlab.attention_scores(inputs, inputs))  # (6, 6)
    return plot.plot_attention(attn_weights, words, words, title="softmax(inputs @ inputsᵀ)")


def dream_big_weights() -> Figure:
    """Trainable weights, ``d_out = 2``, seed 123, on "Dream big and work for it"."""

    def build() -> Figure:
        words, inputs = examples.dream_big()
        module = attnlab.SelfAttentionV1(3, 2)
        with torch.no_grad():
            queries = inputs @ module.W_query  # (6, 2)
            keys = inputs @ module.W_key  # (6, 2)
            attn_weights = attnlab.attention_weights(queries, keys)  # (6, 6), scale 1/sqrt(2)
        return plot.plot_attention(
            attn_weights, words, words, title="W_query, W_key ~ torch.rand(3, 2), seed 123"
        )

    return _seeded(123, build)


SCALING_SCORES = [0.1, -0.2, 0.3, -0.2, 0.5]


def softmax_scaling() -> Figure:
    """Softmax of five scores, as they are and multiplied by 8."""
    scores = torch.tensor(SCALING_SCORES)
    return plot.plot_softmax_scaling(
        scores, [1, 8], [f"{s:g}" for s in SCALING_SCORES], title="softmax(scores × factor)"
    )


@functools.cache
def _dot_variances() -> tuple[list[int], list[float], list[float]]:
    """Variance of ``q · k`` and ``q · k / sqrt(d)``: the scaling chapter's seeded draws."""
    generator = torch.Generator().manual_seed(123)
    dims = [1, 4, 5, 16, 64, 100, 256]
    unscaled, scaled = [], []
    for d in dims:
        q = torch.randn(10_000, d, generator=generator, dtype=torch.float64)  # (n, d)
        k = torch.randn(10_000, d, generator=generator, dtype=torch.float64)  # (n, d)
        dots = (q * k).sum(dim=-1)  # (n,)
        unscaled.append(float(dots.var()))
        scaled.append(float((dots / math.sqrt(d)).var()))
    return dims, unscaled, scaled


def variance_vs_dim() -> Figure:
    """Variance of ``q · k`` for standard-normal vectors against ``d``, before and after scaling."""
    return plot.plot_variance_vs_dim(*_dot_variances(), title="variance of a dot product")


def _illustrated_scores() -> tuple[tuple[str, ...], torch.Tensor]:
    ex = examples.illustrated()
    queries = ex.inputs @ ex.W_query  # (3, 3)
    keys = ex.inputs @ ex.W_key  # (3, 3)
    return ex.words, attnlab.attention_scores(queries, keys)  # (3, 3)


def illustrated_weights() -> Figure:
    """The illustrated walkthrough's exact (row-wise, unscaled) softmax weights."""
    words, attn_scores = _illustrated_scores()
    return plot.plot_attention(
        attnlab.softmax(attn_scores), words, words, decimals=3, title="softmax(scores), per row"
    )


def softmax_errata() -> Figure:
    """Softmax over the whole score matrix (the tutorial's bug) next to the row-wise one."""
    words, attn_scores = _illustrated_scores()
    whole = attn_scores.exp() / attn_scores.exp().sum()  # one distribution over all 9 cells
    fig, (left, right) = _side_by_side(8.0, 3.2)
    plot.plot_attention(
        whole, words, words, ax=left, decimals=3, title="whole matrix: all 9 sum to 1"
    )
    plot.plot_attention(
        attnlab.softmax(attn_scores), words, words, ax=right, decimals=3,
        title="row-wise: each row sums to 1",
    )  # fmt: skip
    return fig


def v1_vs_v2() -> Figure:
    """``SelfAttentionV2`` (seed 789) and the ``SelfAttentionV1`` built from its weights."""

    def build() -> Figure:
        words, inputs = examples.your_journey()
        v2 = attnlab.SelfAttentionV2(3, 2)
        v1 = attnlab.SelfAttentionV1.from_v2(v2)
        with torch.no_grad():
            w2 = attnlab.attention_weights(v2.W_query(inputs), v2.W_key(inputs))  # (6, 6)
            w1 = attnlab.attention_weights(inputs @ v1.W_query, inputs @ v1.W_key)  # (6, 6)
        fig, (left, right) = _side_by_side(10.0, 4.0)
        plot.plot_attention(w2, words, words, ax=left, title="SelfAttentionV2, seed 789")
        plot.plot_attention(w1, words, words, ax=right, title="SelfAttentionV1.from_v2(v2)")
        return fig

    return _seeded(789, build)


def causal_mask() -> Figure:
    """The causal mask of a six-token sentence: query i may attend to keys j <= i."""
    words = examples.your_journey().words
    return plot.plot_mask(attnlab.causal_mask(6), words, title="causal_mask(6)")


def causal_weights() -> Figure:
    """``SelfAttentionV2(3, 2)`` weights (seed 789) on "Your journey…", unmasked and causal."""

    def build() -> Figure:
        words, inputs = examples.your_journey()
        module = attnlab.SelfAttentionV2(3, 2)
        with torch.no_grad():
            queries, keys = module.W_query(inputs), module.W_key(inputs)  # (6, 2) each
            full = attnlab.attention_weights(queries, keys)  # (6, 6)
            causal = attnlab.attention_weights(queries, keys, is_causal=True)  # (6, 6)
        fig, (left, right) = _side_by_side(10.0, 4.0)
        plot.plot_attention(
            full, words, words, ax=left, vmin=0, vmax=1, colorbar=False, title="no mask"
        )
        plot.plot_attention(
            causal, words, words, ax=right, vmin=0, vmax=1, title="causal: keys j <= i only"
        )
        return fig

    return _seeded(789, build)


def multi_head() -> Figure:
    """Per-head weights of the multi-head chapter's three stacked heads (seed 123)."""

    def build() -> Figure:
        sentence = examples.life_is_short()
        inputs = sentence.inputs  # (6, 16)
        torch.rand(24, 16), torch.rand(24, 16), torch.rand(28, 16)  # the single-head draws
        W_query = torch.rand(3, 24, 16)  # (H, d_q, d)
        W_key = torch.rand(3, 24, 16)  # (H, d_k, d)
        queries = inputs @ W_query.transpose(-2, -1)  # (6, 16) @ (3, 16, 24) -> (3, 6, 24)
        keys = inputs @ W_key.transpose(-2, -1)  # (3, 6, 24)
        attn_weights = attnlab.attention_weights(queries, keys)  # (3, 6, 6), scale 1/sqrt(24)
        return plot.plot_heads(attn_weights, sentence.words)

    return _seeded(123, build)


def cross_attention() -> Figure:
    """Cross-attention weights from "Life is short…" to the 8 tokens of ``second_sequence()``."""

    def build() -> Figure:
        sentence = examples.life_is_short()
        context = examples.second_sequence()  # (S, d) = (8, 16)
        W_query, W_key = torch.rand(24, 16), torch.rand(24, 16)  # (d_q, d), (d_k, d)
        queries = sentence.inputs @ W_query.transpose(-2, -1)  # (6, 24)
        keys = context @ W_key.transpose(-2, -1)  # (8, 24)
        attn_weights = attnlab.attention_weights(queries, keys)  # (6, 8), scale 1/sqrt(24)
        return plot.plot_attention(
            attn_weights,
            sentence.words,
            [f"c{j + 1}" for j in range(8)],
            xlabel="context token (key)",
            ylabel="query token",
            title="queries from sentence 1, keys from sequence 2",
        )

    return _seeded(123, build)


def _recall_rows(batch: attnlab.recall.RecallBatch) -> list[str]:
    task = attnlab.recall.RecallTask()
    return [
        f"{task.key_name(int(q))}? -> {int(t)}"
        for q, t in zip(batch.query, batch.target, strict=True)
    ]


def recall_model() -> Figure:
    """The trained recall model answering the chapter's first example, as a lookup diagram."""
    from attnlab import recall

    _, trained, _ = recall.trained_recall_model()
    batch = recall.example_batch()
    task, real = trained.task, int(batch.present[0].sum())
    with torch.no_grad():
        logits, attn_weights = trained(batch)
    return plot.plot_retrieval(
        f"{task.key_name(int(batch.query[0]))} ?",
        [task.key_name(int(k)) for k in batch.keys[0, :real]],
        [str(int(v)) for v in batch.values[0, :real]],
        attn_weights[0, :real],
        f"answer {int(logits[0].argmax())}",
        title="trained: " + recall.describe(task, batch),
    )


def recall_loss() -> Figure:
    """Training loss of the chapter's recall model."""
    from attnlab import recall

    _, _, history = recall.trained_recall_model()
    return plot.plot_loss(history.loss, title="associative recall, seed 0")


def recall_attention() -> Figure:
    """Query attention over the slots of six held-out sequences, before and after training."""
    from attnlab import recall

    untrained, trained, _ = recall.trained_recall_model()
    batch = recall.held_out_batch(6)
    rows, slots = _recall_rows(batch), [str(j + 1) for j in range(batch.keys.shape[1])]
    fig, (left, right) = _side_by_side(11.0, 3.6)
    with torch.no_grad():
        for ax, model, title in [(left, untrained, "before training"), (right, trained, "after")]:
            plot.plot_attention(
                model(batch)[1], rows, slots, ax=ax, vmin=0, vmax=1, colorbar=ax is right,
                xlabel="slot (stored pair)", ylabel="question", title=title,
            )  # fmt: skip
    return fig


def recall_scores() -> Figure:
    """Scores between question letters and stored key letters, before and after training."""
    from attnlab import recall

    untrained, trained, _ = recall.trained_recall_model()
    letters = [trained.task.key_name(k) for k in range(trained.task.num_keys)]
    before, after = recall.key_query_scores(untrained), recall.key_query_scores(trained)
    low, high = float(min(before.min(), after.min())), float(max(before.max(), after.max()))
    fig, (left, right) = _side_by_side(11.0, 5.0)
    for ax, scores, title in [(left, before, "before training"), (right, after, "after")]:
        plot.plot_attention(
            scores, letters, letters, ax=ax, annotate=False, vmin=low, vmax=high,
            colorbar=ax is right, xlabel="stored key", ylabel="question", title=title,
        )  # fmt: skip
    return fig


def bench_time() -> Figure:
    """Forward time against T, log-log, from the benchmark's recorded results."""
    from attnlab.bench import load_results, plot_sweep

    figure: Figure = plot_sweep(load_results(), "median_ms")
    return figure


def bench_memory() -> Figure:
    """Peak extra memory against T, log-log, from the benchmark's recorded results."""
    from attnlab.bench import load_results, plot_sweep

    figure: Figure = plot_sweep(load_results(), "peak_mib")
    return figure


FIGURES: dict[str, FigureBuilder] = {
    "embedding": embedding,
    "journey-weights": journey_weights,
    "dream-big-weights": dream_big_weights,
    "softmax-scaling": softmax_scaling,
    "variance-vs-dim": variance_vs_dim,
    "illustrated-weights": illustrated_weights,
    "softmax-errata": softmax_errata,
    "v1-vs-v2": v1_vs_v2,
    "causal-mask": causal_mask,
    "causal-weights": causal_weights,
    "multi-head": multi_head,
    "cross-attention": cross_attention,
    "recall-model": recall_model,
    "recall-loss": recall_loss,
    "recall-attention": recall_attention,
    "recall-scores": recall_scores,
    "bench-time": bench_time,
    "bench-memory": bench_memory,
}


# --- rendering -------------------------------------------------------------------------


def render_svg(build: FigureBuilder, scheme: str) -> str:
    """Build a figure under the scheme's matplotlib style and return it as SVG text."""
    with matplotlib.style.context(SCHEMES[scheme]), mpl.rc_context(SVG_RC):
        fig = build()
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", transparent=True, metadata={"Date": None})
    return buffer.getvalue()


def _source_key() -> str:
    """A hash of the package's source, this hook's and the recorded benchmark data.

    A change to any of them invalidates the memo.
    """
    from attnlab.bench import DEFAULT_RESULTS_PATH

    digest = hashlib.sha256(f"matplotlib {mpl.__version__}".encode())
    sources = sorted(Path(attnlab.__file__).parent.rglob("*.py"))
    for path in [*sources, Path(__file__), Path(DEFAULT_RESULTS_PATH)]:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _memo() -> dict[tuple[str, str, str], str]:
    """A dict that outlives this module, which ``mkdocs serve`` re-imports on each build."""
    holder = sys.modules.setdefault("_attnlab_figure_memo", types.ModuleType("memo"))
    memo: dict[tuple[str, str, str], str] = holder.__dict__.setdefault("svgs", {})
    return memo


DISK_CACHE = Path(__file__).resolve().parent.parent / ".cache" / "figures"
"""Rendered SVGs survive between builds here, one subdirectory per source key."""


def rendered(name: str, scheme: str, key: str) -> str:
    """The SVG of figure ``name`` for ``scheme`` (``"light"`` or ``"dark"``), memoised.

    Memoised in memory (``mkdocs serve``) and on disk, under ``.cache/figures/<key>/``:
    a build whose sources did not change draws nothing.
    """
    memo = _memo()
    if (name, scheme, key) not in memo:
        cached = DISK_CACHE / key[:16] / f"{name}-{scheme}.svg"
        if cached.is_file():
            memo[(name, scheme, key)] = cached.read_text(encoding="utf-8")
        else:
            svg = render_svg(FIGURES[name], scheme)
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_suffix(f".{os.getpid()}.partial")
            partial.write_text(svg, encoding="utf-8")
            partial.replace(cached)  # atomic: concurrent builds never read half a file
            memo[(name, scheme, key)] = svg
    return memo[(name, scheme, key)]


def _evict_stale(key: str) -> None:
    """Remove the disk cache of every other source key."""
    if DISK_CACHE.is_dir():
        for stale in DISK_CACHE.iterdir():
            if stale.is_dir() and stale.name != key[:16]:
                shutil.rmtree(stale, ignore_errors=True)


# --- MkDocs events ---------------------------------------------------------------------


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add ``figures/<name>-light.svg`` and ``-dark.svg`` for every registered figure."""
    key = _source_key()
    _evict_stale(key)
    for name in FIGURES:
        for scheme in SCHEMES:
            content = rendered(name, scheme, key)
            files.append(File.generated(config, f"figures/{name}-{scheme}.svg", content=content))
    return files


def figure_markdown(alt: str, prefix: str, name: str, caption: str | None, indent: str = "") -> str:
    """The Markdown for one figure: the light and dark images, and the caption if any."""
    light = f"![{alt}]({prefix}figures/{name}-light.svg#only-light){{ loading=lazy }}"
    dark = f"![{alt}]({prefix}figures/{name}-dark.svg#only-dark){{ loading=lazy }}"
    lines = ['<figure markdown="span">', f"  {light}", f"  {dark}"]
    if caption:
        lines.append(f"  <figcaption>{caption}</figcaption>")
    lines.append("</figure>")
    return "\n".join(indent + line for line in lines)


def rewrite_figures(markdown: str, src_uri: str) -> str:
    """Replace each ``![alt](../figures/<name>.svg "caption")`` line in a page's Markdown.

    Raises:
        PluginError: The name is not in ``FIGURES``, or the path does not lead to
            ``figures/`` at the root of ``docs/``.
    """

    def replace(match: re.Match[str]) -> str:
        name, prefix = match["name"], match["prefix"]
        target = posixpath.normpath(posixpath.join(posixpath.dirname(src_uri), prefix, "figures"))
        if target != "figures":
            raise PluginError(
                f"{src_uri}: figure {name!r} is referenced as {prefix}figures/; "
                "the path must lead to docs/figures/ from this page"
            )
        if name not in FIGURES:
            raise PluginError(
                f"{src_uri}: unknown figure {name!r}; registered figures: {', '.join(FIGURES)}"
            )
        return figure_markdown(match["alt"], prefix, name, match["caption"], match["indent"])

    return FIGURE_REF.sub(replace, markdown)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Turn the page's figure references into light/dark image pairs."""
    return rewrite_figures(markdown, page.file.src_uri)
