"""The page's model families (docs/assets/javascripts/live/families/) against attnlab.llama.

Random GGUF files of each family (tests/llama/random_gguf.py: every supported tensor type
in each file, random block bytes; one with Llama 3.1's rotary factors) are loaded here by
``load_gguf``; Node's test runner
(tests/js/families.test.mjs) runs the page's model on the same files and ids and checks
its last logits within 1e-3 and every attention weight within 1e-4 of the package's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from support import run_node_tests

HERE = Path(__file__).resolve().parent
CASES = [("llama", True), ("llama", False), ("qwen2", True), ("qwen3", False)]
CONFIG_FIELDS = ("architecture", "num_heads", "num_kv_heads", "head_dim", "vocab_size")
CONFIG_FIELDS += ("attention_bias", "qk_norm", "tie_word_embeddings")


def reference_cases(folder: Path) -> list[dict[str, object]]:
    """Per file: the package's config, last logits and attention for a few ids."""
    pytest.importorskip("gguf", reason="the llm extra is not installed")
    from attnlab.llama import load_gguf
    from tests.llama.random_gguf import converter_factors, write_random_gguf

    cases = []
    files = [
        (arch, f"{arch}-{'tied' if tied else 'untied'}.gguf", {"tied": tied}, 9)
        for arch, tied in CASES
    ]  # and Llama 3.1's rotary scaling, over 300 positions (where it matters)
    llama31 = {"rope_freqs": converter_factors(32.0, 64, 10000.0), "context_length": 512}
    files.append(("llama", "llama31.gguf", llama31, 300))
    for seed, (arch, name, options, T) in enumerate(files):
        path = write_random_gguf(folder / name, arch, seed=seed, **options)
        model, _ = load_gguf(path)
        generator = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, model.config.vocab_size, (T,), generator=generator)
        logits, attention = model(ids, return_attention=True)
        cases.append(
            {
                "file": str(path),
                "architecture": arch,
                "config": {field: getattr(model.config, field) for field in CONFIG_FIELDS},
                "ids": ids.tolist(),
                "logits": logits[0, -1].tolist(),
                "attention": torch.stack(attention)[:, 0].flatten().tolist(),  # (L, H, T, S)
            }
        )
    return cases


def test_page_families_equal_the_package(tmp_path: Path) -> None:
    """``node --test tests/js/families.test.mjs`` passes on every family's file."""
    reference = tmp_path / "families.json"
    reference.write_text(json.dumps({"cases": reference_cases(tmp_path)}), encoding="utf-8")
    run_node_tests(HERE / "families.test.mjs", {"FAMILIES_REFERENCE": str(reference)})
