"""The family descriptions: one JSON file per family, the page's generated copy current.

Each family's facts live once, in ``src/attnlab/llama/families/<family>.json``;
``scripts/family_descriptions.py`` writes the page's copy
(``docs/assets/javascripts/live/families/descriptions.js``). These tests fail when that
copy is stale, when a description lacks a part the readers need, and when a GGUF key or
tensor name the package reads appears in Python source instead of a description.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from attnlab.llama.families import FAMILIES
from attnlab.llama.families.description import describe

ROOT = Path(__file__).resolve().parents[2]
FAMILY_DIR = ROOT / "src" / "attnlab" / "llama" / "families"
KEY_TYPES = {"count", "number", "token_id", "string", "count_array"}


def generator():  # type: ignore[no-untyped-def]
    """scripts/family_descriptions.py, imported by path (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location(
        "family_descriptions", ROOT / "scripts" / "family_descriptions.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_copy_of_the_descriptions_is_current() -> None:
    """descriptions.js is what the generator writes from the JSON files, byte for byte."""
    script = generator()
    assert script.TARGET.read_text(encoding="utf-8") == script.module_text(), (
        "docs/assets/javascripts/live/families/descriptions.js is stale: run "
        "python scripts/family_descriptions.py"
    )
    assert script.main(["--check"]) == 0


def test_every_family_module_has_its_description() -> None:
    """One JSON file per family module, naming the same architecture."""
    names = {path.stem for path in FAMILY_DIR.glob("*.json")}
    assert set(FAMILIES) <= names
    for name in names:
        assert json.loads((FAMILY_DIR / f"{name}.json").read_text())["general.architecture"] == name


@pytest.mark.parametrize("name", sorted(p.stem for p in FAMILY_DIR.glob("*.json")))
def test_descriptions_are_complete(name: str) -> None:
    """Every metadata row typed, every layer type with its tensors and parts, keys unique."""
    d = describe(name)
    assert d["format"] == 1
    keys = [row["key"] for row in d["metadata"]]
    assert len(keys) == len(set(keys))
    for row in d["metadata"]:
        assert row["type"] in KEY_TYPES, row
        assert row["key"].startswith(("{arch}.", "tokenizer.ggml.")), row
    for kind, rows in d["tensors"]["layer"].items():
        assert kind in d["layer"]
        assert all(row["name"].startswith("blk.{i}.") for row in rows)
        parts = {p for row in rows for p in row["part"].split(" + ")}
        assert len(parts) == sum(len(row["part"].split(" + ")) for row in rows)  # one source each


def test_no_python_source_names_a_gguf_key_or_tensor_of_a_description() -> None:
    """A key or tensor name the descriptions hold appears in no Python module of the package."""
    names = set()
    for path in FAMILY_DIR.glob("*.json"):
        d = json.loads(path.read_text())
        names |= {row["key"].removeprefix("{arch}.") for row in d["metadata"]}
        names -= {row["key"] for row in d["metadata"] if row["key"].startswith("tokenizer.")}
        for rows in [d["tensors"]["model"], *d["tensors"]["layer"].values()]:
            names |= {row["name"].removeprefix("blk.{i}.") for row in rows}
    names -= {"output.weight", "context_length", "vocab_size", "block_count"}  # common words
    for path in (ROOT / "src" / "attnlab" / "llama").rglob("*.py"):
        text = path.read_text()
        found = [n for n in names if re.search(rf"[\"'.]{re.escape(n)}[\"']", text)]
        assert found == [], f"{path.relative_to(ROOT)} names {found}: put them in the JSON"
