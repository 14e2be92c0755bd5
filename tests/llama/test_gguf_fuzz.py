"""Broken and hostile GGUF files: each refused by name in both languages, or read right.

From one small valid Llama file (tests/llama/random_gguf.py) ``gguf_variants`` writes
each kind of variant issue 42 lists: the header, strings, arrays, type ids, ranks,
dims, element counts past 64 bits, offsets, the alignment, duplicates, tokenizer ids
and merges, NaN and infinity in weights (block scales included), config counts, and
the file cut at every section boundary. The package (``load_gguf``) and the page's
reader (Node, one process for every variant) must each refuse it with an error that
matches the variant's words (``GGUFError`` in Python; ``RangeError``/``TypeError`` on
the page), or, where harmless, read it and give the valid file's logits exactly; each
within seconds. A Hypothesis layer corrupts random bytes of the header. A duplicate
key is refused even where it would be harmless (``general.name``), as llama.cpp refuses
it: one rule, in both languages.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gguf_variants import ACCEPT, VARIANTS, Layout, number_variants
from hypothesis import given, settings
from hypothesis import strategies as st
from random_gguf import write_random_gguf
from support import REPO_ROOT, node_or_skip

pytest.importorskip("gguf", reason="the llm extra is not installed")

from attnlab.llama import GGUFError, load_gguf

IDS = torch.tensor([3, 17, 40, 5, 63, 21])
SECONDS = 10.0  # the most one variant may take in either reader (a loaded 2-core machine)


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Layout, torch.Tensor]:
    """The valid file, its layout and its last logits for IDS."""
    path = write_random_gguf(tmp_path_factory.mktemp("fuzz") / "valid.gguf", "llama")
    model, _ = load_gguf(path)
    return path, Layout.parse(path.read_bytes()), model(IDS)[0, -1]


@pytest.fixture(scope="module")
def variants(valid: tuple[Path, Layout, torch.Tensor]) -> dict[str, tuple[Path, str]]:
    """Every variant written beside the valid file: name -> (path, expected outcome)."""
    path, layout, _ = valid
    found = {}
    for i, (name, (make, expected)) in enumerate({**VARIANTS, **number_variants(layout)}.items()):
        variant = path.parent / f"variant-{i}.gguf"
        variant.write_bytes(make(layout))
        found[name] = (variant, expected)
    return found


class HangError(Exception):
    """A reader ran past its time."""


def python_outcome(path: Path) -> tuple[str, Any, float]:
    """("refused", message) / ("accepted", last logits) / ("crashed", error), and seconds."""

    def stop(*_: object) -> None:
        raise HangError

    started = time.perf_counter()
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(int(SECONDS * 2))  # a hang fails the test instead of stopping the suite
    try:
        model, _ = load_gguf(path)
        outcome: tuple[str, Any] = ("accepted", model(IDS)[0, -1])
    except GGUFError as error:
        outcome = ("refused", str(error))
    except Exception as error:  # anything else is the failure reported
        outcome = ("crashed", f"{type(error).__name__}: {error}")
    finally:
        signal.alarm(0)
    return (*outcome, time.perf_counter() - started)


def test_every_variant_is_refused_by_name_or_read_right_by_the_package(
    valid: tuple[Path, Layout, torch.Tensor], variants: dict[str, tuple[Path, str]]
) -> None:
    """load_gguf: a GGUFError in the variant's words, or the valid logits; each in seconds."""
    expected_logits = valid[2]
    wrong = []
    for name, (path, expected) in variants.items():
        kind, result, seconds = python_outcome(path)
        if seconds > SECONDS:
            wrong.append(f"{name}: took {seconds:.1f} s")
        if expected == ACCEPT:
            if kind != "accepted" or not torch.equal(result, expected_logits):
                wrong.append(f"{name}: wanted the valid logits; got {kind} {result}")
        elif kind != "refused" or not re.search(expected, result):
            wrong.append(f"{name}: wanted a refusal matching {expected!r}; got {kind}: {result}")
    assert wrong == [], "\n".join(wrong)


