"""The page's model families (docs/assets/javascripts/live/families/) against attnlab.llama.

Random GGUF files of each family (tests/llama/random_gguf.py: every supported tensor type
in each file, random block bytes; one with Llama 3.1's rotary factors) and tiny Gemma 3
and Qwen3.5 files written as llama.cpp's converter writes them (tests/llama/family_files.py:
a Gemma 3 with linear rotary scaling on its global layers too) are loaded here by
``load_gguf``; Node's test runner (tests/js/families.test.mjs) runs the page's model on
the same files and ids and checks its whole config equal to ``config.to_dict()``, its last
logits within 1e-3, every layer's attention within 1e-4 of the package's (softmax weights,
window layers zero outside the band, a Gated DeltaNet layer's implicit attention matrix),
and cached decoding equal to the full pass. One Node process for every file.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from support import run_node_tests

HERE = Path(__file__).resolve().parent
CASES = [("llama", True), ("llama", False), ("qwen2", True), ("qwen3", False)]


def config_dict(config: Any) -> dict[str, Any]:
    """The package's whole config as JSON data (``to_dict()``)."""
    if hasattr(config, "to_dict"):
        return dict(config.to_dict())
    return dataclasses.asdict(config)  # pragma: no cover - before LlamaConfig.to_dict


def reference_case(path: Path, architecture: str, seed: int, T: int) -> dict[str, object]:
    """The package's config, last logits and every layer's attention for T seeded ids."""
    from attnlab.llama import load_gguf

    model, _ = load_gguf(path)
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (T,), generator=generator)
    with torch.no_grad():
        logits, attention = model(ids, return_attention=True)
    return {
        "file": str(path),
        "architecture": architecture,
        "config": config_dict(model.config),
        "ids": ids.tolist(),
        "logits": logits[0, -1].tolist(),
        # every layer's maps one after another: (H_l, T, T) each, flattened
        "attention": torch.cat([a[0].flatten() for a in attention]).tolist(),
        "layer_heads": [a.shape[1] for a in attention],
    }


def reference_cases(folder: Path) -> list[dict[str, object]]:
    """Per file: the package's config, last logits and attention for a few ids."""
    pytest.importorskip("gguf", reason="the llm extra is not installed")
    from tests.llama.family_files import write_gemma3_gguf, write_qwen35_gguf
    from tests.llama.random_gguf import converter_factors, write_random_gguf

    files = [
        (arch, f"{arch}-{'tied' if tied else 'untied'}.gguf", {"tied": tied}, 9)
        for arch, tied in CASES
    ]  # and Llama 3.1's rotary scaling, over 300 positions (where it matters)
    llama31 = {"rope_freqs": converter_factors(32.0, 64, 10000.0), "context_length": 512}
    files.append(("llama", "llama31.gguf", llama31, 300))
    cases = []
    for seed, (arch, name, options, T) in enumerate(files):
        path = write_random_gguf(folder / name, arch, seed=seed, **options)
        cases.append(reference_case(path, arch, seed, T))
    gemma3 = write_gemma3_gguf(folder / "gemma3.gguf", seed=5)
    cases.append(reference_case(gemma3, "gemma3", 5, 13))  # longer than the window
    scaled = write_gemma3_gguf(folder / "gemma3-linear.gguf", seed=6, linear_factor=2.0)
    cases.append(reference_case(scaled, "gemma3", 6, 13))
    qwen35 = write_qwen35_gguf(folder / "qwen35.gguf", seed=7)
    cases.append(reference_case(qwen35, "qwen35", 7, 11))
    cases.append(reference_case(with_prediction_layer(qwen35), "qwen35", 7, 11))
    return cases


def with_prediction_layer(path: Path) -> Path:
    """``path`` with a multi-token-prediction block after its layers, as recent converters
    write Qwen3.5: ``block_count`` counts it, ``nextn_predict_layers`` says it is one."""
    from attnlab.llama import open_gguf
    from tests.llama.gguf_variants import UINT32, Layout

    blocks = int(open_gguf(path).metadata["qwen35.block_count"])
    layout = Layout.parse(path.read_bytes())
    layout.set("qwen35.block_count", UINT32, blocks + 1)
    layout.set("qwen35.nextn_predict_layers", UINT32, 1)
    layout.add(f"blk.{blocks}.nextn.eh_proj.weight", [128, 64], 0, bytes(128 * 64 * 4))
    for norm in ("enorm", "hnorm"):  # the tensors llama.cpp's load_block_mtp requires too
        layout.add(f"blk.{blocks}.nextn.{norm}.weight", [64], 0, bytes(64 * 4))
    mtp = path.with_name("qwen35-mtp.gguf")
    mtp.write_bytes(layout.build())
    return mtp


def frequency_cases() -> list[dict[str, object]]:
    """attnlab.rope_frequencies for each scaling a config can carry (the page's rotary.js)."""
    from attnlab import LinearScaling, Llama3Scaling, YarnScaling, rope_frequencies

    cases = []
    for dim, theta, scaling in [
        (64, 10000.0, None),
        (32, 1e6, LinearScaling(8.0)),
        (64, 10000.0, YarnScaling(4.0, 4096)),
        (128, 1e6, YarnScaling(2.5, 32768, beta_fast=16.0, beta_slow=2.0)),
        (64, 500000.0, Llama3Scaling(8.0)),
    ]:
        inv_freq, factor = rope_frequencies(dim, theta, scaling)
        as_dict = (
            None
            if scaling is None
            else {"type": type(scaling).__name__, **dataclasses.asdict(scaling)}
        )
        if as_dict is not None:
            as_dict["type"] = {
                "LinearScaling": "linear",
                "YarnScaling": "yarn",
                "Llama3Scaling": "llama3",
            }[as_dict["type"]]
        cases.append(
            {
                "dim": dim,
                "theta": theta,
                "scaling": as_dict,
                "inv_freq": inv_freq.tolist(),
                "attention_factor": factor,
            }
        )
    return cases


def test_page_families_equal_the_package(tmp_path: Path) -> None:
    """``node --test tests/js/families.test.mjs`` passes on every family's file."""
    reference = tmp_path / "families.json"
    data = {"cases": reference_cases(tmp_path), "frequencies": frequency_cases()}
    reference.write_text(json.dumps(data), encoding="utf-8")
    run_node_tests(HERE / "families.test.mjs", {"FAMILIES_REFERENCE": str(reference)})
