"""The site's figures, registered where they are drawn (not a hook itself).

A figure is a zero-argument function returning a matplotlib ``Figure``, registered
under the name that pages use (``![alt](../figures/<name>.svg "caption")``)::

    from hooks.figure_registry import figure

    @figure("journey-weights")
    def journey_weights() -> Figure: ...

    @figure("causal-row", diagram=True)  # a conceptual diagram (diagrams.py's roles)
    def causal_row() -> Figure: ...

Every ``hooks/figures_*.py`` module is imported by the figures hook
(``hooks/figures.py``, through :func:`load_figure_modules`), so a figure is listed
exactly where it is defined: ``FIGURES`` (every figure) and ``DIAGRAMS`` (the
conceptual diagrams, each drawn in the role colours of ``hooks/diagrams.py``; every
main-line chapter shows at least one) are live views of one registry and cannot drift
apart.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from matplotlib.figure import Figure

FigureBuilder = Callable[[], Figure]
Builder = TypeVar("Builder", bound=FigureBuilder)
Item = TypeVar("Item")

#: Figure names: lower-case words joined by hyphens (they become file names and URLs).
NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
#: The modules that define figures, next to this file.
MODULE_GLOB = "figures_*.py"


@dataclass(frozen=True)
class Registered:
    """One registered figure: how to build it, and whether it is a conceptual diagram."""

    name: str
    build: FigureBuilder
    diagram: bool

    @property
    def origin(self) -> str:
        """Where the builder is defined, as ``module.qualname``."""
        module = getattr(self.build, "__module__", "?")
        return f"{module}.{getattr(self.build, '__qualname__', repr(self.build))}"


_REGISTRY: dict[str, Registered] = {}


def figure(name: str, *, diagram: bool = False) -> Callable[[Builder], Builder]:
    """Register the decorated zero-argument function as the figure ``name``.

    Args:
        name: The figure's name, lower-case words joined by hyphens (``"head-split"``).
        diagram: True for a conceptual diagram drawn in the role colours of
            ``hooks/diagrams.py``.

    Returns:
        A decorator that registers the function and returns it unchanged.

    Raises:
        TypeError: ``name`` is not a string, or ``diagram`` not a bool, or the decorated
            object is not callable.
        ValueError: ``name`` is not lower-case words joined by hyphens, or another
            function is already registered under it.
    """
    if not isinstance(name, str):
        raise TypeError(f"figure(name=...) must be a str, got {type(name).__name__}")
    if not isinstance(diagram, bool):
        raise TypeError(f"figure(diagram=...) must be a bool, got {type(diagram).__name__}")
    if not NAME.fullmatch(name):
        raise ValueError(
            f"figure name {name!r} must be lower-case words joined by hyphens, e.g. 'head-split'"
        )

    def register(build: Builder) -> Builder:
        if not callable(build):
            kind = type(build).__name__
            raise TypeError(f"@figure({name!r}) must decorate a function, got {kind}")
        entry = Registered(name, build, diagram)
        existing = _REGISTRY.get(name)
        # The same definition executed again (a module imported twice) replaces itself.
        if existing is not None and existing.origin != entry.origin:
            raise ValueError(
                f"figure {name!r} is registered twice: by {existing.origin} and by {entry.origin}"
            )
        _REGISTRY[name] = entry
        return build

    return register


class _Figures(Mapping[str, FigureBuilder]):
    """Read-only view: every registered figure's name -> its builder, in registration order."""

    def __getitem__(self, name: str) -> FigureBuilder:
        return _REGISTRY[name].build

    def __iter__(self) -> Iterator[str]:
        return iter(list(_REGISTRY))

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return f"FIGURES({', '.join(_REGISTRY)})"


class _Diagrams(Set[str]):
    """Read-only view: the names of the registered conceptual diagrams."""

    def __contains__(self, name: object) -> bool:
        entry = _REGISTRY.get(name) if isinstance(name, str) else None
        return entry is not None and entry.diagram

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, entry in _REGISTRY.items() if entry.diagram])

    def __len__(self) -> int:
        return sum(entry.diagram for entry in _REGISTRY.values())

    def __repr__(self) -> str:
        return f"DIAGRAMS({', '.join(self)})"

    @classmethod
    def _from_iterable(cls, items: Iterable[Item]) -> frozenset[Item]:
        """Set operations (``&``, ``|``, ``-``) give a plain ``frozenset``."""
        return frozenset(items)


#: Every registered figure: name -> zero-argument builder of a matplotlib ``Figure``.
FIGURES: Mapping[str, FigureBuilder] = _Figures()
#: The names of the registered conceptual diagrams (a subset of ``FIGURES``).
DIAGRAMS: Set[str] = _Diagrams()


def figure_modules(directory: Path | None = None) -> list[Path]:
    """The ``figures_*.py`` modules in ``directory`` (by default, next to this file)."""
    return sorted((directory or Path(__file__).resolve().parent).glob(MODULE_GLOB))


def load_figure_modules(directory: Path | None = None) -> Mapping[str, FigureBuilder]:
    """Import (again) every ``figures_*.py`` module, registering their figures afresh.

    The registry is emptied first, so a figure removed from its module (``mkdocs serve``
    re-runs the hooks on each rebuild) is gone and a module edited is read again.

    Returns:
        ``FIGURES``, the view of what is now registered.
    """
    _REGISTRY.clear()
    for path in figure_modules(directory):
        name = f"{__package__}.{path.stem}"  # hooks.figures_llm: as the modules import each other
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:  # pragma: no cover - a .py file always loads
            raise ImportError(f"cannot import figure module {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return FIGURES
