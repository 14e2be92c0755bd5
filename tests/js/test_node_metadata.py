"""Model files never read wrong, in both languages: the metadata cases against the page.

tests/llama/metadata_cases.py writes small GGUF files that differ from a good one in one
metadata key each (no BOS/EOS ids, rotary scaling of each kind, partial rotary, a key a
family refuses, ...), with the refusal each must get (a part of its message) or, for a
file that loads, the transformers ``rope_scaling`` it stands for. Here the package reads
each (``load_gguf``: its config's ``to_dict()`` or its error's message); Node's test runner
(tests/js/metadata.test.mjs) reads the same files with the page's family reader and
checks it gives the same config, field for field, or a refusal with the same words.
One Node process for every case.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_node_tests

HERE = Path(__file__).resolve().parent


def package_answers(folder: Path) -> list[dict[str, object]]:
    """Per case: the package's config (to_dict()) or its refusal's message."""
    pytest.importorskip("gguf", reason="the llm extra is not installed")
    from attnlab.llama import load_gguf
    from tests.llama.metadata_cases import metadata_cases

    answers = []
    for case in metadata_cases(folder):
        try:
            model, _ = load_gguf(case.path)
        except (ValueError, TypeError) as error:  # GGUFError is a ValueError
            assert case.refusal is not None, f"{case.name}: refused by the package: {error}"
            assert case.refusal in str(error), f"{case.name}: {error}"
            answers.append(
                {
                    "name": case.name,
                    "file": str(case.path),
                    "refusal": str(error),
                    "expected": case.refusal,
                }
            )
            continue
        assert case.refusal is None, f"{case.name}: loaded by the package, should be refused"
        config = model.config.to_dict()
        answers.append({"name": case.name, "file": str(case.path), "config": config})
    return answers


def test_page_reads_every_metadata_case_as_the_package(tmp_path: Path) -> None:
    """``node --test tests/js/metadata.test.mjs``: the same config or the same refusal."""
    reference = tmp_path / "metadata.json"
    reference.write_text(json.dumps({"cases": package_answers(tmp_path)}), encoding="utf-8")
    run_node_tests(HERE / "metadata.test.mjs", {"METADATA_REFERENCE": str(reference)})
