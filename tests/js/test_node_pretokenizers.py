"""The page's tokenizers of other families against attnlab.llama's tokenizer.

SmolLM2's vocabulary and merges with the pre-tokeniser names of Llama 3 (``llama-bpe``),
Qwen2 (``qwen2``) and GPT-2 (``gpt-2``): the Python tokenizer's ids (itself tested against
transformers' GGUF tokenizer in tests/llama/test_llama_gguf_tokenizers.py) are what
tests/js/pretokenizers.test.mjs expects from the page's tokenizer on varied text. And a
SentencePiece vocabulary (TinyLlama's kind; tests/llama/random_gguf.py): the same ids and
text back in the page (live/sentencepiece.js) as in the package.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from support import run_node_tests

HERE = Path(__file__).resolve().parent
PRES = ("llama-bpe", "qwen2", "gpt-2")
# contractions in any case (and the long s, which folds to s), digit runs, every kind
# of line break and Unicode space, punctuation runs before newlines, non-Latin scripts
TEXTS = [
    "The capital of France is",
    "I'm sure you'll see THEY'VE left; WE'RE done, it'ſ DON'T 'Sounds it'ſtill I'Ll",
    "a 1, 22, 333, 4444 and 1234567 or 3.14159",
    "x = 12345 + 3.14\n\tdef f(a, b):\r\n        return a*b  \n\n",
    "Héllo wörld — naïve café, 東京タワー 😀 ٣٤ ¼ Ⅻ",
    "nbsp\u00a0here,\u2003em\u3000ideographic \u2028line\u2029para",
    "!!!\n\n???\r\n... ;;\n  end   ",
    "<|im_start|>user\nHi!<|im_end|>\n",
    # combining marks (qwen35 keeps them inside words)
    "e\u0301cole nai\u0308ve\u0301x, \u0915\u093f\u0924\u093e\u092c 1\u0301 !\u0301?",
]


def reference_data() -> list[dict[str, object]]:
    """The Python tokenizer's ids and words (texts without special tokens) per
    pre-tokeniser and text."""
    gguf = pytest.importorskip("gguf", reason="the llm extra is not installed")
    from attnlab.llama import Tokenizer, smollm2_path
    from attnlab.llama.tokenizer import PRE_TOKENIZERS

    fields = gguf.GGUFReader(str(smollm2_path())).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    merges = fields["tokenizer.ggml.merges"].contents()
    types = fields["tokenizer.ggml.token_type"].contents()
    special = [i for i, kind in enumerate(types) if kind == 3]
    cases = []
    for pre in PRES + tuple(pre for pre in ("qwen35",) if pre in PRE_TOKENIZERS):
        tokenizer = Tokenizer(tokens, merges, special, 1, 2, pre=pre)
        split = tokenizer._backend.pre_tokenizer.pre_tokenize_str  # words, byte-spelled
        for text in TEXTS:
            pieces = [] if "<|" in text else [word for word, _ in split(text)]
            cases.append({"pre": pre, "text": text, "ids": tokenizer.encode(text), "words": pieces})
    return cases


def sentencepiece_reference(folder: Path) -> dict[str, object]:
    """A SentencePiece file (TinyLlama's kind) and the Python tokenizer's ids and text
    for varied texts, and the text of every id alone (as the page shows tokens)."""
    gguf = pytest.importorskip("gguf", reason="the llm extra is not installed")
    from attnlab.llama import Tokenizer
    from tests.llama.random_gguf import (
        SENTENCEPIECE_TEXTS,
        sentencepiece_fields,
        write_tokenizer,
    )

    path = write_tokenizer(folder / "spm.gguf", sentencepiece_fields())
    tokenizer = Tokenizer.from_gguf_reader(gguf.GGUFReader(str(path)))
    rng = random.Random(1)
    texts = SENTENCEPIECE_TEXTS + [
        "".join(rng.choice("abcdé x\n😀") for _ in range(rng.randint(1, 15))) for _ in range(40)
    ]
    cases = []
    for text in texts:
        ids = tokenizer.encode(text)
        cases.append({"text": text, "ids": ids, "decoded": tokenizer.decode(ids)})
    alone = [tokenizer.decode([i]) for i in range(tokenizer.vocab_size)]
    return {"file": str(path), "cases": cases, "alone": alone}


def test_page_pre_tokenisers_equal_the_package(tmp_path: Path) -> None:
    """``node --test tests/js/pretokenizers.test.mjs`` passes for each pre-tokeniser."""
    from attnlab.llama import smollm2_path

    reference = tmp_path / "pre.json"
    data = {"byte_level": reference_data(), "sentencepiece": sentencepiece_reference(tmp_path)}
    reference.write_text(json.dumps(data), encoding="utf-8")
    env = {"LIVE_GGUF": str(smollm2_path()), "PRE_REFERENCE": str(reference)}
    run_node_tests(HERE / "pretokenizers.test.mjs", env)
