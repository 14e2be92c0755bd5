"""The live model's JavaScript (ES modules) under Node's own test runner.

Node tests the parts that need no browser (tests/js/live.test.mjs): the GGUF reader and
its dequantisation against the ``gguf`` package, the family's config, the WebAssembly
kernels against plain JavaScript, the tokenizer against ``attnlab.llama``'s ids, the KV
cache, greedy generation against ``LlamaModel.generate`` token for token, seeded
sampling, the head scores and the input checks. Here too: the JavaScript's names and
defaults are the Python's (config fields, ``return_attention``, generation's keywords,
the head scores). The Chromium tests (tests/browser/test_browser_live.py) compare whole
forward passes in the page with ``attnlab.llama``'s model.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support import run_node_tests

HERE = Path(__file__).resolve().parent
LIVE = HERE.parent.parent / "docs" / "assets" / "javascripts" / "live"
# Prompts for greedy generation: prose, code, a chat turn, digits.
PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n",
    "1, 2, 3, 4,",
]
GREEDY_TOKENS = 12

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
        **_model_reference(),
    }


def _model_reference() -> dict[str, object]:
    """Greedy continuations, a prompt's logits, the chat prompt and the head scores."""
    import torch

    from attnlab.llama import load_smollm2
    from attnlab.llama.interpret import induction_scores, previous_token_scores, sink_scores

    model, tokenizer = load_smollm2()
    greedy = []
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = tokenizer.encode(prompt)
            out = model.generate(torch.tensor(ids), GREEDY_TOKENS)
            greedy.append({"ids": ids, "new_ids": out[len(ids) :].tolist()})
        ids = tokenizer.encode(TEXTS[0])
        logits = model(torch.tensor(ids))[0, -1]
    rows = [[1, 0, 0, 0], [0.5, 0.5, 0, 0], [0.2, 0.7, 0.1, 0], [0.1, 0.2, 0.3, 0.4]]
    maps = torch.tensor(rows).reshape(1, 1, 1, 4, 4)
    return {
        "greedy": greedy,
        "logits": {"ids": ids, "logits": logits.tolist()},
        "chat_prompt": tokenizer.chat_prompt([{"role": "user", "content": "Hi!"}]),
        "scores": {
            "sink": float(sink_scores(maps)[0, 0]),
            "previous": float(previous_token_scores(maps)[0, 0]),
            "induction": float(induction_scores(maps, 2)[0, 0]),
        },
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
    from attnlab.llama import smollm2_path

    reference = tmp_path / "reference.json"
    reference.write_text(json.dumps(reference_data()), encoding="utf-8")
    env = {"LIVE_GGUF": str(smollm2_path()), "LIVE_REFERENCE": str(reference)}
    run_node_tests(HERE / "live.test.mjs", env, timeout=240)


# What the JavaScript calls its names: the family's config defaults, and the defaults
# of forward and generate's options (read from the modules, in Node).
NAMES_JS = """
const live = process.argv[1];
const { CONFIG_DEFAULTS } = await import(live + "/families/reader.js");
const { GENERATE_DEFAULTS } = await import(live + "/generate.js");
const { LlamaModel } = await import(live + "/model.js");
const scores = await import(live + "/scores.js");
const forward = LlamaModel.prototype.forward.toString();
console.log(JSON.stringify({
  config: CONFIG_DEFAULTS,
  generate: GENERATE_DEFAULTS,
  return_attention: /return_attention = undefined/.test(forward)
    && /checkBool\\("return_attention", return_attention, false\\)/.test(forward),
  scores: Object.keys(scores).filter((name) => name.endsWith("_scores")).sort(),
}));
"""


def test_javascript_and_python_use_the_same_names_and_defaults() -> None:
    """LlamaConfig's fields and defaults, generate's keywords, return_attention=False,
    and the three head scores: the same in both languages."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    from attnlab.llama import LlamaConfig, LlamaModel, interpret

    result = subprocess.run(
        [node, "--input-type=module", "-e", NAMES_JS, str(LIVE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    js = json.loads(result.stdout)
    python_config = {f.name: f.default for f in dataclasses.fields(LlamaConfig)}
    assert js["config"] == python_config
    generate = inspect.signature(LlamaModel.generate).parameters
    assert js["generate"] == {
        name: generate[name].default
        for name in ("temperature", "top_k", "top_p", "seed", "stop_at_eos")
    }
    assert inspect.signature(LlamaModel.forward).parameters["return_attention"].default is False
    assert js["return_attention"] is True  # defaults to false in JavaScript too
    assert js["scores"] == sorted(name for name in interpret.__all__ if name.endswith("_scores"))
