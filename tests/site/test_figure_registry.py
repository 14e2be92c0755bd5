"""The figure registry (hooks/figure_registry.py): one table, filled where figures are drawn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from support import HOOKS

from hooks import figure_registry  # the module the hook and the figure modules share
from hooks import figures as figures_hook  # imports every hooks/figures_*.py module


@pytest.fixture
def registry() -> Iterator[dict[str, figure_registry.Registered]]:
    """The registry's table, restored after the test (the site's figures stay registered)."""
    table = figure_registry._REGISTRY
    saved = dict(table)
    yield table
    table.clear()
    table.update(saved)


def _blank() -> Figure:
    return Figure()


def test_hook_and_figure_modules_share_one_registry() -> None:
    assert figures_hook.FIGURES is figure_registry.FIGURES
    assert figures_hook.DIAGRAMS is figure_registry.DIAGRAMS
    modules = {f"hooks.{Path(p).stem}" for p in figure_registry.figure_modules()}
    assert {"hooks.figures_foundations", "hooks.figures_efficient"} <= modules
    origins = {entry.build.__module__ for entry in figure_registry._REGISTRY.values()}
    assert origins <= modules, "every figure comes from a hooks/figures_*.py module"


def test_diagrams_are_the_registered_diagrams() -> None:
    diagrams = set(figure_registry.DIAGRAMS)
    assert diagrams and diagrams < set(figure_registry.FIGURES)
    assert diagrams == {n for n, e in figure_registry._REGISTRY.items() if e.diagram}
    assert "head-split" in figure_registry.DIAGRAMS
    assert "journey-weights" in figure_registry.FIGURES
    assert "journey-weights" not in figure_registry.DIAGRAMS
    assert {"head-split", "nope"} & figure_registry.DIAGRAMS == {"head-split"}


def test_decorator_registers_and_returns_the_function(registry: dict[str, object]) -> None:
    decorated = figure_registry.figure("test-blank", diagram=True)(_blank)
    assert decorated is _blank
    assert figure_registry.FIGURES["test-blank"] is _blank
    assert "test-blank" in figure_registry.DIAGRAMS
    figure_registry.figure("test-blank", diagram=True)(_blank)  # the same definition again


def test_a_name_taken_by_another_function_is_refused(registry: dict[str, object]) -> None:
    figure_registry.figure("test-taken")(_blank)

    def other() -> Figure:
        return Figure()

    with pytest.raises(ValueError, match=r"figure 'test-taken' is registered twice: by .*_blank"):
        figure_registry.figure("test-taken")(other)
    assert figure_registry.FIGURES["test-taken"] is _blank


@pytest.mark.parametrize("name", ["Head-split", "head_split", "head split", "-x", "x-", ""])
def test_names_are_lower_case_words_joined_by_hyphens(name: str) -> None:
    with pytest.raises(ValueError, match="lower-case words joined by hyphens"):
        figure_registry.figure(name)


def test_wrong_types_are_refused() -> None:
    with pytest.raises(TypeError, match=r"figure\(name=\.\.\.\) must be a str, got int"):
        figure_registry.figure(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"figure\(diagram=\.\.\.\) must be a bool, got str"):
        figure_registry.figure("x", diagram="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must decorate a function, got str"):
        figure_registry.figure("x")("not a function")  # type: ignore[type-var]


def test_loading_reads_the_modules_afresh(registry: dict[str, object], tmp_path: Path) -> None:
    """A module's figures appear when it is added, and go when it is removed."""
    module = tmp_path / "figures_extra.py"
    module.write_text(
        "from hooks.figure_registry import figure\n"
        "from matplotlib.figure import Figure\n\n\n"
        '@figure("extra-one", diagram=True)\n'
        "def extra_one() -> Figure:\n"
        "    return Figure()\n",
        encoding="utf-8",
    )
    (tmp_path / "not_a_figure_module.py").write_text("raise RuntimeError\n", encoding="utf-8")
    assert list(figure_registry.load_figure_modules(tmp_path)) == ["extra-one"]
    assert set(figure_registry.DIAGRAMS) == {"extra-one"}
    module.unlink()
    assert list(figure_registry.load_figure_modules(tmp_path)) == []
    figure_registry.load_figure_modules(HOOKS)
    assert "head-split" in figure_registry.FIGURES
