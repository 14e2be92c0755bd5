"""The live model's JavaScript under Node's own test runner (tests/js/live.test.js).

Node tests the parts that need no browser: the GGUF reader and its dequantisation
against the ``gguf`` package, the WebAssembly kernels against plain JavaScript, the
tokenizer against ``attnlab.llama``'s ids, the pieces of the model and its input checks.
The Chromium tests (tests/browser/test_browser_live.py) compare whole forward passes
with ``attnlab.llama``'s model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

# Varied text: prose, code, digits, whitespace runs, non-ASCII, special tokens.
TEXTS = [
    "The capital of France is",
    "a  1 and  22",
    "x = 12345 + 3.14\n\tdef f(a, b):\n        return a*b  ",
    "Héllo wörld — naïve café, 東京タワー 😀 ٣٤ ¼ Ⅻ",
    "<|im_start|>user\nHi!<|im_end|>\n",
    "I'm sure you'll see they've left; WE'RE  \n\n  done",
    "   leading and trailing   ",
]


def reference_data() -> dict[str, object]:
    """attnlab.llama's tokenizer ids, and rows dequantised by the gguf package."""
    import gguf
    from gguf.quants import dequantize

    from attnlab.llama import Tokenizer, smollm2_path

    reader = gguf.GGUFReader(str(smollm2_path()))
    tokenizer = Tokenizer.from_gguf_reader(reader)
    by_name = {t.name: t for t in reader.tensors}
    rows = []
    for name, row in [
        ("token_embd.weight", 0),
        ("token_embd.weight", 49151),
        ("blk.0.attn_q.weight", 5),
        ("blk.29.ffn_down.weight", 575),
        ("blk.7.attn_norm.weight", 0),
    ]:
        tensor = by_name[name]
        stored = tensor.data.reshape(-1, tensor.data.shape[-1])  # (rows, bytes or values)
        values = dequantize(stored[row : row + 1], tensor.tensor_type).reshape(-1)
        rows.append({"name": name, "row": row, "values": [float(v) for v in values]})
    return {
        "texts": [{"text": text, "ids": tokenizer.encode(text)} for text in TEXTS],
        "rows": rows,
        "config": _config(reader),
    }


def _config(reader: object) -> dict[str, float]:
    fields = reader.fields  # type: ignore[attr-defined]

    def field(name: str) -> float:
        return float(fields[name].contents())

    return {
        "vocab_size": len(fields["tokenizer.ggml.tokens"].data),
        "d_model": field("llama.embedding_length"),
        "num_layers": field("llama.block_count"),
        "num_heads": field("llama.attention.head_count"),
        "num_kv_heads": field("llama.attention.head_count_kv"),
        "head_dim": field("llama.rope.dimension_count"),
        "ffn_dim": field("llama.feed_forward_length"),
        "rope_theta": field("llama.rope.freq_base"),
        "rms_eps": field("llama.attention.layer_norm_rms_epsilon"),
    }


def test_live_model_javascript_passes_node_tests(tmp_path: Path) -> None:
    """``node --test tests/js/`` passes (Node 20 is on the machine and in CI)."""
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is required in CI")
        pytest.skip("node is not installed")
    from attnlab.llama import smollm2_path

    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps(reference_data()), encoding="utf-8")
    env = {**os.environ, "LIVE_GGUF": str(smollm2_path()), "LIVE_REFERENCE": str(reference)}
    result = subprocess.run(
        [node, "--test", str(HERE / "live.test.js")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "# fail 0" in result.stdout
