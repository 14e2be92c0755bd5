"""Item 4: every metadata case of tests/llama/metadata_cases.py read as the description rules.

A refused file is refused with a GGUFError naming the key (``MetadataCase.refusal``); a
file that loads gives transformers' logits: its ``LlamaForCausalLM`` of the unedited file
(transformers' own GGUF loader), rebuilt with the case's ``rope_parameters`` and the same
weights. The package applies the scaling the file states, as transformers applies the
same dictionary. Sequences of 40 tokens (past a yarn file's original 32).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("gguf", reason="the llm extra is not installed")
transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")

from attnlab.llama import GGUFError, load_gguf  # noqa: E402
from tests.llama.metadata_cases import MetadataCase, case_names, metadata_cases  # noqa: E402

IDS = torch.randint(0, 64, (2, 40), generator=torch.Generator().manual_seed(4))  # (B, T)


@functools.cache
def cases(folder: Path) -> list[MetadataCase]:
    """The cases' files, written once per folder."""
    return metadata_cases(folder)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A module-wide folder for the files."""
    return tmp_path_factory.mktemp("metadata")


@functools.cache
def base_model(path: Path) -> Any:
    """transformers' model of the unedited file, from its own GGUF loader (once)."""
    return transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    )


def reference(case: MetadataCase, base: Path) -> Any:
    """transformers' model with the same weights and the case's rotary scaling."""
    source = base_model(base)
    if case.rope_scaling is None:
        return source
    config = copy.deepcopy(source.config)
    config.rope_parameters = {**case.rope_scaling, "rope_theta": 10000.0}
    model = transformers.LlamaForCausalLM(config).eval()
    model.load_state_dict(source.state_dict())
    return model


@pytest.mark.parametrize(("index", "name"), list(enumerate(case_names())))
def test_metadata_case(folder: Path, index: int, name: str) -> None:
    """The case's refusal, by name; or transformers' logits under the same rotary scaling."""
    case = cases(folder)[index]
    assert case.name == name
    if case.refusal is not None:
        with pytest.raises(GGUFError) as error:
            load_gguf(case.path)
        assert case.refusal in str(error.value), (case.name, str(error.value))
        return
    model, _ = load_gguf(case.path)
    hf = reference(case, folder / "base.gguf")
    with torch.no_grad():
        expected = hf(IDS).logits
    got = model(IDS)
    assert (got - expected).abs().max() < 1e-4 * max(1.0, float(expected.abs().max())), case.name


def test_the_scaled_cases_differ_from_the_unscaled_model(folder: Path) -> None:
    """The rotary scaling is not a no-op here: each scaled case moves the logits."""
    plain = load_gguf(cases(folder)[0].path)[0](IDS)
    for case in cases(folder):
        if case.rope_scaling is not None:
            assert (load_gguf(case.path)[0](IDS) - plain).abs().max() > 1e-3, case.name