def node_outcomes(valid: Path, files: dict[str, Path]) -> dict[str, Any]:
    """The page's reader (tests/js/gguf_fuzz.mjs) on every file, in one Node process."""
    job = valid.parent / "fuzz-job.json"
    cases = [{"name": name, "file": str(path)} for name, path in files.items()]
    job.write_text(json.dumps({"valid": str(valid), "ids": IDS.tolist(), "variants": cases}))
    result = subprocess.run(
        [node_or_skip(), str(REPO_ROOT / "tests" / "js" / "gguf_fuzz.mjs")],
        env={"GGUF_FUZZ": str(job), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    outcome: dict[str, Any] = json.loads(result.stdout)
    return outcome


def test_every_variant_is_refused_by_name_or_read_right_by_the_page(
    valid: tuple[Path, Layout, torch.Tensor], variants: dict[str, tuple[Path, str]]
) -> None:
    """The page's Engine: an Error in the same words, or the valid logits; its model kept."""
    outcome = node_outcomes(valid[0], {name: path for name, (path, _) in variants.items()})
    assert outcome["before"] == outcome["after"]  # the model in use answers as before
    np.testing.assert_allclose(outcome["before"], valid[2].numpy(), atol=1e-3)
    wrong = []
    for entry in outcome["results"]:
        name, expected = entry["name"], variants[entry["name"]][1]
        if entry["ms"] > SECONDS * 1000:
            wrong.append(f"{name}: took {entry['ms']:.0f} ms")
        error = entry.get("error")
        if expected == ACCEPT:
            if error is not None or entry["logits"] != outcome["before"]:
                wrong.append(f"{name}: wanted the valid logits; got {error}")
        elif not (error and re.match(r"(Range|Type)Error: ", error) and re.search(expected, error)):
            wrong.append(f"{name}: wanted a refusal matching {expected!r}; got {error}")
    assert wrong == [], "\n".join(wrong)


def corrupted(layout: Layout, changes: list[tuple[int, int]]) -> bytes:
    """The valid file with byte ``at`` set to ``value`` for each ``(at, value)``."""
    raw = bytearray(layout.build())
    for at, value in changes:
        raw[at] = value
    return bytes(raw)


def header_changes(seed: int, count: int, header: int) -> Iterator[list[tuple[int, int]]]:
    """``count`` random sets of one to four byte changes inside the header."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n = int(rng.integers(1, 5))
        places, values = rng.integers(0, header, n).tolist(), rng.integers(0, 256, n).tolist()
        yield list(zip(places, values, strict=True))


def same_reading(path: Path, valid: Path) -> bool:
    """Whether ``path`` states the valid file's model: its config and tensor entries."""
    from attnlab.llama import open_gguf, read_gguf

    return bool(
        read_gguf(path)[0] == read_gguf(valid)[0]
        and open_gguf(path).tensors == open_gguf(valid).tensors
    )


@settings(max_examples=30, deadline=timedelta(seconds=2 * SECONDS), derandomize=True)
@given(data=st.data())
def test_random_header_bytes_are_refused_or_answer_as_before(
    valid: tuple[Path, Layout, torch.Tensor], tmp_path_factory: pytest.TempPathFactory, data: Any
) -> None:
    """Up to four bytes of the header set at random: a GGUFError, or finite logits, the
    valid ones wherever the file still states the same model (config and tensors)."""
    path, layout, expected = valid
    header = layout.boundaries["padding"]
    at = st.integers(0, header - 1)
    changes = data.draw(st.lists(st.tuples(at, st.integers(0, 255)), min_size=1, max_size=4))
    variant = tmp_path_factory.mktemp("header") / "variant.gguf"
    variant.write_bytes(corrupted(layout, changes))
    kind, result, _ = python_outcome(variant)
    assert kind in ("refused", "accepted"), result
    if kind == "accepted":
        assert bool(torch.isfinite(result).all())
        if same_reading(variant, path):
            assert torch.equal(result, expected)


def test_random_header_bytes_on_the_page_as_in_the_package(
    valid: tuple[Path, Layout, torch.Tensor], tmp_path: Path
) -> None:
    """40 random header corruptions through the page's reader (one Node process): each
    refused with a RangeError/TypeError or read with finite logits, as the package does."""
    path, layout, _ = valid
    files = {}
    for i, changes in enumerate(header_changes(7, 40, layout.boundaries["padding"])):
        files[str(changes)] = tmp_path / f"random-{i}.gguf"
        files[str(changes)].write_bytes(corrupted(layout, changes))
    outcome = node_outcomes(path, files)
    assert outcome["before"] == outcome["after"]
    wrong = []
    for entry in outcome["results"]:
        kind, result, _ = python_outcome(files[entry["name"]])
        error = entry.get("error")
        if error is not None and not re.match(r"(Range|Type)Error: ", error):
            wrong.append(f"{entry['name']}: {error}")
        if error is None and not np.isfinite(entry["logits"]).all():
            wrong.append(f"{entry['name']}: accepted with logits that are not finite")
        if (error is None) != (kind == "accepted"):
            wrong.append(f"{entry['name']}: the page says {error}, the package {kind} {result}")
    assert wrong == [], "\n".join(wrong)
