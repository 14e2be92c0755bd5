"""The live model's kernel threads (docs/assets/javascripts/live/threads.js) under Node.

Node's test runner (tests/js/threads.test.mjs) runs the page's engine on one thread and
on kernel threads (Node's worker_threads running the site's kernel-thread.js over one
shared WebAssembly memory) and checks the two forward passes equal bit for bit, every
attention map included: on SmolLM2 (2 threads, the page's split sizes) and, with every
product split across 3 threads, on random Llama weights of every tensor type the page
reads (row shares that 4 does not divide, the rotary rows' reordering) and on the tiny
Gemma 3 and Qwen3.5 files (Gated DeltaNet projections). Also: a thread that never
answers leaves the kernels on one thread, saying so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_node_tests

HERE = Path(__file__).resolve().parent


def test_threaded_forward_equals_one_thread(tmp_path: Path) -> None:
    """``node --test tests/js/threads.test.mjs`` passes."""
    pytest.importorskip("gguf", reason="the llm extra is not installed")
    from attnlab.llama import smollm2_path
    from tests.llama.family_files import write_gemma3_gguf, write_qwen35_gguf
    from tests.llama.random_gguf import write_random_gguf

    files = [
        write_random_gguf(tmp_path / "llama.gguf", "llama", seed=3, tied=False),
        write_gemma3_gguf(tmp_path / "gemma3.gguf", seed=4),
        write_qwen35_gguf(tmp_path / "qwen35.gguf", seed=5),
    ]
    env = {"LIVE_GGUF": str(smollm2_path()), "THREADS_FILES": json.dumps([str(f) for f in files])}
    run_node_tests(HERE / "threads.test.mjs", env)
