"""The figures of "Longer than trained": the four rope scalings, and the passkey run's loss.

Registered with ``@figure`` (``hooks/figure_registry.py``) and drawn by the figures hook.
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure
from matplotlib.patches import Circle, Wedge

import attnlab
from hooks import diagrams
from hooks.figure_registry import figure

#: SmolLM2-135M's rotary: head width, base, trained length; the scalings stretch it twice.
HEAD_DIM, BASE, TRAINED, FACTOR = 64, 100000.0, 8192, 2.0


@figure("rope-past-length", diagram=True)
def rope_past_length() -> Figure:
    """A fast and a slow pair of SmolLM2's rotary, and where position 10,240 lands.

    The shaded wedge is the angles the pair swept over the 8,192 trained positions; the
    arrow, its angle at position 10,240, as trained and with the frequency halved.
    """
    trained = attnlab.rope_frequencies(HEAD_DIM, BASE).inv_freq
    halved = attnlab.rope_frequencies(HEAD_DIM, BASE, attnlab.LinearScaling(FACTOR)).inv_freq
    ink = diagrams.text_colour()
    fig, ax = diagrams.canvas(8.0, 3.4)
    radius, panel, far = 2.0, 5.6, 10240
    panels = [
        (8, trained, "pair 8"),
        (24, trained, "pair 24"),
        (24, halved, "pair 24, half speed"),
    ]
    bounds = []
    for p, (pair, inv_freq, title) in enumerate(panels):
        cx, cy = p * panel, 0.0
        swept = math.degrees(TRAINED * float(trained[pair]))  # angles covered in training
        reached = math.degrees(far * float(inv_freq[pair])) % 360
        ax.add_patch(Circle((cx, cy), radius, fill=False, edgecolor=ink, linewidth=0.8))
        ax.add_patch(
            Wedge((cx, cy), radius, 0, min(swept, 360.0), facecolor=diagrams.tint("keys"),
                  edgecolor="none")
        )  # fmt: skip
        diagrams.arrow(
            ax,
            (cx, cy),
            (
                cx + radius * math.cos(math.radians(reached)),
                cy + radius * math.sin(math.radians(reached)),
            ),
            role="queries",
        )
        turns = swept / 360
        seen = f"{turns:.0f} turns" if turns >= 10 else f"{turns:.2f} of a turn"
        diagrams.label(ax, (cx, cy + radius + 0.9), title, fontsize="large")
        diagrams.label(ax, (cx, cy - radius - 0.5), f"trained: {seen}", fontsize="large")
        diagrams.label(
            ax, (cx, cy - radius - 1.2),
            "at 10,240: seen" if reached <= swept else "at 10,240: unseen", fontsize="large",
        )  # fmt: skip
        bounds.append(
            diagrams.Bounds(
                cx - radius - 0.6, cy - radius - 1.5, cx + radius + 0.6, cy + radius + 1.2
            )
        )
    diagrams.fit(ax, *bounds, margin=0.1)
    return fig


@figure("rope-scalings")
def rope_scalings() -> Figure:
    """Each pair's frequency after each scaling, over the trained one (SmolLM2's rotary).

    Computed with ``attnlab.rope_frequencies`` for twice the trained length (dynamic
    scaling at 16,384 tokens); the pairs short of one turn over the trained length are
    shaded.
    """
    trained = attnlab.rope_frequencies(HEAD_DIM, BASE).inv_freq
    scalings: dict[str, attnlab.RopeScaling] = {
        "linear": attnlab.LinearScaling(FACTOR),
        "dynamic NTK": attnlab.DynamicNTKScaling(FACTOR, TRAINED),
        "YaRN": attnlab.YarnScaling(FACTOR, TRAINED),
        "Llama 3": attnlab.Llama3Scaling(FACTOR, original_length=TRAINED),
    }
    fig = Figure(figsize=(6.0, 3.8), layout="constrained")
    ax = fig.add_subplot()
    pairs = range(HEAD_DIM // 2)
    turns = TRAINED * trained / (2 * 3.141592653589793)
    first_slow = int((turns >= 1).sum())  # pairs are ordered fast to slow
    ax.axvspan(first_slow - 0.5, HEAD_DIM // 2 - 0.5, color="0.9", zorder=0)
    ax.text(
        first_slow, 1.04, "less than one turn\nin 8,192 positions", fontsize="medium", va="bottom"
    )
    styles = ["--", "-.", "-", ":"]
    markers = ["s", "v", "o", "^"]
    for (name, scaling), style, marker in zip(scalings.items(), styles, markers, strict=True):
        inv_freq = attnlab.rope_frequencies(HEAD_DIM, BASE, scaling, seq_len=2 * TRAINED).inv_freq
        ax.plot(pairs, inv_freq / trained, linestyle=style, marker=marker, markersize=4, label=name)
    ax.set_ylim(0.0, 1.3)
    ax.set_xlabel("pair (fast to slow)", fontsize="large")
    ax.set_ylabel("frequency / trained", fontsize="large")
    ax.tick_params(labelsize="large")
    ax.legend(loc="lower left", fontsize="medium", ncols=2)
    return fig


@figure("passkey-loss")
def passkey_loss() -> Figure:
    """SmolLM2's loss on the passkey prompt by position, for each scaling (recorded run)."""
    from attnlab.bench import load_results

    results = load_results("passkey")
    bucket = results["config"]["bucket"]
    fig = Figure(figsize=(6.0, 3.8), layout="constrained")
    ax = fig.add_subplot()
    styles = {"none": "-", "linear": "--", "dynamic": "-.", "yarn": "-", "llama3": ":"}
    markers = {"none": "o", "linear": "s", "dynamic": "v", "yarn": "D", "llama3": "^"}
    for row in results["rows"]:
        losses = row["bucket_losses"]
        starts = [(k + 0.5) * bucket for k in range(len(losses))]
        method = row["method"]
        ax.plot(starts, losses, linestyle=styles[method], marker=markers[method], label=method)
    ax.set_yscale("log")
    ax.set_ylim(0.01, 10.0)
    ax.axvline(results["trained_length"], color="grey", linewidth=1.0)
    ax.text(
        results["trained_length"] + 80, 0.012, "trained\nlength", va="bottom", fontsize="medium"
    )
    ax.set_xlabel("position (middle of each 1,024-token stretch)", fontsize="large")
    ax.set_ylabel("mean loss (nats)", fontsize="large")
    ax.tick_params(labelsize="large")
    ax.legend(loc="lower left", fontsize="medium", ncols=3)
    return fig
