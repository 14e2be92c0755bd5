"""attnlab.plot draws what it is given: labels, annotated values, one axes per head.

(That ``import attnlab`` alone leaves matplotlib unimported is checked in a fresh
interpreter by ``tests/test_standalone.py``.)
"""

from __future__ import annotations

import pytest
import torch
from matplotlib.figure import Figure

from attnlab import examples, plot
from attnlab.plot import (
    plot_attention,
    plot_heads,
    plot_mask,
    plot_softmax_scaling,
    plot_variance_vs_dim,
)

WORDS = examples.your_journey().words


def journey_weights() -> torch.Tensor:
    inputs = examples.your_journey().inputs
    return torch.softmax(inputs @ inputs.transpose(-2, -1), dim=-1)  # (6, 6)


def tick_labels(axis_ticks: list[object]) -> list[str]:
    return [tick.get_text() for tick in axis_ticks]  # type: ignore[attr-defined]


def test_attention_heatmap_is_labelled_with_the_tokens() -> None:
    fig = plot_attention(journey_weights(), WORDS, WORDS, title="weights")
    heatmap, _colorbar = fig.axes
    assert tick_labels(heatmap.get_xticklabels()) == list(WORDS)
    assert tick_labels(heatmap.get_yticklabels()) == list(WORDS)
    assert heatmap.get_title() == "weights"
    assert (heatmap.get_xlabel(), heatmap.get_ylabel()) == ("key", "query")


def test_annotations_are_the_weights_rounded_row_by_row() -> None:
    weights = journey_weights()
    fig = plot_attention(weights, WORDS, WORDS, decimals=3)
    texts = [text.get_text() for text in fig.axes[0].texts]
    assert texts == [f"{value:.3f}" for value in weights.flatten().tolist()]
    assert texts[0] == f"{weights[0, 0].item():.3f}"


def test_annotate_false_writes_no_values_and_default_labels_are_one_based() -> None:
    fig = plot_attention(torch.rand(2, 3), annotate=False, colorbar=False)
    (heatmap,) = fig.axes
    assert len(heatmap.texts) == 0
    assert tick_labels(heatmap.get_xticklabels()) == ["1", "2", "3"]
    assert tick_labels(heatmap.get_yticklabels()) == ["1", "2"]


def test_plot_into_given_axes_returns_its_figure() -> None:
    fig = Figure()
    left, right = fig.subplots(1, 2)
    assert plot_attention(torch.rand(3, 3), ax=right, colorbar=False) is fig
    assert len(right.texts) == 9 and len(left.texts) == 0


def test_mask_is_drawn_with_its_polarity_on_the_colorbar() -> None:
    fig = plot_mask(torch.ones(4, 4, dtype=torch.bool).tril(), ["a", "b", "c", "d"])
    heatmap, colorbar = fig.axes
    assert tick_labels(heatmap.get_xticklabels()) == ["a", "b", "c", "d"]
    labels = tick_labels(colorbar.get_yticklabels())
    assert labels == ["masked\n(False)", "may attend\n(True)"]
    image = heatmap.get_images()[0].get_array()
    assert image.tolist() == torch.ones(4, 4).tril().tolist()


def test_heads_get_one_axes_each_plus_a_shared_colorbar() -> None:
    weights = torch.softmax(torch.randn(3, 4, 5), dim=-1)  # (H, L, S)
    fig = plot_heads(weights, ["q1", "q2", "q3", "q4"], list("abcde"), annotate=True)
    assert len(fig.axes) == 3 + 1
    assert [ax.get_title() for ax in fig.axes[:3]] == ["head 1", "head 2", "head 3"]
    for h, ax in enumerate(fig.axes[:3]):
        assert [t.get_text() for t in ax.texts] == [f"{v:.2f}" for v in weights[h].flatten()]
        assert tick_labels(ax.get_xticklabels()) == list("abcde")


def test_softmax_scaling_draws_one_bar_per_score_and_factor() -> None:
    scores = torch.tensor([0.1, -0.2, 0.3, -0.2, 0.5])
    fig = plot_softmax_scaling(scores, [1, 8])
    (ax,) = fig.axes
    heights = [patch.get_height() for patch in ax.patches]
    assert len(heights) == 10
    expected = torch.cat([torch.softmax(scores, 0), torch.softmax(8 * scores, 0)])
    assert heights == pytest.approx(expected.tolist())
    peaks = [text.get_text() for text in ax.texts]
    assert peaks == [f"{expected[:5].max():.2f}", f"{expected[5:].max():.2f}"]


def test_variance_plot_has_both_series_and_references() -> None:
    fig = plot_variance_vs_dim([2, 4, 8], [2.1, 3.9, 8.2], [1.0, 0.98, 1.02])
    (ax,) = fig.axes
    lines = {line.get_label(): line.get_ydata().tolist() for line in ax.get_lines()}
    assert lines["q · k"] == [2.1, 3.9, 8.2]
    assert lines["q · k / √d"] == [1.0, 0.98, 1.02]
    assert {"y = d", "y = 1"} <= lines.keys()


def test_loss_curve_is_logarithmic_with_one_point_per_step() -> None:
    fig = plot.plot_loss([2.0, 1.0, 0.5])
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert list(ax.lines[0].get_xdata()) == [1, 2, 3]
    with pytest.raises(ValueError, match="loss must hold at least one value"):
        plot.plot_loss([])
