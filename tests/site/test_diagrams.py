"""The diagram language: role colours readable in both schemes, primitives draw real values."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.style
import pytest
import torch

from attnlab import examples
from hooks import diagrams  # hooks/diagrams.py: site code, not the package


def contrast(first: str, second: str) -> float:
    high, low = sorted(
        (diagrams.relative_luminance(first), diagrams.relative_luminance(second)), reverse=True
    )
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("role", sorted(diagrams.ROLE_COLOURS))
def test_role_colour_contrasts_with_both_page_colours(role: str) -> None:
    colour = diagrams.ROLE_COLOURS[role]
    assert contrast(colour, "white") >= 3.0
    assert contrast(colour, "black") >= 3.0


def test_roles_have_distinct_colours() -> None:
    roles = ["queries", "keys", "values", "weights", "output", "input"]
    assert len({diagrams.ROLE_COLOURS[r] for r in roles}) == len(roles)


@pytest.mark.parametrize("style", ["default", "dark_background"])
def test_cell_text_contrasts_with_cell_fill(style: str) -> None:
    with matplotlib.style.context(style):
        ink = diagrams.text_colour()
        for role in diagrams.ROLE_COLOURS:
            assert contrast(ink, mpl.colors.to_hex(diagrams.tint(role))) >= 4.5, role


def test_matrix_writes_the_tensor_values() -> None:
    ex = examples.illustrated()
    _fig, ax = diagrams.canvas(4, 3)
    bounds = diagrams.matrix(ax, ex.inputs, (0, 0), role="input", title="x")
    assert bounds == diagrams.Bounds(0, 0, 4, 3)
    cells = [t.get_text() for t in ax.texts if t.get_text() != "x"]
    assert cells == [f"{v:.0f}" for v in ex.inputs.flatten().tolist()]


def test_masked_cells_hide_their_values() -> None:
    _fig, ax = diagrams.canvas(4, 1)
    scores = torch.tensor([0.5, 1.5, 2.5])
    diagrams.matrix(ax, scores, (0, 0), decimals=1, masked=torch.tensor([False, True, True]))
    assert [t.get_text() for t in ax.texts] == ["0.5"]


def test_bad_input_is_refused() -> None:
    _fig, ax = diagrams.canvas(2, 2)
    with pytest.raises(ValueError, match="role must be one of"):
        diagrams.matrix(ax, torch.ones(2), (0, 0), role="colour")
    with pytest.raises(ValueError, match=r"values must have shape .* got shape \(1, 2, 2\)"):
        diagrams.matrix(ax, torch.ones(1, 2, 2), (0, 0))
    with pytest.raises(ValueError, match="masked must have the shape"):
        diagrams.matrix(ax, torch.ones(2, 2), (0, 0), masked=torch.ones(2, dtype=torch.bool))
    with pytest.raises(TypeError):
        diagrams.matrix(ax, [1.0, 2.0], (0, 0))  # type: ignore[arg-type]


def test_retrieval_diagram_writes_each_weight_and_pair() -> None:
    weights = torch.tensor([0.1, 0.7, 0.2])
    fig = diagrams.plot_retrieval("e ?", ["a", "e", "c"], ["1", "2", "3"], weights, "answer 2")
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"0.10", "0.70", "0.20", "a", "e", "c", "1", "2", "3", "e ?", "answer 2"} <= texts
    with pytest.raises(ValueError, match=r"key_labels must have 3 entries"):
        diagrams.plot_retrieval("q", ["a"], ["1", "2", "3"], weights, "x")
    with pytest.raises(ValueError, match=r"weights must have shape \(S,\)"):
        diagrams.plot_retrieval("q", ["a"], ["1"], weights[None], "x")
