"""The hooks' memo of what they compute from the package (hooks/build_cache.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hooks import build_cache


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty disk cache and an empty memory memo."""
    monkeypatch.setattr(build_cache, "DISK_CACHE", tmp_path / "build")
    monkeypatch.setitem(sys.modules, "_attnlab_build_memo", type(sys)("memo"))
    return tmp_path / "build"


def test_computes_once_per_key_and_reads_the_disk_after(cache_dir: Path) -> None:
    calls: list[str] = []

    def compute(text: str) -> str:
        calls.append(text)
        return text

    key, other = "a" * 64, "b" * 64
    assert build_cache.cached_text("x.svg", key, lambda: compute("one")) == "one"
    assert build_cache.cached_text("x.svg", key, lambda: compute("two")) == "one"
    assert calls == ["one"]
    assert (cache_dir / key[:16] / "x.svg").read_text(encoding="utf-8") == "one"
    sys.modules["_attnlab_build_memo"].__dict__.clear()  # a new process: memory is empty
    assert build_cache.cached_text("x.svg", key, lambda: compute("three")) == "one"
    assert build_cache.cached_text("x.svg", other, lambda: compute("four")) == "four"
    assert calls == ["one", "four"]
    build_cache.evict_stale(other)
    assert [path.name for path in cache_dir.iterdir()] == [other[:16]]


def test_key_follows_the_hooks_and_the_recorded_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hooks and recorded runs are read on every call (``mkdocs serve`` re-imports hooks)."""
    key = build_cache.source_key()
    assert key == build_cache.source_key()
    original = Path.read_bytes
    for name in ("figures.py", "forward.json"):

        def edited(path: Path, name: str = name) -> bytes:
            data = original(path)
            return data + b" " if path.name == name else data

        with monkeypatch.context() as patch:
            patch.setattr(Path, "read_bytes", edited)
            assert build_cache.source_key() != key, name
    assert build_cache.source_key() == key


def test_a_suite_not_yet_recorded_still_makes_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing results file keys as missing (and differs from any recorded one)."""
    key = build_cache.source_key()
    original = Path.is_file
    monkeypatch.setattr(
        Path, "is_file", lambda path: path.name != "forward.json" and original(path)
    )
    missing = build_cache.source_key()
    assert missing != key
    assert missing == build_cache.source_key()
